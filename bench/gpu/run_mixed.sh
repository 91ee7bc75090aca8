#!/usr/bin/env bash
# One device call for issue 12 (mixed batches): the GPU sweep of the
# cuda_prefill engine under every schedule against the CPU engine (t),
# compute-sanitizer memcheck on the quick sweep (m), then the benchmark
# against the FlashInfer peers (b).  Run from a folder holding build-gpu/
# (built here by tests/gpu/build.sh), bench/gpu/ and .whl/ (the peers'
# wheels).  Logs land in $OUT.
# Usage: bash bench/gpu/run_mixed.sh [stages]   stages: t m b (default "tmb")
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
ST=${1:-tmb}
B=build-gpu
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$OUT/env.txt" 2>&1
if [[ $ST == *t* ]]; then
    timeout ${TEST_TIMEOUT:-100} ./$B/tests/test_prefill_engine_gpu > "$OUT/mixed_test.log" 2>&1
    echo "test rc=$?" | tee -a "$OUT/mixed_test.log"
    grep -E "FAILED|worst|seed|PASSED|refused" "$OUT/mixed_test.log" | head -12
fi
if [[ $ST == *m* ]]; then
    ATTN_GPU_QUICK=1 timeout ${MC_TIMEOUT:-60} compute-sanitizer --tool memcheck --leak-check no \
        ./$B/tests/test_prefill_engine_gpu > "$OUT/mixed_memcheck.log" 2>&1
    echo "memcheck rc=$?" | tee -a "$OUT/mixed_memcheck.log"
    grep -E "ERROR SUMMARY|FAILED|PASSED" "$OUT/mixed_memcheck.log" | tail -4
fi
if [[ $ST == *b* ]]; then
    if ls .whl/*.whl > /dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl > "$OUT/mixed_bench.log" 2>&1 && export PYTHONPATH=/tmp/site
    fi
    PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-200} python3 bench/gpu/bench_mixed.py --out "$OUT" \
        ${BENCH_ARGS:-} >> "$OUT/mixed_bench.log" 2>&1
    echo "bench rc=$?" >> "$OUT/mixed_bench.log"
    grep -vE "^\s+File|^\s+\^|Traceback" "$OUT/mixed_bench.log" | tail -30
fi
