#!/usr/bin/env bash
# session 2026-12-03 (fourth) call 2: the pair walk (ATTN_PREFILL_WALK=pairs: sibling m tiles of
# one request side by side on CTAs 2j / 2j+1) against the queue walk, on a build of the working
# tree (main f0b7d09 + the pair walk): the engine sweep under pairs (full, fresh seed; the
# determinism cases compare queue, snake and pairs bytes), memcheck on the determinism cases,
# bench_mixed's A/B (every variant twice in a row, default then pairs, one process), ncu of M3's
# appends alone under pairs (DRAM bytes against call 1's 775 MB under queue).
set -u
cd .dev-s13 && tar xJf pkg.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
P=/tmp/c2; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $P/gpu.txt
ATTN_PREFILL_WALK=pairs timeout 170 ./build-gpu/tests/test_prefill_engine_gpu > $P/engine_pairs.log 2>&1
echo "sweep (pairs) rc=$? at ${SECONDS}s"; grep -E "seed|PASSED|FAILED|det-" $P/engine_pairs.log | head -12
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer | head -1)
ATTN_GPU_QUICK=1 ATTN_GPU_CASES=det ATTN_GPU_SANITIZER=1 timeout 120 "$CS" --tool memcheck \
  ./build-gpu/tests/test_prefill_engine_gpu > $P/memcheck_det.log 2>&1
echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $P/memcheck_det.log | tail -3
timeout 200 python3 bench/gpu/bench_mixed.py --out $P --json ab.json --peers "" \
  --only M1,M2,M3,M5,S2,S3 --variants auto,partition,part_pf,part_pf_c66,part_pf_c74,part_pf_c80,part_pf_c96,unified \
  --caps 74 --walk-ab pairs --reps 15 > $P/ab.log 2>&1
echo "bench rc=$? at ${SECONDS}s"
python3 - $P/ab.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for row in r["rows"]:
    a = row["attnd"]
    for k in sorted(a):
        if "@" in k: continue
        b = a.get(k + "@pairs") or a.get(k.replace("_half", "_half") + "@pairs")
        if b and "ms" in a[k] and "ms" in b:
            print("%-4s %-14s queue %.4f pairs %.4f  x%.3f  %s" % (row["batch"], k, a[k]["ms"], b["ms"],
                  b["ms"] / a[k]["ms"], (b.get("why", "")[b.get("why", "").find("walk"):][:60])))
PY
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2> /dev/null | head -1)
timeout 60 "$NCU" --clock-control none --kernel-name "regex:attn_prefill_attend" --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
  --csv python3 bench/gpu/bench_mixed.py --out $P --json ncu_m3p.json --peers "" --only M3 \
  --variants none --walk pairs --reps 1 > $P/ncu_pairs.csv 2> $P/ncu_pairs.err
echo "ncu rc=$? at ${SECONDS}s"; grep -E "dram__bytes_read|hit_rate|gpu__time" $P/ncu_pairs.csv | cut -d, -f13-15
tar cJf $OUT/c2.tar.xz -C $P .
