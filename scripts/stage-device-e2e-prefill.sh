#!/usr/bin/env bash
# Build here what scripts/device-e2e-prefill.sh runs on the GPU machine and
# stage it in DEST (the device tool copies /work/main's tree, so DEST is
# /work/main/.dev-<branch>, git-ignored there): static attnd/attnctl
# (make BUILD=build-static STATIC=1), the GPU test binary and libcmocka
# (tests/gpu/build.sh build-gpu), stripped and packed into DEST/pkg.tgz (the
# three binaries carry the sm_90a fatbins: ~53 MB unpacked, ~16 MB packed,
# under the 64 MiB a call can carry), plus the two scripts.
# Usage: scripts/stage-device-e2e-prefill.sh DEST
# Then, with the device tool: carry [".dev-<branch>"], command
#   cd .dev-<branch> && tar xzf pkg.tgz && bash scripts/device-e2e-prefill.sh \
#       build-static build-gpu $OUT
set -euo pipefail
DEST=${1:?usage: $0 DEST}
cd "$(dirname "$0")/.."
make -s -j2 BUILD=build-static STATIC=1 all
tests/gpu/build.sh build-gpu >/dev/null
tmp=$(mktemp -d)
mkdir -p "$tmp/build-static" "$tmp/build-gpu/tests" "$tmp/build-gpu/lib"
cp build-static/attnd build-static/attnctl "$tmp/build-static/"
cp build-gpu/tests/test_prefill_engine_gpu "$tmp/build-gpu/tests/"
cp -L build-gpu/lib/libcmocka.so.0 "$tmp/build-gpu/lib/"
strip "$tmp/build-static/attnd" "$tmp/build-static/attnctl" "$tmp/build-gpu/tests/test_prefill_engine_gpu"
mkdir -p "$DEST/scripts"
tar -C "$tmp" -czf "$DEST/pkg.tgz" .
cp scripts/device-e2e-prefill.sh scripts/pool_refusal.py "$DEST/scripts/"
rm -rf "$tmp"
echo "staged $(du -sh "$DEST" | cut -f1) in $DEST (build $(build-static/attnctl hello --local 2>/dev/null | grep -m1 build_id | tr -d ' ,'))"
