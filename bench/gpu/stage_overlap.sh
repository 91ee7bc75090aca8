#!/usr/bin/env bash
# Pack what bench/gpu/run_overlap.sh needs on the device into DEST/pkg.tar.xz
# from a build here (tests/gpu/build.sh BUILD, default build): the two
# prefill GPU test binaries and the benchmark library, stripped, cmocka, and
# bench/gpu's scripts.  Usage: bench/gpu/stage_overlap.sh /work/main/.dev-ovl [BUILD]
set -euo pipefail
DEST=${1:?destination folder}
BLD=${2:-build}
cd "$(dirname "$0")/../.."
bash tests/gpu/build.sh "$BLD" > /dev/null
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/build-gpu/tests" "$S/build-gpu/lib" "$S/bench/gpu"
cp "$BLD/tests/test_prefill_gpu" "$BLD/tests/test_prefill_engine_gpu" "$S/build-gpu/tests/"
cp "$BLD/lib/libattn_cuda_bench.so" "$BLD/lib/libcmocka.so.0" "$S/build-gpu/lib/"
strip --strip-all "$S"/build-gpu/tests/* "$S/build-gpu/lib/libattn_cuda_bench.so"
cp bench/gpu/bench_mixed.py bench/gpu/calibrate_mixed.py bench/gpu/run_overlap.sh "$S/bench/gpu/"
mkdir -p "$DEST"
tar cf - -C "$S" . | xz -T1 -9e > "$DEST/pkg.tar.xz"
ls -la "$DEST/pkg.tar.xz"
