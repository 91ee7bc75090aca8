#!/usr/bin/env bash
# session 2026-12-03 (sixth) call 1, tree 7a7152c: issue 13's documented device command on main
# (bench/gpu/decode_device.sh: decode sweep with a fresh seed, bench_decode.py --quick with every
# peer and the kernel before issue 13 (8475c73) as attnd_old, memcheck, racecheck), FlashInfer
# from its slim site and JIT cache; then d 256: the producers and depths on the four d 256 shapes,
# and on 32 SMs (MPS 25 %) main against a diagnostic build whose copy warps copy nothing.
set -u
R=$PWD; D=$R/.dev-s20
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
mkdir -p /tmp/site && tar xJf .dev-s9/fisite.tar.xz -C /tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf .dev-s9/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
export PYTHONPATH=/tmp/site
mkdir -p $OUT/dec
D=.dev-s20 bash .dev-s20/bench/decode_device.sh 330 $OUT/dec > $OUT/dec/device.log 2>&1
echo "decode_device rc=$? at ${SECONDS}s"; tail -40 $OUT/dec/device.log
python3 - $OUT/dec <<'PY'
import json,sys,glob
f=sorted(glob.glob(sys.argv[1]+"/decode-h200-*.json")); f=[x for x in f if "partial" not in x]
if not f: sys.exit("no json")
d=json.load(open(f[-1]))
s=d.get("summary",{}).get("ratios_vs_attnd_default",{})
for k in ("flashinfer_tc","sdpa_cudnn_contiguous","attnd_old"): print(k, json.dumps(s.get(k)))
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    a,t,c,o=g("attnd_fi"),g("flashinfer_tc"),g("sdpa_cudnn_contiguous"),g("attnd_old")
    f=lambda x: ("%.3f"%(x/a)) if a and x else "-"
    print("%-22s %7.1f  xFI-TC %s  xcuDNN %s  xold %s" % (r["shape"], a or 0, f(t), f(c), f(o)))
PY
# d 256: producers and depths, every peer beside
mkdir -p $OUT/d256 && xz -dc $D/lib/lib_nocopy.so.xz > /tmp/nocopy.so
L=$(ls $D/lib/libattn_cuda_bench.so)
PYTHONUNBUFFERED=1 timeout 90 python3 $D/bench/bench_decode.py --lib $L --out $OUT/d256 --no-graph \
  --shapes d256_B32_T4096,d256_B1_T32768,d256_B8_T8192,d256_B128_T2048 --attnd fi,fi_bulk4_st3,fi_tmap,fi_tmap_st3 > $OUT/d256/log 2>&1
echo "d256 rc=$? at ${SECONDS}s"; python3 $D/summ.py $OUT/d256
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up"
for LL in main nocopy; do
  [ $LL = main ] && LIB=$L || LIB=/tmp/nocopy.so
  O=$OUT/mps25_$LL; mkdir -p $O
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 PYTHONUNBUFFERED=1 timeout 60 python3 $D/bench/bench_decode.py --lib $LIB --out $O \
    --no-flashinfer --no-graph --attnd fi,fi_bulk4_st3 --shapes d256_B32_T4096,d256_B8_T8192 > $O/log 2>&1
  echo "mps $LL rc=$?"; python3 $D/summ.py $O
done
echo quit | nvidia-cuda-mps-control; sleep 1
echo "done at ${SECONDS}s"
