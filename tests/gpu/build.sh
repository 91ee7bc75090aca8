#!/usr/bin/env bash
# Build the GPU test binary (and the benchmark library) without the daemon's
# libraries (the GPU machine has no nng/uv/msgpack): libattn_core.a +
# libattn_cuda.a + static cudart + cmocka.  Usage: tests/gpu/build.sh [BUILD]
# (default build-gpu).  Copies libcmocka.so.0 next to the binary so the
# build folder can travel to a machine without cmocka (LD_LIBRARY_PATH).
set -euo pipefail
B=${1:-build-gpu}
cd "$(dirname "$0")/../.."
make -s BUILD="$B" CUDA=1 "$B/libattn_core.a" "$B/libattn_cuda.a" "$B/obj/tests/lib/random_batch.o"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
mkdir -p "$B/tests" "$B/lib"
# one binary per test file, each on the same libraries
for t in test_decode_gpu test_prefill_engine_gpu test_prefill_gpu test_restore_gpu; do
    cc -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
        -Iinclude -I. -DATTN_WITH_CUDA=1 -I"$CUDA_HOME/include" \
        -o "$B/tests/$t" "tests/gpu/$t.c" "$B/obj/tests/lib/random_batch.o" \
        "$B/libattn_cuda.a" "$B/libattn_core.a" -L"$CUDA_HOME/lib64" -lcudart_static -lstdc++ \
        -lcmocka -lpthread -lm -ldl -lrt
done
cp -L "$(cc -print-file-name=libcmocka.so.0 2>/dev/null | grep / || echo /usr/lib/x86_64-linux-gnu/libcmocka.so.0)" "$B/lib/" 2>/dev/null || \
    cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 "$B/lib/"
# the benchmark's ctypes library: the kernels, the engine glue and the core
nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -Iinclude -I. \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 \
    -o "$B/lib/libattn_cuda_bench.so" bench/gpu/bench_glue.c bench/gpu/prefill_glue.c bench/gpu/mixed_glue.c \
    -Xlinker --whole-archive "$B/libattn_cuda.a" -Xlinker --no-whole-archive "$B/libattn_core.a" \
    -lcudart_static -lpthread -lm -ldl -lrt 2>&1 | grep -v "^$" || true
test -f "$B/lib/libattn_cuda_bench.so"
echo "built $B/tests/{test_decode_gpu,test_prefill_engine_gpu,test_prefill_gpu,test_restore_gpu} $B/lib/libattn_cuda_bench.so"
