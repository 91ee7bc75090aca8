#!/usr/bin/env bash
# session 2026-12-03 (second) call 4 (tree e617c9e: V's whole-page boxes for every page the TMA tier
# admits, issued by the producer's second warp; the bench glue's buffer table fixed):
# (1) the prefill kernel sweep (fresh seed) of this tree; (2) bench_mixed M1, M2, M5, M3, M4 prefill
# with FlashInfer partitioned and BatchAttention in the same process; (3) S1, S2 with the halves and
# the prefill kernel alone (the run that died with SIGSEGV after S1 in calls 2 of both sessions today).
set -u
R=$PWD; D=$R/.dev-s8
mkdir -p /tmp/t /tmp/x
xz -dc $D/lib.so.xz > /tmp/lib.so
xz -dc $D/test_prefill_gpu.xz > /tmp/t/test_prefill_gpu && chmod +x /tmp/t/test_prefill_gpu && cp $D/libcmocka.so.0 /tmp/t/
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
LD_LIBRARY_PATH=/tmp/t timeout 40 /tmp/t/test_prefill_gpu > /tmp/x/sweep.log 2>&1; echo "sweep rc=$? at ${SECONDS}s"; grep -E "worst|PASSED|FAILED" /tmp/x/sweep.log | tail -2; grep -c tma-vpage /tmp/x/sweep.log
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
export PYTHONPATH=/tmp/site
MAX_JOBS=14 timeout 40 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/x/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"
mkdir -p /tmp/x/mx /tmp/x/small
PYTHONUNBUFFERED=1 timeout 130 python3 bench/gpu/bench_mixed.py --lib /tmp/lib.so --out /tmp/x/mx \
  --peers part,ba --deadline 120 --reps 15 --no-extras --only M1,M2,M5,M3,M4_prefill \
  --variants auto,partition,part_serial,part_pf_c74,part_pf_c78,part_pf_c80,part_pf_c104,part_pf_c108 --caps 74,78,104,108 > /tmp/x/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - /tmp/x/mx/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]; p=r["peers"]
    print("  %-10s" % r["batch"], " ".join("%s:%.1f" % (n.replace("part_pf_",""), v["ms"]*1e3) for n,v in a.items() if "ms" in v),
          "| FI", " ".join("%s:%.1f" % (n, v["ms"]*1e3) for n,v in p.items() if "ms" in v))
PY
unset PYTHONPATH
PYTHONUNBUFFERED=1 timeout 60 python3 bench/gpu/bench_mixed.py --lib /tmp/lib.so --out /tmp/x/small --peers "" \
  --deadline 50 --reps 10 --only S1,S2 --variants unified,partition,auto,part_serial,part_pf_c66,part_pf_c78,part_pf_c88 --caps 66,88 > /tmp/x/small/log 2>&1
echo "small rc=$? at ${SECONDS}s"; grep -E "^S[0-9]" /tmp/x/small/log | cut -c1-260
(cd /tmp/x && tar cJf $OUT/res.txz .)
echo "done at ${SECONDS}s"
