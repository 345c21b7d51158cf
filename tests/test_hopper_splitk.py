"""The in-kernel split-K reduction of the Hopper GEMM (split_reduce='kernel', splitk.emit_fixup) on the CPU
interpreter: every arrangement of consumers and epilogues, against numpy and against the second-launch
reduction, launch after launch on one workspace."""

import dataclasses

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.defaults import SKINNY
from ptxforge.schedules.hopper.interp_launch import interpreter_launch, interpreter_module
from ptxforge.schedules.hopper.operands import c_numpy_type
from ptxforge.schedules.hopper.splitk import workspace_bytes

from support.hopper_gemm import c_values, round_to_c16, run_on_interpreter, small_operands

ARRANGEMENTS = {
    "s8 two consumers": (HopperGemm("s8", block_n=64, stages=3), (70, 100, 768)),
    "bf16 f32 C": (HopperGemm("bf16", block_n=64, stages=3), (70, 100, 384)),
    "bf16 16-bit C through TMA stores": (HopperGemm("bf16", block_n=64, stages=3, epilogue="tma", c16=True),
                                         (70, 96, 384)),
    "s8 cluster pairs": (HopperGemm("s8", block_n=64, stages=3, cluster_m=2), (200, 100, 768)),
    "s4 three consumers on alternate stages, swapped": (HopperGemm("s4", **SKINNY["s4"][0][1]), (20, 100, 3072)),
    "s4 split stages, swapped": (HopperGemm("s4", **SKINNY["s4"][1][1]), (40, 100, 3072)),
    "s4 widened ahead, biased": (HopperGemm("s4", block_n=64, block_k_bytes=256, stages=2, widen_ahead=True,
                                            biased=True), (70, 100, 1536)),
}


@pytest.mark.parametrize("name", ARRANGEMENTS)
def test_split_k_in_the_kernel_matches_numpy(name):
    """Three splits (every one non-empty), one CTA per unit: C as numpy's, no findings, in both thread orders
    for the register-sourced s4 arrangements (consumers a barrier apart are where a missing one shows)."""
    cfg, (m, n, k) = ARRANGEMENTS[name]
    orders = ("lowest-pc", "last-warpgroup-first") if cfg.operand == "s4" else ("lowest-pc",)
    for order in orders:
        got, want, r = run_on_interpreter(cfg, m, n, k, splits=3, seed=m + n, order=order)
        assert r.ok, str(r)
        assert np.array_equal(got, want), f"{name} ({order}): {int((got != want).sum())} wrong"


def _launch(cfg, a, b, k, splits, *, clusters=None, c=None, workspace=None):
    """One interpreter launch; returns (C, the args it ran with)."""
    m, n = a.shape[0], b.shape[0]
    if c is None:
        dt = c_numpy_type(cfg)
        c = np.full((m, n), 0xFFFF if dt == np.uint16 else -7, dt)  # poisoned
    args, grid, shared = interpreter_launch(cfg, a, b, c, k, splits=splits, clusters=clusters)
    if workspace is not None:  # a workspace and counters a launch before left behind (the last two arguments
        args[-2:] = workspace  # without epilogue='tma')
    r = interp.run(interpreter_module(cfg, m, n, splits), grid=grid, block=cfg.threads, shared=shared, args=args,
                   check=False)
    assert r.ok, str(r)
    return c, args


def test_every_launch_leaves_the_counters_at_zero_for_the_next():
    """Launch after launch on one workspace and one set of counters (as a plan keeps them), one CTA walking every
    unit and then one CTA per unit: each C exact, and the counters back at 0 after each launch.  A last unit
    that did not set its counter back would leave the next launch's count off by the splits."""
    cfg = HopperGemm("s8", block_n=64, stages=3)
    m, n, k = 70, 100, 768
    rng = np.random.default_rng(3)
    kept = None
    for clusters in (1, None, 1):
        a, b = small_operands(cfg, m, n, k, rng)
        c, args = _launch(cfg, a, b, k, 3, clusters=clusters, workspace=kept)
        kept = args[-2:]
        assert not kept[1].any(), kept[1]
        assert np.array_equal(c.astype(np.int64), a.astype(np.int64) @ b.astype(np.int64).T)


def test_in_kernel_and_second_launch_reductions_give_the_same_bits():
    """f32 partial sums added in split order by both reductions: the same C bit for bit (here with sums that
    round, so that a different order would show)."""
    cfg = HopperGemm("bf16", block_n=64, stages=3)
    m, n, k = 40, 72, 512
    rng = np.random.default_rng(4)
    a = ((rng.standard_normal((m, k)).astype(np.float32).view(np.uint32) >> 16)).astype(np.uint16)
    b = ((rng.standard_normal((n, k)).astype(np.float32).view(np.uint32) >> 16)).astype(np.uint16)
    splits = 4
    fused, _ = _launch(cfg, a, b, k, splits)
    second = dataclasses.replace(cfg, split_reduce="launch")
    parts = np.full((splits, m, n), np.nan, np.float32)
    _launch(second, a, b, k, splits, c=parts)
    total = parts[0].copy()
    for s in range(1, splits):
        total += parts[s]  # f32 additions in order, as splitk_reduce makes them
    assert np.array_equal(fused.view(np.int32), total.view(np.int32))


def test_c16_with_k_split_rounds_the_whole_sum():
    """16-bit C and a split K: the f32 sums meet before the epilogue rounds them (split_reduce='kernel'); the
    second launch, which would add rounded partial C, refuses the split."""
    cfg = HopperGemm("bf16", block_n=64, stages=3, epilogue="tma", c16=True)
    m, n, k = 30, 64, 384
    a, b = small_operands(cfg, m, n, k, np.random.default_rng(6))
    c, _ = _launch(cfg, a, b, k, 3)
    f32, _ = _launch(dataclasses.replace(cfg, c16=False, epilogue="registers"), a, b, k, 3)
    assert np.array_equal(c_values(cfg, c), round_to_c16(cfg, f32.astype(np.float64)))
    with pytest.raises(ValidationError, match="c16"):
        interpreter_launch(dataclasses.replace(cfg, split_reduce="launch"), a, b, np.zeros((3, m, n), np.uint16),
                           k, splits=3)


def test_the_kernel_a_launch_runs():
    """`for_launch`: a split launch runs the kernel with the reduction (the `ws` and `counters` parameters, a
    counter atom); a launch without a split the one without them, as before the option existed."""
    cfg = HopperGemm("s8", block_n=64, stages=3)
    split, whole = cfg.for_launch(100, 2), cfg.for_launch(100, 1)
    assert split.reduces_in_kernel and not whole.reduces_in_kernel
    assert split.kernel_name == whole.kernel_name + "_kr"
    ptx_split, ptx_whole = split.module.ptx, whole.module.ptx
    assert "atom.acq_rel.gpu.global.add.u32" in ptx_split and ".param .u64 counters" in ptx_split
    assert "atom." not in ptx_whole and "counters" not in ptx_whole
    assert dataclasses.replace(cfg, split_reduce="launch").for_launch(100, 4).split_reduce == "launch"
    with pytest.raises(ValidationError, match="split_reduce"):
        HopperGemm("s8", split_reduce="atomic")


def test_workspace_holds_every_split_of_every_tile():
    """The workspace: S partial tiles per C tile (a cluster's pairs whole), 4 bytes per value, and a counter per
    tile; the C map of the TMA-store epilogue covers C alone (one slice) with the in-kernel reduction."""
    cfg = HopperGemm("s8", block_n=64, stages=3, cluster_m=2)
    nbytes, tiles = workspace_bytes(cfg, 300, 100, 3)
    assert tiles == 4 * 2 and nbytes == 3 * tiles * 128 * 64 * 4
    swapped = HopperGemm("s4", **SKINNY["s4"][0][1])
    assert workspace_bytes(swapped, 4096, 16, 2) == (2 * 64 * 64 * 32 * 4, 64)


def _every_mutant_reported(name, kind, finding, splits, seed):
    """Run each `kind` mutant of the kernel an ARRANGEMENTS[name] launch split `splits` ways runs, C poisoned: every
    one reports a `finding`."""
    from ptxforge.testing.mutants import mutants_of
    cfg, (m, n, k) = ARRANGEMENTS[name]
    kernel = interpreter_module(cfg, m, n, splits).kernels[0]
    mutants = mutants_of(kernel, [kind])
    assert mutants
    a, b = small_operands(cfg, m, n, k, np.random.default_rng(seed))
    for mutant in mutants:
        c = np.full((m, n), 7, c_numpy_type(cfg))  # poisoned (16-bit C too)
        args, grid, shared = interpreter_launch(cfg, a, b, c, k, splits=splits)
        r = interp.run(mutant.apply(kernel), grid=grid, block=cfg.threads, shared=shared, args=args, check=False)
        assert r.by_kind(finding), mutant


@pytest.mark.parametrize("name", ["s8 two consumers", "s4 three consumers on alternate stages, swapped"])
def test_every_weakened_memory_order_is_reported(name):
    """The count's acq_rel made relaxed (the `weaken_memory_order` mutants of the kernel a split launch runs):
    the values still come out right in the interpreter's thread order, and the workspace reads are reported."""
    _every_mutant_reported(name, "weaken_memory_order", "order", 3, 1)


@pytest.mark.parametrize("name", ["bf16 16-bit C through TMA stores", "s4 three consumers on alternate stages, swapped",
                                  "s4 split stages, swapped", "s4 widened ahead, biased"])
def test_every_dropped_proxy_fence_is_reported(name):
    """Each fence.proxy.async of the kernel removed (the `drop_proxy_fence` mutants: the widened B tiles wgmma reads,
    the C tile a TMA store reads): the interpreter reports the async-proxy read of the unfenced generic writes."""
    _every_mutant_reported(name, "drop_proxy_fence", "proxy", 1, 2)


def test_a_split_count_with_empty_splits_is_lowered_or_refused():
    """Four k-stages split three ways leave the third split nothing (ceil(4 / 3) = 2 stages each): `interpret`
    lowers the count as run() and plan() do (two splits) and matches numpy, where the kernel launched with
    three waited for stages nobody loads (a deadlock); `interpreter_launch`, which launches exactly what it is
    given, refuses the count by name."""
    from ptxforge.int4 import pack_int4
    from ptxforge.schedules.gemm import Int4Gemm
    cfg = Int4Gemm.for_shape(40, 72, 2048, target="sm_90a")
    assert -(-2048 // cfg.block_k) == 4
    rng = np.random.default_rng(5)
    a, b = rng.integers(-8, 8, (40, 2048)).astype(np.int8), rng.integers(-8, 8, (72, 2048)).astype(np.int8)
    pa, pb = pack_int4(a), pack_int4(b)
    got, r = cfg.interpret(pa, pb, splits=3)
    assert r.ok, str(r)
    assert np.array_equal(got, a.astype(np.int64) @ b.T.astype(np.int64))
    with pytest.raises(ValidationError, match="split 3 ways its last splits are empty.*2 splits cover the same K"):
        interpreter_launch(cfg, pa, pb, np.zeros((40, 72), np.int32), 2048, splits=3)
