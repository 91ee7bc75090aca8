#!/usr/bin/env bash
# Build here and pack what bench/gpu/run_mixed.sh needs on the device into
# DEST/pkg.tar.xz: build-gpu/ (the GPU test binary and the benchmark
# library, tests/gpu/build.sh), stripped; bench/gpu/'s scripts; with
# STATIC=1 also build-static/ attnd and attnctl (the gen/replay stage; make
# STATIC=1); with JIT=file, FlashInfer modules a previous call packed
# (fi_jit.tar.xz).  FlashInfer's wheels and AOT caches come from the shared
# /work/main/.dev-fi (carried beside).  Usage:
#   bench/gpu/stage_mixed.sh /work/main/.dev-mixpod
# then, on the device (carry [".dev-mixpod", ".dev-fi"]):
#   cd .dev-mixpod && tar xJf pkg.tar.xz && bash bench/gpu/run_mixed.sh
set -euo pipefail
DEST=${1:?destination folder}
cd "$(dirname "$0")/../.."
bash tests/gpu/build.sh build-gpu > /dev/null
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/build-gpu/tests" "$S/build-gpu/lib" "$S/bench/gpu"
cp build-gpu/tests/test_prefill_engine_gpu "$S/build-gpu/tests/"
cp build-gpu/lib/libattn_cuda_bench.so build-gpu/lib/libcmocka.so.0 "$S/build-gpu/lib/"
strip --strip-all "$S/build-gpu/tests/test_prefill_engine_gpu" \
    "$S/build-gpu/lib/libattn_cuda_bench.so"
if [[ -n ${STATIC:-} ]]; then
    make -s -j2 BUILD=build-static STATIC=1 build-static/attnd build-static/attnctl > /dev/null
    mkdir -p "$S/build-static"
    cp build-static/attnd build-static/attnctl "$S/build-static/"
    strip --strip-debug "$S/build-static/attnd" "$S/build-static/attnctl"
fi
cp bench/gpu/bench_mixed.py bench/gpu/fi_warm.py bench/gpu/calibrate_mixed.py \
    bench/gpu/run_mixed.sh bench/gpu/run_unified.sh "$S/bench/gpu/"
[[ -n ${JIT:-} ]] && cp "$JIT" "$S/fi_jit.tar.xz"
mkdir -p "$DEST"
tar cf - -C "$S" . | xz -T1 -9e > "$DEST/pkg.tar.xz" # one stream: the two binaries share their kernels
ls -la "$DEST/pkg.tar.xz"
