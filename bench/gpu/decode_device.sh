#!/usr/bin/env bash
# Issue 13's one device command for the decode kernel: the correctness sweep
# (fresh seed, CPU engine reference, NaN-poisoned outputs, page tails and
# unused pages), compute-sanitizer memcheck and racecheck on the quick
# sweep, then the benchmark with every peer and the new shapes
# (bench_decode.py --quick, plus today's kernel as `attnd_old`).
# Staged here by bench/gpu/stage_decode_device.sh DEST (DEST under the tree
# the device copies, e.g. /work/main/.dev-decode); on the device, from the
# repository root, with carry [DEST, .whl]:
#   D=DEST bash DEST/bench/decode_device.sh SECONDS $OUT
# Writes $OUT/logs.tgz and $OUT/decode-h200-<date>.{md,json}; prints a summary last.
set -u
BUDGET=${1:-170}
OUT=${2:-/tmp/decode-out}
D=$(cd "${D:?}" && pwd)
t0=$(date +%s)
L=$(mktemp -d)
mkdir -p "$OUT"
for f in "$D"/lib/*.xz "$D"/tests/*.xz; do # xz-compressed by the staging (python: no xz needed)
    [ -f "$f" ] && python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$f" && rm -f "$f"
done
chmod +x "$D"/tests/* 2>/dev/null
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
summary=$L/summary.txt
left() { echo $((BUDGET - ($(date +%s) - t0))); }
run() { # run NAME MAX CMD...: bounded by MAX and by what is left
    local name=$1 max=$2 l s
    shift 2
    l=$(left)
    [ "$l" -lt "$max" ] && max=$((l - 3))
    if [ "$max" -le 3 ]; then echo "$name: SKIPPED (budget)" >>"$summary"; return; fi
    s=$(date +%s)
    timeout "$max" "$@" >"$L/$name.log" 2>&1
    echo "$name: rc=$? ($(($(date +%s) - s)) s)" >>"$summary"
}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } >"$L/env.txt" 2>&1
run decode_sweep 150 "$D/tests/test_decode_gpu"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >"$L/pip.log" 2>&1 && export PYTHONPATH=/tmp/site
fi
export PYTHONUNBUFFERED=1
run bench $(($(left) - 75)) python3 "$D/bench/bench_decode.py" --quick --lib "$D/lib/libattn_cuda_bench.so" \
    --old "$D/lib/libattn_cuda_bench_old.so" --out "$OUT"
export ATTN_GPU_QUICK=1
run memcheck 35 compute-sanitizer --tool memcheck --leak-check no "$D/tests/test_decode_gpu"
run racecheck 40 compute-sanitizer --tool racecheck "$D/tests/test_decode_gpu"
{
    grep -hE "PASSED|FAILED|worst|seed" "$L/decode_sweep.log" | tail -8
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$L/memcheck.log" "$L/racecheck.log"
    grep -A30 "^us:" "$L/bench.log" | head -32
} >>"$summary" 2>&1
tar -C "$L" -czf "$OUT/logs.tgz" .
cat "$summary"
