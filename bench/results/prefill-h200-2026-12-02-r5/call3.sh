#!/usr/bin/env bash
# session 2026-12-02h call 3: PF_PAIR prototype -- clusters of two CTAs run item pairs (2q, 2q+1)
# with identical key tile lists and multicast every TMA box to both (half the L2->SM traffic);
# ctlx = the same scratch tree with pair mode off; mirrored order; O compared bit for bit
set -u
R=$PWD; D=$R/.dev-s44
mkdir -p /tmp/p && tar xJf $D/libs3.tar.xz -C /tmp/p
L=/tmp/p
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 240 python3 bench/gpu/prefill_ab.py \
  --var ctlx=$L/lib_ctlx.so:tma --var pair=$L/lib_pair.so:tma --var pair2=$L/lib_pair.so:tma --var ctlx2=$L/lib_ctlx.so:tma \
  --reps 30 --only causal_S2048,causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,flashmask_docs8_S8192,fewq_B32_T8192_C4 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"
grep -E 'pair mode' $OUT/prefill_ab.log | sort | uniq -c
grep -A12 '^shape' $OUT/prefill_ab.log
grep -o '"pair[0-9]*": {[^}]*}' $OUT/prefill_ab.log | head -20
echo "== memcheck / racecheck (pair, S2048 + append, 1 rep)"
for T in memcheck racecheck; do
PYTHONUNBUFFERED=1 timeout 150 compute-sanitizer --tool $T --print-limit 5 python3 bench/gpu/prefill_ab.py --var pair=$L/lib_pair.so:tma --reps 1 --only causal_S2048 > $OUT/$T.log 2>&1; echo "$T rc=$? at ${SECONDS}s"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|pair mode' $OUT/$T.log | head -5
done
echo "done at ${SECONDS}s"
