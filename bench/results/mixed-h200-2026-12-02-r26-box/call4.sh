#!/usr/bin/env bash
# session 2026-12-02j call 4 (library of the working tree: the copy warps without run-time divisions):
# (1) the mixed batches at 16 prefill caps and unified, three processes (the constants of auto's model
# refitted on them); (2) the decode benchmark with every peer (FlashInfer TC, cuDNN) and the graph step.
# examples/cuda/decode-bf16.capture moved aside so the carry fits 64 MiB (nothing here reads it).
set -u
R=$PWD; D=$R/.dev-s56
mkdir -p /tmp/p && xz -dc $D/lib_box.so.xz > /tmp/p/lib.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
V=unified,partition,auto; CAPS=58,62,66,70,74,78,80,84,88,92,96,100,104,108,112,120
for c in ${CAPS//,/ }; do V=$V,part_pf_c$c; done
for i in 1 2 3; do
  mkdir -p $OUT/mx$i
  PYTHONUNBUFFERED=1 timeout 100 python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/mx$i \
    --peers "" --deadline 90 --reps 12 --only M1,M2,M3,M5,M4_decode --no-extras --variants $V --caps $CAPS > $OUT/mx$i/log 2>&1
  echo "== mixed $i rc=$? at ${SECONDS}s"
  python3 - $OUT/mx$i/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-10s" % r["batch"], " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v))
PY
done
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_dec.tar.xz -C /tmp/site/flashinfer/data/aot
MAX_JOBS=14 timeout 150 python3 bench/gpu/fi_decode_warm.py > /tmp/fiw_dec.log 2>&1; echo "fi decode warm rc=$? at ${SECONDS}s"; tail -2 /tmp/fiw_dec.log
mkdir -p $OUT/dec
PYTHONUNBUFFERED=1 timeout 250 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib.so --out $OUT/dec --quick > $OUT/dec/log 2>&1
echo "decode rc=$? at ${SECONDS}s"; grep -A24 "^us:" $OUT/dec/log | head -24; grep -i "geomean\|graph per-layer\|graph:" $OUT/dec/log | head -6
python3 - $OUT/dec <<'PY'
import json,sys,glob
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    a,t,c=g("attnd_fi"),g("flashinfer_tc"),g("sdpa_cudnn_contiguous")
    print("%-22s %7.1f  xFI-TC %s  xcuDNN %s" % (r["shape"], a or 0, ("%.3f"%(t/a)) if a and t else "-", ("%.3f"%(c/a)) if a and c else "-"))
PY
cd $OUT && tar cJf res.txz mx1 mx2 mx3 dec && rm -rf mx1 mx2 mx3 dec
echo "done at ${SECONDS}s"
