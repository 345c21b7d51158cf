"""A stand-in for cuda.bindings' driver module, for GPU-free tests of the runtime's GPU paths.

`StandIn` answers every ``cu*`` call as a test scripts it (``answers[name]``: a tuple, or a function of the
call's arguments) and records each call by name; its enums and types are the real ones.  `MemoryStandIn`
also keeps device memory as host bytes (allocations, copies both ways, memsets), so a launch's staging can be
followed byte by byte.  The `drv` and `mem_drv` fixtures install them with ptxforge's state initialized as if
on an H200 whose context handle is `OURS`; test modules import the fixtures they use.

Import this only after ``pytest.importorskip("cuda.bindings.driver")``.
"""

import ctypes
import gc
import weakref

import pytest
from cuda.bindings import driver as real

from ptxforge.runtime import cache as C
from ptxforge.runtime import driver as D
from ptxforge.runtime import faults as F
from ptxforge.runtime import kernel as K
from ptxforge.runtime import loader as L
from ptxforge.runtime.launch import LaunchLimits

#: ptxforge's context handle on the stand-in.
OURS = 0xC0FFEE


class StandIn:
    """cuda.bindings.driver with scripted answers; records every call by name."""

    CUpointer_attribute = real.CUpointer_attribute
    CUmemorytype = real.CUmemorytype
    CUjit_option = real.CUjit_option
    CUjit_target = real.CUjit_target
    CUfunction_attribute = real.CUfunction_attribute
    CUevent_flags = real.CUevent_flags
    CUlaunchConfig = real.CUlaunchConfig
    CUlaunchAttribute = real.CUlaunchAttribute
    CUlaunchAttributeID = real.CUlaunchAttributeID
    CUdevice_attribute = real.CUdevice_attribute

    def __init__(self):
        self.calls = []
        self.current = 0
        self.answers = {}

    def CUstream(self, h=0):
        return h

    def CUdeviceptr(self, p=0):
        return p

    def _answer(self, name, default, *args):
        self.calls.append((name, args))
        a = self.answers.get(name, default)
        return a(*args) if callable(a) else a

    def cuGetErrorName(self, err):
        raise RuntimeError("no names here")

    cuGetErrorString = cuGetErrorName

    def cuCtxGetCurrent(self):
        self.calls.append(("cuCtxGetCurrent", ()))
        return (0, self.current)

    def cuCtxSetCurrent(self, ctx):
        self.calls.append(("cuCtxSetCurrent", (int(ctx),)))
        self.current = int(ctx)
        return (0,)

    def names(self) -> list:
        """The names of the calls made so far, in order."""
        return [name for name, _ in self.calls]

    def __getattr__(self, name):
        if name.startswith("cu"):
            return lambda *a: self._answer(name, (0, 0), *a)
        if name.startswith("CU"):  # the real enums and types
            return getattr(real, name)
        raise AttributeError(name)


class MemoryStandIn(StandIn):
    """A `StandIn` whose device memory is host bytes: cuMemAlloc hands out addresses of `mem` blocks (filled
    with 0xAA, so an uninitialized read shows), copies and memsets move real bytes.  Kernels do not run:
    `kernel_body`, when set, is called at each cuLaunchKernel with the stand-in and the launch's arguments."""

    def __init__(self):
        super().__init__()
        self.mem = {}
        self.next = 0x10000
        self.kernel_body = None
        limits = {"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK": 1024,
                  "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 49152}
        self.answers["cuFuncGetAttribute"] = lambda attr, f: (0, limits.get(getattr(attr, "name", ""), 0))

    def cuMemAlloc(self, n):
        p = self.next
        self.next += (int(n) + 255) // 256 * 256 + 256
        self.mem[p] = bytearray(b"\xAA" * int(n))
        self.calls.append(("cuMemAlloc", (n,)))
        return (0, p)

    def cuMemFree(self, p):
        self.mem.pop(int(p), None)
        self.calls.append(("cuMemFree", (p,)))
        return (0,)

    def cuMemcpyHtoD(self, dst, src, n):
        self.mem[int(dst)][:n] = ctypes.string_at(src, n)
        self.calls.append(("cuMemcpyHtoD", (dst, src, n)))
        return (0,)

    def cuMemcpyDtoH(self, dst, src, n):
        ctypes.memmove(dst, bytes(self.mem[int(src)][:n]), n)
        self.calls.append(("cuMemcpyDtoH", (dst, src, n)))
        return (0,)

    def cuMemsetD8(self, p, value, n):
        self.mem[int(p)][:n] = bytes([value]) * n
        self.calls.append(("cuMemsetD8", (p, value, n)))
        return (0,)

    def cuLaunchKernel(self, *args):
        self.calls.append(("cuLaunchKernel", args))
        if self.kernel_body is not None:
            self.kernel_body(self, *args)
        return (0,)

    def array(self, ptr, dtype, count):
        """`count` elements of `dtype` of the device memory at `ptr` (a block's start), as numpy (a copy)."""
        import numpy as np
        return np.frombuffer(bytes(self.mem[int(ptr)]), dtype=dtype, count=count).copy()


def pointer_attributes(ctx, dev, mtype, start=0, size=0):
    """The stand-in's answer to cuPointerGetAttributes: context, device, memory type and the allocation's range
    (0, 0: none known), as many values as asked for."""
    return lambda n, attrs, ptr: (0, [ctx, dev, mtype, start, size][:n])


def stand_in_state(monkeypatch, sd):
    """Install `sd` as the driver, with ptxforge's state as if on an H200 whose context is OURS."""
    info = D.DeviceInfo(ordinal=0, name="stand-in", compute_capability=(9, 0), sm_count=132, total_memory=1 << 30,
                        driver_version=13000, limits=LaunchLimits(max_shared_optin=232448), driver_build="570.1")
    monkeypatch.setattr(D, "_api", sd)
    monkeypatch.setattr(D, "_state", D._Context(0, OURS, info, 0))
    monkeypatch.setattr(K, "_stream_objs", {})  # the stand-in's stream objects must not outlive it
    F.reset_for_tests()
    C.clear_memory_cache()
    return sd


def _track_modules(monkeypatch) -> list:
    """Weak references to every LoadedModule made from now on (modules sit in reference cycles with their
    kernels, so only the cycle collector unloads them)."""
    made = []
    init = L.LoadedModule.__init__

    def tracked(self, *a, **kw):
        init(self, *a, **kw)
        made.append(weakref.ref(self))
    monkeypatch.setattr(L.LoadedModule, "__init__", tracked)
    return made


def _done_with(made) -> None:
    """After a test on a stand-in: forget its modules and, when one it made is still uncollected, collect, so
    that their finalizers run on this stand-in and not on a later test's."""
    C.clear_memory_cache()
    if any(r() is not None for r in made):
        gc.collect()
    F.reset_for_tests()


@pytest.fixture
def drv(monkeypatch):
    """The stand-in driver, with ptxforge's state initialized as if on an H200 (context handle OURS)."""
    sd = stand_in_state(monkeypatch, StandIn())
    made = _track_modules(monkeypatch)
    yield sd
    _done_with(made)


@pytest.fixture
def mem_drv(monkeypatch):
    """A `MemoryStandIn` installed like `drv`, with ours current."""
    sd = stand_in_state(monkeypatch, MemoryStandIn())
    sd.current = OURS
    made = _track_modules(monkeypatch)
    yield sd
    _done_with(made)


def kernel_of(ptx_params: str, name: str = "k", monkeypatch=None):
    """A KernelFunction of an entry declared with `ptx_params` (the text between its parentheses), over a
    stand-in module (loaded, handle 1) whose kernel handle is 0x1234; needs the stand-in installed."""
    import types
    from ptxforge.runtime.loader import parse_entries
    ptx = f".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry {name}({ptx_params}) {{ ret; }}"
    e = parse_entries(ptx)[0]
    module = types.SimpleNamespace(_handle=1, source_module=None)
    return K.KernelFunction(module, name, 0x1234, e.params, e.block_limit)
