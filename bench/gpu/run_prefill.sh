#!/usr/bin/env bash
# One device call for the prefill kernel: GPU correctness sweep against the
# CPU engine, compute-sanitizer memcheck and racecheck on the quick sweep,
# then (stage b) the benchmark.  Run from a folder holding build-gpu/ (built
# here by tests/gpu/build.sh) and bench/gpu/.  Logs land in $OUT.
# Usage: bash bench/gpu/run_prefill.sh [stages]   stages: t m r b (default "tmrb")
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
ST=${1:-tmrb}
B=build-gpu
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$OUT/env.txt" 2>&1
if [[ $ST == *t* ]]; then
    timeout ${TEST_TIMEOUT:-200} ./$B/tests/test_prefill_gpu > "$OUT/prefill_test.log" 2>&1
    echo "test rc=$?" | tee -a "$OUT/prefill_test.log"
    grep -E "FAILED|worst|seed|device|PASSED" "$OUT/prefill_test.log" | head -30
fi
if [[ $ST == *m* ]]; then
    ATTN_GPU_QUICK=1 timeout ${MC_TIMEOUT:-150} compute-sanitizer --tool memcheck --leak-check no \
        ./$B/tests/test_prefill_gpu > "$OUT/prefill_memcheck.log" 2>&1
    echo "memcheck rc=$?" | tee -a "$OUT/prefill_memcheck.log"
    grep -E "ERROR SUMMARY|FAILED|PASSED" "$OUT/prefill_memcheck.log" | tail -4
fi
if [[ $ST == *r* ]]; then
    ATTN_GPU_QUICK=1 timeout ${RC_TIMEOUT:-150} compute-sanitizer --tool racecheck \
        ./$B/tests/test_prefill_gpu > "$OUT/prefill_racecheck.log" 2>&1
    echo "racecheck rc=$?" | tee -a "$OUT/prefill_racecheck.log"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|FAILED|PASSED" "$OUT/prefill_racecheck.log" | tail -4
fi
if [[ $ST == *b* ]]; then
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl > "$OUT/prefill_bench.log" 2>&1 && export PYTHONPATH=/tmp/site
    fi
    PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-300} python3 bench/gpu/bench_prefill.py --out "$OUT" \
        ${BENCH_ARGS:-} >> "$OUT/prefill_bench.log" 2>&1
    echo "bench rc=$?" >> "$OUT/prefill_bench.log"
    grep -vE "^\s+File|^\s+\^|Traceback" "$OUT/prefill_bench.log" | tail -40
fi
