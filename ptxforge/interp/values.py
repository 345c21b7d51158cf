"""Register values as numpy arrays: storage dtypes, typed views, and the numeric helpers PTX
semantics need that numpy lacks (128-bit high products, bf16 rounding, bit counts).

Registers store raw bits in unsigned arrays of their declared width (pred: bool; .b128: 16-byte
records, `WORDS128`, which `as_words128` / `from_words128` turn into two uint64 words and back); an
instruction reads them through a view of its own type (`.s32` -> int32, `.f32` -> float32),
so no value is ever converted by accident.
"""

from __future__ import annotations

import numpy as np

from ..bfloat16 import to_bf16
from ..isa import types as T
from .findings import InterpUnsupported

_PTXFORGE_INTERNAL = True

UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SINT = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
FLOAT = {16: np.float16, 32: np.float32, 64: np.float64}


#: how a 128-bit register's value is held: one 16-byte record per thread (numpy has no 128-bit integer)
WORDS128 = np.dtype("V16")


def storage_dtype(t: T.ScalarType) -> np.dtype:
    """How a register of type `t` is stored: bool for predicates, 16-byte records for .b128, else unsigned of
    its width."""
    if t.is_pred:
        return np.dtype(bool)
    if t.bits == 128:
        return WORDS128
    return np.dtype(UINT[t.bits])


def as_words128(v) -> np.ndarray:
    """128-bit values (16-byte records, shape (N,)) as uint64 words, shape (N, 2), the low word first."""
    v = np.ascontiguousarray(v)
    return v.view(np.uint64).reshape(v.shape + (2,))


def from_words128(words) -> np.ndarray:
    """uint64 words of shape (N, 2), the low word first, as 128-bit values (16-byte records, shape (N,))."""
    w = np.ascontiguousarray(words, dtype=np.uint64)
    return w.view(WORDS128).reshape(w.shape[:-1])


def view_dtype(t: T.ScalarType) -> np.dtype:
    """The dtype an instruction of type `t` computes with (bf16 and packed pairs stay as bits)."""
    if t.is_pred:
        return np.dtype(bool)
    if t.bits == 128:
        return WORDS128
    if t.kind == "s":
        return np.dtype(SINT[t.bits])
    if t.kind == "f" and t.lanes == 1 and t is not T.bf16 and t is not T.tf32:
        return np.dtype(FLOAT[t.bits])
    return np.dtype(UINT[t.bits])


def float_literal_bits(value, ft: T.ScalarType, t: T.ScalarType):
    """The bits of float literal `value` of type `ft` (its IEEE encoding: f64, f32, f16, bf16), read as the bits
    type `t` (a store or move of the literal reads it through `.b32` / `.b64`), in t's view dtype."""
    if ft is T.bf16:
        bits = int(to_bf16(np.float64(value)))
    else:
        fdt = {64: np.float64, 32: np.float32, 16: np.float16}[ft.bits]
        bits = int(np.array(float(value), dtype=fdt).view(UINT[ft.bits]))
    return np.array(bits & mask_bits(t.bits), dtype=UINT[t.bits]).view(view_dtype(t))[()]


def mask_bits(bits: int) -> int:
    """The mask of the low `bits` bits: ``(1 << bits) - 1``."""
    return (1 << bits) - 1


def const(value, t: T.ScalarType):
    """A Python immediate as a numpy scalar of `t`'s view dtype (integers wrap to the width)."""
    dt = view_dtype(t)
    if t.is_pred:
        return np.bool_(bool(value))
    if dt.kind == "f":
        return dt.type(float(value))
    if t is T.bf16:
        return np.uint16(f32_to_bf16(np.float32(value)))
    if t.is_float:  # f16x2 / bf16x2 / tf32 take no immediates in PTX
        raise InterpUnsupported(f"an immediate ({value!r}) of type .{t.name} is not modelled")
    if isinstance(value, float):
        value = int(value)
    bits = t.bits
    raw = np.array(int(value) & mask_bits(bits), dtype=UINT[bits])
    return raw.view(dt)[()]


# ---------------------------------------------------------------- wide products

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


def mulhi_u64(a, b):
    """High 64 bits of the 128-bit product of two uint64 arrays."""
    a = np.asarray(a, dtype=np.uint64)
    b = np.asarray(b, dtype=np.uint64)
    a0, a1 = a & _M32, a >> _S32
    b0, b1 = b & _M32, b >> _S32
    p00 = a0 * b0
    p01 = a0 * b1
    p10 = a1 * b0
    p11 = a1 * b1
    mid = (p00 >> _S32) + (p01 & _M32) + (p10 & _M32)
    return p11 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32)


def mulhi_s64(a, b):
    """High 64 bits (as uint64 bits) of the signed 128-bit product of two int64 arrays."""
    ua = np.asarray(a).view(np.uint64) if np.ndim(a) else np.uint64(np.int64(a).view(np.uint64))
    ub = np.asarray(b).view(np.uint64) if np.ndim(b) else np.uint64(np.int64(b).view(np.uint64))
    hi = mulhi_u64(ua, ub)
    # signed high = unsigned high - (a<0 ? b : 0) - (b<0 ? a : 0)  (mod 2^64)
    hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) - np.where(np.asarray(b) < 0, ua, np.uint64(0))
    return hi


# ---------------------------------------------------------------- half precision

def bf16_to_f32(bits):
    """bf16 bit patterns (uint16) -> float32."""
    return (np.asarray(bits, dtype=np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x):
    """float32 -> bf16 bits, round to nearest even; NaN stays a quiet NaN (`ptxforge.bfloat16.to_bf16`)."""
    return to_bf16(np.asarray(x, dtype=np.float32))


def f16_bits_to_f32(bits):
    """IEEE half-precision bit patterns (uint16) as float32 values."""
    return np.asarray(bits, dtype=np.uint16).view(np.float16).astype(np.float32)


def half_to_f32(bits, is_bf16: bool):
    """16-bit float bit patterns as float32: bf16 when `is_bf16`, else f16."""
    return bf16_to_f32(bits) if is_bf16 else f16_bits_to_f32(bits)


#: the least normal value of each 16-bit float format (is_bf16 -> value): .ftz flushes what lies below it
HALF_LEAST_NORMAL = {False: np.float32(2.0 ** -14), True: np.float32(2.0 ** -126)}


def half_bits(x64, is_bf16: bool):
    """float64 values -> f16 (or bf16) bit patterns, rounded once to nearest even."""
    if not is_bf16:
        return np.asarray(x64).astype(np.float16).view(np.uint16)
    return to_bf16(np.asarray(x64, dtype=np.float64))


def bytes_to_elements(b, ebits: int):
    """(..., nbytes) bytes -> (..., nbytes * 8 / ebits) element bits (uint64), the lowest bits of each byte first:
    the elements of a row of 1-, 4-, 8-, 16-, 32- or 64-bit values in memory."""
    if ebits >= 8:
        return np.ascontiguousarray(b).view(UINT[ebits]).astype(np.uint64)
    if ebits == 4:
        return np.stack([b & 15, b >> 4], axis=-1).reshape(b.shape[:-1] + (-1,)).astype(np.uint64)
    return np.unpackbits(b, axis=-1, bitorder="little").astype(np.uint64)


def split_words(words, ebits: int, per: int):
    """(...) register words -> (..., per) fields of `ebits` bits each (uint64), field 0 in the lowest bits: the
    elements a fragment register of 1- to 64-bit values holds."""
    shifts = (np.arange(per) * ebits).astype(np.uint64)
    return (np.asarray(words).astype(np.uint64)[..., None] >> shifts) & np.uint64(mask_bits(ebits))


def pack_lanes(lane_bits):
    """One register value from the 16-bit lanes' patterns, the low lane first: uint16 for one lane, uint32 for
    two (view it as the instruction type's dtype)."""
    out = np.asarray(lane_bits[0]).astype(np.uint32)
    for lane, bits in enumerate(lane_bits[1:], 1):
        out = out | (np.asarray(bits).astype(np.uint32) << np.uint32(16 * lane))
    return out.astype(np.uint16) if len(lane_bits) == 1 else out


def half_lane(v, lane: int, is_bf16: bool):
    """Lane `lane` (0: the low 16 bits) of packed half-precision register values `v`, as float32."""
    bits = (np.asarray(v).astype(np.uint32) >> np.uint32(16 * lane)) & np.uint32(0xFFFF)
    return half_to_f32(bits.astype(np.uint16), is_bf16)


def flush_below(x, tiny):
    """.ftz on values of a narrower format held as float32: those below its least normal value `tiny` become
    zero of their sign."""
    return np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x)


def flush_subnormal(x):
    """.ftz: subnormal inputs and results become zero of the same sign."""
    tiny = np.finfo(x.dtype).tiny
    return np.where(np.abs(x) < tiny, np.copysign(x.dtype.type(0), x), x)


def saturate(x):
    """.sat on float results: clamped to [0, 1], NaN and -0 both +0 (the ISA's text is silent on -0; measured on
    an H100 (sm_90), -0 saturates to +0 in add, sub, mul, fma and cvt alike). Keeps `x`'s dtype."""
    x = np.asarray(x)
    return (np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)) + x.dtype.type(0)).astype(x.dtype)


# ---------------------------------------------------------------- bit counting

def popcount(x):
    """The number of set bits of each element of `x` (``popc``), as uint32."""
    x = np.asarray(x)
    return np.bitwise_count(x).astype(np.uint32)


def bit_length(x, bits: int):
    """Index of the most significant set bit + 1 (0 for 0), for unsigned arrays."""
    x = np.asarray(x).astype(np.uint64)
    n = np.zeros(x.shape, dtype=np.uint32)
    for shift in (32, 16, 8, 4, 2, 1):
        if shift >= bits:
            continue
        s = np.uint64(shift)
        big = (x >> s) != 0
        n = n + np.where(big, np.uint32(shift), np.uint32(0))
        x = np.where(big, x >> s, x)
    return n + (x != 0).astype(np.uint32)


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], dtype=np.uint64)


def bit_reverse(x, bits: int):
    """Each element of `x` with its low `bits` bits reversed (``brev``)."""
    x = np.asarray(x).astype(np.uint64)
    out = np.zeros(x.shape, dtype=np.uint64)
    for i in range(bits // 8):
        byte = (x >> np.uint64(8 * i)) & np.uint64(0xFF)
        out |= _REV8[byte.astype(np.intp)] << np.uint64(bits - 8 - 8 * i)
    return out.astype(UINT[bits])
