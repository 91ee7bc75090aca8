#!/usr/bin/env bash
# session 2026-12-02i call 11 (tree ceb5710; the first start was taken back): the device check of the tree, c (full decode, prefill kernel
# and prefill engine sweeps, fresh seeds), e (end to end; memcheck of the change ran in call 10
# through attnd: prefill / append / mixed gen + replay --verify, pool bytes around refusals, the demo)
set -u
R=$PWD; D=$R/.dev-s55
tar xJf $D/pkg.txz -C $D
D=.dev-s55 bash scripts/device-check.sh ce 200 /tmp/chk > /tmp/chk.out 2>&1
echo "rc=$? at ${SECONDS}s"; tail -30 /tmp/chk.out
mkdir -p /tmp/x && tar xzf /tmp/chk/logs.tgz -C /tmp/x 2>/dev/null && grep -rh "worst\|ERROR SUMMARY\|RACECHECK SUMMARY\|mismatches\|evidence level 6\|PASS" /tmp/x --include=*.log --include=*.txt | sort | uniq -c | head -30
cp /tmp/chk.out $OUT/; (cd /tmp/x && tar czf $OUT/logs_text.tgz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
