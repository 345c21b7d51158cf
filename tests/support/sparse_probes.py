"""Sparse tensor-core probes (mma.sp, wgmma.mma_async.sp) and their numpy models, written from the PTX ISA text
("Sparse matrix storage" and "Matrix fragments for multiply-accumulate operation with sparse matrix A", and the
wgmma.mma_async.sp sections) rather than from the library's own layout code, so that the interpreter tests and
the GPU comparisons check the library against the ISA.

A case draws a structured-sparse A (every chunk keeps what the type's granularity says: 2 of 4 elements,
1 of 2 for .tf32, 2 of 4 element pairs for .s4/.u4), encodes the kept elements and the metadata nibbles the way
the ISA lays them out for the chosen selector, fills the metadata registers of the lanes the selector does not
name with garbage (invalid nibbles included), and computes D = A*B + C in exact arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import ptxforge as pf
from ptxforge import b32
from ptxforge.hopper.layout import SmemTile
from ptxforge.isa import types as T
from ptxforge.testing.wgmma_probe import stage_operands

from support.interp_probes import decode_values

#: chunk width (columns of A) and what a chunk keeps, by the granularity of the A type
_INT4 = ("s4", "u4")


def elem_bits(t) -> int:
    """Bits of one stored element (tf32 is a 32-bit container)."""
    return 32 if t is T.tf32 else t.bits


def chunk_width(t) -> int:
    """Columns of A one metadata nibble covers: 4 (2:4), 2 (.tf32 1:2), 8 (.s4/.u4 pairs, 4:8)."""
    return 2 if t is T.tf32 else 8 if t.name in _INT4 else 4


def draw_chunk(rng, t, ordered):
    """(columns kept, in stored order, within the chunk; the metadata nibble) for one chunk of type `t`."""
    if t is T.tf32:
        q = int(rng.integers(0, 2))
        return [q], (0b0100 if q == 0 else 0b1110)
    i0, i1 = (int(x) for x in rng.choice(4, size=2, replace=False))
    if ordered and i0 > i1:
        i0, i1 = i1, i0
    nib = i0 | (i1 << 2)
    if t.name in _INT4:  # indices name element pairs
        return [2 * i0, 2 * i0 + 1, 2 * i1, 2 * i1 + 1], nib
    return [i0, i1], nib


def _fp8_codes(t):
    table = decode_values(np.arange(256), t)
    return {float(v): c for c, v in enumerate(table) if np.isfinite(v) and not (v == 0 and c & 0x80)}


def random_values(rng, t, shape, nonzero=False):
    """Element values of type `t` that products and sums keep exact in float64, f32 and f16: integers of the
    type's range, or multiples of 1/2 up to 4 for floats."""
    if t.is_int:
        lo, hi = {"s8": (-128, 128), "u8": (0, 256), "s4": (-8, 8), "u4": (0, 16)}[t.name]
        v = rng.integers(lo, hi, shape)
        if nonzero:
            v = np.where(v == 0, 1, v)
        return v.astype(np.float64)
    v = rng.integers(1 if nonzero else 0, 9, shape) * 0.5 * rng.choice([-1.0, 1.0], shape)
    return v


def encode(values, t):
    """Element values -> their bits (uint64) in type `t`."""
    v = np.asarray(values)
    if t.is_int:
        return (v.astype(np.int64) & ((1 << t.bits) - 1)).astype(np.uint64)
    if t is T.f16:
        return v.astype(np.float16).view(np.uint16).astype(np.uint64)
    if t is T.bf16:
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    if t in (T.tf32, T.f32):
        return v.astype(np.float32).view(np.uint32).astype(np.uint64)
    codes = _fp8_codes(t)
    return np.vectorize(lambda x: codes[float(x)])(v).astype(np.uint64)


def pack(bits, eb):
    """(..., n) element bits -> (..., n * eb / 32) .b32 words, element 0 in the low bits."""
    bits = np.asarray(bits, dtype=np.uint64)
    per = 32 // eb
    bits = bits.reshape(bits.shape[:-1] + (-1, per))
    shifts = (np.arange(per, dtype=np.uint64) * np.uint64(eb))
    return np.bitwise_or.reduce(bits << shifts, axis=-1).astype(np.uint32)


@dataclass
class SparseA:
    """A drawn sparse A of `rows` x `k`: the values, the kept elements of each row in stored order (values and
    columns), and the metadata nibble of each chunk."""

    full: np.ndarray  # (rows, k) values, zeros where nothing is kept
    kept: np.ndarray  # (rows, k/2) values in stored order
    nibbles: np.ndarray  # (rows, k / chunk_width) ints


def draw_sparse_a(rng, t, rows, k, ordered):
    """A structured-sparse A of type `t` (see the module docstring)."""
    cw = chunk_width(t)
    full = np.zeros((rows, k))
    kept = np.zeros((rows, k // 2))
    nibbles = np.zeros((rows, k // cw), dtype=np.int64)
    vals = random_values(rng, t, (rows, k // 2), nonzero=True)
    for r in range(rows):
        p = 0
        for c in range(k // cw):
            cols, nib = draw_chunk(rng, t, ordered)
            nibbles[r, c] = nib
            for col in cols:
                full[r, c * cw + col] = vals[r, p]
                kept[r, p] = vals[r, p]
                p += 1
    return SparseA(full, kept, nibbles)


def metadata_words(rng, nibbles, selector, threads_per_row, wide_units):
    """The metadata register of each of a warp's 32 lanes for its 16 rows (`nibbles`: (16, chunks)).  The
    selected threads j = 0 .. T-1 of each group hold, for 16-bit types (`wide_units`), chunks 4j .. 4j+3 of row g
    in bits 0-15 and of row g+8 in bits 16-31; for 8-bit and 4-bit types, chunks 8(j // 2) .. +7 of row g (j
    even) or row g + 8 (j odd) in bits 0-31 (the H100's layout: tests/test_interp_sparse_gpu.py).  Every other
    lane holds garbage (any bits, undefined nibbles included)."""
    words = rng.integers(0, 2 ** 32, 32, dtype=np.uint64)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        j = t - selector * threads_per_row
        if not 0 <= j < threads_per_row:
            continue
        w = 0
        for i in range(4 if wide_units else 8):
            if wide_units:
                w |= int(nibbles[g, 4 * j + i]) << (4 * i)
                w |= int(nibbles[g + 8, 4 * j + i]) << (16 + 4 * i)
            else:
                w |= int(nibbles[g + 8 * (j % 2), 8 * (j // 2) + i]) << (4 * i)
        words[lane] = w
    return words.astype(np.uint32)


def a_register_words(kept_bits, t, nregs):
    """The A operand registers (32 lanes, nregs) of a warp's 16 rows: register r of lane (g, t) holds the kept
    elements of row g + 8 (r % 2) from the chunks of columns [W t + 4 W (r // 2), + W), W = 64 / element bits
    (the ISA's firstcol .. lastcol), in stored order."""
    eb = elem_bits(t)
    per = 32 // eb  # kept elements of one register
    out = np.zeros((32, nregs), dtype=np.uint32)
    for lane in range(32):
        g, tt = lane // 4, lane % 4
        for r in range(nregs):
            row = g + 8 * (r % 2)
            first = per * tt + 4 * per * (r // 2)  # kept elements are half the columns, in the same order
            out[lane, r] = pack(kept_bits[row, first:first + per][None, :], eb)[0, 0]
    return out


def b_register_words(b_bits, t, nregs):
    """The B operand registers (32, nregs) of a K x 8 B: register r, element j of lane (g, t) is B[per t + j +
    4 per r, g] (the dense pattern; the sparse sections show B only where no dense form has the shape)."""
    eb = elem_bits(t)
    per = 32 // eb
    out = np.zeros((32, nregs), dtype=np.uint32)
    for lane in range(32):
        g, tt = lane // 4, lane % 4
        for r in range(nregs):
            rows = per * tt + np.arange(per) + 4 * per * r
            out[lane, r] = pack(b_bits[rows, g][None, :], eb)[0, 0]
    return out


def acc_positions(acc):
    """(rows, cols) of each accumulator element of each lane (32, elements): row g + 8 (e // 2), col 2t + e % 2."""
    lane = np.arange(32)[:, None]
    e = np.arange(4)[None, :]  # four elements per lane (two .b32 registers of f16 pairs, or four registers)
    return lane // 4 + 8 * (e // 2), 2 * (lane % 4) + e % 2


def acc_words(values, acc):
    """Accumulator values (16, 8) -> the C/D registers (32, 2 or 4)."""
    rows, cols = acc_positions(acc)
    bits = encode(values[rows, cols], acc)
    return pack(bits, 16) if acc is T.f16 else bits.astype(np.uint32)


def acc_values(words, acc):
    """The C/D registers (32, n) -> the 16 x 8 values."""
    rows, cols = acc_positions(acc)
    if acc is T.f16:
        el = np.ascontiguousarray(words.astype(np.uint32)).view(np.float16).astype(np.float64)
    elif acc is T.f32:
        el = words.astype(np.uint32).view(np.float32).astype(np.float64)
    else:
        el = words.astype(np.uint32).view(np.int32).astype(np.float64)
    out = np.zeros((16, 8))
    out[rows, cols] = el
    return out


def result_words(D, acc, satfinite):
    """Exact D values -> the D registers: .s32 wrapped (or clamped with .satfinite), floats rounded once."""
    if acc is T.s32:
        v = D.astype(np.int64)
        v = np.clip(v, -2 ** 31, 2 ** 31 - 1) if satfinite else ((v + 2 ** 31) % 2 ** 32) - 2 ** 31
        return acc_words(v, acc)
    return acc_words(D, acc)


@dataclass
class MmaSpCase:
    """One mma.sp probe launch: the form's spelling, the argument arrays and the expected D words."""

    shape: str
    a_type: object
    b_type: object
    acc: object
    selector: int
    ordered: bool
    satfinite: bool
    args: list
    want: np.ndarray
    sparse: SparseA
    B: np.ndarray
    C: np.ndarray

    def probe(self):
        """The probe module of this case's form."""
        return mma_sp_probe(self.shape, self.a_type, self.b_type, self.acc, self.selector, self.ordered,
                            self.satfinite)


def mma_sp_case(form, b_type, acc, selector, ordered, satfinite, rng) -> MmaSpCase:
    """Inputs and the exact expectation of one mma.sp of `form` (a `SparseMmaForm`)."""
    t, k = form.a_type, form.k
    sp = draw_sparse_a(rng, t, 16, k, ordered)
    B = random_values(rng, b_type, (k, 8))
    if acc is T.s32:
        C = rng.integers(-2 ** 31, 2 ** 31, (16, 8)).astype(np.float64)
        if rng.integers(0, 2):
            C[rng.integers(0, 16, 6), rng.integers(0, 8, 6)] = rng.choice([2 ** 31 - 3, -2 ** 31 + 3], 6)
    else:
        C = rng.integers(-16, 17, (16, 8)) * 0.25
    per_thread = 4 // (form.max_selector + 1)
    e = metadata_words(rng, sp.nibbles, selector, per_thread, elem_bits(t) >= 16)
    a = a_register_words(encode(sp.kept, t), t, form.a_regs)
    b = b_register_words(encode(B, b_type), b_type, form.b_regs)
    c = acc_words(C, acc)
    d = np.full((32, form.c_regs(acc)), 0xA7A7A7A7, dtype=np.uint32)
    want = result_words(sp.full @ B + C, acc, satfinite)
    return MmaSpCase(form.shape, t, b_type, acc, selector, ordered, satfinite, [a, b, c, e, d], want, sp, B, C)


def mma_sp_probe(shape, a_type, b_type, acc, selector, ordered, satfinite):
    """One-warp kernel: each lane loads its A, B, C registers and its metadata word from a, b, c, e, issues one
    mma.sp and stores D to d (one row of words per lane)."""
    from ptxforge.isa.sparse import SPARSE_MMA
    form = SPARSE_MMA[(shape, a_type)]
    k = pf.KernelBuilder("mma_sp_probe", target="sm_90", reqntid=32)
    pa, pb, pc, pe, pd = (k.param_ptr(n, pf.b8) for n in ("a", "b", "c", "e", "d"))
    lane = k.laneid()
    acc_reg = {T.f32: T.f32, T.f16: b32, T.s32: T.s32}[acc]
    nc = form.c_regs(acc)

    def load(ptr, n, t):
        base = k.add(ptr, k.mul(lane, 4 * n, mode="wide"))
        return [k.ld(base, type=t, offset=4 * i) for i in range(n)]
    a = load(pa, form.a_regs, b32)
    b = load(pb, form.b_regs, b32)
    c = load(pc, nc, acc_reg)
    (e,) = load(pe, 1, b32)
    d = k.mma_sp(a, b, c, e, shape=shape, a_type=a_type.name, b_type=b_type.name, acc=acc.name,
                 selector=selector, ordered=ordered, satfinite=satfinite)
    out = k.add(pd, k.mul(lane, 4 * nc, mode="wide"))
    for i, r in enumerate(d):
        k.st(out, r, type=acc_reg, offset=4 * i)
    return k.module()


# ---------------------------------------------------------------- wgmma.mma_async.sp

_TILE_DTYPE = {"f16": "f16", "bf16": "u16", "tf32": "f32", "e4m3": "u8", "e5m2": "u8", "s8": "s8", "u8": "u8"}


def wgmma_acc_positions(form):
    """(rows, cols) (128 threads, elements) of a warpgroup's accumulator elements: warp w, lane (g, t), element e
    at row 16w + g + 8 ((e % 4) // 2), column 8 (e // 4) + 2t + e % 2 (the wgmma register-fragment figures)."""
    n = form.d_regs * (2 if form.d_type is T.f16 else 1)
    tid = np.arange(128)[:, None]
    w, lane = tid // 32, tid % 32
    e = np.arange(n)[None, :]
    return 16 * w + lane // 4 + 8 * ((e % 4) // 2), 8 * (e // 4) + 2 * (lane % 4) + e % 2


@dataclass
class WgmmaSpCase:
    """One wgmma.mma_async.sp probe launch: kernel, arguments and the expected D words of the 128 threads, with the
    model's values (the decompressed A, B, C) so a test can also compute D with the inputs' signs changed
    (`reference`)."""

    kernel: object
    args: list
    want: np.ndarray
    form: object = None
    a_full: np.ndarray = None  # (64, 2k) A values, zeros where the metadata keeps nothing
    b: np.ndarray = None  # (N, 2k) B values (B read by its N rows)
    c: np.ndarray = None  # (64, N) accumulator input values
    scale_d: int = 1
    satfinite: bool = False

    @property
    def out(self):
        """The D words the launch stored (128 threads x registers, flattened)."""
        return self.args[-2]

    def reference(self, sign=1):
        """The D words of D = sign * (A . B^T) (+ C with scale-d), exact then rounded once (floats) or wrapped /
        clamped (.s32): with sign = 1 for a case of negated inputs, what a reader ignoring the scales gives."""
        return wgmma_sp_words(self.form, self.a_full, self.b, self.c, self.scale_d, self.satfinite, sign)


def wgmma_sp_words(form, a_full, b, c, scale_d, satfinite, sign=1):
    """The D words (128 threads x registers, flattened) of D = sign * (a_full . b^T) (+ c with scale_d): a product
    that sums to zero is +0 whatever the signs (the ISA negates the inputs, not the sum)."""
    D = sign * (a_full @ b.T) + 0.0 + (c if scale_d else 0)
    if form.is_integer:
        v = D.astype(np.int64)
        D = np.clip(v, -2 ** 31, 2 ** 31 - 1) if satfinite else ((v + 2 ** 31) % 2 ** 32) - 2 ** 31
    rows, cols = wgmma_acc_positions(form)
    el = encode(D[rows, cols], form.d_type)
    return (pack(el, 16) if form.d_type is T.f16 else el.astype(np.uint32)).ravel()


def wgmma_sp_case(form, selector, rs, rng, *, swizzle=0, satfinite=False, trans_b=False, scale_d=1,
                  trans_a=False, scale_a=1, scale_b=1, bad_lane=None) -> WgmmaSpCase:
    """A probe of the sparse form of dense wgmma `form` (K twice form.k): A 64 x K 2:4 (1:2) sparse, kept half in
    registers (rs) or in a shared tile, K-major or (trans_a, 16-bit types) MN-major, B an N x K shared tile
    (MN-major with trans_b, unswizzled then), the metadata of each warp's rows in the lanes `selector` names,
    garbage elsewhere; scale_a / scale_b (float forms) -1 negate A / B.  A shared A tile spans more of K than the
    wgmma reads, the rest garbage.  bad_lane: that thread's first chunk of its low row gets two equal indices (an
    undefined nibble)."""
    t, bt = form.a_type, form.b_type
    K = 2 * form.k
    sp = draw_sparse_a(rng, t, 64, K, ordered=False)
    B = random_values(rng, bt, (form.n, K))
    if form.is_integer:
        C = rng.integers(-2 ** 31, 2 ** 31, (64, form.n)).astype(np.float64)
    else:
        C = rng.integers(-16, 17, (64, form.n)) * 0.25
    per = 2 if t.bits >= 16 or t is T.tf32 else 4  # threads of a group holding metadata
    meta = np.concatenate([metadata_words(rng, sp.nibbles[16 * w:16 * w + 16], selector, per, per == 2)
                           for w in range(4)])
    if bad_lane is not None:
        meta[bad_lane] = (int(meta[bad_lane]) & ~0xF) | 0b0101
    kept_bits = encode(sp.kept, t)
    dt = _TILE_DTYPE[t.name]
    tile_eb = T.lookup(dt).bits
    if rs:
        a_regs = np.concatenate([a_register_words(kept_bits[16 * w:16 * w + 16], t, 4) for w in range(4)])
        a_img, desc_a = np.zeros(16, np.uint8), 0
    else:
        a_regs = np.zeros((128, 4), np.uint32)
        if trans_a:  # M contiguous: two k-slices of columns, the wgmma reads the first
            cols = 2 * form.k
        else:  # the tile spans one swizzle atom of K; the wgmma reads its first 32 bytes
            cols = max(swizzle, 32) * 8 // tile_eb
        fill = encode(random_values(rng, t, (64, cols)), t)
        fill[:, :form.k] = kept_bits
        ta = SmemTile(dt, 64, cols, "MN" if trans_a else "K", swizzle)
        a_img = ta.store(fill.astype(np.dtype(f"u{tile_eb // 8}")))
        desc_a = ta.descriptor(0, 0)
    bswz = 0 if trans_b else swizzle
    bspan = max(bswz, 64)
    bcols = bspan * 8 // tile_eb
    bfill = encode(random_values(rng, bt, (form.n, bcols)), bt)
    bfill[:, :K] = encode(B, bt)
    tb = SmemTile(dt, form.n, bcols, "MN" if trans_b else "K", bswz)
    b_img = tb.store(bfill.astype(np.dtype(f"u{tile_eb // 8}")))
    desc_b = tb.descriptor(0, 0)
    rows, cols_ = wgmma_acc_positions(form)
    c_el = encode(C[rows, cols_], form.d_type)
    c = pack(c_el, 16) if form.d_type is T.f16 else c_el.astype(np.uint32)
    want = wgmma_sp_words(form, sp.full, B, C, scale_d, satfinite, scale_a * scale_b)
    out = np.full(128 * form.d_regs, 0xA7A7A7A7, np.uint32)
    kern = wgmma_sp_probe(form, selector, rs, len(a_img), len(b_img), satfinite, trans_b, trans_a=trans_a,
                          scale_a=scale_a, scale_b=scale_b)
    args = [a_img, b_img, a_regs.ravel(), meta, np.array([desc_a, desc_b], np.uint64), c.ravel(), out, int(scale_d)]
    return WgmmaSpCase(kern, args, want, form, sp.full, B, C, scale_d, satfinite)


def wgmma_sp_probe(form, selector, rs, a_bytes, b_bytes, satfinite, trans_b, *, trans_a=False, scale_a=1,
                   scale_b=1):
    """One warpgroup: copy the A and B images into shared memory, fence the async proxy, load C, issue one
    wgmma.mma_async.sp (descriptors offset by the tiles' shared addresses; imm-trans-a, imm-scale-a and
    imm-scale-b as given) and store D raw per thread."""
    k = pf.KernelBuilder(f"wgmma_sp_probe_{form.a_type.name}_{form.d_type.name}", target="sm_90a", reqntid=128)
    a_img, b_img = k.param_ptr("a_img", T.u8), k.param_ptr("b_img", T.u8)
    a_regs, meta_p, descs = k.param_ptr("a_regs", T.u32), k.param_ptr("meta", T.u32), k.param_ptr("descs", T.u64)
    c, out = k.param_ptr("c", T.u32), k.param_ptr("out", T.u32)
    sd = k.param_value("scale_d", T.u32)
    tid = k.tid()
    sA, sB, d, row = stage_operands(k, form, tid, a_img, b_img, 0 if rs else a_bytes, b_bytes, c)
    m = k.ld(k.add(meta_p, k.mul(tid, 4, mode="wide")), type=T.b32)
    db = k.add(k.ld(descs, type=T.u64, offset=8), k.cvt(k.shr(k.shared_base(sB), 4), "u64"))
    if rs:
        a = k.regs(T.b32, 4, "a")
        arow = k.mul(tid, 16, mode="wide")
        for j in range(4):
            k.ld(k.add(a_regs, arow), type=T.b32, offset=4 * j, dst=a[j])
    else:
        a = k.add(k.ld(descs, type=T.u64), k.cvt(k.shr(k.shared_base(sA), 4), "u64"))
    p = k.setp("ne", sd, 0)
    k.wgmma_fence()
    k.wgmma_sp(a, db, d, m, selector=selector, n=form.n, a_type=form.a_type, b_type=form.b_type, acc=form.d_type,
               scale_d=p, satfinite=satfinite, trans_b=trans_b, trans_a=trans_a, scale_a=scale_a, scale_b=scale_b)
    k.wgmma_commit()
    k.wgmma_wait(0)
    for i in range(form.d_regs):
        k.st(k.add(out, row), d[i], type=T.b32, offset=4 * i)
    return k
