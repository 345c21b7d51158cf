"""The integer GEMM schedules on a GPU: exact equality with numpy (int64 reference).

Every run starts from fresh random data (never zeros) and a poisoned output buffer, so an
element the kernel fails to write, or writes twice with the wrong value, shows up.
"""

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxforge as pf
from ptxforge.int4 import pack_int4, random_int4
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
from ptxforge.schedules.gemm.config import SCALED_K_LIMIT
from ptxforge.testing.gemm_strategies import gemm_problems, gemm_schedules

pytestmark = pytest.mark.gpu

POISON = -0x5A5A5A5A


def _arch():
    from ptxforge.runtime import device_info
    return device_info().arch


def _data(g, m, n, k, rng, extremes=False):
    if g.bits == 4:
        signed = g.operand == "s4"
        return (pack_int4(random_int4((m, k), rng, signed=signed, extremes=extremes), signed=signed),
                pack_int4(random_int4((n, k), rng, signed=signed, extremes=extremes), signed=signed))
    lo, hi = (-128, 127) if g.operand == "s8" else (0, 255)
    dt = np.int8 if g.operand == "s8" else np.uint8
    if extremes:
        return (rng.choice(np.array([lo, hi]), (m, k)).astype(dt), rng.choice(np.array([lo, hi]), (n, k)).astype(dt))
    return rng.integers(lo, hi + 1, (m, k)).astype(dt), rng.integers(lo, hi + 1, (n, k)).astype(dt)


def run_and_check(g, m, n, k, seed=0, extremes=False):
    """Run on device buffers with a poisoned output; compare with the exact numpy product."""
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(seed)
    a, b = _data(g, m, n, k, rng, extremes)
    dc = DeviceBuffer.from_host(np.full((m, n), POISON, np.int32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.EmulatedInstructionWarning)
        g.run(DeviceBuffer.from_host(a), DeviceBuffer.from_host(b), dc)
    c = dc.to_host()
    want = g.reference(a, b, k)
    bad = c.astype(np.int64) != want
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise AssertionError(f"{g.for_problem(k, n).kernel_name} {m}x{n}x{k}: {int(bad.sum())} of {m * n} wrong; "
                             f"first at ({i}, {j}): got {c[i, j]}, want {want[i, j]}")


def test_reference_configuration_1024():
    g = Int4Gemm(target=_arch())
    assert (g.block_m, g.block_n, g.block_k, g.stages, g.threads) == (128, 128, 64, 3, 128)
    run_and_check(g, 1024, 1024, 1024, seed=1)


def test_run_on_numpy_arrays():
    g = Int4Gemm(target=_arch())
    rng = np.random.default_rng(2)
    a, b = _data(g, 300, 200, 512, rng)
    c = g.run(a, b)
    assert c.dtype == np.int32 and c.shape == (300, 200)
    assert np.array_equal(c.astype(np.int64), g.reference(a, b))
    out = np.full((300, 200), POISON, np.int32)
    assert g.run(a, b, out) is out and np.array_equal(out, c)


@pytest.mark.parametrize("m, n, k", [
    (1, 1, 2), (1, 1, 64), (127, 129, 34), (200, 300, 1000), (1000, 77, 4098), (513, 1025, 2080),
    (129, 255, 96), (64, 8, 40), (33, 511, 48), (300, 257, 200), (17, 3001, 8192 + 64),
])
def test_ragged_shapes(m, n, k):
    run_and_check(Int4Gemm(target=_arch()), m, n, k, seed=m * 7 + n * 3 + k)


@pytest.mark.parametrize("g, shape", [
    (Int4Gemm(path="s8_scaled"), (333, 444, 1024)),
    (Int4Gemm(path="s8_signext"), (333, 444, 1024)),
    (Int4Gemm(path="native_s4", block_m=64, block_n=64), (96, 80, 256)),
    (Int4Gemm(operand="u4"), (333, 444, 1000)),
    (Int4Gemm(operand="u4", path="native_u4", block_m=64, block_n=64), (96, 80, 256)),
    (Int8Gemm(), (333, 444, 1000)),
    (Int8Gemm(operand="u8"), (333, 444, 999)),
    (Int8Gemm(block_k=128, block_m=256, block_n=128, warps_m=4, warps_n=2, stages=4), (512, 384, 1024)),
])
def test_every_path(g, shape):
    import dataclasses
    run_and_check(dataclasses.replace(g, target=_arch()), *shape, seed=sum(shape))


def test_extreme_values_everywhere():
    # only -8 and 7 (or -128 and 127): every product at its largest
    run_and_check(Int4Gemm(target=_arch()), 256, 256, 4096, seed=5, extremes=True)
    run_and_check(Int8Gemm(target=_arch()), 128, 128, 2048, seed=6, extremes=True)


def test_scaled_path_at_its_k_limit():
    # K = 131070: all -8 gives 64*K = 8388480 < 2**23, the largest the scaled path holds exactly
    g = Int4Gemm(target=_arch(), block_m=32, block_n=32, warps_m=1, warps_n=1)
    run_and_check(g, 16, 16, SCALED_K_LIMIT - 2, seed=7, extremes=True)
    # beyond it the default switches to exact sign extension by itself
    assert g.for_problem(SCALED_K_LIMIT).path_name == "s8_signext"
    run_and_check(g, 16, 16, SCALED_K_LIMIT + 64, seed=8, extremes=True)


@pytest.mark.parametrize("shape", [(32, 8192, 8192), (128, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024)])
def test_for_shape_configurations(shape):
    m, n, k = shape
    g = Int4Gemm.for_shape(m, n, k, _arch())
    # the chosen kernel on a smaller problem of the same kind (ragged in every dimension)
    run_and_check(g, min(m, 1000) - 3, min(n, 1500) - 5, min(k, 2048) - 32, seed=m + n)


@settings(deadline=None)
@given(gemm_schedules(targets=("sm_80", "sm_90"), max_acc=128), gemm_problems(), st.integers(0, 2 ** 32 - 1))
def test_random_schedules_and_shapes(g, mnk, seed):
    m, n, k = mnk
    if g.bits == 8:
        k = max(1, k // 2)
    run_and_check(g, m, n, k, seed=seed)


def test_torch_tensors_in_place():
    torch = pytest.importorskip("torch")
    g = Int4Gemm(target=_arch())
    rng = np.random.default_rng(9)
    a, b = _data(g, 256, 384, 1024, rng)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tc = torch.full((256, 384), POISON, dtype=torch.int32, device="cuda")
    g.run(ta, tb, tc)
    torch.cuda.synchronize()
    assert np.array_equal(tc.cpu().numpy().astype(np.int64), g.reference(a, b))


SPLITK = [
    Int4Gemm(block_m=32, block_n=64, block_k=256, warps_m=1, warps_n=4, stages=4, raster_group=1, splits=4),
    Int4Gemm(block_m=32, block_n=128, block_k=512, warps_m=1, warps_n=4, stages=3, raster_group=1, splits=8),
    Int4Gemm(block_m=128, block_n=64, block_k=256, warps_m=2, warps_n=2, stages=3, raster_group=1, splits=2),
    Int4Gemm(block_m=64, block_n=64, block_k=128, warps_m=2, warps_n=2, stages=3, raster_group=8, splits=3),
    Int8Gemm(block_m=32, block_n=64, block_k=128, warps_m=1, warps_n=4, stages=4, raster_group=1, splits=4),
    Int4Gemm(block_m=32, block_n=64, block_k=1024, warps_m=1, warps_n=4, stages=3, raster_group=1, splits=4,
             splitk_sync="leader", l2_prefetch=256),
    Int4Gemm(block_m=64, block_n=64, block_k=256, warps_m=2, warps_n=2, stages=3, raster_group=1, splits=2,
             splitk_sync="leader"),
]


@pytest.mark.parametrize("g", SPLITK, ids=lambda g: g.kernel_name)
@pytest.mark.parametrize("m, n, k", [(32, 2048, 8192), (33, 1000, 4000), (1, 77, 8192 + 64), (130, 520, 2050),
                                     (17, 3001, 96)])
def test_split_k_ragged_skinny_shapes(g, m, n, k):
    # twice on fresh data and a poisoned C: the second launch must find the arrival counters reset
    g = dataclasses.replace(g, target=_arch())
    if g.bits == 8:
        k = max(1, k // 2)
    run_and_check(g, m, n, k, seed=m + n + k)
    run_and_check(g, m, n, k, seed=m + n + k + 1)


def test_split_k_plan_and_for_shape_choices():
    torch = pytest.importorskip("torch")
    for m in (32, 128):
        g = Int4Gemm.for_shape(m, 8192, 8192, _arch(), hopper=False)
        rng = np.random.default_rng(m)
        a, b = _data(g, m, 8192, 8192, rng)
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        want = g.reference(a, b, 8192)
        plan = g.plan(m, 8192, 8192)
        for _ in range(3):
            tc = torch.full((m, 8192), POISON, dtype=torch.int32, device="cuda")
            plan(ta, tb, tc)
            torch.cuda.synchronize()
            assert np.array_equal(tc.cpu().numpy().astype(np.int64), want), g.describe()
