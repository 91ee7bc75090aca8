"""attn.arena: one registered allocation, handed out as tensor views.

attnd reads and writes tensors by reference ({buf, offset, bytes}) inside a
buffer the client registered once.  An Arena is that buffer plus a bump
allocator: `empty(shape, dtype)` gives a view whose bytes attnd can reach,
`offset_of(x)` says whether (and where) an array already lives inside it.

- CudaArena: one torch CUDA allocation of `nbytes`, registered as a
  cuda_ipc buffer (legacy IPC handle + offset).  Dedicated, never returned
  to torch's caching allocator while the arena lives, so no other tensor can
  be handed those bytes while attnd still uses them.
- ShmArena: a POSIX shared-memory object, registered as a shm buffer;
  views are numpy arrays (CPU pools, machines without a GPU).
"""

from .client import AttnError, ShmBuffer

ALIGN = 256  # every view starts 256-byte aligned (vector loads, cache lines)
SEM_BYTES = 64  # the first bytes hold the semaphore words (uint64 each)

_ELEM = {"fp32": 4, "fp16": 2, "bf16": 2}


def _count(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


class _Bump:
    def __init__(self, size, start):
        self.size = size
        self.top = start

    def take(self, nbytes, what):
        off = (self.top + ALIGN - 1) // ALIGN * ALIGN
        if off + nbytes > self.size:
            raise AttnError("E_TOO_LARGE", "arena_bytes",
                            "%s needs %d bytes at offset %d; the arena has %d (pass a larger "
                            "arena_bytes)" % (what, nbytes, off, self.size))
        self.top = off + nbytes
        return off


class CudaArena:
    """`nbytes` of device memory on `device`, registered with attnd on `client`."""

    kind = "cuda_ipc"

    def __init__(self, client, nbytes, device=None, driver=None):
        import torch
        from .cuda import Driver
        self.torch = torch
        self.driver = driver or Driver()
        self.storage = torch.zeros(int(nbytes), dtype=torch.uint8,
                                   device=device if device is not None else "cuda")
        torch.cuda.synchronize(self.storage.device)  # the semaphore words are zero before use
        self.device = self.storage.device
        self.size = int(nbytes)
        self.base = self.storage.data_ptr()
        handle, offset, ordinal = self.driver.ipc_describe(self.base, self.size)
        self.client = client
        self.buf = client.buffer_register_cuda(handle, offset, self.size, "cuda:%d" % ordinal)
        self._bump = _Bump(self.size, SEM_BYTES)

    _TORCH = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}

    def torch_dtype(self, dtype):
        return getattr(self.torch, self._TORCH[dtype])

    def empty(self, shape, dtype):
        """A contiguous view of `shape` elements of `dtype` ("bf16", ...)."""
        n = _count(shape) * _ELEM[dtype]
        off = self._bump.take(n, "a %s tensor of shape %s" % (dtype, tuple(shape)))
        return self.view(off, shape, dtype)

    def view(self, offset, shape, dtype):
        n = _count(shape) * _ELEM[dtype]
        return self.storage[offset:offset + n].view(self.torch_dtype(dtype)).view(*shape)

    def offset_of(self, x):
        """Byte offset of tensor `x` in the arena, or None (elsewhere, or not contiguous)."""
        if not hasattr(x, "data_ptr") or not x.is_contiguous() or x.device != self.device:
            return None
        p = x.data_ptr()
        n = x.numel() * x.element_size()
        if p < self.base or p + n > self.base + self.size:
            return None
        return p - self.base

    def addr(self, offset):
        """Device address of byte `offset` (a semaphore word for stream memops)."""
        return self.base + offset

    def close(self):
        if self.buf:
            self.client.buffer_drop(self.buf)
            self.buf = 0


class ShmArena:
    """`nbytes` of POSIX shared memory, registered with attnd on `client`."""

    kind = "shm"

    def __init__(self, client, nbytes):
        self.shm = ShmBuffer(int(nbytes))
        self.size = int(nbytes)
        self.client = client
        try:
            self.buf = client.buffer_register_shm(self.shm.name, self.size)
        except Exception:
            self.shm.close()
            raise
        self._bump = _Bump(self.size, SEM_BYTES)

    def empty(self, shape, dtype):
        """A numpy view of `shape` (bf16 shows as its uint16 bits)."""
        n = _count(shape) * _ELEM[dtype]
        off = self._bump.take(n, "a %s array of shape %s" % (dtype, tuple(shape)))
        return self.view(off, shape, dtype)

    def view(self, offset, shape, dtype):
        return self.shm.array(offset, tuple(int(s) for s in shape), dtype)

    def offset_of(self, x):
        import numpy as np
        if not isinstance(x, np.ndarray) or not x.flags["C_CONTIGUOUS"]:
            return None
        base = np.frombuffer(self.shm.buf, dtype=np.uint8)
        lo = base.__array_interface__["data"][0]
        p = x.__array_interface__["data"][0]
        if p < lo or p + x.nbytes > lo + self.size:
            return None
        return p - lo

    def close(self):
        if self.buf:
            try:
                self.client.buffer_drop(self.buf)
            finally:
                self.buf = 0
                self.shm.close()
