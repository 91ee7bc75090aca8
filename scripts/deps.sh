#!/usr/bin/env bash
# Install the Debian packages attnd needs to build and test, only those missing.
# Called by the Makefile before any build; quick when everything is present.
set -eu
need=(build-essential pkg-config libuv1-dev libnng-dev libmsgpack-dev libcmocka-dev
      libssl-dev libjansson-dev libmbedtls-dev cppcheck clang-format python3)
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
