"""The Hopper GEMM with swapped operands (`swap_ab`): the kernel multiplies B . A^T and stores it
transposed, so a skinny problem's many weight rows are the wgmma M side.  On the interpreter against
numpy (ragged edges both ways), assembled without spills, and on the GPU through the documented calls."""

import numpy as np
import pytest

from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.run import random_operands, reference
from support.hopper_gemm import run_on_interpreter


@pytest.mark.parametrize("operand, kw, shape", [
    ("s4", dict(block_n=32, consumers=1, stages=3, block_k_bytes=256), (20, 136, 512)),
    ("s4", dict(block_n=32, consumers=1, stages=2, block_k_bytes=256), (32, 128, 512)),
    ("s4", dict(block_n=64, consumers=2, stages=2, block_k_bytes=256), (70, 200, 256)),
    ("s8", dict(block_n=32, consumers=1, stages=2), (32, 200, 256)),
], ids=["s4-n32-ragged", "s4-n32-full", "s4-2c-ragged", "s8-n32"])
def test_swapped_kernel_matches_numpy_on_the_interpreter(operand, kw, shape):
    cfg = HopperGemm(operand, swap_ab=True, **kw)
    m, n, k = shape
    got, want, r = run_on_interpreter(cfg, m, n, k, clusters=min(cfg.cluster_tiles(n, m), 3), seed=3)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


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
