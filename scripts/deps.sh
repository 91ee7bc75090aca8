#!/usr/bin/env bash
# Install the Debian packages attnd needs to build and test, only those missing.
# Called by the Makefile before any build; quick when everything is present.
# `deps.sh fuzz` (make fuzz) adds clang and its runtime (libFuzzer, sanitizers).
# `deps.sh sass` adds NVIDIA's nvdisasm (PyPI: the CUDA image ships no
# cuobjdump or nvdisasm; any 13.x reads the CUDA 13.0 cubins, and 13.0 is
# not on PyPI) to read the SASS of a `nvcc -cubin` build, and
# prints its path.
set -eu
# nng: Debian 12's 1.5.2 has two defects attnd meets: it stops its listener
# when a peer disconnects during the SP handshake (nng issue 1518, fixed in
# 1.6.0: one bare connect-and-close and attnd answers nothing), and a pipe
# closed between two steps of one transfer leaves nng_close waiting for ever
# (scripts/nng/close-during-transfer.patch: SIGTERM hung after "drained,
# closing"); and it closes a pipe that sent a frame over the receive limit
# without saying so (scripts/nng/rcv-max-rejects.patch makes the frame's size
# readable on the pipe and counts it in the listener's statistics: attnd logs
# and counts oversized frames from it).  When the system nng is older than 1.10.1 (upstream's reworked
# aio completion; that 1.10.1 closes the second race is not verified here, as
# its source cannot be fetched on these machines), build one from Debian's
# source package into a private prefix outside the clone (static, PIC, TLS
# through mbedTLS) once; the Makefile links it.  The prefix is named after
# what is built in it (nng_recipe): changing the patches or the versions means
# a new recipe and a new prefix, so no tree links a build made before a fix.
# `deps.sh --nng-prefix` prints that prefix, or nothing when the system nng will do.
ATTN_DEPS_PREFIX=${ATTN_DEPS_PREFIX:-/opt/attnd-deps}
nng_recipe=r3
NNG_PREFIX=$ATTN_DEPS_PREFIX/nng-$nng_recipe
nng_fixed_version=1.10.1
system_nng_ok() {
    local v
    v=$(dpkg-query -W -f='${Version}' libnng-dev 2>/dev/null) || return 1
    dpkg --compare-versions "$v" ge "$nng_fixed_version"
}
if [ "${1:-}" = --nng-prefix ]; then
    system_nng_ok || echo "$NNG_PREFIX"
    exit 0
fi
need=(build-essential pkg-config libuv1-dev libnng-dev libmsgpack-dev libcmocka-dev
      libssl-dev libjansson-dev libmbedtls-dev cppcheck clang-format python3
      cmake dpkg-dev openssl)
[ "${1:-}" = fuzz ] && need+=(clang libclang-rt-dev)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The Python binding's test speaks msgpack (PyPI), for whichever python3 is first on PATH.
if ! python3 -c 'import msgpack' 2>/dev/null; then
    echo "deps: installing the msgpack Python package" >&2
    python3 -m pip install -q msgpack >/dev/null 2>&1 ||
        python3 -m pip install -q --break-system-packages msgpack >/dev/null 2>&1 ||
        $SUDO apt-get install -y -qq --no-install-recommends python3-msgpack >/dev/null
fi
# The Python package's shared-memory wrappers hand out numpy views (its test
# checks them through a real attnd).
if ! python3 -c 'import numpy' 2>/dev/null; then
    echo "deps: installing the numpy Python package" >&2
    python3 -m pip install -q numpy >/dev/null 2>&1 ||
        python3 -m pip install -q --break-system-packages numpy >/dev/null 2>&1 ||
        $SUDO apt-get install -y -qq --no-install-recommends python3-numpy >/dev/null
fi

if [ "${1:-}" = sass ]; then
    find_nvdisasm() {
        python3 -c 'import glob, os, site; ps = [q for d in site.getsitepackages() + [site.getusersitepackages()] for q in glob.glob(os.path.join(d, "nvidia", "**", "bin", "nvdisasm"), recursive=True)]; print(ps[0] if ps else "")'
    }
    if [ -z "$(find_nvdisasm)" ]; then
        echo "deps: installing nvdisasm (nvidia-cuda-nvdisasm, PyPI)" >&2
        python3 -m pip install -q "nvidia-cuda-nvdisasm>=13.0,<14" >/dev/null 2>&1 ||
            python3 -m pip install -q --break-system-packages "nvidia-cuda-nvdisasm>=13.0,<14" >/dev/null
    fi
    find_nvdisasm
    exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
# fetch_nng_source SUITE VERSION DIR: `apt-get source` from SUITE through a
# private deb-src list and apt state under DIR (the system's apt configuration
# is not touched); prints the unpacked source tree.
fetch_nng_source() {
    local suite=$1 version=$2 dir=$3 apt
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/src"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$suite" >"$dir/sources.list.sources"
    apt=(-o "Dir::Etc::SourceList=$dir/sources.list.sources" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o APT::Sandbox::User=root)
    apt-get "${apt[@]}" update -qq >&2 || return 1
    (cd "$dir/src" && apt-get "${apt[@]}" source -qq --download-only "nng=$version" >&2 &&
        dpkg-source -x --no-check nng_"$version".dsc nng >&2) || return 1
    echo "$dir/src/nng"
}
if ! system_nng_ok && [ ! -f "$NNG_PREFIX/lib/libnng.a" ]; then
    work=$(mktemp -d)
    t0=$(date +%s)
    # Debian 13's 1.10.1 first; where the archive does not serve it (these
    # machines' mirror answers 404 for its source files), Debian 12's own
    # 1.5.2 with the three patches applied (scripts/nng/, in this order).
    if src=$(fetch_nng_source trixie 1.10.1-2 "$work/trixie"); then
        ver=1.10.1-2
    elif src=$(fetch_nng_source bookworm 1.5.2-2 "$work/bookworm") &&
        patch -d "$src" -p1 <"$here/nng/1518-negotiation-close.patch" >&2 &&
        patch -d "$src" -p1 <"$here/nng/close-during-transfer.patch" >&2 &&
        patch -d "$src" -p1 <"$here/nng/rcv-max-rejects.patch" >&2; then
        ver=1.5.2-2+attnd3
    else
        echo "deps: cannot fetch the nng source package (see above)" >&2
        exit 1
    fi
    echo "deps: building nng $ver into $NNG_PREFIX" >&2
    cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DNNG_TESTS=OFF -DNNG_TOOLS=OFF \
        -DNNG_ENABLE_NNGCAT=OFF -DNNG_ENABLE_TLS=ON -DCMAKE_INSTALL_PREFIX="$NNG_PREFIX.tmp" \
        -DCMAKE_INSTALL_LIBDIR=lib >"$work/cmake.log" 2>&1 &&
        cmake --build "$work/build" -j "$(nproc)" >>"$work/cmake.log" 2>&1 &&
        cmake --install "$work/build" >>"$work/cmake.log" 2>&1 || {
        tail -30 "$work/cmake.log" >&2
        echo "deps: the nng build failed (log above)" >&2
        exit 1
    }
    echo "$ver" >"$NNG_PREFIX.tmp/VERSION"
    rm -rf "$NNG_PREFIX" && mv "$NNG_PREFIX.tmp" "$NNG_PREFIX"
    rm -rf "$work"
    echo "deps: nng $ver built in $(($(date +%s) - t0)) s" >&2
fi
