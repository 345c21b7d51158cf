"""ptxforge.bfloat16: float arrays to bf16 bit patterns and back, checked against an exact rounding of every case."""

import numpy as np
import pytest
from hypothesis import given

from ptxforge.bfloat16 import from_bf16, to_bf16
from ptxforge.errors import ValidationError
from ptxforge.testing.interp_strategies import float_arrays


def _nearest_even(x: np.ndarray) -> np.ndarray:
    """The bf16 nearest to each float32 (ties to the even pattern), found by comparing exact float64 distances
    to the two bf16 neighbours; infinities where bf16 overflows."""
    u = x.view(np.uint32)
    down = (u >> 16).astype(np.uint16)  # truncation: the neighbour towards zero
    up = (down.astype(np.uint32) + 1).astype(np.uint16)
    lo, hi = from_bf16(down).astype(np.float64), from_bf16(up).astype(np.float64)
    d_lo, d_hi = np.abs(x.astype(np.float64) - lo), np.abs(hi - x.astype(np.float64))
    pick_up = (d_hi < d_lo) | ((d_hi == d_lo) & (down & 1).astype(bool))
    return np.where(pick_up, up, down)


def test_every_bf16_pattern_round_trips():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    back = to_bf16(from_bf16(bits))
    nan = np.isnan(from_bf16(bits))
    np.testing.assert_array_equal(back[~nan], bits[~nan])
    assert (back[nan] & 0x7FC0 == 0x7FC0).all()  # NaNs come back quiet, sign and payload kept


@given(float_arrays("f32"))
def test_rounding_is_to_nearest_even(x):
    finite = np.isfinite(x)
    np.testing.assert_array_equal(to_bf16(x[finite]), _nearest_even(x[finite]))


def test_ties_go_to_the_even_pattern_and_overflow_to_infinity():
    x = np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 3.4e38, -3.4e38, 1e-45], np.float32)
    assert [hex(int(v)) for v in to_bf16(x)] == ["0x3f80", "0x3f82", "0x7f80", "0xff80", "0x0"]


def test_float64_is_rounded_once_and_integers_are_refused():
    assert to_bf16(np.array([1.5], np.float64))[0] == 0x3FC0
    # just above the halfway point between 1 and 1 + 2^-7: float32 would land on the halfway point and round to 1
    assert to_bf16(np.array([1 + 2.0**-8 + 2.0**-40]))[0] == 0x3F81
    assert to_bf16(np.array([1.5 * 2.0**-133, 1e300, -1e300]))[:3].tolist() == [0x2, 0x7F80, 0xFF80]
    with pytest.raises(ValidationError, match="rounds float arrays"):
        to_bf16(np.arange(3))
    with pytest.raises(ValidationError, match="16-bit integers"):
        from_bf16(np.zeros(3, np.float32))


def test_a_bf16_gemm_given_floats_names_the_conversion():
    from ptxforge.schedules.hopper import Bf16Gemm
    g = Bf16Gemm(block_n=64, stages=3)
    a = np.ones((8, 64), np.float32)
    with pytest.raises(ValidationError, match="ptxforge.bfloat16.to_bf16"):
        g.interpret(a, a)
    c, report = g.interpret(to_bf16(a), to_bf16(2 * a))
    assert report.ok and (c == 128.0).all()


def test_the_helpers_leave_the_bf16_type_where_it_was():
    """`ptxforge.bf16` is the PTX type; the numpy helpers live in `ptxforge.bfloat16`, so importing them cannot
    replace the type on the package (a submodule named bf16 would have)."""
    import ptxforge as pf
    import ptxforge.bfloat16  # noqa: F401
    from ptxforge.isa import types as T
    assert pf.bf16 is T.bf16
