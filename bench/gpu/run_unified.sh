#!/usr/bin/env bash
# One short device call for issue 12 item 3 (the unified launch's unit walk),
# inside a wall budget (BUDGET seconds, default 80), every stage under its own
# timeout, logs into $OUT, the summary printed last.  Run from the folder
# bench/gpu/stage_mixed.sh staged (build-gpu/, bench/gpu/):
#   t  test_prefill_engine_gpu, ATTN_GPU_QUICK (fresh seed): the quick sweep
#      against the CPU engine (fp64) under every schedule, then the unified
#      determinism batches (two runs under the least-loaded queues and one
#      under the snake walk: O and LSE compared byte for byte)
#   b  bench_mixed.py M1-M5 and M4 prefill-only: unified under the default walk,
#      the snake (ATTN_PREFILL_WALK=snake) and the queue named explicitly
#      (ATTN_PREFILL_WALK=queue, timed after the snake), no peers
#   d  test_prefill_engine_gpu's determinism batches at full size
#      (ATTN_GPU_CASES=det, no ATTN_GPU_QUICK)
#   m  compute-sanitizer memcheck on the small determinism batch
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
ST=${1:-tbm}
BUDGET=${BUDGET:-80}
B=build-gpu
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
left() { echo $((BUDGET - SECONDS)); }
cap() { # the smaller of a stage's own limit and what the budget has left
    local l=$(($(left) - 3))
    [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1))
}
L=$OUT/unified.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$L" 2>&1
if [[ $ST == *t* ]]; then
    ATTN_GPU_QUICK=1 timeout "$(cap ${TEST_TIMEOUT:-30})" ./$B/tests/test_prefill_engine_gpu \
        > "$OUT/engine_test.log" 2>&1
    echo "test rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *d* ]]; then
    ATTN_GPU_CASES=det timeout "$(cap ${DET_TIMEOUT:-30})" ./$B/tests/test_prefill_engine_gpu \
        > "$OUT/det_full.log" 2>&1
    echo "determinism (full) rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *b* ]]; then
    PYTHONUNBUFFERED=1 timeout "$(cap ${BENCH_TIMEOUT:-30})" python3 bench/gpu/bench_mixed.py \
        --out "$OUT" --peers "" --no-extras --reps ${REPS:-20} \
        --variants unified,unified_snake,unified_queue > "$OUT/bench.log" 2>&1
    echo "bench rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *m* ]] && [ "$(left)" -gt 12 ]; then
    ATTN_GPU_QUICK=1 ATTN_GPU_CASES=det-small timeout "$(cap ${MC_TIMEOUT:-25})" \
        compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 \
        ./$B/tests/test_prefill_engine_gpu > "$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$? at ${SECONDS}s" >> "$L"
fi
echo "==== summary (wall ${SECONDS}s of ${BUDGET}s)"
cat "$L"
grep -E "det-|PASSED|FAILED|worst|seed|ERROR" "$OUT/engine_test.log" 2> /dev/null | tail -12
grep -E "det-|PASSED|FAILED|ERROR" "$OUT/det_full.log" 2> /dev/null | tail -9
grep -E "ERROR SUMMARY" "$OUT/memcheck.log" 2> /dev/null | tail -1
grep -E "^ms|^M[0-9]|Error|error" "$OUT/bench.log" 2> /dev/null | head -16
