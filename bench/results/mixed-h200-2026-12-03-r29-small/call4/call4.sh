#!/usr/bin/env bash
# session 2026-12-03 call 4: call 2's benchmark process (M1-M5, M4, S1-S4 with the halves and the
# prefill kernel alone at 13 caps) died with SIGSEGV after S1; the same command under cuda-gdb (batch:
# run, and a backtrace if it stops on a signal), call 3's library
set -u
R=$PWD; D=$R/.dev-s3
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
CAPS=62,66,70,74,78,80,88,96,100,104,108,112
V=unified,partition,auto,part_serial; for c in ${CAPS//,/ }; do V=$V,part_pf_c$c; done
mkdir -p $OUT/mx
timeout 420 cuda-gdb -batch -ex "set pagination off" -ex run -ex bt -ex "info threads" --args python3 -X faulthandler bench/gpu/bench_mixed.py \
  --lib /tmp/p/lib.so --out $OUT/mx --peers "" --deadline 400 --reps 12 --only M1,M2,M3,M5,M4_decode,M4_prefill,S1,S2,S3,S4 \
  --variants $V --caps $CAPS > $OUT/gdb.log 2>&1
echo "gdb rc=$? at ${SECONDS}s"
grep -n -B2 -A30 "SIGSEGV\|signal SIG" $OUT/gdb.log | head -60
grep -E "^(M[0-9]|S[0-9])" $OUT/gdb.log | cut -c1-120
tail -5 $OUT/gdb.log | cut -c1-300
cd $OUT && tar cJf res.txz gdb.log mx && rm -rf gdb.log mx
echo "done at ${SECONDS}s"
