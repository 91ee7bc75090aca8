#!/usr/bin/env bash
# session 2026-12-03 (fourth) call 1: issue 12's documented device run on main f0b7d09
# (stage_mixed.sh with STATIC=1 and the FlashInfer JIT cache here; run_mixed.sh there), then
# ncu sections of M3's two halves alone (the appends' prefill kernel on 132 CTAs, the decode rows'
# kernels) to see where M3's time goes, then the demo.
set -u
R=$PWD
cd .dev-s12 && tar xJf pkg.tar.xz
FI_DIR=/nonexistent FI_SITE=fisite.tar.xz FI_POD_AOT=fi_pod_aot.tar.xz FULL=1 TEST_TIMEOUT=200 BUDGET=470 \
  WARM_TIMEOUT=120 BENCH_START_BY=200 BENCH_TIMEOUT=220 \
  BENCH_ARGS="--caps 66,70,74,78,80,100,104 --reps 15" bash bench/gpu/run_mixed.sh wtmneb
echo "run_mixed done at ${SECONDS}s"
P=/tmp/prof; mkdir -p $P
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
for k in "attn_prefill_attend" "producer"; do
  timeout 60 "$NCU" --clock-control none --kernel-name "regex:$k" --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section SchedulerStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
    --csv python3 bench/gpu/bench_mixed.py --out $P --json ncu_m3.json --peers "" --only M3 \
    --variants none --reps 1 > $P/ncu_$k.csv 2> $P/ncu_$k.err
  echo "ncu $k rc=$? at ${SECONDS}s"
done
tar cJf $OUT/prof.tar.xz -C $P .
cd "$R"
timeout 60 bash scripts/demo.sh .dev-s12/build-static > $OUT/demo.log 2>&1; echo "demo rc=$? at ${SECONDS}s"
grep -E "PASS|FAIL|mismatch|cuda" $OUT/demo.log | tail -6
