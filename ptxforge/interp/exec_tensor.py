"""mma.sync, every form of `MMA_FORMS`, and mma.sp, every form of `SPARSE_MMA`, for all warps of the step at once.

Fragments are unpacked through the layouts of :mod:`ptxforge.isa.fragments` into whole A, B
and C matrices per warp, multiplied, and packed back.  Integer forms are exact: the products
of 8-bit, 4-bit and 1-bit values and their sums are exact in float64 (|sum| < 2^53), then
wrap to int32 or, with .satfinite, clamp.  .b1 forms count set bits of A AND B or A XOR B.
Floating-point forms multiply exactly in float64 and round once to the accumulator type; a
tensor core accumulates with less care, so these agree with a GPU within rounding only.  tf32
operands keep the top 19 bits of each float32 (the tensor core ignores the low 13).

mma.sp spreads the stored half of A over the K columns its metadata names (`ptxforge.isa.sparse`:
which lanes hold which nibbles for the selector, where each kept unit goes) and multiplies as above;
metadata the PTX ISA leaves undefined (equal indices, unordered ones under ::ordered_metadata, a .tf32
nibble other than 0b0100 / 0b1110) is a "sparse" finding.

Register words are unpacked by viewing them as bytes (little-endian: element 0 of a register is
its lowest bits), which is exactly the packed-element order of every fragment.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .findings import InterpUnsupported
from ..isa.fragments import mma_fragment, sparse_mma_fragment
from ..isa.sparse import expanded_columns, metadata_layout, undefined_nibbles
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


def _gather(S, readers, et, order, shape, rows, nw):
    """Each warp's operand matrix (nw, *shape) of float64 values, from its lanes' fragment registers."""
    words = np.empty((S.N, len(readers)), dtype=np.uint64 if et is T.f64 else np.uint32)
    for i, r in enumerate(readers):
        words[:, i] = r(S)
    words = words.reshape(-1, 32, len(readers))
    if rows is not None:
        words = words[rows]
    return _elements(words, et).reshape(nw, -1)[:, order].reshape((nw,) + shape)


def _result_words(D, integer, sat, d_type):
    """D values (lane-major fragment order) -> register words: integers wrapped or clamped to .s32, floats rounded
    once to the accumulator type (f16 pairs: two halves in one word, element 0 low)."""
    if integer:
        v = np.rint(D).astype(np.int64)
        if sat:
            v = np.clip(v, -(1 << 31), (1 << 31) - 1)
        return v.astype(np.uint32)
    if d_type is T.f32:
        return D.astype(np.float32).view(np.uint32)
    if d_type is T.f64:
        return D.view(np.uint64)
    return np.ascontiguousarray(D.astype(np.float16)).view(np.uint32)


def _scatter(S, puts, words, warps, rows, m, word_dt):
    """Write each warp's D words (nw, 32 * regs) back to its lanes' registers."""
    nw = len(warps)
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

    def mma(S, m):
        S.check_full_warps(op, m, "mma.sync")
        warps = S.warps_touched(m)
        nw = len(warps)
        rows = None if nw * 32 == S.N else warps
        A = _gather(S, ra, form.a_type, oa, fa.shape, rows, nw)
        B = _gather(S, rb, form.b_type, ob, fb.shape, rows, nw)
        C = _gather(S, rc, c_type, oc, fc.shape, rows, nw)
        if blocks > 1:  # product q of block q of A and of B, into block q of D
            prod = (A.reshape(nw, blocks, M, K) @ B.reshape(nw, blocks, K, N)).reshape(nw, blocks * M, N)
        elif bitop == "xor":
            prod = A.sum(axis=2)[:, :, None] + B.sum(axis=1)[:, None, :] - 2 * (A @ B)
        else:
            prod = A @ B
        D = (prod + C).reshape(nw, -1)[:, out_idx]  # lane-major fragment order
        _scatter(S, puts, _result_words(D, integer, sat, d_type), warps, rows, m, word_dt)
    return mma


def sparse_metadata(S, op, meta_words, k, a_type, selector, ordered, thr_of):
    """Each 16-row block's metadata nibbles (blocks, 16, chunks), read from the lanes the selector names
    (`isa.sparse.metadata_layout`); `meta_words` is (blocks, 32) per block of rows (one warp each).  A nibble the
    PTX ISA leaves undefined is a "sparse" finding naming the lanes that hold it (`thr_of(block, lanes)`: their
    batch indices); the product is then computed from the indices as they are."""
    lanes, shifts = metadata_layout(k, a_type, selector)
    nib = (meta_words[:, lanes] >> shifts.astype(np.uint32)) & np.uint32(15)
    bad = undefined_nibbles(nib, a_type, ordered)
    if bad.any():
        blk, r, c = (int(x[0]) for x in np.nonzero(bad))
        which = "::ordered_metadata needs the first index below the second" if ordered and a_type is not T.tf32 \
            else ".tf32 takes only 0b0100 and 0b1110" if a_type is T.tf32 else "the two indices are equal"
        S.report("sparse", f"{op.ins.opcode} sparsity metadata nibble {int(nib[blk, r, c]):#06b} for row {r} chunk "
                 f"{c} of a 16-row block (bits {int(shifts[r, c])}..{int(shifts[r, c]) + 3} of lane "
                 f"{int(lanes[r, c])}, selector {selector}) is undefined: {which}; the result is undefined",
                 op, thr_of(blk, np.unique(lanes[bad[blk]])))
    return nib


def expand_sparse(values, nib, k, a_type):
    """The K-column A (blocks, rows, K) of float64 values from the stored half (blocks, rows, K/2) and the
    metadata nibbles; the columns no element lands in are zero."""
    cols = expanded_columns(nib, k, a_type)  # (blocks, rows, K/2)
    full = np.zeros(values.shape[:-1] + (k,), dtype=np.float64)
    np.put_along_axis(full, cols, values, axis=-1)
    return full


def make_mma_sp(P, op):
    """The executor of `mma.sp` / `mma.sp::ordered_metadata`: each warp's stored half of A (laid out as the
    dense half-K A fragment) is spread over the K columns the metadata of the selected lanes names, then
    multiplied as `make_mma` does (integers exact, wrapped or .satfinite-clamped; floats in float64 rounded once
    to the accumulator).  Undefined metadata is reported ("sparse").  Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    form = info.form
    fa, fb, fc = (sparse_mma_fragment(form, info.b_type, info.acc, x) for x in "abc")
    oa, ob, oc = _order(fa), _order(fb), _order(fc)
    out_idx = (fc.rows * fc.shape[1] + fc.cols).ravel()
    d, a, b, c, e, _ = ins.operands
    ra = [P.reader(r, T.b32, ins) for r in P.regs_of(a)]
    rb = [P.reader(r, T.b32, ins) for r in P.regs_of(b)]
    rc = [P.reader(r, T.b32, ins) for r in P.regs_of(c)]
    re = P.reader(e, T.b32, ins)
    puts = [P.writer(r, T.b32, ins) for r in P.regs_of(d)]
    K = form.k

    def mma_sp(S, m):
        S.check_full_warps(op, m, "mma.sp")
        warps = S.warps_touched(m)
        nw = len(warps)
        rows = None if nw * 32 == S.N else warps
        meta = np.broadcast_to(np.asarray(re(S)).astype(np.uint32), (S.N,)).reshape(-1, 32)
        meta = meta if rows is None else meta[rows]
        nib = sparse_metadata(S, op, meta, K, form.a_type, info.selector, info.ordered,
                              lambda w, lanes: int(warps[w]) * 32 + lanes)
        A = expand_sparse(_gather(S, ra, form.a_type, oa, fa.shape, rows, nw), nib, K, form.a_type)
        B = _gather(S, rb, info.b_type, ob, fb.shape, rows, nw)
        C = _gather(S, rc, info.acc, oc, fc.shape, rows, nw)
        D = (A @ B + C).reshape(nw, -1)[:, out_idx]
        _scatter(S, puts, _result_words(D, form.is_integer, info.satfinite, info.acc), warps, rows, m, np.uint32)
    return mma_sp
