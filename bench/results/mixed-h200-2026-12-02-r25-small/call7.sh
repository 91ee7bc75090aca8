#!/usr/bin/env bash
# session 2026-12-02i call 7 (tree b4538b1's library): small mixed steps (S1-S4 of bench_mixed.py),
# where a fork's fixed costs weigh most: partition serial (forced), auto, forks at three caps; twice
set -u
R=$PWD; D=$R/.dev-s53
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
for L in a b; do
  mkdir -p $OUT/$L
  PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/$L \
    --peers "" --deadline 110 --reps 30 --only S1,S2,S3,S4,M2 --no-extras \
    --variants part_serial,partition,auto,part_pf_c62,part_pf_c66,part_pf_c100 --caps 62,100 > $OUT/$L/log 2>&1
  echo "== $L rc=$? at ${SECONDS}s"
  python3 - $OUT/$L/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-4s" % r["batch"], " ".join("%s:%.4f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v), "| auto:", a.get("auto",{}).get("why","")[:230])
PY
done
echo "done at ${SECONDS}s"
