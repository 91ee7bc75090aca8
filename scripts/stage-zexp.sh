#!/usr/bin/env bash
# Stage here (no GPU needed) what tests/gpu/run_zexp.sh runs on the GPU
# machine (issue 11: exported pools, kv_written, the graph-safe handshake,
# the measured ping-pong), into DEST (a git-ignored folder the device tool
# carries, e.g. /work/main/.dev-zexp):
#   bin.tar.xz      attnd (static, CUDA) and graph_handshake (static libattn)
#   py/attn, py/msgpack   the Python package and msgpack's pure-Python half
#   zexp_device.py, run_zexp.sh, RUN.txt (the one command)
# Usage: scripts/stage-zexp.sh DEST
set -euo pipefail
DEST=${1:?usage: $0 DEST}
cd "$(dirname "$0")/.."
B=build-static
make -s -j2 BUILD=$B STATIC=1 CUDA=1 $B/attnd $B/libattn.a $B/examples/graph_handshake
mp=$(python3 -c 'import msgpack, os; print(os.path.dirname(msgpack.__file__))')
rm -rf "$DEST"
mkdir -p "$DEST/py/attn" "$DEST/py/msgpack"
cp "$B/attnd" "$B/examples/graph_handshake" "$DEST/"
strip "$DEST/attnd" "$DEST/graph_handshake"
cp client/python/attn/*.py "$DEST/py/attn/"
cp "$mp"/*.py "$DEST/py/msgpack/"
cp tests/gpu/zexp_device.py tests/gpu/run_zexp.sh "$DEST/"
tar -C "$DEST" -cf - attnd graph_handshake | xz -6 -T2 >"$DEST/bin.tar.xz"
rm "$DEST/attnd" "$DEST/graph_handshake"
echo 'cd .dev-zexp && bash run_zexp.sh . "$OUT"' >"$DEST/RUN.txt"
echo "staged $(du -sh "$DEST" | cut -f1) in $DEST (tree $(git rev-parse --short HEAD))"
