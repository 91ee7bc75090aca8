#!/usr/bin/env bash
# session 2026-12-03 (sixth) call 5: issue 12's documented device run on the final tree (d 256 decode on tensor maps, keys as rows) (the cluster walk
# kept selectable, pairs the default; stage_mixed.sh with STATIC=1 and the FlashInfer JIT cache
# here; run_mixed.sh there: full engine sweep with a fresh seed, memcheck, ncu launch statistics,
# gen + replay through attnd, bench_mixed with every FlashInfer peer), the quick engine sweep under
# the cluster walk (the test now keeps ATTN_PREFILL_WALK), then the demo (README command 1).
set -u
R=$PWD
cd .dev-s24 && tar xJf pkg.tar.xz
FI_DIR=/nonexistent FI_SITE=fisite.tar.xz FI_POD_AOT=fi_pod_aot.tar.xz FULL=1 TEST_TIMEOUT=200 BUDGET=470 \
  WARM_TIMEOUT=120 BENCH_START_BY=200 BENCH_TIMEOUT=220 \
  BENCH_ARGS="--caps 66,70,74,78,80,100,104 --reps 15" bash bench/gpu/run_mixed.sh wtmneb
echo "run_mixed done at ${SECONDS}s"
ATTN_PREFILL_WALK=cluster ATTN_GPU_QUICK=1 LD_LIBRARY_PATH=$PWD/build-gpu/lib timeout 60 \
  ./build-gpu/tests/test_prefill_engine_gpu > $OUT/cluster_sweep.log 2>&1
echo "cluster sweep rc=$? at ${SECONDS}s"; grep -E "walk|worst|PASSED|FAILED" $OUT/cluster_sweep.log | tail -4
cd "$R"
timeout 60 bash scripts/demo.sh .dev-s24/build-static > $OUT/demo.log 2>&1; echo "demo rc=$? at ${SECONDS}s"
grep -E "PASS|FAIL|mismatch|cuda" $OUT/demo.log | tail -6
