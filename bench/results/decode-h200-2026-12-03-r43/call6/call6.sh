#!/usr/bin/env bash
# session 2026-12-03 (sixth) call 6, tree 7910253 (the review mend: PairJob::pad; only the clustered
# attend kernel's code changed): as r32's call 1 -- the determinism cases (queue, snake, pairs and
# cluster bytes compared), bench_mixed's A/B pairs against cluster (one process), the quick engine
# sweep under cluster, memcheck on the determinism cases -- then the quick sweep under the default walk.
set -u
cd .dev-s25 && tar xJf pkg.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
P=/tmp/c1; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $P/gpu.txt
ATTN_GPU_CASES=det timeout 90 ./build-gpu/tests/test_prefill_engine_gpu > $P/det.log 2>&1
rc=$?; echo "det rc=$rc at ${SECONDS}s"; grep -E "det-|PASSED|FAILED|seed" $P/det.log | cut -c1-260 | head -12
if [ $rc -eq 0 ]; then
timeout 200 python3 bench/gpu/bench_mixed.py --out $P --json ab.json --peers "" \
  --only M1,M3,M5,M4_prefill --variants auto,partition \
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
fi
ATTN_GPU_QUICK=1 timeout 80 ./build-gpu/tests/test_prefill_engine_gpu > $P/sweep_default.log 2>&1
echo "sweep (default, quick) rc=$? at ${SECONDS}s"; grep -E "seed|PASSED|FAILED|worst" $P/sweep_default.log | cut -c1-200 | head -6
cp $P/*.log $P/ab.json $OUT/ 2>/dev/null; echo "done at ${SECONDS}s"
