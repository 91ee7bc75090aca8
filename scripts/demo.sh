#!/usr/bin/env bash
# The main job (README command 1, `make demo`): start attnd on an IPC socket
# in a temporary directory, replay every shipped examples/*.capture with
# --verify (history included, so the fresh daemon reproduces the recorded
# state), send examples/mixed.json, and stop the daemon with SIGTERM.
# Exit 0 only if every reply verified and the daemon stopped cleanly.
set -u
BUILD=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
case "$BUILD" in /*) bdir=$BUILD ;; *) bdir=$here/$BUILD ;; esac
ATTND="$bdir/attnd"
ATTNCTL="$bdir/attnctl"
[ -x "$ATTND" ] && [ -x "$ATTNCTL" ] || { echo "demo: build first ($ATTND, $ATTNCTL)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/attnd-demo-XXXXXX)
sock="$tmp/attnd.sock"
url="ipc://$sock"
log="$tmp/attnd.log"
pid=""
cleanup() {
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# The GPU engine when this build has it and a device answers; else the CPU engine.
engine=cpu
if "$ATTNCTL" hello --local 2>/dev/null | grep -A1 '"cuda_decode"' | grep -q '"available": true'; then
    engine=auto
fi

"$ATTND" --listen "$url" --engine "$engine" --ready-fd 3 3>"$tmp/ready" 2>"$log" &
pid=$!
for _ in $(seq 1 100); do
    grep -q READY "$tmp/ready" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
if ! grep -q READY "$tmp/ready" 2>/dev/null; then
    echo "demo: attnd did not start:" >&2
    cat "$log" >&2
    exit 1
fi
echo "demo: attnd (pid $pid, engine $engine) listening on $url"
"$ATTNCTL" hello --url "$url" --compact
echo

fail=0
shopt -s nullglob
captures=("$here"/examples/*.capture)
[ ${#captures[@]} -gt 0 ] || { echo "demo: no examples/*.capture" >&2; fail=1; }
for cap in "${captures[@]}"; do
    echo "== replay $(basename "$cap")"
    if ! "$ATTNCTL" replay "$cap" --url "$url" --verify; then
        echo "demo: $(basename "$cap") did NOT verify" >&2
        fail=1
    fi
    echo
done

if [ "$engine" = auto ]; then
    # The shipped captures recorded on a CUDA device (bf16, cuda:0 pools):
    # replayed on the CUDA engine, compared within the call's tolerance.
    for cap in "$here"/examples/cuda/*.capture; do
        echo "== replay cuda/$(basename "$cap") on the CUDA engine"
        if ! "$ATTNCTL" replay "$cap" --url "$url" --verify; then
            echo "demo: cuda/$(basename "$cap") did NOT verify" >&2
            fail=1
        fi
        echo
    done
    # The GPU engine: a decode workload on a device pool, recorded by this
    # build's in-process server and replayed through the daemon (replies of
    # a device engine are compared within the call's declared tolerance).
    echo "== GPU: gen + replay of a bf16 decode workload on cuda:0"
    if "$ATTNCTL" gen --out "$tmp/gpu.capture" --kind decode --device cuda:0 --dtype bf16 \
            --head-dim 128 --page-size 16 --qo-heads 8 --kv-heads 2 --requests 8 \
            --min-len 64 --max-len 2048 --pool gpu --seed 5 &&
        "$ATTNCTL" replay "$tmp/gpu.capture" --url "$url" --verify; then
        :
    else
        echo "demo: the GPU capture did NOT verify" >&2
        fail=1
    fi
    echo
    # A mixed step on the device: prefills, appends and decodes in one
    # manifest, on cuda_prefill (its partition or unified schedule, the
    # plan's why in the diagnostic); examples/cuda/mixed-bf16.capture is
    # the one recorded on the H200 and replayed above.
    echo "== GPU: gen + replay of a bf16 mixed workload on cuda:0"
    if "$ATTNCTL" gen --out "$tmp/gpu-mixed.capture" --kind mixed --device cuda:0 --dtype bf16 \
            --head-dim 128 --page-size 16 --qo-heads 8 --kv-heads 2 --requests 6 --steps 3 \
            --min-len 32 --max-len 300 --pool gpumixed --seed 24 &&
        "$ATTNCTL" replay "$tmp/gpu-mixed.capture" --url "$url" --verify; then
        :
    else
        echo "demo: the GPU mixed capture did NOT verify" >&2
        fail=1
    fi
    echo
fi

if [ -f "$here/examples/mixed.json" ]; then
    # The shipped mixed prefill + append + decode manifest in JSON form: its
    # attend asks for verify, so the reply carries the fp64 check.
    echo "== run examples/mixed.json (prefill + append + decode in one attend)"
    replies="$tmp/mixed.reply.json"
    if "$ATTNCTL" run "$here/examples/mixed.json" --url "$url" --compact >"$replies"; then
        echo "mixed.json: every reply ok ($(grep -c '"ok":true' "$replies") ok replies)"
        echo "attend O   (q rows x heads x d_vo): $(grep -o '"o":\[[^]]*\]' "$replies" | head -1)"
        echo "attend LSE (q rows x heads):        $(grep -o '"lse":\[[^]]*\]' "$replies" | head -1)"
        "$ATTNCTL" explain "$replies"
        grep -q '"passed":true' "$replies" || {
            echo "demo: the attend of mixed.json did not pass its verify" >&2
            fail=1
        }
    else
        echo "demo: examples/mixed.json had a failed reply:" >&2
        grep -o '"error":{[^}]*}' "$replies" >&2
        fail=1
    fi
    echo
fi

"$ATTNCTL" stats --url "$url" --compact
echo
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
if [ $rc -ne 0 ]; then
    echo "demo: attnd exited with $rc" >&2
    fail=1
fi
if [ -e "$sock" ]; then
    echo "demo: attnd left its socket behind" >&2
    fail=1
fi
echo "demo: attnd stopped (exit $rc, socket removed: $([ -e "$sock" ] && echo no || echo yes))"
if [ $fail -eq 0 ]; then
    echo "demo: PASS: every reply verified"
else
    echo "demo: FAIL" >&2
fi
exit $fail
