"""attn.cuda: the few CUDA driver calls the zero-copy path needs, by ctypes on
libcuda.so.1 (present wherever a GPU driver is; no CUDA toolkit, no compiled
extension).

- ipc_describe(ptr): the legacy IPC handle of the allocation holding device
  pointer `ptr`, the pointer's offset in it and its device ordinal (what
  attnd's buffer_register kind "cuda_ipc" takes).
- ipc_open(handle) / ipc_close(ptr): map another process's allocation (an
  exported pool, attn.Pool) and unmap it.
- stream_write_u64 / stream_wait_u64: stream memory operations on a
  semaphore word (cuStreamWriteValue64 / cuStreamWaitValue64 GEQ), ordered
  with the other work of that stream, e.g. torch.cuda.current_stream().

Errors raise attn.AttnError with code E_BUFFER_UNSUPPORTED and the field.
"""

import ctypes
import struct
import os

from .client import AttnError

_CU_POINTER_ATTRIBUTE_CONTEXT = 1
_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
_CU_POINTER_ATTRIBUTE_IS_MANAGED = 8
_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE = 10
_CU_MEMORYTYPE_DEVICE = 2
_CU_STREAM_WAIT_VALUE_GEQ = 0x0
_CU_STREAM_WRITE_VALUE_DEFAULT = 0x0
IPC_HANDLE_BYTES = 64


_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1


class _IpcHandle(ctypes.Structure):
    """CUipcMemHandle (64 opaque bytes), passed by value.  Eight 64-bit
    words, not a char array: ctypes describes an array member of a struct
    passed by value to libffi as a pointer, and cuIpcOpenMemHandle then
    received a garbled handle ("invalid argument" on the H200, 2026-12-01)."""
    _fields_ = [("w%d" % i, ctypes.c_uint64) for i in range(IPC_HANDLE_BYTES // 8)]

    @classmethod
    def of(cls, handle):
        return cls(*struct.unpack("<%dQ" % (IPC_HANDLE_BYTES // 8), bytes(handle)))

    def raw(self):
        return struct.pack("<%dQ" % (IPC_HANDLE_BYTES // 8),
                           *(getattr(self, f) for f, _ in self._fields_))


def _unsupported(why, field="dev_ptr"):
    return AttnError("E_BUFFER_UNSUPPORTED", field, why)


class Driver:
    """libcuda.so.1 (or $ATTN_CUDA_DRIVER_LIB), its entry points typed."""

    def __init__(self, path=None):
        path = path or os.environ.get("ATTN_CUDA_DRIVER_LIB") or "libcuda.so.1"
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise _unsupported("no CUDA driver (%s): %s" % (path, e)) from None
        L, vp, u64, i = self.lib, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int
        self._sig(L.cuInit, [ctypes.c_uint])
        self._sig(L.cuGetErrorString, [i, ctypes.POINTER(ctypes.c_char_p)])
        self._sig(L.cuPointerGetAttribute, [vp, i, u64])
        self._sig(L.cuMemGetAddressRange_v2, [ctypes.POINTER(u64), ctypes.POINTER(ctypes.c_size_t),
                                              u64])
        self._sig(L.cuCtxPushCurrent_v2, [vp])
        self._sig(L.cuCtxPopCurrent_v2, [ctypes.POINTER(vp)])
        self._sig(L.cuIpcGetMemHandle, [ctypes.c_char_p, u64])
        self._sig(L.cuIpcOpenMemHandle_v2, [ctypes.POINTER(u64), _IpcHandle, ctypes.c_uint])
        self._sig(L.cuIpcCloseMemHandle, [u64])
        self._sig(L.cuStreamWriteValue64_v2, [vp, u64, u64, ctypes.c_uint])
        self._sig(L.cuStreamWaitValue64_v2, [vp, u64, u64, ctypes.c_uint])
        self.check(L.cuInit(0), "cuInit (no usable GPU)")

    @staticmethod
    def _sig(fn, argtypes):
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int

    def message(self, rc):
        s = ctypes.c_char_p()
        if self.lib.cuGetErrorString(rc, ctypes.byref(s)) != 0 or not s.value:
            return "CUDA driver error %d" % rc
        return s.value.decode()

    def check(self, rc, what, field="dev_ptr"):
        if rc != 0:
            raise _unsupported("%s: %s" % (what, self.message(rc)), field)

    def _attr(self, ctype, attr, ptr):
        v = ctype()
        rc = self.lib.cuPointerGetAttribute(ctypes.byref(v), attr, ptr)
        return rc, v.value

    def ipc_describe(self, ptr, nbytes):
        """(handle bytes, offset, ordinal) of `nbytes` at device pointer `ptr`."""
        if not ptr:
            raise _unsupported("dev_ptr is NULL")
        rc, mem_type = self._attr(ctypes.c_uint, _CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
        self.check(rc, "dev_ptr is not memory the CUDA driver knows")
        rc, managed = self._attr(ctypes.c_uint, _CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr)
        if rc == 0 and managed:
            raise _unsupported("managed memory has no IPC handle")
        if mem_type != _CU_MEMORYTYPE_DEVICE:
            raise _unsupported("dev_ptr is host memory, not device memory")
        rc, ok = self._attr(ctypes.c_uint, _CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr)
        if rc != 0 or not ok:
            raise _unsupported("this allocation has no legacy IPC handle (cuMemCreate/VMM memory, "
                               "e.g. torch with expandable_segments:True; allocate with cudaMalloc "
                               "or turn expandable segments off)")
        rc, ordinal = self._attr(ctypes.c_int, _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
        self.check(rc, "device ordinal")
        rc, ctx = self._attr(ctypes.c_void_p, _CU_POINTER_ATTRIBUTE_CONTEXT, ptr)
        self.check(rc, "context")
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr),
                   "cuMemGetAddressRange")
        offset = ptr - base.value
        if nbytes < 1 or nbytes > size.value - offset:
            raise AttnError("E_BUFFER_RANGE", "bytes",
                            "%d bytes at offset %d pass the allocation's end (%d bytes)"
                            % (nbytes, offset, size.value))
        handle = ctypes.create_string_buffer(IPC_HANDLE_BYTES)
        self.check(self.lib.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
        try:
            self.check(self.lib.cuIpcGetMemHandle(handle, base.value), "cuIpcGetMemHandle")
        finally:
            popped = ctypes.c_void_p()
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
        return handle.raw, offset, ordinal

    def ipc_open(self, handle):
        """The device pointer of the allocation another process's legacy IPC
        `handle` (64 bytes) names, opened in the current context (an exported
        pool's memory); ipc_close releases it."""
        if len(handle) != IPC_HANDLE_BYTES:
            raise _unsupported("an IPC handle has %d bytes, not %d" % (IPC_HANDLE_BYTES,
                                                                        len(handle)), "handle")
        h = _IpcHandle.of(handle)
        ptr = ctypes.c_uint64()
        self.check(self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h,
                                                  _CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                   "cuIpcOpenMemHandle", "handle")
        return ptr.value

    def ipc_close(self, ptr):
        """Close a mapping ipc_open made."""
        self.check(self.lib.cuIpcCloseMemHandle(ptr), "cuIpcCloseMemHandle", "handle")

    def stream_write_u64(self, stream, addr, value):
        """On `stream` (a CUstream / torch stream's cuda_stream), after its
        earlier work: *addr = value (with the default memory fence)."""
        self.check(self.lib.cuStreamWriteValue64_v2(stream, addr, value,
                                                    _CU_STREAM_WRITE_VALUE_DEFAULT),
                   "cuStreamWriteValue64", "signal")

    def stream_wait_u64(self, stream, addr, value):
        """Later work on `stream` waits until *addr >= value (cyclic compare)."""
        self.check(self.lib.cuStreamWaitValue64_v2(stream, addr, value, _CU_STREAM_WAIT_VALUE_GEQ),
                   "cuStreamWaitValue64", "wait")
