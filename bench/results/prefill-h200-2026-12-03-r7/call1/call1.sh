#!/usr/bin/env bash
# session 2026-12-03 (second) call 1: is the prefill kernel's per-tile rate bound by its TMA box count?
# (1) prefill_ab at page sizes 16, 64, 32, 128, 8: main's kernel (ctl) against V as one box per page with
#     every column chunk (v5: a 5-d tensor map; 24 boxes per 128-key tile instead of 32 at page 16) and v5
#     with one expect_tx per tile (v5e1); mirrored order ctl v5 v5e1 v5e1 v5 ctl; O compared with ctl's.
# (2) bench_mixed M1, M2, M5, M4 prefill with ctl's and v5's library, each in its own process.
set -u
R=$PWD; D=$R/.dev-s4
for v in ctl v5 v5e1; do xz -dc $D/lib_$v.so.xz > /tmp/lib_$v.so; done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
SH=causal_S4096,causal_S8192,append_B8_T4096_C512,causal_d64_S8192,causal_d256_S8192,causal_group8_S8192,flashmask_docs8_S8192,causal_S2048,causal_S16384
VARS="--var ctl=/tmp/lib_ctl.so:tma --var v5=/tmp/lib_v5.so:tma --var v5e1=/tmp/lib_v5e1.so:tma --var v5e1_b=/tmp/lib_v5e1.so:tma --var v5_b=/tmp/lib_v5.so:tma --var ctl_b=/tmp/lib_ctl.so:tma"
for P in 16 64 32 128 8; do
  mkdir -p $OUT/p$P
  timeout 100 python3 bench/gpu/prefill_ab.py $VARS --only $SH --page $P --reps 20 --out $OUT/p$P > $OUT/p$P/log 2>&1
  echo "page $P rc=$? at ${SECONDS}s"; tail -10 $OUT/p$P/log | cut -c1-250
done
for v in ctl v5; do
  mkdir -p $OUT/mx_$v
  PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/bench_mixed.py --lib /tmp/lib_$v.so --out $OUT/mx_$v --peers "" \
    --deadline 140 --reps 15 --no-extras --only M1,M2,M5,M4_prefill \
    --variants auto,part_serial,part_pf_c74,part_pf_c78,part_pf_c80,part_pf_c104,part_pf_c108 --caps 74,78,104,108 > $OUT/mx_$v/log 2>&1
  echo "mixed $v rc=$? at ${SECONDS}s"; grep -E "^M[0-9]" $OUT/mx_$v/log | head -4 | cut -c1-300
done
echo "done at ${SECONDS}s"
