#!/usr/bin/env bash
# session 2026-12-02j call 3: the tensor-map copy warps without run-time divisions (box: shifts for the
# box decomposition and the run test) against main: full decode sweep of box, memcheck and racecheck
# (quick); A/B in one process on 132 SMs (every list shape); each library alone at 25 % / 50 % (MPS),
# with the copy-only diagnostics (no QK, no PV) of both; mixed batches with caps, each in its process.
set -u
R=$PWD; D=$R/.dev-s56
mkdir -p /tmp/p && for f in $D/lib_*.so.xz; do n=$(basename $f .so.xz); xz -dc $f > /tmp/p/$n.so; done
mkdir -p /tmp/g && tar xJf $D/tests.txz -C /tmp/g
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/chk
export LD_LIBRARY_PATH=/tmp/g/lib
timeout 150 /tmp/g/tests/test_decode_gpu > $OUT/chk/sweep.log 2>&1; echo "sweep rc=$? at ${SECONDS}s"; tail -3 $OUT/chk/sweep.log
ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1 timeout 80 compute-sanitizer --tool memcheck --leak-check no /tmp/g/tests/test_decode_gpu > $OUT/chk/memcheck.log 2>&1; echo "memcheck rc=$? at ${SECONDS}s"; tail -2 $OUT/chk/memcheck.log
ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1 timeout 80 compute-sanitizer --tool racecheck /tmp/g/tests/test_decode_gpu > $OUT/chk/racecheck.log 2>&1; echo "racecheck rc=$? at ${SECONDS}s"; tail -2 $OUT/chk/racecheck.log
mkdir -p $OUT/ab
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib_box.so --old /tmp/p/lib_main.so \
  --out $OUT/ab --no-flashinfer --no-graph --attnd fi > $OUT/ab/log 2>&1
echo "ab rc=$? at ${SECONDS}s"
python3 - $OUT/ab <<'PY'
import json,sys,glob,math
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
rs=[]
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    n,o,cu=g("attnd_fi"),g("attnd_old"),g("sdpa_cudnn_contiguous")
    eq=p.get("attnd_old",{}).get("bitwise_equal_first")
    if n and o: rs.append(o/n)
    print("%-22s box %7.2f main %7.2f (x%.3f)  cudnn %s  bitwise %s" % (r["shape"], n or 0, o or 0, (o/n) if n and o else 0, ("%.1f"%cu) if cu else "-", eq))
print("geomean main/box %.4f over %d" % (math.exp(sum(map(math.log,rs))/len(rs)), len(rs)))
PY
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up"
for PCT in 25 50; do
for L in main box copies_main copies_box; do
  O=$OUT/m${PCT}_$L; mkdir -p $O
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$PCT PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib_$L.so \
    --out $O --no-flashinfer --no-graph --attnd fi --shapes B64_T4096,B16_T8192,B1_T32768,P64_B16_T8192,B256_T2048 > $O/log 2>&1
  python3 - $O $L $PCT <<'PY'
import json,sys,glob
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
print("%3s%% %-12s" % (sys.argv[3], sys.argv[2]), "  ".join("%s %6.1f (cudnn %.1f)" % (r["shape"], r["peers"].get("attnd_fi",{}).get("us") or 0, r["peers"].get("sdpa_cudnn_contiguous",{}).get("us") or 0) for r in d["shapes"]))
PY
done; done
echo quit | nvidia-cuda-mps-control; sleep 1
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
for L in box main; do
  mkdir -p $OUT/mx_$L
  PYTHONUNBUFFERED=1 timeout 110 python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib_$L.so --out $OUT/mx_$L \
    --peers "" --deadline 100 --reps 12 --only M1,M2,M3,M5,M4_decode --no-extras \
    --variants partition,auto,part_pf_c62,part_pf_c66,part_pf_c74,part_pf_c80,part_pf_c88,part_pf_c96,part_pf_c100,part_pf_c104 --caps 62,74,88,100,104 > $OUT/mx_$L/log 2>&1
  echo "== mixed $L rc=$? at ${SECONDS}s"
  python3 - $OUT/mx_$L/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-10s" % r["batch"], " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v))
PY
done
cd $OUT && tar cJf res.txz chk ab m25_* m50_* mx_* && rm -rf chk ab m25_* m50_* mx_*
echo "done at ${SECONDS}s"
