"""Video instructions on whole words: the scalar forms (vadd vsub vabsdiff vmin vmax vshl vshr vmad
vset) and the two- and four-way SIMD forms (vadd2 ... vset2, vadd4 ... vset4).

Scalar, as an H100 (sm_90) computes them (measured; where the ISA's text differs, the hardware is
followed): each source is extended to a wide integer by its type (.u32 zero-, .s32 sign-extended)
and the operation is exact; .sat clamps to the destination type's range (vshl/vshr first keep the
ISA's 34-bit signed result; an unsigned .sat of vadd, vsub, vabsdiff, vmin and vmax gives 0 below
zero but only the low 32 bits from 2^32 up); the secondary .add adds c, and .min/.max compare a
key of the result with c (`_secondary_min_max`); the result keeps 32 bits.  vmad sign-extends a,
b and c whatever their types; its computation is signed unless both sources are unsigned (the ISA's
signedFinal): .shr7/.shr15 shift arithmetically, or logically on the 64-bit two's complement word
for an unsigned computation, and .sat clamps to the 32-bit range of that signedness, whatever the
destination type.

SIMD (the PTX ISA's semantics with the default selectors, the only ones the builder emits: lane i
of a against lane i of b, every lane in the mask): lanes are half-words (2) or bytes (4), each
extended by its operand's type; the lane result is exact (vavrg rounds a non-negative sum up and a
negative one down: (s + 1) >> 1 or s >> 1), .sat clamps it to the lane range of the destination
type, and without .add each lane of d keeps the lane result's low bits.  vset's lane result is 0
or 1.  With .add, d = c + the sum of the lane results (exact, then 32 bits).
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T

_PTXFORGE_INTERNAL = True


def _wide(x, t):
    v = np.asarray(x).astype(np.int64) & 0xFFFFFFFF
    return np.where(v >= 1 << 31, v - (1 << 32), v) if t is T.s32 else v


def _clamp(v, t):
    lo, hi = ((-(1 << 31), (1 << 31) - 1) if t is T.s32 else (0, (1 << 32) - 1))
    return np.clip(v, lo, hi)


def _lanes(x, lanes: int, t):
    """The lanes of 32-bit words `x` (shape (N, lanes), lane 0 the least significant), each extended by `t`."""
    w = 32 // lanes
    v = (np.asarray(x).astype(np.int64)[..., None] >> (np.arange(lanes) * w)) & ((1 << w) - 1)
    return np.where(v >= 1 << (w - 1), v - (1 << w), v) if t is T.s32 else v


def _lane_op(op, a, b, cmp=None):
    """One SIMD video operation on extended lanes (exact, int64)."""
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "avrg":
        s = a + b
        return np.where(s >= 0, (s + 1) >> 1, s >> 1)
    if op == "absdiff":
        return np.abs(a - b)
    if op == "min":
        return np.minimum(a, b)
    if op == "max":
        return np.maximum(a, b)
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp].astype(np.int64)


def simd_video(form, info, a, b, c):
    """d of one SIMD video instruction (`form`, `info`: the ISA row and its modifiers) over 32-bit words a, b, c
    (numpy arrays of one shape): the executor's arithmetic, also a numpy model of the instruction."""
    n, w = form.lanes, 32 // form.lanes
    t = _lane_op(form.op, _lanes(a, n, info.atype), _lanes(b, n, info.btype), info.cmp)
    if info.op2 == "add":
        return ((np.asarray(c).astype(np.int64) + t.sum(axis=-1)) & 0xFFFFFFFF).astype(np.uint32)
    if info.sat:
        t = np.clip(t, -(1 << (w - 1)), (1 << (w - 1)) - 1) if info.dtype is T.s32 else np.clip(t, 0, (1 << w) - 1)
    d = ((t & ((1 << w) - 1)) << (np.arange(n) * w)).sum(axis=-1)
    return (d & 0xFFFFFFFF).astype(np.uint32)


def _make_simd(P, op):
    ins, info = op.ins, op.ins.info
    put = P.writer(ins.operands[0], info.dtype, ins)
    ra, rb, rc = (P.reader(x, T.u32, ins) for x in ins.operands[1:4])

    def run(S, m):
        d = simd_video(info.form, info, *(np.broadcast_to(r(S), (S.N,)) for r in (ra, rb, rc)))
        put(S, d.view(np.int32) if info.dtype is T.s32 else d, m)
    return run


def _saturate(v: int, op: str, signed: bool) -> int:
    """.sat of a scalar video result `v` (exact) to the signed or unsigned 32-bit range, as measured on an H100
    (sm_90): vshl/vshr first keep the ISA's 34-bit signed intermediate (so 2 << 32 is negative); the unsigned
    .sat of vadd, vsub, vabsdiff, vmin and vmax makes a negative result 0 but keeps the low 32 bits of one of
    2^32 or more (vadd.u32.u32.u32.sat of 1 and 0xFFFFFFFF is 0)."""
    if op in ("shl", "shr"):
        v = (v + (1 << 33)) % (1 << 34) - (1 << 33)
    if signed:
        return min(max(v, -(1 << 31)), (1 << 31) - 1)
    if op in ("mad", "shl", "shr"):
        return min(max(v, 0), 0xFFFFFFFF)
    return 0 if v < 0 else v & 0xFFFFFFFF


def _secondary_min_max(op2: str, op: str, r, c, dt, n: int):
    """The .min/.max secondary operation of a scalar video instruction (primary operation `op`), as measured on
    an H100 (sm_90): a key of the result `r` against c extended by the destination type, compared signed for an
    .s32 destination and unsigned for a .u32 one. vmin, vmax and vabsdiff key the ISA's 34-bit result (so a
    negative vmin.u32.s32.u32 result is above every c); vadd and vsub key its low 32 bits with bit 31 copied
    into bit 32, so vadd.u32 of 1 and 0xFFFFFFFF (0 in 32 bits) is below every c, one of 0x80000000 above every
    c, and an .s32 sum is compared as 32 bits. The ISA's text compares the exact result. Returns the chosen
    words."""
    rr = np.broadcast_to(r, (n,))
    if op in ("add", "sub"):
        key = np.array([(int(v) & 0xFFFFFFFF) | ((int(v) >> 31 & 1) << 32) for v in rr], dtype=np.int64)
    else:
        key = np.array([int(v) % (1 << 34) for v in rr], dtype=np.int64)
    c32 = np.broadcast_to(np.asarray(c).astype(np.int64) & 0xFFFFFFFF, (n,))
    if dt is T.s32:
        top = 1 << (32 if op in ("add", "sub") else 33)
        key, kc = np.where(key >= top, key - 2 * top, key), _wide(c32, T.s32)
    else:
        kc = c32
    pick_r = key >= kc if op2 == "max" else key <= kc
    return np.where(pick_r, key & 0xFFFFFFFF, c32)


def make_video(P, op):
    """The executor of a video instruction: the scalar forms (vadd, vsub, vabsdiff, vmin, vmax, vshl, vshr, vmad,
    vset) and the SIMD forms (vadd2 ... vset4), on whole words. Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    form = info.form
    if form.simd:
        return _make_simd(P, op)
    put = P.writer(ins.operands[0], info.dtype, ins)
    ra = P.reader(ins.operands[1], T.u32, ins)
    rb = P.reader(ins.operands[2], T.u32, ins)
    rc = P.reader(ins.operands[3], T.u32, ins) if len(ins.operands) > 3 else None
    at, bt, dt = info.atype, info.btype, info.dtype
    if form.op == "mad":  # measured: every source sign-extended, whatever its type (see the module docstring)
        at = bt = T.s32
    # vmad saturates by the signedness of its computation (signedFinal in the ISA's pseudo-code: signed unless
    # both sources are unsigned, with no operand negated, which the builder never writes); the others by dt
    sat_signed = not (info.atype is info.btype is T.u32) if form.op == "mad" else dt is T.s32

    def run(S, m):
        a, b = _wide(ra(S), at), _wide(rb(S), bt)
        if form.op == "add":
            r = a + b
        elif form.op == "sub":
            r = a - b
        elif form.op == "absdiff":
            r = np.abs(a - b)
        elif form.op == "min":
            r = np.minimum(a, b)
        elif form.op == "max":
            r = np.maximum(a, b)
        elif form.op in ("shl", "shr"):
            n = b & 31 if info.mode == "wrap" else np.minimum(b, 32)
            if form.op == "shl":
                r = np.array([int(x) << int(k) for x, k in zip(np.broadcast_to(a, (S.N,)),
                                                                np.broadcast_to(n, (S.N,)))], dtype=object)
            else:
                r = a >> np.minimum(n, 63)
        elif form.op == "mad":
            r = np.array([int(x) * int(y) for x, y in zip(np.broadcast_to(a, (S.N,)), np.broadcast_to(b, (S.N,)))],
                         dtype=object) + _wide(rc(S), T.s32).astype(object)
            if info.scale is not None:
                k = 7 if info.scale == "shr7" else 15
                # an unsigned computation shifts its 64-bit two's complement word logically
                r = r >> k if sat_signed else np.array([(int(v) % (1 << 64)) >> k for v in r], dtype=object)
        else:  # set
            r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[info.cmp]
            r = r.astype(np.int64)
        if info.sat:
            r = np.array([_saturate(int(v), form.op, sat_signed) for v in np.broadcast_to(r, (S.N,))], dtype=object)
        if info.op2 == "add":
            r = r + _wide(rc(S), dt).astype(object)
        elif info.op2 is not None:
            r = _secondary_min_max(info.op2, form.op, r, rc(S), dt, S.N)
        out = np.array([int(v) & 0xFFFFFFFF for v in np.broadcast_to(r, (S.N,))], dtype=np.uint32)
        put(S, out.view(np.int32) if dt is T.s32 else out, m)
    return run
