#!/usr/bin/env bash
# End-to-end run on a GPU machine (the device tool): the static attnd/attnctl
# built here (make BUILD=build-static STATIC=1) serve the demo with the CUDA
# engine, record a bf16 decode capture on cuda:0 with trace + verify, replay
# it through a fresh daemon with --verify, and explain its diagnostics.
# Usage: scripts/device-e2e.sh BUILD_DIR OUT_DIR
set -u
B=${1:-build-static}
OUT=${2:-/tmp/e2e}
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")/.." && pwd)
cupti=$(find /usr/local/cuda* /usr/lib /opt -name 'libcupti.so*' 2>/dev/null | sort | head -1)
[ -n "$cupti" ] && export ATTN_CUPTI_LIB="$cupti"
{
    date -u; nvidia-smi -L; echo "cupti: ${cupti:-none}"
    "$B/attnctl" hello --local
} >"$OUT/env.txt" 2>&1
"$here/scripts/demo.sh" "$B" >"$OUT/demo.txt" 2>&1
echo "demo rc=$?" >>"$OUT/demo.txt"

cap=$here/examples/cuda/decode-bf16.capture
mkdir -p "$(dirname "$cap")"
"$B/attnctl" gen --out "$cap" --kind decode --device cuda:0 --dtype bf16 --head-dim 128 \
    --page-size 16 --qo-heads 32 --kv-heads 8 --requests 8 --steps 3 --layers 2 \
    --min-len 256 --max-len 16384 --pool gpu --seed 11 --trace --verify >"$OUT/gpu.txt" 2>&1
echo "gen rc=$?" >>"$OUT/gpu.txt"
cp "$cap" "$OUT/decode-bf16.capture"
tmp=$(mktemp -d)
"$B/attnd" --listen "ipc://$tmp/s" --engine auto 2>"$tmp/log" &
pid=$!
sleep 1
"$B/attnctl" replay "$cap" --url "ipc://$tmp/s" --verify >>"$OUT/gpu.txt" 2>&1
echo "replay rc=$?" >>"$OUT/gpu.txt"
kill -TERM $pid; wait $pid; echo "attnd exit $?" >>"$OUT/gpu.txt"
cat "$tmp/log" >>"$OUT/gpu.txt"
"$B/attnctl" explain "$cap" >"$OUT/explain.txt" 2>&1
echo "explain rc=$?" >>"$OUT/explain.txt"
tail -5 "$OUT/demo.txt"; grep -E "rc=|exit|mismatch" "$OUT/gpu.txt"; grep -E "^evidence|kernels|  attn" "$OUT/explain.txt" | sort | uniq -c | head -20
