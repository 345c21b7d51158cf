"""KernelBuilder.for_range runs exactly the values of Python's range(start, stop, step): for every
step sign, with signed bounds compared signed, without wrapping near the top or bottom of the
counter's type, and refuses bounds its counter type cannot hold.  Each kernel is assembled by ptxas
and run on the interpreter; the expected values are Python's range."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp

from support.located import assert_located

CAP = 64  # a runaway loop is cut here by a break


def _values(start, stop, step, *, type=pf.u32, reg_bounds=(), uniform=True):
    """The counter values the built loop takes (at most CAP), run on the interpreter."""
    t = type
    k = pf.KernelBuilder("k", target="sm_80")
    out = k.param_ptr("out", t)
    bounds = {}
    for nm in reg_bounds:
        bounds[nm] = k.param_value(nm, t)
    a = bounds.get("start", start)
    b = bounds.get("stop", stop)
    n = k.mov(0, type=pf.u32, dst=k.reg(pf.u32, "n"))
    with k.for_range(a, b, step, type=t, uniform=uniform) as i:
        k.st(k.add(out, k.mul(n, t.bits // 8, mode="wide")), i, type=t)
        k.add(n, 1, dst=n)
        k.break_(k.setp("ge", n, CAP))
    k.st(out, n, type=pf.u32, offset=CAP * t.bits // 8)
    m = k.module()
    pf.assemble(m, "sm_80", backend="ptxas")
    dtype = np.dtype(f"{'i' if t.kind == 's' else 'u'}{t.bits // 8}")
    buf = np.zeros(CAP + (8 // dtype.itemsize if dtype.itemsize < 8 else 1), dtype)
    args = [buf] + [v for nm, v in (("start", start), ("stop", stop)) if nm in reg_bounds]
    interp.run(m, "k", block=1, args=args)
    count = int(buf[CAP:].view(np.uint32)[0])
    return buf[:count].tolist()


CASES = [
    (0, 10, 1), (0, 10, 3), (10, 0, -3), (10, 0, -1), (10, 1, -3), (5, 5, 1), (5, 0, 1), (0, 5, -1),
    (4294967290, 4294967295, 4), (4294967290, 4294967295, 2), (5, 0, -7), (0, 4294967295, 2147483647),
]


@pytest.mark.parametrize("start,stop,step", CASES)
def test_u32_int_bounds_match_range(start, stop, step):
    assert _values(start, stop, step) == list(range(start, stop, step))[:CAP]


@pytest.mark.parametrize("start,stop,step", [(9, -1, -1), (-5, 5, 2), (2**31 - 6, 2**31 - 1, 4), (-2**31 + 5, -2**31, -4),
                                             (3, -8, -5)])
def test_s32_int_bounds_match_range(start, stop, step):
    assert _values(start, stop, step, type=pf.s32) == list(range(start, stop, step))[:CAP]


@pytest.mark.parametrize("start,stop,step", [(0, -5, 1), (0, 5, 2), (2**31 - 6, 2**31 - 1, 4), (10, -10, -3),
                                             (-2**31 + 5, -2**31, -4)])
def test_s32_register_stop_match_range(start, stop, step):
    got = _values(start, stop, step, type=pf.s32, reg_bounds=("stop",))
    assert got == list(range(start, stop, step))[:CAP]


@pytest.mark.parametrize("start,stop,step", [(4294967290, 4294967295, 4), (0, 7, 3), (10, 0, -3), (2, 0, -4)])
def test_u32_register_bounds_match_range(start, stop, step):
    got = _values(start, stop, step, reg_bounds=("start", "stop"), uniform=False)
    assert got == list(range(start, stop, step))[:CAP]


def test_u64_register_stop_near_top():
    start, stop = 2**64 - 10, 2**64 - 1
    assert _values(start, stop, 6, type=pf.u64, reg_bounds=("stop",)) == list(range(start, stop, 6))


def test_bounds_the_counter_cannot_hold_are_refused():
    k = pf.KernelBuilder("k", target="sm_80")
    with pytest.raises(pf.ValidationError, match="signed counter") as info:
        with k.for_range(9, -1, -1):  # <- neg-stop
            pass
    assert_located(info.value, "<- neg-stop", __file__)
    with pytest.raises(pf.ValidationError, match="wider counter"):
        with k.for_range(0, 2**32):
            pass
    n = k.param_value("n", pf.s32)
    with pytest.raises(pf.ValidationError, match="compare them") as info:
        with k.for_range(0, n):  # <- mixed-sign
            pass
    assert_located(info.value, "<- mixed-sign", __file__)
    with pytest.raises(pf.ValidationError, match="non-zero int"):
        with k.for_range(0, 4, 1.0):
            pass
    with pytest.raises(pf.ValidationError, match="not an integer type"):
        with k.for_range(0, 4, type=pf.f32):
            pass
