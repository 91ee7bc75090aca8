#!/usr/bin/env bash
# FlashInfer's BatchPOD and POD modules (bench_mixed.py's fi_batch_pod /
# fi_pod configuration: bf16, d 128, no RoPE / window / soft cap, int32
# indptr) compiled ahead of time on a machine with nvcc and no GPU, packed
# as aot/<uri>/<uri>.so directories for <site>/flashinfer/data/aot/
# (run_mixed.sh: FI_POD_AOT=<tarball> unpacks them there).  The device's
# JIT would compile the same 2 x 18 TUs with the same flags; it ran out of
# its wall budget doing so.
# Usage: bench/gpu/fi_pod_aot.sh [stages]   stages: g (write ninja files),
#   b (build, one TU at a time, niced), p (check exports and pack); default gbp
# Env: SITE_TAR (FlashInfer + tvm_ffi site, default
#   /work/main/.dev-pod/fi_site_full.tar.xz), SITE (where it is unpacked,
#   default /tmp/podsite), WS (FlashInfer workspace base, default /tmp/podws),
#   PYDIR (private pip --target for `packaging`, default /tmp/podpy),
#   MODULES (default "batch_pod pod"), AOT_OUT (the tarball, default
#   /work/main/.dev-pod/fi_pod_aot.tar.xz), LOG (default /tmp/fi_pod_aot.log).
set -euo pipefail
ST=${1:-gbp}
here=$(cd "$(dirname "$0")" && pwd)
SITE_TAR=${SITE_TAR:-/work/main/.dev-pod/fi_site_full.tar.xz}
SITE=${SITE:-/tmp/podsite}
WS=${WS:-/tmp/podws}
PYDIR=${PYDIR:-/tmp/podpy}
MODULES=${MODULES:-"batch_pod pod"}
AOT_OUT=${AOT_OUT:-/work/main/.dev-pod/fi_pod_aot.tar.xz}
LOG=${LOG:-/tmp/fi_pod_aot.log}
export FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE=$WS
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LIST=$WS/modules.txt
mkdir -p "$WS"

if [[ $ST == *g* ]]; then
    if [ ! -d "$SITE/flashinfer" ]; then
        mkdir -p "$SITE" && tar xJf "$SITE_TAR" -C "$SITE"
    fi
    # FlashInfer's cpp_ext needs packaging.version; nothing else from PyPI
    if ! PYTHONPATH=$PYDIR python3 -c "import packaging.version" 2> /dev/null; then
        python3 -m pip install -q --no-cache-dir --target "$PYDIR" packaging
    fi
    PYTHONPATH=$PYDIR python3 "$here/fi_pod_aot.py" --site "$SITE" > "$LIST"
    cat "$LIST"
fi

# the ninja file of one module kind (batch_pod or pod) from the list
ninja_of() { awk -v k="$1_with_kv_cache_" 'index($1, k) == 1 { print $2 }' "$LIST"; }

if [[ $ST == *b* ]]; then
    for m in $MODULES; do
        nf=$(ninja_of "$m")
        d=$(dirname "$nf")
        echo "== $m: $(date -u +%T) $nf" | tee -a "$LOG"
        # one job: two cores are shared; ninja's log has each TU's times
        nice -n 19 ninja -v -j1 -C "$d" -f "$nf" >> "$LOG" 2>&1
        echo "== $m done $(date -u +%T)" | tee -a "$LOG"
        # .ninja_log: start_ms end_ms mtime output hash, per TU of this build
        awk -F'\t' 'NR > 1 { n = split($4, p, "/"); printf "%6.1f s  %s\n", ($2 - $1) / 1000, p[n] }' \
            "$d/.ninja_log" | tee -a "$LOG"
    done
fi

if [[ $ST == *p* ]]; then
    stage=$(mktemp -d)
    for m in $MODULES; do
        nf=$(ninja_of "$m")
        d=$(dirname "$nf")
        uri=$(basename "$d")
        so=$d/$uri.so
        [ -f "$so" ] || { echo "no $so: build it first (stage b)" >&2; exit 1; }
        # the wrappers call module.<m>_with_kv_cache_tensor; tvm_ffi exports it
        # as the C symbol __tvm_ffi_<name>
        sym=__tvm_ffi_${m}_with_kv_cache_tensor
        nm -D --defined-only "$so" | grep -qw "$sym" || { echo "$so lacks $sym" >&2; exit 1; }
        echo "$uri.so exports $sym ($(stat -c %s "$so") bytes)"
        # it loads as tvm_ffi loads it (dlopen RTLD_LAZY | RTLD_LOCAL), with
        # tvm_ffi's C API from its library and libcuda from the stub (no
        # driver here; the device's glibc / libstdc++ are newer than these)
        stub=$(mktemp -d)
        ln -s "$CUDA_HOME/lib64/stubs/libcuda.so" "$stub/libcuda.so.1"
        LD_LIBRARY_PATH=$stub:$CUDA_HOME/lib64 python3 -c "import ctypes, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
dl = ctypes.CDLL(None)
dl.dlopen.restype = dl.dlsym.restype = ctypes.c_void_p
dl.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
h = dl.dlopen(sys.argv[2].encode(), 1)  # RTLD_LAZY
assert h and dl.dlsym(h, b'$sym'), 'dlopen / dlsym failed'" "$SITE/tvm_ffi/lib/libtvm_ffi.so" "$so"
        rm -rf "$stub"
        # FlashInfer's own gap: its kernel-inst template instantiates CTA tile
        # 16/64/128 while the dispatch also names 32, which FA2DetermineCtaTileQ
        # picks only at head dim >= 512 (never here); any other undefined
        # flashinfer:: symbol would be a missing TU
        undef=$(nm -D --undefined-only "$so" | grep -c flashinfer || true)
        other=$(nm -D --undefined-only "$so" | grep flashinfer | grep -vc "ELb0ELj32ELNS_8MaskMode" || true)
        echo "$uri.so: $undef undefined flashinfer:: instantiations (CTA tile 32, unreachable at d 128), $other others"
        [ "$other" = 0 ] || { echo "$so: a TU is missing" >&2; exit 1; }
        echo "$uri.so loads lazily as tvm_ffi does; needs: $(objdump -p "$so" |
            awk '/NEEDED/ { printf "%s ", $2 }')"
        mkdir -p "$stage/$uri" && cp "$so" "$stage/$uri/"
    done
    (cd "$stage" && tar cf - ./*/*.so) | xz -9 > "$AOT_OUT"
    rm -rf "$stage"
    echo "packed $AOT_OUT ($(stat -c %s "$AOT_OUT") bytes)"
    tar tJvf "$AOT_OUT"
fi
