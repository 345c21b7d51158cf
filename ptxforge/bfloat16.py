"""bfloat16 in numpy, which has no bf16 type: float arrays to bf16 bit patterns (uint16) and back.

The bf16 GEMMs (`Bf16Gemm`) take numpy operands as these bit patterns; `to_bf16` rounds float32 /
float64 values to the nearest bf16 (ties to even, as `cvt.rn.bf16.f32` does; NaN stays a quiet NaN),
`from_bf16` widens bit patterns back to float32 exactly.
"""

from __future__ import annotations

import numpy as np

from .errors import ValidationError


def from_bf16(bits) -> np.ndarray:
    """bf16 bit patterns (uint16, or int16 viewed as such) -> float32, exactly."""
    b = np.asarray(bits)
    if b.dtype.itemsize != 2 or b.dtype.kind not in "uiV":
        raise ValidationError(f"bf16 bit patterns are 16-bit integers (uint16), got {b.dtype}")
    return (b.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bf16(x) -> np.ndarray:
    """float values -> bf16 bit patterns (uint16), rounded to nearest even; NaN stays a quiet NaN.  float64 is
    rounded to float32 first (to nearest even), as a cvt chain would."""
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise ValidationError(f"to_bf16 rounds float arrays, got {a.dtype}; integers would need a scale first")
    a = a.astype(np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    out = np.where(np.isnan(a), (u >> np.uint64(16)) | np.uint64(0x40), rounded)
    return out.astype(np.uint16)
