#!/usr/bin/env bash
# pfvarlib3.sh NAME SRC_DIR "-DX ..." : pfvarlib2.sh plus SRC_DIR's prefill_launch.cu and planner/prefill_plan.c
# (for flags that change the plan's tile shape)
set -euo pipefail
cd /work/main
N=$1; S=$2; F=$3; V=/tmp/pvar-$N
rm -rf $V; mkdir -p $V
for u in prefill_d64 prefill_d128 prefill_d256 mixed prefill_launch; do
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 -Xcompiler -fPIC -I$S/include -I$S $F -c $S/kernels/cuda/$u.cu -o $V/$u.cu.o &
done; wait
cc -O2 -std=c11 -D_GNU_SOURCE -fPIC -I$S/include -I$S $F -c $S/planner/prefill_plan.c -o $V/prefill_plan.o
cp build-gpu/libattn_cuda.a $V/libattn_cuda.a
ar rcs $V/libattn_cuda.a $V/prefill_d64.cu.o $V/prefill_d128.cu.o $V/prefill_d256.cu.o $V/mixed.cu.o $V/prefill_launch.cu.o
nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -I$S/include -I$S $F \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 \
    -o $V/lib_$N.so $S/bench/gpu/bench_glue.c $S/bench/gpu/prefill_glue.c $S/bench/gpu/mixed_glue.c $V/prefill_plan.o \
    -Xlinker --whole-archive $V/libattn_cuda.a -Xlinker --no-whole-archive build-gpu/libattn_core.a \
    -lcudart_static -lpthread -lm -ldl -lrt
strip --strip-debug $V/lib_$N.so
ls -la $V/lib_$N.so
