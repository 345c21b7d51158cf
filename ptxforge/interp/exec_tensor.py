"""mma.sync, every form of `MMA_FORMS`, for all warps of the step at once.

Fragments are unpacked through the layouts of :mod:`ptxforge.isa.fragments` into whole A, B
and C matrices per warp, multiplied, and packed back.  Integer forms are exact: the products
of 8-bit, 4-bit and 1-bit values and their sums are exact in float64 (|sum| < 2^53), then
wrap to int32 or, with .satfinite, clamp.  .b1 forms count set bits of A AND B or A XOR B.
Floating-point forms multiply exactly in float64 and round once to the accumulator type; a
tensor core accumulates with less care, so these agree with a GPU within rounding only.  tf32
operands keep the top 19 bits of each float32 (the tensor core ignores the low 13).

Register words are unpacked by viewing them as bytes (little-endian: element 0 of a register is
its lowest bits), which is exactly the packed-element order of every fragment.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .findings import InterpUnsupported
from ..isa.fragments import mma_fragment
from .values import bf16_to_f32

_PTXFORGE_INTERNAL = True

_NIBBLES = {
    "s4": np.array([[(b & 15) - 16 * ((b & 15) >= 8), (b >> 4) - 16 * ((b >> 4) >= 8)] for b in range(256)],
                   dtype=np.float64),
    "u4": np.array([[b & 15, b >> 4] for b in range(256)], dtype=np.float64),
}


def _fp8_table(exp_bits: int, man_bits: int, ieee: bool) -> np.ndarray:
    """The value of every byte of an fp8 format (sign, exponent, mantissa; subnormals at exponent 0).
    e5m2 is IEEE-like (an all-ones exponent is infinity or NaN); e4m3 has no infinity and only
    S.1111.111 is NaN."""
    bias = (1 << (exp_bits - 1)) - 1
    out = np.empty(256, dtype=np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        e = (byte >> man_bits) & ((1 << exp_bits) - 1)
        m = byte & ((1 << man_bits) - 1)
        if ieee and e == (1 << exp_bits) - 1:
            out[byte] = sign * np.inf if m == 0 else np.nan
        elif not ieee and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
            out[byte] = np.nan
        elif e == 0:
            out[byte] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[byte] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


_FP8 = {"e4m3": _fp8_table(4, 3, False), "e5m2": _fp8_table(5, 2, True)}


def _elements(words, et: T.ScalarType):
    """(nw, 32, nregs) register words -> (nw, 32, elements) float64 values, in fragment order."""
    if et is T.f64:
        return words.view(np.float64)
    w32 = words.astype(np.uint32)
    if et in (T.s8, T.u8):
        b = w32.view(np.int8 if et is T.s8 else np.uint8)
        return b.astype(np.float64)
    if et in (T.e4m3, T.e5m2):
        return _FP8[et.name][w32.view(np.uint8)]
    if et in (T.s4, T.u4):
        b = w32.view(np.uint8)
        return _NIBBLES[et.name][b].reshape(b.shape[:-1] + (-1,))
    if et is T.b1:
        return np.unpackbits(w32.view(np.uint8), axis=-1, bitorder="little").astype(np.float64)
    if et is T.f16:
        return w32.view(np.float16).astype(np.float64)
    if et is T.bf16:
        return bf16_to_f32(w32.view(np.uint16)).astype(np.float64)
    if et is T.tf32:
        return (w32 & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if et is T.f32:
        return w32.view(np.float32).astype(np.float64)
    if et is T.s32:
        return w32.view(np.int32).astype(np.float64)
    raise AssertionError(et)


def _order(frag):
    """Positions, in the lane-major flattened fragment, of the matrix elements in row-major order."""
    flat = (frag.rows * frag.shape[1] + frag.cols).ravel()
    order = np.empty(flat.size, dtype=np.intp)
    order[flat] = np.arange(flat.size)
    return order


def make_mma(P, op):
    """The executor of `mma.sync`: gathers each warp's A, B and C fragments by the PTX fragment layouts,
    multiplies (integers exactly, wrapped or .satfinite-clamped to s32; floats in float64, rounded to the
    accumulator type) and scatters D back to the lanes. Returns ``fn(S, m)``, which executes it on Machine `S`
    for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    form = ins.info
    if ins.opcode != "mma":
        raise InterpUnsupported(f"{ins.opcode} is not modelled", ins)
    sat = "satfinite" in ins.mods
    fa, fb, fc, fd = (mma_fragment(form, x) for x in "abcd")
    oa, ob, oc = _order(fa), _order(fb), _order(fc)
    out_idx = (fd.rows * fd.shape[1] + fd.cols).ravel()  # matrix position of each D element
    d, a, b, c = ins.operands
    frag_t = T.b64 if form.a_type is T.f64 else T.b32
    acc_t = T.b64 if form.d_type is T.f64 else T.b32
    c_t = T.b64 if form.c_type is T.f64 else T.b32
    word_dt = np.uint64 if acc_t is T.b64 else np.uint32
    ra = [P.reader(r, frag_t, ins) for r in P.regs_of(a)]
    rb = [P.reader(r, frag_t, ins) for r in P.regs_of(b)]
    rc = [P.reader(r, c_t, ins) for r in P.regs_of(c)]
    puts = [P.writer(r, acc_t, ins) for r in P.regs_of(d)]
    integer = form.a_type.is_int or form.a_type is T.b1
    bitop = form.bitop
    d_type = form.d_type
    c_type = form.c_type
    M, N, K = form.m, form.n, form.k
    blocks = fa.blocks  # m8n8k4 .f16: four products, stacked by rows

    def matrix(S, readers, et, order, shape, rows, nw):
        words = np.empty((S.N, len(readers)), dtype=np.uint64 if et is T.f64 else np.uint32)
        for i, r in enumerate(readers):
            words[:, i] = r(S)
        words = words.reshape(-1, 32, len(readers))
        if rows is not None:
            words = words[rows]
        return _elements(words, et).reshape(nw, -1)[:, order].reshape((nw,) + shape)

    def mma(S, m):
        S.check_full_warps(op, m, "mma.sync")
        warps = S.warps_touched(m)
        nw = len(warps)
        rows = None if nw * 32 == S.N else warps
        A = matrix(S, ra, form.a_type, oa, fa.shape, rows, nw)
        B = matrix(S, rb, form.b_type, ob, fb.shape, rows, nw)
        C = matrix(S, rc, c_type, oc, fc.shape, rows, nw)
        if blocks > 1:  # product q of block q of A and of B, into block q of D
            prod = (A.reshape(nw, blocks, M, K) @ B.reshape(nw, blocks, K, N)).reshape(nw, blocks * M, N)
        elif bitop == "xor":
            prod = A.sum(axis=2)[:, :, None] + B.sum(axis=1)[:, None, :] - 2 * (A @ B)
        else:
            prod = A @ B
        D = (prod + C).reshape(nw, -1)[:, out_idx]  # lane-major fragment order
        if integer:
            v = np.rint(D).astype(np.int64)
            if sat:
                v = np.clip(v, -(1 << 31), (1 << 31) - 1)
            words = v.astype(np.uint32)
        elif d_type is T.f32:
            words = D.astype(np.float32).view(np.uint32)
        elif d_type is T.f64:
            words = D.view(np.uint64)
        else:  # f16 pairs: two halves make one 32-bit word, element 0 in the low half
            words = np.ascontiguousarray(D.astype(np.float16)).view(np.uint32)
        words = words.reshape(nw, 32, len(puts))
        if rows is None:
            for i, put in enumerate(puts):
                put(S, words[:, :, i].ravel(), m)
            return
        thr = (warps[:, None] * 32 + np.arange(32)).ravel()
        for i, put in enumerate(puts):
            full = np.zeros(S.N, dtype=word_dt)
            full[thr] = words[:, :, i].ravel()
            put(S, full, m)
    return mma
