#!/usr/bin/env bash
# session 2026-12-02i call 1 (tree 494d75c's library, bench_mixed.py --caps): the prefill-first fork
# at a fine grid of prefill caps on M1, M2, M3, M5 (and the prefill kernel alone at each cap),
# FlashInfer partitioned and BatchAttention in the same process
set -u
R=$PWD; D=$R/.dev-s47
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
MAX_JOBS=14 timeout 90 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/fiw.log 2>&1
echo "fi warm rc=$? at ${SECONDS}s"; tail -2 /tmp/fiw.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
mkdir -p $OUT/mx
PYTHONUNBUFFERED=1 timeout $((560 - SECONDS)) python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/mx \
  --peers part,ba --deadline $((540 - SECONDS)) --reps 15 --only M1,M2,M3,M5 \
  --caps 48,56,60,70,74,88,100,104,108 \
  --variants partition,auto,part_pf_c48,part_pf_c52,part_pf_c56,part_pf_c60,part_pf_c66,part_pf_c70,part_pf_c74,part_pf_c80,part_pf_c88,part_pf_c96,part_pf_c100,part_pf_c104,part_pf_c108,part_pf_c112 > $OUT/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - $OUT/mx/mixed_bench.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["rows"]:
    a=r["attnd"]; p=r["peers"]
    print(r["batch"], "part %.3f ba %.3f" % (p.get("part",{}).get("ms",0), p.get("ba",{}).get("ms",0)))
    print("  ", " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v))
    k=r.get("kernel",{}); print("   kernel", " ".join("%s:%.3f" % (c, v["ms"]) for c,v in k.items() if isinstance(v,dict) and "ms" in v))
    for h in ("prefill_half","decode_half"):
        if "ms" in a.get(h,{}): print("  ", h, "%.3f" % a[h]["ms"])
PY
grep -A6 '^batch ' $OUT/mx/log | head -8
echo "done at ${SECONDS}s"
