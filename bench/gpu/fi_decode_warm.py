#!/usr/bin/env python3
"""Compile FlashInfer's decode JIT modules (default and tensor-core wrapper,
bf16, head dims 64 / 128 / 256) before bench_decode.py needs them, on a
small batch, and pack the built libraries as an AOT tree
(<name>/<name>.so, what flashinfer/data/aot holds) so a later device call
carries them instead of compiling again (FlashInfer loads an AOT library
without building).  Usage:
  FLASHINFER_WORKSPACE_BASE=/tmp/fiws python3 fi_decode_warm.py --pack OUT.tar.xz
"""
import argparse
import glob
import lzma
import os
import sys
import tarfile
import time

import torch


def warm(fi, out):
    for d, hq, hkv in ((128, 32, 8), (64, 16, 4), (256, 32, 8)):
        B, P, L = 2, 16, 100
        npg = (L + P - 1) // P
        indptr = torch.arange(0, (B + 1) * npg, npg, dtype=torch.int32, device="cuda")
        indices = torch.arange(B * npg, dtype=torch.int32, device="cuda")
        last = torch.full((B,), L - (npg - 1) * P, dtype=torch.int32, device="cuda")
        k = torch.randn(B * npg, P, hkv, d, dtype=torch.bfloat16, device="cuda")
        v = torch.randn_like(k)
        q = torch.randn(B, hq, d, dtype=torch.bfloat16, device="cuda")
        for tc in (True, False):
            t = time.time()
            try:
                ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
                w = fi.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=tc)
                w.plan(indptr, indices, last, hq, hkv, d, P, q_data_type=torch.bfloat16,
                       kv_data_type=torch.bfloat16)
                w.run(q, (k, v))
                torch.cuda.synchronize()
                print(f"d={d} tc={tc}: {time.time() - t:.0f} s", flush=True)
                if out:  # after every module: a call cut short keeps what was built
                    pack(out)
            except Exception as ex:
                print(f"d={d} tc={tc}: failed after {time.time() - t:.0f} s: {ex!r}"[:300],
                      flush=True)


def pack(out):
    import flashinfer.jit.env as env
    sos = sorted(glob.glob(str(env.FLASHINFER_JIT_DIR / "*" / "*.so")))
    tmp = out + ".tmp"
    with lzma.open(tmp, "wb", preset=6) as f, tarfile.open(fileobj=f, mode="w") as tf:
        for so in sos:
            name = os.path.basename(os.path.dirname(so))
            if os.path.basename(so) == name + ".so":
                tf.add(so, arcname=f"{name}/{name}.so")
                print("packed", name, os.path.getsize(so), flush=True)
    os.replace(tmp, out)
    print("pack", out, os.path.getsize(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pack", default="")
    a = ap.parse_args()
    import flashinfer as fi
    t0 = time.time()
    warm(fi, a.pack)
    print(f"warm total {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
