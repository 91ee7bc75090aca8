#!/usr/bin/env bash
# session 2026-12-02g call 9 (tree 692442c = ctl3): the consumers' issue turns (ping-pong) at d 128
# again, now that Q comes back at the unit's last S (pp)
set -u
R=$PWD; D=$R/.dev-s43
mkdir -p /tmp/p && tar xJf $D/pkg.txz -C /tmp/p
L=/tmp/p
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/prefill_ab.py --var ctl=$L/ctl3.so:tma --var pp=$L/pp.so:tma --var pp2=$L/pp.so:tma --var ctl2=$L/ctl3.so:tma --reps 30 \
  --only causal_S2048,causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,fewq_B32_T8192_C4,flashmask_docs8_S8192,causal_group8_S8192 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"; grep -A10 "^shape" $OUT/prefill_ab.log
echo "== mixed"; for V in ctl3 pp; do mkdir -p $OUT/mx_$V
PYTHONUNBUFFERED=1 timeout 80 python3 bench/gpu/bench_mixed.py --lib $L/$V.so --out $OUT/mx_$V --peers "" --no-extras --reps 15 --deadline 70 --only M1,M2,M5,M4_prefill --variants auto,part_pf_c66,part_pf_c96 > $OUT/mx_$V/log 2>&1; echo "$V rc=$? at ${SECONDS}s"; grep -A5 "^batch" $OUT/mx_$V/log | cut -c1-120; done
tar cJf $OUT/all.tar.xz -C $OUT mx_ctl3 mx_pp prefill_ab.log prefill_ab.json 2>/dev/null; rm -rf $OUT/mx_*
echo "done at ${SECONDS}s"
