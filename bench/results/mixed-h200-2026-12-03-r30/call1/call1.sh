#!/usr/bin/env bash
# session 2026-12-03 (third) call 1 (tree d220d36's library: the prefill kernel with V's whole-page
# boxes from the second warp): the data to refit auto's cost model (planner/mixed_cost.c k_h200):
# the mixed batches at twelve prefill caps with the halves and the prefill kernel alone at each cap
# (bench_mixed.py's extras), two processes, FlashInfer partitioned and BatchAttention in the first.
set -u
R=$PWD; D=$R/.dev-s9
mkdir -p /tmp/p /tmp/x && xz -dc $D/lib.so.xz > /tmp/p/lib.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
# the serving-scale step of the engine sweep (new here), every schedule, fresh seed
xz -dc $D/tpe.xz > /tmp/tpe && chmod +x /tmp/tpe && cp $D/libcmocka.so.0 /tmp/
ATTN_GPU_CASES=mixed-scale LD_LIBRARY_PATH=/tmp timeout 150 /tmp/tpe > /tmp/x/scale.log 2>&1; echo "scale rc=$? at ${SECONDS}s"
grep -E "mixed-scale|PASSED|FAILED|worst" /tmp/x/scale.log | cut -c1-250 | head -14
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
mkdir -p /tmp/site && tar xJf $D/fisite.tar.xz -C /tmp/site  # bench/gpu/fi_slim_site.sh: no JIT headers, AOT caches only
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
CAPS=62,66,70,74,78,80,88,96,100,104,108,112
V=unified,partition,auto,part_serial; for c in ${CAPS//,/ }; do V=$V,part_pf_c$c; done
summ() {
python3 - $1 <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["rows"]:
    a=r["attnd"]; p=r["peers"]
    print(r["batch"], " ".join("%s %.3f" % (k, v["ms"]) for k,v in p.items() if "ms" in v))
    print("  ", " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v))
    k=r.get("kernel",{}); print("   kernel", " ".join("%s:%.3f" % (c, v["ms"]) for c,v in k.items() if isinstance(v,dict) and "ms" in v))
PY
}
PYTHONPATH=/tmp/site MAX_JOBS=14 timeout 40 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/x/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"; tail -3 /tmp/x/fiw.log
for L in a b; do
  mkdir -p /tmp/x/$L
  if [ $L = a ]; then P=part,ba; PP=/tmp/site; else P=""; PP=; fi
  PYTHONPATH=$PP PYTHONUNBUFFERED=1 timeout 230 python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out /tmp/x/$L \
    --peers "$P" --deadline 220 --reps 12 --only M1,M2,M3,M5,M4_decode,M4_prefill --caps $CAPS --variants $V > /tmp/x/$L/log 2>&1
  echo "== $L rc=$? at ${SECONDS}s"; summ /tmp/x/$L/mixed_bench.json
done
python3 bench/gpu/calibrate_mixed.py /tmp/x/a/mixed_bench.json /tmp/x/b/mixed_bench.json --prefill-fixed-us 15 --combine-us 10 > /tmp/x/calib.txt 2>&1
tail -30 /tmp/x/calib.txt
(cd /tmp/x && tar cJf $OUT/res.txz .)
echo "done at ${SECONDS}s"
