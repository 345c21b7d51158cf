"""Moves, comparisons, selection and conversions: mov (incl. pack/unpack, addresses of variables,
special registers), setp, selp, cvt, cvta.

cvt follows PTX: integer to integer truncates or extends by the source's signedness (.sat
clamps to the destination range); float to integer rounds as asked (.rni/.rzi/.rmi/.rpi) and
always saturates; NaN gives 0 from an f16/bf16/f32 source to an integer of at most 32 bits, and the
bit pattern 1 << (bits - 1) (the signed minimum: 0x80, 0x8000, ...) from an f64 source or to a 64-bit
integer (measured on an H100 (sm_90); the PTX ISA says only that NaN converts to 0); narrowing float conversions and conversions from integers round
once, to nearest even or in the directed mode asked (.rz/.rm/.rp, `rounding.convert`: a 64-bit
integer is rounded from the integer itself, not through float64); a destination register wider
than the type is sign- or zero-extended by the destination type.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.operands import PairDst, Vec
from .exec_arith import _fmt
from .findings import InterpUnsupported
from .rounding import convert
from .access import CLUSTER_RANK_SHIFT
from .memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, in_window
from .values import (HALF_LEAST_NORMAL, UINT, as_words128, flush_below, flush_subnormal, from_words128, half_bits, half_lane,
                     half_to_f32, pack_lanes, saturate, storage_dtype, view_dtype)

_PTXFORGE_INTERNAL = True


def make_mov(P, op):
    """The executor of `mov`: registers, immediates, special registers, addresses of variables, and pack/unpack
    of brace lists. Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is
    the Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    d, a = ins.operands[0], ins.operands[1]
    if "pack" in ins.mods or isinstance(a, Vec):
        parts = list(a.regs)
        pbits = t.bits // len(parts)
        pt = T.lookup(f"b{pbits}")
        rs = [P.reader(r, pt, ins) for r in parts]
        put = P.writer(d, T.lookup(f"b{t.bits}"), ins)
        if t.bits == 128:
            return _pack128(rs, pbits, put)
        wide = UINT[t.bits]

        def pack(S, m):
            out = None
            for i, r in enumerate(rs):
                v = np.asarray(r(S)).astype(wide) << wide(i * pbits)
                out = v if out is None else out | v
            put(S, out, m)
        return pack
    if "unpack" in ins.mods or isinstance(d, Vec):
        parts = list(d.regs)
        pbits = t.bits // len(parts)
        pt = T.lookup(f"b{pbits}")
        ra = P.reader(a, T.lookup(f"b{t.bits}"), ins)
        puts = [P.writer(r, pt, ins) for r in parts]
        pdt = UINT[pbits]
        if t.bits == 128:
            return _unpack128(ra, pbits, puts)
        wide = UINT[t.bits]

        def unpack(S, m):
            v = np.asarray(ra(S))
            for i, put in enumerate(puts):
                put(S, ((v >> wide(i * pbits)) & wide((1 << pbits) - 1)).astype(pdt), m)
        return unpack
    put = P.writer(d, t, ins)
    ra = P.reader(a, t, ins)
    return lambda S, m: put(S, ra(S), m)


def _pack128(readers, pbits, put):
    """mov.b128 d, {parts}: the parts (64- or 32-bit, the first the least significant) into one 128-bit value."""
    per_word = 64 // pbits

    def pack(S, m):
        words = np.zeros((S.N, 2), dtype=np.uint64)
        for i, r in enumerate(readers):
            v = np.broadcast_to(np.asarray(r(S)).astype(np.uint64), (S.N,))
            words[:, i // per_word] |= v << np.uint64((i % per_word) * pbits)
        put(S, from_words128(words), m)
    return pack


def _unpack128(reader, pbits, puts):
    """mov.b128 {parts}, a: one 128-bit value into its parts, the least significant first."""
    per_word = 64 // pbits
    pdt, mask = UINT[pbits], np.uint64((1 << pbits) - 1)

    def unpack(S, m):
        words = as_words128(np.broadcast_to(reader(S), (S.N,)))
        for i, put in enumerate(puts):
            put(S, ((words[:, i // per_word] >> np.uint64((i % per_word) * pbits)) & mask).astype(pdt), m)
    return unpack


# ---------------------------------------------------------------- comparisons

def compare(cmp: str, a, b, t: T.ScalarType):
    """The `setp` comparison `cmp` of numpy arrays `a` and `b` of type `t` as a bool array: ordered and unordered
    float comparisons (NaN-aware), signed and unsigned integer ones.
    """
    if t.is_float:
        nan = np.isnan(a) | np.isnan(b)
        ordered = {
            "eq": lambda: a == b, "ne": lambda: (a != b) & ~nan, "lt": lambda: a < b, "le": lambda: a <= b,
            "gt": lambda: a > b, "ge": lambda: a >= b,
            "num": lambda: ~nan, "nan": lambda: nan,
        }
        if cmp in ("num", "nan"):
            return ordered[cmp]()
        if len(cmp) == 3 and cmp.endswith("u"):  # equ, neu, ltu ...: true when unordered
            return ordered[cmp[:2]]() | nan
        return ordered[cmp]() & ~nan
    return {
        "eq": lambda: a == b, "ne": lambda: a != b, "lt": lambda: a < b, "le": lambda: a <= b,
        "gt": lambda: a > b, "ge": lambda: a >= b, "lo": lambda: a < b, "ls": lambda: a <= b,
        "hi": lambda: a > b, "hs": lambda: a >= b,
    }[cmp]()


def _comparison(P, ins):
    """A function S -> bool array: (a cmp b), with .ftz flushing subnormal inputs of the compared format.  On
    packed halves (.f16x2 / .bf16x2) the array has a row per half, the low half first."""
    t = ins.type
    cmp = ins.mods[0]
    ftz = "ftz" in ins.mods
    if t.lanes == 2:  # each half against the same half
        is_bf16 = t is T.bf16x2
        ra, rb = (P.reader(x, T.b32, ins) for x in ins.operands[1:3])
        tiny = HALF_LEAST_NORMAL[is_bf16]

        def halves(S):
            rows = []
            for lane in (0, 1):
                x, y = (half_lane(r(S), lane, is_bf16) for r in (ra, rb))
                if ftz:
                    x, y = flush_below(x, tiny), flush_below(y, tiny)
                rows.append(compare(cmp, x, y, T.f32))
            return np.stack(np.broadcast_arrays(*rows))
        return halves
    rt = t
    if t.kind == "b" and cmp in ("lo", "ls", "hi", "hs"):
        rt = t.as_unsigned()
    ra, rb = P.reader(ins.operands[1], rt, ins), P.reader(ins.operands[2], rt, ins)
    if t is T.bf16:  # bf16 bits compare as the floats they hold
        rawa, rawb = ra, rb
        ra, rb = (lambda S: _float_value(rawa(S), T.bf16)), (lambda S: _float_value(rawb(S), T.bf16))
        rt = T.f64
    if ftz and t is T.f16:  # f16's own subnormals, below 2^-14
        tiny = HALF_LEAST_NORMAL[False]
        return lambda S: compare(cmp, flush_below(np.asarray(ra(S), np.float32), tiny),
                                 flush_below(np.asarray(rb(S), np.float32), tiny), rt)
    if ftz:
        return lambda S: compare(cmp, flush_subnormal(np.asarray(ra(S), np.float32)),
                                 flush_subnormal(np.asarray(rb(S), np.float32)), rt)
    return lambda S: compare(cmp, ra(S), rb(S), rt)


_COMBINE = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _combined(P, ins):
    """(cmp, combine) where combine(x) applies the instruction's boolop with its predicate c."""
    boolop = next((m for m in ins.mods[1:] if m in _COMBINE), None)
    cmp = _comparison(P, ins)
    if boolop is None:
        return cmp, lambda S, x: x
    rc = P.pred_reader(ins.operands[3], ins)
    f = _COMBINE[boolop]
    return cmp, lambda S, x: f(x, rc(S))


def make_setp(P, op):
    """setp p{|q}: p = (a cmp b) boolop c, q = !(a cmp b) boolop c; on packed halves p is the low half's
    (a cmp b) boolop c and q the high half's."""
    ins = op.ins
    cmp, combine = _combined(P, ins)
    d = ins.operands[0]
    put = P.writer(d, T.pred, ins)
    if ins.type.lanes == 2:
        put_q = P.writer(d.pred, T.pred, ins) if isinstance(d, PairDst) else None

        def setp_halves(S, m):
            x = cmp(S)
            put(S, combine(S, x[0]), m)
            if put_q is not None:
                put_q(S, combine(S, x[1]), m)
        return setp_halves
    if not isinstance(d, PairDst):
        return lambda S, m: put(S, combine(S, cmp(S)), m)
    put_q = P.writer(d.pred, T.pred, ins)

    def setp2(S, m):
        x = np.asarray(cmp(S))
        put(S, combine(S, x), m)
        put_q(S, combine(S, ~x), m)
    return setp2


#: the word `set` writes for true into a float destination: 1.0 in its format (per half for a packed pair)
_SET_ONE = {T.f32: 0x3F800000, T.f16: 0x3C00, T.bf16: 0x3F80, T.f16x2: 0x3C00, T.bf16x2: 0x3F80}


def make_set(P, op):
    """set: all ones (integer destination) or 1.0 (a float destination) where the combined comparison holds; on
    packed halves, in each half of d whose comparison holds, 0xffff (.u32/.s32) or 1.0 of the pair's format."""
    ins = op.ins
    dt = ins.info
    cmp, combine = _combined(P, ins)
    put = P.writer(ins.operands[0], dt, ins)
    out = view_dtype(dt)
    if ins.type.lanes == 2:
        half_true = np.uint16(_SET_ONE.get(dt, 0xFFFF))

        def set_halves(S, m):
            x = cmp(S)
            put(S, pack_lanes([np.where(combine(S, h), half_true, np.uint16(0)) for h in x]).view(out), m)
        return set_halves
    word = UINT[dt.bits]
    true = np.array(_SET_ONE.get(dt, (1 << dt.bits) - 1), dtype=word).view(out)[()]
    zero = out.type(0)
    return lambda S, m: put(S, np.where(combine(S, cmp(S)), true, zero).astype(out), m)


def make_slct(P, op):
    """slct: d = a where c >= 0 (c .s32, or .f32 with -0.0 >= 0 and NaN false; .ftz flushes c)."""
    ins = op.ins
    t, ct = ins.type, ins.info
    ra, rb = P.reader(ins.operands[1], t, ins), P.reader(ins.operands[2], t, ins)
    rc = P.reader(ins.operands[3], ct, ins)
    put = P.writer(ins.operands[0], t, ins)
    dt = view_dtype(t)
    ftz = "ftz" in ins.mods

    def run(S, m):
        c = rc(S)
        if ftz:
            c = flush_subnormal(np.asarray(c, np.float32))
        put(S, np.where(np.asarray(c) >= 0, ra(S), rb(S)).astype(dt, copy=False), m)
    return run


def make_testp(P, op):
    """The executor of testp: whether each thread's float is finite, infinite, a number, NaN, normal or subnormal, into a predicate. Returns ``fn(S, m)``."""
    ins = op.ins
    t = ins.type
    ra = P.reader(ins.operands[1], t, ins)
    put = P.writer(ins.operands[0], T.pred, ins)
    tiny = np.finfo(np.float32 if t is T.f32 else np.float64).tiny
    tests = {
        "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x), "notanumber": np.isnan,
        # .normal holds for zeros too: measured on an H100 (sm_90), where the ISA's "normal" would exclude them
        "normal": lambda x: np.isfinite(x) & ((np.abs(x) >= tiny) | (x == 0)),
        "subnormal": lambda x: (x != 0) & (np.abs(x) < tiny),
    }
    f = tests[ins.mods[0]]
    return lambda S, m: put(S, np.asarray(f(np.asarray(ra(S)))), m)


def make_selp(P, op):
    """The executor of `selp`: d = p ? a : b per thread. Returns ``fn(S, m)``, which executes it on Machine `S`
    for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    ra, rb = P.reader(ins.operands[1], t, ins), P.reader(ins.operands[2], t, ins)
    rp = P.pred_reader(ins.operands[3], ins)
    put = P.writer(ins.operands[0], t, ins)
    dt = view_dtype(t)
    return lambda S, m: put(S, np.where(rp(S), ra(S), rb(S)).astype(dt, copy=False), m)


# ---------------------------------------------------------------- cvt

def _float_value(x, st):
    """A source of float type st (already read with its view dtype) as float64."""
    if st is T.bf16:
        return half_to_f32(x, True).astype(np.float64)
    return np.asarray(x).astype(np.float64)


def _nan_int(st, dt):
    """The integer a NaN of float type `st` converts to in integer type `dt`: 0 from f16/bf16/f32 to at most 32
    bits, else the pattern 1 << (bits - 1) (as a value of dt: the minimum of a signed type). The PTX ISA says
    NaN converts to 0; measured on an H100 (sm_90), an f64 source or a 64-bit destination gives the pattern."""
    if st.bits < 64 and dt.bits <= 32:
        return 0
    return -(1 << (dt.bits - 1)) if dt.kind == "s" else 1 << (dt.bits - 1)


def _to_int(r, dt, nan_value=0):
    """float64 (already rounded to an integer value) -> dt, saturating; NaN gives `nan_value` (`_nan_int`)."""
    lo, hi = T.int_range(dt)
    out_dt = view_dtype(dt)
    big = r >= float(hi)
    small = r <= float(lo)
    nan = np.isnan(r)
    safe = np.where(nan | big | small, 0.0, r)
    if dt.kind == "u" and dt.bits == 64:
        v = safe.astype(np.uint64)
    else:
        v = safe.astype(np.int64)
    v = np.where(big, np.array(hi).astype(out_dt), np.where(small, np.array(lo).astype(out_dt), v.astype(out_dt)))
    if nan_value:
        v = np.where(nan, np.array(nan_value).astype(out_dt), v)
    return v.astype(out_dt)


_INT_ROUND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def make_cvt(P, op):
    """The executor of `cvt` with PTX's rules (see the module docstring): truncation and extension by signedness,
    float-to-integer rounding with saturation, round-to-nearest-even narrowing, .sat and .ftz. Returns ``fn(S,
    m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being
    built.
    """
    ins = op.ins
    dt, st, rnd = ins.info
    mods = set(ins.mods)
    sat = "sat" in mods
    ftz = "ftz" in mods
    d = ins.operands[0]
    if dt in (T.f16x2, T.bf16x2):
        ra, rb = P.reader(ins.operands[1], T.f32, ins), P.reader(ins.operands[2], T.f32, ins)
        put = P.writer(d, T.b32, ins)
        is_bf16 = dt is T.bf16x2
        fmt = _fmt(dt)

        def half(x):
            x = _maybe_sat(np.asarray(x).astype(np.float64), sat)
            if rnd in (None, "rn"):
                return half_bits(x, is_bf16).astype(np.uint32)
            bits = convert(x, False, fmt, rnd)
            return (bits if is_bf16 else bits.view(np.uint16)).astype(np.uint32)

        def pack(S, m):
            put(S, (half(ra(S)) << np.uint32(16)) | half(rb(S)), m)
        return pack
    src_t = T.b16 if st is T.bf16 else st
    ra = P.reader(ins.operands[1], src_t, ins)
    dst_t = T.b16 if dt is T.bf16 else dt
    put = P.writer(d, dst_t, ins, extend="sign" if dt.kind == "s" else "zero")
    if dt.is_int and st.is_int:
        lo, hi = T.int_range(dt)
        out_dt = view_dtype(dt)
        src_signed = st.kind == "s"

        def i2i(S, m):
            a = np.asarray(ra(S))
            if sat:
                if src_signed:
                    v = np.clip(a.astype(np.int64), max(lo, -(1 << 63)), min(hi, (1 << 63) - 1))
                else:
                    v = np.minimum(a.astype(np.uint64), np.uint64(hi))
                put(S, v.astype(out_dt), m)
            else:
                wide = a.astype(np.int64) if src_signed else a.astype(np.uint64)
                put(S, wide.astype(out_dt), m)
        return i2i
    if dt.is_int and st.is_float:
        rounder = _INT_ROUND[rnd or "rzi"]
        nan_value = _nan_int(st, dt)

        def f2i(S, m):
            x = _float_value(ra(S), st)
            if ftz and st is T.f32:
                x = flush_subnormal(x.astype(np.float32)).astype(np.float64)
            put(S, _to_int(rounder(x), dt, nan_value), m)
        return f2i
    if dt.is_float and st.is_int:
        mode = rnd or "rn"
        # a 64-bit integer does not fit float64 exactly: round it from the integer itself, not twice
        exact = mode != "rn" or (st.bits == 64 and dt is not T.f64)

        def i2f(S, m):
            a = np.asarray(ra(S))
            if sat:  # to [0, 1] first: the clamped integer converts exactly
                a = np.clip(a.astype(np.int64) if st.kind == "s" else np.minimum(a, 1), 0, 1)
            if exact:
                put(S, convert(a, True, _fmt(dt), mode), m)
            else:
                put(S, _float_out(a.astype(np.float64), dt, exact_src=a), m)
        return i2f
    # float -> float
    narrowing = dt.bits < st.bits or (dt.bits == st.bits and dt is not st)
    directed = narrowing and rnd in ("rz", "rm", "rp")
    rounder = _INT_ROUND.get(rnd) if rnd in _INT_ROUND else None

    def f2f(S, m):
        x = _float_value(ra(S), st)
        if ftz and st is T.f32:
            x = flush_subnormal(x.astype(np.float32)).astype(np.float64)
        if rounder is not None:
            x = rounder(x)
        x = _maybe_sat(x, sat)
        r = convert(x, False, _fmt(dt), rnd) if directed else _float_out(x, dt)
        if ftz and dt is T.f32:
            r = flush_subnormal(r)
        put(S, r, m)
    return f2f


def _maybe_sat(x, sat):
    if not sat:
        return x
    return saturate(x)


def _float_out(x64, dt, exact_src=None):
    if dt is T.f64:
        if exact_src is not None and exact_src.dtype.itemsize == 8:
            return exact_src.astype(np.float64)  # one rounding straight from the 64-bit integer
        return x64
    if dt is T.f32:
        return x64.astype(np.float32)  # one rounding: x64 holds the source exactly (64-bit integers go to convert)
    if dt is T.f16:
        return x64.astype(np.float16)
    if dt is T.bf16:
        return half_bits(x64, True)
    raise AssertionError(dt)


# ---------------------------------------------------------------- cvta

def make_isspacep(P, op):
    """isspacep: the interpreter's generic windows (shared, param); any other address is global.
    .shared (.shared::cta) holds for the executing CTA's shared memory, .shared::cluster for any CTA's of
    its cluster (an address from `mapa` names CTA rank + 1 in its rank field: exec_cluster).  It has no
    generic .local or .const addresses, so those tests are false."""
    ins = op.ins
    space = ins.mods[0]
    ra = P.reader(ins.operands[1], T.u64, ins)
    put = P.writer(ins.operands[0], T.pred, ins)

    def run(S, m):
        a = np.broadcast_to(np.asarray(ra(S)).astype(np.uint64), (S.N,))
        shared, param = in_window(a, SHARED_WINDOW), in_window(a, PARAM_WINDOW)
        if space == "shared::cluster":
            r = shared
        elif space.startswith("shared"):  # the executing CTA's: no rank field, or its own rank's
            field = (np.where(shared, a - np.uint64(SHARED_WINDOW), 0) >> np.uint64(CLUSTER_RANK_SHIFT)).astype(np.int64)
            r = shared & ((field == 0) | (field - 1 == S.cluster_rank_of_cta[S.cta_local]))
        elif space.startswith("param"):
            r = param
        elif space == "global":
            r = ~shared & ~param
        else:
            r = np.zeros(np.shape(a), dtype=bool)
        put(S, np.broadcast_to(r, (S.N,)), m)
    return run


def make_cvta(P, op):
    """The executor of `cvta`: converts between generic addresses and the shared and param windows the
    interpreter maps (global addresses are generic already). Returns ``fn(S, m)``, which executes it on
    Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    to = "to" in ins.mods
    space = ins.mods[-1].split("::")[0]  # (shared::cta and ::cluster share the window; param::entry is param)
    ra = P.reader(ins.operands[1], t, ins)
    put = P.writer(ins.operands[0], t, ins)
    if space in ("global", "const"):  # .const variables live in the global heap (memory.py)
        return lambda S, m: put(S, ra(S), m)
    if space == "local":
        base = LOCAL_WINDOW
    elif space == "shared":
        base = SHARED_WINDOW
    elif space == "param":
        base = PARAM_WINDOW
    else:
        raise InterpUnsupported(f"cvta for .{space} is not modelled", ins)
    dt = view_dtype(t)
    delta = np.array(base & ((1 << t.bits) - 1), dtype=storage_dtype(t)).view(dt)[()]
    if to:
        return lambda S, m: put(S, ra(S) - delta, m)
    return lambda S, m: put(S, ra(S) + delta, m)
