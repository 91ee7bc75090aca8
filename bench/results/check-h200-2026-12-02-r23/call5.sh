#!/usr/bin/env bash
# session 2026-12-02i call 5 (tree b4538b1): the device check of the tree, c (full decode, prefill kernel
# and prefill engine sweeps, fresh seeds), s (memcheck, racecheck on the quick sweeps), e (end to end
# through attnd: prefill / append / mixed gen + replay --verify, pool bytes around refusals, the demo)
set -u
R=$PWD; D=$R/.dev-s51
tar xJf $D/pkg.txz -C $D
D=.dev-s51 bash scripts/device-check.sh cse 450 /tmp/chk > /tmp/chk.out 2>&1
echo "rc=$? at ${SECONDS}s"; tail -30 /tmp/chk.out
mkdir -p /tmp/x && tar xzf /tmp/chk/logs.tgz -C /tmp/x 2>/dev/null && grep -rh "worst\|ERROR SUMMARY\|RACECHECK SUMMARY\|mismatches\|evidence level 6\|PASS" /tmp/x --include=*.log --include=*.txt | sort | uniq -c | head -30
cp /tmp/chk.out $OUT/; (cd /tmp/x && tar czf $OUT/logs_text.tgz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
