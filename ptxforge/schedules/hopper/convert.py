"""The s4 -> s8 widening step of the Hopper int4 GEMM: packed shared tiles -> s8 shared tiles.

wgmma has no 4-bit form, so the packed nibbles of each ring stage (as TMA landed them, 128-byte
swizzle, K/2 bytes per row) become s8: B into an s8 shared tile of the canonical 128-byte-swizzled
layout that the wgmma reads (K bytes per row, two atoms per 128 packed bytes), A (with a
register-sourced wgmma) straight into the A fragment registers.  Per packed 32-bit word w (values
v0..v7, v0 in the low nibble):

    lo = (w & 0x0F0F0F0F) ^ 0x08080808          v0 v2 v4 v6, each biased by 8    (one lop3)
    hi = ((w >> 4) & 0x0F0F0F0F) ^ 0x08080808   v1 v3 v5 v7                      (shift + lop3)
    s8 = (x + 0x78787878) ^ 0x80808080          per byte: ((v ^ 8) + 120) ^ 128 = v sign-extended

7 integer operations per 8 output bytes, with no carry between bytes ((v ^ 8) + 120 <= 135).
The shared-memory writes are generic-proxy stores read by wgmma (async proxy): every writer
executes `fence.proxy.async.shared::cta` before the consumers' named barrier.

K order inside each 32-value k-step ("slots").  A register-sourced wgmma takes thread (g, t) of a
warp's A fragment as a0/a2 = row g, slots 4t..4t+3 / 16+4t..16+4t+3 (a1/a3: row g + 8).  Packed
word t of a row's 16-byte chunk holds values 8t..8t+7; its `lo` half goes to slots 4t.. and its
`hi` half to slots 16+4t..: slot 4t + j holds k = 8t + 2j, slot 16 + 4t + j holds k = 8t + 2j + 1.
A dot product does not care about the order of k as long as A and B agree, so the widened B tile
uses the same slot order (`SLOT_TO_K`), and no byte shuffle is needed.
"""

from __future__ import annotations

from ...errors import ValidationError
from ...isa import types as T
from ...isa.operands import Addr
from ..gemm import emit as GE

_PTXFORGE_INTERNAL = True
_PTXFORGE_EMITTER = True  # its instructions name its lines (errors.emitter_locations)

#: warps of the producer warpgroup that widen B when HopperGemm.converter is set (the last ones)
CONVERTER_WARPS = 2


#: value index inside a 32-value k-step held by each slot (see the module docstring)
SLOT_TO_K = tuple(8 * (sl % 16 // 4) + 2 * (sl % 4) + sl // 16 for sl in range(32))


def widen_word(k, w, dst=(None, None)):
    """(lo, hi): the s8x4 words of values 0, 2, 4, 6 and 1, 3, 5, 7 of one packed s4x8 word (7 ops).

    dst: registers the two results are written to (None: fresh ones), so a pipelined loop can
    widen into the same registers from more than one place."""
    lo = k.xor(k.and_(w, 0x0F0F0F0F, type=T.b32), 0x08080808, type=T.b32)
    hi = k.xor(k.and_(k.shr(w, 4, type=T.b32), 0x0F0F0F0F, type=T.b32), 0x08080808, type=T.b32)
    return [k.xor(k.add(x, 0x78787878, type=T.u32), 0x80808080, type=T.b32, dst=d) for x, d in zip((lo, hi), dst)]


def widen_word_biased(k, w, dst=(None, None)):
    """(lo, hi): values 0, 2, 4, 6 and 1, 3, 5, 7 of a packed s4x8 word as u8 v + 8 (xor, and; shift, and)."""
    x = k.xor(w, 0x88888888, type=T.b32)
    return [k.and_(x, 0x0F0F0F0F, type=T.b32, dst=dst[0]),
            k.and_(k.shr(x, 4, type=T.b32), 0x0F0F0F0F, type=T.b32, dst=dst[1])]


def widen_word_scaled(k, w, dst=(None, None)):
    """(lo, hi): values 0, 2, 4, 6 and 1, 3, 5, 7 of a packed s4x8 word as s8 16 v (shift, and; and).

    A nibble moved to the high half of its byte is its value times 16 as a signed byte (its sign
    bit lands on the byte's), so 3 operations widen 8 values; products of two such operands are
    256 times the true ones, and C = acc >> 8 (exact while |C| x 256 fits 32 bits: K < 131072).
    """
    # the leanest emission (each instruction still checked by its family's constructor): a quarter of
    # an s4 kernel's instructions are these
    return [GE.and_imm(k, GE.shl(k, w, 4), 0xF0F0F0F0, dst[0]), GE.and_imm(k, w, 0xF0F0F0F0, dst[1])]


#: widening mode -> the per-word step ('signext': exact s8, 'biased': u8 v + 8, 'scaled': s8 16 v)
WIDEN = {"signext": widen_word, "biased": widen_word_biased, "scaled": widen_word_scaled}

#: K limit of the scaled mode: |C| <= 64 K, and 256 |C| must stay below 2^31
SCALED_K_LIMIT = 131072


#: rows per CTA of the row-sum kernel (one warp per row)
SUMS_ROWS_PER_CTA = 8


def emit_row_sums():
    """Kernel `biased_row_sums(src_a, out_a, rows_a, src_b, out_b, rows_b, row_bytes)`: out[r] = sum
    over row r of (v + 8), for A's rows and B's rows in one launch.

    The first ceil(rows_a / 8) CTAs take A, the rest B (one launch, not two: the per-call host
    cost of the biased GEMM is one launch less).  Rows of row_bytes packed s4 bytes (a multiple of
    16); one warp per row, lanes over 16-byte chunks; per word (v + 8) per nibble is
    (w ^ 0x88888888) split into low and high nibbles, whose 4 bytes are summed with a multiply
    (no byte exceeds 30, so no carry reaches the top byte), and redux.sync adds the lanes.
    Grid: ceil(rows_a / 8) + ceil(rows_b / 8) CTAs of 256 threads.
    """
    from ...builder import KernelBuilder
    k = KernelBuilder("biased_row_sums", target="sm_90", maxntid=32 * SUMS_ROWS_PER_CTA)
    src_a = k.param_ptr("src_a", T.u8)
    out_a = k.param_ptr("out_a", T.s32)
    rows_a = k.param_value("rows_a", T.u32)
    src_b = k.param_ptr("src_b", T.u8)
    out_b = k.param_ptr("out_b", T.s32)
    rows_b = k.param_value("rows_b", T.u32)
    row_bytes = k.param_value("row_bytes", T.u32)
    ctas_a = k.div(k.add(rows_a, SUMS_ROWS_PER_CTA - 1, type=T.u32), SUMS_ROWS_PER_CTA, type=T.u32)
    in_b = k.setp("ge", k.ctaid(), ctas_a, type=T.u32)
    src = k.selp(src_b, src_a, in_b, type=T.u64)
    out = k.selp(out_b, out_a, in_b, type=T.u64)
    rows = k.selp(rows_b, rows_a, in_b, type=T.u32)
    cta = k.sub(k.ctaid(), k.selp(ctas_a, 0, in_b, type=T.u32), type=T.u32)
    tid = k.tid()
    lane = k.and_(tid, 31, type=T.b32)
    row = k.mad(cta, SUMS_ROWS_PER_CTA, k.shr(tid, 5, type=T.u32), type=T.u32)
    acc = k.mov(0, type=T.u32, dst=k.reg(T.u32, "rowsum"))
    ok = k.setp("lt", row, rows, type=T.u32)
    with k.if_(ok):
        base = k.mad(row, row_bytes, src, mode="wide", type=T.u32)
        chunks = k.shr(row_bytes, 4, type=T.u32)
        with k.for_range(lane, chunks, 32, uniform=False) as c:
            words = k.ld(k.mad(c, 16, base, mode="wide", type=T.u32), type=T.b32, vec=4)
            for w in words:
                lo, hi = widen_word_biased(k, w)
                s2 = k.add(lo, hi, type=T.u32)
                k.add(acc, k.shr(k.mul(s2, 0x01010101, type=T.u32), 24, type=T.u32), dst=acc)
    total = k.redux("add", acc, type=T.u32)
    lane0 = k.setp("eq", lane, 0, type=T.u32)
    k.st(k.mad(row, 4, out, mode="wide", type=T.u32), total, type=T.u32,
         pred=k.and_(lane0, ok, type=T.pred))
    return k


_SUMS = []


def sums_module():
    """The Module of the row-sum kernel (emitted once)."""
    if not _SUMS:
        _SUMS.append(emit_row_sums().module())
    return _SUMS[0]


def slot_order_numpy(wide):
    """numpy model of a widened tile's K order: [..., K] actual order -> [..., K] slot order."""
    import numpy as np
    w = np.asarray(wide)
    idx = (np.arange(w.shape[-1]) // 32) * 32 + np.array(SLOT_TO_K * (w.shape[-1] // 32))
    return w[..., idx]


def widen_numpy(packed):
    """numpy model of the widening: uint8 [..., n] packed s4 -> int8 [..., 2n] (even k low nibble)."""
    import numpy as np
    p = np.asarray(packed, dtype=np.uint8)
    lo = (p & 0xF).astype(np.int8)
    hi = (p >> 4).astype(np.int8)
    lo = np.where(lo > 7, lo - 16, lo).astype(np.int8)
    hi = np.where(hi > 7, hi - 16, hi).astype(np.int8)
    return np.stack([lo, hi], axis=-1).reshape(*p.shape[:-1], 2 * p.shape[-1])


def emit_s4_widen(k, cfg, src, dst, ctid, parts, nthreads=None, widen="signext"):
    """Widen packed tiles of one stage at shared `src` into s8 tiles at `dst`, shared by the consumers.

    parts: (packed SmemTile, widened SmemTile, byte offset in the stage, byte offset in dst) per
    operand; ctid: this thread's index among the `nthreads` widening threads (default: the
    128 x consumers consumer threads; a power of two of at least 64).  Chunk index
    Q = ctid + i * nthreads (16 packed bytes = 32 values) is split as cc4 = Q & 3, h = Q >> 2 & 1,
    p = Q >> 3 & 3, row group R = Q >> 5 (mod rows / 8), atom = the rest; the row is
    8 R + (p ^ 5h).  So the 8 threads of one 16-byte access phase take rows whose swizzle phases
    differ by 5: their packed chunks and their widened chunks all fall in distinct bank groups
    (no conflicts), and a thread's later chunks differ only by immediate offsets.  Output chunks
    are written in slot order (SLOT_TO_K).  widen: the per-word step, a key of WIDEN.
    """
    for step in s4_widen_steps(k, cfg, src, dst, ctid, parts, nthreads, widen):
        step()


def s4_widen_steps(k, cfg, src, dst, ctid, parts, nthreads=None, widen="signext") -> list:
    """`emit_s4_widen` in pieces: the per-thread addresses are emitted now, and the returned callables each
    emit one 16-byte chunk of this thread's share (a load, the widening, two stores), in order, so that
    a pipeline can spread the widening of a stage between other work."""
    nthr = nthreads or 128 * cfg.consumers
    if nthr < 64 or nthr & (nthr - 1):
        raise ValidationError(f"the widening step needs a power of two of at least 64 threads, got {nthr}")
    for packed, _, _, _ in parts:
        if packed.cols % 128:
            raise ValidationError("the s4 widening step handles whole 128-byte atoms (256 values) of K per stage")
    cc4 = k.and_(ctid, 3, type=T.b32)
    h = k.and_(k.shr(ctid, 2, type=T.u32), 1, type=T.b32)
    p = k.and_(k.shr(ctid, 3, type=T.u32), 3, type=T.b32)
    ph = k.xor(p, k.mul(h, 5, type=T.u32), type=T.b32)  # row within its 8-row swizzle group
    r = k.add(k.shl(k.shr(ctid, 5, type=T.u32), 3, type=T.b32), ph, type=T.u32)
    row = k.shl(r, 7, type=T.b32)  # r * 128
    src0 = k.add(src, k.add(row, k.shl(k.xor(cc4, ph, type=T.b32), 4, type=T.b32), type=T.u32), type=T.u32)
    src1 = k.xor(src0, 64, type=T.b32)  # the atom's second half: packed chunk 4 + cc4, bit 2 of the position flipped
    c0 = k.shl(cc4, 1, type=T.b32)
    dst0 = k.add(dst, k.add(row, k.shl(k.xor(c0, ph, type=T.b32), 4, type=T.b32), type=T.u32), type=T.u32)
    dst1 = k.xor(dst0, 16, type=T.b32)  # chunk c0 + 1: bit 4 flipped
    groups_per_pass = nthr // 32
    steps = []

    def chunk(s_addr, s_off, d_off):
        def emit():
            words = k.ld(Addr(s_addr, s_off), type=T.b32, space="shared", vec=4)
            outs = []
            for w in words:
                outs += WIDEN[widen](k, w)
            k.st(Addr(dst0, d_off), outs[0::2], type=T.b32, space="shared", vec=4)
            k.st(Addr(dst1, d_off), outs[1::2], type=T.b32, space="shared", vec=4)
        return emit

    for (packed, wide, p_off, w_off) in parts:
        rows = packed.rows
        if (rows // 8) % groups_per_pass:
            raise ValidationError(f"{rows} rows do not split into passes of {groups_per_pass} 8-row groups")
        for pi in range(packed.cols // 128):  # packed atom pi -> widened atoms 2 pi, 2 pi + 1
            for i in range(rows * 8 // nthr):
                g_all = i * groups_per_pass
                half, rg = divmod(g_all, rows // 8)
                s_off = p_off + pi * rows * 128 + rg * 1024
                d_off = w_off + (2 * pi + half) * rows * 128 + rg * 1024
                steps.append(chunk(src1 if half else src0, s_off, d_off))
    return steps


class AFragments:
    """Register-sourced wgmma A operands widened from a packed s4 stage (one consumer warpgroup).

    Thread (warp w, g = lane / 4, t = lane % 4) of consumer c reads, for k-step s and m64 block mi,
    word t of packed chunk s of rows r = c * wg_m + 64 mi + 16 w + g and r + 8 (c: the register
    `cidx`, 0 for every consumer when they share the rows); in the 128-byte swizzle that chunk sits
    at atom (s / 8) x rows x 128 + r * 128 + ((s % 8 ^ g) << 4), so the per-step offsets are
    computed once and every k-iteration adds only the stage address.  widen: a key of WIDEN; shift:
    a register of bytes added to every chunk's place (split_stage: consumer c's half of the stage).
    """

    def __init__(self, k, cfg, cidx, w, g, t, widen="signext", shift=None):
        self.k, self.cfg, self.widen = k, cfg, WIDEN[widen]
        pa, _ = cfg.packed_tiles
        self.steps = pa.cols // 16
        r0 = k.add(k.mul(cidx, cfg.wg_m, type=T.u32), k.mad(w, 16, g, type=T.u32), type=T.u32)
        base = k.add(k.shl(r0, 7, type=T.b32), k.shl(t, 2, type=T.b32), type=T.u32)
        if shift is not None:  # a register of bytes: k-step 0 of this consumer sits that far into the stage
            base = k.add(base, shift, type=T.u32)
        self.offs = [k.add(base, k.shl(k.xor(g, sidx, type=T.b32), 4, type=T.b32), type=T.u32,
                           dst=k.reg(T.u32, f"a_off{sidx}_")) for sidx in range(min(8, self.steps))]
        self.atom_bytes = pa.rows * 128

    def registers(self, steps: int, name: str) -> list:
        """Fixed registers for `steps` k-steps of one m64 block: per step [a0, a1, a2, a3] (.b32)."""
        return [list(self.k.regs(T.b32, 4, name=f"{name}{s}_")) for s in range(steps)]

    def load(self, stage_addr, mi: int, steps=None, dst=None):
        """Per k-step of `steps` (default: all of the stage), the 4 s8x4 A registers [a0, a1, a2, a3] of
        m64 block `mi` of the stage at stage_addr; dst: per step the 4 registers to write (a pipelined
        loop widens into the same registers from its prologue and its body), None: fresh ones."""
        k = self.k
        steps = range(self.steps) if steps is None else steps
        out = []
        for j, sidx in enumerate(steps):
            a = GE.add_u32(k, stage_addr, self.offs[sidx % 8])
            at = sidx // 8 * self.atom_bytes + mi * 64 * 128
            w0 = GE.ld_shared_b32(k, Addr(a, at))
            w1 = GE.ld_shared_b32(k, Addr(a, at + 8 * 128))
            d = dst[j] if dst is not None else (None,) * 4
            x0, x1 = self.widen(k, w0, (d[0], d[2]))
            y0, y1 = self.widen(k, w1, (d[1], d[3]))
            out.append([x0, y0, x1, y1])
        return out
