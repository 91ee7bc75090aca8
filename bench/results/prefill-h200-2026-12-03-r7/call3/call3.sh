#!/usr/bin/env bash
# session 2026-12-03 (second) call 3 (the final tree: V's whole-page boxes for pages of 16-64 rows,
# ATTN_PREFILL_V_PAGE_BOX_ROWS 64; and vw: the same tree with V's boxes issued by the producer's second
# warp, -DPF_VWARP1, an experiment):
# (1) prefill_ab, launches interleaved: page 16 final (rule) against vw; page 128 per-chunk against whole-page;
# (2) vw's prefill kernel sweep (fresh seed), then its quick sweep under memcheck and racecheck;
# (3) bench_mixed with the final library, no peers: S1-S4 and M1, M2, M3, M5 with the halves and the
#     prefill kernel alone at the caps (the cost model's calibration inputs).
set -u
R=$PWD; D=$R/.dev-s7
mkdir -p /tmp/t /tmp/x
xz -dc $D/lib.so.xz > /tmp/lib.so; xz -dc $D/lib_vw.so.xz > /tmp/lib_vw.so
xz -dc $D/test_prefill_gpu_vw.xz > /tmp/t/test_prefill_gpu_vw && chmod +x /tmp/t/test_prefill_gpu_vw && cp $D/libcmocka.so.0 /tmp/t/
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
mkdir -p /tmp/x/p16 /tmp/x/p128
timeout 70 python3 bench/gpu/prefill_ab.py --var vchunk=/tmp/lib.so:tma-vchunk --var rule=/tmp/lib.so:tma --var vw=/tmp/lib_vw.so:tma \
  --only causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,causal_d256_S8192,causal_group8_S8192 --page 16 --reps 30 --out /tmp/x/p16 > /tmp/x/p16/log 2>&1
echo "p16 rc=$? at ${SECONDS}s"; tail -7 /tmp/x/p16/log | cut -c1-100
timeout 50 python3 bench/gpu/prefill_ab.py --var vchunk=/tmp/lib.so:tma --var vpage=/tmp/lib.so:tma-vpage \
  --only causal_S4096,causal_S8192,append_B8_T4096_C512,causal_group8_S8192 --page 128 --reps 30 --out /tmp/x/p128 > /tmp/x/p128/log 2>&1
echo "p128 rc=$? at ${SECONDS}s"; tail -5 /tmp/x/p128/log | cut -c1-100
grep -h rel_l2 /tmp/x/p16/prefill_ab.json /tmp/x/p128/prefill_ab.json | sort | uniq -c | head
export LD_LIBRARY_PATH=/tmp/t
timeout 60 /tmp/t/test_prefill_gpu_vw > /tmp/x/vw_sweep.log 2>&1; echo "vw sweep rc=$? at ${SECONDS}s"; grep -E "worst|PASSED|FAILED" /tmp/x/vw_sweep.log | tail -3
export ATTN_GPU_QUICK=1 ATTN_GPU_SANITIZER=1
timeout 60 compute-sanitizer --tool memcheck --leak-check no /tmp/t/test_prefill_gpu_vw > /tmp/x/vw_memcheck.log 2>&1; echo "vw memcheck rc=$? at ${SECONDS}s"; grep -E "ERROR SUMMARY|PASSED|FAILED" /tmp/x/vw_memcheck.log | tail -2
timeout 70 compute-sanitizer --tool racecheck /tmp/t/test_prefill_gpu_vw > /tmp/x/vw_racecheck.log 2>&1; echo "vw racecheck rc=$? at ${SECONDS}s"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" /tmp/x/vw_racecheck.log | tail -2
unset ATTN_GPU_QUICK ATTN_GPU_SANITIZER LD_LIBRARY_PATH
left=$((570 - SECONDS)); [ $left -gt 230 ] && left=230
mkdir -p /tmp/x/mx
PYTHONUNBUFFERED=1 timeout $left python3 bench/gpu/bench_mixed.py --lib /tmp/lib.so --out /tmp/x/mx --peers "" \
  --deadline $((left - 10)) --reps 12 --only S1,S2,S3,S4,M1,M2,M5,M3 \
  --variants unified,partition,auto,part_serial,part_pf_c66,part_pf_c74,part_pf_c78,part_pf_c80,part_pf_c88,part_pf_c96,part_pf_c104,part_pf_c108,part_pf_c112 \
  --caps 66,74,78,80,88,96,104,108,112 > /tmp/x/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"
python3 - /tmp/x/mx/mixed_bench.json <<'PY'
import json,sys
for r in json.load(open(sys.argv[1]))["rows"]:
    a=r["attnd"]
    print("  %-4s" % r["batch"], " ".join("%s:%.1f" % (n.replace("part_pf_",""), v["ms"]*1e3) for n,v in a.items() if "ms" in v))
    print("     auto:", a.get("auto",{}).get("why","")[:140])
PY
(cd /tmp/x && tar cJf $OUT/res.txz .)
echo "done at ${SECONDS}s"
