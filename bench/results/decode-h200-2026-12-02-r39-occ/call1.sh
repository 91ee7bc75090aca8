#!/usr/bin/env bash
# session 2026-12-02j call 1: the d 128 keys-as-rows tensor-map decode producer at 3 CTAs per SM
# (96-register cap, 2 stages: lib t3) against main (120 registers, 3 stages, 2 CTAs per SM):
# (1) A/B in one process on 132 SMs; (2) each alone on 32 SMs under MPS 25 %; (3) mixed batches with
# the cap sweep, each library in its own process.
set -u
R=$PWD; D=$R/.dev-s56
mkdir -p /tmp/p && for L in main t3; do xz -dc $D/lib_$L.so.xz > /tmp/p/$L.so; done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
SH=B1_T32768,B4_T16384,B16_T8192,B64_T4096,B128_T8192,B256_T2048,ragged64_256-16384,mha_B16_T4096,g8_B64_T4096,P64_B16_T8192,B2_T2048,B32_T1024,B1_T131072
mkdir -p $OUT/ab
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/bench_decode.py --lib /tmp/p/t3.so --old /tmp/p/main.so \
  --out $OUT/ab --no-flashinfer --no-graph --attnd fi,fi_tmap_st3 --shapes $SH > $OUT/ab/log 2>&1
echo "ab rc=$? at ${SECONDS}s"
python3 - $OUT/ab <<'PY'
import json,sys,glob,math
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
rs=[]
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    n,o,n3,cu=g("attnd_fi"),g("attnd_old"),g("attnd_fi_tmap_st3"),g("sdpa_cudnn_contiguous")
    if n and o: rs.append(o/n)
    print("%-22s t3 %7.2f main %7.2f (x%.3f)  t3@st3 %7.2f cudnn %s  ctas/sm %s" % (r["shape"], n or 0, o or 0, (o/n) if n and o else 0, n3 or 0, ("%.1f"%cu) if cu else "-", p.get("attnd_fi",{}).get("ctas_per_sm", r.get("ctas_per_sm"))))
print("geomean main/t3 %.4f over %d" % (math.exp(sum(map(math.log,rs))/len(rs)), len(rs)))
PY
# 32 SMs under MPS
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up"
for L in main t3; do
  mkdir -p $OUT/mps_$L
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/bench_decode.py --lib /tmp/p/$L.so \
    --out $OUT/mps_$L --no-flashinfer --no-graph --attnd fi --shapes B64_T4096,B16_T8192,B1_T32768 > $OUT/mps_$L/log 2>&1
  echo "mps $L rc=$? at ${SECONDS}s"
  python3 - $OUT/mps_$L <<'PY'
import json,sys,glob
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    print("  %-14s attnd %7.1f cudnn %s" % (r["shape"], g("attnd_fi") or 0, g("sdpa_cudnn_contiguous")))
PY
done
echo quit | nvidia-cuda-mps-control; sleep 2
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
for L in t3 main; do
  mkdir -p $OUT/mx_$L
  PYTHONUNBUFFERED=1 timeout 110 python3 bench/gpu/bench_mixed.py --lib /tmp/p/$L.so --out $OUT/mx_$L \
    --peers "" --deadline 100 --reps 12 --only M1,M2,M3,M5,M4_decode --no-extras \
    --variants partition,auto,part_pf_c62,part_pf_c66,part_pf_c74,part_pf_c80,part_pf_c88,part_pf_c96,part_pf_c100,part_pf_c104 --caps 62,74,88,100,104 > $OUT/mx_$L/log 2>&1
  echo "== mixed $L rc=$? at ${SECONDS}s"
  python3 - $OUT/mx_$L/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-10s" % r["batch"], " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v), "| auto:", a.get("auto",{}).get("why","")[:120])
PY
done
cd $OUT && tar cJf res.txz ab mps_* mx_* && rm -rf ab mps_* mx_*
echo "done at ${SECONDS}s"
