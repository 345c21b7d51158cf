"""The s4 -> s8 widening step of the Hopper int4 GEMM: packed shared tiles -> s8 shared tiles.

wgmma has no 4-bit form, so each ring stage (packed nibbles as TMA landed them, 128-byte
swizzle, K/2 bytes per row) is widened by the consumer warpgroups into an s8 tile of the
canonical 128-byte-swizzled layout (K bytes per row, two atoms per 128 packed bytes), which the
s8 wgmma then reads.  Each thread widens whole 16-byte packed chunks (32 values): per 32-bit word
w (values v0..v7, v0 in the low nibble)

    lo = (w & 0x0F0F0F0F) ^ 0x08080808          v0 v2 v4 v6, biased     (lop3)
    hi = ((w >> 4) & 0x0F0F0F0F) ^ 0x08080808   v1 v3 v5 v7, biased     (shf + lop3)
    x0 = prmt(lo, hi, 0x5140), x1 = prmt(lo, hi, 0x7362)                 interleave to v0..v3, v4..v7
    s8 = (x + 0x78787878) ^ 0x80808080          per byte: ((v ^ 8) + 120) ^ 128 = sign-extended v

9 integer operations per 8 output bytes, with no carry between bytes ((v ^ 8) + 120 <= 135).
The writes are generic-proxy stores read by wgmma (async proxy): every writer executes
`fence.proxy.async.shared::cta` before the consumers' named barrier.
"""

from __future__ import annotations

from ...errors import ValidationError
from ...isa import types as T
from ...isa.operands import Addr

_PTXFORGE_INTERNAL = True


def widen_word(k, w):
    """Two s8x4 words (values 0..3 and 4..7) from one packed s4x8 word (the 9-operation sequence above)."""
    lo = k.xor(k.and_(w, 0x0F0F0F0F, type=T.b32), 0x08080808, type=T.b32)
    hi = k.xor(k.and_(k.shr(w, 4, type=T.b32), 0x0F0F0F0F, type=T.b32), 0x08080808, type=T.b32)
    out = []
    for sel in (0x5140, 0x7362):
        x = k.prmt(lo, hi, sel)
        out.append(k.xor(k.add(x, 0x78787878, type=T.u32), 0x80808080, type=T.b32))
    return out


def widen_numpy(packed):
    """numpy model of the widening: uint8 [..., n] packed s4 -> int8 [..., 2n] (even k low nibble)."""
    import numpy as np
    p = np.asarray(packed, dtype=np.uint8)
    lo = (p & 0xF).astype(np.int8)
    hi = (p >> 4).astype(np.int8)
    lo = np.where(lo > 7, lo - 16, lo).astype(np.int8)
    hi = np.where(hi > 7, hi - 16, hi).astype(np.int8)
    return np.stack([lo, hi], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])


def emit_s4_widen(k, cfg, src, dst, ctid):
    """Widen one packed stage at shared `src` into s8 tiles at `dst` (A then B), shared by the consumers.

    ctid: this thread's index among the 128 x consumers consumer threads.  Chunk q of a packed
    tile (row q // 8, 16-byte chunk q % 8) goes to thread q % nthreads; a thread's chunks are
    nthreads / 8 rows apart, so its swizzle phase (row % 8) is fixed and every address after the
    first is an immediate offset.
    """
    nthr = 128 * cfg.consumers
    (pa, pb), (ta, tb) = cfg.packed_tiles, cfg.tiles
    if pa.cols != 128 or pb.cols != 128:
        raise ValidationError("the s4 widening step handles 128 packed bytes (256 values) of K per stage")
    r0 = k.shr(ctid, 3, type=T.u32)
    cc = k.and_(ctid, 7, type=T.b32)
    x = k.and_(r0, 7, type=T.b32)
    row = k.shl(r0, 7, type=T.b32)  # r0 * 128
    src_off = k.add(row, k.shl(k.xor(cc, x, type=T.b32), 4, type=T.b32), type=T.u32)
    atom = k.shr(cc, 2, type=T.u32)
    c0 = k.shl(k.and_(cc, 3, type=T.b32), 1, type=T.b32)
    dst_in_atom = k.add(row, k.shl(k.xor(c0, x, type=T.b32), 4, type=T.b32), type=T.u32)
    src_base = k.add(src, src_off, type=T.u32)
    dst_rel = k.add(dst, dst_in_atom, type=T.u32)
    for (packed, wide, p_off, w_off) in ((pa, ta, 0, 0), (pb, tb, pa.nbytes, ta.nbytes)):
        rows = packed.rows
        if (rows * 8) % nthr:
            raise ValidationError(f"{rows} rows x 8 chunks do not split over {nthr} threads")
        atom_bytes = rows * 128
        d_base = k.mad(atom, atom_bytes, dst_rel, type=T.u32)
        # chunk c0 holds values 0..15 (words 0, 1), chunk c0 + 1 values 16..31 (words 2, 3): its
        # swizzled position is c0's with bit 4 flipped (every other term is a multiple of 1024)
        d1_base = k.xor(d_base, 16, type=T.b32)
        for i in range(rows * 8 // nthr):
            step = i * (nthr // 8) * 128
            words = k.ld(Addr(src_base, p_off + step), type=T.b32, space="shared", vec=4)
            outs = []
            for w in words:
                outs += widen_word(k, w)
            k.st(Addr(d_base, w_off + step), outs[:4], type=T.b32, space="shared", vec=4)
            k.st(Addr(d1_base, w_off + step), outs[4:], type=T.b32, space="shared", vec=4)
