"""The warp-specialized TMA + wgmma GEMM schedule (ptxforge.schedules.hopper) on the interpreter:
exact against numpy, and clean (no race, proxy, accumulator or barrier finding).  Skipped where the
schedule is not part of the tree."""

import numpy as np
import pytest

hopper = pytest.importorskip("ptxforge.schedules.hopper.config")

from ptxforge import interp  # noqa: E402


@pytest.mark.parametrize("operand, kw", [("s8", {}), ("bf16", {}), ("s8", {"wg_m": 128, "consumers": 1}),
                                         ("bf16", {"consumers": 1})], ids=["s8", "bf16", "s8-wg128", "bf16-1c"])
def test_hopper_gemm_runs_exact_and_clean(operand, kw):
    from ptxforge.schedules.hopper.emit import module_for
    from ptxforge.schedules.hopper.operands import reference
    cfg = hopper.HopperGemm(operand=operand, block_n=64, stages=2, **kw)
    rng = np.random.default_rng(0)
    m, n, k = cfg.block_m, 128, 512
    if operand == "s8":
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    else:  # bf16 bit patterns of small halves: every sum is exact
        a = ((rng.integers(-4, 5, (m, k)) * 0.5).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        b = ((rng.integers(-4, 5, (n, k)) * 0.5).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    la, lb = cfg.load_tiles
    ta = interp.host_tensor_map(a, la.tma_box, dtype=la.dtype, swizzle=128)
    tb = interp.host_tensor_map(b, lb.tma_box, dtype=lb.dtype, swizzle=128)
    c = np.zeros((m, n), np.int32 if cfg.c_type == "s32" else np.float32)
    tiles_m, tiles_n, _ = cfg.tile_counts(m, n, k)
    # the kernel of a launch without a K split (`for_launch`): no split-K workspace parameters
    r = interp.run(module_for(cfg.for_launch(n, 1)), grid=tiles_m * tiles_n, block=cfg.threads, shared=cfg.smem_bytes,
                   args=[ta, tb, c, m, n, k, 1], check=False)
    assert r.ok, str(r)
    np.testing.assert_array_equal(c.astype(np.float64), reference(cfg, a, b).astype(np.float64))
