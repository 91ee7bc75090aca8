#!/usr/bin/env bash
# One device call for issue 12 (mixed batches), inside a wall budget
# (BUDGET seconds, default 330), every stage under its own timeout and its
# log written to $OUT as it goes, so a stage that runs long still leaves the
# others' results; the summary is printed last.  Stages (argument, default
# "wtmeb"):
#   w  FlashInfer's JIT modules compiled in the background (fi_warm.py)
#      while the other stages run; the benchmark's peer pass waits for it
#   t  the full GPU sweep of the cuda_prefill engine against the CPU engine
#      (fp64) under unified, partition (serial and forked in both orders,
#      the prefill grid capped), auto
#   m  compute-sanitizer memcheck on a small quick partition sweep
#   e  attnctl gen --kind mixed --device cuda:0 --verify --trace, replayed
#      through a fresh attnd with --verify, explained (needs build-static/)
#   b  the benchmark M1-M5: attnd's schedules and stream variants and the
#      FlashInfer peers (bench_mixed.py), then calibrate_mixed.py
# Run from the staged folder (build-gpu/, build-static/, bench/gpu/, .whl/).
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
ST=${1:-wtmeb}
BUDGET=${BUDGET:-330}
B=build-gpu
S=build-static
here=$PWD
export LD_LIBRARY_PATH=$here/$B/lib:${LD_LIBRARY_PATH:-}
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws MAX_JOBS=${MAX_JOBS:-12}
[ -z "${CUDA_HOME:-}" ] && [ -d /usr/local/cuda ] && export CUDA_HOME=/usr/local/cuda
left() { echo $((BUDGET - SECONDS)); }
cap() { # the smaller of a stage's own limit and what the budget has left (minus a reserve)
    local l=$(($(left) - ${2:-5}))
    [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1))
}
T=$OUT/mixed_test.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$T" 2>&1

if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl > "$OUT/fi_warm.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
echo "pip done at ${SECONDS}s" >> "$OUT/fi_warm.log"
rm -f /tmp/fi_warm.done
if [[ $ST == *w* ]]; then
    (timeout "$(cap ${WARM_TIMEOUT:-240} 60)" python3 bench/gpu/fi_warm.py --done /tmp/fi_warm.done \
        >> "$OUT/fi_warm.log" 2>&1; echo "warm rc=$? at ${SECONDS}s" >> "$OUT/fi_warm.log") &
fi

if [[ $ST == *t* ]]; then
    echo "== sweep (full) from ${SECONDS}s" >> "$T"
    timeout "$(cap ${TEST_TIMEOUT:-100} 150)" ./$B/tests/test_prefill_engine_gpu >> "$T" 2>&1
    echo "test rc=$? at ${SECONDS}s" >> "$T"
fi
if [[ $ST == *m* ]]; then
    ATTN_GPU_QUICK=1 ATTN_GPU_CASES=${MC_CASES:-mixed-p} timeout "$(cap ${MC_TIMEOUT:-50} 100)" \
        compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
        ./$B/tests/test_prefill_engine_gpu > "$OUT/mixed_memcheck.log" 2>&1
    echo "memcheck rc=$? at ${SECONDS}s" >> "$OUT/mixed_memcheck.log"
fi
if [[ $ST == *e* ]]; then
    E=$OUT/e2e.txt
    if [ -x "$S/attnd" ] && [ -x "$S/attnctl" ]; then
        tmp=$(mktemp -d)
        cupti=$(find /usr/local/cuda* -name 'libcupti.so.13*' 2>/dev/null | head -1)
        [ -n "$cupti" ] && export ATTN_CUPTI_LIB="$cupti"
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
        kill -TERM $pid; wait $pid; echo "attnd exit $?" >> "$E"
        cat "$tmp/log" >> "$E"
        echo "== explain" >> "$E"
        "$S/attnctl" explain "$tmp/mixed.capture" >> "$E" 2>&1
        # the capture the demo replays (the integrator copies it to examples/cuda/)
        cp "$tmp/mixed.capture" "$OUT/mixed-bf16.capture"
    else
        echo "no $S/attnd or $S/attnctl: gen/replay not run" > "$E"
    fi
fi
if [[ $ST == *b* ]]; then
    L=$OUT/mixed_bench.log
    lim=$(cap ${BENCH_TIMEOUT:-300} 8)
    echo "bench from ${SECONDS}s, limit ${lim}s" > "$L"
    # the peers start once the warm-up is done or the attnd pass is over,
    # and stop (skipped, said so) 15 s before the bench's limit
    PYTHONUNBUFFERED=1 timeout "$lim" python3 bench/gpu/bench_mixed.py --out "$OUT" \
        --wait-file /tmp/fi_warm.done --wait-max $((lim - 60 > 0 ? lim - 60 : 0)) \
        --deadline $((lim - 15)) ${BENCH_ARGS:-} >> "$L" 2>&1
    echo "bench rc=$? at ${SECONDS}s" >> "$L"
    if [ -f "$OUT/mixed_bench.json" ]; then
        # from the JSON, so a bench stopped by its limit still gets its tables
        echo "== tables" >> "$L"
        python3 bench/gpu/bench_mixed.py --table "$OUT/mixed_bench.json" >> "$L" 2>&1
        echo "== calibration" >> "$L"
        python3 bench/gpu/calibrate_mixed.py "$OUT/mixed_bench.json" >> "$L" 2>&1
    fi
fi

# summary (last)
echo "==== summary (wall ${SECONDS}s of ${BUDGET}s)"
grep -E "^== |rc=|PASSED|FAILED|worst" "$T" | tail -8
grep -cE " rel=" "$T" | sed 's/^/sweep runs: /'
grep -E "streams=(prefill|decode)-first" "$T" | wc -l | sed 's/^/forked runs: /'
[ -f "$OUT/mixed_memcheck.log" ] && grep -E "ERROR SUMMARY|PASSED|FAILED|rc=" "$OUT/mixed_memcheck.log" | tail -4
[ -f "$OUT/e2e.txt" ] && grep -E "rc=|exit|mismatch|^evidence|^schedule" "$OUT/e2e.txt" | sort | uniq -c | head -12
grep -E "compiled|failed|rc=|total" "$OUT/fi_warm.log" 2>/dev/null | tail -6
if [ -f "$OUT/mixed_bench.log" ]; then
    grep -E "^bench|rc=|waited|import flashinfer|Error" "$OUT/mixed_bench.log" | head -8
    sed -n '/^== tables/,$p' "$OUT/mixed_bench.log" | grep -vE "^M[0-9A-Za-z_]+ +part_" | head -40
fi
ls -la "$OUT"
