"""attn.Pool and the wrappers' view cache without attnd or a GPU:

    python3 client/python/test_pool_host.py

A fake torch (sys.modules) and a fake CUDA driver stand in for the real
ones, so the CUDA branch runs on CI:

- a CUDA pool maps under the pool's device and leaves torch's current
  device as it was (it called torch.cuda.set_device for good before);
- a set-up that fails half-way (a view torch refuses, a shm export whose
  views do not fit its mapping) closes the IPC mapping / the mmap it made
  (both stayed open before), and Pool.create drops the pool on attnd;
- close() after a device error (synchronize raises) still closes the IPC
  mapping (it leaked), and a set-up failure is not replaced by its close's;
- when that pool_drop fails too (attnd gone), the set-up's own failure is
  what Pool.create raises, the drop's noted on it (the drop's replaced it);
- a pool_create reply without an export map drops the pool too (it stayed);
- the wrapper's arena view cache keeps at most VIEW_CACHE_MAX places,
  least recently used out (it grew with every new place before).
"""

import collections
import contextlib
import mmap
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attn  # noqa: E402
import attn.pool as attn_pool  # noqa: E402
import attn.wrappers as attn_wrappers  # noqa: E402


class FakeTorch(types.ModuleType):
    """The few torch calls Pool makes, and the current device they move."""

    def __init__(self):
        super().__init__("torch")
        self.current = 0
        self.fail_as_tensor = False
        self.fail_sync = False  # a device error the context kept (sticky)
        self.bfloat16 = "bfloat16"
        fake = self

        class Device:
            def __init__(self, spec):
                self.index = int(str(spec).split(":")[1])

        class Cuda:
            def set_device(self, dev):
                fake.current = dev.index

            def current_device(self):
                return fake.current

            @contextlib.contextmanager
            def device(self, dev):
                prev = fake.current
                fake.current = dev.index
                try:
                    yield
                finally:
                    fake.current = prev

            def synchronize(self, dev=None):
                if fake.fail_sync:
                    raise RuntimeError("synchronize failed (test)")

        self.device = Device
        self.cuda = Cuda()

    def zeros(self, n, device=None):
        return [0] * n

    def as_tensor(self, obj, device=None):
        if self.fail_as_tensor:
            raise RuntimeError("as_tensor refused (test)")
        return types.SimpleNamespace(cai=obj.__cuda_array_interface__, view=lambda dt: dt)


class FakeDriver:
    def __init__(self, torch):
        self.torch = torch
        self.opened, self.closed = [], []
        self.open_device = None

    def ipc_open(self, handle):
        self.open_device = self.torch.current
        self.opened.append(0x7000_0000)
        return 0x7000_0000

    def ipc_close(self, ptr):
        self.closed.append((ptr, self.torch.current))


class FakeClient:
    def __init__(self, reply):
        self.reply = reply
        self.dropped = []

    def pool_create(self, **kw):
        return dict(self.reply)

    def pool_drop(self, name):
        self.dropped.append(name)
        return {}


GEOM = dict(layers=2, num_pages=4, page_size=4, num_kv_heads=2, head_dim_qk=8, head_dim_vo=8,
            kv_dtype="fp32", layout="NHD")


def export_map(kind="cuda_ipc", **over):
    page = 4 * 2 * 8 * 4
    x = dict(kind=kind, device="cuda:1", handle=b"\0" * 64, offset=256, bytes=2 * 2 * 4 * page,
             k_offset=0, v_offset=4 * page, layer_stride=8 * page, page_stride_k=page,
             row_stride_k=2 * 8 * 4, head_stride_k=8 * 4, page_stride_v=page,
             row_stride_v=2 * 8 * 4, head_stride_v=8 * 4, kv_dtype="fp32", layout="NHD")
    x.update(over)
    return x


def with_fake_torch():
    torch = FakeTorch()
    sys.modules["torch"] = torch
    return torch


def with_a_refused_view(client_cls):
    """Fake torch (refusing the pool's views), driver and a `client_cls` whose
    pool_create reply exports a CUDA pool: a Pool.create that fails half-way."""
    torch = with_fake_torch()
    drv = FakeDriver(torch)
    torch.fail_as_tensor = True
    return torch, drv, client_cls({"pool": "kv", "bytes": 1, "export": export_map()})


def raised(kinds, accepted, fn):
    """The exception of `kinds` that fn() raises; AssertionError(accepted) when
    it returns."""
    try:
        fn()
    except kinds as e:
        return e
    raise AssertionError(accepted)


def test_cuda_pool_keeps_the_current_device():
    torch = with_fake_torch()
    drv = FakeDriver(torch)
    torch.current = 0
    p = attn.Pool(FakeClient({}), "kv", dict(GEOM, pool="kv"), export_map(), driver=drv)
    assert drv.open_device == 1, drv.open_device  # opened in the pool's device's context
    assert torch.current == 0, "Pool changed torch's current device to %d" % torch.current
    assert len(p.k) == 2 and p.k[1].cai["data"][0] == 0x7000_0000 + 256 + 8 * 256
    p.close()
    assert drv.closed == [(0x7000_0000, 1)], drv.closed  # closed where it was opened
    assert torch.current == 0


def test_cuda_setup_failing_half_way_closes_the_mapping():
    torch, drv, client = with_a_refused_view(FakeClient)
    e = raised(RuntimeError, "a refused view was accepted",
               lambda: attn.Pool.create(client, "kv", driver=drv, device="cuda:1", **GEOM))
    assert "as_tensor refused" in str(e)
    assert drv.closed == [(0x7000_0000, 1)], "the IPC mapping leaked: %r" % drv.closed
    assert client.dropped == ["kv"]
    assert torch.current == 0


def test_close_after_a_device_error_still_closes_the_mapping():
    torch = with_fake_torch()
    drv = FakeDriver(torch)
    p = attn.Pool(FakeClient({}), "kv", dict(GEOM, pool="kv"), export_map(), driver=drv)
    torch.fail_sync = True
    e = raised(RuntimeError, "the device error was not reported", p.close)
    assert "synchronize failed" in str(e)
    assert drv.closed == [(0x7000_0000, 1)], "the IPC mapping leaked: %r" % drv.closed
    assert torch.current == 0
    p.close()  # nothing left to close
    assert len(drv.closed) == 1


def test_setup_failure_not_hidden_by_a_failing_close():
    torch = with_fake_torch()
    drv = FakeDriver(torch)
    torch.fail_as_tensor = True
    torch.fail_sync = True
    e = raised(RuntimeError, "a refused view was accepted",
               lambda: attn.Pool(FakeClient({}), "kv", dict(GEOM, pool="kv"), export_map(),
                                 driver=drv))
    assert "as_tensor refused" in str(e), "the close's failure hid the set-up's: %s" % e
    assert drv.closed == [(0x7000_0000, 1)], "the IPC mapping leaked: %r" % drv.closed


class UnreachableClient(FakeClient):
    """attnd went away after its pool_create reply: the drop fails too."""

    def pool_drop(self, name):
        self.dropped.append(name)
        raise attn.AttnError("E_IO", "url", "no reply (test)")


def test_failed_drop_keeps_the_setup_failure():
    torch, drv, client = with_a_refused_view(UnreachableClient)
    e = raised((RuntimeError, attn.AttnError), "a refused view was accepted",
               lambda: attn.Pool.create(client, "kv", driver=drv, device="cuda:1", **GEOM))
    assert isinstance(e, RuntimeError), "the drop's failure hid the set-up's: %s" % e
    assert "as_tensor refused" in str(e), e
    notes = " ".join(getattr(e, "__notes__", []))
    assert "pool_drop" in notes and "no reply (test)" in notes, notes
    assert client.dropped == ["kv"]


def test_reply_without_export_map_drops_the_pool():
    client = FakeClient({"pool": "kv", "bytes": 1})
    e = raised(attn.AttnError, "a reply without an export map was accepted",
               lambda: attn.Pool.create(client, "kv", **GEOM))
    assert (e.code, e.field) == ("E_PROTOCOL", "export"), (e.code, e.field)
    assert client.dropped == ["kv"], "the pool stayed on attnd"


class TrackedMmap(mmap.mmap):
    made = []

    def __new__(cls, *a, **kw):
        m = super().__new__(cls, *a, **kw)
        TrackedMmap.made.append(m)
        return m


def test_shm_setup_failing_half_way_unmaps():
    import numpy  # noqa: F401  (the shm views need it, as on CI)
    name = "/attn-test-pool-%d" % os.getpid()
    path = "/dev/shm" + name
    with open(path, "wb") as f:
        f.truncate(4096)
    saved = attn_pool.mmap
    attn_pool.mmap = types.SimpleNamespace(mmap=TrackedMmap)
    TrackedMmap.made.clear()
    try:
        # layer 1's stores lie past the 4096-byte object: numpy refuses the view
        x = export_map("shm", name=name, bytes=4096, layer_stride=1 << 20)
        raised((TypeError, ValueError), "a view past the mapping was accepted",
               lambda: attn.Pool(FakeClient({}), "kv", dict(GEOM, pool="kv"), x))
        assert len(TrackedMmap.made) == 1
        assert TrackedMmap.made[0].closed, "the shm mapping leaked"
    finally:
        attn_pool.mmap = saved
        os.unlink(path)


def test_view_cache_is_bounded():
    made = []

    class Arena:
        def view(self, offset, shape, dtype):
            made.append(offset)
            return ("view", offset, shape, dtype)

    w = object.__new__(attn_wrappers.BatchDecodeWrapper)
    w.transport = "cuda_ipc"
    w.arena = Arena()
    w._views = collections.OrderedDict()
    cap = getattr(attn.BatchDecodeWrapper, "VIEW_CACHE_MAX", 64)
    assert cap == 64  # the size client/python/README.md documents
    first = w._view(0, (2, 3), "float32")
    for i in range(1, 10 * cap):
        w._view(i * 64, (2, 3), "float32")
        assert w._view(0, (2, 3), "float32") is first  # in use: never evicted
        assert len(w._views) <= cap, len(w._views)
    assert len(w._views) == cap
    n = len(made)
    w._view(64, (2, 3), "float32")  # long evicted: made again
    assert len(made) == n + 1


def main():
    real_torch = sys.modules.get("torch")
    try:
        for name, fn in sorted(globals().items()):
            if name.startswith("test_") and callable(fn):
                fn()
                print("ok", name)
    finally:
        if real_torch is not None:
            sys.modules["torch"] = real_torch
        else:
            sys.modules.pop("torch", None)
    print("test_pool_host: all passed")


if __name__ == "__main__":
    main()
