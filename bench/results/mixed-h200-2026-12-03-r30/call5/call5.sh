#!/usr/bin/env bash
# session 2026-12-03 (third) call 5: the FI wave model's tail rule (planner/split.c: past 4 chunks when the
# best plan still ends more than 2x past the fluid bound): the decode sweep (fresh seed) and the engine's
# scale step at the draws of calls 4 (page 16) and 3 (page 1), every schedule (single-run timings).
set -u
cd .dev-s13 && tar xJf t.txz && cd t
export LD_LIBRARY_PATH=$PWD
timeout 80 ./test_decode_gpu > $OUT/decode_sweep.log 2>&1; echo "decode sweep rc=$? at ${SECONDS}s"
grep -E "worst|PASSED|FAILED|seed " $OUT/decode_sweep.log | tail -4
for s in 1796310009 1796303464; do
  ATTN_SEED=$s ATTN_GPU_CASES=mixed-scale timeout 70 ./test_prefill_engine_gpu > $OUT/scale_$s.log 2>&1
  echo "seed $s rc=$? at ${SECONDS}s"
  grep -E "mixed-scale|worst|PASSED|FAILED" $OUT/scale_$s.log | sed 's/tiles(s\/f\/p)=[0-9\/]* //' | cut -c1-200
done
