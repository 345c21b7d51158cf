"""Video instructions on whole words: the scalar forms (vadd vsub vabsdiff vmin vmax vshl vshr vmad
vset) and the two- and four-way SIMD forms (vadd2 ... vset2, vadd4 ... vset4).

Scalar: each source is extended to a wide integer by its type (.u32 zero-, .s32 sign-extended),
the operation is exact, .sat clamps to the destination type's range, the secondary operation
combines with c, and the result keeps 32 bits.  vmad's product is signed unless both sources are
unsigned, c has the product's signedness, and vmad's .sat clamps to the 32-bit range of that
signedness (the ISA's signedFinal), whatever the destination type.

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
    c_t = (T.u32 if at is bt is T.u32 else T.s32) if form.op == "mad" else dt
    # vmad saturates by the signedness of its computation (signedFinal in the ISA's pseudo-code: signed unless
    # both sources are unsigned, with no operand negated, which the builder never writes); the others by dt
    sat_signed = (c_t if form.op == "mad" else dt) is T.s32

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
                         dtype=object) + _wide(rc(S), c_t).astype(object)
            if info.scale is not None:
                r = r >> (7 if info.scale == "shr7" else 15)
        else:  # set
            r = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[info.cmp]
            r = r.astype(np.int64)
        if info.sat:
            r = np.array([min(max(int(v), -(1 << 31) if sat_signed else 0),
                              (1 << 31) - 1 if sat_signed else (1 << 32) - 1)
                          for v in np.broadcast_to(r, (S.N,))], dtype=object)
        if info.op2 is not None:
            c = _wide(rc(S), dt).astype(object)
            r = r + c if info.op2 == "add" else (np.minimum(r, c) if info.op2 == "min" else np.maximum(r, c))
        out = np.array([int(v) & 0xFFFFFFFF for v in np.broadcast_to(r, (S.N,))], dtype=np.uint32)
        put(S, out.view(np.int32) if dt is T.s32 else out, m)
    return run
