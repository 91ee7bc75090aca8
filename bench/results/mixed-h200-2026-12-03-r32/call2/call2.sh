#!/usr/bin/env bash
# session 2026-12-03 (fifth) call 2: where the cluster walk's time goes. Three processes, each
# bench_mixed's A/B (default pairs, then cluster, every variant twice in a row): the whole cluster
# walk (lockstep + multicast), ATTN_PREFILL_CLUSTER_TRIAL=lockstep (lockstep, every tile by its own
# CTA), ATTN_PREFILL_CLUSTER_TRIAL=launch (the plain kernel launched in 2-CTA clusters).
set -u
cd .dev-s17 && tar xJf pkg.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:${LD_LIBRARY_PATH:-}
P=/tmp/c2; mkdir -p $P
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $P/gpu.txt
for t in multicast lockstep launch; do
  [ $t = multicast ] && unset ATTN_PREFILL_CLUSTER_TRIAL || export ATTN_PREFILL_CLUSTER_TRIAL=$t
  timeout 100 python3 bench/gpu/bench_mixed.py --out $P --json ab_$t.json --peers "" \
    --only M3,M5,M6_prefill4k --variants auto,part_pf_c66 --caps 74 --walk-ab cluster --reps 15 > $P/ab_$t.log 2>&1
  echo "== $t rc=$? at ${SECONDS}s"
  python3 - $P/ab_$t.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for row in r["rows"]:
    a = row["attnd"]
    for k in sorted(a):
        if "@" in k: continue
        b = a.get(k + "@cluster")
        if b and "ms" in a[k] and "ms" in b:
            print("%-12s %-14s pairs %.4f cluster %.4f  x%.3f" % (row["batch"], k, a[k]["ms"], b["ms"], b["ms"] / a[k]["ms"]))
PY
done
unset ATTN_PREFILL_CLUSTER_TRIAL
ATTN_GPU_CASES=det timeout 60 ./build-gpu/tests/test_prefill_engine_gpu > $P/det.log 2>&1
echo "det rc=$? at ${SECONDS}s"; grep -E "det-|PASSED|FAILED" $P/det.log | cut -c1-150 | head -8
tar cJf $OUT/c2.tar.xz -C $P .
