"""printf: %a with a precision rounds its hexadecimal digits as the C library does, a Python int that does not
fit its conversion is refused at the user's line (not cut to its low bits), floats beyond a double are refused
with what is legal, numpy scalars are numbers like Python's, and a packed-half register for %f gets a hint that
fits it.  The oracle for formatting is the C library's snprintf."""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp

from support.located import assert_located

_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))


def _c(fmt, value):
    buf = ctypes.create_string_buffer(512)
    _LIBC.snprintf(buf, len(buf), fmt.encode(), ctypes.c_double(value))
    return buf.value.decode()


FORMATS = ["%.0a", "%.1a", "%.2a", "%.3a", "%.12a", "%.13a", "%.16a", "%#.0a", "%10.3a", "%-14.1A", "%+.2a",
           "%012.2a", "%a"]
VALUES = [1 / 3, 1.5, -0.1, 0.0, 1.0, 2.5, 5e-324, 2.2250738585072014e-308, 1e300, float.fromhex("0x1.18p0"),
          float.fromhex("0x1.28p0"), float.fromhex("0x1.fffffffffffffp0"), -123.456]


def test_hex_float_precision_matches_the_c_library():
    k = pf.KernelBuilder("k", target="sm_80")
    x = k.param_ptr("x", pf.f64)
    t = k.tid()
    v = k.ld(k.add(x, k.mul(t, 8, mode="wide")), type=pf.f64)
    fmt = "|".join(FORMATS) + "\n"
    k.printf(fmt, *([v] * len(FORMATS)))
    m = k.module()
    pf.assemble(m, "sm_80", backend="ptxas")
    report = interp.run(m, "k", block=len(VALUES), args=[np.array(VALUES, np.float64)])
    want = sorted("|".join(_c(f, v) for f in FORMATS) + "\n" for v in VALUES)
    assert sorted(report.printed) == want


def test_int_that_does_not_fit_is_refused():
    k = pf.KernelBuilder("k", target="sm_80")
    with pytest.raises(pf.ValidationError, match="use %lld") as info:
        k.printf("%d|\n", 2**40 + 5)  # <- big-int
    assert_located(info.value, "<- big-int", __file__)
    with pytest.raises(pf.ValidationError, match="does not fit"):
        k.printf("%*d|\n", 2**32 + 3, 1)
    with pytest.raises(pf.ValidationError, match="does not fit"):
        k.printf("%lld\n", 2**64)
    with pytest.raises(pf.ValidationError, match="does not fit"):
        k.printf("%d\n", -2**31 - 1)


def test_ints_at_the_edges_print_as_c_converts_them():
    k = pf.KernelBuilder("k", target="sm_80")
    k.printf("%d %u %x %d %lld %llu\n", -2**31, 2**32 - 1, -1, 2**32 - 1, -2**63, 2**64 - 1)
    m = k.module()
    pf.assemble(m, "sm_80", backend="ptxas")
    report = interp.run(m, "k", block=1, args=[])
    assert report.printed == [f"{-2**31} {2**32 - 1} ffffffff -1 {-2**63} {2**64 - 1}\n"]


def test_float_beyond_a_double_is_refused_at_line():
    k = pf.KernelBuilder("k", target="sm_80")
    with pytest.raises(pf.ValidationError, match="range of a double") as info:
        k.printf("%f\n", 2**1100)  # <- huge-float
    assert_located(info.value, "<- huge-float", __file__)


def test_numpy_scalars_are_numbers():
    k = pf.KernelBuilder("k", target="sm_80")
    k.printf("%.2f %d %u\n", np.float32(1.5), np.int32(-7), np.uint64(9))
    m = k.module()
    pf.assemble(m, "sm_80", backend="ptxas")
    assert interp.run(m, "k", block=1, args=[]).printed == ["1.50 -7 9\n"]
    with pytest.raises(pf.ValidationError, match="register or a number"):
        k.printf("%d\n", np.bool_(True))


def test_packed_half_register_hint():
    k = pf.KernelBuilder("k", target="sm_80")
    h2 = k.reg(pf.f16x2)
    with pytest.raises(pf.ValidationError) as info:
        k.printf("%f\n", h2)
    assert "pair of halves" in str(info.value) and "an integer" not in str(info.value)
