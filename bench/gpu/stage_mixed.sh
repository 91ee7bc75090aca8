#!/usr/bin/env bash
# Build here and pack what bench/gpu/run_mixed.sh needs on the device into
# DEST/pkg.tgz (build-gpu/ test binary and benchmark library, stripped;
# bench/gpu/; the peers' wheels from WHEELS when given).  Usage:
#   bench/gpu/stage_mixed.sh /work/main/.dev-mixed [/work/main/.whl]
# then, on the device (carry [".dev-mixed"]):
#   cd .dev-mixed && tar xzf pkg.tgz && bash bench/gpu/run_mixed.sh tmb
set -euo pipefail
DEST=${1:?destination folder}
WHEELS=${2:-}
cd "$(dirname "$0")/../.."
bash tests/gpu/build.sh build-gpu > /dev/null
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/build-gpu/tests" "$S/build-gpu/lib" "$S/bench/gpu"
cp build-gpu/tests/test_prefill_engine_gpu "$S/build-gpu/tests/"
cp build-gpu/lib/libattn_cuda_bench.so build-gpu/lib/libcmocka.so.0 "$S/build-gpu/lib/"
strip --strip-debug "$S/build-gpu/tests/test_prefill_engine_gpu" "$S/build-gpu/lib/libattn_cuda_bench.so"
cp bench/gpu/bench_mixed.py bench/gpu/run_mixed.sh "$S/bench/gpu/"
if [[ -n $WHEELS ]]; then
    mkdir -p "$S/.whl"
    cp "$WHEELS"/*.whl "$S/.whl/"
fi
mkdir -p "$DEST"
tar czf "$DEST/pkg.tgz" -C "$S" .
ls -la "$DEST/pkg.tgz"
