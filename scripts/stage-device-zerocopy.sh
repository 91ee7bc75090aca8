#!/usr/bin/env bash
# Build the two-process zero-copy check here (CUDA build) and stage it with
# its device script into DIR (default /work/main/.dev-zcopy), for the device
# tool: run with carry [".dev-zcopy"] and "cd .dev-zcopy && ./device-zerocopy.sh".
set -euo pipefail
DIR=${1:-/work/main/.dev-zcopy}
cd "$(dirname "$0")/.."
B=${BUILD:-build}
make -s -j2 CUDA=1 BUILD="$B" "$B/libattn_core.a" "$B/libattn_cuda.a" "$B/obj/tests/lib/random_batch.o"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
mkdir -p "$DIR"
cc -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
    -Iinclude -I. -DATTN_WITH_CUDA=1 -I"$CUDA_HOME/include" \
    -o "$DIR/test_zerocopy_gpu" tests/gpu/test_zerocopy_gpu.c "$B/obj/tests/lib/random_batch.o" \
    "$B/libattn_cuda.a" "$B/libattn_core.a" -L"$CUDA_HOME/lib64" -lcudart_static -lstdc++ \
    -lpthread -lm -ldl -lrt
cp scripts/device-zerocopy.sh "$DIR/"
echo "staged $DIR: $(ls "$DIR" | tr '\n' ' ')"
