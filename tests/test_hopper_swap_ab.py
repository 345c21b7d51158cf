"""The Hopper GEMM with swapped operands (`swap_ab`): the kernel multiplies B . A^T and stores it
transposed, so a skinny problem's many weight rows are the wgmma M side.  On the interpreter against
numpy (ragged edges both ways), assembled without spills, and on the GPU through the documented calls."""

import numpy as np
import pytest

from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.operands import random_operands, reference
from support.hopper_gemm import run_on_interpreter


@pytest.mark.parametrize("operand, kw, shape", [
    ("s4", dict(block_n=32, consumers=1, stages=3, block_k_bytes=256), (20, 136, 512)),
    ("s4", dict(block_n=32, consumers=1, stages=2, block_k_bytes=256), (32, 128, 512)),
    ("s4", dict(block_n=64, consumers=2, stages=2, block_k_bytes=256), (70, 200, 256)),
    ("s8", dict(block_n=32, consumers=1, stages=2), (32, 200, 256)),
    ("bf16", dict(block_n=32, consumers=1, stages=3, pdl=True, early_prefetch=2), (20, 136, 320)),
    ("f16", dict(block_n=128, consumers=1, stages=2), (100, 70, 192)),
], ids=["s4-n32-ragged", "s4-n32-full", "s4-2c-ragged", "s8-n32", "bf16-n32-ragged", "f16-n128-ragged"])
def test_swapped_kernel_matches_numpy_on_the_interpreter(operand, kw, shape):
    cfg = HopperGemm(operand, swap_ab=True, **kw)
    m, n, k = shape
    got, want, r = run_on_interpreter(cfg, m, n, k, clusters=min(cfg.cluster_tiles(n, m), 3), seed=3)
    assert r.ok, str(r)
    if operand in ("bf16", "f16"):  # float sums: the interpreter's f32 accumulation against float64
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    else:
        np.testing.assert_array_equal(got, want)


def test_swapped_kernels_assemble_without_spills():
    for kw in (dict(block_n=32, consumers=1, stages=8, block_k_bytes=256),
               dict(block_n=128, consumers=1, stages=6, block_k_bytes=256)):
        r = HopperGemm("s4", swap_ab=True, **kw).assemble()
        text = r.log if hasattr(r, "log") else str(r)
        assert "spill" not in text.lower() or " 0 bytes spill" in text.lower(), text
        assert "t" in HopperGemm("s4", swap_ab=True, **kw).kernel_name.split("_")


@pytest.mark.gpu
@pytest.mark.parametrize("operand", ["bf16", "f16"])
@pytest.mark.parametrize("m, n, k", [(32, 8192 - 64, 1024), (7, 328, 512), (100, 200, 768), (200, 384, 512)])
def test_gpu_skinny_float_defaults_run_and_plan_within_the_bound(operand, m, n, k):
    """Bf16Gemm.for_shape for few rows (operands swapped up to M = 128, 128 x 128 tiles to 256): run() on host
    and device operands and the plan agree with float64 within the f32-accumulation bound, C poisoned."""
    from ptxforge.runtime import DeviceBuffer
    from ptxforge.schedules.hopper import Bf16Gemm
    g = Bf16Gemm.for_shape(m, n, k, operand)
    assert g.swap_ab == (m <= 128)
    a, b = random_operands(g, m, n, k, np.random.default_rng(m + n))
    want = reference(g, a, b)
    as_float = (lambda x: (x.astype(np.uint32) << 16).view(np.float32)) if operand == "bf16" else \
        (lambda x: x.view(np.float16).astype(np.float32))
    bound = k * 2.0 ** -21 * (np.abs(as_float(a).astype(np.float64)) @ np.abs(as_float(b).astype(np.float64)).T)
    assert np.all(np.abs(g.run(a, b) - want) <= bound + 1e-30)
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dc = DeviceBuffer.empty((m, n), np.float32)
    dc.fill_bytes(0xFF)
    g.plan(m, n, k)(da, db, dc)
    assert np.all(np.abs(dc.to_host() - want) <= bound + 1e-30)
    dc.fill_bytes(0xFF)
    g.run(da, db, dc)
    g.run(da, db, dc)  # the second call through the kept plan
    assert np.all(np.abs(dc.to_host() - want) <= bound + 1e-30)


def test_block_n_below_32_is_refused_with_the_legal_range():
    with pytest.raises(ValidationError, match="32..256"):
        HopperGemm("s4", block_n=16, swap_ab=True)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k, biased", [(32, 8192 - 64, 1024, False), (7, 328, 512, False),
                                             (130, 200, 768, False), (32, 1000, 1024, True)])
def test_gpu_swapped_run_and_plan_match_numpy(m, n, k, biased):
    from ptxforge.runtime import DeviceBuffer
    cfg = HopperGemm("s4", block_n=32 if m <= 32 else 128, consumers=1, stages=4, block_k_bytes=256,
                     swap_ab=True, biased=biased)
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(m))
    want = reference(cfg, a, b)
    np.testing.assert_array_equal(cfg.run(a, b).astype(np.int64), want)
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dc = DeviceBuffer.empty((m, n), np.int32)
    dc.fill_bytes(0xA5)
    plan = cfg.plan(m, n, k)
    plan(da, db, dc)
    np.testing.assert_array_equal(dc.to_host().astype(np.int64), want)
    dc.fill_bytes(0xA5)
    cfg.run(da, db, dc)
    cfg.run(da, db, dc)
    np.testing.assert_array_equal(dc.to_host().astype(np.int64), want)
