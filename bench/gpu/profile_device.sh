#!/usr/bin/env bash
# Issue 13, device call 1: Nsight Compute on attnd's decode producer (and
# cuDNN, FlashInfer-TC) at the profile shapes, and the configuration sweep.
# Usage on the device: D=<staged dir> bash profile_device.sh $OUT
# D holds lib/ (libattn_cuda_bench.so), bench/ (the python scripts).
set -u
FINAL=${1:-/tmp/prof}
D=$(cd "${D:?}" && pwd)
OUT=$(mktemp -d) # everything lands in $FINAL/prof.tgz (the device returns at most 8 files)
mkdir -p "$FINAL"
t0=$(date +%s)
left() { echo $((${BUDGET:-240} - ($(date +%s) - t0))); }
export PYTHONUNBUFFERED=1
PY="python3 $D/bench/decode_profile.py --lib $D/lib/libattn_cuda_bench.so --out $OUT"
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
NCU="ncu --clock-control none --nvtx --nvtx-include prof/ $SEC"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; ncu --version | tail -1; } >"$OUT/env.txt" 2>&1
timeout 90 $NCU -f -o "$OUT/attnd" $PY --mode ncu-attnd >"$OUT/ncu_attnd.log" 2>&1
echo "ncu attnd rc=$? ($(( $(date +%s) - t0 )) s)"
timeout $(( $(left) - 60 > 120 ? 120 : $(left) - 60 )) $PY --mode sweep >"$OUT/sweep.log" 2>&1
echo "sweep rc=$? ($(( $(date +%s) - t0 )) s)"
timeout 40 $NCU -f -o "$OUT/cudnn" $PY --mode ncu-cudnn >"$OUT/ncu_cudnn.log" 2>&1
echo "ncu cudnn rc=$? ($(( $(date +%s) - t0 )) s)"
if [ "$(left)" -gt 30 ] && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1 && export PYTHONPATH=/tmp/site
    timeout $(( $(left) - 10 )) $NCU -f -o "$OUT/fitc" $PY --mode ncu-fitc --shapes B1_T32768,B128_T8192,B64_T4096 >"$OUT/ncu_fitc.log" 2>&1
    echo "ncu fitc rc=$? ($(( $(date +%s) - t0 )) s)"
fi
for r in attnd cudnn fitc; do
    [ -f "$OUT/$r.ncu-rep" ] && ncu -i "$OUT/$r.ncu-rep" --page details >"$OUT/$r.txt" 2>&1
done
tar -C "$OUT" -czf "$FINAL/prof.tgz" .
tail -25 "$OUT/sweep.log"
grep -h "^plan" "$OUT/ncu_attnd.log"
for r in attnd cudnn fitc; do
    [ -f "$OUT/$r.txt" ] && grep -E "^  [a-zA-Z_:<>]|DRAM Throughput|Achieved Occupancy|Waves Per SM" "$OUT/$r.txt" | head -40
done
