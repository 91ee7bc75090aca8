#!/usr/bin/env bash
# session 2026-12-02h call 6: main's prefill kernel (6e68681's library) beside FlashInfer's paged
# prefill (FA3 and FA2 backends, JIT modules carried) in one process on the same data
set -u
R=$PWD; D=$R/.dev-s45
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
echo "pip rc=$? at ${SECONDS}s"
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu/prefill_ab.py --var main=/tmp/p/lib.so:tma --var main2=/tmp/p/lib.so:tma --fi fa3,fa2 --reps 30 \
  --only causal_S2048,causal_S4096,causal_S8192,causal_S16384,append_B8_T4096_C512,fewq_B32_T8192_C4 --out $OUT > $OUT/prefill_ab.log 2>&1
echo "ab rc=$? at ${SECONDS}s"; grep -A8 '^shape' $OUT/prefill_ab.log; grep -i 'error' $OUT/prefill_ab.log | head -5
grep -o '"fi_fa[23]": {[^}]*}' $OUT/prefill_ab.log | head -12
echo "done at ${SECONDS}s"
