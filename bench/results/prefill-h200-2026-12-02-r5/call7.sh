#!/usr/bin/env bash
# session 2026-12-02h call 7: d 128 with 64-key tiles and 6 stages (PF_BN64: the same 192 KB ring
# in finer slots, so fewer bytes wait behind a held slot; the plan cut at 64 keys) against the
# same scratch tree at 128 keys x 3 stages; mirrored order; sanitizers on bn64
set -u
R=$PWD; D=$R/.dev-s44
mkdir -p /tmp/p && tar xJf $D/libs7.tar.xz -C /tmp/p
L=/tmp/p
PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/prefill_ab.py \
  --var ctl3=$L/lib_ctl3.so:tma --var bn64=$L/lib_bn64.so:tma --var bn642=$L/lib_bn64.so:tma --var ctl32=$L/lib_ctl3.so:tma \
  --reps 30 --only causal_S2048,causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,flashmask_docs8_S8192,fewq_B32_T8192_C4 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"
grep -A8 '^shape' $OUT/prefill_ab.log
grep -o '"bn64[0-9]*": {[^}]*}' $OUT/prefill_ab.log | head -14
for T in memcheck racecheck; do
PYTHONUNBUFFERED=1 timeout 60 compute-sanitizer --tool $T --print-limit 5 python3 bench/gpu/prefill_ab.py --var bn64=$L/lib_bn64.so:tma --reps 1 --only causal_S2048,append_B8_T4096_C512 > $OUT/$T.log 2>&1; echo "$T rc=$? at ${SECONDS}s"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$T.log | head -3
done
echo "done at ${SECONDS}s"
