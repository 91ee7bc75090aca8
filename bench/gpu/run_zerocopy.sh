#!/usr/bin/env bash
# The two-process zero-copy benchmark and device test on a GPU machine
# (issue 11): bench/gpu/bench_zerocopy.py's phases around attnd, with and
# without CUDA MPS.  Staged by scripts/stage-zerocopy.sh (static attnd, the
# bench glue library, the Python package and a pure-Python msgpack).
#   (a) in-process kernels          -> phase inproc (no daemon), with its timeline
#   without MPS: (b') refs (pipelined), (c) inline, kill test
#   under MPS:   (b) refs (pipelined: this round's client and round 2's), kill test;
#                then attnd again with ATTN_CUDA_TIMELINE: both clients' timelines
# Usage: bash bench/gpu/run_zerocopy.sh STAGED_DIR OUT_DIR [STEPS]
# NOMPS=0 skips the configurations without MPS, KILL=0 the kill tests (a
# shorter device call when only the MPS path changed).  KVW=1 adds, under
# MPS, the client that writes its K/V rows into an exported pool and runs
# kv_written (b_refs_kvw).  Under MPS the C client (bench/gpu/zc_client.cu,
# libattn's prepared runs; staged as $S/zc_client) runs after the Python
# clients on the same pool, each of its done waits C_VARIANTS (default
# memop,spin,oneword), and in the timeline pass too.  VARIANTS limits
# the Python clients under MPS (e.g. b_refs,b_refs_kvw).
# Writes OUT_DIR/{env.txt, run.log, attnd.log, zc-results.jsonl, summary.md,
# attnd-timeline.jsonl}.
set -u
S=$(cd "${1:?usage: $0 STAGED_DIR OUT_DIR}" && pwd)
OUT=${2:-/tmp/zc}
STEPS=${3:-10}
WINDOW=${WINDOW:-64} # pipelined runs unanswered at once (above a step's 32)
mkdir -p "$OUT"
# attnd and the bench glue travel xz-packed (scripts/stage-zerocopy.sh)
[ -f "$S/bin.tar.xz" ] && [ ! -x "$S/attnd" ] && tar -C "$S" -xJf "$S/bin.tar.xz"
# the whole run stays under BUDGET_S seconds: a phase that could end past it
# is skipped (said in run.log and the summary), so the summary always prints
BUDGET_S=${BUDGET_S:-140}
here=$(cd "$(dirname "$0")" && pwd)
# msgpack's wheel (C decoder) where it installs, else its pure-Python half in $S/py
site=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --target "$site" "$S"/whl/*.whl >/dev/null 2>&1 ||
    echo "msgpack wheel did not install: pure-Python msgpack" >>"$OUT/env.txt"
export PYTHONPATH=$site:$S/py${PYTHONPATH:+:$PYTHONPATH}
# every kernel loaded before any cross-process wait is enqueued (ZERO-COPY.md
# §2: a lazily loaded kernel behind a pending wait deadlocks both processes)
export CUDA_MODULE_LOADING=EAGER
tmp=$(mktemp -d)
url="ipc://$tmp/attnd.sock"
{
    date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    "$S/attnd" --version
    command -v nvidia-cuda-mps-control || echo "no nvidia-cuda-mps-control"
    python3 -c 'import msgpack, attn; print("msgpack", msgpack.version, msgpack.Packer, attn.__file__)'
} >>"$OUT/env.txt" 2>&1

bench() { # PHASE TAG [bench_zerocopy.py options]
    if [ $((SECONDS + ${PHASE_TIMEOUT:-60})) -gt "$BUDGET_S" ]; then
        echo "== $1 $2 skipped: ${SECONDS}s spent, budget ${BUDGET_S}s" | tee -a "$OUT/run.log" \
            >>"$OUT/skipped.txt"
        return
    fi
    echo "== $1 $2" >>"$OUT/run.log"
    ZC_MPS=$mps timeout "${PHASE_TIMEOUT:-60}" python3 "$here/bench_zerocopy.py" --phase "$1" --url "$url" \
        --lib "$S/libattn_cuda_bench.so" --steps "$STEPS" --window "$WINDOW" --out "$OUT" --tag="$2" \
        "${@:3}" >>"$OUT/run.log" 2>&1
    echo "== $1 $2 rc=$?" >>"$OUT/run.log"
}
start_attnd() { # TAG
    rm -f "$tmp/attnd.sock"
    echo "== attnd $1" >>"$OUT/attnd.log"
    # --workers 1: a connection's requests are handled one at a time in the
    # order the loop received them, so pipelined async runs are enqueued in
    # the order sent (docs/protocol.md, "Pipelined asynchronous runs");
    # --conn-inflight/--contexts above the client's window of $WINDOW
    "$S/attnd" --listen "$url" --engine cuda --pool-budget $((48 << 30)) --log-level info \
        --workers 1 --conn-inflight $((WINDOW * 2)) --contexts $((WINDOW * 2)) \
        2>>"$OUT/attnd.log" &
    apid=$!
    for _ in $(seq 200); do [ -S "$tmp/attnd.sock" ] && break; sleep 0.05; done
}
stop_attnd() { # SIGTERM (drains), SIGKILL after 10 s
    kill -TERM "$apid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$apid" 2>/dev/null && { echo "== attnd did not exit in 10 s: SIGKILL" >>"$OUT/attnd.log"; kill -KILL "$apid"; }
    wait "$apid"
    echo "== attnd exit $?" >>"$OUT/attnd.log"
}

mps=0
bench inproc ""
# without MPS first: (b') and (c), the kill test
if [ "${NOMPS:-1}" = 1 ]; then
    start_attnd nomps
    bench refs -nomps --variants b_refs
    bench inline -nomps
    [ "${KILL:-1}" = 1 ] && bench kill -nomps
    stop_attnd
fi
# under MPS (stopped again on the way out, whatever happens)
if command -v nvidia-cuda-mps-control >/dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        trap 'echo quit | nvidia-cuda-mps-control >/dev/null 2>&1' EXIT
        mps=1
        kvw=()
        [ "${KVW:-0}" = 1 ] && kvw=(--kv-written)
        [ -n "${VARIANTS:-}" ] && kvw+=(--variants "$VARIANTS")
        [ -x "$S/zc_client" ] && kvw+=(--c-client "$S/zc_client" \
            --c-variants "${C_VARIANTS:-memop,spin,oneword}")
        start_attnd mps
        bench refs -mps ${kvw[@]+"${kvw[@]}"}
        [ "${KILL:-1}" = 1 ] && bench kill -mps
        stop_attnd
        # the timeline: every run of attnd stamped (kernels/cuda/stamp.h);
        # TIMELINE=0 skips it
        if [ "${TIMELINE:-1}" = 1 ]; then
            export ATTN_CUDA_TIMELINE=$OUT/attnd-timeline.jsonl
            rm -f "$ATTN_CUDA_TIMELINE" # attnd appends to it
            start_attnd mps-timeline
            bench refs -mps-timeline --timeline "$ATTN_CUDA_TIMELINE" ${kvw[@]+"${kvw[@]}"}
            stop_attnd
            unset ATTN_CUDA_TIMELINE
        fi
        echo quit | nvidia-cuda-mps-control
        trap - EXIT
        sleep 1
        cat "$CUDA_MPS_LOG_DIRECTORY"/*.log >>"$OUT/attnd.log" 2>/dev/null
    else
        echo "MPS did not start" >>"$OUT/run.log"
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi
python3 "$here/zerocopy_summary.py" "$OUT/zc-results.jsonl" >"$OUT/summary.md" 2>>"$OUT/run.log"
[ -f "$OUT/skipped.txt" ] && cat "$OUT/skipped.txt" >>"$OUT/summary.md"
echo "wall ${SECONDS}s" >>"$OUT/summary.md"
rm -rf "$tmp" "$site"
grep -vE '^\s+File|^\s+\^|Traceback' "$OUT/run.log" | tail -40
cat "$OUT/summary.md"
