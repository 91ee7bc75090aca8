#!/usr/bin/env bash
# session 2026-12-02i call 6 (tree b4538b1's library): the decode benchmark with every peer
# (FlashInfer tensor-core decode, cuDNN) and the graph step, then the mixed batches with FlashInfer
# partitioned and BatchAttention in the same process (examples/cuda/decode-bf16.capture moved aside
# so the carry fit 64 MiB; nothing here reads it)
set -u
R=$PWD; D=$R/.dev-s52
mkdir -p /tmp/p && xz -dc $D/lib.so.xz > /tmp/p/lib.so
export FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev-fi/*.whl > /tmp/pip.log 2>&1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/site/flashinfer/data/aot && tar xJf $D/fi_jit.tar.xz -C /tmp/site/flashinfer/data/aot && tar xJf $D/fi_dec.tar.xz -C /tmp/site/flashinfer/data/aot
MAX_JOBS=14 timeout 150 python3 bench/gpu/fi_decode_warm.py > /tmp/fiw_dec.log 2>&1; echo "fi decode warm rc=$? at ${SECONDS}s"; tail -2 /tmp/fiw_dec.log
mkdir -p $OUT/dec $OUT/mx
PYTHONUNBUFFERED=1 timeout 230 python3 bench/gpu/bench_decode.py --lib /tmp/p/lib.so --out $OUT/dec --quick > $OUT/dec/log 2>&1
echo "decode rc=$? at ${SECONDS}s"; grep -A24 "^us:" $OUT/dec/log | head -24; grep -i "geomean\|graph per-layer\|graph:" $OUT/dec/log | head -6
MAX_JOBS=14 timeout 60 python3 bench/gpu/fi_warm.py --done /tmp/fiw.done --peers part,ba > /tmp/fiw.log 2>&1
PYTHONUNBUFFERED=1 timeout $((585 - SECONDS)) python3 bench/gpu/bench_mixed.py --lib /tmp/p/lib.so --out $OUT/mx \
  --peers part,ba --deadline $((565 - SECONDS)) --reps 15 --no-extras --only M1,M2,M3,M5,M4_decode,M4_prefill \
  --variants partition,auto,part_pf_c62,part_pf_c66,part_pf_c96,part_pf_c100 --caps 62,100 > $OUT/mx/log 2>&1
echo "mixed rc=$? at ${SECONDS}s"; grep -A8 '^batch ' $OUT/mx/log | head -8
tar cJf $OUT/all.tar.xz -C $OUT dec mx; rm -rf $OUT/dec $OUT/mx
echo "done at ${SECONDS}s"
