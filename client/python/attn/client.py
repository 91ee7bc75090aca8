"""attn.client: the protocol client of attnd (wire protocol v1 + v2 buffers, docs/protocol.md).

No C extension and no nng binding: this module speaks nng's REQ/REP
scalability protocol itself over ipc:// (Unix socket) or tcp://, which is a
small, documented framing, and encodes messages with the `msgpack` package
(``pip install msgpack``).  One Client is one connection; it is not
thread-safe (use one Client per thread, or the C library for shared use).

    import attn
    c = attn.Client("ipc:///run/attnd/attnd.sock")
    print(c.hello()["server"])
    c.pool_create("main", layers=1, num_pages=16, page_size=4, num_kv_heads=1,
                  head_dim_qk=2, head_dim_vo=2, kv_dtype="fp32")
    r = c.attend(manifest, layer=0, q=attn.tensor(q, "fp32"), ...)
    o = attn.untensor(r["o"], r["o_dtype"])

Errors come back as AttnError(code, field, message), e.g.
AttnError("E_MASK_POLARITY", "mask.polarity", "a dense mask needs ...").

Registered buffers (docs/protocol.md): tensors may live in POSIX shared
memory that attnd maps too, and travel by reference instead of inside the
frame; O and LSE can be written straight into it:

    buf = attn.ShmBuffer(1 << 20)            # creates and maps the object
    bid = c.buffer_register_shm(buf.name, buf.size)
    q = buf.array(0, (total_q, hq, d), "fp32")   # numpy view (numpy optional)
    q[...] = ...
    r = c.run(plan_id, 0, q=attn.ref(bid, 0, q.nbytes), ...,
              o=attn.ref(bid, o_off, o_bytes))
    o = buf.array(o_off, (total_q, hq, d), "fp32")  # O is already there

Pipelined asynchronous runs: ``run(..., async_=True)`` sends the request
and returns an AsyncRun ticket at once; its ``wait()`` (or
``Client.collect()`` for every outstanding one) gives the reply or raises
its AttnError.  Several requests are on the wire together (nng's REQ/REP
matches replies by request id); at most ``max_outstanding`` (default 4,
half attnd's ``--conn-inflight`` default of 8: attnd counts a request
until its reply's send has completed, which it learns after the client may
already have read the reply, and closes a connection that goes over the cap
while replies wait) are unanswered: a send beyond it first reads the oldest
reply.  Runs ordered on the GPU through semaphores need attnd to enqueue
them in the order sent: nng's REP socket may hand two requests of one
connection to attnd's handlers in either order, so this client stamps every
run and attend with the connection's next ``"order": n`` (1, 2, 3, ...;
``Client(..., order=False)`` turns it off) and attnd handles them strictly
by that number.  As a safety net it still checks that the run_seq attnd gave
them rises in send order and raises AttnError("E_ORDER", "run_seq") when it
does not (docs/protocol.md, "Order" and "Pipelined asynchronous runs").
"""

import math
import os
import socket
import struct
import time
from multiprocessing import shared_memory

import msgpack

PROTOCOL_VERSION = 1

# nng scalability protocol numbers (the SP header's protocol field)
_NNG_REQ0 = 0x30
_NNG_REP0 = 0x31


class AttnError(Exception):
    """A failed reply: `code` is the wire name ("E_RANGE"), `field` the path."""

    def __init__(self, code, field, message):
        super().__init__("%s %s: %s" % (code, field, message))
        self.code = code
        self.field = field
        self.message = message


# ---- tensors: little-endian values of a dtype, as the protocol carries them


def _f32_to_bf16_bits(x):
    """Round an fp32 to bf16 bits, nearest-even (NaN stays a quiet NaN)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return ((u >> 16) | 0x40) & 0xFFFF
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def tensor(values, dtype):
    """Pack a flat sequence of numbers as a `bin` payload of `dtype`."""
    vals = [float(v) for v in values]
    if dtype == "fp32":
        return struct.pack("<%df" % len(vals), *vals)
    if dtype == "fp16":
        # struct's 'e' rounds to nearest-even and overflows to an error:
        # clamp to inf first, as the C conversion does
        out = []
        for v in vals:
            if not math.isnan(v) and abs(v) >= 65520.0:
                v = math.copysign(math.inf, v)
            out.append(v)
        return struct.pack("<%de" % len(out), *out)
    if dtype == "bf16":
        return struct.pack("<%dH" % len(vals), *[_f32_to_bf16_bits(v) for v in vals])
    raise ValueError("dtype must be fp32, fp16 or bf16, not %r" % (dtype,))


def untensor(data, dtype):
    """Unpack a `bin` payload of `dtype` into a list of floats."""
    if dtype == "fp32":
        return list(struct.unpack("<%df" % (len(data) // 4), data))
    if dtype == "fp16":
        return list(struct.unpack("<%de" % (len(data) // 2), data))
    if dtype == "bf16":
        bits = struct.unpack("<%dH" % (len(data) // 2), data)
        return [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in bits]
    raise ValueError("dtype must be fp32, fp16 or bf16, not %r" % (dtype,))


def i32(values):
    """Pack integers as little-endian int32 (page tables, indptr arrays)."""
    return struct.pack("<%di" % len(values), *values)


# ---- registered buffers


def ref(buf, offset, nbytes):
    """A tensor reference into registered buffer `buf` (a run's q, k_new, v_new, o, lse)."""
    return {"buf": int(buf), "offset": int(offset), "bytes": int(nbytes)}


def sem(buf, offset, value):
    """A semaphore: the uint64 counter at byte `offset` of registered buffer
    `buf` and the value to wait for (>=) or to write (a run's wait / signal)."""
    return {"buf": int(buf), "offset": int(offset), "value": int(value)}


_NUMPY_DTYPES = {"fp32": "<f4", "fp16": "<f2", "bf16": "<u2"}  # bf16 as its raw bits


class ShmBuffer:
    """A POSIX shared-memory object this process creates and maps; attnd maps
    the same object when it is registered (Client.buffer_register_shm).  The
    object is unlinked by close() (attnd keeps its own mapping until the
    buffer is dropped or the connection closes)."""

    def __init__(self, size, name=None):
        if name is None:
            name = "attn-%d-%s" % (os.getpid(), os.urandom(4).hex())
        self._shm = shared_memory.SharedMemory(name=name.lstrip("/"), create=True, size=size)
        self.size = size
        self.name = "/" + self._shm.name.lstrip("/")  # the shm_open name attnd wants
        self.buf = self._shm.buf  # a writable memoryview of the whole object

    def array(self, offset, shape, dtype):
        """A numpy view of `shape` elements of `dtype` at byte `offset` (no copy;
        bf16 shows as uint16 bits).  Needs numpy."""
        import numpy as np  # optional: only this method needs it
        count = 1
        for n in shape:
            count *= n
        return np.frombuffer(self.buf, dtype=_NUMPY_DTYPES[dtype], count=count,
                             offset=offset).reshape(shape)

    def close(self):
        """Unlink the object and drop this mapping.  numpy views that are still
        alive keep their pages mapped until they go (closing under them raised
        BufferError and left the object linked)."""
        self.buf = None
        try:
            self._shm.close()
        except BufferError:
            # views hold the mmap: forget it here, it unmaps with the last view
            self._shm._buf = None
            self._shm._mmap = None
        self._shm.unlink()


# ---- nng REQ over ipc:// or tcp://


class _SPConnection:
    """One SP pipe: the 8-byte handshake, then length-prefixed messages."""

    def __init__(self, url, timeout):
        if url.startswith("ipc://"):
            self.ipc = True
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(url[len("ipc://"):])
        elif url.startswith("tcp://"):
            self.ipc = False
            host, _, port = url[len("tcp://"):].rpartition(":")
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout)
        else:
            raise ValueError("url must be ipc:// or tcp://, not %r" % (url,))
        self.sock.sendall(b"\x00SP\x00" + struct.pack(">H", _NNG_REQ0) + b"\x00\x00")
        hdr = self._recv_exact(8)
        if hdr[:4] != b"\x00SP\x00" or struct.unpack(">H", hdr[4:6])[0] != _NNG_REP0:
            raise ConnectionError("peer is not an nng REP socket")

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("attnd closed the connection")
            buf += chunk
        return bytes(buf)

    def send(self, payload):
        # ipc frames carry a message-type byte (1) before the 64-bit length
        prefix = b"\x01" if self.ipc else b""
        self.sock.sendall(prefix + struct.pack(">Q", len(payload)) + payload)

    def recv(self):
        if self.ipc:
            self._recv_exact(1)
        (n,) = struct.unpack(">Q", self._recv_exact(8))
        return self._recv_exact(n)

    def close(self):
        self.sock.close()


class AsyncRun:
    """A ticket for an asynchronous run in flight (Client.run(..., async_=True)):
    `wait()` returns its reply (run_seq, diag, o/lse references) or raises
    its AttnError; `done()` says whether the reply has been read."""

    def __init__(self, client, rid, index):
        self._client = client
        self.rid = rid
        self.index = index  # this run's place among the connection's async runs
        self._reply = None
        self._error = None
        self._done = False

    def done(self):
        return self._done

    def wait(self):
        if not self._done:
            self._client._read_until(self.rid)
        if self._error is not None:
            raise self._error
        return self._reply


_U64 = struct.Struct(">BQ").pack  # msgpack uint64: 0xcf and 8 big-endian bytes


def _u64(v):
    return _U64(0xCF, v)


class PreparedRun:
    """Asynchronous runs of one plan that differ only in layer and semaphore
    values (an engine's per-layer run): the request's fixed fields are
    encoded once, each submit() packs only "id", "order", "layer" and the
    values of "wait" and "signal" (as msgpack uint64) around them.  The
    message is the one Client.run(..., async_=True) sends for the same
    arguments; attnd validates it the same way.  The references (ref(...))
    and semaphore words (sem(...), whose "value" is ignored here) are fixed
    when prepared."""

    def __init__(self, client, plan_id, q, k_new, v_new, o, lse, return_lse, wait, signal,
                 kv_written=False):
        self._client = client
        fixed = {"v": PROTOCOL_VERSION, "op": "run", "plan_id": plan_id, "q": q,
                 "k_new": k_new, "v_new": v_new, "o": o, "lse": lse,
                 "return_lse": True if return_lse else None, "async": True,
                 "kv_written": True if kv_written else None}
        fixed = {k: v for k, v in fixed.items() if v is not None}
        pk = lambda x: msgpack.packb(x, use_bin_type=True)  # noqa: E731
        self._fixed = b"".join(pk(k) + pk(v) for k, v in fixed.items())
        self._n_fixed = len(fixed)
        self._sems = []  # (which value of submit's, the key and its map up to "value")
        for which, (key, s) in enumerate((("wait", wait), ("signal", signal))):
            if s is not None:
                self._sems.append((which, pk(key) + b"\x83" + pk("buf") + pk(int(s["buf"])) +
                                   pk("offset") + pk(int(s["offset"])) + pk("value")))
        self._k_id, self._k_order, self._k_layer = pk("id"), pk("order"), pk("layer")

    def submit(self, layer, wait_value=None, signal_value=None):
        """Send the run of `layer` (waiting for wait_value, signalling
        signal_value); returns its AsyncRun ticket, as Client.run(...,
        async_=True) does."""
        values = (wait_value, signal_value)
        for which, _ in self._sems:  # before an order number is taken
            if values[which] is None:
                raise AttnError("E_MISSING", ("wait", "signal")[which],
                                "this prepared run has a %s semaphore: give its value"
                                % ("wait", "signal")[which])
        c = self._client
        tm = c.send_times
        t0 = time.perf_counter_ns() if tm is not None else 0
        c._make_room()
        t1 = time.perf_counter_ns() if tm is not None else 0
        rid = c._next
        c._next += 1
        parts = [None, self._fixed, self._k_id, _u64(rid)]
        if c.order:
            c._order += 1
            parts += (self._k_order, _u64(c._order))
        parts += (self._k_layer, _u64(layer))
        for which, prefix in self._sems:
            parts += (prefix, _u64(values[which]))
        n = self._n_fixed + (len(parts) - 2) // 2
        parts[0] = c._tag(rid) + (bytes((0x80 | n,)) if n < 16 else b"\xde" + struct.pack(">H", n))
        frame = b"".join(parts)
        t2 = time.perf_counter_ns() if tm is not None else 0
        c._conn.send(frame)
        if tm is not None:
            tm.append((t0, t1, t2, time.perf_counter_ns()))
        return c._ticket(rid)


def _error_of(rep):
    err = rep.get("error", {})
    return AttnError(err.get("code", "E_UNKNOWN"), err.get("field", ""), err.get("message", ""))


class Client:
    """A connection to attnd; one method per operation of PROTOCOL.md."""

    def __init__(self, url="ipc:///run/attnd/attnd.sock", timeout=30.0, max_outstanding=4,
                 order=True):
        if int(max_outstanding) < 1:
            raise AttnError("E_RANGE", "max_outstanding", "max_outstanding must be at least 1")
        self._conn = _SPConnection(url, timeout)
        self._next = 1
        self.max_outstanding = int(max_outstanding)
        self._pending = {}  # request id -> AsyncRun, in send order (dicts keep it)
        self._async_count = 0
        self._seq_of = {}  # AsyncRun.index -> run_seq, for the order check
        self.order = bool(order)  # stamp run/attend with "order" (attnd enqueues by it)
        self._order = 0  # the last order number sent on this connection
        # a list to profile the send path: each send appends its
        # (entered, room made, encoded, sent) time.perf_counter_ns()
        self.send_times = None

    def close(self):
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _send(self, op, fields, t_entered=None):
        rid = self._next
        self._next += 1
        msg = {"v": PROTOCOL_VERSION, "op": op, "id": rid}
        if self.order and op in ("run", "attend"):
            # numbered only when sent: attnd counts every number it receives,
            # refused or not, and waits for a missing one (--order-timeout-ms)
            self._order += 1
            msg["order"] = self._order
        msg.update({k: v for k, v in fields.items() if v is not None})
        tm = self.send_times
        t1 = time.perf_counter_ns() if tm is not None else 0
        # the REQ header: a 32-bit request id with the high bit set
        frame = self._tag(rid) + msgpack.packb(msg, use_bin_type=True)
        t2 = time.perf_counter_ns() if tm is not None else 0
        self._conn.send(frame)
        if tm is not None:
            tm.append((t_entered or t1, t1, t2, time.perf_counter_ns()))
        return rid

    def _make_room(self):
        """At most max_outstanding unanswered: read the oldest reply first."""
        while len(self._pending) >= self.max_outstanding:
            self._read_until(next(iter(self._pending)))

    def _ticket(self, rid):
        self._async_count += 1
        t = AsyncRun(self, rid, self._async_count)
        self._pending[rid] = t
        return t

    @staticmethod
    def _tag(rid):
        return struct.pack(">I", 0x80000000 | (rid & 0x7FFFFFFF))

    def _read_until(self, rid):
        """Read replies until the one of request `rid`; replies of outstanding
        async runs met on the way settle their tickets.  Returns the decoded
        reply of `rid` when it is not an async run (those settle instead)."""
        tag = self._tag(rid)
        while True:
            data = self._conn.recv()
            rep = msgpack.unpackb(data[4:], raw=False, strict_map_key=True)
            t = self._pending.pop(struct.unpack(">I", data[:4])[0] & 0x7FFFFFFF, None) \
                if len(data) >= 4 else None
            if t is not None:
                self._settle(t, rep)
            if data[:4] == tag:
                return rep if t is None else None
            # else: a reply to an abandoned earlier request is dropped

    def _settle(self, t, rep):
        t._done = True
        if not rep.get("ok"):
            t._error = _error_of(rep)
            return
        t._reply = rep
        seq = rep.get("run_seq")
        if not isinstance(seq, int):
            return
        # attnd enqueues a connection's async runs in the order of their
        # run_seq: a run sent later must have a larger one, or runs ordered
        # by semaphores would wait on each other on attnd's stream
        before = self._seq_of.get(t.index - 1)
        after = self._seq_of.get(t.index + 1)
        self._seq_of[t.index] = seq
        self._seq_of.pop(t.index - 4 * self.max_outstanding, None)
        if (before is not None and before >= seq) or (after is not None and after <= seq):
            t._error = AttnError(
                "E_ORDER", "run_seq",
                "attnd enqueued async run %d of this connection as run_seq %d, out of the "
                "order sent (neighbours: %s, %s); runs ordered by semaphores may wait on each "
                "other: close the connection (attnd releases its waits)" % (t.index, seq, before,
                                                                             after))

    def submit(self, op, **fields):
        """Send one request without waiting: returns an AsyncRun ticket.  At
        most max_outstanding are unanswered: beyond it the oldest is read first."""
        t0 = time.perf_counter_ns() if self.send_times is not None else None
        self._make_room()
        return self._ticket(self._send(op, fields, t0))

    def prepare_run(self, plan_id, q, k_new, v_new, o=None, lse=None, return_lse=False,
                    wait=None, signal=None, kv_written=False):
        """A PreparedRun: asynchronous runs of `plan_id` on these references
        (ref(...); k_new and v_new None with kv_written) and semaphore words
        (sem(...); their values are given per submit), encoded once; see
        PreparedRun."""
        return PreparedRun(self, plan_id, q, k_new, v_new, o, lse, return_lse, wait, signal,
                           kv_written)

    def collect(self):
        """Read every outstanding reply; returns their tickets in send order.
        Raises the first error among them after all have been read."""
        tickets = list(self._pending.values())
        while self._pending:
            self._read_until(next(iter(self._pending)))
        for t in tickets:
            if t._error is not None:
                raise t._error
        return tickets

    @property
    def outstanding(self):
        """Requests sent whose reply has not been read."""
        return len(self._pending)

    def call(self, op, **fields):
        """Send one request; return the reply map or raise AttnError."""
        while len(self._pending) >= self.max_outstanding:  # it counts against attnd's cap too
            self._read_until(next(iter(self._pending)))
        rep = self._read_until(self._send(op, fields))
        if not rep.get("ok"):
            raise _error_of(rep)
        return rep

    def hello(self):
        return self.call("hello")

    def stats(self):
        return self.call("stats")

    def pool_create(self, pool, layers, num_pages, page_size, num_kv_heads, head_dim_qk,
                    head_dim_vo, kv_dtype="bf16", layout="NHD", device=None, export=False):
        """export=True: the reply's "export" map says where the pool's memory
        is and its layout (attn.Pool.create maps it)."""
        return self.call("pool_create", pool=pool, layers=layers, num_pages=num_pages,
                         page_size=page_size, num_kv_heads=num_kv_heads,
                         head_dim_qk=head_dim_qk, head_dim_vo=head_dim_vo,
                         kv_dtype=kv_dtype, layout=layout, device=device,
                         export=True if export else None)

    def pool_drop(self, pool):
        return self.call("pool_drop", pool=pool)

    def pool_info(self, pool):
        return self.call("pool_info", pool=pool)

    def kv_write(self, pool, layer, pages, k, v, kv_dtype=None):
        """Write pages (in the pool's layout); k and v are `bin` bytes."""
        return self.call("kv_write", pool=pool, layer=layer, pages=i32(pages),
                         tensors={"k": k, "v": v}, kv_dtype=kv_dtype)

    def kv_read(self, pool, layer, pages):
        """Returns (k, v) bytes of the named pages, and the reply."""
        rep = self.call("kv_read", pool=pool, layer=layer, pages=i32(pages))
        return rep["tensors"]["k"], rep["tensors"]["v"], rep

    def plan(self, manifest):
        """`manifest`: a dict with the plan fields of PROTOCOL.md."""
        return self.call("plan", **manifest)

    def buffer_register_shm(self, name, nbytes):
        """Let attnd map shm object `name` ("/x", at least `nbytes`); returns the buffer id."""
        return self.call("buffer_register", kind="shm", name=name, bytes=nbytes)["buf"]

    def buffer_register_cuda(self, handle, offset, nbytes, device):
        """Let attnd open a legacy CUDA IPC `handle` (64 bytes, of the allocation's
        base) and use `nbytes` from byte `offset` of it on `device` ("cuda:N");
        returns the buffer id.  attn.cuda.ipc_describe(ptr) gives the three."""
        return self.call("buffer_register", kind="cuda_ipc", handle=bytes(handle),
                         offset=int(offset), bytes=int(nbytes), device=device)["buf"]

    def buffer_drop(self, buf):
        return self.call("buffer_drop", buf=buf)

    def run(self, plan_id, layer, q, k_new=None, v_new=None, return_lse=False, trace=False,
            verify=False, o=None, lse=None, wait=None, signal=None, async_=False,
            kv_written=False):
        """q, k_new, v_new: `bin` bytes or ref(...); o, lse: optional ref(...) to
        write the outputs into a registered buffer (the reply then carries
        the reference under "o" / "lse" instead of the bytes).  wait, signal:
        optional sem(...) (attnd's stream waits for the counter >= value
        before reading inputs; writes the value after its last kernel);
        async_: attnd replies once the work is enqueued, and this call returns
        an AsyncRun ticket as soon as the request is sent (its wait() gives
        the reply); otherwise the reply map.  kv_written: the new rows are
        already in the exported pool (attn.Pool): k_new and v_new stay None."""
        fields = dict(plan_id=plan_id, layer=layer, q=q, k_new=k_new, v_new=v_new, o=o, lse=lse,
                      return_lse=return_lse or None, trace=trace or None, verify=verify or None,
                      wait=wait, signal=signal, kv_written=True if kv_written else None)
        if async_:
            return self.submit("run", **fields, **{"async": True})
        return self.call("run", **fields)

    def run_status(self, run_seq):
        """State of asynchronous run `run_seq` (its reply's "run_seq"): the reply's
        "status" map {state, engine_us, timing_method, exec_us, queued_us, error}."""
        return self.call("run_status", run_seq=int(run_seq))["status"]

    def attend(self, manifest, layer, q, k_new, v_new, return_lse=False, trace=False,
               verify=False, o=None, lse=None):
        fields = dict(manifest)
        fields.update(layer=layer, q=q, k_new=k_new, v_new=v_new, o=o, lse=lse,
                      return_lse=return_lse or None, trace=trace or None,
                      verify=verify or None)
        return self.call("attend", **fields)
