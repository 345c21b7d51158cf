"""Narrow-format conversions: fp8 pairs (e4m3, e5m2) to and from f32/f16x2, tf32 from f32, and
f16/bf16 (pairs too) from f32 with .relu / .satfinite.

Encoding rounds to nearest even with subnormals; .satfinite clamps out-of-range values and
infinities to the largest finite value (NaN stays NaN: e4m3 has no infinity).  .relu turns
negative results into +0 and NaN into the canonical NaN.  tf32 keeps the f32 layout with the low
13 mantissa bits zero; .rna rounds half away from zero.
"""

from __future__ import annotations

import math

import numpy as np

from ..isa import types as T
from .values import half_bits, half_to_f32

_PTXFORGE_INTERNAL = True

#: format -> (exponent bits, mantissa bits, bias, largest finite, has infinity)
FP8 = {"e4m3x2": (4, 3, 7, 448.0, False), "e5m2x2": (5, 2, 15, 57344.0, True)}


def fp8_encode(x: float, fmt: str) -> int:
    """One value to an fp8 byte, round to nearest even, saturating to the largest finite value."""
    eb, mb, bias, top, _ = FP8[fmt]
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = min(abs(x), top)
    if a == 0:
        return sign
    e = max(math.floor(math.log2(a)), 1 - bias)
    step = 2.0 ** (e - mb)
    q = a / step
    r = math.floor(q)
    frac = q - r
    if frac > 0.5 or (frac == 0.5 and r % 2 == 1):
        r += 1
    v = min(r * step, top)
    if v == 0:
        return sign
    e2 = math.floor(math.log2(v))
    if e2 < 1 - bias:
        return sign | int(round(v / 2.0 ** (1 - bias - mb)))
    mant = int(round(v / 2.0 ** (e2 - mb))) - (1 << mb)
    return sign | ((e2 + bias) << mb) | mant


def fp8_decode(b: int, fmt: str) -> float:
    """One fp8 byte as a float."""
    eb, mb, bias, _, has_inf = FP8[fmt]
    sign = -1.0 if b & 0x80 else 1.0
    e = (b >> mb) & ((1 << eb) - 1)
    m = b & ((1 << mb) - 1)
    if has_inf and e == (1 << eb) - 1:
        return sign * math.inf if m == 0 else math.nan
    if not has_inf and e == (1 << eb) - 1 and m == (1 << mb) - 1:
        return math.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mb)
    return sign * (1 + m / (1 << mb)) * 2.0 ** (e - bias)


def _relu(v: float) -> float:
    return v if math.isnan(v) else (v if v > 0 else 0.0)  # -0.0 becomes +0.0 too


#: the NaN cvt.rn/.rz.tf32.f32 gives for any NaN source, measured on an H100 (sm_90)
TF32_NAN = 0x7FFFE000


def _tf32(x: np.ndarray, rnd: str, relu: bool, satfinite: bool) -> np.ndarray:
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    low = u & np.uint64(0x1FFF)
    base = u & ~np.uint64(0x1FFF)
    if rnd == "rz":
        r = base
    elif rnd == "rna":
        r = np.where(low >= 0x1000, base + np.uint64(0x2000), base)
    else:
        odd = (u >> np.uint64(13)) & np.uint64(1)
        r = np.where((low > 0x1000) | ((low == 0x1000) & (odd == 1)), base + np.uint64(0x2000), base)
    xf = np.asarray(x, dtype=np.float32)
    # measured on an H100 (sm_90), where the ISA gives no NaN: .rn and .rz (with or without .relu) make every NaN
    # 0x7FFFE000; .rna is the plain bit rounding above, NaN or not (0x7F800001 gives the infinity 0x7F800000)
    nan = np.isnan(xf) if rnd != "rna" else np.zeros(xf.shape, bool)
    r = np.where(nan, np.uint64(TF32_NAN), np.where(np.isinf(xf), u, r))
    out = r.astype(np.uint32)
    if satfinite:  # measured on an H100 (sm_90), .rna: an infinite or NaN source gives its bits truncated, less one
        # tf32 unit (0x7F800001 -> 0x7F7FE000, the largest finite value; the NaN 0x7F9F906A -> 0x7F9F6000), and a
        # finite source rounded to infinity the largest finite value of its sign
        src = u.astype(np.uint32)
        special = (src & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
        rounded_inf = (out & np.uint32(0x7FFFFFFF)) == np.uint32(0x7F800000)
        out = np.where(special, (src & np.uint32(0xFFFFE000)) - np.uint32(0x2000),
                       np.where(rounded_inf, out - np.uint32(0x2000), out))
    if relu:
        neg = (out >> np.uint32(31)) == 1
        out = np.where(nan, np.uint32(TF32_NAN), np.where(neg, np.uint32(0), out))
    return out


def _half(x: np.ndarray, bf16: bool, rnd: str, relu: bool, satfinite: bool) -> np.ndarray:
    """f32 values -> f16/bf16 bits."""
    x = np.asarray(x, dtype=np.float32).astype(np.float64)
    if rnd == "rz":
        if bf16:
            bits = (np.asarray(x, dtype=np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        else:
            h = x.astype(np.float16)
            over = np.abs(h.astype(np.float64)) > np.abs(x)
            h = np.where(over & np.isfinite(x), np.nextafter(h, np.float16(0)), h)
            h = np.where(np.isinf(h) & np.isfinite(x), np.copysign(np.float16(65504), h), h)
            bits = h.astype(np.float16).view(np.uint16)
    else:
        bits = half_bits(x, bf16)
    bits = np.asarray(bits).astype(np.uint16)
    exp_all = np.uint16(0x7F80 if bf16 else 0x7C00)
    nan = np.isnan(x)
    if satfinite:
        inf = ((bits & np.uint16(0x7FFF)) == exp_all) & ~nan
        top = np.uint16(0x7F7F if bf16 else 0x7BFF)
        bits = np.where(inf, (bits & np.uint16(0x8000)) | top, bits)
    if relu:
        bits = np.where(nan, np.uint16(0x7FFF), np.where(bits >> np.uint16(15) == 1, np.uint16(0), bits))
    return bits.astype(np.uint16)


def make_cvt_narrow(P, op):
    """The executor of the narrow conversions (fp8 pairs, tf32, .relu/.satfinite halves, cvt.pack), rounding as the PTX ISA states. Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    form = info.form
    put = P.writer(ins.operands[0], form.dst_type, ins)
    readers = [P.reader(s, form.src_type, ins) for s in ins.operands[1:]]
    to, frm = form.to, form.frm

    def run(S, m):
        xs = [np.broadcast_to(np.asarray(r(S)), (S.N,)) for r in readers]
        if to in FP8:
            if frm == "f32":
                vals = [[float(v) for v in x] for x in xs]  # a: high byte, b: low byte
                hi, lo = vals
            else:
                w = xs[0].astype(np.uint32)
                lo = [float(v) for v in half_to_f32((w & np.uint32(0xFFFF)).astype(np.uint16), False)]
                hi = [float(v) for v in half_to_f32((w >> np.uint32(16)).astype(np.uint16), False)]
            f = _relu if info.relu else (lambda v: v)
            out = np.array([(fp8_encode(f(h), to) << 8) | fp8_encode(f(l_), to) for h, l_ in zip(hi, lo)],
                           dtype=np.uint16)
        elif frm in FP8:
            w = xs[0].astype(np.uint32)
            halves = []
            for sh in (0, 8):
                v = np.array([fp8_decode(int(b), frm) for b in (w >> np.uint32(sh)) & np.uint32(0xFF)])
                if info.relu:
                    v = np.where(np.isnan(v), np.nan, np.where(v > 0, v, 0.0))
                hb = v.astype(np.float16).view(np.uint16).astype(np.uint32)
                if info.relu:
                    hb = np.where(np.isnan(v), np.uint32(0x7FFF), hb)
                halves.append(hb)
            out = halves[0] | (halves[1] << np.uint32(16))
        elif to == "tf32":
            out = _tf32(xs[0], info.rnd, info.relu, info.satfinite)
        else:
            bf16 = to.startswith("bf16")
            parts = [_half(x, bf16, info.rnd, info.relu, info.satfinite) for x in xs]
            out = parts[0] if len(parts) == 1 else (parts[0].astype(np.uint32) << np.uint32(16)) | parts[1]
        put(S, out, m)
    return run


def make_cvt_pack(P, op):
    """cvt.pack: saturate a and b to the destination type's range, pack a above b, c's low bits above."""
    ins = op.ins
    t = ins.type
    n = t.bits
    lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if t.kind == "s" else (0, (1 << n) - 1)
    put = P.writer(ins.operands[0], T.b32, ins)
    ra, rb = P.reader(ins.operands[1], T.s32, ins), P.reader(ins.operands[2], T.s32, ins)
    rc = P.reader(ins.operands[3], T.u32, ins) if len(ins.operands) > 3 else None
    mask = (1 << n) - 1

    def run(S, m):
        a = np.clip(np.asarray(ra(S)).astype(np.int64), lo, hi) & mask
        b = np.clip(np.asarray(rb(S)).astype(np.int64), lo, hi) & mask
        d = (a << n) | b
        if rc is not None:
            d = d | (np.asarray(rc(S)).astype(np.int64) << (2 * n))
        put(S, np.broadcast_to(d & 0xFFFFFFFF, (S.N,)).astype(np.uint32), m)
    return run
