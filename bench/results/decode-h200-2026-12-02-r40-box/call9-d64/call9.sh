#!/usr/bin/env bash
# session 2026-12-02j call 9 (tree 062be6b's library): d = 64 on the tensor-map producer (fi_tmap) against
# the cp.async one (fi_nobulk) and the rule's pick (fi) now that the copy loop has no division
set -u
R=$PWD; D=$R/.dev-s58
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/d64
PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib.so --out $OUT/d64 --no-flashinfer --no-graph \
  --attnd fi,fi_tmap,fi_nobulk --shapes d64_B64_T2048,d64_B256_T2048,d64_B16_T8192,d64_B1_T32768,d64_B4_T16384,d64_B2_T2048 > $OUT/d64/log 2>&1
echo "rc=$? at ${SECONDS}s"
python3 - $OUT/d64 <<'PY'
import json,sys,glob
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    print("%-16s fi %7.2f tmap %7.2f nobulk %7.2f cudnn %s" % (r["shape"], g("attnd_fi") or 0, g("attnd_fi_tmap") or 0, g("attnd_fi_nobulk") or 0, g("sdpa_cudnn_contiguous")))
PY
tar cJf $OUT/d64.txz -C $OUT d64; rm -rf $OUT/d64
