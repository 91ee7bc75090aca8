#!/usr/bin/env bash
# session 2026-12-03 (third) call 3: issue 12's documented device run on the final tree
# (bench/gpu/stage_mixed.sh here with STATIC=1 and call 1's FlashInfer JIT cache, then
# bench/gpu/run_mixed.sh there): the full engine sweep (fresh seed; with the serving-scale step)
# under every schedule + unified's determinism + graph replay, memcheck on the quick mixed
# cases, ncu's launch statistics of one fork, gen + replay --verify through attnd, and
# bench_mixed.py with every FlashInfer peer (partitioned, BatchAttention, BatchPOD, POD from
# AOT modules built on the host: bench/gpu/fi_pod_aot.sh; the site without JIT headers:
# bench/gpu/fi_slim_site.sh); then the demo (README command 1) on the staged static build.
set -u
R=$PWD
cd .dev-s11 && tar xJf pkg.tar.xz
POD=$(ls fi_pod_aot.tar.xz fi_bpod_aot.tar.xz 2> /dev/null | head -1)
echo "POD AOT: $POD"
FI_DIR=/nonexistent FI_SITE=fisite.tar.xz FI_POD_AOT=$POD FULL=1 TEST_TIMEOUT=200 BUDGET=470 \
  WARM_TIMEOUT=120 BENCH_START_BY=200 BENCH_TIMEOUT=220 \
  BENCH_ARGS="--caps 66,70,74,78,80,100,104 --reps 15" bash bench/gpu/run_mixed.sh wtmneb
cd "$R"
timeout 60 bash scripts/demo.sh .dev-s11/build-static > $OUT/demo.log 2>&1; echo "demo rc=$? at ${SECONDS}s"
grep -E "PASS|FAIL|mismatch|cuda" $OUT/demo.log | tail -6
