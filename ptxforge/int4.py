"""Packed 4-bit integers in numpy: pack, unpack, random data and the reference GEMM.

Layout: two values per byte along the packed axis, the even index in the LOW nibble
(the order mma.sync's .s4/.u4 fragments and ldmatrix expect).  Signed values (s4) are
in [-8, 7], unsigned (u4) in [0, 15].
"""

from __future__ import annotations

import numpy as np

from .errors import ValidationError

_PTXFORGE_INTERNAL = True  # errors about the caller's arrays name the caller's line

#: operand kind -> (least value, greatest value)
RANGES = {"s4": (-8, 7), "u4": (0, 15), "s8": (-128, 127), "u8": (0, 255)}


def _kind(signed: bool) -> str:
    return "s4" if signed else "u4"


def _check_range(values: np.ndarray, lo: int, hi: int, what: str) -> None:
    if values.size == 0:
        return
    vmin, vmax = int(values.min()), int(values.max())
    if vmin < lo or vmax > hi:
        raise ValidationError(f"{what} must lie in [{lo}, {hi}], found values in [{vmin}, {vmax}]")


def pack_int4(values, axis: int = -1, *, signed: bool = True) -> np.ndarray:
    """Pack 4-bit integers two per byte along `axis` (even index -> low nibble).

    `values` is an integer array with values in [-8, 7] (signed) or [0, 15] (unsigned); the
    length of `axis` must be even.  Returns uint8 with that axis halved.
    """
    v = np.asarray(values)
    if not np.issubdtype(v.dtype, np.integer):
        raise ValidationError(f"pack_int4 takes an integer array, got dtype {v.dtype}")
    if v.ndim == 0:
        raise ValidationError("pack_int4 takes an array with at least one axis, got a scalar")
    axis = _axis(axis, v.ndim)
    n = v.shape[axis]
    if n % 2:
        raise ValidationError(f"pack_int4 needs an even length along axis {axis} (two values per byte), "
                              f"got {n}; pad with zeros to {n + 1}")
    lo, hi = RANGES[_kind(signed)]
    _check_range(v, lo, hi, f"{'signed' if signed else 'unsigned'} int4 values")
    v = np.moveaxis(v, axis, -1).astype(np.int16)
    nib = (v & 0xF).astype(np.uint8)
    packed = nib[..., 0::2] | (nib[..., 1::2] << 4)
    return np.ascontiguousarray(np.moveaxis(packed.astype(np.uint8), -1, axis))


def unpack_int4(packed, k: int | None = None, axis: int = -1, *, signed: bool = True) -> np.ndarray:
    """Inverse of pack_int4: int8 values (two per byte), `k` of them along `axis` (default: all)."""
    p = np.asarray(packed)
    if p.dtype != np.uint8 and p.dtype != np.int8:
        raise ValidationError(f"unpack_int4 takes uint8 (or int8) packed bytes, got dtype {p.dtype}")
    if p.ndim == 0:
        raise ValidationError("unpack_int4 takes an array with at least one axis, got a scalar")
    p = p.view(np.uint8)
    axis = _axis(axis, p.ndim)
    full = 2 * p.shape[axis]
    if k is None:
        k = full
    if not isinstance(k, (int, np.integer)) or not 0 <= k <= full:
        raise ValidationError(f"unpack_int4: k={k!r} values do not fit {p.shape[axis]} bytes "
                              f"(at most {full})")
    q = np.moveaxis(p, axis, -1)
    out = np.empty(q.shape[:-1] + (full,), dtype=np.int8)
    lo = (q & 0xF).astype(np.int8)
    hi = (q >> 4).astype(np.int8)
    if signed:
        lo = np.where(lo >= 8, lo - 16, lo).astype(np.int8)
        hi = np.where(hi >= 8, hi - 16, hi).astype(np.int8)
    out[..., 0::2] = lo
    out[..., 1::2] = hi
    return np.ascontiguousarray(np.moveaxis(out[..., :k], -1, axis))


def random_int4(shape, rng=None, *, signed: bool = True, extremes: bool = False) -> np.ndarray:
    """Random 4-bit integers (int8 array).  `extremes=True` draws only the two end values."""
    rng = np.random.default_rng(rng)
    lo, hi = RANGES[_kind(signed)]
    if extremes:
        return rng.choice(np.array([lo, hi], dtype=np.int8), size=shape)
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int8)


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValidationError(f"axis {axis} is out of range for an array with {ndim} axes")
    return axis % ndim


def reference_gemm(a_packed, b_packed, k: int | None = None, *, signed: bool = True) -> np.ndarray:
    """C[M, N] = A[M, K] . B[N, K]^T for packed 4-bit A and B (both K-contiguous), exact, int64."""
    a = np.asarray(a_packed)
    b = np.asarray(b_packed)
    for name, x in (("A", a), ("B", b)):
        if x.ndim != 2:
            raise ValidationError(f"reference_gemm: packed {name} must be 2-D [rows, K/2], got shape {x.shape}")
    if a.shape[1] != b.shape[1]:
        raise ValidationError(f"reference_gemm: A has {a.shape[1]} bytes per row and B {b.shape[1]}; "
                              "both hold the same K")
    if k is None:
        k = 2 * a.shape[1]
    return exact_matmul_nt(unpack_int4(a, k, signed=signed), unpack_int4(b, k, signed=signed))


def reference_gemm_int8(a, b) -> np.ndarray:
    """C = A . B^T for 8-bit A [M, K], B [N, K] (int8 or uint8), exact, int64."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValidationError(f"reference_gemm_int8 needs A [M, K] and B [N, K], got {a.shape} and {b.shape}")
    return exact_matmul_nt(a, b)


def exact_matmul_nt(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A . B^T of small integers, exact, as int64.

    Runs in float64 (BLAS) where every partial sum is an integer below 2**53 in magnitude, which
    float64 represents exactly: true for 8-bit operands up to K = 2**39.  Larger K falls back to
    integer arithmetic.
    """
    bound = int(np.abs(a).max(initial=0)) * int(np.abs(b).max(initial=0)) * a.shape[1]
    if bound < 2 ** 53:
        return (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int64)
    return a.astype(np.int64) @ b.astype(np.int64).T


def wrap_int32(c: np.ndarray) -> np.ndarray:
    """An exact int64 result reduced the way an s32 accumulator holds it (two's complement wrap)."""
    return np.asarray(c).astype(np.int64).astype(np.uint64).astype(np.uint32).view(np.int32)


# ---------------------------------------------------------------- unsigned spellings

def pack_uint4(values, axis: int = -1) -> np.ndarray:
    """pack_int4 for unsigned values in [0, 15]."""
    return pack_int4(values, axis, signed=False)


def unpack_uint4(packed, k: int | None = None, axis: int = -1) -> np.ndarray:
    """unpack_int4 for unsigned nibbles: values in [0, 15] (as int8)."""
    return unpack_int4(packed, k, axis, signed=False)


def random_uint4(shape, rng=None, *, extremes: bool = False) -> np.ndarray:
    """random_int4 for unsigned values: an int8 array of `shape` with values in [0, 15] (`extremes` favours 0 and
    15).
    """
    return random_int4(shape, rng, signed=False, extremes=extremes)


def reference_gemm_u4(a_packed, b_packed, k: int | None = None) -> np.ndarray:
    """reference_gemm for unsigned nibbles: the exact product A . B^T (int64) of packed u4 operands; `k` is the
    logical K.
    """
    return reference_gemm(a_packed, b_packed, k, signed=False)
