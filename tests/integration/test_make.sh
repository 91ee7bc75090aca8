#!/usr/bin/env bash
# `make` with no target, in a fresh copy of the tree, builds attnd, attnctl
# and libattn (issue 9 item 13: the build-stamp rule used to be the default
# goal, so `make` compiled one object file); a second `make` compiles
# nothing; changing CUDA=0/1 rebuilds every object (ATTN_WITH_CUDA changes
# what daemon/ and kernels/cuda/ compile to); `make install` stages the
# unit, sysusers.d/tmpfiles.d entries, default configuration and docs, and
# scripts/verify-systemd.sh finds them clean (issue 9 item 16).
set -euo pipefail
src=${ATTN_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the outer make (make test BUILD=... CUDA=...) must not leak its variables in
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
fail() { echo "test_make: FAIL: $*" >&2; exit 1; }

# the tree as a fresh clone would have it, plus uncommitted work
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        xargs -0 cp --parents -t "$work")
else
    (cd "$src" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -C "$work" -xf -
fi
cd "$work"
[ ! -e build ] || fail "the copy carries a build directory"

make -j2 CUDA=0 >make1.log 2>&1 || { tail -20 make1.log; fail "make exited non-zero"; }
for p in build/attnd build/attnctl build/libattn.a build/libattn.so; do
    [ -f "$p" ] || { tail -20 make1.log; fail "make with no target did not build $p"; }
done
build/attnd --help >/dev/null || fail "the built attnd does not run"
build/attnctl --help >/dev/null || fail "the built attnctl does not run"

make -j2 CUDA=0 >make2.log 2>&1 || fail "second make exited non-zero"
if grep -q -- ' -c ' make2.log; then
    grep -- ' -c ' make2.log | head -3
    fail "a second make with the same flags recompiled"
fi

# make install (staged): binaries, library, the systemd unit with its
# sysusers.d/tmpfiles.d entries, the default configuration, the docs
root=$work/root
make CUDA=0 install DESTDIR="$root" >install.log 2>&1 || { tail -20 install.log; fail "make install"; }
for p in usr/local/bin/attnd usr/local/bin/attnctl usr/local/lib/libattn.so \
    usr/local/lib/pkgconfig/libattn.pc usr/local/lib/systemd/system/attnd.service \
    usr/local/lib/sysusers.d/attnd.conf usr/local/lib/tmpfiles.d/attnd.conf etc/attnd/attnd.json \
    usr/local/share/doc/attnd/daemon.md usr/local/share/doc/attnd/LICENSE; do
    [ -f "$root/$p" ] || fail "make install did not install /$p"
done
grep -q '^ExecStart=/usr/local/bin/attnd --config /etc/attnd/attnd.json' \
    "$root/usr/local/lib/systemd/system/attnd.service" || fail "the installed unit's ExecStart"
echo '{"listen": "ipc:///tmp/mine.sock"}' >"$root/etc/attnd/attnd.json"
make CUDA=0 install DESTDIR="$root" >install2.log 2>&1 || fail "second make install"
grep -q mine.sock "$root/etc/attnd/attnd.json" || fail "make install overwrote an existing configuration"
cp config/attnd.json "$root/etc/attnd/attnd.json"
if command -v systemd-analyze >/dev/null 2>&1; then
    ./scripts/verify-systemd.sh "$root" || fail "scripts/verify-systemd.sh on the staged install"
else
    echo "test_make: systemd-analyze not installed; verify-systemd skipped (make verify-systemd installs it)"
fi
# a flag change must rebuild objects that do not embed the build id
make -n CUDA=1 >make3.log 2>&1 || true
for o in build/obj/daemon/pool.o build/obj/engines/cuda/engine.o build/obj/protocol/codec.o; do
    grep -q -- "-o $o\$" make3.log || fail "CUDA=0 -> CUDA=1 does not rebuild $o"
done
make -n CUDA=0 >make4.log 2>&1 || true
grep -q -- "-o build/obj/daemon/pool.o\$" make4.log || fail "CUDA=1 -> CUDA=0 does not rebuild daemon/pool.o"
make -n CUDA=0 SAN=1 >make5.log 2>&1 || true
grep -q -- "-o build/obj/protocol/codec.o\$" make5.log || fail "SAN=0 -> SAN=1 does not rebuild protocol/codec.o"
echo "test_make: make builds attnd, attnctl, libattn.{a,so}; flag changes rebuild; install stages the unit, config and docs; ok"
