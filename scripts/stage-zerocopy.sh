#!/usr/bin/env bash
# Stage here (no GPU needed) what bench/gpu/run_zerocopy.sh runs on the GPU
# machine, into DEST (a git-ignored folder the device tool carries, e.g.
# /work/main/.dev-zpy):
#   bin.tar.xz              attnd: static, with CUDA (make BUILD=build-static STATIC=1 CUDA=1),
#                           zc_client (bench/gpu/zc_client.cu: the C client, static libattn)
#                           and libattn_cuda_bench.so, the bench glue over the same kernel
#                           archives, with the stamp kernel (kernels/cuda/stamp.h) the
#                           client's timeline calls (unpacked by run_zerocopy.sh)
#   py/attn, py/msgpack     the Python package and msgpack's pure-Python
#                           half (the device has torch but no msgpack)
#   whl/                    msgpack's cp312 wheel (its C half: a pure-Python
#                           decoder would add ~100 µs to every reply)
#   bench/                  bench_zerocopy.py, run_zerocopy.sh, zerocopy_summary.py
# Then, on the device: bash DEST/bench/run_zerocopy.sh DEST "$OUT"
# Usage: scripts/stage-zerocopy.sh DEST
set -euo pipefail
DEST=${1:?usage: $0 DEST}
cd "$(dirname "$0")/.."
B=build-static
make -s -j2 BUILD=$B STATIC=1 CUDA=1 all
nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -Iinclude -I. \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 \
    -o "$B/libattn_cuda_bench.so" bench/gpu/bench_glue.c bench/gpu/prefill_glue.c \
    "$B/obj/kernels/cuda/stamp.cu.o" \
    -Xlinker --whole-archive "$B/libattn_cuda.a" -Xlinker --no-whole-archive "$B/libattn_core.a" \
    -lcudart_static -lpthread -lm -ldl -lrt
# the C client (libattn's prepared runs): its kernels by nvcc, linked with
# the static libattn like attnd
mkdir -p "$B/bench"
nvcc -O2 -std=c++17 -Iinclude -I. -gencode=arch=compute_90a,code=sm_90a \
    -c bench/gpu/zc_client.cu -o "$B/bench/zc_client.o"
g++ -static-libstdc++ -static-libgcc -o "$B/bench/zc_client" "$B/bench/zc_client.o" \
    "$B/libattn.a" -L"$(dirname "$(dirname "$(command -v nvcc)")")/lib64" -lcudart_static \
    -Wl,-Bstatic "$(./scripts/deps.sh --nng-prefix)/lib/libnng.a" -lmbedtls -lmbedx509 \
    -lmbedcrypto -lmsgpackc -ljansson -lcrypto -Wl,-Bdynamic -lpthread -lm -ldl -lrt -latomic
mp=$(python3 -c 'import msgpack, os; print(os.path.dirname(msgpack.__file__))')
rm -rf "$DEST"
mkdir -p "$DEST/py/attn" "$DEST/py/msgpack" "$DEST/bench"
cp "$B/attnd" "$B/libattn_cuda_bench.so" "$B/bench/zc_client" "$DEST/"
strip "$DEST/attnd" "$DEST/zc_client"
cp client/python/attn/*.py "$DEST/py/attn/"
cp "$mp"/*.py "$DEST/py/msgpack/"
cp bench/gpu/bench_zerocopy.py bench/gpu/run_zerocopy.sh bench/gpu/zerocopy_summary.py \
    "$DEST/bench/"
mkdir -p "$DEST/whl"
python3 -m pip download -q msgpack --python-version 3.12 --only-binary=:all: \
    --platform manylinux2014_x86_64 --no-deps -d "$DEST/whl" ||
    echo "no msgpack wheel: the device falls back to pure-Python msgpack" >&2
# the two binaries are mostly sm_90a cubins and PTX (33 MB): carried as one
# xz archive (~6 MB); run_zerocopy.sh unpacks it next to itself
tar -C "$DEST" -cf - attnd libattn_cuda_bench.so zc_client | xz -6 -T2 >"$DEST/bin.tar.xz"
rm "$DEST/attnd" "$DEST/libattn_cuda_bench.so" "$DEST/zc_client"
echo "staged $(du -sh "$DEST" | cut -f1) in $DEST (tree $(git rev-parse --short HEAD))"
