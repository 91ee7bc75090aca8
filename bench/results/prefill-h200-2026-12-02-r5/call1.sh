#!/usr/bin/env bash
# session 2026-12-02h call 1: what bounds the prefill kernel now (diagnostic variants, one process,
# mirrored order): ctl = main's kernel from a scratch copy; nost = epilogue without its global
# stores; st2 = d 128 at 2 stages with the overlap kept; st2nost = both; noload = the producer
# issues no K/V copies (tiles hold stale shared memory: timing only)
set -u
R=$PWD; D=$R/.dev-s44
mkdir -p /tmp/p && tar xJf $D/libs.tar.xz -C /tmp/p
L=/tmp/p
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.draw --format=csv
echo "== prefill A/B"; PYTHONUNBUFFERED=1 timeout 300 python3 bench/gpu/prefill_ab.py \
  --var ctl=$L/lib_ctl.so:tma --var nost=$L/lib_nost.so:tma --var st2=$L/lib_st2.so:tma --var st2nost=$L/lib_st2nost.so:tma --var noload=$L/lib_noload.so:tma \
  --var noload2=$L/lib_noload.so:tma --var st2nost2=$L/lib_st2nost.so:tma --var st22=$L/lib_st2.so:tma --var nost2=$L/lib_nost.so:tma --var ctl2=$L/lib_ctl.so:tma \
  --reps 30 --only causal_S4096,causal_S8192,append_B8_T4096_C512,flashmask_docs8_S8192,fewq_B32_T8192_C4 --out $OUT > $OUT/prefill_ab.log 2>&1; echo "rc=$? at ${SECONDS}s"
tail -30 $OUT/prefill_ab.log
echo "done at ${SECONDS}s"
