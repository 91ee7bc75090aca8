#!/usr/bin/env bash
# session 2026-12-02h call 5: ncu of the prefill kernel at causal S 4096 under four builds: ctlx
# (main's kernel), pair (clusters of two, boxes multicast: half the L2->SM bytes), dbl (every box
# twice: double), noload (no K/V copies): where the loads cost
set -u
R=$PWD; D=$R/.dev-s44
mkdir -p /tmp/p && tar xJf $D/libs5.tar.xz -C /tmp/p
L=/tmp/p
ncu --version | tail -1
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section ComputeWorkloadAnalysis"
PYTHONUNBUFFERED=1 timeout 200 ncu --clock-control none --kernel-name regex:attn_prefill_attend $SEC -f -o $OUT/pf python3 bench/gpu/prefill_ab.py --profile \
  --var ctlx=$L/lib_ctlx.so:tma --var pair=$L/lib_pair.so:tma --var dbl=$L/lib_dbl.so:tma --var noload=$L/lib_noload.so:tma --only causal_S4096 > $OUT/ncu.log 2>&1
echo "ncu rc=$? at ${SECONDS}s"; tail -3 $OUT/ncu.log
ncu --import $OUT/pf.ncu-rep --page details > $OUT/details.txt 2>&1
grep -E 'attn_prefill_attend|Duration|Throughput|Busy|Hit Rate|Bank|Wavefronts|Warp Cycles|Issued Ipc|Active Warps|Max Bandwidth|Pipe' $OUT/details.txt | grep -v '^ *-' | head -120
echo "done at ${SECONDS}s"
