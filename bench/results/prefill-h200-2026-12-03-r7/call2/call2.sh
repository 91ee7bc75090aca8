#!/usr/bin/env bash
# session 2026-12-03 (second) call 2 (tree: main + V's TMA boxes as whole pages, attn_cuda_prefill_v_page_boxes,
# rule: pages of 16 rows; staged by OLD_REV=none scripts/stage-device-check.sh, test_decode_gpu and
# test_restore_gpu left out of the package for the carry limit: no decode or restore code changed):
# (1) prefill_ab, the variants' launches interleaved (call 1's clocks drifted 5-10 % within a run): this
#     tree with V per 64-column chunk as main (vchunk), by the rule, whole pages wherever admitted (vpage),
#     at page sizes 16 (FlashInfer FA3 beside), 32, 64;
# (2) scripts/device-check.sh cse (prefill kernel and engine sweeps, fresh seeds; memcheck and racecheck;
#     end to end through attnd, the demo);
# (3) bench_mixed M1, M2, M3, M5, M4 with FlashInfer partitioned and BatchAttention in the same process.
set -u
R=$PWD; D=$R/.dev-s6
tar xJf $D/pkg.txz -C $D
L=$D/build-gpu/lib/libattn_cuda_bench.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
mkdir -p /tmp/x
for run in 16a 16b 32 64; do
  P=${run%[ab]}
  SH=causal_S4096,causal_S8192,append_B8_T4096_C512,causal_d256_S8192,causal_group8_S8192
  FI=""
  # FlashInfer's FA3 module is cached for d 128 only (a JIT build would outrun the call)
  [ $run = 16a ] && SH=causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,causal_S2048,fewq_B32_T8192_C4 && FI="--fi fa3"
  [ $run = 16b ] && SH=causal_d256_S8192,causal_group8_S8192,flashmask_docs8_S8192,causal_d64_S8192
  mkdir -p /tmp/x/p$run
  PYTHONPATH=/tmp/site timeout 100 python3 bench/gpu/prefill_ab.py --var vchunk=$L:tma-vchunk \
    --var rule=$L:tma --var vpage=$L:tma-vpage $FI --only $SH --page $P --reps 30 --out /tmp/x/p$run > /tmp/x/p$run/log 2>&1
  echo "page $run rc=$? at ${SECONDS}s"; tail -8 /tmp/x/p$run/log | grep " ms" | cut -c1-110
  python3 - /tmp/x/p$run/prefill_ab.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print("   %-26s" % r["shape"], " ".join("%s rel %.1e nan %s" % (n, v.get("rel_l2_vs_first", 0), v.get("nan")) for n, v in r["variants"].items() if n != "vchunk"))
PY
done
D=.dev-s6 bash scripts/device-check.sh cse 250 /tmp/chk > /tmp/chk.out 2>&1
echo "check rc=$? at ${SECONDS}s"; tail -12 /tmp/chk.out
mkdir -p /tmp/x/chk && tar xzf /tmp/chk/logs.tgz -C /tmp/x/chk 2>/dev/null && grep -rh "worst\|mismatches\|evidence level 6\|PASS\|ERROR SUMMARY\|hazard" /tmp/x/chk --include=*.log --include=*.txt | sort | uniq -c | head -24
grep -rh "tma-vpage" /tmp/x/chk 2>/dev/null | wc -l
export PYTHONPATH=/tmp/site
MAX_JOBS=14 timeout 60 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/x/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"; tail -1 /tmp/x/fiw.log
left=$((585 - SECONDS)); [ $left -gt 200 ] && left=200
mkdir -p /tmp/x/mx
PYTHONUNBUFFERED=1 timeout $left python3 bench/gpu/bench_mixed.py --lib $L --out /tmp/x/mx \
  --peers part,ba --deadline $((left - 10)) --reps 15 --no-extras --only M1,M2,M5,M3,M4_prefill,M4_decode \
  --variants unified,partition,auto,part_serial,part_pf_c74,part_pf_c78,part_pf_c80,part_pf_c88,part_pf_c96,part_pf_c104,part_pf_c108,part_pf_c112 \
  --caps 74,78,104,108 > /tmp/x/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - /tmp/x/mx/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]; p=r["peers"]
    print("  %-10s" % r["batch"], " ".join("%s:%.1f" % (n.replace("part_pf_",""), v["ms"]*1e3) for n,v in a.items() if "ms" in v),
          "| FI", " ".join("%s:%.1f" % (n, v["ms"]*1e3) for n,v in p.items() if "ms" in v))
PY
cp /tmp/chk.out /tmp/x/; (cd /tmp/x && tar cJf $OUT/res.txz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
