#!/usr/bin/env bash
# session 2026-12-02h call 8 (tree da3dc82: FlashMask PARTIAL tiles read each key column's endpoints
# once): FlashMask and causal A/B against main 6e68681's library in one process (mirrored order),
# then the device check c (sweeps), s (sanitizers), e (end to end through attnd)
set -u
R=$PWD; D=$R/.dev-s46
tar xJf $D/pkg.txz -C $D
xz -dc $D/base.so.xz > /tmp/base.so
N=$D/build-gpu/lib/libattn_cuda_bench.so
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/prefill_ab.py --var main=/tmp/base.so:tma --var new=$N:tma --var new2=$N:tma --var main2=/tmp/base.so:tma --reps 20 \
  --only flashmask_docs8_S8192,flashmask_question_S8192,causal_S4096,causal_S8192,append_B8_T4096_C512 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"; grep -A7 "^shape" $OUT/prefill_ab.log
grep -o '"new[0-9]*": {[^}]*}' $OUT/prefill_ab.log | head -10
ATTN_GPU_QUICK=1 D=.dev-s46 bash scripts/device-check.sh cse 200 /tmp/chk > /tmp/chk.out 2>&1
echo "rc=$? at ${SECONDS}s"; tail -24 /tmp/chk.out
mkdir -p /tmp/x && tar xzf /tmp/chk/logs.tgz -C /tmp/x 2>/dev/null && grep -rh "worst\|ERROR SUMMARY\|RACECHECK SUMMARY\|mismatches\|evidence level 6\|PASS" /tmp/x --include=*.log --include=*.txt | sort | uniq -c | head -24
cp /tmp/chk.out $OUT/; (cd /tmp/x && tar czf $OUT/logs_text.tgz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
