"""attn: the Python client of attnd.

- attn.Client: one connection, one method per operation (attn.client);
  run(..., async_=True) returns an attn.AsyncRun ticket (pipelined runs).
- attn.BatchDecodeWrapper / attn.BatchPrefillWrapper: FlashInfer-style
  plan()/run() on torch CUDA tensors (registered arena, GPU-side ordering)
  or numpy arrays (shared memory) (attn.wrappers).
- attn.CudaArena / attn.ShmArena: registered buffers handed out as views.
- attn.Pool: an exported pool, per-layer K/V views (torch CUDA tensors or
  numpy arrays) an engine writes itself; runs then say kv_written=True.
- attn.AttnError(code, field, message): every refusal.
"""

from .arena import CudaArena, ShmArena
from .pool import Pool
from .client import (PROTOCOL_VERSION, AsyncRun, AttnError, Client, ShmBuffer, i32, ref, sem, tensor,
                     untensor)
from .wrappers import BatchDecodeWrapper, BatchPrefillWrapper

__all__ = ["PROTOCOL_VERSION", "AsyncRun", "AttnError", "Client", "ShmBuffer", "CudaArena", "ShmArena",
           "Pool", "BatchDecodeWrapper", "BatchPrefillWrapper", "i32", "ref", "sem", "tensor",
           "untensor"]
