#!/usr/bin/env bash
# session 2026-12-02i call 9 (tree b4538b1's library): where S1's partition run spends 111 us against
# unified's 65: ncu's per-kernel durations of one engine run of each (CUDA events time the run's window)
set -u
R=$PWD; D=$R/.dev-s53
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
for V in part_serial partition unified; do
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:'attn|append|producer|merge|combine|restore|stamp' \
    python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out /tmp/o_$V --peers "" --only S1 --no-extras --reps 1 \
    --variants $V > $OUT/ncu_S1_$V.csv 2> $OUT/ncu_S1_$V.err
  echo "== $V rc=$? at ${SECONDS}s"
  python3 - $OUT/ncu_S1_$V.csv <<'PY'
import csv,sys,collections
rows=[r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
hdr=rows[0]; ki=hdr.index("Kernel Name"); vi=hdr.index("Metric Value"); ii=hdr.index("ID"); ui=hdr.index("Metric Unit")
sc={"nsecond":1e3,"usecond":1.0,"msecond":1e-3,"second":1e-6}
ks=[(int(r[ii]), r[ki][:90], float(r[vi].replace(',',''))*1e3/sc.get(r[ui],1e3)) for r in rows[1:]]
print("  kernels profiled:", len(ks))
for i,n,v in ks[-12:]: print("   %4d %10.1f us  %s" % (i, v/1e3, n))
PY
done
echo "done at ${SECONDS}s"
