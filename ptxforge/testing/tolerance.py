"""How a kernel's output is compared with its reference: exactly, within ulps, or relatively.

    Array("y", ("n",), np.float32, role="out", tolerance=ulps(2))       # at most 2 units in the last place
    Array("y", ("n",), np.float32, role="out", tolerance=relative(1e-5, atol=1e-7))

* `exact()` (the default, and the only mode for integer outputs): the bits are equal (floats:
  the same bit pattern, so -0.0 differs from +0.0 and NaN equals only the same NaN).
* `ulps(n)`: floats at most n representable values apart, counted across zero (the largest
  negative subnormal and the smallest positive one are 2 apart, -0.0 and +0.0 are 0 apart).
  NaN matches NaN of any payload and nothing else; an infinity matches only itself (it is one
  step from the largest finite value, so n >= 1 lets MAX match inf).  float16, bfloat16
  (arrays declared "bf16", held in uint16), float32 and float64.
* `relative(rtol, atol=0)`: |got - want| <= atol + rtol * |want| elementwise (numpy's isclose,
  not symmetric); NaN matches NaN; infinities must be equal.

A tolerance is applied to each element and returns a boolean mask of the elements that pass.
Given the output's `poison` (what it held before the kernel ran: a NaN for floats), an element
that still holds it, or where the reference expects it, passes only when both are the same bits:
an unwritten element never passes as "a NaN where NaN was expected" or as a value within atol.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Tolerance", "exact", "ulps", "relative", "ulp_distance", "check_tolerance"]

#: For each float width: (unsigned container, sign bit, magnitude mask).
_FLOAT_BITS = {2: (np.uint16, 0x8000, 0x7FFF), 4: (np.uint32, 0x8000_0000, 0x7FFF_FFFF),
               8: (np.uint64, 1 << 63, (1 << 63) - 1)}


@dataclass(frozen=True)
class Tolerance:
    """A comparison mode: "exact", "ulps" (bound in units in the last place) or "relative"."""

    mode: str = "exact"
    ulps: int = 0
    rtol: float = 0.0
    atol: float = 0.0

    def passes(self, got: np.ndarray, want: np.ndarray, *, bf16: bool = False, poison=None) -> np.ndarray:
        """Mask of the elements of `got` that match `want` under this tolerance; where either holds
        `poison` (a scalar of got's dtype), the bits must be equal (see the module docstring)."""
        got = np.asarray(got)
        want = np.asarray(want)
        if got.shape != want.shape:
            raise ValueError(f"compared arrays differ in shape: {got.shape} vs {want.shape}")
        is_float = got.dtype.kind == "f" or bf16
        if self.mode == "exact" or not is_float:
            return _same_bits(got, want, bf16)
        ok = self._within(got, want, bf16)
        if poison is None:
            return ok
        u = _FLOAT_BITS[got.dtype.itemsize][0]
        g, w = got.view(u), want.astype(got.dtype).view(u)
        p = np.asarray(poison, got.dtype).reshape(1).view(u)[0]
        return np.where((g == p) | (w == p), g == w, ok)

    def _within(self, got, want, bf16):
        g, w = _as_float(got, bf16), _as_float(want.astype(got.dtype) if not bf16 else want, bf16)
        if self.mode == "ulps":
            both_nan = np.isnan(g) & np.isnan(w)
            d = ulp_distance(got, want.astype(got.dtype), bf16=bf16)
            return both_nan | (~np.isnan(g) & ~np.isnan(w) & (d <= self.ulps))
        if self.mode == "relative":
            with np.errstate(all="ignore"):
                close = np.abs(g - w) <= self.atol + self.rtol * np.abs(w)
            inf = np.isinf(g) | np.isinf(w)
            return (np.isnan(g) & np.isnan(w)) | np.where(inf, g == w, close)
        raise ValueError(f"unknown tolerance mode {self.mode!r}")

    def describe(self) -> str:
        """The bound in words, for failure reports."""
        if self.mode == "ulps":
            return f"within {self.ulps} ulp"
        if self.mode == "relative":
            return f"within rtol={self.rtol:g}, atol={self.atol:g}"
        return "bit-exact"


def exact() -> Tolerance:
    """Bit-for-bit equality."""
    return Tolerance("exact")


def ulps(n: int) -> Tolerance:
    """Floats at most `n` units in the last place apart (see the module docstring); `n` is a whole
    number >= 0 (an int or numpy integer; TypeError for anything else, ValueError when negative)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"ulps takes a whole number n >= 0 (an int such as ulps(2)), got {n!r}")
    if n < 0:
        raise ValueError(f"ulps takes a whole number n >= 0 (an int such as ulps(2)), got {n}")
    return Tolerance("ulps", ulps=int(n))


def relative(rtol: float, atol: float = 0.0) -> Tolerance:
    """|got - want| <= atol + rtol * |want| (see the module docstring); `rtol` and `atol` are finite
    real numbers >= 0 (TypeError for anything else, ValueError when negative, NaN or infinite)."""
    for name, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"relative takes finite rtol, atol >= 0 (numbers such as relative(1e-5, atol=1e-7)), "
                            f"got {name}={v!r}")
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"relative takes finite rtol, atol >= 0 (numbers such as relative(1e-5, atol=1e-7)), "
                             f"got {name}={v!r}")
    return Tolerance("relative", rtol=float(rtol), atol=float(atol))


def check_tolerance(tolerance, where: str) -> None:
    """Raise TypeError, naming `where`, unless `tolerance` is None or a Tolerance (what exact(), ulps(n) and
    relative(rtol, atol) return)."""
    if tolerance is not None and not isinstance(tolerance, Tolerance):
        raise TypeError(f"{where}: tolerance must be exact(), ulps(n) or relative(rtol, atol=0) from "
                        f"ptxforge.testing (or None for exact), got {tolerance!r}")


def _same_bits(got, want, bf16):
    if got.dtype.kind == "f" or bf16:
        u = _FLOAT_BITS[got.dtype.itemsize][0]
        return got.view(u) == want.astype(got.dtype).view(u)
    with np.errstate(all="ignore"):
        cast = want.astype(got.dtype)
        fits = cast.astype(want.dtype) == want  # a reference value the output type cannot hold never matches
    return fits & (got == cast)


def _as_float(a, bf16):
    if bf16:
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def ulp_distance(a, b, *, bf16: bool = False) -> np.ndarray:
    """How many representable values lie between float arrays `a` and `b` (same dtype), as int64
    (saturating).  NaNs give some large distance; callers test them separately."""
    a, b = np.asarray(a), np.asarray(b)
    u, sign, mag = _FLOAT_BITS[a.dtype.itemsize]
    ba, bb = a.view(u).astype(np.uint64), b.view(u).astype(np.uint64)
    ma, mb = ba & np.uint64(mag), bb & np.uint64(mag)
    same_sign = ((ba ^ bb) & np.uint64(sign)) == 0
    with np.errstate(over="ignore"):
        d = np.where(same_sign, np.where(ma > mb, ma - mb, mb - ma), ma + mb)  # across zero: both magnitudes
    return np.minimum(d, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)
