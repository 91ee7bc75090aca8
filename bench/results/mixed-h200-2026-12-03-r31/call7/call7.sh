#!/usr/bin/env bash
# session 2026-12-03 (fourth) call 7: run_mixed.sh's gen/replay stage alone on call 5's build of
# 1e63a51, with the stage's new attnctl explain of the replayed mixed capture (evidence levels), gen with --trace (call 6 without it: level 4)
set -u
cd .dev-s16 && tar xJf pkg.tar.xz && cp ../bench/gpu/run_mixed.sh bench/gpu/
BUDGET=120 bash bench/gpu/run_mixed.sh e > /dev/null 2>&1; echo "run_mixed e rc=$?"
cp /tmp/mixed-logs/e2e.txt /tmp/mixed-logs/explain.txt $OUT/
tail -12 $OUT/e2e.txt
