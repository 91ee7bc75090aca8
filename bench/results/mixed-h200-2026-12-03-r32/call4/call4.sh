#!/usr/bin/env bash
# session 2026-12-03 (fifth) call 4: the review mend (unit_at reads through queue_entry; the attend
# launch in one helper; no behaviour change) on the device: the determinism cases (queue, snake,
# pairs, cluster bytes), the quick engine sweep (default walk and cluster), bench_mixed on M1-M5
# and M4 (attnd's variants, no peer), against call 3's figures.
set -u
cd .dev-s19 && tar xJf pkg.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
P=/tmp/c4; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $P/gpu.txt
ATTN_GPU_QUICK=1 timeout 90 ./build-gpu/tests/test_prefill_engine_gpu > $P/sweep_default.log 2>&1
echo "sweep (default) rc=$? at ${SECONDS}s"; grep -E "det-|worst|PASSED|FAILED" $P/sweep_default.log | cut -c1-170
ATTN_PREFILL_WALK=cluster ATTN_GPU_QUICK=1 timeout 60 ./build-gpu/tests/test_prefill_engine_gpu > $P/sweep_cluster.log 2>&1
echo "sweep (cluster) rc=$? at ${SECONDS}s"; grep -E "worst|PASSED|FAILED" $P/sweep_cluster.log
timeout 150 python3 bench/gpu/bench_mixed.py --out $P --json bench.json --peers "" \
  --only M1,M2,M3,M5,M4_decode,M4_prefill --variants auto,partition,part_pf_c66,part_pf_c74 --caps 74 --reps 15 > $P/bench.log 2>&1
echo "bench rc=$? at ${SECONDS}s"
python3 - $P/bench.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for row in r["rows"]:
    a = row["attnd"]
    print("%-11s" % row["batch"], "  ".join("%s %.4f" % (k, a[k]["ms"]) for k in sorted(a) if "ms" in a[k]))
PY
tar cJf $OUT/c4.tar.xz -C $P .
