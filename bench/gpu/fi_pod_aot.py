#!/usr/bin/env python3
"""Write FlashInfer's ninja files for the BatchPOD and POD modules of
bench_mixed.py's configuration, on a machine without torch or a GPU.

The device JIT-compiles these two modules (16 mask-mode TUs + 2 each) far
slower than its wall budget allows; FlashInfer instead loads a module from
<site>/flashinfer/data/aot/<uri>/<uri>.so when that file exists.  This driver
runs FlashInfer's own generators (flashinfer/jit/attention/modules.py
gen_pod_module / gen_batch_pod_module) with the arguments the wrappers'
run() passes for bench_mixed.py's calls, so the URIs, the generated sources
and the nvcc flags are FlashInfer's own.  torch, tvm_ffi (cp312-only here)
and filelock are replaced by stand-ins for the little the generators touch:
dtype objects that only serve as dict keys, the C++11 ABI flag, and
tvm_ffi's include paths.  flashinfer/__init__.py (which needs torch for
real) is never executed: its packages are entered by path.
Usage: fi_pod_aot.py --site DIR   (prints one "uri ninja_file" line per module)
FLASHINFER_CUDA_ARCH_LIST, FLASHINFER_WORKSPACE_BASE and CUDA_HOME are read
by FlashInfer itself; fi_pod_aot.sh sets them.
"""
import argparse
import contextlib
import os
import sys
import types


class StandInDtype:
    """A torch.dtype stand-in: the generators use dtypes only as dict keys."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


def stand_in_torch():
    """torch as far as flashinfer.jit's code generation reads it."""
    torch = types.ModuleType("torch")
    torch.dtype = StandInDtype
    for n in ("float16 bfloat16 float32 float64 float8_e4m3fn float8_e5m2 int8 uint8 int16 "
              "int32 uint32 int64 uint64 bool float4_e2m1fn_x2").split():
        setattr(torch, n, StandInDtype(n))
    torch.half, torch.float, torch.int, torch.long = (torch.float16, torch.float32, torch.int32,
                                                      torch.int64)
    # the device's torch (2.11.0+cu130, mixed-h200-2026-12-01-r4.md) is built
    # with the C++11 ABI, as every torch wheel since 2.6
    torch._C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True)
    torch.version = types.SimpleNamespace(cuda="13.0")
    # FLASHINFER_CUDA_ARCH_LIST is set, so the device query is never reached
    torch.cuda = types.SimpleNamespace(device_count=lambda: 0, is_available=lambda: False)
    torch.Tensor = type("Tensor", (), {})
    torch.device = type("device", (), {})
    return torch


def stand_in_tvm_ffi(site):
    """tvm_ffi's include paths (its package dir in the unpacked site)."""
    tv = types.ModuleType("tvm_ffi")
    base = os.path.join(site, "tvm_ffi")
    tv.libinfo = types.SimpleNamespace(
        find_include_path=lambda: os.path.join(base, "include"),
        find_dlpack_include_path=lambda: os.path.join(base, "3rdparty", "dlpack", "include"),
        find_libtvm_ffi=lambda: os.path.join(base, "lib", "libtvm_ffi.so"))

    def load_module(path):
        raise RuntimeError("tvm_ffi stand-in: this driver only writes ninja files")

    tv.load_module = load_module
    tv.register_object = lambda *a, **k: (lambda c: c)
    tv.Object = object
    return tv


def stand_in_filelock():
    fl = types.ModuleType("filelock")
    fl.FileLock = lambda *a, **k: contextlib.nullcontext()
    return fl


def enter_packages(site):
    """Register flashinfer, flashinfer.jit and flashinfer.jit.attention by
    path, so that importing a submodule runs only that submodule's file."""
    for name in ("flashinfer", "flashinfer.jit", "flashinfer.jit.attention"):
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(site, *name.split("."))]
        sys.modules[name] = m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", required=True, help="unpacked FlashInfer site (has flashinfer/)")
    a = ap.parse_args()
    site = os.path.abspath(a.site)
    sys.path.insert(0, site)
    sys.modules["torch"] = stand_in_torch()
    sys.modules["tvm_ffi"] = stand_in_tvm_ffi(site)
    sys.modules["filelock"] = stand_in_filelock()
    enter_packages(site)
    import torch
    from flashinfer.jit.attention import modules

    # the arguments pod.py's run() passes (PODWithPagedKVCacheWrapper.run and
    # BatchPODWithPagedKVCacheWrapper.run) for bench_mixed.py: bf16 q/kv/o,
    # head dim 128, pos-encoding NONE (0) on both sides, no sliding window
    # (window_left -1), no soft cap (0.0), use_fp16_qk_reduction False, and
    # the plan's indptr dtype int32
    args = (torch.bfloat16, torch.bfloat16, torch.bfloat16, 128, 0, False, False, False,
            torch.int32, 0, False, False)
    for gen in (modules.gen_batch_pod_module, modules.gen_pod_module):
        spec = gen(*args)
        spec.write_ninja()
        print(spec.name, spec.ninja_path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
