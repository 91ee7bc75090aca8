#!/usr/bin/env bash
# Build here (no GPU needed) what scripts/device-check.sh runs on the GPU
# machine, and pack it into DEST/pkg.tgz (the device tool copies the tree,
# so DEST is a git-ignored folder of it, e.g. .dev-check):
#   build-gpu/     tests/gpu/build.sh: decode, prefill-kernel and prefill-
#                  engine GPU tests, the benchmark library, libcmocka; plus
#                  lib/libattn_cuda_bench_old.so, the benchmark library of
#                  OLD_REV (default e676a38, before today's kernel changes)
#   build-static/  static attnd and attnctl (make STATIC=1)
#   hb/before, hb/after   bench/gpu/bench_run_host built in the tree before
#                  the plan/run split (BEFORE_REV, default bda778b) and here
# OLD_REV=none: only this tree (no A/B library, no hb/; stages c, s, e).
# Usage: scripts/stage-device-check.sh DEST
set -euo pipefail
DEST=${1:?usage: $0 DEST}
OLD_REV=${OLD_REV:-e676a38}
BEFORE_REV=${BEFORE_REV:-bda778b}
cd "$(dirname "$0")/.."
root=$PWD
tests/gpu/build.sh build-gpu >/dev/null
make -s -j2 BUILD=build-static STATIC=1 all
if [ "$OLD_REV" = none ]; then
    p=$(mktemp -d)
    trap 'rm -rf "$p"' EXIT
    mkdir -p "$p/build-gpu/tests" "$p/build-gpu/lib" "$p/build-static"
    cp build-gpu/tests/test_decode_gpu build-gpu/tests/test_prefill_gpu \
        build-gpu/tests/test_prefill_engine_gpu build-gpu/tests/test_restore_gpu "$p/build-gpu/tests/"
    cp -L build-gpu/lib/libcmocka.so.0 build-gpu/lib/libattn_cuda_bench.so "$p/build-gpu/lib/"
    cp build-static/attnd build-static/attnctl "$p/build-static/"
    strip "$p"/build-gpu/tests/* "$p"/build-static/*
else
    # the host-cost bench builds and then runs; here the run fails (no GPU)
    bash bench/gpu/host_bench.sh build-gpu 0 >/dev/null 2>&1 || true
    test -x build-gpu/bench/bench_run_host

    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # other revisions, built from git archives (their own build scripts)
    mkdir -p "$tmp/old" "$tmp/before"
    git archive "$OLD_REV" | tar -x -C "$tmp/old"
    (cd "$tmp/old" && tests/gpu/build.sh build-gpu >/dev/null)
    git archive "$BEFORE_REV" | tar -x -C "$tmp/before"
    cp bench/gpu/bench_run_host.c bench/gpu/host_bench.sh "$tmp/before/bench/gpu/"
    (cd "$tmp/before" && bash bench/gpu/host_bench.sh build-gpu 0 >/dev/null 2>&1 || true)
    test -x "$tmp/before/build-gpu/bench/bench_run_host"

    p=$tmp/pkg
    mkdir -p "$p/build-gpu/tests" "$p/build-gpu/lib" "$p/build-static" "$p/hb/before" "$p/hb/after"
    cp build-gpu/tests/test_decode_gpu build-gpu/tests/test_prefill_gpu \
        build-gpu/tests/test_prefill_engine_gpu "$p/build-gpu/tests/"
    cp -L build-gpu/lib/libcmocka.so.0 build-gpu/lib/libattn_cuda_bench.so "$p/build-gpu/lib/"
    cp "$tmp/old/build-gpu/lib/libattn_cuda_bench.so" "$p/build-gpu/lib/libattn_cuda_bench_old.so"
    cp build-static/attnd build-static/attnctl "$p/build-static/"
    cp build-gpu/bench/bench_run_host "$p/hb/after/"
    cp "$tmp/before/build-gpu/bench/bench_run_host" "$p/hb/before/"
    strip "$p"/build-gpu/tests/* "$p"/build-static/* "$p"/hb/*/bench_run_host
fi
mkdir -p "$DEST"
tar -C "$p" -czf "$DEST/pkg.tgz" .
echo "staged $(du -sh "$DEST/pkg.tgz" | cut -f1) in $DEST (tree $(git rev-parse --short HEAD))"
