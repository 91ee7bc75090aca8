#!/usr/bin/env bash
# session 2026-12-03 call 2 (staged by OLD_REV=none scripts/stage-device-check.sh .dev-s2): the
# prefill planner keeps its load-bound cuts only where they pay for the combine.  The device check c
# (decode, prefill kernel, prefill engine sweeps, fresh seeds) and e (end to end through attnd, demo);
# then the mixed batches and the small steps at twelve caps with the halves and the prefill kernel
# alone (the calibration of the cost model's prefill fixed time and combine term), no FlashInfer.
set -u
R=$PWD; D=$R/.dev-s2
tar xJf $D/pkg.txz -C $D
D=.dev-s2 bash scripts/device-check.sh ce 240 /tmp/chk > /tmp/chk.out 2>&1
echo "check rc=$? at ${SECONDS}s"; tail -16 /tmp/chk.out
mkdir -p /tmp/x && tar xzf /tmp/chk/logs.tgz -C /tmp/x 2>/dev/null && grep -rh "worst\|mismatches\|evidence level 6\|PASS" /tmp/x --include=*.log --include=*.txt | sort | uniq -c | head -20
export LD_LIBRARY_PATH=$D/build-gpu/lib
CAPS=62,66,70,74,78,80,88,96,100,104,108,112
V=unified,partition,auto,part_serial; for c in ${CAPS//,/ }; do V=$V,part_pf_c$c; done
mkdir -p /tmp/x/mx
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/bench_mixed.py --lib $D/build-gpu/lib/libattn_cuda_bench.so --out /tmp/x/mx \
  --peers "" --deadline 190 --reps 12 --only M1,M2,M3,M5,M4_decode,M4_prefill,S1,S2,S3,S4 \
  --variants $V --caps $CAPS > /tmp/x/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - /tmp/x/mx/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]; k=r.get("kernel",{})
    print("  %-10s" % r["batch"], " ".join("%s:%.1f" % (n.replace("part_pf_",""), v["ms"]*1e3) for n,v in a.items() if "ms" in v),
          "| merges", a.get("partition",{}).get("prefill_merges"), "| kernel", k.get("merges"), " ".join("%s:%.1f" % (n, v["ms"]*1e3) for n,v in k.items() if isinstance(v,dict) and "ms" in v))
    print("     auto:", a.get("auto",{}).get("why","")[:150])
PY
cp /tmp/chk.out $OUT/; (cd /tmp/x && tar czf $OUT/logs_text.tgz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
