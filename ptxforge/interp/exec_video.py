"""Scalar video instructions (vadd vsub vabsdiff vmin vmax vshl vshr vmad vset) on whole words.

Each source is extended to a wide integer by its type (.u32 zero-, .s32 sign-extended), the
operation is exact, .sat clamps to the destination type's range, the secondary operation
combines with c, and the result keeps 32 bits.  vmad's product is signed unless both sources are
unsigned, and c has the product's signedness.  The SIMD forms are refused: their lane merge and
per-lane saturation are not modelled.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .findings import InterpUnsupported

_PTXFORGE_INTERNAL = True


def _wide(x, t):
    v = np.asarray(x).astype(np.int64) & 0xFFFFFFFF
    return np.where(v >= 1 << 31, v - (1 << 32), v) if t is T.s32 else v


def _clamp(v, t):
    lo, hi = ((-(1 << 31), (1 << 31) - 1) if t is T.s32 else (0, (1 << 32) - 1))
    return np.clip(v, lo, hi)


def make_video(P, op):
    """The executor of the scalar video instructions (vadd, vsub, vabsdiff, vmin, vmax, vshl, vshr, vmad, vset) on whole words; the SIMD forms are refused. Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    form = info.form
    if form.simd:
        raise InterpUnsupported(f"{ins.opcode} (SIMD video) is not modelled: lane merge and saturation", ins)
    put = P.writer(ins.operands[0], info.dtype, ins)
    ra = P.reader(ins.operands[1], T.u32, ins)
    rb = P.reader(ins.operands[2], T.u32, ins)
    rc = P.reader(ins.operands[3], T.u32, ins) if len(ins.operands) > 3 else None
    at, bt, dt = info.atype, info.btype, info.dtype
    c_t = (T.u32 if at is bt is T.u32 else T.s32) if form.op == "mad" else dt

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
            r = np.array([min(max(int(v), -(1 << 31) if dt is T.s32 else 0),
                              (1 << 31) - 1 if dt is T.s32 else (1 << 32) - 1)
                          for v in np.broadcast_to(r, (S.N,))], dtype=object)
        if info.op2 is not None:
            c = _wide(rc(S), dt).astype(object)
            r = r + c if info.op2 == "add" else (np.minimum(r, c) if info.op2 == "min" else np.maximum(r, c))
        out = np.array([int(v) & 0xFFFFFFFF for v in np.broadcast_to(r, (S.N,))], dtype=np.uint32)
        put(S, out.view(np.int32) if dt is T.s32 else out, m)
    return run
