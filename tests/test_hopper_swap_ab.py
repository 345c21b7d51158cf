"""The Hopper GEMM with swapped operands (`swap_ab`): the kernel multiplies B . A^T and stores it
transposed, so a skinny problem's many weight rows are the wgmma M side.  On the interpreter against
numpy (ragged edges both ways), assembled without spills, and on the GPU through the documented calls."""

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.emit import module_for
from ptxforge.schedules.hopper.run import random_operands, reference


def _run_swapped_on_the_interpreter(cfg, a, b, k):
    """C [M, N] = A . B^T through the swap_ab kernel: its A map reads B, its B map reads A."""
    m, n = a.shape[0], b.shape[0]
    la, lb = cfg.load_tiles
    ta = interp.host_tensor_map(b, la.tma_box, dtype=la.dtype, swizzle=128)
    tb = interp.host_tensor_map(a, lb.tma_box, dtype=lb.dtype, swizzle=128)
    c = np.full((m, n), -0x5A5A5A5A, np.int32)
    tiles_m, tiles_n, _ = cfg.tile_counts(n, m, k)
    r = interp.run(module_for(cfg), grid=min(tiles_m * tiles_n, 3), block=cfg.threads, shared=cfg.smem_bytes,
                   args=[ta, tb, c, n, m, k, 1], check=False)
    assert r.ok, str(r)
    return c


@pytest.mark.parametrize("operand, kw, shape", [
    ("s4", dict(block_n=32, consumers=1, stages=3, block_k_bytes=256), (20, 136, 512)),
    ("s4", dict(block_n=32, consumers=1, stages=2, block_k_bytes=256), (32, 128, 512)),
    ("s4", dict(block_n=64, consumers=2, stages=2, block_k_bytes=256), (70, 200, 256)),
    ("s8", dict(block_n=32, consumers=1, stages=2), (32, 200, 256)),
], ids=["s4-n32-ragged", "s4-n32-full", "s4-2c-ragged", "s8-n32"])
def test_swapped_kernel_matches_numpy_on_the_interpreter(operand, kw, shape):
    cfg = HopperGemm(operand, swap_ab=True, **kw)
    m, n, k = shape
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(3))
    got = _run_swapped_on_the_interpreter(cfg, a, b, k)
    np.testing.assert_array_equal(got.astype(np.int64), reference(cfg, a, b))


def test_swapped_kernels_assemble_without_spills():
    for kw in (dict(block_n=32, consumers=1, stages=8, block_k_bytes=256),
               dict(block_n=128, consumers=1, stages=6, block_k_bytes=256)):
        r = HopperGemm("s4", swap_ab=True, **kw).assemble()
        text = r.log if hasattr(r, "log") else str(r)
        assert "spill" not in text.lower() or " 0 bytes spill" in text.lower(), text
        assert HopperGemm("s4", swap_ab=True, **kw).kernel_name.endswith("_t")


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
