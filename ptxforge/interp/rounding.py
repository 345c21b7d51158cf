"""Exact rounding: a real result rounded once to a PTX float format in any of its four rounding modes.

numpy rounds to nearest only, and rounds twice where a result passes through float64 first (an
int64 converted to f32, an f64 fused multiply-add written as a product and a sum).  Here a result is
held exactly, as a rational, and rounded once: `round_rational` to the format's precision and
exponent range, with IEEE 754's rules for the rounding modes (.rn nearest-even, .rz toward zero, .rm
toward -inf, .rp toward +inf), subnormals, and overflow (.rz never overflows to infinity, .rm only
below zero, .rp only above).  `fma_f64` is the fused f64 multiply-add, vectorized (error-free
transformations and a sum rounded to odd, exact within the exponent range they need; the rest
exactly, through rationals).  `directed` computes an arithmetic instruction's result in a directed
mode element by element; `convert` rounds a conversion's exact source.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_PTXFORGE_INTERNAL = True

#: format -> (precision in bits, least normal exponent, greatest exponent)
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023)}
MODES = ("rn", "rz", "rm", "rp")


def _floor_log2(q: Fraction) -> int:
    """floor(log2(q)) of a positive rational."""
    n, d = q.numerator, q.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1
    return e


def round_rational(q: Fraction, fmt: str, mode: str) -> float:
    """`q` rounded once to format `fmt` in rounding mode `mode`, as a Python float holding the exact rounded value
    (±inf on overflow where the mode overflows).  A zero `q` gives +0.0: the sign of an exact zero is the
    caller's (it depends on the operation)."""
    if q == 0:
        return 0.0
    p, emin, emax = FORMATS[fmt]
    neg = q < 0
    a = -q if neg else q
    qe = max(_floor_log2(a), emin) - (p - 1)  # the quantum: one unit in the last place
    n, d = a.numerator, a.denominator
    if qe >= 0:
        m, r = divmod(n, d << qe)
        dd = d << qe
    else:
        m, r = divmod(n << -qe, d)
        dd = d
    if r:
        if mode == "rn":
            up = 2 * r > dd or (2 * r == dd and m & 1)
        elif mode == "rz":
            up = False
        elif mode == "rm":
            up = neg
        else:  # rp
            up = not neg
        m += up
    largest = ((1 << p) - 1) << (emax - p + 1)
    if m and qe >= 0 and (m << qe) > largest or qe < 0 and m > (largest << -qe):
        toward_inf = mode == "rn" or (mode == "rp" and not neg) or (mode == "rm" and neg)
        v = math.inf if toward_inf else float(largest)
    else:
        v = math.ldexp(float(m), qe)  # m < 2^(p+1): exact
    return -v if neg else v


def _as_format(values, fmt: str) -> np.ndarray:
    """Python floats (exactly representable in `fmt`) as the numpy array of the format's storage: float16,
    float32, float64, or for bf16 the uint16 bit patterns."""
    if fmt == "bf16":
        f = np.asarray(values, dtype=np.float64).astype(np.float32)  # exact: bf16 values are f32 values
        return (f.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return np.asarray(values, dtype=np.float64).astype({"f16": np.float16, "f32": np.float32,
                                                         "f64": np.float64}[fmt])


# ---------------------------------------------------------------- the fused f64 multiply-add

_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitting constant for 53-bit doubles


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    p = a * b
    ca, cb = _SPLIT * a, _SPLIT * b
    ah, bh = ca - (ca - a), cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _odd_sum(a, b):
    """a + b rounded to odd: the nearest result, moved one place toward the exact sum when it was inexact and
    its last bit even."""
    s, e = _two_sum(a, b)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    fix = (e != 0) & even
    return np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def fma_f64(a, b, c) -> np.ndarray:
    """Correctly rounded (nearest-even) fused a * b + c of float64 arrays, as fma.rn.f64 computes it.

    Within the exponent range where the error-free transformations are exact (every operand and the product
    between 2^-900 and 2^990 in magnitude, or an operand zero) the product's exact error and two exact sums
    leave three parts whose low two are added rounded to odd before the last rounding to nearest; every other
    element (an infinity or NaN among the operands, or an extreme exponent) is computed exactly through
    rationals, with IEEE 754's signs of zero."""
    a, b, c = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(all="ignore"):
        ph, pl = _two_prod(a, b)
        th, tl = _two_sum(c, pl)
        vh, vl = _two_sum(ph, th)
        out = vh + _odd_sum(tl, vl)
        mag = np.abs(np.stack([a, b, c, ph]))
        safe = ((mag == 0) | ((mag > 2.0 ** -900) & (mag < 2.0 ** 990))).all(axis=0) \
            & (np.abs(out) > 2.0 ** -900) & np.isfinite(out)
    if safe.all():
        return out
    out = np.array(out)
    for i in zip(*np.nonzero(~safe)):
        out[i] = _fma_exact(float(a[i]), float(b[i]), float(c[i]), "rn", "f64")
    return out


def _fma_exact(a: float, b: float, c: float, mode: str, fmt: str) -> float:
    """a * b + c rounded once to `fmt` in `mode`, for Python floats, with IEEE 754's special cases."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        if math.isfinite(a) and math.isfinite(b) and math.isinf(c):
            return c  # the exact product is finite, even where a * b in floats would overflow to an infinity
        return a * b + c  # NaN and infinities: exact operations, so no rounding to choose
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        return _zero_sum(math.copysign(1.0, a) * math.copysign(1.0, b) < 0, math.copysign(1.0, c) < 0, mode)
    return round_rational(q, fmt, mode)


def _zero_sum(neg_x: bool, neg_y: bool, mode: str) -> float:
    """The sign of an exactly zero sum x + y (IEEE 754 6.3): the addends' sign when they share it, else +0, or -0
    rounding toward -inf."""
    if neg_x == neg_y:
        return -0.0 if neg_x else 0.0
    return -0.0 if mode == "rm" else 0.0


# ---------------------------------------------------------------- arithmetic in a directed mode

def _exact(opname: str, xs: tuple, mode: str, fmt: str) -> float:
    """One element of `opname` on finite Python floats `xs`, rounded once to `fmt` in `mode`."""
    if opname in ("add", "sub"):
        x, y = xs[0], (xs[1] if opname == "add" else -xs[1])
        q = Fraction(x) + Fraction(y)
        return _zero_sum(math.copysign(1.0, x) < 0, math.copysign(1.0, y) < 0, mode) if q == 0 \
            else round_rational(q, fmt, mode)
    if opname in ("fma", "mad"):
        return _fma_exact(*xs, mode, fmt)
    if opname == "mul":
        q = Fraction(xs[0]) * Fraction(xs[1])
        return math.copysign(0.0, xs[0]) * math.copysign(1.0, xs[1]) if q == 0 else round_rational(q, fmt, mode)
    if opname in ("div", "rcp"):
        x, y = (1.0, xs[0]) if opname == "rcp" else xs
        if y == 0:
            if x == 0:
                return math.nan  # 0 / 0
            return math.copysign(math.inf, x) * math.copysign(1.0, y)  # finite / 0: a signed infinity, every mode
        q = Fraction(x) / Fraction(y)
        return math.copysign(0.0, x) * math.copysign(1.0, y) if q == 0 else round_rational(q, fmt, mode)
    if opname == "sqrt":
        return _sqrt_exact(xs[0], mode, fmt)
    raise KeyError(opname)


def _sqrt_exact(x: float, mode: str, fmt: str) -> float:
    """sqrt(x) rounded once: an integer square root of x scaled so that the quantum is an integer, with the
    remainder deciding the rounding (an exact square needs none)."""
    if x < 0:
        return math.nan
    if x == 0:
        return x  # sqrt(-0) is -0
    p, emin, _ = FORMATS[fmt]
    q = Fraction(x)
    qe = max(_floor_log2(q) // 2, emin) - (p - 1)  # the quantum of sqrt(x)
    y = q / Fraction(2) ** (2 * qe)  # sqrt(x) / 2^qe = sqrt(y)
    m = math.isqrt(y.numerator // y.denominator)
    exact = m * m == y
    if not exact:
        if mode == "rn":
            up = Fraction(2 * m + 1) ** 2 < 4 * y  # the halfway point is never a root of a rational here
        else:
            up = mode == "rp"  # sqrt is positive: rm and rz truncate
        m += up
    return math.ldexp(float(m), qe)


def directed(opname: str, xs: list, mode: str, fmt: str, nonfinite) -> np.ndarray:
    """`opname` (add sub mul fma mad div rcp sqrt) of the arrays `xs` (float32 or float64, already flushed where
    .ftz asks) rounded once to `fmt` in `mode`, element by element.  An element with a NaN or infinite operand
    takes `nonfinite(*operands)` (the operation in float64: IEEE 754's result there is exact, so no rounding
    mode changes it)."""
    arrays = np.broadcast_arrays(*[np.asarray(x, dtype=np.float64) for x in xs])
    shape = arrays[0].shape
    flat = [x.reshape(-1) for x in arrays]
    out = np.empty(flat[0].size, dtype=np.float64)
    with np.errstate(all="ignore"):
        for i in range(out.size):
            args = tuple(float(x[i]) for x in flat)
            if all(math.isfinite(v) for v in args):
                out[i] = _exact(opname, args, mode, fmt)
            else:
                out[i] = nonfinite(*(np.float64(v) for v in args))
    return _as_format(out.reshape(shape), fmt)


# ---------------------------------------------------------------- conversions

def convert(values, exact_source, fmt: str, mode: str) -> np.ndarray:
    """Conversion to `fmt` rounded once in `mode`: `values` is the source as numpy read it (integers of any width,
    or floats already widened to float64 without loss); exact_source says whether they are integers (converted
    from the integer itself, not from a float64 that may already have rounded it)."""
    v = np.asarray(values)
    flat = v.reshape(-1)
    out = np.empty(flat.size, dtype=np.float64)
    for i in range(flat.size):
        x = flat[i]
        if exact_source:
            out[i] = round_rational(Fraction(int(x)), fmt, mode)
        else:
            f = float(x)
            out[i] = f if (not math.isfinite(f) or f == 0) else round_rational(Fraction(f), fmt, mode)
    return _as_format(out.reshape(v.shape), fmt)
