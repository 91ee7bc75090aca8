#!/usr/bin/env bash
# session 2026-12-03 (fourth) call 5: issue 12's documented device run on 1e63a51 (the review mend of the pair
# walk; stage_mixed.sh with STATIC=1 and the FlashInfer JIT cache here; run_mixed.sh
# there: full engine sweep with a fresh seed, memcheck, ncu launch statistics, gen + replay through
# attnd, bench_mixed with every FlashInfer peer), then the demo (README command 1).
set -u
R=$PWD
cd .dev-s16 && tar xJf pkg.tar.xz
FI_DIR=/nonexistent FI_SITE=fisite.tar.xz FI_POD_AOT=fi_pod_aot.tar.xz FULL=1 TEST_TIMEOUT=200 BUDGET=470 \
  WARM_TIMEOUT=120 BENCH_START_BY=200 BENCH_TIMEOUT=220 \
  BENCH_ARGS="--caps 66,70,74,78,80,100,104 --reps 15" bash bench/gpu/run_mixed.sh wtmneb
echo "run_mixed done at ${SECONDS}s"
cd "$R"
timeout 60 bash scripts/demo.sh .dev-s16/build-static > $OUT/demo.log 2>&1; echo "demo rc=$? at ${SECONDS}s"
grep -E "PASS|FAIL|mismatch|cuda" $OUT/demo.log | tail -6
