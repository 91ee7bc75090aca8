#!/usr/bin/env bash
# session 2026-12-03 call 3 (tree: the prefill planner's cuts that pay + the cost model's prefill fixed
# time and combine term, k_h200 refitted): (1) bench_mixed.py crashed (SIGSEGV) on S2 in call 2: S2
# alone under faulthandler, then cuda-gdb's backtrace if it crashes again; (2) the prefill engine's quick
# sweep (fresh seed); (3) the mixed batches and small steps with FlashInfer partitioned and BatchAttention
# in the same process (final figures).
set -u
R=$PWD; D=$R/.dev-s3
mkdir -p /tmp/p /tmp/g && xz -dc $D/lib.so.xz > /tmp/p/lib.so && tar xJf $D/tests.txz -C /tmp/g
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
CAPS=62,66,70,74,78,80,88,96,100,104,108,112
V=unified,partition,auto,part_serial; for c in ${CAPS//,/ }; do V=$V,part_pf_c$c; done
mkdir -p $OUT/s2
PYTHONUNBUFFERED=1 timeout 100 python3 -X faulthandler bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/s2 \
  --peers "" --deadline 90 --reps 12 --only S2 --variants $V --caps $CAPS > $OUT/s2/log 2>&1
rc=$?; echo "S2 rc=$rc at ${SECONDS}s"; grep -v "^import flashinfer" $OUT/s2/log | tail -12 | cut -c1-400
if [ $rc -ne 0 ]; then
  timeout 120 cuda-gdb -batch -ex run -ex bt --args python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out /tmp/gdbout \
    --peers "" --deadline 90 --reps 3 --only S2 --variants $V --caps $CAPS > $OUT/gdb.log 2>&1
  echo "gdb rc=$? at ${SECONDS}s"; grep -A30 "SIGSEGV" $OUT/gdb.log | head -40
fi
export LD_LIBRARY_PATH=/tmp/g/lib
ATTN_GPU_QUICK=1 timeout 90 /tmp/g/tests/test_prefill_engine_gpu > $OUT/engine_quick.log 2>&1; echo "engine quick rc=$? at ${SECONDS}s"; grep -E "PASSED|FAILED|worst|seed=" $OUT/engine_quick.log | tail -4
unset LD_LIBRARY_PATH
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
MAX_JOBS=14 timeout 120 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > $OUT/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"; tail -2 $OUT/fiw.log
ONLY=M1,M2,M3,M5,M4_decode,M4_prefill,S1,S3,S4; [ $rc -eq 0 ] && ONLY=$ONLY,S2
mkdir -p $OUT/mx
PYTHONUNBUFFERED=1 timeout 240 python3 -X faulthandler bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/mx \
  --peers part,ba --deadline 230 --reps 15 --no-extras --only $ONLY \
  --variants unified,partition,auto,part_serial,part_pf_c66,part_pf_c74,part_pf_c78,part_pf_c80,part_pf_c88,part_pf_c96,part_pf_c104,part_pf_c108,part_pf_c112 \
  --caps 74,78,88,104,108 > $OUT/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - $OUT/mx/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]; p=r["peers"]
    print("  %-10s" % r["batch"], " ".join("%s:%.1f" % (n.replace("part_pf_",""), v["ms"]*1e3) for n,v in a.items() if "ms" in v),
          "| FI", " ".join("%s:%.1f" % (n, v["ms"]*1e3) for n,v in p.items() if "ms" in v))
    print("     auto:", a.get("auto",{}).get("why","")[:110])
PY
cd $OUT && tar cJf res.txz s2 mx engine_quick.log fiw.log $( [ -f gdb.log ] && echo gdb.log ) && rm -rf s2 mx engine_quick.log fiw.log gdb.log
echo "done at ${SECONDS}s"
