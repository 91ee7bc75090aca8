#!/usr/bin/env bash
# session 2026-12-02j call 2: what the compute warps of the d 128 keys-as-rows tensor-map decode
# producer cost per tile, measured where HBM is not the bound: diagnostic builds (wrong outputs) of
# main's kernel, each alone under CUDA MPS at 25 % (32 SMs) and 50 % (66 SMs); the SASS of main's kernel.
set -u
R=$PWD; D=$R/.dev-s56
mkdir -p /tmp/p && for f in $D/lib_*.so.xz; do n=$(basename $f .so.xz); xz -dc $f > /tmp/p/$n.so; done
ls /tmp/p
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p $OUT/sass
cuobjdump -sass -fun '_ZN4attn6decode16producer_tc_tmapILi128E13__nv_bfloat16Lb0ELb1EEEvNS0_9tmap_argsE' /tmp/p/lib_main.so > $OUT/sass/main_kr128.sass 2>&1
echo "sass lines $(wc -l < $OUT/sass/main_kr128.sass)"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d && echo "mps up"
for PCT in 25 50; do
for L in main nocopy nowait nocopy_noqk nocopy_nopv nocopy_nosm nopv noqk nowait_nomath t3; do
  [ -f /tmp/p/lib_$L.so ] || continue
  O=$OUT/m${PCT}_$L; mkdir -p $O
  CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$PCT PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib_$L.so \
    --out $O --no-flashinfer --no-graph --attnd fi --shapes B64_T4096,B16_T8192,B1_T32768 > $O/log 2>&1
  python3 - $O $L $PCT <<'PY'
import json,sys,glob
f=sorted(glob.glob(sys.argv[1]+"/*.json"))[-1]; d=json.load(open(f))
print("%3s%% %-14s" % (sys.argv[3], sys.argv[2]), "  ".join("%s %7.1f (cudnn %.1f)" % (r["shape"], r["peers"].get("attnd_fi",{}).get("us") or 0, r["peers"].get("sdpa_cudnn_contiguous",{}).get("us") or 0) for r in d["shapes"]))
PY
done; done
echo quit | nvidia-cuda-mps-control; sleep 1
cd $OUT && tar cJf res.txz m25_* m50_* sass && rm -rf m25_* m50_* sass
echo "done at ${SECONDS}s"
