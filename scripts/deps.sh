#!/usr/bin/env bash
# Install the Debian packages attnd needs to build and test, only those missing.
# Called by the Makefile before any build; quick when everything is present.
# `deps.sh fuzz` (make fuzz) adds clang and its runtime (libFuzzer, sanitizers).
set -eu
need=(build-essential pkg-config libuv1-dev libnng-dev libmsgpack-dev libcmocka-dev
      libssl-dev libjansson-dev libmbedtls-dev cppcheck clang-format python3)
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
