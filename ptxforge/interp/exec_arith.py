"""Integer and floating-point arithmetic, every row of `ptxforge.isa.arith.ARITH`: add sub mul mad
fma div rem abs neg min max mul24 mad24 sad rcp sqrt rsqrt ex2 lg2 sin cos tanh copysign.

.relu clamps a negative result to +0 and makes a NaN result the canonical NaN (0x7FFF, as min/max do);
min/max .xorsign.abs compare the magnitudes and give the result the sign a XOR b; copysign, like abs and neg,
works on the bits (abs.ftz / neg.ftz first make a subnormal input zero of its sign).

Integers compute in the type's own numpy dtype, so results wrap exactly as PTX's do; .hi and
.wide products widen first (64-bit high halves are built from 32-bit pieces); .sat clamps.
fma is exact: for f32 and the half types the product is exact in float64 and the sum is rounded to
odd before the final rounding, which gives the correctly rounded fused result; f64 fma is fused
exactly too (`rounding.fma_f64`).  Half types compute in float64 and round once.  Approximate
instructions (ex2, lg2, sin, cos, rsqrt, .approx) compute the exact function and round it: they
agree with a GPU to within the instruction's ulp bound, not bit for bit; div.approx.f32, which the ISA
defines as a * (1/b), gives its defined zero (NaN for an infinite a) for 2^126 < |b| < 2^128 and, where 1/b
overflows (0 < |b| <= 2^-128), an infinity (NaN for a zero a).  The directed rounding
modes (.rz/.rm/.rp) of add, sub, mul, fma/mad, div, rcp and sqrt round the exact result once in
that mode (`rounding.directed`), with IEEE 754's overflow and signed-zero rules.  fma.oob (sm_90) is
refused (InterpUnsupported): which NaN bit patterns it zeroes is not in the PTX ISA.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.arith import ARITH
from .findings import InterpUnsupported
from .minmax import canonical_nan, min_max
from .rounding import FORMATS, directed, fma_f64
from .values import (HALF_LEAST_NORMAL, SINT, UINT, flush_below, flush_subnormal, half_bits, half_lane, half_to_f32,
                     mulhi_s64, mulhi_u64, pack_lanes, saturate, view_dtype)

_PTXFORGE_INTERNAL = True

_DIRECTED = ("rz", "rm", "rp")


# ---------------------------------------------------------------- integers

def _sat_s32(f):
    return lambda a, b: np.clip(f(a.astype(np.int64), b), -2 ** 31, 2 ** 31 - 1).astype(np.int32)


def _int_mul(t, mode):
    bits = t.bits
    signed = t.kind == "s"
    if mode == "lo":
        return lambda a, b: a * b
    if mode == "wide":
        wide = np.dtype(("int" if signed else "uint") + str(2 * bits))
        return lambda a, b: np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
    # hi
    if bits < 64:
        wide = np.int64 if signed else np.uint64
        out = view_dtype(t)
        sh = np.uint64(bits) if not signed else bits
        return lambda a, b: ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> sh).astype(out)
    if signed:
        return lambda a, b: mulhi_s64(a, b).view(np.int64)
    return lambda a, b: mulhi_u64(a, b)


def _int_mul24(t, mode):
    """mul24: the 48-bit product of the low 24 bits of each source (sign-extended for .s32);
    .lo keeps bits 31..0, .hi bits 47..16."""
    signed = t.kind == "s"
    shift = 16 if mode == "hi" else 0
    out = view_dtype(t)

    def low24(x):
        v = np.asarray(x).astype(np.int64) & 0xFFFFFF
        return np.where(v >= 1 << 23, v - (1 << 24), v) if signed else v

    return lambda a, b: ((low24(a) * low24(b)) >> shift & 0xFFFFFFFF).astype(np.uint32).view(out)


def _mad24(op, t, mode, put, reads):
    """mad24: the mul24 product (bits 31..0 or 47..16) plus c, wrapping (.hi.sat.s32: clamped)."""
    ra, rb, rc = reads
    mul = _int_mul24(t, mode)
    if "sat" in op.ins.mods:
        return lambda S, m: put(S, _clamp_s32(mul(ra(S), rb(S)), rc(S)), m)
    return lambda S, m: put(S, mul(ra(S), rb(S)) + rc(S), m)


def _clamp_s32(x, y):
    """x + y for .s32 arrays, clamped to the .s32 range instead of wrapping (the .sat of mad.hi / mad24.hi)."""
    total = np.asarray(x).astype(np.int64) + np.asarray(y).astype(np.int64)
    return np.clip(total, -2 ** 31, 2 ** 31 - 1).astype(np.int32)


def _min_max(fn):
    """min/max on integers; .relu (s32) clamps the result at 0."""
    def make(t, mode):
        if mode == "relu":
            zero = view_dtype(t).type(0)
            return lambda a, b: np.maximum(fn(a, b), zero)
        return fn
    return make


def _divmod(a, b, t, want):
    """PTX div/rem: truncating division; division by zero gives all ones (div) / the dividend (rem)."""
    bits = t.bits
    signed = t.kind == "s"
    a = np.asarray(a)
    b = np.asarray(b)
    if not signed:
        ua = a.astype(np.uint64)
        ub = b.astype(np.uint64)
        zero = ub == 0
        q = ua // np.where(zero, np.uint64(1), ub)
        if want == "div":
            res = np.where(zero, np.uint64((1 << bits) - 1), q)
        else:
            res = np.where(zero, ua, ua - q * ub)
        return res.astype(UINT[bits]).view(view_dtype(t)), zero
    sa = a.astype(np.int64)
    sb = b.astype(np.int64)
    zero = sb == 0
    ua = sa.view(np.uint64)
    ub = sb.view(np.uint64)
    mag_a = np.where(sa < 0, ~ua + np.uint64(1), ua)
    mag_b = np.where(sb < 0, ~ub + np.uint64(1), ub)
    qm = mag_a // np.where(zero, np.uint64(1), mag_b)
    neg = (sa < 0) ^ (sb < 0)
    q = np.where(neg, ~qm + np.uint64(1), qm)
    if want == "div":
        res = np.where(zero, np.uint64(0xFFFFFFFFFFFFFFFF), q)
    else:
        res = np.where(zero, ua, ua - q * ub)
    return res.astype(UINT[bits]).view(SINT[bits]), zero


# ---------------------------------------------------------------- floats

def _fma_odd64(a, b, c):
    """a * b + c of float32 (or narrower) values in float64, rounded to odd: the product is exact there, and a sum
    rounded to odd at 53 bits rounds correctly once more to 24 bits or fewer."""
    p = np.asarray(a).astype(np.float64) * np.asarray(b).astype(np.float64)  # exact: 24 + 24 bits
    c = np.asarray(c).astype(np.float64)
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    fix = (err != 0) & even & np.isfinite(s)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def _fma_f32(a, b, c):
    """Correctly rounded fused multiply-add of float32 arrays."""
    return _fma_odd64(a, b, c).astype(np.float32)


#: Float semantics by opcode: the exact function, computed in float64 and rounded once by the
#: executor (abs and neg work on the sign bit instead).  Every float type of every `ARITH` row
#: needs an entry (the coverage test checks it).
FLOAT_SEMANTICS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "fma": lambda a, b, c: a * b + c, "mad": lambda a, b, c: a * b + c,
    "min": lambda a, b: min_max("min", a, b), "max": lambda a, b: min_max("max", a, b),  # interp/minmax.py
    "rcp": lambda a: 1.0 / a, "sqrt": np.sqrt, "rsqrt": lambda a: 1.0 / np.sqrt(a),
    "ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "abs": None, "neg": None, "copysign": None,  # sign-bit operations, in _make_float
}


def _div_approx(a, b):
    """div.approx.f32, computed as a * (1/b): for 2^126 < |b| < 2^128 the reciprocal is below the least normal and
    is zero, so the ISA gives NaN where a is infinite and otherwise a zero of a's sign XOR b's (NaN stays NaN);
    elsewhere the correctly rounded quotient, within the instruction's 2 ulp. For a subnormal b the ISA's 1/b
    would overflow to an infinity; measured on an H100 (sm_90) it does not (2^-149 / 2^-149 is 1, 0 / -2^-149 is
    -0), so the quotient stands there too."""
    a, b = np.asarray(a), np.asarray(b)
    beyond = np.isfinite(b) & (np.abs(b) > b.dtype.type(2.0 ** 126))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quotient = a / b
    return np.where(beyond, a * np.copysign(b.dtype.type(0), b), quotient)


def _relu(fn):
    """fn, then negative results clamped to +0 (NaN passes through)."""
    def relu(*xs):
        r = fn(*xs)
        return np.where(r < 0, 0.0, r)
    return relu


def _xorsign_abs(fn):
    """min/max .xorsign.abs: fn of the magnitudes, with the sign a XOR b."""
    def xs(a, b):
        r = fn(np.abs(a), np.abs(b))
        neg = np.signbit(a) ^ np.signbit(b)
        return np.where(neg, -r, r)
    return xs


def make_arith(P, op):
    """The executor of one arithmetic instruction: its row of `ARITH` gives the mode and operand
    types, `INT_SEMANTICS` / `FLOAT_SEMANTICS` the computation."""
    ins = op.ins
    opname = ins.opcode
    t = ins.type
    srcs = ins.operands[1:]
    if "oob" in ins.mods:
        # fma.oob zeroes a lane whose input is the "OOB NaN" of a tensor copy's out-of-bounds fill; the PTX ISA
        # does not give that NaN's bits, nor whether another NaN counts
        raise InterpUnsupported(f"{opname}.oob is not modelled: the PTX ISA does not say which NaN bit patterns "
                                "it zeroes", ins)
    if t.is_float:
        return _make_float(P, op, opname, t, set(ins.mods), srcs)
    if t.lanes == 2:
        return _packed_int(P, op, opname, t, srcs)
    make = INT_SEMANTICS.get(opname)
    if make is None:
        raise InterpUnsupported(f"{opname} on .{t.name} is not modelled", ins)
    form = ARITH[opname]
    mode = next((m for m in ins.mods if m in form.int_modes), form.int_mode_default)
    put = P.writer(ins.operands[0], form.result_type(t, mode), ins)
    reads = [P.reader(s, form.source_type(t, mode, i), ins) for i, s in enumerate(srcs)]
    return make(op, t, mode, put, reads)


def _packed_int(P, op, opname, t, srcs):
    """add / min / max{.relu} on .u16x2 / .s16x2: each 16-bit lane on its own (add wraps), packed back."""
    ins = op.ins
    put = P.writer(ins.operands[0], T.b32, ins)
    ra, rb = (P.reader(x, T.b32, ins) for x in srcs)
    lane_dt = np.int16 if t.kind == "s" else np.uint16
    relu = "relu" in ins.mods

    def lanes(v):
        v = np.asarray(v).astype(np.uint32)
        return np.stack([v & np.uint32(0xFFFF), v >> np.uint32(16)]).astype(np.uint16).view(lane_dt).astype(np.int64)

    def run(S, m):
        a, b = lanes(ra(S)), lanes(rb(S))
        r = a + b if opname == "add" else np.minimum(a, b) if opname == "min" else np.maximum(a, b)
        if relu:
            r = np.maximum(r, 0)
        put(S, pack_lanes(r & 0xFFFF), m)
    return run


def _binary(fn_for):
    """An integer executor d = f(a, b), with f = fn_for(type, mode)."""
    def make(op, t, mode, put, reads):
        f = fn_for(t, mode)
        ra, rb = reads
        return lambda S, m: put(S, f(ra(S), rb(S)), m)
    return make


def _mad(op, t, mode, put, reads):
    """mad: the product's half (or the whole .wide product) plus c, wrapping (.hi.sat.s32: clamped)."""
    ra, rb, rc = reads
    mul = _int_mul(t, mode)
    if "sat" in op.ins.mods:
        return lambda S, m: put(S, _clamp_s32(mul(ra(S), rb(S)), rc(S)), m)

    def mad(S, m):
        put(S, mul(ra(S), rb(S)) + rc(S), m)
    return mad


def _divrem(op, t, mode, put, reads):
    ra, rb = reads
    opname = op.ins.opcode

    def divrem(S, m):
        res, zero = _divmod(ra(S), rb(S), t, opname)
        if (zero & m).any():
            S.report("arith", f"integer {opname} by zero (the result is undefined in PTX; here all ones "
                     "for div, the dividend for rem)", op, np.flatnonzero(zero & m))
        put(S, res, m)
    return divrem


def _neg(op, t, mode, put, reads):
    ra, = reads
    zero = view_dtype(t).type(0)
    return lambda S, m: put(S, zero - ra(S), m)


def _abs(op, t, mode, put, reads):
    ra, = reads
    zero = view_dtype(t).type(0)

    def absolute(S, m):
        a = ra(S)
        put(S, np.where(a < 0, zero - a, a), m)
    return absolute


def _sad(op, t, mode, put, reads):
    """sad: d = c + |a - b|, every step wrapping in the type's width."""
    ra, rb, rc = reads

    def sad(S, m):
        a, b = np.asarray(ra(S)), np.asarray(rb(S))
        with np.errstate(over="ignore"):
            put(S, rc(S) + np.where(a < b, b - a, a - b), m)
    return sad


#: Integer semantics by opcode: make(op, type, mode, put, readers) -> executor.  Every integer
#: type of every `ARITH` row needs one (the coverage test checks it).
INT_SEMANTICS = {
    "add": _binary(lambda t, mode: _sat_s32(np.add) if mode == "sat" else (lambda a, b: a + b)),
    "sub": _binary(lambda t, mode: _sat_s32(np.subtract) if mode == "sat" else (lambda a, b: a - b)),
    "mul": _binary(_int_mul),
    "mul24": _binary(_int_mul24),
    "min": _binary(_min_max(np.minimum)),
    "max": _binary(_min_max(np.maximum)),
    "mad24": _mad24,
    "mad": _mad,
    "div": _divrem,
    "rem": _divrem,
    "abs": _abs,
    "neg": _neg,
    "sad": _sad,
}


#: the arithmetic a directed rounding mode may apply to (the correctly rounded operations)
_DIRECTED_OPS = ("add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt")


def _fmt(t) -> str:
    """The `rounding.FORMATS` name of a float type (a packed pair's element)."""
    return t.name[:-2] if t.lanes == 2 else t.name


def _flush_subnormal_bits(x, t):
    """.ftz on the bit patterns `x` of float type `t`, each half of a packed pair on its own: a subnormal (exponent
    field zero, fraction not) becomes zero of its sign; every other pattern, NaN included, is kept."""
    width = t.bits // t.lanes
    frac_bits = FORMATS[_fmt(t)][0] - 1
    u = UINT[t.bits]
    x = np.asarray(x).astype(u)
    for lane in range(t.lanes):
        magnitude_mask = ((1 << (width - 1)) - 1) << (width * lane)
        magnitude = x & u(magnitude_mask)
        subnormal = (magnitude != 0) & (magnitude < u(1 << (frac_bits + width * lane)))
        x = np.where(subnormal, x & ~u(magnitude_mask), x)
    return x


def _make_directed(P, op, opname, t, mods, srcs, mode):
    """The executor of a float instruction in a directed rounding mode: the exact result rounded once toward zero
    (.rz), -inf (.rm) or +inf (.rp), then .ftz (subnormal inputs and results to signed zero), .sat or .relu."""
    ins = op.ins
    if opname not in _DIRECTED_OPS:
        raise InterpUnsupported(f"directed rounding (.{mode}) on {opname} is not modelled", ins)
    ftz, sat, relu = "ftz" in mods, "sat" in mods, "relu" in mods
    fmt = _fmt(t)
    put = P.writer(ins.operands[0], t, ins)
    if t.bits == 16 or t.lanes == 2:
        is_bf16 = fmt == "bf16"
        bt = T.lookup(f"b{t.bits}")
        readers = [P.reader(s, bt, ins) for s in srcs]

        def halves(S, m):
            vals = [r(S) for r in readers]
            lane_bits = []
            for lane in range(t.lanes):
                xs = [half_lane(v, lane, is_bf16) for v in vals]
                bits = directed(opname, xs, mode, fmt, FLOAT_SEMANTICS[opname])
                bits = bits if is_bf16 else bits.view(np.uint16)
                if relu:  # a negative result (sign set, not NaN) becomes +0, a NaN the canonical NaN
                    value = half_to_f32(bits, is_bf16)
                    bits = canonical_nan(np.where(value < 0, np.uint16(0), bits), value)
                lane_bits.append(bits)
            put(S, pack_lanes(lane_bits).view(view_dtype(t)), m)
        return halves
    readers = [P.reader(s, t, ins) for s in srcs]

    def flt(S, m):
        xs = [np.asarray(r(S)) for r in readers]
        if ftz:
            xs = [flush_subnormal(x) for x in xs]
        r = directed(opname, xs, mode, fmt, FLOAT_SEMANTICS[opname])
        if ftz:
            r = flush_subnormal(r)
        if sat:
            r = saturate(r)
        put(S, r, m)
    return flt


def _make_float(P, op, opname, t, mods, srcs):
    ins = op.ins
    mode = next((r for r in _DIRECTED if r in mods), None)
    if mode is not None:
        return _make_directed(P, op, opname, t, mods, srcs, mode)
    ftz = "ftz" in mods
    sat = "sat" in mods
    nan_prop = "NaN" in mods
    relu = "relu" in mods
    xorsign = "xorsign.abs" in mods
    half = t.bits == 16 or t.lanes == 2
    put = P.writer(ins.operands[0], t, ins)
    if opname == "copysign":  # magnitude of b, sign of a
        u = UINT[t.bits]
        sm = u(1 << (t.bits - 1))
        ra, rb = (P.reader(s, T.lookup(f"b{t.bits}"), ins) for s in srcs)
        out_dt = view_dtype(t)
        return lambda S, m: put(S, ((rb(S) & ~sm) | (ra(S) & sm)).view(out_dt), m)
    if opname in ("abs", "neg"):
        bits = t.bits
        u = UINT[bits]
        sign = (1 << (t.bits // t.lanes - 1))
        sign_mask = sign if t.lanes == 1 else sign | (sign << 16)
        read = P.reader(srcs[0], T.lookup(f"b{bits}"), ins)
        # .ftz (f32, f16, f16x2): a subnormal input is zero of its sign before the sign bit changes, so
        # neg.ftz of +subnormal is -0 and abs.ftz of -subnormal is +0 (no result can be subnormal otherwise)
        ra = (lambda S: _flush_subnormal_bits(read(S), t)) if ftz else read
        sm = u(sign_mask)
        out_dt = view_dtype(t)
        if opname == "neg":
            return lambda S, m: put(S, (ra(S) ^ sm).view(out_dt), m)
        return lambda S, m: put(S, (ra(S) & ~sm).view(out_dt), m)
    if FLOAT_SEMANTICS.get(opname) is None:
        raise InterpUnsupported(f"{opname} on .{t.name} is not modelled", ins)
    fn = FLOAT_SEMANTICS[opname]
    if opname == "div" and "approx" in mods:  # (div.full is full-range: the quotient within 2 ulp everywhere)
        fn = _div_approx
    minmax = opname in ("min", "max")
    if minmax and nan_prop:
        fn = (lambda a, b: min_max(opname, a, b, nan=True))
    if xorsign:
        fn = _xorsign_abs(fn)
    if relu:
        fn = _relu(fn)
    if half:
        is_bf16 = t in (T.bf16, T.bf16x2)
        lanes = t.lanes
        bt = T.lookup(f"b{t.bits}")
        readers = [P.reader(s, bt, ins) for s in srcs]
        tiny = HALF_LEAST_NORMAL[is_bf16]

        def halves(S, m):
            vals = [r(S) for r in readers]
            lane_bits = []
            for lane in range(lanes):
                xs = [half_lane(v, lane, is_bf16) for v in vals]
                xs = [(flush_below(x, tiny) if ftz else x).astype(np.float64) for x in xs]
                if opname in ("fma", "mad"):  # fused: rounded to odd in float64, then once to 16 bits
                    r = _fma_odd64(*xs)
                    # .relu: -0 too becomes +0 (measured on an H100 (sm_90); the ISA says "negative")
                    r = np.where(r <= 0, 0.0, r) if relu else r
                else:
                    r = fn(*xs)
                if sat:
                    r = saturate(r)
                bits = half_bits(r, is_bf16)
                if ftz:  # a result in the 16-bit format's subnormal range becomes zero of its sign
                    bits = np.where(np.abs(half_to_f32(bits, is_bf16)) < tiny, bits & np.uint16(0x8000), bits)
                if minmax or relu:  # a NaN result is the canonical one
                    bits = canonical_nan(bits, r)
                lane_bits.append(bits)
            put(S, pack_lanes(lane_bits).view(view_dtype(t)), m)
        return halves
    readers = [P.reader(s, t, ins) for s in srcs]
    f64 = t.bits == 64
    if opname in ("fma", "mad"):
        fused = fma_f64 if f64 else _fma_f32
    else:
        fused = None
    exact_native = opname in ("add", "sub", "mul", "div", "sqrt", "min", "max")

    fdt = np.float64 if f64 else np.float32

    def flt(S, m):
        xs = [r(S) for r in readers]
        if ftz:  # (f64 takes .ftz on rcp only: rcp.rn.ftz.f64 flushes its subnormal input and result)
            xs = [flush_subnormal(np.asarray(x, dtype=fdt)) for x in xs]
        if fused is not None:
            r = fused(*xs)
            if relu:
                r = np.where(r < 0, r.dtype.type(0), r)
        elif f64 or exact_native:
            r = fn(*xs)  # IEEE round-to-nearest in the type's own precision
        else:
            r = fn(*[np.asarray(x).astype(np.float64) for x in xs]).astype(np.float32)
        if ftz:
            r = flush_subnormal(np.asarray(r, dtype=fdt))
        if sat:
            r = saturate(r)
        if minmax and not f64:  # a NaN result is the canonical one
            r = np.asarray(r, dtype=np.float32)
            r = canonical_nan(r.view(np.uint32), r).view(np.float32)
        put(S, r, m)
    return flt
