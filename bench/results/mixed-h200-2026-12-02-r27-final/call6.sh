#!/usr/bin/env bash
# session 2026-12-02j call 6 (tree 062be6b's library, from call 5's staged package): the mixed batches
# with FlashInfer partitioned and BatchAttention in the same process, auto and the caps around its picks
# (examples/cuda/decode-bf16.capture moved aside so the carry fits 64 MiB; nothing here reads it)
set -u
R=$PWD; D=$R/.dev-s58
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot && tar xJf $D/fi_dec.tar.xz -C /tmp/site/flashinfer/data/aot
MAX_JOBS=14 timeout 120 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/fiw.log 2>&1; echo "fi warm rc=$? at ${SECONDS}s"; tail -2 /tmp/fiw.log
mkdir -p $OUT/mx
PYTHONUNBUFFERED=1 timeout $((560 - SECONDS)) python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/mx \
  --peers part,ba --deadline $((540 - SECONDS)) --reps 15 --no-extras --only M1,M2,M3,M5,M4_decode,M4_prefill \
  --variants partition,auto,part_pf_c74,part_pf_c80,part_pf_c104,part_pf_c108 --caps 74,80,104,108 > $OUT/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"; grep -A10 '^batch ' $OUT/mx/log | head -24
tar cJf $OUT/all.tar.xz -C $OUT mx; rm -rf $OUT/mx
echo "done at ${SECONDS}s"
