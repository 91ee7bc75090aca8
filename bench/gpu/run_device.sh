#!/usr/bin/env bash
# One device call: build if needed, correctness sweep against the CPU
# engine, compute-sanitizer memcheck on a small sweep, then the benchmark
# with every peer.  Everything lands in $OUT (at most 8 files).
# Usage on the device: bash bench/gpu/run_device.sh [stages]   stages: any of
# t (tests) m (memcheck) r (racecheck) b (bench) g (graph only) h (host cost per run,
# bench/gpu/host_bench.sh) - default "tmb".
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
ST=${1:-tmb}
B=build-gpu
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv;
  nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$OUT/env.txt" 2>&1
if [ ! -x $B/tests/test_decode_gpu ] || [ ! -f $B/lib/libattn_cuda_bench.so ]; then
    tests/gpu/build.sh $B > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -30 "$OUT/build.log"; }
fi
if [[ $ST == *t* ]]; then
    timeout ${TEST_TIMEOUT:-170} ./$B/tests/test_decode_gpu > "$OUT/test.log" 2>&1; echo "test rc=$?" | tee -a "$OUT/test.log"
    grep -E "PASSED|FAILED|worst|seed|device" "$OUT/test.log" | head -20
fi
if [[ $ST == *m* ]]; then
    ATTN_GPU_QUICK=1 timeout ${MC_TIMEOUT:-120} compute-sanitizer --tool memcheck --leak-check no \
        ./$B/tests/test_decode_gpu > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?" | tee -a "$OUT/memcheck.log"
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -5
fi
if [[ $ST == *r* ]]; then
    ATTN_GPU_QUICK=1 timeout ${RC_TIMEOUT:-100} compute-sanitizer --tool racecheck \
        ./$B/tests/test_decode_gpu > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?" | tee -a "$OUT/racecheck.log"
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" "$OUT/racecheck.log" | tail -5
fi
if [[ $ST == *h* ]]; then
    timeout ${HOST_TIMEOUT:-200} bash bench/gpu/host_bench.sh $B > "$OUT/host_bench.txt" 2>&1; echo "host bench rc=$?" >> "$OUT/host_bench.txt"
    cat "$OUT/host_bench.txt"
fi
if [[ $ST == *b* || $ST == *g* ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl > "$OUT/bench.log" 2>&1 && export PYTHONPATH=/tmp/site
    ARGS=""; [[ $ST == *g* && $ST != *b* ]] && ARGS="--only none"
    PYTHONUNBUFFERED=1 timeout ${BENCH_TIMEOUT:-330} python3 bench/gpu/bench_decode.py --out "$OUT" $ARGS ${BENCH_ARGS:-} \
        >> "$OUT/bench.log" 2>&1; echo "bench rc=$?" >> "$OUT/bench.log"
    grep -vE "^\s+File|^\s+\^|Traceback" "$OUT/bench.log" | tail -40
fi
