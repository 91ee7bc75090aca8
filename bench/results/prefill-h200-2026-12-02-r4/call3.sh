#!/usr/bin/env bash
# session 2026-12-02g call 2: the prefill kernel's per-unit overhead: early qempty (eq), the Q
# prefetch's loads moved behind S_0 (lp), both; ctl = the same scratch source without defines
set -u
R=$PWD; D=$R/.dev-s38
mkdir -p /tmp/p && tar xJf $D/pkg.txz -C /tmp/p
L=/tmp/p
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/prefill_ab.py --var both=$L/both.so:tma --var eq=$L/eq.so:tma --var ctl=$L/ctl.so:tma --var both2=$L/both.so:tma --var eq2=$L/eq.so:tma --var ctl2=$L/ctl.so:tma --reps 30 \
  --only causal_S2048,causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,fewq_B32_T8192_C4,flashmask_docs8_S8192 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"; tail -14 $OUT/prefill_ab.log
echo "== mixed"; for V in eq both base; do mkdir -p $OUT/mx_$V
PYTHONUNBUFFERED=1 timeout 80 python3 bench/gpu/bench_mixed.py --lib $L/$V.so --out $OUT/mx_$V --peers "" --no-extras --reps 10 --deadline 70 --only M1,M2,M5,M4_prefill --variants auto,part_pf_c66,part_pf_c96 > $OUT/mx_$V/log 2>&1; echo "$V rc=$? at ${SECONDS}s"; grep -E "^M[0-9]" $OUT/mx_$V/log | cut -c1-200; done
tar cJf $OUT/all.tar.xz -C $OUT mx_base mx_both mx_eq prefill_ab.log $(cd $OUT && ls *.json 2>/dev/null) 2>/dev/null
echo "done at ${SECONDS}s"
