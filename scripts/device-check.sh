#!/usr/bin/env bash
# Every GPU check of the tree in one device call, inside a time budget.
#
# Built here (no GPU needed) by `scripts/stage-device-check.sh DEST`, which
# packs into DEST/pkg.tgz: build-gpu/ (tests/gpu/build.sh, plus the decode
# library of the tree before today's kernel changes for the A/B),
# build-static/ (static attnd, attnctl), hb/{before,after}/bench_run_host
# (host cost per run of this tree and of the tree before the plan/run
# split).  On the device, from the repository root, with carry [DEST] (and
# ".whl" for stage b):
#   tar xzf DEST/pkg.tgz -C DEST && D=DEST bash scripts/device-check.sh STAGES SECONDS $OUT
# STAGES (default "cse"): c correctness sweeps (decode incl. the NaN cases,
# prefill kernel, prefill engine), s sanitizers on the quick sweeps (memcheck
# and racecheck), h host cost per run before/after, e end to end through
# attnd (prefill/append/mixed gen + replay --verify, pool bytes around
# refusals, the demo on the CUDA engine), b benchmarks (prefill peers,
# decode old/new A/B; needs .whl/ carried too).  Each stage gets what is
# left of SECONDS, so the call ends inside its limit; everything lands in
# $OUT/logs.tgz plus a short summary printed last.
set -u
ST=${1:-cse}
BUDGET=${2:-420}
OUT=${3:-/tmp/attn-check}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
D=$(cd "${D:-.dev-check}" && pwd)
G=$D/build-gpu
t0=$(date +%s)
L=$(mktemp -d)
export LD_LIBRARY_PATH=$G/lib:${LD_LIBRARY_PATH:-}
cupti=$(find / -name 'libcupti.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
[ -n "$cupti" ] && export ATTN_CUPTI_LIB="$cupti"
mkdir -p "$OUT"
summary="$L/summary.txt"

left() { echo $((BUDGET - ($(date +%s) - t0))); }
# run NAME MAX_SECONDS CMD...: bounded by MAX and by what is left
run() {
    local name=$1 max=$2
    shift 2
    local l
    l=$(left)
    [ "$l" -lt "$max" ] && max=$((l - 5))
    if [ "$max" -le 5 ]; then
        echo "$name: SKIPPED (budget)" >>"$summary"
        return
    fi
    local s
    s=$(date +%s)
    timeout "$max" "$@" >"$L/$name.log" 2>&1
    local rc=$?
    echo "$name: rc=$rc ($(($(date +%s) - s)) s)" >>"$summary"
}

{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv;
  echo "cupti: ${cupti:-none}"; } >"$L/env.txt" 2>&1

if [[ $ST == *c* ]]; then
    run decode_sweep 120 $G/tests/test_decode_gpu
    run prefill_kernel_sweep 120 $G/tests/test_prefill_gpu
    run prefill_engine 120 $G/tests/test_prefill_engine_gpu
    [ -x $G/tests/test_restore_gpu ] && run restore 60 $G/tests/test_restore_gpu
fi
if [[ $ST == *s* ]]; then
    export ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1 # placement tests mean nothing under a sanitizer
    run memcheck_decode 60 compute-sanitizer --tool memcheck --leak-check no $G/tests/test_decode_gpu
    run memcheck_prefill_engine 150 compute-sanitizer --tool memcheck --leak-check no \
        $G/tests/test_prefill_engine_gpu
    run racecheck_prefill 90 compute-sanitizer --tool racecheck $G/tests/test_prefill_gpu
    run racecheck_decode 60 compute-sanitizer --tool racecheck $G/tests/test_decode_gpu
    unset ATTN_GPU_QUICK ATTN_GPU_SANITIZER
fi
if [[ $ST == *h* ]]; then
    run host_before 40 $D/hb/before/bench_run_host 300
    run host_after 40 $D/hb/after/bench_run_host 300
fi
if [[ $ST == *e* ]]; then
    mkdir -p "$L/e2e"
    export MC_TIMEOUT=0
    run e2e_prefill 150 bash scripts/device-e2e-prefill.sh "$D/build-static" "$G" "$L/e2e"
    run demo 60 bash scripts/demo.sh "$D/build-static"
fi
if [[ $ST == *b* ]]; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl >"$L/pip.log" 2>&1 && export PYTHONPATH=/tmp/site
    fi
    export PYTHONUNBUFFERED=1
    run ab_decode 90 python3 bench/gpu/ab_decode.py --old $G/lib/libattn_cuda_bench_old.so \
        --new $G/lib/libattn_cuda_bench.so --rounds 6 --out "$L"
    run bench_prefill 300 python3 bench/gpu/bench_prefill.py --lib $G/lib/libattn_cuda_bench.so \
        --out "$L" --deadline $(($(left) - 40))
fi

# the figures worth reading first
{
    grep -hE "PASSED|FAILED|worst|seed=" "$L"/*sweep*.log "$L"/prefill_engine.log "$L"/restore.log 2>/dev/null | tail -12
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$L"/memcheck_*.log "$L"/racecheck_*.log 2>/dev/null
    grep -hE "nonfinite" "$L"/decode_sweep.log 2>/dev/null | grep -c "finite O in req 0: 0," |
        sed 's/^/NaN cases with every O NaN: /'
    tail -n 8 "$L"/host_*.log 2>/dev/null
    tail -n 12 "$L/e2e_prefill.log" 2>/dev/null
    tail -n 3 "$L/demo.log" 2>/dev/null
    tail -n 14 "$L"/ab_decode.log "$L"/bench_prefill.log 2>/dev/null
} >>"$summary" 2>&1
tar -C "$L" -czf "$OUT/logs.tgz" .
cp "$L"/e2e/*.capture "$OUT/" 2>/dev/null
cat "$summary"
