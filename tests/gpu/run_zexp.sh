#!/usr/bin/env bash
# The exported-pool / kv_written / graph-handshake / ping-pong device run
# (issue 11 items 2 and 4) on a GPU machine, staged by scripts/stage-zexp.sh:
#   without MPS, then under MPS (nvidia-cuda-mps-control -d, stopped after):
#     tests/gpu/zexp_device.py   exported CUDA pool written by torch, kv_written
#                                runs bit-identical to inline, torch fp32 reference,
#                                the measured ping-pong of a registration
#     graph_handshake            examples/cuda/graph_handshake.cu, a few steps
# Usage: bash run_zexp.sh STAGED_DIR OUT_DIR.  Writes OUT_DIR/{env.txt,
# run.log, attnd-*.log}; prints the PASS / FAIL lines and the ping-pong
# figures last.  Worst case (every step timing out) ~115 s; normally far less.
set -u
S=$(cd "${1:?usage: $0 STAGED_DIR OUT_DIR}" && pwd)
OUT=${2:-/tmp/zexp}
mkdir -p "$OUT"
[ -f "$S/bin.tar.xz" ] && [ ! -x "$S/attnd" ] && tar -C "$S" -xJf "$S/bin.tar.xz"
export PYTHONPATH=$S/py${PYTHONPATH:+:$PYTHONPATH}
# every kernel loaded before a cross-process wait is enqueued (ZERO-COPY.md §2)
export CUDA_MODULE_LOADING=EAGER
tmp=$(mktemp -d)
url="ipc://$tmp/attnd.sock"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    "$S/attnd" --version
    command -v nvidia-cuda-mps-control || echo "no nvidia-cuda-mps-control"
} >"$OUT/env.txt" 2>&1

start_attnd() { # TAG
    rm -f "$tmp/attnd.sock"
    "$S/attnd" --listen "$url" --engine cuda --pool-budget $((8 << 30)) --log-level info \
        --workers 1 --conn-inflight 64 --contexts 64 >"$OUT/attnd-$1.log" 2>&1 &
    apid=$!
    for _ in $(seq 200); do [ -S "$tmp/attnd.sock" ] && break; sleep 0.05; done
}
stop_attnd() {
    kill -TERM "$apid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$apid" 2>/dev/null && kill -KILL "$apid"
    wait "$apid" 2>/dev/null
    echo "== attnd exit $?" >>"$OUT/run.log"
}
phase() { # TAG
    start_attnd "$1"
    echo "== zexp_device $1" >>"$OUT/run.log"
    timeout 30 python3 "$S/zexp_device.py" --url "$url" --tag "$1" >>"$OUT/run.log" 2>&1 ||
        echo "FAIL zexp $1 zexp_device.py exit $?" >>"$OUT/run.log"
    echo "== graph_handshake $1" >>"$OUT/run.log"
    timeout 12 "$S/graph_handshake" "$url" 4 >"$OUT/graph-$1.log" 2>&1
    rc=$?
    sed "s/^/  /" "$OUT/graph-$1.log" >>"$OUT/run.log"
    sed -n 's/^\(PASS\|FAIL\) graph_handshake/\1 graph_handshake '"$1"'/p' "$OUT/graph-$1.log" \
        >>"$OUT/run.log"
    [ $rc -eq 0 ] || grep -q '^FAIL' "$OUT/graph-$1.log" ||
        echo "FAIL graph_handshake $1 exit $rc (no verdict: timeout or crash)" >>"$OUT/run.log"
    stop_attnd
}

phase nomps
if command -v nvidia-cuda-mps-control >/dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        phase mps
        echo quit | nvidia-cuda-mps-control
        cp "$CUDA_MPS_LOG_DIRECTORY"/*.log "$OUT/" 2>/dev/null
    else
        echo "FAIL zexp mps nvidia-cuda-mps-control -d failed" >>"$OUT/run.log"
    fi
else
    echo "FAIL zexp mps no nvidia-cuda-mps-control on this machine" >>"$OUT/run.log"
fi
echo "---- summary"
grep -E "^ *(PINGPONG|HANDOFF|hello|diag handoff|step )" "$OUT/run.log"
grep -E '^(PASS|FAIL) ' "$OUT/run.log"
! grep -q '^FAIL ' "$OUT/run.log"
