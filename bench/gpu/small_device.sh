#!/usr/bin/env bash
# Issue 13 round 3 (latency-bound decode shapes): one device command in steps,
# staged here by bench/gpu/stage_decode_device.sh DEST; on the device, from
# the repository root, with carry [DEST, .dev-fi] (FlashInfer's wheels and
# its decode AOT modules, fi_aot_decode.tar.xz):
#   D=DEST bash DEST/bench/small_device.sh STEPS SECONDS $OUT
# STEPS, run in the order given (w first): w FlashInfer from .dev-fi, s the configuration sweep
# (SWEEP_CONFIGS x SWEEP_SHAPES, decode_profile.py), b the benchmark (all
# shapes, BENCH_ATTND runs, --old), a the A/B of this build and --old
# (ab_decode.py, AB_SHAPES x AB_CONFIGS, alternating rounds), n ncu metrics (NCU_CONFIGS of attnd and
# FlashInfer-TC at NCU_SHAPES; NCU_SECTIONS: ncu sections instead), t the correctness sweep (fresh seed), m / r
# compute-sanitizer memcheck / racecheck on the quick sweep.  FI_SITE: FlashInfer's
# wheels unpacked (.dev-fislim/fi_site.tar.xz) instead of the wheels of $FI.  Every step is
# bounded by its own timeout and by what is left of SECONDS.
# Writes $OUT/logs.tgz (+ decode-h200-<date>.{md,json}); prints a summary last.
set -u
STEPS=${1:-wsbn}
BUDGET=${2:-150}
OUT=${3:-/tmp/small-out}
D=$(cd "${D:?}" && pwd)
FI=${FI:-.dev-fi}
t0=$(date +%s)
L=$(mktemp -d)
mkdir -p "$OUT"
for f in "$D"/lib/*.xz "$D"/tests/*.xz; do
    [ -f "$f" ] && xz -d -T4 "$f"
done
chmod +x "$D"/tests/* 2>/dev/null
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
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
has() { case "$STEPS" in *$1*) return 0 ;; esac; return 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; ncu --version | tail -1; } >"$L/env.txt" 2>&1
PROF="python3 $D/bench/decode_profile.py --lib $D/lib/libattn_cuda_bench.so --out $L"
if has w; then
    mkdir -p /tmp/site
    if [ -n "${FI_SITE:-}" ]; then # FlashInfer's wheels already unpacked (.dev-fislim/fi_site.tar.xz)
        tar -C /tmp/site -xJf "$FI_SITE" && export PYTHONPATH=/tmp/site
    else
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site "$FI"/*.whl >"$L/pip.log" 2>&1 && export PYTHONPATH=/tmp/site
    fi
    mkdir -p /tmp/site/flashinfer/data/aot &&
        tar -C /tmp/site/flashinfer/data/aot -xJf "$FI/fi_aot_decode.tar.xz" &&
        echo "fi aot: $(ls /tmp/site/flashinfer/data/aot | wc -l) modules" >>"$summary"
fi
step_s() {
    run sweep ${SWEEP_MAX:-40} $PROF --mode sweep --configs ${SWEEP_CONFIGS:-fused,pdl} \
        --shapes ${SWEEP_SHAPES:-B2_T2048,B1_T32768}
}
step_a() {
    run ab ${AB_MAX:-40} python3 "$D/bench/ab_decode.py" --old "$D/lib/libattn_cuda_bench_old.so" \
        --new "$D/lib/libattn_cuda_bench.so" --rounds ${AB_ROUNDS:-4} --shapes ${AB_SHAPES:-B1_T32768,g8_B64_T4096} \
        --configs ${AB_CONFIGS:-fi,fi_reducer} --out "$L"
}
step_b() {
    run bench ${BENCH_MAX:-90} python3 "$D/bench/bench_decode.py" --attnd ${BENCH_ATTND:-fi} \
        --lib "$D/lib/libattn_cuda_bench.so" --old "$D/lib/libattn_cuda_bench_old.so" --out "$OUT" ${BENCH_ARGS:-}
}
step_n() {
    M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__occupancy_limit_shared_mem,sm__throughput.avg.pct_of_peak_sustained_elapsed${NCU_EXTRA:-}
    NCU="ncu --clock-control none --nvtx --nvtx-include prof/ --metrics $M --csv --page raw"
    if [ -n "${NCU_SECTIONS:-}" ]; then # whole sections (details page) instead of the metrics
        NCU="ncu --clock-control none --nvtx --nvtx-include prof/ --csv --page details"
        for x in $NCU_SECTIONS; do NCU="$NCU --section $x"; done
    fi
    NS=${NCU_SHAPES:-B2_T2048,B1_T32768,g8_B64_T4096,d64_B64_T2048}
    for c in ${NCU_CONFIGS:-fused}; do
        run ncu_$c ${NCU_MAX:-30} $NCU $PROF --mode ncu-attnd --configs $c --shapes $NS
    done
    [ -n "${NCU_FITC-1}" ] && run ncu_fitc ${NCU_MAX:-30} $NCU $PROF --mode ncu-fitc --shapes $NS
}
step_t() { run decode_sweep ${SWEEP_TEST_MAX:-70} "$D/tests/test_decode_gpu"; }
step_m() { ATTN_GPU_QUICK=1 run memcheck ${MEMCHECK_MAX:-35} compute-sanitizer --tool memcheck --leak-check no "$D/tests/test_decode_gpu"; }
step_r() { ATTN_GPU_QUICK=1 run racecheck ${RACECHECK_MAX:-45} compute-sanitizer --tool racecheck "$D/tests/test_decode_gpu"; }
# the steps in the order STEPS names them (w first when named)
for ((i = 0; i < ${#STEPS}; i++)); do
    c=${STEPS:$i:1}
    [ "$c" = w ] || step_$c
done
{
    grep -hE "PASSED|FAILED|worst|seed|Assert|FAIL" "$L/decode_sweep.log" 2>/dev/null | tail -8
    for k in producer_tc_tmap_persist producer_tc_tmap producer_tc_bulk producer_tc producer_simt; do
        echo "sweep $k: $(grep -o "$k<[^ ]*" "$L/decode_sweep.log" 2>/dev/null | grep -c "^$k<")"
    done
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$L/memcheck.log" "$L/racecheck.log" 2>/dev/null
    tail -${SWEEP_TAIL:-16} "$L/sweep.log" 2>/dev/null
    grep -E "new/old" "$L/ab.log" 2>/dev/null | sed 's/  rel_l2.*median round ratio/ median/' 
    grep -A20 "^us:" "$L/bench.log" 2>/dev/null | head -22
    for f in "$L"/ncu_*.log; do # kernel name, then the metrics, one line per launch
        [ -f "$f" ] && echo "== $(basename "$f")" && python3 - "$f" <<'EOF'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]
    for r in rows[2:]:
        d = dict(zip(h, r))
        k = d.get("Kernel Name", "?")[:48]
        m = [d.get(x, "") for x in h if "__" in x]
        print(k, " ".join(m))
    print("cols:", " ".join(x for x in h if "__" in x))
EOF
        grep -h "^plan" "$f" | cut -c1-160
    done
} >>"$summary" 2>&1
tar -C "$L" -czf "$OUT/logs.tgz" .
cat "$summary"
