#!/usr/bin/env bash
# session 2026-12-03 (fifth) call 1: the cluster walk (ATTN_PREFILL_WALK=cluster: the pair walk's
# CTA pairs launched as 2-CTA clusters, the sibling units' K/V tiles multicast) on a build of
# main d6fb095 + the cluster walk: the determinism cases (queue, snake, pairs and cluster bytes
# compared; a deadlock guard), bench_mixed's A/B (every variant twice in a row, default pairs then
# cluster, one process), the quick engine sweep under cluster, memcheck on the determinism cases.
set -u
cd .dev-s17 && tar xJf pkg.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
P=/tmp/c1; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $P/gpu.txt
ATTN_GPU_CASES=det timeout 90 ./build-gpu/tests/test_prefill_engine_gpu > $P/det.log 2>&1
rc=$?; echo "det rc=$rc at ${SECONDS}s"; grep -E "det-|PASSED|FAILED|seed" $P/det.log | cut -c1-260 | head -12
if [ $rc -eq 0 ]; then
timeout 200 python3 bench/gpu/bench_mixed.py --out $P --json ab.json --peers "" \
  --only M1,M2,M3,M5,M4_prefill,M6_prefill4k --variants auto,partition,part_pf_c66,part_pf_c74,part_pf_c80,unified \
  --caps 74 --walk-ab cluster --reps 15 > $P/ab.log 2>&1
echo "bench rc=$? at ${SECONDS}s"
python3 - $P/ab.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for row in r["rows"]:
    a = row["attnd"]
    for k in sorted(a):
        if "@" in k: continue
        b = a.get(k + "@cluster")
        if b and "ms" in a[k] and "ms" in b:
            w = b.get("why", ""); 
            print("%-12s %-14s pairs %.4f cluster %.4f  x%.3f  %s" % (row["batch"], k, a[k]["ms"], b["ms"],
                  b["ms"] / a[k]["ms"], w[w.find("walk"):][:70]))
        elif b:
            print(row["batch"], k, "pairs", a[k].get("ms", a[k].get("error")), "cluster", b.get("ms", b.get("error")))
PY
ATTN_PREFILL_WALK=cluster ATTN_GPU_QUICK=1 timeout 110 ./build-gpu/tests/test_prefill_engine_gpu > $P/sweep_cluster.log 2>&1
echo "sweep (cluster, quick) rc=$? at ${SECONDS}s"; grep -E "seed|PASSED|FAILED|worst|walk cluster" $P/sweep_cluster.log | cut -c1-200 | head -8
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
ATTN_GPU_QUICK=1 ATTN_GPU_CASES=det ATTN_GPU_SANITIZER=1 timeout 100 "$CS" --tool memcheck \
  ./build-gpu/tests/test_prefill_engine_gpu > $P/memcheck_det.log 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $P/memcheck_det.log | tail -3
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
for w in pairs cluster; do
timeout 50 "$NCU" --clock-control none --kernel-name "regex:attn_prefill_attend" --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum \
  --csv python3 bench/gpu/bench_mixed.py --out $P --json ncu_m3_$w.json --peers "" --only M3 \
  --variants none --walk $w --reps 1 > $P/ncu_$w.csv 2> $P/ncu_$w.err
echo "ncu $w rc=$? at ${SECONDS}s"; grep -E "dram__bytes_read|hit_rate|gpu__time|srcunit_tex|L2 Cache Throughput" $P/ncu_$w.csv | awk -F'","' '{print $(NF-2), $(NF-1), $NF}' | head -6
done
fi
tar cJf $OUT/c1.tar.xz -C $P .
