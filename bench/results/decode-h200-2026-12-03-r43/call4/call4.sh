#!/usr/bin/env bash
# session 2026-12-03 (sixth) call 4, tree 8138a2f + keys as rows on the d 256 tensor-map producer (uncommitted):

# issue 13's documented device command (sweep with a fresh seed, bench --quick with the kernel before issue 13,
# memcheck, racecheck), then the four d 256 shapes against call 2's library (8138a2f: heads as rows) in one process.
set -u
R=$PWD; D=$R/.dev-s23
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
mkdir -p /tmp/site && tar xJf .dev-s9/fisite.tar.xz -C /tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf .dev-s9/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
export PYTHONPATH=/tmp/site
mkdir -p $OUT/dec
D=.dev-s23 bash .dev-s23/bench/decode_device.sh 330 $OUT/dec > $OUT/dec/device.log 2>&1
echo "decode_device rc=$? at ${SECONDS}s"; head -6 $OUT/dec/device.log; grep -E 'worst|PASSED|FAILED|SUMMARY|graph per-layer' $OUT/dec/device.log
python3 - $OUT/dec <<'PY'
import json,sys,glob
f=[x for x in sorted(glob.glob(sys.argv[1]+"/decode-h200-*.json")) if "partial" not in x]
d=json.load(open(f[-1]))
s=d.get("summary",{}).get("ratios_vs_attnd_default",{})
for k in ("flashinfer_tc","sdpa_cudnn_contiguous","attnd_old"): print(k, json.dumps(s.get(k)))
for r in d["shapes"]:
    p=r["peers"]; g=lambda k: p.get(k,{}).get("us")
    a,t,c,o=g("attnd_fi"),g("flashinfer_tc"),g("sdpa_cudnn_contiguous"),g("attnd_old")
    f=lambda x: ("%.3f"%(x/a)) if a and x else "-"
    print("%-22s %7.1f %5.2f TB/s xFI-TC %s  xcuDNN %s  xold %s" % (r["shape"], a or 0, r.get("kv_bytes",0)/a/1e6 if a and r.get("kv_bytes") else 0, f(t), f(c), f(o)))
PY
xz -dc $D/prev.so.xz > /tmp/prev.so
mkdir -p $OUT/ab256
PYTHONUNBUFFERED=1 timeout 90 python3 $D/bench/bench_decode.py --lib $D/lib/libattn_cuda_bench.so --old /tmp/prev.so \
  --out $OUT/ab256 --no-graph --shapes d256_B32_T4096,d256_B1_T32768,d256_B8_T8192,d256_B128_T2048 > $OUT/ab256/log 2>&1
echo "ab256 rc=$? at ${SECONDS}s"; python3 $D/summ.py $OUT/ab256
echo "done at ${SECONDS}s"
