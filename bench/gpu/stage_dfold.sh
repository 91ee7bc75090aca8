#!/usr/bin/env bash
# Issue 13, branch dfold (the fold of many split slots; the tensor-map copy
# warp's page ids one tile ahead): build here (no GPU needed) what
# bench/gpu/dfold_device.sh runs on the GPU machine and pack it into DEST
# (default /work/main/.dev-dfold, ignored through the main repository's
# .git/info/exclude):
#   lib/libattn_cuda_bench.so      this tree's decode kernels + bench_glue.c
#   lib/libattn_cuda_bench_old.so  the same built from revision MAIN (default main)
#   lib/libcmocka.so.0, tests/test_decode_gpu (this tree), bench/*.py, dfold_device.sh
# decode.cu built for sm_90a alone and xz-compressed (about 9 MB in all).
# MAIN's sources come from `git archive` (nothing is checked out); where the
# libraries' sources (kernels, planner, protocol, engines, include, Makefile)
# of MAIN and this tree differ only in decode.cu and decode/device.cuh, MAIN's
# library reuses this tree's other objects, else MAIN is built whole in a
# temporary folder.
# Usage: bench/gpu/stage_dfold.sh [DEST] [MAIN]
# Then, on the device, with carry [".dev-dfold"]: cd .dev-dfold && bash dfold_device.sh "$OUT"
set -euo pipefail
DEST=${1:-/work/main/.dev-dfold}
MAIN=${2:-main}
cd "$(dirname "$0")/../.."
ROOT=$PWD
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
NVCC=$CUDA_HOME/bin/nvcc
DFLAGS=(-O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC)
tests/gpu/build.sh build-gpu >/dev/null
S=$ROOT/build-gpu/dfold
rm -rf "$S" && mkdir -p "$S/new" "$S/old"
OLD_SRC=$(mktemp -d)
trap 'rm -rf "$OLD_SRC"' EXIT
git archive "$MAIN" | tar -x -C "$OLD_SRC"

# lib DIR SRC CORE CUDA: DIR/libattn_cuda_bench.so from SRC's decode.cu (sm_90a) and bench
# glue, CUDA (libattn_cuda.a, its decode.cu.o replaced) and CORE (libattn_core.a)
lib() {
    local dir=$1 src=$2
    (cd "$src" && "$NVCC" "${DFLAGS[@]}" -Iinclude -I. -c kernels/cuda/decode.cu -o "$dir/decode.cu.o")
    cp "$4" "$dir/libattn_cuda.a"
    (cd "$dir" && ar r libattn_cuda.a decode.cu.o)
    (cd "$src" && "$NVCC" -O3 -std=c++17 -Xcompiler -fPIC -shared -Iinclude -I. \
        -o "$dir/libattn_cuda_bench.so" bench/gpu/bench_glue.c "$dir/libattn_cuda.a" "$3" \
        -lcudart_static -lpthread -lm -ldl -lrt)
}
lib "$S/new" "$ROOT" build-gpu/libattn_core.a build-gpu/libattn_cuda.a
other=$(git diff --name-only "$MAIN" -- kernels planner protocol engines include Makefile \
    ':!kernels/cuda/decode.cu' ':!kernels/cuda/decode/device.cuh')
if [ -z "$other" ]; then
    lib "$S/old" "$OLD_SRC" "$ROOT/build-gpu/libattn_core.a" "$ROOT/build-gpu/libattn_cuda.a"
else
    echo "stage_dfold: $MAIN differs beyond the decode kernels ($(echo $other | head -c 200)):" \
        "building its libraries" >&2
    make -s -C "$OLD_SRC" BUILD=build-gpu CUDA=1 build-gpu/libattn_core.a build-gpu/libattn_cuda.a
    lib "$S/old" "$OLD_SRC" "$OLD_SRC/build-gpu/libattn_core.a" "$OLD_SRC/build-gpu/libattn_cuda.a"
fi
cc -O2 -g -std=c11 -D_GNU_SOURCE -Iinclude -I. -DATTN_WITH_CUDA=1 -I"$CUDA_HOME/include" \
    -o "$S/test_decode_gpu" tests/gpu/test_decode_gpu.c build-gpu/obj/tests/lib/random_batch.o \
    "$S/new/libattn_cuda.a" build-gpu/libattn_core.a -L"$CUDA_HOME/lib64" -lcudart_static \
    -lstdc++ -lcmocka -lpthread -lm -ldl -lrt

rm -rf "$DEST" && mkdir -p "$DEST/lib" "$DEST/tests" "$DEST/bench"
cp "$S/new/libattn_cuda_bench.so" build-gpu/lib/libcmocka.so.0 "$DEST/lib/"
cp "$S/old/libattn_cuda_bench.so" "$DEST/lib/libattn_cuda_bench_old.so"
cp "$S/test_decode_gpu" "$DEST/tests/"
strip "$DEST/tests/test_decode_gpu" "$DEST"/lib/libattn_cuda_bench*.so
for f in "$DEST"/lib/libattn_cuda_bench*.so "$DEST/tests/test_decode_gpu"; do
    xz -9e -T2 "$f"
done
cp bench/gpu/bench_decode.py bench/gpu/ab_decode.py "$DEST/bench/"
cp bench/gpu/dfold_device.sh "$DEST/"
{
    echo "new: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- kernels bench tests || echo +dirty)"
    echo "old: $MAIN $(git rev-parse --short "$MAIN")"
} >"$DEST/STAGED"
echo "staged $(du -sh "$DEST" | cut -f1) in $DEST ($(tr '\n' ' ' <"$DEST/STAGED"))"
