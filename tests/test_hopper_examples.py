"""The Hopper examples on the interpreter against numpy, and each assembled for sm_90a by ptxas."""

import numpy as np
import pytest

import ptxforge as pf

from support.examples import load_example


def test_tma_copy_on_the_interpreter():
    ex = load_example("hopper_tma_copy")
    dst, dump, src, corner = ex.run_cpu()
    np.testing.assert_array_equal(dst, src)
    np.testing.assert_array_equal(dump.view(np.uint8), ex.swizzled_box(src, *corner))
    assert corner == (128, 192)  # the ragged corner box: 24 of 64 columns and 8 of 64 rows inside


@pytest.mark.parametrize("box_rows, stages, lag", [(128, 2, 1), (256, 3, 1), (64, 4, 2), (64, 5, 4)])
def test_tma_copy_with_taller_boxes_and_more_stores_in_flight(box_rows, stages, lag):
    ex = load_example("hopper_tma_copy")
    dst, _, src, _ = ex.run_cpu(300, 200, stages=stages, grid=3, box_rows=box_rows, lag=lag)
    np.testing.assert_array_equal(dst, src)


def test_tma_copy_refuses_a_lag_without_a_free_stage():
    ex = load_example("hopper_tma_copy")
    with pytest.raises(ValueError, match="lag"):
        ex.build(3, lag=3)


def test_tma_copy_assembles():
    ex = load_example("hopper_tma_copy")
    for stages in (2, 4):
        pf.assemble(ex.build(stages), backend="ptxas")


@pytest.mark.parametrize("dtype", ["s8", "bf16"])
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
def test_wgmma_tile_on_the_interpreter(dtype, rs):
    ex = load_example("hopper_wgmma_tile")
    got, want = ex.run_cpu(dtype, rs)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("dtype", ["s8", "bf16"])
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
def test_wgmma_tile_assembles(dtype, rs):
    ex = load_example("hopper_wgmma_tile")
    r = pf.assemble(ex.build(dtype, 256, 1024, 1024, rs), backend="ptxas")
    assert r is not None


@pytest.mark.parametrize("config", ["SKINNY_S4", "SKINNY_S4_32", "SKINNY_S4_64"])
def test_the_int4_hopper_gemm_example_runs_on_the_interpreter_in_both_orders(config):
    from ptxforge import interp
    from ptxforge.schedules.hopper import HopperGemm
    from ptxforge.schedules.hopper import defaults as hopper_defaults
    ex = load_example("hopper_gemm_interp")
    cfg = HopperGemm("s4", **getattr(hopper_defaults, config))
    for order in interp.ORDERS:
        c, want, report = ex.run_cpu(cfg, 37, 90, 1536, order, seed=5)
        assert not report.findings, str(report)
        np.testing.assert_array_equal(c.astype(np.int64), want)
    assert ex.main(["--m", "20", "--n", "33", "--k", "1024", "--config", config]) == 0


def test_the_decode_example_on_the_interpreter():
    """examples/decode_gemms.py: the int4 and bf16 configurations a 16-row call gets, exact (int4) and within
    the bound (bf16) at a small ragged shape, no finding; and what it prints about each layer's GEMMs."""
    ex = load_example("decode_gemms")
    for operand in ("s4", "bf16"):
        c, want, report, agrees = ex.run_cpu(operand)
        assert not report.findings, str(report)
        assert agrees
        if operand == "s4":
            np.testing.assert_array_equal(c.astype(np.int64), want)
        else:
            assert np.abs(c - want).max() < 1e-3 * np.abs(want).max()
    from ptxforge.schedules.hopper import choose_hopper
    g = choose_hopper(16, 4096, 4096, "s4")
    assert g.swap_ab and ex.k_splits(g, 16, 4096, 4096) == 1  # a short K stays whole: one launch
    assert ex.k_splits(g, 16, 4096, 131072) > 1  # a long one is split


def test_the_int4_hopper_gemm_example_offers_only_the_int4_configurations():
    """--config lists the skinny int4 configurations for_shape takes; an s8 one (SKINNY_S8_32) also builds as an
    s4 HopperGemm, so building was no test of what a configuration is for."""
    ex = load_example("hopper_gemm_interp")
    offered = ex.s4_configurations()
    assert sorted(offered) == ["SKINNY_S4", "SKINNY_S4_256", "SKINNY_S4_32", "SKINNY_S4_64"]
    assert "SKINNY_S8_32" not in offered and "SKINNY_S4_32" in offered
    with pytest.raises(SystemExit):
        ex.main(["--config", "SKINNY_S8_32"])
