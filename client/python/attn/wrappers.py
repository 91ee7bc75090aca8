"""attn.wrappers: FlashInfer-style batch attention through attnd.

    w = attn.BatchDecodeWrapper("ipc:///run/attnd/attnd.sock", pool="main")
    w.plan(kv_indptr, kv_indices, kv_last_page_len, num_qo_heads=32, num_kv_heads=8,
           head_dim=128, page_size=16, q_data_type="bf16")
    for layer in range(L):
        o = w.run(q, k_new, v_new, layer=layer)        # torch CUDA tensors in, out

The K/V cache lives in attnd's pool `pool` (pool_create), so a run also
takes the step's new K/V rows (k_new, v_new; attnd appends them before
attending); kv_last_page_len counts them, as FlashInfer's does after its
append.  Tensors travel by reference through an arena registered once
(attn.arena): one taken from `w.empty(shape, dtype)` is used in place;
any other is copied into the plan's slot first.  O (and LSE) are written by
attnd into the arena; the returned tensor is a view of the plan's output
slot, valid until this wrapper's next run (pass `out=` to keep one).

Transports:
- "cuda_ipc" (torch CUDA tensors): a cuda_ipc arena; GPU-side ordering with
  torch.cuda.current_stream(): the stream writes the `ready` semaphore after
  the inputs, attnd's stream waits for it, attends, writes `done`, and the
  current stream waits for `done` before whatever comes next; the host
  never blocks (async runs).  attnd must run under MPS for the two
  processes' kernels to overlap (docs/cuda.md).  Load every kernel the step
  uses before the first run (CUDA_MODULE_LOADING=EAGER, or one warm-up step
  with transport "inline"): a lazily loaded kernel queued behind a
  cross-process wait can deadlock.
  With ``pipelined=True`` run() does not wait for attnd's reply either: the
  request is sent and the next layer can be submitted at once (attnd orders
  the runs on the GPU through the semaphores); ``w.collect()`` (once a
  step) reads the replies and raises the first AttnError among them, after
  releasing the current stream past the runs' `done` waits so that it
  cannot hang on a run attnd refused.  A run's request is encoded once
  per plan and references (Client.prepare_run); later runs pack only the
  layer and the semaphore values, and get the same output view objects
  back.  ``max_outstanding`` (the Client's window) above the runs of a
  step keeps run() from reading replies mid-step (attnd's --conn-inflight
  must be above it).
- "shm" (numpy arrays): a POSIX shared-memory arena, synchronous runs.
- "inline": tensors inside the request and reply (host copies; any attnd).

Argument errors raise attn.AttnError(code, field, message) before anything
is sent; attnd's refusals arrive the same way.
"""

import collections
import time

from .arena import CudaArena, ShmArena
from .client import AttnError, Client, i32, ref, sem

_ELEM = {"fp32": 4, "fp16": 2, "bf16": 2}
_SEM_READY, _SEM_DONE = 0, 8  # byte offsets of the two semaphore words


def _ints(x, field):
    """A list of Python ints from a list, numpy array or torch tensor."""
    if hasattr(x, "tolist"):
        x = x.tolist()
    try:
        out = [int(v) for v in x]
    except (TypeError, ValueError):
        raise AttnError("E_TYPE", field, "%s must be a 1-D sequence of integers" % field) from None
    return out


def _bad(code, field, fmt, *args):
    return AttnError(code, field, fmt % args)


def _raise_async_error(rep):
    """An earlier asynchronous run of this connection failed after its reply
    (attnd says so once, on the next reply): raise it here."""
    e = rep.get("async_error") if isinstance(rep, dict) else None
    if e:
        raise AttnError(e.get("code", "E_UNKNOWN"), e.get("field", ""),
                        "asynchronous run %s failed after it was enqueued: %s"
                        % (e.get("run_seq", "?"), e.get("message", "")))


class _BatchWrapper:
    _default_mask = None
    # arena views kept for reuse on the cuda_ipc path (_view): a decode
    # step's outputs need two, so 64 covers many plans' slots at once
    VIEW_CACHE_MAX = 64

    def __init__(self, url_or_client, pool="main", arena_bytes=256 << 20, transport=None,
                 device=None, timeout=30.0, pipelined=False, max_outstanding=4):
        self.client = (url_or_client if isinstance(url_or_client, Client)
                       else Client(url_or_client, timeout=timeout,
                                   max_outstanding=max_outstanding))
        self.pool = pool
        self.geom = self.client.pool_info(pool)
        if transport is None:
            transport = "cuda_ipc" if str(self.geom.get("device", "cpu")).startswith("cuda") \
                else "shm"
        if transport not in ("cuda_ipc", "shm", "inline"):
            raise _bad("E_RANGE", "transport", "transport must be cuda_ipc, shm or inline, not %r",
                       transport)
        self.transport = transport
        self.device = device
        self._arena_bytes = int(arena_bytes)
        self.arena = None
        self._plan = None
        self._epoch = 0
        self._torch = None
        self.pipelined = bool(pipelined)
        self._tickets = []  # pipelined runs whose replies collect() has not read
        self.last_reply = None  # the last run's reply (its diag: kernels, timing)
        # cuda_ipc: a PreparedRun per (plan, references) and the arena views
        # run() returns, so a repeated run encodes and allocates little
        self._prepared = {}
        self._views = collections.OrderedDict()  # at most VIEW_CACHE_MAX, see _view
        self._memo = None  # the last run's in-place inputs and their references
        self.prepared = True  # False: each run encoded in full by Client.run (to compare)
        # a list to profile run() on the cuda_ipc path: each run appends its
        # (entered, checked, ready written, request sent, done wait enqueued)
        # time.perf_counter_ns(); client.send_times splits the send
        self.submit_times = None
        if transport == "cuda_ipc":
            import torch
            self._torch = torch
            self.arena = CudaArena(self.client, self._arena_bytes,
                                   device=device if device is not None else "cuda")
        elif transport == "shm":
            self.arena = ShmArena(self.client, self._arena_bytes)

    # ---- lifetime

    def close(self):
        """Drop the arena's buffer and close the connection (attnd also
        releases the buffer when the connection closes)."""
        if self.arena is not None:
            self.arena.close()
            self.arena = None
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def empty(self, shape, dtype):
        """A tensor (or numpy array) inside the arena: attnd reads it in place."""
        if self.arena is None:
            raise _bad("E_RANGE", "transport", "transport inline has no arena")
        return self.arena.empty(shape, dtype)

    # ---- plan

    def _plan_common(self, qo_lens, kv_indptr, kv_indices, kv_last_page_len, num_qo_heads,
                     num_kv_heads, head_dim, page_size, q_data_type, kv_data_type, sm_scale,
                     mask):
        g = self.geom
        indptr = _ints(kv_indptr, "kv_indptr")
        indices = _ints(kv_indices, "kv_indices")
        last = _ints(kv_last_page_len, "kv_last_page_len")
        B = len(last)
        if B == 0:
            raise _bad("E_EMPTY_BATCH", "kv_last_page_len", "the batch has no requests")
        if len(indptr) != B + 1:
            raise _bad("E_INDPTR", "kv_indptr", "kv_indptr has %d entries; %d requests need %d",
                       len(indptr), B, B + 1)
        if indptr[0] != 0 or indptr[-1] != len(indices) or \
                any(b < a for a, b in zip(indptr, indptr[1:])):
            raise _bad("E_INDPTR", "kv_indptr", "kv_indptr must rise from 0 to len(kv_indices) "
                       "= %d", len(indices))
        for name, want, have in (("num_kv_heads", g["num_kv_heads"], num_kv_heads),
                                 ("head_dim", g["head_dim_qk"], head_dim),
                                 ("page_size", g["page_size"], page_size)):
            if int(have) != int(want):
                raise _bad("E_SHAPE", name, "%s is %d; pool %r has %d", name, have, self.pool,
                           want)
        if kv_data_type is not None and kv_data_type != g["kv_dtype"]:
            raise _bad("E_DTYPE", "kv_data_type", "kv_data_type %r; pool %r holds %r",
                       kv_data_type, self.pool, g["kv_dtype"])
        if q_data_type not in _ELEM:
            raise _bad("E_DTYPE", "q_data_type", "q_data_type must be fp32, fp16 or bf16, not %r",
                       q_data_type)
        if num_qo_heads <= 0 or num_qo_heads % num_kv_heads:
            raise _bad("E_HEADS", "num_qo_heads", "num_qo_heads %d is not a multiple of "
                       "num_kv_heads %d", num_qo_heads, num_kv_heads)
        requests = []
        for b in range(B):
            npages = indptr[b + 1] - indptr[b]
            if npages < 1 or not 1 <= last[b] <= page_size:
                raise _bad("E_LAST_PAGE_LEN", "kv_last_page_len",
                           "request %d: %d pages, last page %d rows (page_size %d)", b, npages,
                           last[b], page_size)
            kv_len = (npages - 1) * page_size + last[b]
            if qo_lens[b] < 1 or qo_lens[b] > kv_len:
                raise _bad("E_PHASE", "qo_indptr", "request %d: %d new rows but %d K/V rows",
                           b, qo_lens[b], kv_len)
            requests.append({"id": b, "cache_len": kv_len - qo_lens[b], "new_len": qo_lens[b]})
        qo_indptr = [0]
        for n in qo_lens:
            qo_indptr.append(qo_indptr[-1] + n)
        manifest = {
            "pool": self.pool, "num_qo_heads": int(num_qo_heads), "q_dtype": q_data_type,
            "requests": requests, "qo_indptr": i32(qo_indptr),
            "kv": {"format": "csr", "page_indptr": i32(indptr), "page_indices": i32(indices),
                   "last_page_len": i32(last)},
            "mask": mask,
        }
        if sm_scale is not None:
            manifest["sm_scale"] = float(sm_scale)
        rep = self.client.plan(manifest)
        total_q = qo_indptr[-1]
        p = {
            "id": rep["plan_id"], "total_q": total_q, "hq": int(num_qo_heads),
            "hkv": int(num_kv_heads), "d_qk": int(g["head_dim_qk"]),
            "d_vo": int(g["head_dim_vo"]), "q_dtype": q_data_type, "kv_dtype": g["kv_dtype"],
            "diag": rep.get("diag"),
        }
        p["shapes"] = {
            "q": ((total_q, p["hq"], p["d_qk"]), q_data_type),
            "k_new": ((total_q, p["hkv"], p["d_qk"]), p["kv_dtype"]),
            "v_new": ((total_q, p["hkv"], p["d_vo"]), p["kv_dtype"]),
            "o": ((total_q, p["hq"], p["d_vo"]), q_data_type),
            "lse": ((total_q, p["hq"]), "fp32"),
        }
        if self.arena is not None:
            old = self._plan["slots"] if self._plan else {}
            p["slots"] = {}
            for name, (shape, dt) in p["shapes"].items():
                o = old.get(name)
                if o is not None and o[1] >= _nbytes(shape, dt):
                    p["slots"][name] = o  # reuse: (offset, capacity)
                else:
                    t = self.arena.empty(shape, dt)
                    p["slots"][name] = (self.arena.offset_of(t), _nbytes(shape, dt))
        p["nbytes"] = {name: _nbytes(*sd) for name, sd in p["shapes"].items()}
        self._plan = p
        self._memo = None  # the new plan's shapes are checked again
        return rep

    # ---- run

    _TORCH_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
    _NUMPY_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "uint16"}

    def _check(self, x, name):
        """x matches the plan's shape and dtype for `name`, on the right side."""
        shape, dt = self._plan["shapes"][name]
        is_torch = hasattr(x, "is_cuda")
        if self.transport == "cuda_ipc" and not (is_torch and x.is_cuda):
            raise _bad("E_TYPE", name, "%s must be a torch CUDA tensor (transport cuda_ipc)", name)
        if self.transport == "shm" and is_torch:
            raise _bad("E_TYPE", name, "%s must be a numpy array (transport shm)", name)
        if not is_torch and not (hasattr(x, "dtype") and hasattr(x, "shape")):
            raise _bad("E_TYPE", name, "%s must be a numpy array or a torch tensor, not %s", name,
                       type(x).__name__)
        if is_torch:
            want = self._TORCH_NAMES[dt]
            ok = x.dtype is getattr(self._torch_mod(), want)
        else:
            want = self._NUMPY_NAMES[dt]
            ok = getattr(x.dtype, "name", None) == want
        if not ok:
            raise _bad("E_DTYPE", name, "%s is %s; the plan needs %s (%s)", name, x.dtype, dt,
                       want)
        if tuple(x.shape) != shape:
            raise _bad("E_SHAPE", name, "%s has shape %s; the plan needs %s", name,
                       tuple(x.shape), shape)

    def _torch_mod(self):
        if self._torch is None:
            import torch
            self._torch = torch
        return self._torch

    def _as_ref(self, x, name):
        """A reference to x in the arena: in place, or after a copy into the slot."""
        off = self.arena.offset_of(x)
        nbytes = _nbytes(*self._plan["shapes"][name])
        if off is None:
            off = self._plan["slots"][name][0]
            shape, dt = self._plan["shapes"][name]
            dst = self.arena.view(off, shape, dt)
            if self.transport == "cuda_ipc":
                dst.copy_(x)  # on the current stream, before the ready signal
            else:
                dst[...] = x
        return ref(self.arena.buf, off, nbytes)

    def run(self, q, k_new=None, v_new=None, layer=0, out=None, lse=None, return_lse=False,
            kv_written=False):
        """Attention of the planned batch for `layer`: returns O, or (O, LSE)
        with return_lse (or when `lse` is given).  kv_written=True: the pool
        is exported (attn.Pool) and the new rows are already in it, written
        on the current stream (CUDA) or before this call (CPU); k_new and
        v_new are then not given."""
        t_entered = time.perf_counter_ns() if self.submit_times is not None else 0
        if self._plan is None:
            raise _bad("E_STALE_PLAN", "plan", "call plan() before run()")
        p = self._plan
        if kv_written and (k_new is not None or v_new is not None):
            raise _bad("E_SHAPE", "k_new" if k_new is not None else "v_new",
                       "kv_written=True takes no k_new / v_new: the rows are in the pool")
        ins = ((q, "q"),) if kv_written else ((q, "q"), (k_new, "k_new"), (v_new, "v_new"))
        memo = self._memo_refs(ins)
        if memo is None:
            for x, name in ins:
                self._check(x, name)
        if out is not None:
            self._check(out, "o")
        if lse is not None:
            self._check(lse, "lse")
            return_lse = True
        if self.transport == "inline":
            return self._run_inline(q, k_new, v_new, layer, out, lse, return_lse, kv_written)
        refs = memo
        if refs is None:
            refs = {"k_new": None, "v_new": None}
            refs.update({n: self._as_ref(x, n) for x, n in ins})
            self._remember(ins, refs)
        outs = {}
        for name, given in (("o", out), ("lse", lse)):
            if name == "lse" and not return_lse:
                continue
            off = self.arena.offset_of(given) if given is not None else None
            if off is None:
                off = p["slots"][name][0]
            outs[name] = off
        o_ref = ref(self.arena.buf, outs["o"], p["nbytes"]["o"])
        lse_ref = ref(self.arena.buf, outs["lse"], p["nbytes"]["lse"]) if return_lse else None
        if self.transport == "cuda_ipc":
            self._run_ordered(layer, refs, o_ref, lse_ref, kv_written, t_entered)
        else:
            self.last_reply = self.client.run(p["id"], layer, refs["q"], refs["k_new"],
                                              refs["v_new"], return_lse=return_lse, o=o_ref,
                                              lse=lse_ref, kv_written=kv_written)
        o_view = self._view(outs["o"], *p["shapes"]["o"])
        if out is not None and o_view is not out and self.arena.offset_of(out) is None:
            _copy(out, o_view)
            o_view = out
        if not return_lse:
            return o_view
        lse_view = self._view(outs["lse"], *p["shapes"]["lse"])
        if lse is not None and self.arena.offset_of(lse) is None:
            _copy(lse, lse_view)
            lse_view = lse
        return o_view, lse_view

    def _memo_refs(self, ins):
        """The last run's input references when the inputs `ins` ((tensor,
        name) pairs) are its very tensors, still in place in the arena (same
        address, shape, dtype, contiguous): a few attribute reads instead of
        the checks; else None."""
        m = self._memo
        if m is None or len(m[0]) != len(ins):
            return None
        for (x, _), was, (ptr, shape, dtype) in zip(ins, m[0], m[1]):
            if x is not was or x.data_ptr() != ptr or x.shape != shape or \
                    x.dtype is not dtype or not x.is_contiguous():
                return None
        return m[2]

    def _remember(self, ins, refs):
        """Keep the references for _memo_refs: cuda_ipc inputs used in place only
        (one copied into its slot is copied again next run)."""
        xs = [x for x, _ in ins]
        if self.transport != "cuda_ipc" or any(self.arena.offset_of(x) is None for x in xs):
            self._memo = None
            return
        self._memo = (xs, [(x.data_ptr(), x.shape, x.dtype) for x in xs], refs)

    def _current_stream(self):
        """torch's current stream on the arena's device, as a cudaStream_t
        (the raw getter where torch has it: no Stream object per run)."""
        t, dev = self._torch, self.arena.device
        raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
        if raw is not None and dev.index is not None:
            return raw(dev.index)
        return t.cuda.current_stream(dev).cuda_stream

    def _view(self, offset, shape, dtype):
        """The arena's view at `offset` (one tensor per place: a view costs
        several torch calls, and the output slots repeat every run).  At most
        VIEW_CACHE_MAX places are kept, the least recently used going first:
        plans of ever new shapes must not grow it without limit."""
        if self.transport != "cuda_ipc":
            return self.arena.view(offset, shape, dtype)
        key = (offset, shape, dtype)
        v = self._views.get(key)
        if v is not None:
            self._views.move_to_end(key)
            return v
        v = self._views[key] = self.arena.view(offset, shape, dtype)
        while len(self._views) > self.VIEW_CACHE_MAX:
            self._views.popitem(last=False)
        return v

    def _prepared_run(self, refs, o_ref, lse_ref, kv_written):
        """The PreparedRun of this plan on these references (made once)."""
        p, a = self._plan, self.arena
        off = lambda r: None if r is None else r["offset"]  # noqa: E731
        key = (p["id"], off(refs["q"]), off(refs["k_new"]), off(refs["v_new"]), off(o_ref),
               off(lse_ref), kv_written)
        pr = self._prepared.get(key)
        if pr is None:
            if len(self._prepared) >= 64:  # stale plans' entries
                self._prepared.clear()
            pr = self._prepared[key] = self.client.prepare_run(
                p["id"], refs["q"], refs["k_new"], refs["v_new"], o=o_ref, lse=lse_ref,
                return_lse=lse_ref is not None, wait=sem(a.buf, _SEM_READY, 0),
                signal=sem(a.buf, _SEM_DONE, 0), kv_written=kv_written)
        return pr

    def _run_ordered(self, layer, refs, o_ref, lse_ref, kv_written=False, t_entered=0):
        """GPU-side ordering through the arena's semaphores (no host wait)."""
        a = self.arena
        tm = self.submit_times
        t_checked = time.perf_counter_ns() if tm is not None else 0
        stream = self._current_stream()
        self._epoch += 1
        e = self._epoch
        a.driver.stream_write_u64(stream, a.addr(_SEM_READY), e)
        t_ready = time.perf_counter_ns() if tm is not None else 0
        if self.prepared:
            ticket = self._prepared_run(refs, o_ref, lse_ref, kv_written).submit(layer, e, e)
        else:
            ticket = self.client.run(
                self._plan["id"], layer, refs["q"], refs["k_new"], refs["v_new"],
                return_lse=lse_ref is not None, o=o_ref, lse=lse_ref,
                wait=sem(a.buf, _SEM_READY, e), signal=sem(a.buf, _SEM_DONE, e), async_=True,
                kv_written=kv_written)
        t_sent = time.perf_counter_ns() if tm is not None else 0
        if self.pipelined:
            a.driver.stream_wait_u64(stream, a.addr(_SEM_DONE), e)
            self._tickets.append(ticket)
            if tm is not None:
                tm.append((t_entered, t_checked, t_ready, t_sent, time.perf_counter_ns()))
            return
        # blocking: a refusal raises before the stream is made to wait for a
        # `done` that attnd would never write
        self.last_reply = ticket.wait()
        a.driver.stream_wait_u64(stream, a.addr(_SEM_DONE), e)
        _raise_async_error(self.last_reply)

    def collect(self):
        """Pipelined runs: read the replies of the runs sent since the last
        collect(); returns them in send order (None for a refused one).  On
        any error the current stream is released past every `done` wait
        (the outputs of that step are then not valid) and the first error
        is raised."""
        tickets, self._tickets = self._tickets, []
        reps, first = [], None
        for t in tickets:
            try:
                rep = t.wait()
                _raise_async_error(rep)
                reps.append(rep)
            except AttnError as err:
                reps.append(None)
                first = first or err
        if reps and reps[-1] is not None:
            self.last_reply = reps[-1]
        if first is not None:
            self._release_done()
            raise first
        return reps

    def _release_done(self):
        """Write `done` = the last epoch from a side stream: the waits the
        current stream has queued pass (a wait is released by a write from
        another stream of the same process, ZERO-COPY.md)."""
        a = self.arena
        side = self._torch.cuda.Stream(a.device)
        a.driver.stream_write_u64(side.cuda_stream, a.addr(_SEM_DONE), self._epoch)
        side.synchronize()

    def _run_inline(self, q, k_new, v_new, layer, out, lse, return_lse, kv_written=False):
        p = self._plan
        rows = (None, None) if kv_written else (_to_bytes(k_new), _to_bytes(v_new))
        rep = self.client.run(p["id"], layer, _to_bytes(q), rows[0], rows[1],
                              return_lse=return_lse, kv_written=kv_written)
        self.last_reply = rep
        o = _from_bytes(rep["o"], p["shapes"]["o"], q)
        if out is not None:
            _copy(out, o)
            o = out
        if not return_lse:
            return o
        lv = _from_bytes(rep["lse"], (p["shapes"]["lse"][0], "fp32"), q)
        if lse is not None:
            _copy(lse, lv)
            lv = lse
        return o, lv

    @property
    def plan_diag(self):
        """The diagnostic of the last plan (attnd's explanation of its choice)."""
        return self._plan["diag"] if self._plan else None


def _nbytes(shape, dtype):
    n = _ELEM[dtype]
    for s in shape:
        n *= int(s)
    return n


def _copy(dst, src):
    if hasattr(dst, "copy_"):
        dst.copy_(src)
    else:
        dst[...] = src


def _to_bytes(x):
    if hasattr(x, "is_cuda"):  # torch, without numpy (bf16 has no numpy dtype)
        import ctypes
        h = x.detach().contiguous().cpu()
        return ctypes.string_at(h.data_ptr(), h.numel() * h.element_size())
    return x.tobytes()


def _from_bytes(data, shape_dtype, like):
    shape, dt = shape_dtype
    if hasattr(like, "is_cuda"):
        import torch
        tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dt]
        return torch.frombuffer(bytearray(data), dtype=tdt).view(*shape).to(like.device)
    import numpy as np
    return np.frombuffer(data, dtype={"fp32": "<f4", "fp16": "<f2", "bf16": "<u2"}[dt]) \
        .reshape(shape).copy()


class BatchDecodeWrapper(_BatchWrapper):
    """One new row per request (decode), FlashInfer's BatchDecodeWithPagedKVCacheWrapper habits."""

    def plan(self, kv_indptr, kv_indices, kv_last_page_len, num_qo_heads, num_kv_heads, head_dim,
             page_size, pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None,
             q_data_type="bf16", kv_data_type=None, sm_scale=None):
        """Plan the batch: kv_* describe each request's pages after this step's
        row is appended (FlashInfer's convention).  Returns the plan reply."""
        if pos_encoding_mode != "NONE":
            raise _bad("E_RANGE", "pos_encoding_mode", "only NONE (apply RoPE to q/k_new first)")
        if logits_soft_cap:
            raise _bad("E_RANGE", "logits_soft_cap", "logits soft-capping is not supported")
        B = len(_ints(kv_last_page_len, "kv_last_page_len"))
        mask = {"kind": "window", "left": int(window_left)} if window_left >= 0 else \
            {"kind": "causal"}
        return self._plan_common([1] * B, kv_indptr, kv_indices, kv_last_page_len, num_qo_heads,
                                 num_kv_heads, head_dim, page_size, q_data_type, kv_data_type,
                                 sm_scale, mask)


class BatchPrefillWrapper(_BatchWrapper):
    """Several new rows per request (prefill / append), FlashInfer's
    BatchPrefillWithPagedKVCacheWrapper habits."""

    def plan(self, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, num_qo_heads,
             num_kv_heads, head_dim, page_size, causal=False, window_left=-1,
             pos_encoding_mode="NONE", logits_soft_cap=None, q_data_type="bf16",
             kv_data_type=None, sm_scale=None):
        """qo_indptr: the new rows of each request (they are appended to its
        pages, which kv_* describe after the append).  causal: bottom-right
        aligned causal mask; otherwise every new row sees every K/V row."""
        if pos_encoding_mode != "NONE":
            raise _bad("E_RANGE", "pos_encoding_mode", "only NONE (apply RoPE to q/k_new first)")
        if logits_soft_cap:
            raise _bad("E_RANGE", "logits_soft_cap", "logits soft-capping is not supported")
        qi = _ints(qo_indptr, "qo_indptr")
        if len(qi) < 2 or qi[0] != 0 or any(b < a for a, b in zip(qi, qi[1:])):
            raise _bad("E_QO_INDPTR", "qo_indptr", "qo_indptr must rise from 0")
        if len(qi) != len(_ints(kv_last_page_len, "kv_last_page_len")) + 1:
            raise _bad("E_QO_INDPTR", "qo_indptr", "qo_indptr has %d entries for %d requests",
                       len(qi), len(_ints(kv_last_page_len, "kv_last_page_len")))
        if window_left >= 0:
            mask = {"kind": "window", "left": int(window_left)}
        else:
            mask = {"kind": "causal"} if causal else {"kind": "none"}
        return self._plan_common([b - a for a, b in zip(qi, qi[1:])], kv_indptr, kv_indices,
                                 kv_last_page_len, num_qo_heads, num_kv_heads, head_dim,
                                 page_size, q_data_type, kv_data_type, sm_scale, mask)
