#!/usr/bin/env bash
# One device call for issue 12 (mixed batches), inside a wall budget
# (BUDGET seconds, default 220), every stage under its own timeout, the logs
# packed into $OUT/logs.tar.xz ($OUT takes 8 files), the summary printed
# last.  Stages (argument, default "wtmneb"):
#   w  FlashInfer's JIT modules (WARM_PEERS, default "part ba bpod pod"; the
#      AOT caches hold part and ba), compiled in the background, one per peer, while
#      the other stages run; the benchmark waits for them, and what they
#      built is packed into $OUT/fi_jit.tar.xz (unpack it into
#      <site>/flashinfer/data/aot/ next time: it then loads without a compile)
#   t  test_prefill_engine_gpu (ATTN_GPU_QUICK unless FULL=1; fresh seed):
#      the sweep against the CPU engine (fp64) under unified, partition
#      (serial, forked in both orders, the prefill grid capped at 66 and 96),
#      auto; NaN-poisoned outputs and page tails
#   m  compute-sanitizer memcheck on a small quick mixed sweep
#   n  what co-resides with the prefill kernel: the kernels' resources
#      (cuobjdump) and ncu's launch statistics (occupancy limits, CTAs per SM)
#      of one forked partition (M5, prefill grid capped at 66)
#   e  attnctl gen --kind mixed --device cuda:0 --verify, replayed through
#      attnd, and attnctl explain of the capture (its evidence levels;
#      needs build-static/)
#   b  bench_mixed.py M1-M5 in one process: attnd's schedules and stream
#      variants, the prefill kernel alone per cap, then every FlashInfer peer
# FlashInfer: a site tarball FI_SITE (bench/gpu/fi_slim_site.sh), else the
# wheels in FI_DIR (default ../.dev-fi, else .whl/), and its
# AOT caches FI_DIR/*.tar.xz, fi_jit.tar.xz (if staged) and FI_POD_AOT (a
# file: the BatchPOD / POD modules that bench/gpu/fi_pod_aot.sh compiles on
# the host) unpacked into its AOT folder.  Run from the staged folder (build-gpu/, bench/gpu/).
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
W=/tmp/mixed-logs
rm -rf "$W" && mkdir -p "$W"
ST=${1:-wtmneb}
BUDGET=${BUDGET:-220}
B=build-gpu
S=build-static
here=$PWD
export LD_LIBRARY_PATH=$here/$B/lib:${LD_LIBRARY_PATH:-}
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
[ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ] && export CUDA_HOME=/usr/local/cuda
left() { echo $((BUDGET - SECONDS)); }
cap() { # the smaller of a stage's own limit and what the budget has left (minus a reserve)
    local l=$(($(left) - ${2:-5}))
    [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1))
}
L=$W/mixed.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$L" 2>&1

FI_DIR=${FI_DIR:-../.dev-fi}
[ -d "$FI_DIR" ] || FI_DIR=.whl
if [ -n "${FI_SITE:-}" ] && [ -f "$FI_SITE" ]; then
    # an unpacked site without FlashInfer's JIT sources (cutlass, cccl): the
    # carry limit; every module the peers load must then come from the AOT
    # caches below (a missing one fails that peer, said in the log)
    mkdir -p /tmp/site && tar xJf "$FI_SITE" -C /tmp/site && export PYTHONPATH=/tmp/site &&
        echo "FlashInfer site $FI_SITE unpacked" >> "$L"
elif ls "$FI_DIR"/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$FI_DIR"/*.whl >> "$L" 2>&1 && export PYTHONPATH=/tmp/site
fi
AOT=/tmp/site/flashinfer/data/aot
if [ -d /tmp/site/flashinfer ]; then
    mkdir -p "$AOT"
    for t in "$FI_DIR"/*.tar.xz fi_jit.tar.xz ${FI_POD_AOT:-}; do
        [ -f "$t" ] && tar xJf "$t" -C "$AOT" && echo "AOT cache $t unpacked" >> "$L"
    done
    if [ -n "${FI_POD_AOT:-}" ] && [ ! -f "$FI_POD_AOT" ]; then
        echo "FI_POD_AOT=$FI_POD_AOT: no such file (BatchPOD / POD will JIT-compile)" >> "$L"
    fi
fi
echo "setup done at ${SECONDS}s" >> "$L"
wpids=""
if [[ $ST == *w* ]]; then
    for peer in ${WARM_PEERS:-part ba bpod pod}; do
        MAX_JOBS=${WARM_JOBS:-7} timeout "$(cap ${WARM_TIMEOUT:-200} 60)" python3 \
            bench/gpu/fi_warm.py --done /tmp/fi_warm.$peer --peers $peer \
            > "$W/fi_warm_$peer.log" 2>&1 &
        wpids="$wpids $!"
    done
fi
(for p in $wpids; do while kill -0 "$p" 2> /dev/null; do sleep 1; done; done
    touch /tmp/fi_warm.all) &

if [[ $ST == *t* ]]; then
    echo "== test_prefill_engine_gpu from ${SECONDS}s" >> "$L"
    quick=ATTN_GPU_QUICK=1
    [ -n "${FULL:-}" ] && quick=
    env $quick timeout "$(cap ${TEST_TIMEOUT:-90} 120)" ./$B/tests/test_prefill_engine_gpu \
        > "$W/engine_test.log" 2>&1
    echo "test rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *m* ]]; then
    ATTN_GPU_QUICK=1 ATTN_GPU_CASES=${MC_CASES:-mixed-p} timeout "$(cap ${MC_TIMEOUT:-40} 110)" \
        compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
        ./$B/tests/test_prefill_engine_gpu > "$W/memcheck.log" 2>&1
    echo "memcheck rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *n* ]]; then
    CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2> /dev/null | head -1)
    [ -n "$CUOBJ" ] && "$CUOBJ" --dump-resource-usage $B/lib/libattn_cuda_bench.so 2>&1 |
        grep -E "Function|REG" > "$W/resources.txt"
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
    PYTHONUNBUFFERED=1 timeout "$(cap ${NCU_TIMEOUT:-30} 100)" "$NCU" --clock-control none \
        --kernel-name "regex:attn_" --launch-count ${NCU_COUNT:-8} \
        --metrics launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,launch__occupancy_limit_warps,launch__occupancy_limit_blocks,sm__ctas_launched.sum,sm__ctas_launched.max,sm__ctas_launched.min,sm__warps_active.avg.pct_of_peak_sustained_active \
        --csv python3 bench/gpu/bench_mixed.py --out "$W" --json ncu_bench.json --peers "" \
        --only M5 --variants part_pf_c66 --reps 1 > "$W/ncu.csv" 2> "$W/ncu.err"
    echo "ncu rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *e* ]]; then
    E=$W/e2e.txt
    if [ -x "$S/attnd" ] && [ -x "$S/attnctl" ]; then
        tmp=$(mktemp -d)
        lim=$(cap ${E2E_TIMEOUT:-25} 90)
        timeout "$lim" "$S/attnctl" gen --out "$tmp/mixed.capture" --kind mixed --device cuda:0 \
            --dtype bf16 --head-dim 128 --page-size 16 --qo-heads 8 --kv-heads 2 --requests 6 \
            --steps 3 --layers 1 --min-len 32 --max-len 300 --pool mixed --seed 24 --verify \
            --trace > "$E" 2>&1
        echo "gen mixed rc=$?" >> "$E"
        "$S/attnd" --listen "ipc://$tmp/s" --engine auto 2> "$tmp/log" &
        pid=$!
        sleep 1
        timeout "$lim" "$S/attnctl" replay "$tmp/mixed.capture" --url "ipc://$tmp/s" --verify \
            >> "$E" 2>&1
        echo "replay mixed rc=$?" >> "$E"
        # each reply's diagnostic: backend, schedule and the evidence level
        # (issue 12 asks level 6 of the replayed mixed capture: the runs'
        # kernels observed, which gen's --trace records; without it level 4)
        timeout "$lim" "$S/attnctl" explain "$tmp/mixed.capture" > "$W/explain.txt" 2>&1
        echo "explain rc=$?" >> "$E"
        grep -E "^evidence" "$W/explain.txt" | sort | uniq -c >> "$E"
        kill -TERM $pid
        wait $pid
        echo "attnd exit $?" >> "$E"
    else
        echo "no $S/attnd or $S/attnctl: gen/replay not run" > "$E"
    fi
fi
if [[ $ST == *b* ]]; then
    X=$W/mixed_bench.log
    # the benchmark starts once the JIT compiles are over (or at BENCH_START_BY
    # seconds at the latest): compiles on every core would disturb attnd's
    # host-side launches; the peers stop (skipped, said so) 10 s before its limit
    while [ ! -f /tmp/fi_warm.all ] && [ "$SECONDS" -lt "${BENCH_START_BY:-130}" ]; do sleep 1; done
    lim=$(cap ${BENCH_TIMEOUT:-200} 12)
    echo "bench from ${SECONDS}s, limit ${lim}s (warm-up $([ -f /tmp/fi_warm.all ] && echo done || echo not done))" >> "$L"
    PYTHONUNBUFFERED=1 timeout "$lim" python3 bench/gpu/bench_mixed.py --out "$OUT" \
        --wait-file /tmp/fi_warm.all --wait-max $((lim > 60 ? lim - 50 : 0)) \
        --deadline $((lim - 10)) --peers "${PEERS:-part,ba,bpod,pod}" ${BENCH_ARGS:-} > "$X" 2>&1
    echo "bench rc=$? at ${SECONDS}s" >> "$L"
    if [ -f "$OUT/mixed_bench.json" ]; then
        python3 bench/gpu/bench_mixed.py --table "$OUT/mixed_bench.json" > "$W/tables.txt" 2>&1
        python3 bench/gpu/calibrate_mixed.py "$OUT/mixed_bench.json" > "$W/calibration.txt" 2>&1
    fi
fi
if [[ $ST == *w* ]]; then
    for p in $wpids; do kill "$p" 2> /dev/null; done
    cat "$W"/fi_warm_*.log 2> /dev/null | grep -E "compiled|failed" >> "$L"
    CO=$(find /tmp/fiws -type d -name cached_ops 2> /dev/null | head -1)
    if [ -n "$CO" ] && (cd "$CO" && ls */*.so > /tmp/so.list 2> /dev/null); then
        tar cf - -C "$CO" -T /tmp/so.list | xz -T0 -6 > "$OUT/fi_jit.tar.xz"
        sed 's/^/JIT module: /' /tmp/so.list >> "$L"
    fi
fi
tar cJf "$OUT/logs.tar.xz" -C "$W" .

echo "==== summary (wall ${SECONDS}s of ${BUDGET}s)"
grep -vE "^name|^NVIDIA|^JIT module" "$L" | head -24
grep -E "PASSED|FAILED|worst|seed|ERROR" "$W/engine_test.log" 2> /dev/null | tail -5
grep -E "ERROR SUMMARY" "$W/memcheck.log" 2> /dev/null | tail -1
[ -f "$W/ncu.csv" ] && grep -cE "attn_" "$W/ncu.csv" | sed 's/^/ncu metric lines: /'
grep -E "rc=|mismatch|evidence" "$W/e2e.txt" 2> /dev/null | head -4
grep -E "^bench|waited|import flashinfer|Error" "$W/mixed_bench.log" 2> /dev/null | head -6
head -45 "$W/tables.txt" 2> /dev/null
tail -4 "$W/calibration.txt" 2> /dev/null
ls -la "$OUT"
