#!/usr/bin/env bash
# Issue 13, branch dfold, on the GPU machine, from the folder
# bench/gpu/stage_dfold.sh packed (carry it; run from inside it):
#   cd .dev-dfold && bash dfold_device.sh "$OUT" [SECONDS]
# Steps (STEPS, default tba, in that order), each bounded by its own timeout
# and by what is left of SECONDS (default 140):
#   t  the decode GPU sweep of the branch's build, quick (ATTN_GPU_QUICK=1),
#      fresh seed; includes the fold test (fused fold == reducer kernel byte
#      for byte, deep and wide reducer shapes, both state ABIs)
#   b  bench_decode.py: main's library (--old) against the branch's in one
#      process, the FI policy with the fused fold and with the reducer kernel
#      on both, cuDNN on contiguous K/V, no FlashInfer, no graph step, at SHAPES
#   a  ab_decode.py: the same two libraries, alternating rounds, at AB_SHAPES:
#      new/old per round and whether O and LSE are the same bits
# Writes at most 7 files to $OUT: summary.txt, test.log, bench.log,
# decode-h200-<date>.{json,md} (or .partial.json when cut), ab.log,
# ab-decode.json; prints the summary last.
set -u
OUT=${1:-/tmp/dfold-out}
BUDGET=${2:-140}
STEPS=${STEPS:-tba}
SHAPES=${SHAPES:-B1_T32768,B1_T131072,B2_T2048,B4_T16384,group16_B8_T16384,B16_T8192,B128_T8192}
AB_SHAPES=${AB_SHAPES:-B1_T32768,B1_T131072,B2_T2048,B4_T16384,group16_B8_T16384}
D=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s)
mkdir -p "$OUT"
summary=$OUT/summary.txt
for f in "$D"/lib/*.xz "$D"/tests/*.xz; do
    [ -f "$f" ] && xz -d -f -T4 "$f"
done
chmod +x "$D"/tests/* 2>/dev/null
export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
{
    echo "dfold device run, $(date -u +%FT%TZ); staged: $(tr '\n' ' ' <"$D/STAGED" 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1
} >"$summary"
left() { echo $((BUDGET - ($(date +%s) - t0))); }
run() { # run NAME MAX CMD...: output to $OUT/NAME.log, bounded by MAX and by what is left
    local name=$1 max=$2 l s
    shift 2
    l=$(left)
    [ "$l" -lt "$max" ] && max=$((l - 3))
    if [ "$max" -le 3 ]; then
        echo "$name: SKIPPED (budget)" >>"$summary"
        return
    fi
    s=$(date +%s)
    timeout "$max" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: rc=$rc ($(($(date +%s) - s)) s)" >>"$summary"
    [ "$rc" -ne 0 ] && tail -3 "$OUT/$name.log" | cut -c1-200 | sed 's/^/    /' >>"$summary"
}
for ((i = 0; i < ${#STEPS}; i++)); do
    case ${STEPS:$i:1} in
    t) ATTN_GPU_QUICK=1 run test "${TEST_MAX:-40}" "$D/tests/test_decode_gpu" ;;
    b) run bench "${BENCH_MAX:-70}" python3 "$D/bench/bench_decode.py" \
        --lib "$D/lib/libattn_cuda_bench.so" --old "$D/lib/libattn_cuda_bench_old.so" \
        --attnd fi,fi_reducer --old-attnd fi,fi_reducer --no-flashinfer --no-graph \
        --shapes "$SHAPES" --out "$OUT" ;;
    a) run ab "${AB_MAX:-45}" python3 "$D/bench/ab_decode.py" \
        --old "$D/lib/libattn_cuda_bench_old.so" --new "$D/lib/libattn_cuda_bench.so" \
        --rounds "${AB_ROUNDS:-4}" --shapes "$AB_SHAPES" --configs fi,fi_reducer --out "$OUT" ;;
    esac
done
{
    echo "== test (quick sweep)"
    grep -hE "seed|PASSED|FAILED|worst|  fold " "$OUT/test.log" 2>/dev/null | cut -c1-150 | tail -14
    echo "== bench: us, new = branch, old = main (--old), same process"
    python3 - "$OUT" <<'EOF'
import glob, json, sys
fs = sorted(glob.glob(sys.argv[1] + "/decode-h200-*.json"))
if not fs:
    print("no benchmark json")
    sys.exit(0)
res = json.load(open(fs[-1]))
def us(r, k):
    return r["peers"].get(k, {}).get("us")
print(f"{'shape':>18} {'fi new':>7} {'fi old':>7} {'new/old':>7} {'red new':>7} {'red old':>7} "
      f"{'new/old':>7} {'cuDNN':>7} {'rel L2':>8}")
for r in res["shapes"]:
    a, b = us(r, "attnd_fi"), us(r, "attnd_old")
    c, d = us(r, "attnd_fi_reducer"), us(r, "attnd_old_fi_reducer")
    n = us(r, "sdpa_cudnn_contiguous")
    f = lambda x: f"{x:7.1f}" if x else "    n/a"
    q = lambda x, y: f"{x / y:7.3f}" if x and y else "    n/a"
    e = r["peers"].get("attnd_fi", {}).get("rel_l2")
    print(f"{r['shape'][:18]:>18} {f(a)} {f(b)} {q(a, b)} {f(c)} {f(d)} {q(c, d)} {f(n)} "
          f"{e if e is None else format(e, '8.1e')}")
for e in res.get("errors", []):
    if "flashinfer" not in e:
        print("error:", e[:200])
EOF
    echo "== ab (alternating rounds; bits: O and LSE of new and old compared byte for byte)"
    grep -hE "new/old|ERROR" "$OUT/ab.log" 2>/dev/null | sed -E 's/  rel_l2 old .* bits/ bits/' | cut -c1-150
} >>"$summary" 2>&1
echo "files: $(ls "$OUT" | tr '\n' ' ')" >>"$summary"
cat "$summary"
