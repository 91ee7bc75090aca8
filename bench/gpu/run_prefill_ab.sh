#!/usr/bin/env bash
# One device call for the prefill kernel's speed (issue 12, branch pfk),
# inside a wall budget (BUDGET seconds, default 120), every stage under its
# own timeout, logs in $OUT, the summary printed last.  Stages (argument,
# default "wtaps"):
#   w  FlashInfer's JIT modules compiled in the background, one process per
#      peer (fi_warm.py); at the end the finished modules' .so files are
#      packed into $OUT/fi_aot.tar.xz (the next call unpacks them into
#      FlashInfer's AOT folder, so they load without a compile)
#   t  test_prefill_gpu (quick, fresh seed) against the CPU engine in fp64
#   e  test_prefill_engine_gpu (quick, fresh seed)
#   m  compute-sanitizer memcheck on the quick test_prefill_gpu sweep
#   a  prefill_ab.py: the base library (gather) vs this build (tma, gather),
#      FlashInfer's paged prefill on the same data (AB_FI=fa2,fa3: the backends;
#      fa3 JIT-compiles unless its module is in the AOT folder)
#   x  bench_mixed.py M1-M5: this build under every schedule and the
#      FlashInfer peers, then the base library (BASE_VARIANTS, no peers)
#   p  ncu on the prefill kernel at S 8192 and S 4096 (NCU_VARS: base and
#      this build; NCU_FI=fa3 adds FlashInfer's kernel), stall reasons included
#   s  the SASS of this build's prefill kernel: local-memory (spill) lines
# Run from the staged folder (build-gpu/, base/, bench/gpu/, .whl/).
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
# every log goes to $W and comes back as one $OUT/logs.tar.xz ($OUT takes 8 files)
W=/tmp/pfk-logs
rm -rf "$W" && mkdir -p "$W"
ST=${1:-wtaps}
BUDGET=${BUDGET:-120}
B=build-gpu
here=$PWD
export LD_LIBRARY_PATH=$here/$B/lib:${LD_LIBRARY_PATH:-}
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
[ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ] && export CUDA_HOME=/usr/local/cuda
left() { echo $((BUDGET - SECONDS)); }
cap() { # the smaller of a stage's own limit and what the budget has left (minus a reserve)
    local l=$(($(left) - ${2:-5}))
    [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1))
}
L=$W/pfk.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$L" 2>&1
NEW=$B/lib/libattn_cuda_bench.so
BASE=base/libattn_cuda_bench.so
AB_VARS=${AB_VARS:-"--var base=$BASE:tma --var new=$NEW:tma --var new_gather=$NEW:gather"}

if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >> "$L" 2>&1 && export PYTHONPATH=/tmp/site
fi
if ls fi_aot*.tar.xz > /dev/null 2>&1 && [ -d /tmp/site/flashinfer ]; then
    mkdir -p /tmp/site/flashinfer/data/aot
    for a in fi_aot*.tar.xz; do tar xJf "$a" -C /tmp/site/flashinfer/data/aot; done
    echo "AOT modules: $(ls /tmp/site/flashinfer/data/aot | tr '\n' ' ')" >> "$L"
fi
wpids=""
if [[ $ST == *w* ]]; then
    for peer in ${WARM_PEERS:-part ba bpod pod}; do
        MAX_JOBS=4 timeout "$(cap ${WARM_TIMEOUT:-600} 12)" python3 bench/gpu/fi_warm.py \
            --done /tmp/fi_warm.$peer --peers $peer > "$W/fi_warm_$peer.log" 2>&1 &
        wpids="$wpids $!"
    done
    (for p in $wpids; do while kill -0 "$p" 2> /dev/null; do sleep 1; done; done
        touch /tmp/fi_warm.all) &
fi
if [[ $ST == *t* ]]; then
    echo "== test_prefill_gpu quick from ${SECONDS}s" >> "$L"
    ATTN_GPU_QUICK=1 timeout "$(cap ${TEST_TIMEOUT:-45} 60)" ./$B/tests/test_prefill_gpu \
        > "$W/prefill_test.log" 2>&1
    echo "test_prefill_gpu rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *e* ]]; then
    echo "== test_prefill_engine_gpu quick from ${SECONDS}s" >> "$L"
    ATTN_GPU_QUICK=1 timeout "$(cap ${ENGINE_TIMEOUT:-60} 50)" ./$B/tests/test_prefill_engine_gpu \
        > "$W/engine_test.log" 2>&1
    echo "test_prefill_engine_gpu rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *m* ]]; then
    # small cases: the TMA tier (page 16, d 128; page 64 = BN, d 256) and the gather (page 1)
    for c in ${MC_CASES:-prefill-causal-g4 append-d256-p64-dense append-p1-hnd-fp16}; do
        ATTN_GPU_QUICK=1 ATTN_PREFILL_CASE=$c timeout "$(cap ${MC_TIMEOUT:-30} 40)" \
            compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
            ./$B/tests/test_prefill_gpu >> "$W/memcheck.log" 2>&1
        echo "memcheck $c rc=$? at ${SECONDS}s" >> "$L"
    done
fi
if [[ $ST == *a* ]]; then
    PYTHONUNBUFFERED=1 timeout "$(cap ${AB_TIMEOUT:-60} 30)" python3 bench/gpu/prefill_ab.py \
        $AB_VARS --only "${AB_SHAPES:-causal_S8192,causal_S4096,causal_S2048,causal_S16384,append_B8_T4096_C512,causal_d64_S8192,flashmask_docs8_S8192,fewq_B32_T8192_C4}" \
        ${AB_FI:+--fi $AB_FI} --out "$W" > "$W/ab.log" 2>&1
    echo "ab rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *x* ]]; then
    X=$W/mixed_bench.log
    lim=$(cap ${MIXED_TIMEOUT:-120} 20)
    PYTHONUNBUFFERED=1 timeout "$lim" python3 bench/gpu/bench_mixed.py --lib "$NEW" --out "$W" \
        --wait-file /tmp/fi_warm.all --wait-max $((lim > 60 ? lim - 50 : 0)) --deadline $((lim - 10)) \
        --peers "${MIXED_PEERS:-part,ba,bpod,pod}" > "$X" 2>&1
    echo "mixed rc=$? at ${SECONDS}s" >> "$L"
    if [ -f "$BASE" ] && [ "$(left)" -gt 30 ]; then
        PYTHONUNBUFFERED=1 timeout "$(cap ${MIXED_BASE_TIMEOUT:-40} 20)" python3 bench/gpu/bench_mixed.py \
            --lib "$BASE" --out "$W" --json mixed_bench_base.json --peers "" \
            --variants "${BASE_VARIANTS:-partition,auto,part_pf_c66}" > "$W/mixed_base.log" 2>&1
        echo "mixed base rc=$? at ${SECONDS}s" >> "$L"
    fi
fi
if [[ $ST == *p* ]]; then
    NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
    PYTHONUNBUFFERED=1 timeout "$(cap ${NCU_TIMEOUT:-60} 15)" "$NCU" --clock-control none \
        --kernel-name "regex:${NCU_KERNELS:-attn_prefill_attend}" --launch-count ${NCU_COUNT:-6} \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats \
        --section SourceCounters --metrics "regex:smsp__pcsamp_warps_issue_stalled_.*" \
        --csv --page details --print-details all \
        python3 bench/gpu/prefill_ab.py ${NCU_VARS:-$AB_VARS} --only causal_S8192,causal_S4096 \
        --profile ${NCU_FI:+--fi $NCU_FI} > "$W/ncu.csv" 2> "$W/ncu.err"
    echo "ncu rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *s* ]]; then
    CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
    if [ -n "$CUOBJ" ]; then
        "$CUOBJ" -sass -fun '_ZN12attn_prefill19attn_prefill_attendILi128E13__nv_bfloat16EEv24attn_cuda_prefill_paramsNS_6KvMapsE' \
            "$NEW" > /tmp/sass.txt 2>&1
        { echo "lines $(wc -l < /tmp/sass.txt)"; grep -nE "STL|LDL|SETMAXNREG|HGMMA.*gsb|UTMALDG|WARPGROUP.DEPBAR|BAR.SYNC|SYNCS" /tmp/sass.txt | head -150; } \
            > "$W/sass.txt"
        xz -c /tmp/sass.txt > "$W/sass_full.txt.xz"
    else
        echo "no cuobjdump" > "$W/sass.txt"
    fi
fi
if [[ $ST == *w* && ${WARM_PACK:-1} == 1 ]]; then
    # wait for the compiles while the budget lasts, then pack what finished
    while [ "$(left)" -gt 10 ] && [ -n "$(jobs -pr)" ]; do sleep 2; done
    for p in $wpids; do kill "$p" 2> /dev/null; done
    CO=$(find /tmp/fiws -type d -name cached_ops 2> /dev/null | head -1)
    if [ -n "$CO" ] && (cd "$CO" && ls */*.so > /tmp/so.list 2> /dev/null); then
        tar cf - -C "$CO" -T /tmp/so.list | xz -T0 -6 > "$OUT/fi_aot.tar.xz"
        cat /tmp/so.list >> "$L"
    fi
    ls -la "$OUT/fi_aot.tar.xz" >> "$L" 2>&1
    cat "$W"/fi_warm_*.log 2> /dev/null | grep -E "compiled|failed" >> "$L"
fi

echo "==== summary (wall ${SECONDS}s of ${BUDGET}s)"
cat "$L" | grep -vE "^name|^NVIDIA" | head -20
grep -E "PASSED|FAILED|worst|seed=" "$W/prefill_test.log" 2> /dev/null | tail -4
grep -E "PASSED|FAILED|worst" "$W/engine_test.log" 2> /dev/null | tail -3
grep -E "ERROR SUMMARY" "$W/memcheck.log" 2> /dev/null | tail -1
sed -n '/^shape /,$p' "$W/ab.log" 2> /dev/null
grep -iE "error|Traceback" "$W/ab.log" 2> /dev/null | head -3
grep -cE "STL|LDL" "$W/sass.txt" 2> /dev/null | sed 's/^/sass local-memory lines: /'
if [ -f "$W/mixed_bench.json" ]; then
    python3 bench/gpu/bench_mixed.py --table "$W/mixed_bench.json" 2>&1 | grep -vE "^M[0-9A-Za-z_]+ +part_" | head -20
fi
if [ -f "$W/mixed_bench_base.json" ]; then
    echo "base library:"; python3 bench/gpu/bench_mixed.py --table "$W/mixed_bench_base.json" 2>&1 | head -8
fi
tail -3 "$W/ncu.err" 2> /dev/null
tar cJf "$OUT/logs.tar.xz" -C "$W" .
ls -la "$OUT"
