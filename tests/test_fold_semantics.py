"""ptxforge.fold keeps a value's type and rounds as PTX does: a power-of-two product of a signed
register stays signed, a quotient rounds toward zero whether the divisor is a power of two, another
int or the whole expression folds at build time, and factors the fold cannot honour are refused at
the user's line.  Expected values come from C semantics (truncating division), not from the fold."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import fold as F
from ptxforge import interp

from support.located import assert_located


def _c_div(a, n):
    """C / of ints: the quotient rounded toward zero."""
    q = abs(a) // abs(n)
    return q if (a < 0) == (n < 0) else -q


def _c_rem(a, n):
    return a - n * _c_div(a, n)


def _run(m, args, block=1):
    pf.assemble(m, "sm_80", backend="ptxas")
    interp.run(m, "k", block=block, args=args)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_mul_of_signed_register_stays_signed(n):
    k = pf.KernelBuilder("k", target="sm_80")
    x = k.param_value("x", pf.s32)
    out = k.param_ptr("out", pf.s32)
    y = F.mul(k, x, n)
    assert y.type is pf.s32
    k.st(out, k.selp(1, 0, k.setp("lt", y, 0), type=pf.s32))
    k.st(out, k.cvt(y, pf.s64), offset=8, type=pf.b64)
    m = k.module()
    buf = np.zeros(4, np.int32)
    _run(m, [-7, buf])
    assert buf[0] == 1                       # -7*n < 0
    assert buf[2:4].view(np.int64)[0] == -7 * n


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, -1, -3, -4])
def test_div_rem_of_signed_register_truncate(n):
    xs = [-9, -8, -7, -1, 0, 1, 7, 9]
    k = pf.KernelBuilder("k", target="sm_80")
    src = k.param_ptr("src", pf.s32)
    out = k.param_ptr("out", pf.s32)
    t = k.tid()
    x = k.ld(k.add(src, k.mul(t, 4, mode="wide")), type=pf.s32)
    q, r = F.div(k, x, n), F.rem(k, x, n)
    if isinstance(r, int):
        r = k.mov(r, type=pf.s32)
    base = k.add(out, k.mul(t, 8, mode="wide"))
    k.st(base, q, type=pf.s32)
    k.st(base, r, type=pf.s32, offset=4)
    m = k.module()
    buf = np.zeros(2 * len(xs), np.int32)
    _run(m, [np.array(xs, np.int32), buf], block=len(xs))
    assert buf[0::2].tolist() == [_c_div(a, n) for a in xs]
    assert buf[1::2].tolist() == [_c_rem(a, n) for a in xs]


def test_int_fold_is_c_division():
    k = pf.KernelBuilder("k", target="sm_80")
    assert F.div(k, -7, 4) == -1 and F.rem(k, -7, 4) == -3
    assert F.div(k, -7, 3) == -2 and F.rem(k, -7, 3) == -1
    assert F.div(k, 7, -2) == -3 and F.rem(k, 7, -2) == 1
    assert F.div(k, 12, 4) == 3 and F.rem(k, 13, 4) == 1


def test_unsigned_power_of_two_keeps_type_and_values():
    k = pf.KernelBuilder("k", target="sm_80")
    x = k.param_value("x", pf.u32)
    out = k.param_ptr("out", pf.u32)
    for j, y in enumerate((F.mul(k, x, 8), F.div(k, x, 8), F.rem(k, x, 8))):
        assert y.type is pf.u32
        k.st(out, y, offset=4 * j)
    buf = np.zeros(3, np.uint32)
    _run(k.module(), [0xFFFFFFF3, buf])
    assert buf.tolist() == [(0xFFFFFFF3 * 8) % 2**32, 0xFFFFFFF3 // 8, 0xFFFFFFF3 % 8]


def test_negative_divisor_of_unsigned_register_refused():
    k = pf.KernelBuilder("k", target="sm_80")
    x = k.param_value("x", pf.u32)
    with pytest.raises(pf.ValidationError, match="negative") as info:
        F.div(k, x, -4)  # <- udiv
    assert_located(info.value, "<- udiv", __file__)
    with pytest.raises(pf.ValidationError, match="negative"):
        F.rem(k, x, -4)
    with pytest.raises(pf.ValidationError, match="division by zero"):
        F.div(k, x, 0)


def test_wide_negative_factor():
    k = pf.KernelBuilder("k", target="sm_80")
    x = k.param_value("x", pf.u32)
    with pytest.raises(pf.ValidationError, match="negative") as info:
        F.wide(k, x, -3)  # <- wide
    assert_located(info.value, "<- wide", __file__)
    s = k.param_value("s", pf.s32)
    out = k.param_ptr("out", pf.s64)
    k.st(out, F.wide(k, s, -3), type=pf.b64)
    buf = np.zeros(1, np.int64)
    _run(k.module(), [5, -7, buf])
    assert buf[0] == 21


def test_float_factor_refused_at_line():
    k = pf.KernelBuilder("k", target="sm_80")
    x = k.param_value("x", pf.u32)
    with pytest.raises(pf.ValidationError, match="takes an int") as info:
        F.mul(k, x, 1.5)  # <- fmul
    assert_located(info.value, "<- fmul", __file__)
    with pytest.raises(pf.ValidationError, match="takes an int"):
        F.mad(k, x, 2.5, 0)
    assert F.mul(k, 3, np.int64(4)) == 12
