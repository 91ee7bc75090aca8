#!/usr/bin/env bash
# session 2026-12-02i call 2: the prefill-first fork at a fine grid of caps, two libraries each in its
# own process, base (494d75c: the decode sub-plan split for every SM) then new (split for the SMs the
# capped prefill grid leaves), then base again; unified and M4 decode-only for the cost model's fit (no FlashInfer: the carry limit)
set -u
R=$PWD; D=$R/.dev-s48
mkdir -p /tmp/p && xz -dc $D/base.so.xz > /tmp/p/base.so && xz -dc $D/new.so.xz > /tmp/p/new.so
CAPS=48,52,56,60,62,64,66,68,70,72,74,76,80,84,88,92,96,100,104,108,112
V=partition,auto,unified$(for c in ${CAPS//,/ }; do printf ",part_pf_c%s" $c; done)
summ() {
python3 - $1 <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["rows"]:
    a=r["attnd"]; p=r["peers"]
    print(r["batch"], "part %.3f ba %.3f" % (p.get("part",{}).get("ms",0), p.get("ba",{}).get("ms",0)))
    print("  ", " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v))
PY
}
for L in base new base2; do
  lib=/tmp/p/${L%2}.so; mkdir -p $OUT/$L
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/bench_mixed.py --lib $lib --out $OUT/$L \
    --peers "" --deadline 140 --reps 15 --only M1,M2,M3,M5,M4_decode --no-extras \
    --caps $CAPS --variants $V > $OUT/$L/log 2>&1
  echo "== $L rc=$? at ${SECONDS}s"; summ $OUT/$L/mixed_bench.json
  grep -A6 '^batch ' $OUT/$L/log | head -7
done
for L in base new; do python3 bench/gpu/calibrate_mixed.py $OUT/$L/mixed_bench.json > $OUT/$L/calib.txt 2>&1; done
echo "done at ${SECONDS}s"
