#!/usr/bin/env bash
# Device calls of issue 12's overlap strategy (branch ovl), inside a wall
# budget (BUDGET seconds, default 200), every stage under its own timeout,
# logs packed into $OUT/logs.tar.xz, the summary printed last.  Stages
# (argument, default "ptsb"):
#   p  test_prefill_gpu: the prefill kernel sweep (fresh seed; every d <= 128
#      case also on the light variant) against the CPU engine / fp64 samples
#   t  test_prefill_engine_gpu (ATTN_GPU_QUICK unless FULL=1): the engine
#      sweep with overlap among the strategies, test_overlap_coresides
#   s  compute-sanitizer memcheck and racecheck: the light kernel on small
#      cases (ATTN_PREFILL_CASE=SAN_CASE) and the overlap path (engine,
#      ATTN_GPU_CASES=SAN_ENGINE)
#   b  bench_mixed.py (BENCH_ARGS; PEERS, FlashInfer from FI_DIR's wheels or
#      fi_site.tar.xz and its aot/*.tar.xz)
# Run from the staged folder (build-gpu/, bench/gpu/), e.g.
#   cd .dev-ovl && tar xJf pkg.tar.xz && bash bench/gpu/run_overlap.sh ptb
set -u
OUT=${OUT:-/tmp/attn-out}
mkdir -p "$OUT"
W=/tmp/ovl-logs
rm -rf "$W" && mkdir -p "$W"
ST=${1:-ptsb}
BUDGET=${BUDGET:-200}
B=build-gpu
export ATTN_MIXED_OVERLAP=1 # overlap is refused without its trial switch
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
left() { echo $((BUDGET - SECONDS)); }
cap() { # the smaller of a stage's own limit and what the budget has left (minus a reserve)
    local l=$(($(left) - ${2:-5}))
    [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1))
}
L=$W/overlap.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; } > "$L" 2>&1
if [[ $ST == *p* ]]; then
    timeout "$(cap ${PF_TIMEOUT:-70} 60)" ./$B/tests/test_prefill_gpu > "$W/prefill_test.log" 2>&1
    echo "test_prefill_gpu rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *t* ]]; then
    quick=ATTN_GPU_QUICK=1
    [ -n "${FULL:-}" ] && quick=
    env $quick timeout "$(cap ${TEST_TIMEOUT:-60} 40)" ./$B/tests/test_prefill_engine_gpu \
        > "$W/engine_test.log" 2>&1
    echo "test_prefill_engine_gpu rc=$? at ${SECONDS}s" >> "$L"
fi
if [[ $ST == *s* ]]; then
    for tool in memcheck racecheck; do
        ATTN_GPU_QUICK=1 ATTN_PREFILL_CASE=${SAN_CASE:-prefill-causal-g4} \
            timeout "$(cap ${SAN_TIMEOUT:-40} 30)" compute-sanitizer --tool $tool \
            --error-exitcode 9 ./$B/tests/test_prefill_gpu > "$W/${tool}_prefill.log" 2>&1
        echo "$tool test_prefill_gpu rc=$? at ${SECONDS}s" >> "$L"
        ATTN_GPU_QUICK=1 ATTN_GPU_CASES=${SAN_ENGINE:-mixed-p1-causal} \
            timeout "$(cap ${SAN_TIMEOUT:-40} 30)" compute-sanitizer --tool $tool \
            --error-exitcode 9 ./$B/tests/test_prefill_engine_gpu > "$W/${tool}_engine.log" 2>&1
        echo "$tool test_prefill_engine_gpu rc=$? at ${SECONDS}s" >> "$L"
    done
fi
if [[ $ST == *b* ]]; then
    if [ -n "${FI_DIR:-}" ]; then
        mkdir -p /tmp/site
        if [ -f "$FI_DIR/fi_site.tar.xz" ]; then
            tar xJf "$FI_DIR/fi_site.tar.xz" -C /tmp/site
        else
            python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
                "$FI_DIR"/*.whl >> "$L" 2>&1
        fi
        export PYTHONPATH=/tmp/site
        mkdir -p /tmp/site/flashinfer/data/aot
        for t in "$FI_DIR"/aot/*.tar.xz "$FI_DIR"/*.tar.xz; do
            case $t in *fi_site*) continue ;; esac
            [ -f "$t" ] && tar xJf "$t" -C /tmp/site/flashinfer/data/aot && echo "AOT $t" >> "$L"
        done
        export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
    fi
    lim=$(cap ${BENCH_TIMEOUT:-150} 8)
    echo "bench from ${SECONDS}s, limit ${lim}s" >> "$L"
    PYTHONUNBUFFERED=1 timeout "$lim" python3 bench/gpu/bench_mixed.py --out "$OUT" \
        --deadline $((lim - 10)) --peers "${PEERS:-}" ${BENCH_ARGS:-} > "$W/bench.log" 2>&1
    echo "bench rc=$? at ${SECONDS}s" >> "$L"
    [ -f "$OUT/mixed_bench.json" ] &&
        python3 bench/gpu/bench_mixed.py --table "$OUT/mixed_bench.json" > "$W/tables.txt" 2>&1
fi
tar cJf "$OUT/logs.tar.xz" -C "$W" .
echo "==== summary (wall ${SECONDS}s of ${BUDGET}s)"
grep -vE "^name|^NVIDIA" "$L"
grep -E "worst|FAILED|PASSED|seed" "$W/prefill_test.log" 2> /dev/null | tail -4
grep -E "worst|FAILED|PASSED|seed|overlap probe|refused" "$W/engine_test.log" 2> /dev/null | tail -8
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$W"/*check_*.log 2> /dev/null
grep -E "Error|Traceback" "$W/bench.log" 2> /dev/null | head -4
cat "$W/tables.txt" 2> /dev/null | head -40
