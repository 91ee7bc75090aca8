#!/usr/bin/env python3
"""Compile FlashInfer's JIT modules before the benchmark needs them: each
peer of bench_mixed.py once on a small batch of the benchmark's head
configuration (bf16, H_q 32, H_kv 8, d 128, page 16, causal), so the
compiles (minutes on first use) run in the background while the device
sweep runs, and the benchmark's peer pass finds them in the JIT cache.
Writes one line per peer (seconds, or the error) and, last, the file
given by --done, which bench_mixed.py --wait-file waits for.
Usage: python3 bench/gpu/fi_warm.py --done /tmp/fi_warm.done [--peers part,ba,bpod,pod]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import bench_mixed as bm  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--done", required=True)
    ap.add_argument("--peers", default="part,ba,bpod,pod")
    a = ap.parse_args()
    t0 = time.time()
    try:
        import flashinfer as fi
    except Exception as ex:
        print("import flashinfer failed:", repr(ex)[:300], flush=True)
        open(a.done, "w").write("no flashinfer\n")
        return 1
    gen = torch.Generator().manual_seed(7)
    cs = bm.make_case([(0, 256)], [512] * 4, gen)
    # the benchmark's workspaces (BatchPOD halves ws[0]; 64 MiB overflowed it)
    ws = [torch.empty(n << 20, dtype=torch.uint8, device="cuda") for n in (2048, 512)]
    run = dict(part=lambda: bm.fi_partitioned(fi, cs, ws), ba=lambda: bm.fi_batch_attention(fi, cs),
               bpod=lambda: bm.fi_batch_pod(fi, cs, ws), pod=lambda: bm.fi_pod(fi, cs, ws))
    lines = []
    for peer in [p for p in a.peers.split(",") if p]:
        t = time.time()
        try:
            run[peer]()
            msg = "%s compiled and ran in %.0f s" % (peer, time.time() - t)
        except Exception as ex:
            msg = "%s failed after %.0f s: %s" % (peer, time.time() - t, repr(ex)[:300])
        print(msg, flush=True)
        lines.append(msg)
    open(a.done, "w").write("\n".join(lines) + "\ntotal %.0f s\n" % (time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
