"""bfloat16 in numpy, which has no bf16 type: float arrays to bf16 bit patterns (uint16) and back.

The bf16 GEMMs (`Bf16Gemm`) take numpy operands as these bit patterns; `to_bf16` rounds float values
once to the nearest bf16 (ties to even, as `cvt.rn.bf16.f32` does, subnormals kept; NaN stays a quiet
NaN), `from_bf16` widens bit patterns back to float32 exactly.  The interpreter rounds to bf16 through
`to_bf16` too.
"""

from __future__ import annotations

import numpy as np

from .errors import ValidationError

_PTXFORGE_INTERNAL = True  # errors about the caller's arrays name the caller's line


def from_bf16(bits) -> np.ndarray:
    """bf16 bit patterns (uint16, or int16 viewed as such) -> float32, exactly."""
    b = np.asarray(bits)
    if b.dtype.itemsize != 2 or b.dtype.kind not in "uiV":
        raise ValidationError(f"bf16 bit patterns are 16-bit integers (uint16), got {b.dtype}")
    return (b.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bf16(x) -> np.ndarray:
    """float values (float16, float32 or float64) -> bf16 bit patterns (uint16), rounded once to nearest even,
    subnormals kept, past the largest bf16 infinity; a NaN stays a quiet NaN with its sign."""
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise ValidationError(f"to_bf16 rounds float arrays, got {a.dtype}; integers would need a scale first")
    with np.errstate(invalid="ignore", over="ignore"):
        a = a.astype(np.float64)  # exact (a signaling NaN comes out quiet)
        _, e = np.frexp(a)
        q = np.maximum(e - 8, -133)  # the quantum at 8 significant bits, down to bf16's least subnormal
        r = np.ldexp(np.rint(np.ldexp(a, -q)), q)  # exact scalings; rint rounds half to even
        bits = (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        nan = (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16) | np.uint16(0x40)
    return np.where(np.isnan(a), nan, bits)
