"""Bit logic: and or xor not cnot, shl shr, lop3 (and its predicate output), prmt, shf, bfe bfi,
popc clz brev bfind (and .shiftamt), bmsk, szext, fns.

Shift amounts at or beyond the width are clamped explicitly (numpy, like C, leaves them
undefined): shl and shr.u give 0, shr.s fills with the sign.  lop3 evaluates its truth table
by Shannon expansion on the first operand, at most a handful of numpy operations.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .values import UINT, bit_length, bit_reverse, popcount, view_dtype

_PTXFORGE_INTERNAL = True


def make_logic(P, op):
    """The executor of `and or xor not cnot` on bit types and .pred. Returns ``fn(S, m)``, which executes it on
    Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    put = P.writer(ins.operands[0], t, ins)
    rs = [P.reader(s, t, ins) for s in ins.operands[1:]]
    name = ins.opcode
    if name == "and":
        a, b = rs
        return lambda S, m: put(S, a(S) & b(S), m)
    if name == "or":
        a, b = rs
        return lambda S, m: put(S, a(S) | b(S), m)
    if name == "xor":
        a, b = rs
        return lambda S, m: put(S, a(S) ^ b(S), m)
    if name == "not":
        a, = rs
        return lambda S, m: put(S, ~a(S), m)
    if name == "cnot":
        a, = rs
        dt = view_dtype(t)
        return lambda S, m: put(S, (a(S) == 0).astype(dt), m)
    raise AssertionError(name)


def make_shift(P, op):
    """The executor of `shl` / `shr` (logical on .b/.u, arithmetic on .s; amounts past the width give 0 or the
    sign). Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the
    Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    bits = t.bits
    put = P.writer(ins.operands[0], t, ins)
    ra = P.reader(ins.operands[1], t, ins)
    rn = P.reader(ins.operands[2], T.u32, ins)
    dt = view_dtype(t)
    if ins.opcode == "shl":
        def shl(S, m):
            a = ra(S)
            n = np.asarray(rn(S)).astype(np.uint64)
            big = n >= bits
            r = np.asarray(a).view(UINT[bits]) << np.minimum(n, bits - 1).astype(UINT[bits])
            put(S, np.where(big, dt.type(0), r.view(dt)), m)
        return shl
    signed = t.kind == "s"

    def shr(S, m):
        a = np.asarray(ra(S))
        n = np.asarray(rn(S)).astype(np.uint64)
        k = np.minimum(n, bits - 1).astype(UINT[bits] if not signed else np.int64)
        if signed:
            r = a >> k.astype(a.dtype)  # arithmetic; amounts >= width act like width-1
        else:
            r = np.where(n >= bits, dt.type(0), a >> k.astype(a.dtype))
        put(S, r, m)
    return shr


def _lop2(code: int, b, c):
    """Two-input function with truth table `code` (bit (b<<1|c) of code)."""
    ones = ~(b ^ b)
    table = {
        0x0: lambda: b ^ b, 0xF: lambda: ones,
        0xC: lambda: b, 0x3: lambda: ~b, 0xA: lambda: c, 0x5: lambda: ~c,
        0x8: lambda: b & c, 0xE: lambda: b | c, 0x6: lambda: b ^ c, 0x9: lambda: ~(b ^ c),
        0x7: lambda: ~(b & c), 0x1: lambda: ~(b | c),
        0x4: lambda: b & ~c, 0x2: lambda: ~b & c, 0xD: lambda: b | ~c, 0xB: lambda: ~b | c,
    }
    return table[code]()


def lop3_eval(lut: int, a, b, c):
    """lop3 truth table `lut`: result bit = lut[(a<<2)|(b<<1)|c] for each bit position."""
    hi = (lut >> 4) & 0xF  # a = 1
    lo = lut & 0xF  # a = 0
    # reorder each nibble into the (b<<1|c) indexing of _lop2: nibble bit i = (b<<1|c) = i
    f1 = _lop2(hi, b, c)
    if hi == lo:
        return f1
    f0 = _lop2(lo, b, c)
    return (a & f1) | (~a & f0)


def make_lop3(P, op):
    """The executor of `lop3.b32`: each result bit is the lookup table's entry for the three source bits. Returns
    ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the
    Op being built.
    """
    ins = op.ins
    put = P.writer(ins.operands[0], T.b32, ins)
    ra, rb, rc = (P.reader(s, T.b32, ins) for s in ins.operands[1:4])
    lut = int(ins.info)
    if not ins.mods:
        return lambda S, m: put(S, lop3_eval(lut, ra(S), rb(S), rc(S)), m)
    put_p = P.writer(ins.operands[0].pred, T.pred, ins)
    rq = P.pred_reader(ins.operands[5], ins)
    both = ins.mods[0] == "and"

    def lop3_pred(S, m):
        d = lop3_eval(lut, ra(S), rb(S), rc(S))
        put(S, d, m)
        nz, q = np.asarray(d) != 0, rq(S)
        put_p(S, (nz & q) if both else (nz | q), m)
    return lop3_pred


def make_bmsk(P, op):
    """bmsk: ((1 << width) - 1) << start in 32 bits; clamp limits both to 32, wrap takes them mod 32."""
    ins = op.ins
    put = P.writer(ins.operands[0], T.b32, ins)
    ra, rb = P.reader(ins.operands[1], T.u32, ins), P.reader(ins.operands[2], T.u32, ins)
    wrap = ins.mods[0] == "wrap"

    def run(S, m):
        a = np.asarray(ra(S)).astype(np.int64)
        b = np.asarray(rb(S)).astype(np.int64)
        a, b = (a & 31, b & 31) if wrap else (np.minimum(a, 32), np.minimum(b, 32))
        mask = (_low_mask(b) << np.minimum(a, 63).astype(np.uint64)) & np.uint64(0xFFFFFFFF)
        put(S, np.where(a >= 32, np.uint64(0), mask).astype(np.uint32), m)
    return run


def make_szext(P, op):
    """szext: the low `width` bits of a, sign- or zero-extended; width clamped to 32 or taken mod 32."""
    ins = op.ins
    t = ins.type
    put = P.writer(ins.operands[0], t, ins)
    ra, rb = P.reader(ins.operands[1], T.u32, ins), P.reader(ins.operands[2], T.u32, ins)
    wrap = ins.mods[0] == "wrap"
    signed = t.kind == "s"

    def run(S, m):
        a = np.asarray(ra(S)).astype(np.uint64)
        b = np.asarray(rb(S)).astype(np.int64)
        b = b & 31 if wrap else np.minimum(b, 32)
        low = a & _low_mask(b)
        if signed:
            top = (low >> np.maximum(b - 1, 0).astype(np.uint64)) & np.uint64(1)
            low = np.where((b > 0) & (top == 1), low | (~_low_mask(b) & np.uint64(0xFFFFFFFF)), low)
        put(S, (low & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(view_dtype(t)), m)
    return run


def make_fns(P, op):
    """fns: walk from bit `base` up (offset > 0) or down (offset < 0) to the |offset|-th set bit."""
    ins = op.ins
    put = P.writer(ins.operands[0], T.b32, ins)
    rmask, rbase, roff = (P.reader(s, t, ins) for s, t in zip(ins.operands[1:], (T.u32, T.u32, T.s32)))

    def one(mask, base, offset):
        if offset == 0:
            return base if base < 32 and mask >> base & 1 else 0xFFFFFFFF
        pos, count, inc = base, abs(offset) - 1, 1 if offset > 0 else -1
        while 0 <= pos < 32:
            if mask >> pos & 1:
                if count == 0:
                    return pos
                count -= 1
            pos += inc
        return 0xFFFFFFFF

    def run(S, m):
        ms, bs, os_ = (np.broadcast_to(np.asarray(r(S)), (S.N,)) for r in (rmask, rbase, roff))
        out = np.array([one(int(a), int(b), int(c)) for a, b, c in zip(ms, bs, os_)], dtype=np.uint32)
        put(S, out, m)
    return run


_PRMT_MODES = {
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}  # mode -> selector c[1:0] -> source byte for d.b0, d.b1, d.b2, d.b3


def make_prmt(P, op):
    """The executor of `prmt.b32` in the generic form and the f4e b4e rc8 ecl ecr rc16 modes. Returns ``fn(S,
    m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being
    built.
    """
    ins = op.ins
    put = P.writer(ins.operands[0], T.b32, ins)
    ra, rb, rc = (P.reader(s, T.b32, ins) for s in ins.operands[1:4])
    mode = ins.mods[0] if ins.mods else None
    table = np.array(_PRMT_MODES[mode], dtype=np.uint64) if mode else None

    def prmt(S, m):
        a = np.asarray(ra(S)).astype(np.uint64)
        b = np.asarray(rb(S)).astype(np.uint64)
        c = np.asarray(rc(S)).astype(np.uint64)
        src = (b << np.uint64(32)) | a
        out = np.zeros(np.broadcast(a, b, c).shape, dtype=np.uint64)
        for i in range(4):
            if table is None:
                sel = (c >> np.uint64(4 * i)) & np.uint64(0xF)
                byte = (src >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
                sign = (byte >> np.uint64(7)) * np.uint64(0xFF)
                byte = np.where(sel & np.uint64(8), sign, byte)
            else:
                sel = table[(c & np.uint64(3)).astype(np.intp), i]
                byte = (src >> (sel * np.uint64(8))) & np.uint64(0xFF)
            out |= byte << np.uint64(8 * i)
        put(S, out.astype(np.uint32), m)
    return prmt


def make_shf(P, op):
    """The executor of `shf.l` / `shf.r` (.wrap or .clamp): the funnel shift of a 64-bit pair. Returns ``fn(S,
    m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being
    built.
    """
    ins = op.ins
    direction, mode = ins.mods[0], ins.mods[1]
    put = P.writer(ins.operands[0], T.b32, ins)
    rlo, rhi = P.reader(ins.operands[1], T.b32, ins), P.reader(ins.operands[2], T.b32, ins)
    rn = P.reader(ins.operands[3], T.u32, ins)

    def shf(S, m):
        lo = np.asarray(rlo(S)).astype(np.uint64)
        hi = np.asarray(rhi(S)).astype(np.uint64)
        n = np.asarray(rn(S)).astype(np.uint64)
        n = np.minimum(n, np.uint64(32)) if mode == "clamp" else n & np.uint64(31)
        v = (hi << np.uint64(32)) | lo
        if direction == "l":
            r = (v << n) >> np.uint64(32)
        else:
            r = v >> n
        put(S, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), m)
    return shf


def _field_operand_mask(bits: int) -> int:
    """The bits of bfe's and bfi's position and length operands that count. The ISA takes their low bytes
    (b[7:0], c[7:0]); so do the 32-bit forms, but the 64-bit forms take the whole 32-bit operands (measured on an
    H100 (sm_90): a position or length of 256 or more is beyond the msb, not taken modulo 256)."""
    return 0xFF if bits == 32 else 0xFFFFFFFF


def make_bitfield(P, op):
    """The executor of `bfe bfi popc clz brev bfind`. Returns ``fn(S, m)``, which executes it on Machine `S` for
    the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    bits = t.bits
    name = ins.opcode
    srcs = ins.operands[1:]
    if name == "bfe":
        put = P.writer(ins.operands[0], t, ins)
        ra = P.reader(srcs[0], T.lookup(f"u{bits}"), ins)
        rp, rl = P.reader(srcs[1], T.u32, ins), P.reader(srcs[2], T.u32, ins)
        signed = t.kind == "s"
        field = _field_operand_mask(bits)

        def bfe(S, m):
            a = np.asarray(ra(S)).astype(np.uint64)
            pos = np.asarray(rp(S)).astype(np.int64) & field
            ln = np.asarray(rl(S)).astype(np.int64) & field
            take = np.clip(np.minimum(ln, bits - pos), 0, bits)  # bits that come from a
            got = np.where(pos >= bits, np.uint64(0), a >> np.minimum(pos, bits - 1).astype(np.uint64))
            keep = _low_mask(take)
            got &= keep
            if signed:
                top = np.clip(pos + ln - 1, 0, bits - 1).astype(np.uint64)
                sbit = np.where(ln == 0, np.uint64(0), (a >> top) & np.uint64(1))
                got |= np.where(sbit == 1, ~keep & _low_mask(np.full_like(take, bits)), np.uint64(0))
            put(S, got.astype(UINT[bits]).view(view_dtype(t)), m)
        return bfe
    if name == "bfi":
        put = P.writer(ins.operands[0], t, ins)
        rf, rb = P.reader(srcs[0], t, ins), P.reader(srcs[1], t, ins)
        rp, rl = P.reader(srcs[2], T.u32, ins), P.reader(srcs[3], T.u32, ins)
        field = _field_operand_mask(bits)

        def bfi(S, m):
            f = np.asarray(rf(S)).astype(np.uint64)
            b = np.asarray(rb(S)).astype(np.uint64)
            pos = np.asarray(rp(S)).astype(np.int64) & field
            ln = np.asarray(rl(S)).astype(np.int64) & field
            take = np.clip(np.minimum(ln, bits - pos), 0, bits)
            sh = np.minimum(pos, bits - 1).astype(np.uint64)
            field_mask = np.where(pos >= bits, np.uint64(0), _low_mask(take) << sh)
            r = (b & ~field_mask) | ((f << sh) & field_mask)
            put(S, (r & _low_mask(np.int64(bits))).astype(UINT[bits]), m)
        return bfi
    put = P.writer(ins.operands[0], T.u32 if name in ("popc", "clz", "bfind") else t, ins)
    ra = P.reader(srcs[0], t if name == "bfind" else T.lookup(f"b{bits}"), ins)
    if name == "popc":
        return lambda S, m: put(S, popcount(ra(S)), m)
    if name == "clz":
        return lambda S, m: put(S, (np.uint32(bits) - bit_length(ra(S), bits)).astype(np.uint32), m)
    if name == "brev":
        return lambda S, m: put(S, bit_reverse(ra(S), bits), m)
    if name == "bfind":
        shiftamt = "shiftamt" in ins.mods
        signed = t.kind == "s"

        def bfind(S, m):
            a = np.asarray(ra(S))
            u = a.view(UINT[bits])
            if signed:
                u = np.where(a < 0, ~u, u)
            n = bit_length(u, bits).astype(np.int64)
            pos = (bits - n) if shiftamt else (n - 1)  # shiftamt: (bits - 1) - (n - 1)
            put(S, np.where(n == 0, np.uint32(0xFFFFFFFF), pos.astype(np.uint32)), m)
        return bfind
    raise AssertionError(name)


def _low_mask(n):
    """(1 << n) - 1 as uint64 for n in 0..64 (n = 64: all ones)."""
    n = np.asarray(n).astype(np.int64)
    full = n >= 64
    nn = np.minimum(n, 63).astype(np.uint64)
    return np.where(full, np.uint64(0xFFFFFFFFFFFFFFFF), (np.uint64(1) << nn) - np.uint64(1))
