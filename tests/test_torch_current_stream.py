"""A launch given no ``stream=`` whose operands are torch CUDA tensors goes to torch's current stream on their
device (`runtime.streams.current_stream_of`), as torch's own operations on them do: inside
``with torch.cuda.stream(s):`` a GEMM, a TileCopy or a plain kernel launch is ordered on `s` after the work that
made its operands.  Checked here with a stand-in for torch (its Tensor type and current-stream query) and for the
driver; ``tests/test_torch_current_stream_gpu.py`` holds it to torch and a GPU."""

import importlib
import sys
import types

import numpy as np
import pytest

from ptxforge.runtime import streams as S

real = pytest.importorskip("cuda.bindings.driver")
from support.driver_standin import OURS, kernel_of, mem_drv, pointer_attributes  # noqa: E402,F401  (mem_drv: a fixture)

SIDE = 0x5_1DE  # the stand-in torch's current stream on device 0


@pytest.fixture
def torch_standin(monkeypatch):
    """A module named torch whose Tensor type is the stand-in tensors' base and whose current stream on device d
    is `current[d]` (SIDE on device 0, the legacy default stream on device 1)."""
    torch = types.ModuleType("torch")

    class Tensor:
        """A CUDA (or, with device -1, CPU) tensor: an array interface over a stand-in device address."""

        def __init__(self, shape, typestr, ptr=0x7000_0000, device=0):
            self.shape, self.device_index = shape, device
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                             "version": 2}

        def get_device(self):
            return self.device_index
    current = {0: SIDE, 1: 0}
    torch.Tensor, torch.current = Tensor, current
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda d: current[d])
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(S, "_CURRENT_QUERY", {})
    return torch


def test_current_stream_of_names_torch_s_stream_for_a_cuda_tensor_only(torch_standin):
    t = torch_standin.Tensor
    assert S.current_stream_of((t((4,), "<i4"),)) == SIDE
    assert S.current_stream_of((None, 3, np.zeros(4), t((4,), "<i4"))) == SIDE  # the first tensor decides
    assert S.current_stream_of((t((4,), "<i4", device=1), t((4,), "<i4"))) == 0
    assert S.current_stream_of((t((4,), "<i4", device=-1),)) is None  # a CPU tensor: no stream of torch's
    assert S.current_stream_of((np.zeros(4), 7, None)) is None
    assert S.current_stream_of(()) is None


def test_without_torch_nothing_is_asked(monkeypatch):
    """Without torch imported no array is a tensor: the answer is None, and a type once seen is not asked again."""
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(S, "_CURRENT_QUERY", {})
    assert S.current_stream_of((np.zeros(2), 5)) is None
    assert S._CURRENT_QUERY == {np.ndarray: None, int: None}


def test_the_public_query_serves_when_torch_has_no_raw_one(torch_standin):
    """A torch without the raw query: torch.cuda.current_stream(device).cuda_stream answers."""
    del torch_standin._C._cuda_getCurrentRawStream
    torch_standin.cuda = types.SimpleNamespace(
        current_stream=lambda d: types.SimpleNamespace(cuda_stream=0xAB0 + d))
    assert S.current_stream_of((torch_standin.Tensor((4,), "<i4"),)) == 0xAB0




def _launch_streams(drv):
    return [args[8] for name, args in drv.calls if name == "cuLaunchKernel"]


def test_a_plain_launch_on_torch_tensors_goes_to_torch_s_current_stream(mem_drv, torch_standin):
    """KernelFunction launches and binds given no stream use torch's current stream; a stream passed wins, and
    arguments of no library with a current stream keep the legacy default stream."""
    drv = mem_drv
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE))
    fn = kernel_of(".param .u64 x, .param .u32 n")
    x = torch_standin.Tensor((4,), "<i4")
    fn(1, 32, x, 4)
    fn(1, 32, x, 4, stream=0x77)
    fn(1, 32, 0x7000_0000, 4)
    fn.bind(1, 32, x, 4).launch()
    assert _launch_streams(drv) == [SIDE, 0x77, 0, SIDE]


@pytest.mark.parametrize("family", ["mma_sync", "wgmma"])
def test_gemm_run_s_careful_path_hands_torch_s_current_stream_to_its_launch(monkeypatch, torch_standin, family):
    """A call no kept plan takes resolves the stream before it launches (and keeps its plan under that stream):
    before, such a call went to the legacy default stream, unordered with `s`."""
    from ptxforge.schedules import Int8Gemm
    from ptxforge.schedules.gemm import run as grun
    from ptxforge.schedules.hopper import config as hconfig
    seen = []
    if family == "wgmma":
        g = Int8Gemm.for_shape(64, 64, 64, target="sm_90a", hopper=True)
        monkeypatch.setattr(hconfig._run, "launch_kept", lambda *args: False)
        monkeypatch.setattr(hconfig._run, "run_device", lambda cfg, a, b, c, k, splits, stream: seen.append(stream))
    else:
        g = Int8Gemm.for_shape(64, 64, 64, target="sm_90", hopper=False)
        monkeypatch.setattr(grun, "fast_run", lambda *args: None)
        def stop(x, what, stream):
            seen.append(stream)
            raise _Stop
        monkeypatch.setattr(grun, "_describe", stop)
    a, b, c = _gemm_operands(torch_standin)
    for stream in (None, 0x99):
        try:
            g.run(a, b, c, stream=stream)
        except _Stop:  # (the mma.sync careful path stopped at its first operand read: the stream is known)
            pass
    assert seen == [SIDE, 0x99]


class _Stop(Exception):
    """Ends a careful path once it has shown the stream it launches on."""


def _gemm_operands(torch_standin):
    """A [64, 64] int8, B [64, 64] int8 and C [64, 64] int32 stand-in tensors on device 0."""
    t = torch_standin.Tensor
    return t((64, 64), "|i1"), t((64, 64), "|i1", 0x7100_0000), t((64, 64), "<i4", 0x7200_0000)


@pytest.mark.parametrize("family", ["mma_sync", "wgmma"])
def test_gemm_run_s_kept_plans_are_looked_up_under_torch_s_current_stream(monkeypatch, torch_standin, family):
    """The per-call path keys its plans by the launch stream: given no stream, torch's current one (a plan kept
    for the legacy stream is not taken inside another stream's context, nor the other way round)."""
    from ptxforge.schedules import Int8Gemm
    from ptxforge.schedules import operands as ops
    from ptxforge.schedules.gemm import plan as gplan
    hrun = importlib.import_module("ptxforge.schedules.hopper.run")  # (the package exports a function run)
    a, b, c = _gemm_operands(torch_standin)
    for x, dt in ((a, "int8"), (c, "int32")):
        x.dtype, x.requires_grad = dt, False
    b.dtype, b.requires_grad = "int8", False
    for x in (a, b, c):
        x.is_contiguous = lambda: True
        x.data_ptr = (lambda p: lambda: p)(x.__cuda_array_interface__["data"][0])
    monkeypatch.setattr(ops._reader, "verified", {(type(a), "int8"), (type(a), "int32")})
    monkeypatch.setattr(ops._reader, "device", 0)
    launched = []

    class Kept:
        _c_align = 4

        def __init__(self, stream):
            self.stream = stream

        def launch_pointers(self, *ptrs):
            launched.append(self.stream)
    kinds = (a.shape, "int8", b.shape, "int8", c.shape, "int32")
    if family == "wgmma":
        g = Int8Gemm.for_shape(64, 64, 64, target="sm_90a", hopper=True)
        plans = {kinds + (None, None, st): Kept(st) for st in (0, SIDE)}
        monkeypatch.setattr(hrun, "_plans", {id(g): (g, plans)})
        go = lambda **kw: hrun.launch_kept(g, a, b, c, None, None, kw.get("stream"))  # noqa: E731
    else:
        g = Int8Gemm.for_shape(64, 64, 64, target="sm_90", hopper=False)
        plans = {kinds + (None, 256, 256, 0, st): Kept(st) for st in (0, SIDE)}
        monkeypatch.setattr(gplan, "_plans", {id(g): (g, plans)})
        go = lambda **kw: gplan.fast_run(g, a, b, c, None, kw.get("stream"))  # noqa: E731
    assert go() and go(stream=0)
    torch_standin.current[0] = 0  # outside the side stream's context
    assert go()
    assert launched == [SIDE, 0, 0]


@pytest.mark.parametrize("kind", ["cluster", "dependent"])
def test_cluster_and_dependent_launches_on_torch_tensors_go_to_torch_s_current_stream(monkeypatch, torch_standin,
                                                                                      kind):
    """launch_cluster and launch_dependent resolve the stream as a plain launch does before they prepare it."""
    from ptxforge.runtime import cluster, dependent
    from ptxforge.runtime import kernel as K
    seen = []
    monkeypatch.setattr(K, "launch_gpu_args", lambda fn, prepare, args, what: prepare())
    if kind == "cluster":
        monkeypatch.setattr(cluster, "cluster_launch_config", lambda *a, stream, **kw: seen.append(stream))
        go = lambda *args, **kw: cluster.launch_cluster("fn", 2, 32, 2, *args, **kw)  # noqa: E731
    else:
        monkeypatch.setattr(dependent, "dependent_launch_config", lambda *a, stream, **kw: seen.append(stream))
        go = lambda *args, **kw: dependent.launch_dependent("fn", 2, 32, *args, **kw)  # noqa: E731
    x = torch_standin.Tensor((4,), "<i4")
    go(x, 4)
    go(x, 4, stream=0x31)
    go(0x7000_0000, 4)
    assert seen == [SIDE, 0x31, None]
