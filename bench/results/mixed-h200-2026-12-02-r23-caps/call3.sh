#!/usr/bin/env bash
# session 2026-12-02i call 3: (1) the decode kernels' lazy-rescale test on each thread's own scores
# (the row maxima's shuffles only on the exact update): new against base (494d75c) in one process,
# bench_decode.py every shape, O and LSE compared bytewise; (2) the mixed batches under the refitted
# cost model (unit term, ten caps): new, base, new, each in its own process (no FlashInfer: carry)
set -u
R=$PWD; D=$R/.dev-s49
mkdir -p /tmp/p && xz -dc $D/base.so.xz > /tmp/p/base.so && xz -dc $D/new.so.xz > /tmp/p/new.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/dec
PYTHONUNBUFFERED=1 timeout 260 python3 bench/gpu/bench_decode.py --lib /tmp/p/new.so --old /tmp/p/base.so \
  --out $OUT/dec --no-flashinfer --no-graph --attnd fi,fi_reducer > $OUT/dec/log 2>&1
echo "decode rc=$? at ${SECONDS}s"
python3 - $OUT/dec <<'PY'
import json,sys,glob,math
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
rs=[]
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    n,o,nr,orr,cu=g("attnd_fi"),g("attnd_old"),g("attnd_fi_reducer"),g("attnd_old_reducer"),g("sdpa_cudnn_contiguous")
    eq=p.get("attnd_old",{}).get("bitwise_equal_first")
    if n and o: rs.append(o/n)
    print("%-24s new %7.2f old %7.2f (x%.3f)  red new %7.2f old %7.2f  cudnn %s  bitwise %s" % (r["shape"], n or 0, o or 0, (o/n) if n and o else 0, nr or 0, orr or 0, ("%.1f"%cu) if cu else "-", eq))
print("geomean old/new %.4f over %d" % (math.exp(sum(map(math.log,rs))/len(rs)), len(rs)))
PY
for L in new base new2; do
  mkdir -p $OUT/mx_$L
  PYTHONUNBUFFERED=1 timeout 100 python3 bench/gpu/bench_mixed.py --lib /tmp/p/${L%2}.so --out $OUT/mx_$L \
    --peers "" --deadline 90 --reps 15 --only M1,M2,M3,M5,M4_decode,M4_prefill --no-extras \
    --variants partition,auto,part_pf_c66,part_pf_c96,part_pf_c100 --caps 100 > $OUT/mx_$L/log 2>&1
  echo "== mixed $L rc=$? at ${SECONDS}s"
  python3 - $OUT/mx_$L/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-10s" % r["batch"], " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v), "| auto:", a.get("auto",{}).get("why","")[:150])
PY
done
echo "done at ${SECONDS}s"
