#!/usr/bin/env bash
# pfvarlib.sh NAME SRC_DIR "-DX ..." : build-gpu's bench library with SRC_DIR's prefill_d128.cu (and mixed.cu) under defines
set -euo pipefail
cd /work/main
N=$1; S=$2; F=$3; V=/tmp/pvar-$N
rm -rf $V; mkdir -p $V
for u in prefill_d128 mixed; do
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -lineinfo -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 -Xcompiler -fPIC -I$S/include -I$S $F -c $S/kernels/cuda/$u.cu -o $V/$u.cu.o &
done; wait
cp build-gpu/libattn_cuda.a $V/libattn_cuda.a
ar rcs $V/libattn_cuda.a $V/prefill_d128.cu.o $V/mixed.cu.o
nvcc -O3 -std=c++17 -Xcompiler -fPIC -shared -Iinclude -I. \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 \
    -o $V/lib_$N.so bench/gpu/bench_glue.c bench/gpu/prefill_glue.c bench/gpu/mixed_glue.c \
    -Xlinker --whole-archive $V/libattn_cuda.a -Xlinker --no-whole-archive build-gpu/libattn_core.a \
    -lcudart_static -lpthread -lm -ldl -lrt
strip --strip-debug $V/lib_$N.so
ls -la $V/lib_$N.so
