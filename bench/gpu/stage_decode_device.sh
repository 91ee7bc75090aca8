#!/usr/bin/env bash
# Build here (no GPU needed) what bench/gpu/decode_device.sh runs on the GPU
# machine and copy it into DEST: lib/libattn_cuda_bench.so (this tree),
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
rm -rf "$DEST" && mkdir -p "$DEST/lib" "$DEST/tests" "$DEST/bench"
cp build-gpu/lib/libattn_cuda_bench.so build-gpu/lib/libcmocka.so.0 "$DEST/lib/"
case "$OLD_PKG" in
*.so.xz) cp "$OLD_PKG" "$DEST/lib/libattn_cuda_bench_old.so.xz" ;;
*) tar -xzf "$OLD_PKG" -O ./build-gpu/lib/libattn_cuda_bench.so >"$DEST/lib/libattn_cuda_bench_old.so" ;;
esac
cp build-gpu/tests/test_decode_gpu "$DEST/tests/"
strip "$DEST/tests/test_decode_gpu" "$DEST"/lib/libattn_cuda_bench*.so 2>/dev/null || true
for f in "$DEST"/lib/libattn_cuda_bench*.so "$DEST/tests/test_decode_gpu"; do
    [ -f "$f" ] && xz -9e -T2 "$f" # the copy limit
done
cp bench/gpu/bench_decode.py bench/gpu/decode_profile.py bench/gpu/decode_device.sh \
    bench/gpu/bulk_device.sh bench/gpu/small_device.sh bench/gpu/fi_decode_warm.py "$DEST/bench/"
# FlashInfer's decode modules packed by an earlier device call (bulk_device.sh w)
[ -n "${FI_AOT:-}" ] && cp "$FI_AOT" "$DEST/fi_aot.tar.xz"
echo "staged $(du -sh "$DEST" | cut -f1) in $DEST (tree $(git rev-parse --short HEAD))"
