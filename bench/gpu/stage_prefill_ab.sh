#!/usr/bin/env bash
# Pack what bench/gpu/run_prefill_ab.sh needs on the device into DEST:
# build-gpu/ (tests/gpu/build.sh: the two prefill GPU tests and the
# benchmark library, stripped), base/libattn_cuda_bench.so (the library of
# the kernel to compare against, BASE_LIB, built the same way from another
# commit), bench/gpu/'s scripts, FlashInfer's wheels (WHEELS: FlashInfer and
# tvm-ffi only, the carried tree must stay under 64 MiB) and, when given,
# the FlashInfer modules a previous call compiled (AOT: one or more
# fi_aot*.tar.xz, space-separated, e.g. .dev-fi's prefill cache and the FA3
# module an earlier call packed).
# Usage:
#   BASE_LIB=/path/base.so bench/gpu/stage_prefill_ab.sh /work/main/.dev-pfk [WHEELS] [AOT]
# then, on the device (carry [".dev-pfk"]):
#   cd .dev-pfk && tar xJf pkg.tar.xz && bash bench/gpu/run_prefill_ab.sh wtaps
# (TESTS names the GPU test binaries to pack; BASE_LIB may be left out.)
set -euo pipefail
DEST=${1:?destination folder}
WHEELS=${2:-}
AOT=${3:-}
cd "$(dirname "$0")/../.."
bash tests/gpu/build.sh build-gpu > /dev/null
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/build-gpu/tests" "$S/build-gpu/lib" "$S/base" "$S/bench/gpu"
for t in ${TESTS:-test_prefill_gpu test_prefill_engine_gpu}; do
    cp build-gpu/tests/$t "$S/build-gpu/tests/"
done
cp build-gpu/lib/libattn_cuda_bench.so build-gpu/lib/libcmocka.so.0 "$S/build-gpu/lib/"
[[ -n ${BASE_LIB:-} ]] && cp "$BASE_LIB" "$S/base/libattn_cuda_bench.so"
strip --strip-debug "$S"/build-gpu/tests/* "$S"/build-gpu/lib/libattn_cuda_bench.so \
    $(ls "$S"/base/*.so 2> /dev/null)
cp bench/gpu/*.py bench/gpu/run_prefill_ab.sh bench/gpu/run_mixed.sh "$S/bench/gpu/"
i=0
for a in $AOT; do
    cp "$a" "$S/fi_aot$i.tar.xz"
    i=$((i + 1))
done
rm -rf "$DEST"
mkdir -p "$DEST"
tar cf - -C "$S" . | xz -T2 -6 > "$DEST/pkg.tar.xz"
if [[ -n $WHEELS ]]; then
    mkdir -p "$DEST/.whl"
    cp "$WHEELS"/flashinfer_python-*.whl "$WHEELS"/apache_tvm_ffi-*.whl "$DEST/.whl/"
fi
du -sh "$DEST" "$DEST"/*
