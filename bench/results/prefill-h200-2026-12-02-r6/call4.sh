#!/usr/bin/env bash
# session 2026-12-02i call 4: the dense mask's PARTIAL tiles with the request's bounds read once and
# one independent byte load per cell (kernels/cuda/prefill/kernel.cuh mask_partial): A/B against
# 068a3de's prefill kernels (the same glue, attnpf_create_dense) in one process, mirrored; then the
# prefill kernel's device tests (every mask kind, fresh seed; quick sweep, then the full one)
set -u
R=$PWD; D=$R/.dev-s50
mkdir -p /tmp/p && tar xJf $D/libs.tar.xz -C /tmp/p && tar xJf $D/tp.tar.xz -C /tmp/p
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/prefill_ab.py --var base=/tmp/p/lib_base.so:tma \
  --var new=/tmp/p/lib_new.so:tma --var new2=/tmp/p/lib_new.so:tma --var base2=/tmp/p/lib_base.so:tma --reps 20 \
  --only dense_docs8_S8192,dense_question_S8192,flashmask_docs8_S8192,flashmask_question_S8192,causal_S4096,causal_S8192,append_B8_T4096_C512 \
  --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"; grep -A9 "^shape" $OUT/prefill_ab.log
grep -o '"new[0-9]*": {[^}]*}\|"base2": {[^}]*}' $OUT/prefill_ab.log | head -16
cd /tmp/p && export LD_LIBRARY_PATH=/tmp/p/build-gpu/lib
ATTN_GPU_QUICK=1 timeout 120 ./build-gpu/tests/test_prefill_gpu > $OUT/test_prefill_quick.log 2>&1; echo "quick rc=$? at ${SECONDS}s"
timeout 200 ./build-gpu/tests/test_prefill_gpu > $OUT/test_prefill_full.log 2>&1; echo "full rc=$? at ${SECONDS}s"
grep -E "dense|PASSED|FAILED|worst" $OUT/test_prefill_full.log | head -20
echo "done at ${SECONDS}s"
