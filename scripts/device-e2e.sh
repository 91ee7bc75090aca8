#!/usr/bin/env bash
# End-to-end run on a GPU machine (the device tool): the static attnd/attnctl
# built here (make BUILD=build-static STATIC=1) record bf16 decode captures on
# cuda:0 with trace + verify (one with split plans, one where every request
# fits one split), replay them through a fresh daemon with --verify, explain
# their diagnostics, and run the demo (which replays examples/cuda/*.capture
# on the CUDA engine).
# Usage: scripts/device-e2e.sh BUILD_DIR OUT_DIR
set -u
B=${1:-build-static}
OUT=${2:-/tmp/e2e}
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")/.." && pwd)
cupti=$(find / -name 'libcupti.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
[ -n "$cupti" ] && export ATTN_CUPTI_LIB="$cupti"
{
    date -u; nvidia-smi -L; echo "cupti: ${cupti:-none}"
    "$B/attnctl" hello --local
} >"$OUT/env.txt" 2>&1

tmp=$(mktemp -d)
gen() { # name, extra gen flags
    "$B/attnctl" gen --out "$tmp/$1.capture" --kind decode --device cuda:0 --dtype bf16 \
        --head-dim 128 --page-size 16 --pool "$1" "${@:2}" >>"$OUT/gpu.txt" 2>&1
    echo "gen $1 rc=$?" >>"$OUT/gpu.txt"
}

# seed 0x0BH: what tracing costs on a B=64, T=4096 decode (H_q 32, H_kv 8,
# d 128, bf16): the same workload recorded with trace off and on; the runs'
# exec times (CUDA events) come from their diagnostics.
for t in off on; do
    flag=""
    [ $t = on ] && flag=--trace
    gen "cost_$t" --qo-heads 32 --kv-heads 8 --requests 64 --steps 12 --layers 1 \
        --min-len 4096 --max-len 4096 --seed 13 $flag
    "$B/attnctl" explain "$tmp/cost_$t.capture" | grep '^timing .* by cuda_events' |
        awk '{print $2}' | tail -n +3 | sort -g >"$tmp/cost_$t.us"
    echo "trace $t: runs $(wc -l <"$tmp/cost_$t.us"), median exec us $(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' "$tmp/cost_$t.us")" >>"$OUT/cost.txt"
    rm -f "$tmp/cost_$t.capture"
done
cc -O2 -o "$tmp/tlc" "$here/bench/trace_lock_cost.c" -lpthread && "$tmp/tlc" >>"$OUT/cost.txt"

gen split --trace --verify --qo-heads 8 --kv-heads 2 --requests 4 --steps 2 --layers 1 --min-len 1024 \
    --max-len 3072 --seed 11
gen nosplit --trace --verify --qo-heads 32 --kv-heads 8 --requests 32 --steps 2 --layers 1 --min-len 16 \
    --max-len 64 --seed 12
"$B/attnd" --listen "ipc://$tmp/s" --engine auto 2>"$tmp/log" &
pid=$!
sleep 1
for c in split nosplit; do
    "$B/attnctl" replay "$tmp/$c.capture" --url "ipc://$tmp/s" --verify >>"$OUT/gpu.txt" 2>&1
    echo "replay $c rc=$?" >>"$OUT/gpu.txt"
    "$B/attnctl" explain "$tmp/$c.capture" >"$OUT/explain-$c.txt" 2>&1
done
kill -TERM $pid; wait $pid; echo "attnd exit $?" >>"$OUT/gpu.txt"
cat "$tmp/log" >>"$OUT/gpu.txt"
# the shipped GPU capture: recorded here, replayed by the demo below
mkdir -p "$here/examples/cuda"
cp "$tmp/split.capture" "$here/examples/cuda/decode-bf16.capture"
cp "$tmp/split.capture" "$OUT/decode-bf16.capture"
"$here/scripts/demo.sh" "$B" >"$OUT/demo.txt" 2>&1
echo "demo rc=$?" >>"$OUT/demo.txt"
tail -3 "$OUT/demo.txt"; grep -E "rc=|exit|mismatch" "$OUT/gpu.txt"; cat "$OUT/cost.txt"
for c in split nosplit; do
    echo "== $c"; grep -E "^evidence|^schedule|^kernels|^  _Z" "$OUT/explain-$c.txt" |
        sed 's/^\(  _Z[^ ]*\).* x\([0-9]*\).*/\1 x\2/' | sort | uniq -c | sort -rn | head -12
done
