#!/usr/bin/env bash
# Issue 13 round 2 (the copy-warp producer): one device command in steps,
# staged here by bench/gpu/stage_decode_device.sh DEST; on the device, from
# the repository root, with carry [DEST] (wheels in DEST/whl) or [DEST, .whl]:
#   D=DEST bash DEST/bench/bulk_device.sh STEPS SECONDS $OUT
# STEPS, in order: w FlashInfer's decode modules (from DEST/fi_aot.tar.xz
# when staged, else compiled in the background and packed to
# $OUT/fi_aot.tar.xz for the next call), t the correctness sweep (fresh
# seed), q the quick sweep, s the configuration sweep (timing), b the
# benchmark (--quick --old), m / r compute-sanitizer memcheck / racecheck on
# the quick sweep, then p ncu of NCU_CONFIGS (with what time is left).
# Writes $OUT/logs.tgz (+ prof.tgz, decode-h200-<date>.{md,json}); prints a summary last.
set -u
STEPS=${1:-wtpsbmr}
BUDGET=${2:-200}
OUT=${3:-/tmp/bulk-out}
D=$(cd "${D:?}" && pwd)
t0=$(date +%s)
L=$(mktemp -d)
P=$(mktemp -d)
mkdir -p "$OUT"
for f in "$D"/lib/*.xz "$D"/tests/*.xz; do
    [ -f "$f" ] && python3 -c 'import lzma,sys; open(sys.argv[1][:-3],"wb").write(lzma.open(sys.argv[1]).read())' "$f" && rm -f "$f"
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
PROF="python3 $D/bench/decode_profile.py --lib $D/lib/libattn_cuda_bench.so --out $P"
warm_pid=
W=.whl # the wheels: DEST/whl when staged there (the tree with .whl is over the copy limit)
ls "$D"/whl/*.whl >/dev/null 2>&1 && W=$D/whl
if has w && ls "$W"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$W"/*.whl >"$L/pip.log" 2>&1 && export PYTHONPATH=/tmp/site
    if [ -f "$D/fi_aot.tar.xz" ]; then
        mkdir -p /tmp/site/flashinfer/data/aot && tar -C /tmp/site/flashinfer/data/aot -xJf "$D/fi_aot.tar.xz" &&
            echo "fi aot: $(ls /tmp/site/flashinfer/data/aot | wc -l) modules from the staged tree" >>"$summary"
    else
        timeout $((BUDGET - 15)) python3 "$D/bench/fi_decode_warm.py" --pack "$OUT/fi_aot.tar.xz" >"$L/fi_warm.log" 2>&1 &
        warm_pid=$!
    fi
fi
has t && run decode_sweep 60 "$D/tests/test_decode_gpu"
has q && ATTN_GPU_QUICK=1 run decode_quick 30 "$D/tests/test_decode_gpu"
has s && run sweep 50 $PROF --mode sweep --configs ${SWEEP_CONFIGS:-nobulk,bulk1,bulk2,bulk4,bulk4_s2,bulk4_s4} \
    --shapes ${SWEEP_SHAPES:-B1_T32768,B2_T2048,B16_T8192,B64_T4096,B128_T8192,B256_T2048,d256_B32_T4096,d64_B64_T2048,P1_B16_T8192,B32_T1024}
if [ -n "$warm_pid" ] && has b; then wait "$warm_pid"; fi
reserve=5
has m && reserve=${RESERVE:-75}
has b && run bench $(($(left) - reserve)) python3 "$D/bench/bench_decode.py" --quick \
    --lib "$D/lib/libattn_cuda_bench.so" --old "$D/lib/libattn_cuda_bench_old.so" --out "$OUT"
export ATTN_GPU_QUICK=1
has m && run memcheck 30 compute-sanitizer --tool memcheck --leak-check no "$D/tests/test_decode_gpu"
has r && run racecheck 40 compute-sanitizer --tool racecheck "$D/tests/test_decode_gpu"
unset ATTN_GPU_QUICK
if has p; then # sections for the first of NCU_CONFIGS, L2 metrics for each
    SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats --section InstructionStats"
    NCU="ncu --clock-control none --nvtx --nvtx-include prof/"
    CFGS=${NCU_CONFIGS:-tmap nobulk}
    first=${CFGS%% *}
    run ncu_$first 40 $NCU $SEC -f -o "$P/$first" $PROF --mode ncu-attnd --configs $first --shapes ${NCU_SHAPES:-B1_T32768,B64_T4096,B128_T8192,B2_T2048}
    M=lts__t_sectors_op_read.sum,lts__t_sectors_op_read_lookup_hit.sum,lts__t_sectors_op_read_lookup_miss.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__bytes_read.sum,smsp__inst_executed.sum
    for c in $CFGS; do
        run ncu_l2_$c 20 $NCU --metrics $M --csv --page raw $PROF --mode ncu-attnd --configs $c --shapes B1_T32768,B128_T8192
    done
    [ -f "$P/$first.ncu-rep" ] && ncu -i "$P/$first.ncu-rep" --page details >"$P/$first.txt" 2>&1
fi
if [ -n "$warm_pid" ]; then
    l=$(left)
    [ "$l" -gt 5 ] && timeout $((l - 4)) tail --pid="$warm_pid" -f /dev/null
    cp "$L/fi_warm.log" "$P/" 2>/dev/null
fi
{
    grep -hE "PASSED|FAILED|worst|seed|Assert|FAIL" "$L/decode_sweep.log" "$L/decode_quick.log" 2>/dev/null | tail -8
    grep -hE "tmap<|bulk<" "$L/decode_quick.log" 2>/dev/null | tail -8
    grep -hE "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$L/memcheck.log" "$L/racecheck.log" 2>/dev/null
    tail -14 "$L/sweep.log" 2>/dev/null
    grep -A20 "^us:" "$L/bench.log" 2>/dev/null | head -22
    tail -4 "$L/fi_warm.log" 2>/dev/null
    for r in $(ls "$P"/*.txt 2>/dev/null | grep -v metrics); do
        [ -f "$r" ] && grep -E "^  [a-zA-Z_:]|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|Issued Ipc|Achieved Occupancy|Duration|Registers Per|Executed Ipc A|Memory Throughput" "$r" | head -60
    done
} >>"$summary" 2>&1
cp "$L"/*.log "$P/" 2>/dev/null
tar -C "$P" -czf "$OUT/prof.tgz" . 2>/dev/null
tar -C "$L" -czf "$OUT/logs.tgz" .
cat "$summary"
