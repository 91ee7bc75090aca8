#!/usr/bin/env bash
# session 2026-12-02h call 2: the epilogue's stores in wider pieces (q16: quad transpose, 16-byte
# stores; q8: pair swap, 8-byte stores) and the loads' sensitivity to traffic (dbl: every TMA box
# issued twice); ctl = main's kernel from the scratch copy; mirrored order
set -u
R=$PWD; D=$R/.dev-s44
mkdir -p /tmp/p && tar xJf $D/libs2.tar.xz -C /tmp/p
L=/tmp/p
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/prefill_ab.py \
  --var ctl=$L/lib_ctl.so:tma --var q16=$L/lib_q16.so:tma --var q8=$L/lib_q8.so:tma --var dbl=$L/lib_dbl.so:tma \
  --var dbl2=$L/lib_dbl.so:tma --var q82=$L/lib_q8.so:tma --var q162=$L/lib_q16.so:tma --var ctl2=$L/lib_ctl.so:tma \
  --reps 30 --only causal_S4096,causal_S8192,append_B8_T4096_C512,flashmask_docs8_S8192,fewq_B32_T8192_C4,causal_S2048 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"
tail -8 $OUT/prefill_ab.log
echo "== SASS: where the spills are"
for o in q8 q16; do
  cuobjdump -sass -fun '_ZN12attn_prefill19attn_prefill_attendILi128E13__nv_bfloat16Lb0EEEv24attn_cuda_prefill_paramsNS_6KvMapsE' $L/$o.o > $OUT/$o.sass 2>&1
  echo "$o: $(wc -l < $OUT/$o.sass) lines; STL/LDL at:"; grep -n 'STL\|LDL' $OUT/$o.sass | head -20
  echo "HGMMA lines: $(grep -n HGMMA $OUT/$o.sass | head -1 | cut -d: -f1) .. $(grep -n HGMMA $OUT/$o.sass | tail -1 | cut -d: -f1); STG lines: $(grep -n 'STG' $OUT/$o.sass | head -1 | cut -d: -f1) .. $(grep -n 'STG' $OUT/$o.sass | tail -1 | cut -d: -f1)"
done
xz -9 $OUT/*.sass
echo "done at ${SECONDS}s"
