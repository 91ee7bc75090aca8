#!/usr/bin/env bash
# Build here (no GPU needed) what bench/gpu/decode_device.sh and
# small_device.sh run on the GPU machine and copy it into DEST:
# lib/libattn_cuda_bench.so (this tree, decode only, sm_90a),
# lib/libattn_cuda_bench_old.so (OLD_PKG's, the kernel before issue 13),
# lib/libcmocka.so.0, tests/test_decode_gpu, bench/*.py and the script,
# xz-compressed so the tree the device copies (with .whl) stays under 64 MiB.
# Usage: bench/gpu/stage_decode_device.sh DEST [OLD]
# (OLD: a scripts/stage-device-check.sh pkg.tgz of main before issue 13, or
# an xz-compressed libattn_cuda_bench.so, e.g. /work/main/.dev-bench/new.so.xz)
set -euo pipefail
DEST=${1:?usage: $0 DEST [OLD_PKG]}
OLD_PKG=${2:-/work/main/.dev-check/pkg.tgz}
cd "$(dirname "$0")/../.."
tests/gpu/build.sh build-gpu >/dev/null
# The device copy links decode.cu built for sm_90a alone: nvcc compresses the
# fatbin of sm_90a + compute_90 (xz then saves nothing: 5.4 MB), an sm_90a
# one is not compressed and xz makes it ~0.3 MB, so the test binary, this
# library and the old one fit the 64 MiB copy beside FlashInfer's wheels.
S=build-gpu/sm90a
mkdir -p "$S"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
if [ -n "$(find kernels/cuda kernels/common planner/split.h -newer "$S/decode.cu.o" 2>/dev/null | head -1)" ] ||
    [ ! -f "$S/decode.cu.o" ]; then
    nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC \
        -Iinclude -I. -c kernels/cuda/decode.cu -o "$S/decode.cu.o"
fi
cp build-gpu/libattn_cuda.a "$S/libattn_cuda.a"
(cd "$S" && ar r libattn_cuda.a decode.cu.o)
cc -O2 -g -std=c11 -D_GNU_SOURCE -Iinclude -I. -DATTN_WITH_CUDA=1 -I"$CUDA_HOME/include" \
    -o "$S/test_decode_gpu" tests/gpu/test_decode_gpu.c build-gpu/obj/tests/lib/random_batch.o \
    "$S/libattn_cuda.a" build-gpu/libattn_core.a -L"$CUDA_HOME/lib64" -lcudart_static -lstdc++ \
    -lcmocka -lpthread -lm -ldl -lrt
nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -Iinclude -I. -o "$S/libattn_cuda_bench.so" \
    bench/gpu/bench_glue.c "$S/libattn_cuda.a" build-gpu/libattn_core.a -lcudart_static -lpthread \
    -lm -ldl -lrt
rm -rf "$DEST" && mkdir -p "$DEST/lib" "$DEST/tests" "$DEST/bench"
cp "$S/libattn_cuda_bench.so" build-gpu/lib/libcmocka.so.0 "$DEST/lib/"
case "$OLD_PKG" in
*.so.xz) cp "$OLD_PKG" "$DEST/lib/libattn_cuda_bench_old.so.xz" ;;
*) tar -xzf "$OLD_PKG" -O ./build-gpu/lib/libattn_cuda_bench.so >"$DEST/lib/libattn_cuda_bench_old.so" ;;
esac
cp "$S/test_decode_gpu" "$DEST/tests/"
strip "$DEST/tests/test_decode_gpu" "$DEST"/lib/libattn_cuda_bench*.so 2>/dev/null || true
for f in "$DEST"/lib/libattn_cuda_bench*.so "$DEST/tests/test_decode_gpu"; do
    [ -f "$f" ] && xz -9e -T2 "$f" # the copy limit
done
cp bench/gpu/bench_decode.py bench/gpu/decode_profile.py bench/gpu/decode_device.sh \
    bench/gpu/bulk_device.sh bench/gpu/small_device.sh bench/gpu/fi_decode_warm.py \
    bench/gpu/ab_decode.py "$DEST/bench/"
# FlashInfer's decode modules packed by an earlier device call (bulk_device.sh w)
[ -n "${FI_AOT:-}" ] && cp "$FI_AOT" "$DEST/fi_aot.tar.xz"
echo "staged $(du -sh "$DEST" | cut -f1) in $DEST (tree $(git rev-parse --short HEAD))"
