"""GemmPlan and the fast path of GemmSchedule.run() on a GPU: same results as the careful path.

Every check uses fresh random operands and a poisoned output.
"""

import numpy as np
import pytest

from ptxforge.int4 import pack_int4, random_int4
from ptxforge.schedules.gemm import GemmPlan, Int4Gemm, Int8Gemm
from ptxforge.schedules.gemm import plan as plan_mod
from support.spin import spin_module

pytestmark = pytest.mark.gpu

POISON = -0x5A5A5A5A


def _arch():
    from ptxforge.runtime import device_info
    return device_info().arch


def _int4_operands(m, n, k, rng):
    return (pack_int4(random_int4((m, k), rng, signed=True), signed=True),
            pack_int4(random_int4((n, k), rng, signed=True), signed=True))


def test_two_run_calls_on_torch_tensors_match_the_bound_path_and_numpy():
    torch = pytest.importorskip("torch")
    from ptxforge.schedules.operands import _reader
    _reader.verified.clear()  # as in a fresh process: the first run() itself must teach the fast reader
    g = Int4Gemm.for_shape(32, 512, 1024, target=_arch())
    rng = np.random.default_rng(1)
    a, b = _int4_operands(32, 512, 1024, rng)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    want = g.reference(a, b)
    outs = []
    for _ in range(2):  # the first call is careful and makes the plan; the second takes the fast path
        tc = torch.full((32, 512), POISON, dtype=torch.int32, device="cuda")
        g.run(ta, tb, tc)
        outs.append(tc)
    entry = plan_mod._plans.get(id(g))
    assert entry is not None and entry[0] is g and entry[1], "the first call kept no plan"
    bound_c = torch.full((32, 512), POISON, dtype=torch.int32, device="cuda")
    from ptxforge.schedules.gemm.run import bind_gemm
    bl = bind_gemm(g, ta, tb, bound_c)
    bl.launch()
    torch.cuda.synchronize()
    for tc in outs + [bound_c]:
        assert np.array_equal(tc.cpu().numpy().astype(np.int64), want)


def test_fast_path_follows_new_addresses_and_new_data():
    torch = pytest.importorskip("torch")
    g = Int8Gemm.for_shape(64, 128, 256, target=_arch())
    rng = np.random.default_rng(2)
    for _ in range(3):  # same kind, new tensors each time: the plan must read each call's addresses
        a = rng.integers(-128, 128, (64, 256)).astype(np.int8)
        b = rng.integers(-128, 128, (128, 256)).astype(np.int8)
        tc = torch.full((64, 128), POISON, dtype=torch.int32, device="cuda")
        g.run(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), tc)
        torch.cuda.synchronize()
        assert np.array_equal(tc.cpu().numpy().astype(np.int64), g.reference(a, b))


def test_plan_on_device_buffers_and_its_checks():
    from ptxforge.errors import LaunchError, ValidationError
    from ptxforge.runtime import DeviceBuffer
    g = Int4Gemm.for_shape(96, 160, 512, target=_arch())
    p = g.plan(96, 160, 512)
    assert isinstance(p, GemmPlan)
    rng = np.random.default_rng(3)
    a, b = _int4_operands(96, 160, 512, rng)
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dc = DeviceBuffer.from_host(np.full((96, 160), POISON, np.int32))
    p(da, db, dc)
    assert np.array_equal(dc.to_host().astype(np.int64), g.reference(a, b))
    with pytest.raises(ValidationError, match="shape"):
        p(da, db, DeviceBuffer.empty((96, 161), np.int32))
    with pytest.raises(ValidationError, match="dtype"):
        p(da, db, DeviceBuffer.empty((96, 160), np.float32))
    with pytest.raises(LaunchError, match="GPU array"):
        p(a, db, dc)


def test_plan_captured_into_a_cuda_graph():
    torch = pytest.importorskip("torch")
    g = Int8Gemm.for_shape(128, 256, 512, target=_arch())
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (128, 512)).astype(np.int8)
    b = rng.integers(-128, 128, (256, 512)).astype(np.int8)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tc = torch.full((128, 256), POISON, dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    p = g.plan(128, 256, 512, stream=s)
    with torch.cuda.stream(s):
        p(ta, tb, tc)  # warm: the kernel is loaded and the launch packed before capture
    torch.cuda.synchronize()
    tc.fill_(POISON)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        p(ta, tb, tc)
    torch.cuda.synchronize()
    assert (tc.cpu().numpy() == POISON).all(), "capture must not run the kernel"
    graph.replay()
    torch.cuda.synchronize()
    assert np.array_equal(tc.cpu().numpy().astype(np.int64), g.reference(a, b))


def test_hopper_run_twice_on_torch_tensors_and_its_plan():
    torch = pytest.importorskip("torch")
    from ptxforge.errors import ValidationError
    import importlib
    from ptxforge.schedules.hopper import HopperGemm
    hrun = importlib.import_module("ptxforge.schedules.hopper.run")  # the module, not the run() function
    from ptxforge.schedules.operands import _reader
    _reader.verified.clear()  # as in a fresh process: the first run() itself must teach the fast reader
    g = Int8Gemm.for_shape(200, 384, 1024, target="sm_90a")
    assert isinstance(g, HopperGemm), g
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (200, 1024)).astype(np.int8)
    b = rng.integers(-128, 128, (384, 1024)).astype(np.int8)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    want = a.astype(np.int64) @ b.astype(np.int64).T
    for _ in range(2):  # careful, then through the kept plan
        tc = torch.full((200, 384), POISON, dtype=torch.int32, device="cuda")
        g.run(ta, tb, tc)
        torch.cuda.synchronize()
        assert np.array_equal(tc.cpu().numpy().astype(np.int64), want)
    entry = hrun._plans.get(id(g))
    assert entry is not None and entry[0] is g and entry[1]
    p = g.plan(200, 384, 1024)
    for _ in range(2):  # careful, then as a kind (shapes, element types) the plan checked before
        tc = torch.full((200, 384), POISON, dtype=torch.int32, device="cuda")
        p(ta, tb, tc)
        torch.cuda.synchronize()
        assert np.array_equal(tc.cpu().numpy().astype(np.int64), want)
    with pytest.raises(ValidationError, match="float32|int32"):
        p(ta, tb, torch.zeros((200, 384), dtype=torch.float32, device="cuda"))
    with pytest.raises(ValidationError, match="shape"):
        p(ta, tb, torch.zeros((200, 383), dtype=torch.int32, device="cuda"))
    odd = torch.zeros(200 * 1024 + 1, dtype=torch.int8, device="cuda")[1:].view(200, 1024)  # a kind seen, misaligned
    with pytest.raises(ValidationError, match="16-byte aligned"):
        p(odd, tb, tc)
    # C 4 bytes off an 8-byte boundary: the registers epilogue stores 8-byte pairs into it (a misaligned
    # address would kill the context), so the plan, run()'s kept plan and a careful first call refuse it
    odd_c = torch.zeros(200 * 384 + 1, dtype=torch.int32, device="cuda")[1:].view(200, 384)
    for launch in (p, g.run, Int8Gemm.for_shape(200, 384, 1024, target="sm_90a").run):
        with pytest.raises(ValidationError, match="C at 0x[0-9a-f]+ is not 8-byte aligned"):
            launch(ta, tb, odd_c)
    tc = torch.full((200, 384), POISON, dtype=torch.int32, device="cuda")
    g.run(ta, tb, tc)
    torch.cuda.synchronize()
    assert np.array_equal(tc.cpu().numpy().astype(np.int64), want)


def test_hopper_int4_plan_in_a_cuda_graph():
    torch = pytest.importorskip("torch")
    from ptxforge.schedules.hopper import HopperGemm
    g = Int4Gemm.for_shape(256, 512, 2048, target="sm_90a", hopper=True)
    assert isinstance(g, HopperGemm), g
    rng = np.random.default_rng(6)
    a, b = _int4_operands(256, 512, 2048, rng)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tc = torch.full((256, 512), POISON, dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    p = g.plan(256, 512, 2048, stream=s)
    with torch.cuda.stream(s):
        p(ta, tb, tc)  # encodes the tensor maps of these buffers before capture
    torch.cuda.synchronize()
    tc.fill_(POISON)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        p(ta, tb, tc)
    graph.replay()
    torch.cuda.synchronize()
    assert np.array_equal(tc.cpu().numpy().astype(np.int64), Int4Gemm(target="sm_90").reference(a, b))


def test_hopper_plan_encodes_each_buffer_once_over_a_loop_of_many_weights(monkeypatch):
    """A decode loop cycles every layer's weights through one plan: after the first pass over 80 weight
    buffers a second pass encodes no tensor map again, and every result is exact."""
    torch = pytest.importorskip("torch")
    from ptxforge.runtime.tensormap import TensorMap
    from ptxforge.schedules.hopper import HopperGemm
    g = Int4Gemm.for_shape(32, 256, 512, target="sm_90a", hopper=True)
    assert isinstance(g, HopperGemm), g
    rng = np.random.default_rng(8)
    a, _ = _int4_operands(32, 256, 512, rng)
    bs = [_int4_operands(1, 256, 512, rng)[1] for _ in range(80)]
    ta = torch.from_numpy(a).cuda()
    pool = torch.from_numpy(np.stack(bs)).cuda()  # 80 weight buffers of 256 x 256 bytes, 16-byte aligned
    tc = torch.empty((32, 256), dtype=torch.int32, device="cuda")
    encodes = []
    real = TensorMap.encode
    monkeypatch.setattr(TensorMap, "encode", lambda self: encodes.append(self.base) or real(self))
    p = g.plan(32, 256, 512)
    ref = Int4Gemm(target="sm_90")
    for sweep in range(2):
        before = len(encodes)
        for i in (0, 41, 79) if sweep else range(80):
            tc.fill_(POISON)
            p(ta, pool[i], tc)
            torch.cuda.synchronize()
            assert np.array_equal(tc.cpu().numpy().astype(np.int64), ref.reference(a, bs[i])), (sweep, i)
        if sweep:
            assert len(encodes) == before, "a buffer seen in the first pass was encoded again"
    assert len(set(encodes)) == len(encodes) and len(encodes) >= 80


@pytest.mark.parametrize("path", ["hopper", "mma.sync"])
def test_run_waits_for_the_stream_an_operand_names(path):
    """An operand whose array interface (v3) names another stream: run() on the legacy default stream is
    ordered after that stream's pending work (a long kernel, then the copy that fills A), so it reads A's
    data and not the poison there before; and no plan is kept for such a call (the next one is careful too)."""
    import ptxforge as pf
    from cuda.bindings import driver as d
    import importlib
    m, n, k = 128, 128, 256
    if path == "hopper":
        from ptxforge.schedules.hopper import HopperGemm
        g, plans = HopperGemm("s8"), importlib.import_module("ptxforge.schedules.hopper.run")._plans
    else:
        g, plans = Int8Gemm(target="sm_90"), plan_mod._plans
    rng = np.random.default_rng(13)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64).T
    src, db = pf.DeviceBuffer.from_host(a), pf.DeviceBuffer.from_host(b)
    spin, spun = pf.load(spin_module("order_spin"))["order_spin"], pf.DeviceBuffer.empty(32, np.float32)
    with pf.Stream() as s:  # non-blocking: the legacy default stream does not wait for it by itself
        for _ in range(2):
            da = pf.DeviceBuffer.from_host(np.full((m, k), 0x5A, np.int8))
            c = pf.DeviceBuffer.from_host(np.full((m, n), POISON, np.int32))
            pf.synchronize()
            spin(1, 32, spun, 20_000_000, stream=s)  # tens of milliseconds of work ahead of the copy
            assert not d.cuMemcpyDtoDAsync(da.ptr, src.ptr, m * k, d.CUstream(s.handle))[0]

            class OnStream:
                __cuda_array_interface__ = {"data": (da.ptr, False), "shape": (m, k), "typestr": "|i1",
                                            "version": 3, "stream": s.handle}
            g.run(OnStream(), db, c)
            assert np.array_equal(c.to_host().astype(np.int64), want)
            entry = plans.get(id(g))
            assert entry is None or entry[0] is not g or not entry[1], "a plan was kept for a cross-stream call"


@pytest.mark.parametrize("epilogue", ["registers", "tma"])
def test_run_stores_a_c_of_more_than_2_to_the_32_elements_whole(epilogue):
    """M x N above 2^32 (65536 x 65600 int32: 17 GB of C) through run() on torch tensors, and the rows at both
    ends of C equal numpy, C poisoned first (with 32-bit offsets the last 64 rows, past element 2^32, would have
    landed on the first ones): the register epilogue's plan takes the kernel with 64-bit C offsets (wide_c); the
    TMA store for_shape picks at this K addresses C through its tensor map, in 64 bits by itself."""
    torch = pytest.importorskip("torch")
    import importlib
    hrun = importlib.import_module("ptxforge.schedules.hopper.run")
    m, n, k = 65536, 65600, 64
    assert m * n > 1 << 32 > (m - 64) * n
    from ptxforge.schedules.hopper import choose_hopper
    g = Int8Gemm.for_shape(m, n, k, target="sm_90a") if epilogue == "tma" else \
        choose_hopper(m, n, k, "s8", epilogue="registers")
    assert g.epilogue == epilogue
    rng = np.random.default_rng(17)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tc = torch.full((m, n), POISON, dtype=torch.int32, device="cuda")
    try:
        g.run(ta, tb, tc)
        torch.cuda.synchronize()
        entry = hrun._plans.get(id(g))
        assert entry is not None
        kernels = [p.kernel_cfg for p in entry[1].values()]
        assert [c.wide_c for c in kernels] == [epilogue == "registers"] and kernels[0].epilogue == epilogue
        rows = np.r_[0:64, m - 64:m]
        got = tc[torch.from_numpy(rows).cuda()].cpu().numpy().astype(np.int64)
        assert np.array_equal(got, a[rows].astype(np.int64) @ b.astype(np.int64).T)
    finally:
        del tc
        torch.cuda.empty_cache()


@pytest.mark.parametrize("path", ["hopper", "mma.sync"])
def test_a_freed_buffer_is_refused_by_run_and_plans_after_a_kept_plan(path):
    """run() kept a plan for DeviceBuffer operands; the same call with A freed must not launch on address 0
    (which would end the context): run(), the plan and a fresh schedule's careful path name the freed
    buffer, and the next call on live buffers is exact."""
    from ptxforge.errors import LaunchError
    from ptxforge.runtime import DeviceBuffer
    m, n, k = 128, 128, 256
    if path == "hopper":
        from ptxforge.schedules.hopper import HopperGemm
        make = lambda: HopperGemm("s8")  # noqa: E731
    else:
        make = lambda: Int8Gemm(target="sm_90")  # noqa: E731
    g = make()
    rng = np.random.default_rng(19)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64).T
    db, dc = DeviceBuffer.from_host(b), DeviceBuffer.from_host(np.full((m, n), POISON, np.int32))
    da = DeviceBuffer.from_host(a)
    g.run(da, db, dc)  # careful: keeps the plan
    p = g.plan(m, n, k)
    p(da, db, dc)
    da.free()
    for launch in (g.run, p, make().run):
        with pytest.raises(LaunchError, match="freed"):
            launch(da, db, dc)
    dc = DeviceBuffer.from_host(np.full((m, n), POISON, np.int32))
    g.run(DeviceBuffer.from_host(a), db, dc)
    assert np.array_equal(dc.to_host().astype(np.int64), want)


@pytest.mark.parametrize("path", ["hopper", "mma.sync"])
def test_run_on_cpu_torch_tensors_is_the_numpy_path(path):
    """CPU torch tensors are host operands to run() on either path (for_shape picks one per GPU, so the same
    call must work on both): C comes back as numpy, or is written into a CPU tensor given as C."""
    torch = pytest.importorskip("torch")
    from ptxforge.schedules.hopper import HopperGemm
    m, n, k = 96, 160, 256
    g = HopperGemm("s8") if path == "hopper" else Int8Gemm(target="sm_90")
    rng = np.random.default_rng(23)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64).T
    got = g.run(torch.from_numpy(a), torch.from_numpy(b))
    assert isinstance(got, np.ndarray) and np.array_equal(got.astype(np.int64), want)
    tc = torch.full((m, n), POISON, dtype=torch.int32)
    assert g.run(torch.from_numpy(a), torch.from_numpy(b), tc) is tc
    assert np.array_equal(tc.numpy().astype(np.int64), want)
