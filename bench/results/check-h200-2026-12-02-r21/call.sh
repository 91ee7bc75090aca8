#!/usr/bin/env bash
# session 2026-12-02g call 3 (tree 094d4d5: early Q hand-back + Q prefetch beside S_0): device check
# c (decode, prefill kernel, prefill engine sweeps, restore), s (sanitizers), e (end to end through
# attnd); prefill A/B against main 8544260 at d 64 / 128 / 256 in one process, two orders
set -u
R=$PWD; D=$R/.dev-s39
tar xJf $D/pkg.txz -C $D
xz -dc $D/base.so.xz > /tmp/base.so
N=$D/build-gpu/lib/libattn_cuda_bench.so
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/prefill_ab.py --var main=/tmp/base.so:tma --var new=$N:tma --var new2=$N:tma --var main2=/tmp/base.so:tma --reps 20 \
  --only causal_d64_S8192,causal_d256_S8192,causal_group8_S8192,causal_S4096,causal_S8192,append_B8_T4096_C512,flashmask_question_S8192,fewq_B32_T8192_C4 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"; grep -A10 "^shape" $OUT/prefill_ab.log
ATTN_GPU_QUICK=1 D=.dev-s39 bash scripts/device-check.sh cse 230 /tmp/chk > /tmp/chk.out 2>&1
echo "rc=$? at ${SECONDS}s"; tail -24 /tmp/chk.out
mkdir -p /tmp/x && tar xzf /tmp/chk/logs.tgz -C /tmp/x 2>/dev/null && grep -rh "worst\|ERROR SUMMARY\|RACECHECK SUMMARY\|mismatches\|evidence level 6\|PASS" /tmp/x --include=*.log --include=*.txt | sort | uniq -c | head -24
cp /tmp/chk.out $OUT/; (cd /tmp/x && tar czf $OUT/logs_text.tgz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
