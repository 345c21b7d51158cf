"""Split-K for the mma.sync GEMM on the CPU: assembly without spills, exact results on the
interpreter for small ragged problems and drawn split factors (the arrival counters left zero
for the next launch), the launch plumbing, and what for_shape picks for skinny problems."""

import dataclasses
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxforge.errors import ValidationError
from ptxforge.isa.targets import Target
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
from ptxforge.schedules.gemm.splitk import choose_splits
from ptxforge.schedules.gemm.tuning import splitk_space  # noqa: F401
from ptxforge.testing.interp_strategies import seeds
from ptxforge.testing.splitk_strategies import splitk_schedules
from support.gemm_interp import operands, run_split


SKINNY = Int4Gemm(block_m=32, block_n=32, block_k=64, warps_m=1, warps_n=2, stages=3, raster_group=1, splits=3)


@pytest.mark.parametrize("m, n, k", [(20, 40, 200), (33, 24, 640), (1, 9, 62), (32, 64, 2)])
def test_split_k_ragged_problems_on_the_interpreter(m, n, k):
    # K=200 with 3 splits of 2 k-tiles: the third split is empty; K=62 narrows the copies; K=2 is one byte
    run_split(SKINNY, m, n, k, seed=m + n + k)


@pytest.mark.parametrize("m, n, k", [(20, 40, 200), (1, 9, 62)])
def test_leader_handshake_and_l2_prefetch_on_the_interpreter(m, n, k):
    run_split(dataclasses.replace(SKINNY, splitk_sync="leader", l2_prefetch=256), m, n, k, seed=m * n + k)


def test_leader_handshake_fences_only_in_thread_0():
    """'all': every thread's membar.gl (MEMBAR.SC.GPU); 'leader': fence.acq_rel.gpu under thread 0's
    predicate (MEMBAR.ALL.GPU), no sequentially consistent fence."""
    ptx = dataclasses.replace(SKINNY, splitk_sync="leader").ptx()
    assert "membar.gl" not in ptx and ptx.count("fence.acq_rel.gpu") == 2
    lines = [ln.strip() for ln in ptx.splitlines() if "fence.acq_rel.gpu" in ln]
    assert all(ln.startswith("@%p") for ln in lines), lines
    sass = dataclasses.replace(SKINNY, splitk_sync="leader").assemble().sass_opcodes()
    assert "MEMBAR.SC.GPU" not in sass and sass.get("MEMBAR.ALL.GPU", 0) >= 1
    assert "MEMBAR.SC.GPU" in SKINNY.assemble().sass_opcodes()


def test_l2_prefetch_hint_reaches_the_copies():
    g = dataclasses.replace(SKINNY, splits=1, l2_prefetch=256)
    assert "cp.async.cg.shared.global.L2::256B" in g.ptx() and g.kernel_name.endswith("_p256")
    assert any("LTC256B" in op for op in g.assemble().sass_opcodes())
    with pytest.raises(ValidationError, match="l2_prefetch"):
        dataclasses.replace(SKINNY, l2_prefetch=512)
    with pytest.raises(ValidationError, match="splitk_sync"):
        dataclasses.replace(SKINNY, splitk_sync="none")


def test_split_k_odd_n_and_raster_groups_on_the_interpreter():
    g = Int8Gemm(block_m=32, block_n=32, block_k=32, warps_m=1, warps_n=2, stages=2, raster_group=2, splits=4)
    run_split(g, 70, 33, 300, seed=3)


@settings(max_examples=12, deadline=None)
@given(g=splitk_schedules(max_splits=6), m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 300),
       seed=seeds())
def test_split_factors_property_on_the_interpreter(g, m, n, k, seed):
    if g.bits == 4:
        k += k % 2
    run_split(g, m, n, k, seed)


@settings(max_examples=6, deadline=None)
@given(g=splitk_schedules(max_splits=16, operands=("s4", "s8"), max_acc=64, max_threads=256))
def test_split_k_schedules_assemble_without_spills(g):
    r = g.assemble()
    assert r.spills == 0, (g.kernel_name, str(r))
    sass = r.sass_opcodes()
    assert any(op.startswith("ATOM") or op.startswith("RED") for op in sass) == (g.splits > 1), g.kernel_name


@pytest.mark.parametrize("m", [32, 128])
def test_the_skinny_sweep_space_is_legal_and_starts_with_the_rule(m):
    t = Target.parse("sm_90")
    space = splitk_space(m, 8192, 8192, t)
    from ptxforge.schedules.gemm.tuning import choose_config
    assert space[0] == choose_config(m, 8192, 8192, t, "s4")
    assert any(c.get("splits", 1) > 1 for c in space) and len(space) == len({tuple(sorted(c.items())) for c in space})
    for c in space[:: max(1, len(space) // 4)]:
        assert Int4Gemm(target=t, **c).assemble().spills == 0


def test_split_k_kernel_parameters_grid_and_name():
    g = dataclasses.replace(SKINNY, splits=4)
    names = [p.name for p in g.module.kernels[0].params]
    assert names == ["a", "b", "c", "m", "n", "k", "w", "counters"]
    assert g.grid(40, 100) == (4, 2, 4) and g.kernel_name.endswith("_k4")
    one = dataclasses.replace(g, splits=1)
    assert [p.name for p in one.module.kernels[0].params] == ["a", "b", "c", "m", "n", "k"]
    assert one.splitk_workspace(40, 100) == ()


@pytest.mark.parametrize("bad", [0, 33, 2.0, True])
def test_split_factor_validation(bad):
    with pytest.raises(ValidationError, match="splits"):
        dataclasses.replace(SKINNY, splits=bad)


def test_choose_splits_fills_the_gpu_and_keeps_k_tiles_per_split():
    assert choose_splits(32, 8192, 32, 32, 64, 132) == 2  # 128 tiles: two waves of two CTAs per SM
    assert choose_splits(32, 8192, 32, 32, 128, 132) == 4
    assert choose_splits(1024, 8192, 32, 128, 128, 132) == 1  # 512 tiles already fill the SMs
    assert choose_splits(32, 8192, 6, 32, 64, 132) == 1  # too few k-tiles to split


def test_run_passes_the_workspace_through_the_interpreter(monkeypatch):
    """run() on numpy arrays with a split-K schedule: the launch receives the workspace after k."""
    import ptxforge.schedules.gemm.run as R
    seen = {}

    class FakeFn:
        def __call__(self, grid, block, *args, shared=0, stream=None):
            seen["grid"], seen["nargs"] = grid, len(args)

    class FakeBuf:
        ptr = 0
    monkeypatch.setattr(R, "load_kernel", lambda s: FakeFn())
    monkeypatch.setattr(Int4Gemm, "splitk_workspace", lambda self, m, n, stream=0: (FakeBuf(), FakeBuf()))
    rng = np.random.default_rng(0)
    a, b = operands(SKINNY, 20, 40, 200, rng)
    SKINNY.run(a, b)
    assert seen == {"grid": (2, 1, 3), "nargs": 8}


def test_a_plan_launches_with_its_workspace_after_k(monkeypatch):
    """GemmPlan of a split-K schedule: the packed launch holds a, b, c, m, n, k, then the
    workspace and counter addresses the schedule handed out, in the kernel's parameter layout; the
    block of an address triple is packed once and launched as it is on later calls."""
    import struct
    import ptxforge.runtime.launch_ex as LX
    import ptxforge.schedules.gemm.plan as P
    from ptxforge.runtime.kernel import layout
    g = Int4Gemm(block_m=32, block_n=64, block_k=256, warps_m=1, warps_n=4, stages=4, raster_group=1, splits=4)
    launched = []

    class FakeFn:
        def __init__(self, s):
            self.layout = layout(s.module.kernels[0].params)

        def _config(self, grid, block, shared):
            return (*grid, *block, shared)

    class Buf:
        def __init__(self, ptr):
            self.ptr = ptr
    monkeypatch.setattr(P, "load_kernel", lambda s: FakeFn(s))
    monkeypatch.setattr(LX, "block_launcher", lambda fn, cfg, stream: lambda blob: launched.append((cfg, blob)))
    monkeypatch.setattr(Int4Gemm, "splitk_workspace", lambda self, m, n, stream=0: (Buf(0x1000), Buf(0x2000)))
    plan = g.plan(32, 8192, 8192)
    a, b, c, c2 = 0x1000_0000, 0x2000_0000, 0x3000_0000, 0x4000_0000  # apart: C meets neither A nor B
    for ptrs in ((a, b, c), (a, b, c), (a, b, c2)):
        plan.launch_pointers(*ptrs)
    (cfg, blob), (_, again), (_, other) = launched
    lay = plan.function.layout
    assert cfg[:3] == (128, 1, 4)
    assert bytes(blob.buf)[:lay.size] == struct.pack(lay.fmt, a, b, c, 32, 8192, 8192, 0x1000, 0x2000)
    assert again is blob and other is not blob
    assert bytes(other.buf)[:lay.size] == struct.pack(lay.fmt, a, b, c2, 32, 8192, 8192, 0x1000, 0x2000)
    from ptxforge.errors import ValidationError
    for c_over, name in ((b + 4096, "B"), (a - 32 * 8192 * 4 + 4, "A")):  # C would overwrite what CTAs still read
        with pytest.raises(ValidationError, match=f"C overlaps {name} in memory"):
            plan.launch_pointers(a, b, c_over)
    plan.launch_pointers(a, b, a - 32 * 8192 * 4)  # C ending where A starts: apart
    assert len(launched) == 4


def test_for_shape_takes_the_measured_skinny_configurations():
    """M=32: 256-byte k-tiles (fewer barriers per byte of B); M=128: 64x64 tiles, two CTAs per SM."""
    g32 = Int4Gemm.for_shape(32, 8192, 8192, "sm_90")
    assert g32.row_bytes_k == 256 and g32.splits == 1 and g32.block_m == 32
    g128 = Int4Gemm.for_shape(128, 8192, 8192, "sm_90")
    ctas = g128.grid(128, 8192)[0] * g128.grid(128, 8192)[1]
    assert ctas >= 2 * 132 * 9 // 10 and g128.splits == 1
    for g in (g32, g128):
        r = g.assemble()
        assert r.spills == 0 and r.ctas_per_sm >= 2, str(r)
