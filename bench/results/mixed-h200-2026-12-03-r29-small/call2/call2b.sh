#!/usr/bin/env bash
# session 2026-12-03 call 2b: bench_mixed.py crashed (SIGSEGV) after S1 in call 2; locate it on S2-S4
set -u
R=$PWD; D=$R/.dev-s2
[ -d $D/build-gpu ] || tar xJf $D/pkg.txz -C $D
export LD_LIBRARY_PATH=$D/build-gpu/lib
CAPS=62,66,70,74,78,80,88,96,100,104,108,112
V=unified,partition,auto,part_serial; for c in ${CAPS//,/ }; do V=$V,part_pf_c$c; done
mkdir -p $OUT/mx
PYTHONUNBUFFERED=1 timeout 100 python3 -X faulthandler bench/gpu/bench_mixed.py --lib $D/build-gpu/lib/libattn_cuda_bench.so --out $OUT/mx \
  --peers "" --deadline 90 --reps 12 --only S2,S3,S4 --variants $V --caps $CAPS > $OUT/mx/log 2>&1
rc=$?; echo "mixed rc=$rc at ${SECONDS}s"; tail -30 $OUT/mx/log | cut -c1-300
if [ $rc -ne 0 ]; then
  timeout 150 cuda-gdb -batch -ex run -ex bt -ex "info registers rip" --args python3 bench/gpu/bench_mixed.py --lib $D/build-gpu/lib/libattn_cuda_bench.so --out /tmp/g \
    --peers "" --deadline 90 --reps 3 --only S2 --variants $V --caps $CAPS > $OUT/gdb.log 2>&1
  echo "gdb rc=$? at ${SECONDS}s"; grep -A25 "SIGSEGV" $OUT/gdb.log | head -40
fi
echo "done at ${SECONDS}s"
