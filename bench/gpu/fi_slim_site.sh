#!/usr/bin/env bash
# FlashInfer's site (its wheel and tvm_ffi's, unpacked as pip would) without
# the headers its JIT compiles against (data/cutlass, data/cccl: ~62 MB of
# the ~115), packed as one tarball for run_mixed.sh's FI_SITE: the device
# carry is 64 MiB, and with the BatchPOD / POD modules (fi_pod_aot.sh) the
# wheels no longer fit beside the staged build.  Every module the peers use
# must then come from AOT caches (fi_jit.tar.xz, FI_POD_AOT).
# Usage: bench/gpu/fi_slim_site.sh OUT.tar.xz [WHEEL_DIR (default .dev-fi)]
set -euo pipefail
out=${1:?usage: $0 OUT.tar.xz [WHEEL_DIR]}
wheels=${2:-.dev-fi}
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
for w in "$wheels"/*.whl; do
    python3 -m zipfile -e "$w" "$site"
done
test -d "$site/flashinfer" || { echo "no flashinfer wheel in $wheels" >&2; exit 1; }
rm -rf "$site/flashinfer/data/cutlass" "$site/flashinfer/data/cccl"
tar cf - -C "$site" . | xz -T2 -6 > "$out"
echo "packed $out ($(stat -c %s "$out") bytes)"
