#!/usr/bin/env bash
# session 2026-12-03 (third) call 4: the engine sweep's serving-scale step at page sizes 16 and 64
# (calls 1-3 drew page size 1 each time), every schedule, on call 3's build (tree 69d05d5):
# ATTN_SEED chosen so the step (case 12: seed + 12) draws page 16, then page 64.
set -u
cd .dev-s12 && tar xJf pkg.tar.xz
export LD_LIBRARY_PATH=$PWD/build-gpu/lib
for s in 1796310009 1796310001; do
  ATTN_SEED=$s ATTN_GPU_CASES=mixed-scale timeout 150 ./build-gpu/tests/test_prefill_engine_gpu > $OUT/scale_$s.log 2>&1
  echo "seed $s rc=$? at ${SECONDS}s"
  grep -E "mixed-scale|worst|PASSED|FAILED" $OUT/scale_$s.log | cut -c1-250
done
