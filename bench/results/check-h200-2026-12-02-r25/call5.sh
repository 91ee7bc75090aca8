#!/usr/bin/env bash
# session 2026-12-02j call 5 (tree 062be6b, staged by OLD_REV=none scripts/stage-device-check.sh .dev-s57):
# the device check c (full decode, prefill kernel and prefill engine sweeps, fresh seeds) and e (end to end
# through attnd), memcheck of the prefill engine's quick sweep (the fused mixed kernel's copy warp changed),
# then the mixed batches and small steps with auto under the refitted constants (no FlashInfer)
set -u
R=$PWD; D=$R/.dev-s57
tar xJf $D/pkg.txz -C $D
D=.dev-s57 bash scripts/device-check.sh ce 230 /tmp/chk > /tmp/chk.out 2>&1
echo "check rc=$? at ${SECONDS}s"; tail -14 /tmp/chk.out
mkdir -p /tmp/x && tar xzf /tmp/chk/logs.tgz -C /tmp/x 2>/dev/null && grep -rh "worst\|mismatches\|evidence level 6\|PASS" /tmp/x --include=*.log --include=*.txt | sort | uniq -c | head -20
export LD_LIBRARY_PATH=$D/build-gpu/lib
ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1 timeout 150 compute-sanitizer --tool memcheck --leak-check no $D/build-gpu/tests/test_prefill_engine_gpu > /tmp/x/memcheck_prefill_engine.log 2>&1
echo "memcheck prefill engine rc=$? at ${SECONDS}s"; tail -3 /tmp/x/memcheck_prefill_engine.log
mkdir -p /tmp/x/mx
PYTHONUNBUFFERED=1 timeout 120 python3 bench/gpu/bench_mixed.py --lib $D/build-gpu/lib/libattn_cuda_bench.so --out /tmp/x/mx \
  --peers "" --deadline 110 --reps 12 --only M1,M2,M3,M5,M4_decode,S1,S2,S3,S4 --no-extras \
  --variants unified,partition,auto,part_serial,part_pf_c74,part_pf_c80,part_pf_c104,part_pf_c108 --caps 74,104,108 > /tmp/x/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - /tmp/x/mx/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-10s" % r["batch"], " ".join("%s:%.3f" % (k.replace("part_pf_",""), v["ms"]) for k,v in a.items() if "ms" in v), "|", a.get("auto",{}).get("why","")[:200])
PY
cp /tmp/chk.out $OUT/; (cd /tmp/x && tar czf $OUT/logs_text.tgz --exclude='*.capture' .)
echo "done at ${SECONDS}s"
