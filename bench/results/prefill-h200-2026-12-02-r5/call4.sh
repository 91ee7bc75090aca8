#!/usr/bin/env bash
# session 2026-12-02h call 4: PF_PAIR prototype after the fix (call 3 hung: every lane also issued
# its plain box, so each barrier got twice the bytes it expected); smoke first, the watchdog build
# if it hangs again, else the A/B and the sanitizers
set -u
R=$PWD; D=$R/.dev-s44
mkdir -p /tmp/p && tar xJf $D/libs4.tar.xz -C /tmp/p
L=/tmp/p
PYTHONUNBUFFERED=1 timeout 45 python3 bench/gpu/prefill_ab.py --var ctlx=$L/lib_ctlx.so:tma --var pair=$L/lib_pair.so:tma --reps 3 --only causal_S2048 > $OUT/smoke.log 2>&1
rc=$?; echo "smoke rc=$rc at ${SECONDS}s"; tail -3 $OUT/smoke.log
if [ $rc -ne 0 ]; then
  PYTHONUNBUFFERED=1 timeout 40 python3 bench/gpu/prefill_ab.py --var pdbg=$L/lib_pdbg.so:tma --reps 1 --only causal_S2048 > $OUT/dbg.log 2>&1
  echo "dbg rc=$? at ${SECONDS}s"; grep -E 'LAYOUT|STUCK' $OUT/dbg.log | sort | uniq -c | sort -rn | head -40; exit 0
fi
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 150 python3 bench/gpu/prefill_ab.py \
  --var ctlx=$L/lib_ctlx.so:tma --var pair=$L/lib_pair.so:tma --var pair2=$L/lib_pair.so:tma --var ctlx2=$L/lib_ctlx.so:tma \
  --reps 30 --only causal_S2048,causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,flashmask_docs8_S8192,fewq_B32_T8192_C4 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"
grep -E 'pair mode' $OUT/prefill_ab.log | sort | uniq -c
grep -A12 '^shape' $OUT/prefill_ab.log
grep -o '"pair[0-9]*": {[^}]*}' $OUT/prefill_ab.log | head -20
for T in memcheck racecheck; do
PYTHONUNBUFFERED=1 timeout 100 compute-sanitizer --tool $T --print-limit 5 python3 bench/gpu/prefill_ab.py --var pair=$L/lib_pair.so:tma --reps 1 --only causal_S2048 > $OUT/$T.log 2>&1; echo "$T rc=$? at ${SECONDS}s"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|pair mode' $OUT/$T.log | head -5
done
echo "done at ${SECONDS}s"
