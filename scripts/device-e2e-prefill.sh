#!/usr/bin/env bash
# End-to-end prefill/append on a GPU machine (the device tool), one command:
#   scripts/device-e2e-prefill.sh BUILD_DIR GPU_BUILD_DIR OUT_DIR
# BUILD_DIR: static attnd/attnctl built here (make BUILD=build-static STATIC=1);
# GPU_BUILD_DIR: tests/gpu/build.sh's folder (test_prefill_engine_gpu and
# libcmocka.so.0).  It runs, writing everything under OUT_DIR:
#  1. hello (cuda_decode and cuda_prefill available on cuda:0);
#  2. the cuda_prefill engine's GPU tests (random prefill/append/few-query/
#     mixed batches vs the CPU engine, plan once / run twice, pool bytes
#     after commit, no commit, an injected failure and a refused run), then
#     a quick sweep under compute-sanitizer memcheck;
#  3. attnctl gen --kind prefill, append and mixed on cuda:0 (bf16, d 128,
#     page 16) with --verify --trace, replayed through a fresh attnd with
#     --verify (0 mismatches and evidence level 6 expected), explained;
#  4. pool bytes before/after two calls every CUDA engine refuses, through
#     attnd (scripts/pool_refusal.py);
#  5. the prefill and append captures, to ship as examples/cuda/*.capture.
# The last lines printed are the summary (8 files under OUT_DIR at most).
set -u
B=${1:-build-static}
G=${2:-build-gpu}
OUT=${3:-/tmp/e2e-prefill}
mkdir -p "$OUT"
here=$(cd "$(dirname "$0")/.." && pwd)
cupti=$(find / -name 'libcupti.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
[ -n "$cupti" ] && export ATTN_CUPTI_LIB="$cupti"
export LD_LIBRARY_PATH="$G/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    date -u; nvidia-smi -L; echo "cupti: ${cupti:-none}"
    "$B/attnctl" hello --local
} >"$OUT/env.txt" 2>&1

# 2. the engine's GPU tests, then a quick sweep under memcheck
"$G/tests/test_prefill_engine_gpu" >"$OUT/gpu-tests.txt" 2>&1
echo "test_prefill_engine_gpu rc=$?" >>"$OUT/gpu-tests.txt"
# MC_TIMEOUT=0 leaves the memcheck out (scripts/device-check.sh runs it itself)
if [ "${MC_TIMEOUT:-150}" -gt 0 ] && command -v compute-sanitizer >/dev/null; then
    ATTN_GPU_QUICK=1 timeout "${MC_TIMEOUT:-150}" compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$G/tests/test_prefill_engine_gpu" >"$OUT/memcheck.txt" 2>&1
    echo "memcheck rc=$?" >>"$OUT/memcheck.txt"
fi

# 3. gen on cuda:0, replay through a fresh daemon with --verify
tmp=$(mktemp -d)
gen() { # name kind extra...
    "$B/attnctl" gen --out "$tmp/$1.capture" --kind "$2" --device cuda:0 --dtype bf16 \
        --head-dim 128 --page-size 16 --pool "$1" --verify --trace "${@:3}" >>"$OUT/e2e.txt" 2>&1
    echo "gen $1 rc=$?" >>"$OUT/e2e.txt"
}
gen prefill prefill --qo-heads 8 --kv-heads 2 --requests 3 --steps 2 --layers 1 \
    --min-len 100 --max-len 700 --seed 21
gen append append --qo-heads 8 --kv-heads 2 --requests 4 --steps 2 --layers 1 \
    --min-len 200 --max-len 1200 --seed 22
gen mixed mixed --qo-heads 16 --kv-heads 4 --requests 6 --steps 3 --layers 1 \
    --min-len 64 --max-len 2000 --seed 23
"$B/attnd" --listen "ipc://$tmp/s" --engine auto 2>"$tmp/log" &
pid=$!
sleep 1
for c in prefill append mixed; do
    "$B/attnctl" replay "$tmp/$c.capture" --url "ipc://$tmp/s" --verify >>"$OUT/e2e.txt" 2>&1
    echo "replay $c rc=$?" >>"$OUT/e2e.txt"
    "$B/attnctl" explain "$tmp/$c.capture" >"$tmp/explain-$c.txt" 2>&1
done

# 4. pool bytes around refused calls, through the same daemon
python3 "$here/scripts/pool_refusal.py" gen "$tmp" cuda:0
# stdout alone: attnctl's stderr lines, unbuffered, landed inside the
# buffered JSON replies and broke the parse (H200, 2026-12-01 15:02 UTC)
"$B/attnctl" run "$tmp/refusal.json" --url "ipc://$tmp/s" --keep-going >"$tmp/refusal.out" \
    2>"$tmp/refusal.err"
python3 "$here/scripts/pool_refusal.py" check "$tmp/refusal.out" >"$OUT/refusal.txt" 2>&1
sed 's/^/attnctl stderr: /' "$tmp/refusal.err" >>"$OUT/refusal.txt"
kill -TERM $pid; wait $pid; echo "attnd exit $?" >>"$OUT/e2e.txt"
cat "$tmp/log" >>"$OUT/e2e.txt"
cat "$tmp"/explain-*.txt >"$OUT/explain.txt"

# 5. the captures the demo replays (copied into examples/cuda/ by the caller)
cp "$tmp/prefill.capture" "$OUT/prefill-bf16.capture"
cp "$tmp/append.capture" "$OUT/append-bf16.capture"

# summary
{
    grep -E "PASSED|FAILED|worst|injected|rc=" "$OUT/gpu-tests.txt" | tail -8
    grep -E "ERROR SUMMARY|rc=" "$OUT/memcheck.txt" 2>/dev/null
    grep -E "rc=|exit|mismatch" "$OUT/e2e.txt"
    cat "$OUT/refusal.txt"
    for c in prefill append mixed; do
        echo "== $c"
        grep -E "^evidence|^selected|^schedule|^tiles" "$tmp/explain-$c.txt" | sort | uniq -c |
            sort -rn | head -8
        awk '/^  / && $2 ~ /^x[0-9]+$/ {print $1, $2}' "$tmp/explain-$c.txt" | sort | uniq -c |
            sort -rn | head -6
    done
    ls -la "$OUT"
}
