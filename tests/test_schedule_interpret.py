"""`interpret()` of the GEMM schedules: the kernel `run` would launch, on the CPU interpreter, against numpy; and
the operand checks `run` and `interpret` share, which refuse bad operands the same way with and without a GPU."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import ptxforge as pf
from ptxforge.errors import ValidationError
from ptxforge.int4 import pack_int4
from ptxforge.schedules.hopper import HopperGemm, random_operands, reference
from ptxforge.schedules.hopper.defaults import SKINNY
from ptxforge.testing import problem_space

MMA_SYNC = {
    "int4 scaled": (pf.Int4Gemm(), (130, 70, 96)),
    "int4 native s4, sm_80": (pf.Int4Gemm(target="sm_80"), (64, 64, 128)),
    "int8 ragged": (pf.Int8Gemm(block_m=32, block_n=64, warps_m=1, warps_n=2), (30, 45, 100)),
    "int8 split K": (pf.Int8Gemm(splits=2, block_m=32, block_n=32, warps_m=1, warps_n=1), (40, 50, 256)),
}

HOPPER = {
    "s8": (HopperGemm("s8", block_n=64, stages=3), (70, 100, 768), 1),
    "s8 split K in the kernel": (HopperGemm("s8", block_n=64, stages=3), (70, 100, 768), 3),
    "s8 split K, second launch": (HopperGemm("s8", block_n=64, stages=3, split_reduce="launch"), (70, 100, 768), 3),
    "s4 skinny, swapped": (HopperGemm("s4", **SKINNY["s4"][0][1]), (20, 100, 3072), 1),
    "bf16": (pf.Bf16Gemm(block_n=64, stages=3), (33, 40, 128), 1),
}


def _int_operands(g, m, n, k, rng):
    if g.bits == 4:
        return pack_int4(rng.integers(-8, 8, (m, k))), pack_int4(rng.integers(-8, 8, (n, k)))
    return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (n, k), dtype=np.int8)


@pytest.mark.parametrize("name", MMA_SYNC)
def test_mma_sync_schedule_interprets_to_numpy(name):
    g, (m, n, k) = MMA_SYNC[name]
    a, b = _int_operands(g, m, n, k, np.random.default_rng(m + n + k))
    c, report = g.interpret(a, b)
    assert report.ok, str(report)
    assert c.shape == (m, n) and c.dtype == np.int32
    want = g.reference(a, b, k)
    assert np.array_equal(c.astype(np.int64), want), f"{name}: {int((c != want).sum())} wrong"


def _bf16_within_bound(cfg, a, b, got, want, k):
    af = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    bf = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.all(np.abs(got - want) <= k * 2.0 ** -21 * (np.abs(af) @ np.abs(bf).T) + 1e-30)


@pytest.mark.parametrize("name", HOPPER)
def test_hopper_schedule_interprets_to_numpy(name):
    cfg, (m, n, k), splits = HOPPER[name]
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(m * n + k))
    c, report = cfg.interpret(a, b, splits=splits)
    assert report.ok, str(report)
    want = reference(cfg, a, b)
    if cfg.operand == "bf16":
        assert c.dtype == np.float32 and _bf16_within_bound(cfg, a, b, c, want, k)
    else:
        assert c.dtype == np.int32 and np.array_equal(c.astype(np.int64), want), f"{name}: {int((c != want).sum())} wrong"


def test_interpret_writes_into_a_given_c_and_every_element():
    """C given: written in place and returned; a poisoned C comes back with no poison left (every element stored)."""
    cfg, (m, n, k), _ = HOPPER["s8"]
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(5))
    c = np.full((m, n), -7, np.int32)
    got, _ = cfg.interpret(a, b, c)
    assert got is c and np.array_equal(c.astype(np.int64), reference(cfg, a, b))
    g, (m, n, k) = MMA_SYNC["int8 ragged"]
    a, b = _int_operands(g, m, n, k, np.random.default_rng(6))
    c = np.full((m, n), -0x5A5A5A5B, np.int32)
    got, _ = g.interpret(a, b, c)
    assert got is c and np.array_equal(c.astype(np.int64), g.reference(a, b, k))


def test_interpret_takes_strided_and_fortran_operands_as_run_does():
    """run() copies numpy operands in as C-contiguous arrays; interpret() takes the same views (every other
    column of a wider array, a Fortran-ordered copy) and gives the same C."""
    for g, (m, n, k) in ((HOPPER["s8"][0], HOPPER["s8"][1]), MMA_SYNC["int8 ragged"]):
        rng = np.random.default_rng(15)
        wide = rng.integers(-128, 128, (m, 2 * k)).astype(np.int8)
        b = np.asfortranarray(rng.integers(-128, 128, (n, k)).astype(np.int8))
        a = wide[:, ::2]
        assert not a.flags.c_contiguous and not b.flags.c_contiguous
        c, report = g.interpret(a, b)
        assert report.ok, str(report)
        assert np.array_equal(c.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64).T), g.describe()


def test_interpret_in_the_warpgroup_ahead_order():
    """The skinny s4 kernel with each consumer warpgroup running ahead of the others as far as its barriers let
    it: the same C, no findings."""
    cfg, (m, n, k), _ = HOPPER["s4 skinny, swapped"]
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(9))
    c, report = cfg.interpret(a, b, order="last-warpgroup-first")
    assert report.ok, str(report)
    assert np.array_equal(c.astype(np.int64), reference(cfg, a, b))


_DRAWN = [pf.Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1), HopperGemm("s8", block_n=64, stages=3)]


@pytest.mark.parametrize("g", _DRAWN, ids=lambda g: g.kernel_name)
def test_interpret_matches_the_reference_on_drawn_problems(g):
    """Shapes and data drawn by the schedule's problem space (the package strategy `problem_space(g).problems()`):
    interpret() equals the space's reference for each."""
    space = problem_space(g, max_m=70, max_n=70)

    @settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(space.problems())
    def one(p):
        arrays = p.fresh_arrays()
        a, b = arrays["a"], arrays["b"]
        c, report = g.interpret(a, b, k=p.k)
        assert report.ok, str(report)
        want = g.reference(a, b, p.k) if isinstance(g, pf.GemmSchedule) else reference(g, a, b)
        assert np.array_equal(c.astype(np.int64), want), f"{p}: {int((c != want).sum())} wrong"

    one()


@pytest.mark.parametrize("g", [HopperGemm("s4", block_n=64, block_k_bytes=256, stages=2), pf.Int4Gemm()],
                         ids=["hopper", "mma.sync"])
def test_bad_operands_are_refused_before_any_gpu_is_needed(g):
    """run() and interpret() check numpy operands before touching a device: the same ValidationError on a machine
    with or without a GPU."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (64, 64), dtype=np.uint8)
    b = rng.integers(0, 256, (64, 64), dtype=np.uint8)
    for call in (g.run, g.interpret):
        with pytest.raises(ValidationError, match="float32|f32"):
            call(a.astype(np.float32), b)
        with pytest.raises(ValidationError, match="rows"):
            call(a, b[:, :32])
        with pytest.raises(ValidationError, match="2-D"):
            call(a[0], b)
        with pytest.raises(ValidationError, match="K=100"):
            call(a, b, k=100)
        with pytest.raises((ValidationError, pf.LaunchError), match="list"):
            call(a.tolist(), b)
    for call in (g.run, g.interpret):
        with pytest.raises(ValidationError, match="C must be"):
            call(a, b, np.zeros((64, 64), np.float32))
        with pytest.raises(ValidationError, match="C must be"):
            call(a, b, np.zeros((64, 63), np.int32))


def test_a_k_short_of_the_rows_is_refused():
    """K must fill the operand rows: the tensor maps are built over K's row length, so a shorter K would read
    rows at the wrong stride and a longer one past their end."""
    cfg = HopperGemm("s8", block_n=64, stages=3)
    a, b = random_operands(cfg, 64, 64, 256, np.random.default_rng(1))
    for k in (128, 512):
        with pytest.raises(ValidationError, match=f"K={k} does not fill"):
            cfg.interpret(a, b, k=k)


def test_a_c_of_2_to_the_32_elements_takes_64_bit_offsets():
    """The registers epilogue forms C's element offsets in 32 bits; a C of 2^32 or more elements (a 64 K-token
    batch against a 128 K vocabulary, say) would wrap onto its first rows.  for_launch (so every plan) takes the
    `wide_c` kernel from M x N there (and keeps it where asked for), the TMA epilogue (coordinates) never needs
    it, and a split whose second launch counts C's elements in 32 bits is refused by name."""
    from ptxforge.schedules.hopper.splitk import check_reduce
    big, small = 65536 * 65600, 65535 * 65537
    for g in (HopperGemm("s8"), HopperGemm("bf16", swap_ab=True, block_n=32),
              pf.Bf16Gemm.for_shape(65536, 131072, 4096)):
        g.check_problem(65536, 65600, 4096)
        assert g.for_launch(65600, 1, big).wide_c and not g.for_launch(65600, 1, small).wide_c
        assert "_wc" in g.for_launch(65600, 1, big).kernel_name
        assert HopperGemm("s8", wide_c=True).for_launch(64, 1, 64 * 64).wide_c  # asked for: kept
    tma = HopperGemm("s8", epilogue="tma", block_n=128, stages=3)
    assert tma.for_launch(65600, 1, big) == tma.for_launch(65600, 1)
    launch = HopperGemm("s8", split_reduce="launch")
    check_reduce(launch, 2, small)
    check_reduce(HopperGemm("s8"), 2, big)  # the in-kernel reduction's workspace is addressed in 64 bits
    with pytest.raises(ValidationError, match="counts them in 32 bits"):
        check_reduce(launch, 2, big)


@pytest.mark.parametrize("cfg", [HopperGemm("s8", block_n=64, stages=3, wide_c=True),
                                 HopperGemm("s8", block_n=64, stages=3, wide_c=True, odd_n=True),
                                 HopperGemm("s8", swap_ab=True, block_n=32, stages=3, wide_c=True)],
                         ids=lambda g: g.kernel_name)
def test_the_64_bit_c_offsets_store_every_element_where_it_belongs(cfg):
    """The wide_c kernels on the interpreter at a ragged shape: C equals numpy, every element stored once."""
    from ptxforge.schedules.hopper.interp_launch import interpreter_launch
    m, n, k = (40, 130, 256) if cfg.swap_ab else (70, 99 if cfg.odd_n else 100, 256)
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(21))
    c = np.full((m, n), -7, np.int32)
    args, grid, shared = interpreter_launch(cfg, a, b, c, k)
    kernel = cfg.for_launch(m if cfg.swap_ab else n, 1)
    assert kernel.wide_c and "mad.lo.u64" in str(kernel.module)
    report = pf.interp.run(kernel.module, grid=grid, block=cfg.threads, shared=shared, args=args)
    assert report.ok, str(report)
    assert np.array_equal(c.astype(np.int64), reference(cfg, a, b))


def test_splits_must_be_a_positive_int():
    cfg = HopperGemm("s8", block_n=64, stages=3)
    a, b = random_operands(cfg, 64, 64, 256, np.random.default_rng(1))
    for bad in (0, 1.5, True):
        with pytest.raises(ValidationError, match="splits"):
            cfg.interpret(a, b, splits=bad)


def test_c16_with_a_second_launch_refuses_a_k_split():
    cfg = HopperGemm("bf16", block_n=64, stages=3, epilogue="tma", c16=True, split_reduce="launch")
    a, b = random_operands(cfg, 64, 64, 384, np.random.default_rng(2))
    with pytest.raises(ValidationError, match="c16"):
        cfg.interpret(a, b, splits=3)


def test_the_hopper_schedules_are_exported_at_the_top():
    assert pf.HopperGemm is HopperGemm and pf.Bf16Gemm is pf.schedules.Bf16Gemm
    assert isinstance(pf.Int8Gemm.for_shape(128, 8192, 8192, "sm_90a"), pf.HopperGemm)


@pytest.mark.gpu
def test_a_plan_refuses_a_k_that_does_not_fill_the_device_rows():
    """On device operands too: prepare() with a K shorter or longer than the rows is refused before any map is
    made (a longer K would have read past every row)."""
    from ptxforge.runtime import DeviceBuffer
    from ptxforge.schedules.hopper import prepare
    cfg = HopperGemm("s8", block_n=64, stages=3)
    a, b = random_operands(cfg, 64, 64, 256, np.random.default_rng(3))
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dc = DeviceBuffer.empty((64, 64), np.int32)
    for k in (128, 512):
        with pytest.raises(ValidationError, match=f"K={k} does not fill"):
            prepare(cfg, da, db, dc, k=k)
    prepare(cfg, da, db, dc, k=256).launch()
    assert np.array_equal(dc.to_host().astype(np.int64), reference(cfg, a, b))


@pytest.mark.gpu
def test_interpret_agrees_with_the_gpu():
    """The same operands through run() on the GPU and interpret() on the CPU give the same C: bit for bit for
    the integer GEMMs; for bf16 both within the bound of numpy's C (the tensor cores' f32 sums need not round
    as the interpreter's do)."""
    for name in ("s8", "s4 skinny, swapped", "bf16", "s8 split K, second launch"):
        cfg, (m, n, k), splits = HOPPER[name]
        a, b = random_operands(cfg, m, n, k, np.random.default_rng(11))
        got_gpu = cfg.run(a, b, splits=splits)
        got_cpu, report = cfg.interpret(a, b, splits=splits)
        assert report.ok, str(report)
        if cfg.operand == "bf16":
            want = reference(cfg, a, b)
            assert _bf16_within_bound(cfg, a, b, got_gpu, want, k) and _bf16_within_bound(cfg, a, b, got_cpu, want, k)
        else:
            assert np.array_equal(got_gpu, got_cpu), name
    g, (m, n, k) = MMA_SYNC["int8 split K"]
    a, b = _int_operands(g, m, n, k, np.random.default_rng(12))
    assert np.array_equal(g.run(a, b), g.interpret(a, b)[0])



def test_the_int4_gemm_example_runs_and_is_exact(capsys):
    """examples/int4_gemm.py: on the GPU the whole ragged problem, without one the same kernel through
    `interpret` at a smaller shape; exact either way."""
    from support.examples import load_example
    assert load_example("int4_gemm").main(["--m", "150", "--n", "130", "--k", "200"]) == 0
    assert "exact match with numpy" in capsys.readouterr().out


@pytest.fixture
def no_driver(monkeypatch):
    """A CUDA driver that fails to load, stood in for (so that a test of it runs on a GPU machine too)."""
    from ptxforge.errors import ToolchainMissing
    from ptxforge.runtime import driver as D

    def missing():
        raise ToolchainMissing("the CUDA driver library is not loadable: (stood in)")
    monkeypatch.setattr(D, "_state", None)
    monkeypatch.setattr(D, "_init", missing)
    monkeypatch.setattr(D, "context", missing)


@pytest.mark.parametrize("g", [HopperGemm("s8", block_n=64, stages=3), pf.Int8Gemm()], ids=lambda g: type(g).__name__)
def test_run_without_a_driver_points_at_interpret(g, no_driver):
    """run() on numpy operands where no CUDA driver loads: the error names the missing driver and says that
    interpret() runs the same kernel on the CPU."""
    from ptxforge.errors import ToolchainMissing
    a = np.ones((64, 128), np.int8)
    with pytest.raises(ToolchainMissing, match=rf"not loadable: \(stood in\); without a GPU, {type(g).__name__}"
                                               r"\.interpret\(a, b\) runs this kernel on the CPU interpreter"):
        g.run(a, a)


class _HostDLPack:
    """A host-side DLPack producer (as a CPU torch tensor is one) over a numpy array."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kw):
        return self.array.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_host_dlpack_operands_are_read_as_numpy(no_driver):
    """A CPU torch tensor (here a stand-in host DLPack producer) is a host operand to HopperGemm.run, as to
    GemmSchedule.run: read as a numpy view of its memory and taken the numpy way (which, with no driver, ends in
    the missing-driver error, not in 'must be a GPU array')."""
    from ptxforge.errors import ToolchainMissing
    from ptxforge.schedules.operands import host_array
    a = np.arange(12, dtype=np.int8).reshape(3, 4)
    got = host_array(_HostDLPack(a))
    assert isinstance(got, np.ndarray) and np.shares_memory(got, a) and got.flags.writeable
    assert host_array(a) is a
    not_host = object()
    assert host_array(not_host) is not_host
    ops = np.ones((64, 128), np.int8)
    for g in (HopperGemm("s8", block_n=64, stages=3), pf.Int8Gemm()):
        with pytest.raises(ToolchainMissing, match="stood in"):
            g.run(_HostDLPack(ops), _HostDLPack(ops))


def test_interpret_takes_host_dlpack_operands_as_run_does():
    """A CPU tensor (a host DLPack producer) is a host operand to interpret() of both schedule families, as to
    run(): the same C as from the numpy arrays behind it, written into a C given that way."""
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (16, 64)).astype(np.int8)
    b = rng.integers(-128, 128, (64, 64)).astype(np.int8)
    for g in (HopperGemm("s8", block_n=64, stages=3), pf.Int8Gemm(block_m=16, block_n=64, warps_m=1, warps_n=2)):
        want, _ = g.interpret(a, b)
        c = np.full((16, 64), -7, np.int32)
        got, _ = g.interpret(_HostDLPack(a), _HostDLPack(b), _HostDLPack(c))
        assert np.array_equal(got, want) and np.array_equal(c, want)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_a_read_only_c_is_refused_not_left_unwritten(target):
    """A read-only C would be taken as input only (never written back), leaving the caller's zeros beside a
    clean report; both schedule families refuse it by name, and a writeable C of the same values is filled."""
    rng = np.random.default_rng(9)
    a = pack_int4(rng.integers(-8, 8, (40, 256)).astype(np.int8))
    b = pack_int4(rng.integers(-8, 8, (72, 256)).astype(np.int8))
    g = pf.Int4Gemm.for_shape(40, 72, 256, target=target)
    c = np.zeros((40, 72), np.int32)
    c.setflags(write=False)
    with pytest.raises(ValidationError, match="C is a read-only numpy array"):
        g.interpret(a, b, c)
    writeable = c.copy()
    got, report = g.interpret(a, b, writeable)
    assert got is writeable and np.array_equal(writeable, g.reference(a, b))
