#!/usr/bin/env bash
# Build and run bench/gpu/bench_run_host.c (host cost per CUDA run) in this
# tree; the same two files dropped into a checkout from before the
# plan/run split measure the "before" side.  Usage on the device:
#   bash bench/gpu/host_bench.sh [BUILD] [RUNS]     (default build-gpu 300)
# Before/after in one device call, from the repository root:
#   mkdir -p .before && git archive bda778b | tar -x -C .before &&
#   cp bench/gpu/bench_run_host.c bench/gpu/host_bench.sh .before/bench/gpu/
#   (on the device) bash bench/gpu/host_bench.sh; (cd .before && bash bench/gpu/host_bench.sh)
set -euo pipefail
B=${1:-build-gpu}
RUNS=${2:-300}
cd "$(dirname "$0")/../.."
make -s BUILD="$B" CUDA=1 "$B/libattn_core.a" "$B/libattn_cuda.a" "$B/obj/tests/lib/random_batch.o"
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
mkdir -p "$B/bench"
cc -O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unused-parameter \
    -Iinclude -I. -DATTN_WITH_CUDA=1 -I"$CUDA_HOME/include" \
    -o "$B/bench/bench_run_host" bench/gpu/bench_run_host.c "$B/obj/tests/lib/random_batch.o" \
    "$B/libattn_cuda.a" "$B/libattn_core.a" -L"$CUDA_HOME/lib64" -lcudart_static -lstdc++ \
    -lpthread -lm -ldl -lrt
echo "# tree $(git rev-parse --short HEAD 2>/dev/null || basename "$PWD"), $(date -u +%FT%TZ)"
"$B/bench/bench_run_host" "$RUNS"
