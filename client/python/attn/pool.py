"""attn.pool: exported pools, the K/V memory of attnd seen as arrays.

``Pool.create(client, "kv", layers=..., ..., device="cuda:0")`` asks attnd
for a pool with ``"export": true`` and maps what the reply describes:

- a CUDA pool: the legacy IPC handle of attnd's one allocation, opened with
  cuIpcOpenMemHandle in this process; ``pool.k[l]`` / ``pool.v[l]`` are
  torch CUDA tensors on it;
- a CPU pool: the POSIX shm object attnd created; the views are numpy arrays
  (bf16 as its uint16 bits).

Each view is [num_pages, page_size, num_kv_heads, head_dim] for NHD and
[num_pages, num_kv_heads, page_size, head_dim] for HND, built from the
export's own offsets and strides (docs/protocol.md "Exported pools"), so an
engine writes the new rows with its own kernels (a fused RoPE + cache
write, a plain index_put_) and then runs with ``kv_written=True``: attnd
appends nothing and restores nothing.  Ordering is the client's: on the GPU
write the rows on the stream that then signals attnd's wait (the wrappers
do), on the host before sending the run.

Lifetime: the export belongs to the connection that created it; when that
connection closes attnd ends the export (kv_written runs are refused) and
keeps the pool.  ``close()`` unmaps the views here (call it before the
pool is dropped: attnd frees a CUDA pool's memory on drop, and an IPC
mapping of freed memory is undefined); ``drop()`` closes, then drops.
"""

import mmap
import os

from .client import AttnError

_NUMPY = {"fp32": "<f4", "fp16": "<f2", "bf16": "<u2"}  # bf16 as its raw bits
_CAI = {"fp32": "<f4", "fp16": "<f2", "bf16": "<i2"}  # viewed as bfloat16 after
_ELEM = {"fp32": 4, "fp16": 2, "bf16": 2}


def _note(exc, text):
    """Attach `text` to `exc` (PEP 678 notes; an attribute before Python 3.11)."""
    if hasattr(exc, "add_note"):
        exc.add_note(text)
    else:
        exc.__notes__ = getattr(exc, "__notes__", []) + [text]


class _CudaArrayInterface:
    """What torch.as_tensor reads to wrap device memory it did not allocate."""

    def __init__(self, ptr, shape, strides, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "strides": tuple(strides),
                                         "typestr": typestr, "data": (int(ptr), False),
                                         "version": 3}


class Pool:
    """An exported pool: `k[layer]`, `v[layer]` views of attnd's K/V stores."""

    def __init__(self, client, name, geom, export, driver=None):
        self.client = client
        self.name = name
        self.geom = dict(geom)
        self.export = dict(export)
        self._mm = None
        self._dptr = None
        self._driver = driver
        self.k, self.v = [], []
        x, g = self.export, self.geom
        kind = x["kind"]
        try:
            if kind == "shm":
                self._map_shm()
            elif kind == "cuda_ipc":
                self._map_cuda()
            else:
                raise AttnError("E_RANGE", "export.kind", "unknown export kind %r" % kind)
            for layer in range(g["layers"]):
                base = layer * x["layer_stride"]
                self.k.append(self._view(base + x["k_offset"], g["head_dim_qk"], "k"))
                self.v.append(self._view(base + x["v_offset"], g["head_dim_vo"], "v"))
        except BaseException as failure:
            try:
                self.close()  # a mapping made before the failure is not left open
            except Exception as e:
                _note(failure, "and closing the pool's mapping failed too: %s" % e)
            raise

    @classmethod
    def create(cls, client, pool, layers, num_pages, page_size, num_kv_heads, head_dim_qk,
               head_dim_vo, kv_dtype="bf16", layout="NHD", device=None, driver=None):
        """pool_create with "export": true on `client`, mapped here."""
        geom = dict(pool=pool, layers=layers, num_pages=num_pages, page_size=page_size,
                    num_kv_heads=num_kv_heads, head_dim_qk=head_dim_qk,
                    head_dim_vo=head_dim_vo, kv_dtype=kv_dtype, layout=layout,
                    device=device or "cpu")
        rep = client.pool_create(export=True, **geom)
        try:
            if "export" not in rep:
                raise AttnError("E_PROTOCOL", "export",
                                "attnd's pool_create reply has no export map")
            return cls(client, pool, geom, rep["export"], driver=driver)
        except BaseException as failure:
            # nothing half-made: the pool goes with the failure; a drop that
            # fails too (attnd gone) must not hide why the set-up failed
            try:
                client.pool_drop(pool)
            except Exception as e:
                _note(failure, "and pool_drop(%r) failed too: %s" % (pool, e))
            raise

    # ---- mapping

    def _map_shm(self):
        x = self.export
        # os.open + mmap, not multiprocessing.shared_memory: its resource
        # tracker would unlink attnd's object when this process exits
        try:
            fd = os.open("/dev/shm" + x["name"], os.O_RDWR)
        except OSError as e:
            raise AttnError("E_IO", "export.name", "cannot open %s: %s (the export ended?)"
                            % (x["name"], e.strerror)) from None
        try:
            self._mm = mmap.mmap(fd, int(x["bytes"]))
        finally:
            os.close(fd)

    def _map_cuda(self):
        import torch
        from .cuda import Driver
        x = self.export
        self._torch = torch
        self._device = torch.device(x["device"])
        # the pool's device only while the handle opens: the caller's current
        # device is its own (torch.cuda.set_device here changed it for good)
        with torch.cuda.device(self._device):
            torch.zeros(1, device=self._device)  # the primary context is current on this thread
            self._driver = self._driver or Driver()
            self._dptr = self._driver.ipc_open(bytes(x["handle"]))
        self._base = self._dptr + int(x["offset"])

    def _view(self, offset, d, which):
        g, x = self.geom, self.export
        dt = x["kv_dtype"]
        es = _ELEM[dt]
        rows, heads = g["page_size"], g["num_kv_heads"]
        page_s, row_s, head_s = (x["page_stride_" + which], x["row_stride_" + which],
                                 x["head_stride_" + which])
        if x["layout"] == "NHD":
            shape = (g["num_pages"], rows, heads, d)
            strides = (page_s, row_s, head_s, es)
        else:
            shape = (g["num_pages"], heads, rows, d)
            strides = (page_s, head_s, row_s, es)
        if self._mm is not None:
            import numpy as np  # optional: only CPU pools need it
            return np.ndarray(shape, dtype=_NUMPY[dt], buffer=self._mm, offset=offset,
                              strides=strides)
        t = self._torch.as_tensor(_CudaArrayInterface(self._base + offset, shape, strides,
                                                      _CAI[dt]), device=self._device)
        return t.view(self._torch.bfloat16) if dt == "bf16" else t

    # ---- lifetime

    def close(self):
        """Unmap the views (they must not be used afterwards)."""
        self.k, self.v = [], []
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                pass  # numpy views still alive keep the pages until they go
            self._mm = None
        if self._dptr is not None:
            ptr, self._dptr = self._dptr, None
            with self._torch.cuda.device(self._device):  # the context that opened it
                try:
                    self._torch.cuda.synchronize(self._device)
                finally:
                    # a device error (raised above) must not leak the mapping
                    self._driver.ipc_close(ptr)

    def drop(self):
        """close(), then pool_drop on attnd."""
        self.close()
        return self.client.pool_drop(self.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
