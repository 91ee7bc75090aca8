#!/usr/bin/env bash
# session 2026-12-03 call 1: (1) the staged fold unrolled 8 / 16 against 4 (main) in one process,
# the latency-bound split shapes (bitwise check against main); (2) the small mixed steps S1-S4 with
# the halves and the prefill kernel alone (what the cost model misses there); (3) FlashInfer's JIT
# modules (part, ba, decode TC) compiled and packed for the next call.
set -u
R=$PWD; D=$R/.dev-s1
mkdir -p /tmp/p && for f in $D/lib_*.so.xz; do n=$(basename $f .so.xz); xz -dc $f > /tmp/p/$n.so; done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
SH=B1_T32768,B1_T131072,B2_T2048,B4_T16384,group16_B8_T16384,g8_B64_T4096,B32_T1024,B64_T4096,d256_B1_T32768,d256_B8_T8192
for V in u8 u16; do
  [ -f /tmp/p/lib_$V.so ] || continue
  mkdir -p $OUT/ab_$V
  PYTHONUNBUFFERED=1 timeout 100 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib_$V.so --old /tmp/p/lib_u4.so \
    --out $OUT/ab_$V --no-flashinfer --no-graph --attnd fi --shapes $SH > $OUT/ab_$V/log 2>&1
  echo "ab $V rc=$? at ${SECONDS}s"
  python3 - $OUT/ab_$V $V <<'PY'
import json,sys,glob,math
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
rs=[]
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    n,o,cu=g("attnd_fi"),g("attnd_old"),g("sdpa_cudnn_contiguous")
    eq=p.get("attnd_old",{}).get("bitwise_equal_first")
    if n and o: rs.append(o/n)
    print("%-20s %s %7.2f main %7.2f (x%.3f) cudnn %s bitwise %s" % (r["shape"], sys.argv[2], n or 0, o or 0, (o/n) if n and o else 0, ("%.1f"%cu) if cu else "-", eq))
print("geomean main/%s %.4f over %d" % (sys.argv[2], math.exp(sum(map(math.log,rs))/len(rs)), len(rs)))
PY
done
mkdir -p $OUT/small
PYTHONUNBUFFERED=1 timeout 90 python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib_u4.so --out $OUT/small \
  --peers "" --deadline 80 --reps 15 --only S1,S2,S3,S4 \
  --variants unified,partition,auto,part_serial,part_pf_c66,part_pf_c80,part_pf_c96,part_pf_c112 > $OUT/small/log 2>&1
echo "small rc=$? at ${SECONDS}s"
python3 - $OUT/small/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]; k=r.get("kernel",{})
    print("  %-4s" % r["batch"], " ".join("%s:%.1f" % (n.replace("part_pf_",""), v["ms"]*1e3) for n,v in a.items() if "ms" in v),
          "| kernel", " ".join("%s:%.1f" % (n, v["ms"]*1e3) for n,v in k.items() if isinstance(v,dict) and "ms" in v))
PY
PYTHONUNBUFFERED=1 timeout 60 python3 .dev-s1/splits.py /tmp/p/lib_u4.so > $OUT/small/splits.log 2>&1; echo "splits rc=$? at ${SECONDS}s"; cat $OUT/small/splits.log | cut -c1-400
# FlashInfer (the wheels carried in .dev-fi), its JIT modules for the next call
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1; echo "pip rc=$?"
export PYTHONPATH=/tmp/site
MAX_JOBS=16 timeout 200 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > $OUT/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"; tail -3 $OUT/fiw.log
MAX_JOBS=16 timeout 150 python3 bench/gpu/fi_decode_warm.py --pack $OUT/fi_dec.tar.xz > $OUT/fiw_dec.log 2>&1; echo "fi decode warm rc=$? at ${SECONDS}s"; tail -3 $OUT/fiw_dec.log
CO=$(find /tmp/fiws -type d -name cached_ops 2> /dev/null | head -1); echo "cached_ops: $CO"
if [ -n "$CO" ]; then (cd "$CO" && ls -d */ && ls */*.so > /tmp/so.list && tar cf - -T /tmp/so.list | xz -T0 -6 > $OUT/fi_jit.tar.xz); ls -la $OUT/fi_jit.tar.xz; fi
cd $OUT && tar cJf res.txz ab_* small fiw*.log && rm -rf ab_* small fiw*.log
echo "done at ${SECONDS}s"
