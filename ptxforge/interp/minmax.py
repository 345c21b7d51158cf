"""Floating-point min and max as the hardware computes them, for every path that has them: the min/max
instructions, the half-precision atomics (atom/red) and the bulk and tensor reductions.

Measured on the H200 for every ordered pair of +-0, +-NaN, +-1 and +-inf (`tests/test_interp_minmax.py` holds
the interpreter to a reference of this rule, and on a GPU to the GPU); the PTX ISA text leaves signed zeros
and NaN results open:

- -0 is below +0, whichever operand it is: min(+0, -0) = min(-0, +0) = -0, and max gives +0;
- a NaN operand loses to a number (IEEE 754-2019 minimumNumber / maximumNumber); with `.NaN` it wins;
- a NaN result of f16, bf16 and f32 is the canonical NaN (sign clear, every exponent and fraction bit set:
  0x7FFF, 0x7FFFFFFF), whatever NaNs came in; min.f64 / max.f64 of two NaNs return the second operand's.
"""

from __future__ import annotations

import numpy as np

_PTXFORGE_INTERNAL = True

#: the NaN a 16- or 32-bit float min/max writes (by the format's width in bits)
CANONICAL_NAN = {16: np.uint16(0x7FFF), 32: np.uint32(0x7FFFFFFF)}


def min_max(op: str, a, b, nan: bool = False):
    """op ("min" or "max") of float arrays `a` and `b` by value, -0 below +0: a NaN operand loses to a number
    (wins with `nan`, the instructions' .NaN); of two NaNs the result is `b` (an f16, bf16 or f32 result is
    then made the canonical NaN by `canonical_nan`)."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    sa, sb = np.signbit(a), np.signbit(b)
    if op == "min":
        take_a = (a < b) | ((a == b) & sa & ~sb)
    else:
        take_a = (a > b) | ((a == b) & ~sa & sb)
    an, bn = np.isnan(a), np.isnan(b)
    take_a = (take_a | bn) & ~an if not nan else take_a | (an & ~bn)
    return np.where(take_a, a, b)


def canonical_nan(bits, values):
    """Raw result bits (uint16 or uint32) of a 16- or 32-bit float min/max, each NaN among `values` (the
    results as floats) made the canonical NaN."""
    bits = np.asarray(bits)
    return np.where(np.isnan(values), CANONICAL_NAN[bits.dtype.itemsize * 8], bits)
