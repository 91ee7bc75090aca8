#!/usr/bin/env bash
# session 2026-12-02i call 10: the prefill combine kernel over 8 row slices per (merge, K/V head)
# (new) against b4538b1 (base): the small mixed steps and M2, each library in its process; the
# prefill kernel's and engine's device tests (fresh seeds, full), memcheck on the engine's quick sweep
set -u
R=$PWD; D=$R/.dev-s54
mkdir -p /tmp/p && tar xJf $D/pkg.tar.xz -C /tmp/p
for L in new base new2; do
  mkdir -p $OUT/$L
  PYTHONUNBUFFERED=1 timeout 100 python3 bench/gpu/bench_mixed.py --lib /tmp/p/${L%2}.so --out $OUT/$L \
    --peers "" --deadline 90 --reps 20 --only S1,S2,S3,S4,M2 --no-extras \
    --variants unified,part_serial,partition,auto > $OUT/$L/log 2>&1
  echo "== $L rc=$? at ${SECONDS}s"
  python3 - $OUT/$L/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-4s" % r["batch"], " ".join("%s:%.4f" % (k, v["ms"]) for k,v in a.items() if "ms" in v), "| auto ran", a.get("auto",{}).get("ran"), "| rel_l2 auto vs unified %s" % a.get("auto",{}).get("rel_l2_vs_unified"))
PY
done
cd /tmp/p && export LD_LIBRARY_PATH=/tmp/p/build-gpu/lib
timeout 120 ./build-gpu/tests/test_prefill_gpu > $OUT/test_prefill_full.log 2>&1; echo "prefill kernel full rc=$? at ${SECONDS}s"; grep -E "worst|PASSED|FAILED" $OUT/test_prefill_full.log
timeout 150 ./build-gpu/tests/test_prefill_engine_gpu > $OUT/test_prefill_engine_full.log 2>&1; echo "prefill engine full rc=$? at ${SECONDS}s"; grep -E "worst|PASSED|FAILED" $OUT/test_prefill_engine_full.log
ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1 timeout 200 compute-sanitizer --tool memcheck --leak-check no ./build-gpu/tests/test_prefill_engine_gpu > $OUT/memcheck_prefill_engine.log 2>&1; echo "memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck_prefill_engine.log
ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1 timeout 100 compute-sanitizer --tool memcheck --leak-check no ./build-gpu/tests/test_prefill_gpu > $OUT/memcheck_prefill.log 2>&1; echo "memcheck kernel rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck_prefill.log
echo "done at ${SECONDS}s"
