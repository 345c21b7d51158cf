"""Carry chains (add.cc addc sub.cc subc mad.cc madc) and dp4a / dp2a, bit-exact.

The condition-code carry flag is one hidden per-thread predicate register of the program (every
carry instruction of a kernel shares it), zero at launch.  Sums are formed in Python-width
integers (object arrays for 64-bit types), so the carry out is exact; subtraction's flag is a
borrow, as the PTX ISA defines subc: d = a - (b + CF).
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.operands import Reg
from .values import view_dtype

_PTXFORGE_INTERNAL = True

#: The register that holds CC.CF (its name cannot clash with a PTX register name).
CARRY_FLAG = Reg("cc.cf", T.pred)


def make_carry(P, op):
    """The executor of the carry-chain instructions (add.cc, addc, sub.cc, subc, mad.cc, madc): the result and the carry-out flag each thread keeps for the next instruction of the chain. Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    t = ins.type
    bits = t.bits
    mask = (1 << bits) - 1
    put = P.writer(ins.operands[0], t, ins)
    reads = [P.reader(s, t.as_unsigned(), ins) for s in ins.operands[1:]]
    cf = P.slot(CARRY_FLAG, bool)
    out = view_dtype(t)
    udt = view_dtype(t.as_unsigned())
    signed = t.kind == "s"

    def ints(S, x):
        # full thread width: an immediate source reads as one number, and with every source immediate
        # (`sub.cc.u32 d, 0, 1`, which ptxas accepts) the chain would otherwise compute on scalars
        return np.broadcast_to(np.asarray(x).astype(np.uint64), (S.N,)).astype(object)

    def product(a, b):
        if not signed:
            return a * b
        sa = np.where(a >> (bits - 1) != 0, a - (1 << bits), a)
        sb = np.where(b >> (bits - 1) != 0, b - (1 << bits), b)
        return (sa * sb) & ((1 << (2 * bits)) - 1)

    def run(S, m):
        xs = [ints(S, r(S)) for r in reads]
        c_in = S.V[cf].astype(object) if info.carry_in else 0
        if info.op == "add":
            full = xs[0] + xs[1] + c_in
            carry = full >> bits
        elif info.op == "sub":
            full = xs[0] - xs[1] - c_in
            carry = (full < 0).astype(object)
        else:
            p = product(xs[0], xs[1])
            half = p >> bits if info.mode == "hi" else p & mask
            full = half + xs[2] + c_in
            carry = full >> bits
        res = np.array([int(v) & mask for v in full], dtype=np.uint64).astype(udt).view(out)
        put(S, res, m)
        if info.carry_out:
            np.copyto(S.V[cf], np.asarray(carry != 0, dtype=bool), where=m)
    return run


def make_dot(P, op):
    """The executor of dp4a / dp2a: four (two) byte products (byte by half-word) summed into the 32-bit accumulator c. Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    put = P.writer(ins.operands[0], ins.type, ins)
    ra = P.reader(ins.operands[1], T.u32, ins)
    rb = P.reader(ins.operands[2], T.u32, ins)
    rc = P.reader(ins.operands[3], T.s32 if ins.type is T.s32 else T.u32, ins)

    def parts(x, width, n, signed):
        x = np.asarray(x).astype(np.int64)
        out = []
        for i in range(n):
            v = (x >> (width * i)) & ((1 << width) - 1)
            out.append(np.where(v >= 1 << (width - 1), v - (1 << width), v) if signed else v)
        return out

    a_signed, b_signed = info.a_type is T.s32, info.b_type is T.s32
    out_dt = view_dtype(ins.type)

    def run(S, m):
        c = np.asarray(rc(S)).astype(np.int64)
        if info.op == "dp4a":
            pa, pb = parts(ra(S), 8, 4, a_signed), parts(rb(S), 8, 4, b_signed)
        else:
            pa = parts(ra(S), 16, 2, a_signed)
            pb = parts(rb(S), 8, 4, b_signed)
            pb = pb[2:] if info.mode == "hi" else pb[:2]
        total = c + sum(x * y for x, y in zip(pa, pb))
        put(S, (total & 0xFFFFFFFF).astype(np.uint32).view(out_dt), m)
    return run
