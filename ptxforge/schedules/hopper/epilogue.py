"""The Hopper GEMM kernel's epilogue: the consumer warpgroups' accumulators into C.

Through registers (each thread stores its accumulator pairs, or single values for an odd N, or the
transposed values of swap_ab, with 64-bit offsets where C has 2^32 or more elements), or through
shared memory and a TMA tile store (`epilogue='tma'`), after the biased s4 correction and, where K
is split in the kernel, the wait for the split-K reduction (`splitk.emit_fixup`); and the hand-over
of accumulators between consumer warpgroups that share a tile's rows (`reduce_consumers`).
"""

from __future__ import annotations

from ...isa import types as T
from ...isa.operands import Addr

from ..gemm import emit as GE
from .splitk import emit_fixup

_PTXFORGE_INTERNAL = True
_PTXFORGE_EMITTER = True  # its instructions name its lines (errors.emitter_locations)


def _unit_c(k, c_ptr, split, m, n, elem_bytes: int):
    """C (or this split's slice of the split-K workspace): c + split * M * N * elem_bytes."""
    mn = k.mul(m, n, type=T.u32, mode="wide")
    off = k.mul(k.mul(mn, elem_bytes, type=T.u64), k.cvt(split, T.u64, frm=T.u32), type=T.u64)
    return k.add(c_ptr, off, type=T.u64)


def reduce_consumers(k, cfg, accs, red_base, cidx, ctid):
    """interleave_k / split_stage: the other consumers' accumulators are added into consumer 0's through
    shared memory (consumer c >= 1 through region c - 1, added in the order of c).

    Thread i of consumer 1 writes its registers in groups of four at red + (q * 128 + i) * 16
    (consecutive threads, consecutive 16 bytes: no bank conflicts); a barrier of both warpgroups;
    thread i of consumer 0 adds the same words to its registers; a second barrier, after which
    consumer 1 may write the next unit's sums (or widen B into its buffers, where the sums pass
    through them: `reduce_in_buffers`; then its own barrier first, so that every one of its
    wgmmas has retired before the buffers are written)."""
    regs = [r for acc in accs for r in acc]
    slot = k.mad(ctid, 16, red_base, type=T.u32)
    nc = cfg.consumers
    everyone, bar = 128 * nc, 4 + nc  # the barrier after the consumers' widening barriers (4 + c)
    region = cfg.hand_over_stride  # consumer c >= 1 hands over through region c - 1
    second = k.setp("ne", cidx, 0, type=T.u32)
    with k.if_(second):
        # (with two consumers the one region and barrier 5 are spelled as constants, as in the kernels measured)
        mine = slot if nc == 2 else k.mad(k.sub(cidx, 1, type=T.u32), region, slot, type=T.u32)
        if cfg.reduce_in_buffers:  # its own widening barrier (4 + cidx): every one of its wgmmas has retired
            k.bar_sync(5 if nc == 2 else k.add(cidx, 4, type=T.u32), 128)
        for q in range(len(regs) // 4):
            k.st(Addr(mine, q * 128 * 16), regs[4 * q:4 * q + 4], type=T.s32, vec=4, space="shared")
        k.bar_sync(bar, everyone)
        k.bar_sync(bar, everyone)
    with k.else_():
        k.bar_sync(bar, everyone)
        for c in range(1, nc):  # in a fixed order: the sum is the same every run
            for q in range(len(regs) // 4):
                got = k.ld(Addr(slot, (c - 1) * region + q * 128 * 16), type=T.s32, vec=4, space="shared")
                for r, x in zip(regs[4 * q:4 * q + 4], got):
                    k.add(r, x, type=T.s32, dst=r)
        k.bar_sync(bar, everyone)


def _unbias(k, accs, bias, row0, col0):
    """Biased s4: acc += kc - 8 rowsum[r] - 8 colsum[c] in place (sums buffers padded to whole tiles)."""
    a_sums, b_sums, kc = bias
    for mi, acc in enumerate(accs):
        r0 = k.add(row0, mi * 64, type=T.u32) if mi else row0
        pa = k.mad(r0, 4, a_sums, mode="wide", type=T.u32)
        rt = []
        for off in (0, 8 * 4):
            ra = k.ld(Addr(pa, off), type=T.s32)
            rt.append(k.sub(kc, k.shl(ra, 3, type=T.b32), type=T.s32))
        pb = k.mad(col0, 4, b_sums, mode="wide", type=T.u32)
        for j in range(len(acc) // 4):
            cb = k.ld(Addr(pb, 32 * j), type=T.s32, vec=2)
            c8 = [k.shl(x, 3, type=T.b32) for x in cb]
            for q in range(4):
                r = acc[4 * j + q]
                k.add(r, k.sub(rt[q // 2], c8[q % 2], type=T.s32), dst=r, type=T.s32)


def epilogue(k, cfg, accs, out, split, m, n, tm, tn, cidx, w, g, t, bias=None, first_split=None):
    """Accumulators -> C (the biased s4 correction first): through registers or through shared memory + TMA."""
    row_t = k.mul(tm, cfg.block_m, type=T.u32)
    col_t = k.mul(tn, cfg.block_n, type=T.u32)
    if cfg.scaled:  # both operands held 16 v: the sums are 256 C, exactly
        GE.shr_s32_in_place(k, [r for acc in accs for r in acc], 8)
    if bias is not None:
        row0 = k.add(row_t, k.mad(cidx, cfg.wg_m, k.mad(w, 16, g, type=T.u32), type=T.u32), type=T.u32)
        with k.if_(first_split):
            _unbias(k, accs, bias, row0, k.mad(t, 2, col_t, type=T.u32))
    if out.fixup is None:
        _store_c(k, cfg, accs, out, split, m, n, row_t, col_t, cidx, w, g, t)
        return
    with k.if_(emit_fixup(k, out.fixup, accs, split, tm, tn)):  # C itself: split 0's place
        _store_c(k, cfg, accs, out, None, m, n, row_t, col_t, cidx, w, g, t)


def _store_c(k, cfg, accs, out, split, m, n, row_t, col_t, cidx, w, g, t):
    """The tile's sums -> C, or with `split` its slice of the 'launch' reduction's workspace [S, M, N]."""
    if cfg.epilogue == "tma":
        _epilogue_tma(k, cfg, accs, out, 0 if split is None else split, row_t, col_t, cidx, w, g, t)
    else:
        c = out.c_ptr if split is None else _unit_c(k, out.c_ptr, split, m, n, 4)
        _epilogue_registers(k, cfg, accs, c, m, n, row_t, col_t, cidx, w, g, t)


def _epilogue_tma(k, cfg, accs, out, split, row_t, col_t, cidx, w, g, t):
    """Accumulators -> C through shared memory: per 64-row sub-tile of 128-byte rows, the warpgroup's
    threads write it into a staging buffer at the 128-byte swizzle's places (conflict-free):
    32-bit C as st.shared.v2 pairs, 16-bit C (c16) as rounded bf16x2/f16x2 pairs through
    stmatrix.x4; then fence.proxy.async, a named barrier of the warpgroup, and its first thread
    stores the sub-tile with a TMA tile store (clipped at C's edges by the map) and commits it.
    Two staging buffers alternate: before a buffer is rewritten, `cp.async.bulk.wait_group.read 1`
    (the last sub-tile: 0, so the next tile and the CTA's exit find both free) and the barrier again."""
    store_cols, store_rows = cfg.store_box
    sub_bytes = store_rows * 128
    bar_id = k.add(cidx, 2, type=T.u32)  # a named barrier per consumer warpgroup (ids 2, 3)
    buf0 = k.mad(cidx, 2 * sub_bytes, out.staging, type=T.u32)
    lead = k.setp("eq", k.mad(w, 32, k.mad(g, 4, t, type=T.u32), type=T.u32), 0, type=T.u32)
    write = (_stage_c16 if cfg.c16 else _stage_c32)(k, cfg, buf0, w, g, t)
    row_w = k.mad(cidx, cfg.wg_m, row_t, type=T.u32)
    per_row = cfg.block_n // store_cols
    nsub = len(accs) * per_row
    q = 0
    for mi, acc in enumerate(accs):
        row = k.add(row_w, mi * store_rows, type=T.u32) if mi else row_w
        for jc in range(per_row):
            buf = (q % 2) * sub_bytes
            write(acc, jc, buf)
            k.fence("fence.proxy.async.shared::cta")  # generic writes -> the TMA store (async proxy)
            k.bar_sync(bar_id, 128)
            col = k.add(col_t, jc * store_cols, type=T.u32) if jc else col_t
            k.tensor_store(out.tmap_c, (col, row, split), Addr(k.add(buf0, buf, type=T.u32) if buf else buf0),
                           pred=lead)
            k.bulk_commit(pred=lead)
            # the buffer the next sub-tile writes was read by the store before this one
            k.bulk_wait(0 if q == nsub - 1 else 1, read=True, pred=lead)
            k.bar_sync(bar_id, 128)
            q += 1


def _stage_c32(k, cfg, buf0, w, g, t):
    """write(acc, jc, buf): this thread's pairs of 32-column sub-tile jc (32-bit C) into the buffer at
    buf0 + buf.  Thread (w, g, t) holds rows 16 w + g (+ 8) and the 8-byte half t % 2 of 16-byte
    chunk 2 jj + t / 2 of each row, which the swizzle moves to chunk (2 jj + t / 2) ^ g (row % 8 == g)."""
    store_cols = cfg.store_box[0]
    c_t = T.lookup(cfg.c_type)
    rbase = k.mad(k.mad(w, 16, g, type=T.u32), 128, buf0, type=T.u32)
    rbase = k.mad(k.and_(t, 1, type=T.b32), 8, rbase, type=T.u32)
    th = k.shr(t, 1, type=T.u32)
    slots = [k.add(rbase, k.shl(k.xor(k.add(th, 2 * jj, type=T.u32), g, type=T.b32), 4, type=T.b32), type=T.u32)
             for jj in range(store_cols // 8)]

    def write(acc, jc, buf):
        for jj in range(store_cols // 8):
            j = jc * (store_cols // 8) + jj
            k.st(Addr(slots[jj], buf), [acc[4 * j], acc[4 * j + 1]], type=c_t, vec=2, space="shared")
            k.st(Addr(slots[jj], buf + 8 * 128), [acc[4 * j + 2], acc[4 * j + 3]], type=c_t, vec=2, space="shared")
    return write


def _stage_c16(k, cfg, buf0, w, g, t):
    """write(acc, jc, buf): 64-column sub-tile jc rounded to 16-bit pairs and stored with stmatrix.x4.

    One x4 covers column groups j, j + 1 (8 columns each) of the warp's 16 rows: matrices rows 0-7
    / 8-15 of group j, then of group j + 1, so the registers are the packed pairs (acc[4j], acc[4j+1]),
    (acc[4j+2], acc[4j+3]) of j and of j + 1 (the mma C layout is stmatrix's fragment layout).  Lane
    l = 4 g + t addresses row l % 8 (+ 8 for odd matrices) of matrix l / 8, 16-byte chunk 2 jj + l / 16,
    swizzled to that chunk ^ (l % 8)."""
    store_cols = cfg.store_box[0]
    pair_t = T.bf16x2 if cfg.operand == "bf16" else T.f16x2
    lane = k.mad(g, 4, t, type=T.u32)
    r = k.and_(lane, 7, type=T.b32)
    mat = k.shr(lane, 3, type=T.u32)
    row = k.add(k.mad(w, 16, r, type=T.u32), k.shl(k.and_(mat, 1, type=T.b32), 3, type=T.b32), type=T.u32)
    rbase = k.mad(row, 128, buf0, type=T.u32)
    half = k.shr(mat, 1, type=T.u32)
    slots = [k.add(rbase, k.shl(k.xor(k.add(half, 2 * jj, type=T.u32), r, type=T.b32), 4, type=T.b32),
                   type=T.u32) for jj in range(store_cols // 16)]

    def pack(lo, hi):
        return k.cvt(hi, pair_t, frm=T.f32, b=lo)  # cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo: lo at the lower address

    def write(acc, jc, buf):
        for jj in range(store_cols // 16):
            j = jc * (store_cols // 8) + 2 * jj
            regs = [pack(acc[4 * j], acc[4 * j + 1]), pack(acc[4 * j + 2], acc[4 * j + 3]),
                    pack(acc[4 * j + 4], acc[4 * j + 5]), pack(acc[4 * j + 6], acc[4 * j + 7])]
            k.stmatrix(Addr(slots[jj], buf), regs, num=4)
    return write


def _c_address(k, cfg, row, pitch, col, c_ptr):
    """The u64 address of 32-bit C element (row, col) of rows of `pitch` values: the element offset in 32 bits,
    or with `wide_c` (C of 2^32 or more elements) in 64."""
    if not cfg.wide_c:
        return k.mad(k.mad(row, pitch, col, type=T.u32), 4, c_ptr, type=T.u32, mode="wide")
    offset = k.mad(row, pitch, k.cvt(col, T.u64, frm=T.u32), type=T.u32, mode="wide")
    return k.mad(offset, 4, c_ptr, type=T.u64)


def _epilogue_registers(k, cfg, accs, c_ptr, m, n, row_t, col_t, cidx, w, g, t):
    """Accumulators -> C: a branch per row past M, a predicate per column group past N (computed once);
    8-byte pair stores (N even: rows start 8-byte aligned), or with `odd_n` single values."""
    row0 = k.add(row_t, k.mad(cidx, cfg.wg_m, k.mad(w, 16, g, type=T.u32), type=T.u32), type=T.u32)
    col0 = k.mad(t, 2, col_t, type=T.u32)
    if cfg.swap_ab:
        full_m = k.setp("le", k.add(row_t, cfg.block_m, type=T.u32), m, type=T.u32)
        _store_transposed(k, cfg, accs, c_ptr, m, n, row0, col0, full_m, col_t)
        return
    rowrem = k.sub(m, row0, type=T.s32)
    colrem = k.sub(n, col0, type=T.s32)
    nj = cfg.block_n // 8
    base = _c_address(k, cfg, row0, n, col0, c_ptr)
    down8 = k.mul(n, 8 * 4, type=T.u32, mode="wide")  # bytes of 8 rows of C
    col_ok = [k.setp("gt", colrem, 8 * j, type=T.s32) for j in range(nj)]

    def rows(store):
        ptr = base
        for mi, acc in enumerate(accs):
            for h in range(2):
                if h:  # rows + 8
                    ptr = k.add(ptr, down8, type=T.u64)
                elif mi:  # the next m64 block: 56 rows on from the previous block's rows + 8
                    ptr = k.add(ptr, k.mul(down8, 7, type=T.u64), type=T.u64)
                with k.if_(k.setp("gt", rowrem, 64 * mi + 8 * h, type=T.s32)):
                    for j in range(nj):
                        store(ptr, j, [acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]])

    if not cfg.odd_n:
        rows(lambda ptr, j, pair: GE.st_global_b32(k, ptr, 32 * j, pair, col_ok[j]))
        return
    col_ok1 = [k.setp("gt", colrem, 8 * j + 1, type=T.s32) for j in range(nj)]

    def single(ptr, j, pair):
        GE.st_global_b32(k, ptr, 32 * j, pair[:1], col_ok[j])
        GE.st_global_b32(k, ptr, 32 * j + 4, pair[1:], col_ok1[j])
    rows(single)


def _store_transposed(k, cfg, accs, c_ptr, m, n, row0, col0, full_m, col_t):
    """swap_ab: accumulator (r, c) of the kernel's B . A^T goes to C[c, r] (C rows hold m values).

    Each thread holds rows r, r + 8 and column pairs (c, c + 1) of every 8-column group: four
    4-byte stores per group, at C + (c * m + r) * 4, + m * 4 for c + 1, + 32 for r + 8.  Lanes
    of one quad share r, the eight quads cover eight consecutive r: 32-byte segments."""
    c_t = T.lookup(cfg.c_type)
    full = k.setp("le", k.add(col_t, cfg.block_n, type=T.u32), n, type=T.u32, combine=("and", full_m))
    pitch = k.mul(m, 4, type=T.u32, mode="wide")  # bytes of one C row
    pitch8 = k.mul(m, 32, type=T.u32, mode="wide")  # bytes of 8 C rows
    nj = cfg.block_n // 8
    for mi, acc in enumerate(accs):
        r0 = k.add(row0, mi * 64, type=T.u32) if mi else row0
        p0 = _c_address(k, cfg, col0, m, r0, c_ptr)
        with k.if_(full):
            p = p0
            for j in range(nj):
                p1 = k.add(p, pitch, type=T.u64)
                for q, (pq, off) in enumerate(((p, 0), (p1, 0), (p, 32), (p1, 32))):
                    k.st(Addr(pq, off), acc[4 * j + q], type=c_t)
                if j + 1 < nj:
                    p = k.add(p, pitch8, type=T.u64)
        with k.else_():
            ok0 = k.setp("lt", r0, m, type=T.u32)
            ok1 = k.setp("lt", k.add(r0, 8, type=T.u32), m, type=T.u32)
            p = p0
            for j in range(nj):
                cj = k.add(col0, 8 * j, type=T.u32)
                cj1 = k.add(cj, 1, type=T.u32)
                p1 = k.add(p, pitch, type=T.u64)
                for q, (col, rowok, pq, off) in enumerate(((cj, ok0, p, 0), (cj1, ok0, p1, 0),
                                                           (cj, ok1, p, 32), (cj1, ok1, p1, 32))):
                    k.st(Addr(pq, off), acc[4 * j + q], type=c_t,
                         pred=k.setp("lt", col, n, type=T.u32, combine=("and", rowok)))
                if j + 1 < nj:
                    p = k.add(p, pitch8, type=T.u64)
