#!/usr/bin/env bash
# The two-process zero-copy check on a GPU machine (issue 11): CUDA IPC open,
# cross-process semaphores around attnd's decode run, release of a pending
# wait, a client killed mid-wait -- once without MPS and once under MPS when
# nvidia-cuda-mps-control is there.  Run from a folder holding
# test_zerocopy_gpu (tests/gpu/build.sh builds it); logs go to $OUT (or ./out).
#   scripts/stage-device-zerocopy.sh DIR   # here: build and stage into DIR
#   cd DIR && ./device-zerocopy.sh         # there
set -u
OUT=${OUT:-./out}
mkdir -p "$OUT"
BIN=./test_zerocopy_gpu
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee "$OUT/gpu.txt"
rc=0
echo "== without MPS"
timeout 20 "$BIN" >"$OUT/nomps.txt" 2>&1 || rc=1
cat "$OUT/nomps.txt"
if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/attn-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/attn-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        sleep 1
        echo "== under MPS"
        timeout 20 "$BIN" >"$OUT/mps.txt" 2>&1 || rc=1
        cat "$OUT/mps.txt"
        echo quit | nvidia-cuda-mps-control
        sleep 1
        cat "$CUDA_MPS_LOG_DIRECTORY"/*.log >"$OUT/mps-daemon-log.txt" 2>/dev/null
    else
        echo "nvidia-cuda-mps-control -d failed: no MPS run"
    fi
else
    echo "no nvidia-cuda-mps-control on this machine: no MPS run"
fi
echo "== summary"
grep -h -E "^mps:|hand-off|round trip|ipc open|release|zerocopy:|FAIL" "$OUT"/nomps.txt "$OUT"/mps.txt 2>/dev/null
exit $rc
