"""The weight-streaming s4 kernel (`HopperGemm(prepacked=True)`): A, prepacked once into the order its
wgmma fragments are read in, streams from global memory at the rate of plain sequential loads.

For a decode-sized problem with the operands swapped (`swap_ab`), the kernel's A is the weights: N
rows of packed nibbles, each read exactly once.  On the H200 a kernel that only reads 32 MB of them
with sequential 16-byte loads takes 10.0 us; the TMA boxes of the ring kernel (64 rows x 256 bytes)
need 12.2 us or more for the same bytes, and 16-byte loads of the same row-major data taken 128 bytes
per row at a time need 20 us: short runs of many 4 KB-strided rows waste the memory's pages.  So the
weights are reordered once (`prepack_numpy`, or the `prepack_tiles` kernel on the GPU) into
`PREPACKED` order, in which each warp's load is 512 contiguous bytes and each CTA reads one
contiguous range, front to back.

Prepacked order (16-byte chunks, 64-row tiles, k-blocks of 256 values = 128 packed bytes per row):
chunk (tile T, block kb, warp w, load i = 2 r + c, lane 4 g + t) holds bytes 64 c + 16 sigma(t) ..
+ 15 of block kb of row 64 T + 16 w + 8 r + g, with sigma = (0, 2, 1, 3); rows past N and bytes past
K are zeros (N rounded up to 64 rows, each row to whole blocks).  Thread (w, g, t) of a consumer
warpgroup thus copies, per block, its four chunks of its A fragment rows 16 w + g and 16 w + g + 8:
packed word j of chunk c feeds k-step 4 c + j, its low nibbles a0 (a1 for the row + 8), its high
ones a2 (a3), as `convert.AFragments` widens a staged word.

B (the activations, row-major packed) is copied by the same threads: thread (g, h = bit 1 of the
lane, p = bit 0) of warp w takes chunks 4 h + p and 4 h + p + 2 of row 8 w + g + 32 q; it widens
them and writes the s8 tile the wgmma reads in A's K order (k-step 4 h + j takes word j of the
half-row's four chunks, fragment slot t holding chunk sigma(t), so the thread's chunks are slots
2 p and 2 p + 1: one 8-byte store per half k-step; 128-byte swizzle).

Pipeline, per consumer warpgroup (the CTA's `consumers` warpgroups take a unit's k-blocks by turns
and meet in shared memory at the end, a fixed order: exact and deterministic): every thread copies its
own chunks with cp.async, `stages` blocks ahead, into a ring it alone reads back.  Per block i:
wait for block i's copies; B read back, widened and written into buffer i mod 3, fenced for the async
proxy; A read back and widened into fragment set i mod 2; the copies of block i + stages issued; one
named barrier (B complete); 8 wgmmas as one group; `wgmma.wait_group 1` (block i - 1's wgmmas done,
so a fragment set is free two blocks on and a B buffer, past the next barrier, three blocks on).
The products past K add nothing: B is zero-filled there and A is zero (padding) or skipped.
"""

from __future__ import annotations

import functools

from ...builder import KernelBuilder
from ...isa import types as T
from ...isa.operands import Addr

from ..gemm.dependent import wait_for_previous_kernel
from .convert import WIDEN
from .emit import Output, Placement, Work, _ceil_div, _epilogue
from .prepack import BLOCK_BYTES, TILE_ROWS

_PTXFORGE_INTERNAL = True

#: bytes of one thread's 16-byte chunks of one k-block, side by side for the warpgroup's 128 threads
CHUNK_ROW = 128 * 16

#: the named barrier of the consumers' final sum (1 .. consumers are the warpgroups' own)
REDUCE_BARRIER = 15

#: widened B buffers per consumer warpgroup (block i writes i mod 3: see the module docstring)
B_BUFFERS = 3


def chunks(cfg) -> int:
    """16-byte chunks one consumer thread copies per k-block: 4 of A (2 rows x 2), 2 per 32 rows of B."""
    return 4 + 2 * (cfg.block_n // 32)


def sub_blocks(cfg) -> int:
    """Prepacked 256-value blocks per k-step of the kernel (block_k_bytes 256 or 512)."""
    return cfg.block_k_bytes // 256


def stream_stage_bytes(cfg) -> int:
    """Shared bytes of one k-step (`sub_blocks` prepacked blocks) in flight for one consumer warpgroup."""
    return sub_blocks(cfg) * chunks(cfg) * CHUNK_ROW


def emit_streaming(cfg) -> KernelBuilder:
    """The KernelBuilder of a `prepacked` configuration (see the module docstring).

    Parameters: `a` (the kernel's A in prepacked order), `b` (its B, [N, K/2] packed bytes), `c`, `m`,
    `n`, `k`, `splits`; grid: one CTA per work unit up to the SM count (persistent); `cfg.threads`
    threads; `cfg.smem_bytes` of dynamic shared memory."""
    k = KernelBuilder(cfg.kernel_name, target="sm_90a", maxntid=cfg.threads, minnctapersm=1)
    k.note("path", "sm_90a weight-streaming wgmma (s4: prepacked A copied by each thread, widened in registers)")
    a_ptr = k.param_ptr("a", T.u8)
    b_ptr = k.param_ptr("b", T.u8)
    c_ptr = k.param_ptr("c", T.s32)
    m = k.param_value("m", T.u32)
    n = k.param_value("n", T.u32)
    kk = k.param_value("k", T.u32)
    splits = k.param_value("splits", T.u32)
    smem = k.dynamic_shared("smem", align=1024)
    raw = k.shared_base(smem)
    base = k.and_(k.add(raw, 1023, type=T.u32), 0xFFFFFC00, type=T.b32, dst=k.reg(T.u32, "smem_base"))
    _, tb = cfg.tiles
    red_base = k.add(base, cfg.convert_bytes + cfg.stream_bytes, type=T.u32, dst=k.reg(T.u32, "red_base"))
    if cfg.pdl:  # nothing above touches global memory
        wait_for_previous_kernel(k)

    tid = k.tid()
    cidx = k.shr(tid, 7, type=T.u32, dst=k.reg(T.u32, "cidx"))
    ctid = k.and_(tid, 127, type=T.b32, dst=k.reg(T.u32, "ctid"))
    w = k.shr(ctid, 5, type=T.u32, dst=k.reg(T.u32, "warp"))
    lane = k.and_(tid, 31, type=T.b32)
    g = k.shr(lane, 2, type=T.u32, dst=k.reg(T.u32, "grp"))
    t = k.and_(lane, 3, type=T.b32, dst=k.reg(T.u32, "quad"))
    h = k.and_(k.shr(lane, 1, type=T.u32), 1, type=T.b32)
    p = k.and_(lane, 1, type=T.b32)
    b_chunk = k.mad(h, 64, k.shl(p, 4, type=T.b32), type=T.u32, dst=k.reg(T.u32, "b_chunk"))
    row_bytes = k.shr(kk, 1, type=T.u32, dst=k.reg(T.u32, "row_bytes"))
    nq = cfg.block_n // 32

    # where this thread writes B: per (k-step j of the half, lo/hi) the swizzled 16-byte chunk (2 j + hi) ^ g of
    # row 8 w + g, at byte 8 p, in atom h of its warpgroup's first buffer (the rest are offsets)
    buf0 = k.add(base, k.mul(cidx, B_BUFFERS * tb.nbytes, type=T.u32), type=T.u32, dst=k.reg(T.u32, "bbuf0"))
    row_at = k.mad(h, cfg.block_n * 128, k.mad(k.mad(w, 8, g, type=T.u32), 128, k.shl(p, 3, type=T.b32),
                                               type=T.u32), type=T.u32)
    b_at = k.add(buf0, row_at, type=T.u32)
    b_slots = [k.add(b_at, k.shl(k.xor(g, c, type=T.b32), 4, type=T.b32), type=T.u32,
                     dst=k.reg(T.u32, f"b_slot{c}_")) for c in range(8)]

    # this thread's chunk j of sub-block u of ring stage s: stream + ((c x stages + s) x nsub + u) x nch x 2048
    # + j x 2048 + ctid x 16
    sb = stream_stage_bytes(cfg)
    nsub, nch = sub_blocks(cfg), chunks(cfg)
    my_slot = k.add(k.add(base, cfg.convert_bytes, type=T.u32),
                    k.mad(cidx, cfg.stages * sb, k.shl(ctid, 4, type=T.b32), type=T.u32), type=T.u32,
                    dst=k.reg(T.u32, "my_slot"))

    tiles_m = _ceil_div(k, m, cfg.block_m)
    tiles_n = _ceil_div(k, n, cfg.block_n)
    place = Placement(k, cfg, tiles_m, tiles_n, None)
    ktiles = _ceil_div(k, kk, cfg.block_k)
    work = Work(k, place.units, ktiles, splits)
    lblocks = _ceil_div(k, kk, 2 * BLOCK_BYTES)  # prepacked blocks per row
    # A: this thread's first chunk of block 0 of tile 0, then + (tile x blocks + kb) x 8192
    a_thread = k.mad(k.mad(w, 4 * 32, lane, type=T.u32), 16, a_ptr, mode="wide", type=T.u32)
    tile_bytes = k.mul(lblocks, TILE_ROWS * BLOCK_BYTES, type=T.u32, dst=k.reg(T.u32, "a_tile_bytes"))

    stages = cfg.stages
    frag = [[list(k.regs(T.b32, 4, name=f"af{x}{s}_")) for s in range(8 * nsub)] for x in range(2)]
    accs = [k.regs(T.s32, cfg.block_n // 2, name="acc0_")]
    widen = WIDEN[cfg.widen]
    ptrue = k.setp("eq", lane, lane, type=T.u32)
    tmpl_b = tb.descriptor_template()
    b_hi = tmpl_b >> 32
    bar_id = k.add(cidx, 1, type=T.u32, dst=k.reg(T.u32, "wg_bar"))
    desc0 = k.add(k.shr(buf0, 4, type=T.u32), tmpl_b & 0xFFFFFFFF, type=T.u32, dst=k.reg(T.u32, "b_desc0"))
    bsel = k.reg(T.u32, "bsel")  # the B buffer of the current block (0, 1, 2 by turns)
    step = cfg.consumers

    with work.loop() as (tile, split, kt0, kt1):
        tm, tn = place(tile)
        a_unit = k.mad(tm, tile_bytes, a_thread, mode="wide", type=T.u32)
        lim = k.min(k.mul(kt1, nsub * BLOCK_BYTES, type=T.u32), row_bytes, type=T.u32)  # this unit's bytes of a row
        lim_blocks = k.min(k.mul(kt1, nsub, type=T.u32), lblocks, type=T.u32)  # and its prepacked blocks
        row_b = k.mad(tn, cfg.block_n, k.mad(w, 8, g, type=T.u32), type=T.u32)
        b_rows, b_lims, b_ok = [], [], []
        for q in range(nq):
            row = k.add(row_b, 32 * q, type=T.u32) if q else row_b
            ptr = k.mad(row, row_bytes, b_ptr, mode="wide", type=T.u32)
            b_rows.append(k.add(ptr, k.cvt(b_chunk, T.u64, frm=T.u32), type=T.u64))
            b_ok.append(k.setp("lt", row, n, type=T.u32))
            room = k.sub(lim, b_chunk, type=T.s32)  # a chunk at block offset `off` exists when off < room
            b_lims += [room, k.sub(room, 32, type=T.s32)]

        def load(s, kb):
            """Ring stage s <- k-step kb: this thread's chunks of A and B of its `nsub` prepacked blocks by cp.async,
            one group (A's past the unit skipped, B's past N skipped and past K zero-filled, reading the row's first
            bytes)."""
            for u in range(nsub):
                lb = k.mad(kb, nsub, u, type=T.u32) if nsub > 1 else kb
                off = k.mul(lb, BLOCK_BYTES, type=T.u32)
                at = k.mad(lb, TILE_ROWS * BLOCK_BYTES, a_unit, mode="wide", type=T.u32)
                in_unit = k.setp("lt", lb, lim_blocks, type=T.u32)
                for i in range(4):
                    k.cp_async(Addr(my_slot, slot(s, u, i)), Addr(at, 512 * i), 16, pred=in_unit)
                for q in range(nq):
                    for c in range(2):
                        inside = k.setp("lt", off, b_lims[2 * q + c], type=T.s32)
                        src = k.mad(k.selp(lb, 0, inside, type=T.u32), BLOCK_BYTES, b_rows[q], mode="wide",
                                    type=T.u32)
                        k.cp_async(Addr(my_slot, slot(s, u, 4 + 2 * q + c)), Addr(src, 32 * c), 16,
                                   ignore_src=~inside, pred=b_ok[q])
            k.cp_async_commit()

        def slot(s, u, j):
            """Offset from my_slot of this thread's chunk j of sub-block u of ring stage s."""
            return ((s * nsub + u) * nch + j) * CHUNK_ROW

        def own(s, u, j):
            """This thread's chunk j of sub-block u of ring stage s, read back (the copies it issued itself)."""
            return k.ld(Addr(my_slot, slot(s, u, j)), type=T.b32, vec=4, space="shared")

        def consume(s):
            """Block i in stage s: B widened into buffer bsel, A into fragment set s % 2, the stage reloaded,
            one barrier, 8 wgmmas; then the previous block's wgmmas retired."""
            f = frag[s % 2]
            k.cp_async_wait(stages - 1)  # this stage's group has landed (later ones may still be in flight)
            boff = k.mul(bsel, tb.nbytes, type=T.u32)
            slots = [k.add(x, boff, type=T.u32) for x in b_slots]
            for u in range(nsub):  # sub-block u fills atoms 2 u, 2 u + 1 of the B tile
                for q in range(nq):
                    x, y = own(s, u, 4 + 2 * q), own(s, u, 5 + 2 * q)
                    for j in range(4):
                        xl, xh = widen(k, x[j])
                        yl, yh = widen(k, y[j])
                        for hi, pair in ((0, [xl, yl]), (1, [xh, yh])):
                            k.st(Addr(slots[2 * j + hi], u * 2 * cfg.block_n * 128 + q * 32 * 128), pair,
                                 type=T.b32, vec=2, space="shared")
            k.fence("fence.proxy.async.shared::cta")  # generic writes of B -> wgmma (async proxy)
            for u in range(nsub):
                a_words = [own(s, u, j) for j in range(4)]
                for st_ in range(8):
                    c, j = divmod(st_, 4)
                    fr = f[8 * u + st_]
                    widen(k, a_words[c][j], (fr[0], fr[2]))
                    widen(k, a_words[2 + c][j], (fr[1], fr[3]))
            load(s, kb_next)
            k.add(kb_next, step, dst=kb_next)
            k.bar_sync(bar_id, 128)  # every warp's B of this block written (and their waits of the last one passed)
            b_lo0 = k.add(desc0, k.shr(boff, 4, type=T.u32), type=T.u32)
            k.wgmma_fence()
            for st_ in range(8 * nsub):
                b_desc = k.mov([k.add(b_lo0, tb.slice_start(st_) >> 4, type=T.u32), b_hi], type=T.b64)
                k.wgmma(f[st_], b_desc, accs[0], n=cfg.block_n, a_type=T.s8, scale_d=ptrue)
            k.wgmma_commit()
            k.wgmma_wait(1)  # the previous block's wgmmas are done: its fragment set is free
            k.add(bsel, 1, dst=bsel)
            k.selp(0, bsel, k.setp("eq", bsel, B_BUFFERS, type=T.u32), type=T.u32, dst=bsel)

        for r in accs[0]:
            k.mov(0, type=T.s32, dst=r)
        k.mov(0, type=T.u32, dst=bsel)
        count = k.sub(kt1, kt0, type=T.u32)
        mine = k.div(k.add(count, k.sub(step - 1, cidx, type=T.u32), type=T.u32), step, type=T.u32)
        rounds = k.div(k.add(mine, stages - 1, type=T.u32), stages, type=T.u32)
        kb_next = k.add(kt0, cidx, type=T.u32, dst=k.reg(T.u32, "kb_next"))
        for s in range(stages):
            load(s, kb_next)
            k.add(kb_next, step, dst=kb_next)
        with k.for_range(0, rounds, name="round"):
            for s in range(stages):
                consume(s)
        k.cp_async_wait_all()  # the copies past the unit's last block (B's zero fills) before the next unit's
        k.wgmma_wait(0)
        if cfg.consumers > 1:
            _reduce(k, cfg, accs, red_base, cidx, ctid)
            with k.if_(k.setp("eq", cidx, 0, type=T.u32)):
                _epilogue(k, cfg, accs, Output(c_ptr), split, m, n, tm, tn, k.mov(0, type=T.u32), w, g, t)
        else:
            k.bar_sync(bar_id, 128)  # every warp's wgmmas done before the next unit rewrites the buffers
            _epilogue(k, cfg, accs, Output(c_ptr), split, m, n, tm, tn, cidx, w, g, t)
    return k


def _reduce(k, cfg, accs, red_base, cidx, ctid):
    """The consumers' sums meet in the first: consumer c > 0 writes its registers in groups of four at
    red + ((c - 1) x groups + q) x 2048 + thread x 16 (consecutive threads, consecutive 16 bytes); a barrier of
    every consumer; the first adds them in consumer order (a fixed order: exact and deterministic); a second
    barrier, after which the others may write the next unit's sums."""
    regs = [r for acc in accs for r in acc]
    groups = len(regs) // 4
    everyone = 128 * cfg.consumers
    mine = k.add(k.mad(ctid, 16, red_base, type=T.u32),
                 k.mul(k.sub(cidx, 1, type=T.u32), groups * 2048, type=T.u32), type=T.u32)
    with k.if_(k.setp("ne", cidx, 0, type=T.u32)):
        for q in range(groups):
            k.st(Addr(mine, q * 2048), regs[4 * q:4 * q + 4], type=T.s32, vec=4, space="shared")
        k.bar_sync(REDUCE_BARRIER, everyone)
        k.bar_sync(REDUCE_BARRIER, everyone)
    with k.else_():
        k.bar_sync(REDUCE_BARRIER, everyone)
        first = k.mad(ctid, 16, red_base, type=T.u32)
        for c in range(1, cfg.consumers):
            for q in range(groups):
                got = k.ld(Addr(first, ((c - 1) * groups + q) * 2048), type=T.s32, vec=4, space="shared")
                for r, x in zip(regs[4 * q:4 * q + 4], got):
                    k.add(r, x, type=T.s32, dst=r)
        k.bar_sync(REDUCE_BARRIER, everyone)


@functools.lru_cache(maxsize=32)
def module_for(cfg):
    """The Module of one `prepacked` configuration (emitted once per process)."""
    return emit_streaming(cfg).module()
