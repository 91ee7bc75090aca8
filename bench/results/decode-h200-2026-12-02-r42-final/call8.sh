#!/usr/bin/env bash
# session 2026-12-02j call 8 (tree 062be6b's library, as call 6): a second process of the mixed batches
# with FlashInfer partitioned and BatchAttention, then the decode benchmark with every peer and the graph step
set -u
R=$PWD; D=$R/.dev-s58
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot && tar xJf $D/fi_dec.tar.xz -C /tmp/site/flashinfer/data/aot
MAX_JOBS=14 timeout 120 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"
mkdir -p $OUT/mx $OUT/dec
PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/mx \
  --peers part,ba --deadline 140 --reps 15 --no-extras --only M1,M2,M3,M5,M4_decode,M4_prefill \
  --variants partition,auto,part_pf_c74,part_pf_c80,part_pf_c104,part_pf_c108 --caps 74,80,104,108 > $OUT/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"; grep -A10 '^batch ' $OUT/mx/log | head -12
MAX_JOBS=14 timeout 150 python3 bench/gpu/fi_decode_warm.py > /tmp/fiw_dec.log 2>&1; echo "fi decode warm rc=$? at ${SECONDS}s"
PYTHONUNBUFFERED=1 timeout 250 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib.so --out $OUT/dec --quick > $OUT/dec/log 2>&1
echo "decode rc=$? at ${SECONDS}s"; grep -i "graph per-layer" $OUT/dec/log | head -2
python3 - $OUT/dec <<'PY'
import json,sys,glob,math
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
print(json.dumps(d.get("summary",{}).get("ratios_vs_attnd_default",{}).get("flashinfer_tc")), json.dumps(d.get("summary",{}).get("ratios_vs_attnd_default",{}).get("sdpa_cudnn_contiguous")))
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    a,t,c=g("attnd_fi"),g("flashinfer_tc"),g("sdpa_cudnn_contiguous")
    print("%-22s %7.1f  xFI-TC %s  xcuDNN %s" % (r["shape"], a or 0, ("%.3f"%(t/a)) if a and t else "-", ("%.3f"%(c/a)) if a and c else "-"))
PY
tar cJf $OUT/all.tar.xz -C $OUT mx dec; rm -rf $OUT/mx $OUT/dec
echo "done at ${SECONDS}s"
