#!/usr/bin/env bash
# Build here and pack what bench/gpu/run_mixed.sh needs on the device into
# DEST/pkg.tgz: build-gpu/ (the GPU test binary and the benchmark library,
# tests/gpu/build.sh), build-static/ attnd and attnctl (the gen/replay
# stage; make STATIC=1), all stripped; bench/gpu/'s scripts; the peers'
# wheels from WHEELS when given (FlashInfer and tvm-ffi only: FlashInfer
# imports cudnn-frontend only when present, and the carried tree must stay
# small).  Usage:
#   bench/gpu/stage_mixed.sh /work/main/.dev-mixed [/work/main/.whl]
# then, on the device (carry [".dev-mixed"]):
#   cd .dev-mixed && tar xzf pkg.tgz && bash bench/gpu/run_mixed.sh
set -euo pipefail
DEST=${1:?destination folder}
WHEELS=${2:-}
cd "$(dirname "$0")/../.."
bash tests/gpu/build.sh build-gpu > /dev/null
make -s -j2 BUILD=build-static STATIC=1 build-static/attnd build-static/attnctl > /dev/null
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/build-gpu/tests" "$S/build-gpu/lib" "$S/build-static" "$S/bench/gpu"
cp build-gpu/tests/test_prefill_engine_gpu "$S/build-gpu/tests/"
cp build-gpu/lib/libattn_cuda_bench.so build-gpu/lib/libcmocka.so.0 "$S/build-gpu/lib/"
cp build-static/attnd build-static/attnctl "$S/build-static/"
strip --strip-debug "$S/build-gpu/tests/test_prefill_engine_gpu" \
    "$S/build-gpu/lib/libattn_cuda_bench.so" "$S/build-static/attnd" "$S/build-static/attnctl"
cp bench/gpu/bench_mixed.py bench/gpu/fi_warm.py bench/gpu/calibrate_mixed.py \
    bench/gpu/run_mixed.sh "$S/bench/gpu/"
if [[ -n $WHEELS ]]; then
    mkdir -p "$S/.whl"
    cp "$WHEELS"/flashinfer_python-*.whl "$WHEELS"/apache_tvm_ffi-*.whl "$S/.whl/"
fi
mkdir -p "$DEST"
tar czf "$DEST/pkg.tgz" -C "$S" .
ls -la "$DEST/pkg.tgz"
