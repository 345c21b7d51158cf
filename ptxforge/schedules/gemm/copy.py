"""Global -> shared staging of one GEMM operand, split into what the pipeline hoists and what it repeats.

The copy width (16-byte cp.async when rows and alignment allow, else 8 or 4, else plain loads)
comes from :func:`ptxforge.copy.plan_tile_copy`; the shared layout from
:class:`ptxforge.copy.SmemLayout`.  Each thread fills whole 16-byte chunks (narrower widths
issue several copies per chunk from one address).  Because the same tile shape is copied
once per k-tile, everything that does not change along K is computed once before the main loop
(`setup_operand_copy`): the shared destinations (a base register per group of copies, the rest
immediates), the row predicates of ragged M/N edges and the global pointer.  Each k-tile then
costs, per copy, one compare (folded with the row predicate) and the copy itself
(`issue_operand_copy`).

Ragged edges: rows past the matrix and bytes past K are zero-filled (cp.async ignore-src, or
zeroed registers for the plain-load fallback), so they add nothing to the products; the source
address of such a copy is never read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import fold as F
from ...copy.layout import CHUNK, SmemLayout
from ...copy.plan import TileCopyPlan, plan_tile_copy
from ...errors import ValidationError
from ...isa import types as T
from ...isa.operands import Addr
from .addressing import AddressFamily, plan_family



@dataclass
class OperandCopy:
    """The hoisted registers and constants of one operand's staging (see `setup_operand_copy`)."""
    plan: TileCopyPlan
    family: AddressFamily
    dst_bases: list  # u32 shared addresses of the base chunks in stage 0
    rows: list  # r_j: row of chunk j relative to the thread's first row
    cols: list  # c_j: byte of chunk j relative to the thread's first byte
    row_ok: list  # pred per chunk: its row lies inside the matrix (and the chunk exists)
    exists: list  # pred or None per chunk: None when every thread has chunk j
    gptr: object  # u64: global address of the thread's first byte of the current k-tile
    row_step: dict  # row delta -> u64 register holding delta * row_bytes
    krem: object  # s32: row_bytes - first byte - k-tile start (bytes still valid at the thread's byte)
    loop: dict | None = None  # registers of the plain-load fallback (a run-time loop over chunks)
    owns_krem: bool = True  # False when krem belongs to another operand's copy (which advances it)
    prefetch: str | None = None  # cp.async L2 prefetch qualifier ("L2::128B", "L2::256B") or None


def chunks_per_thread(rows: int, row_bytes: int, threads: int) -> int:
    """16-byte chunks each thread fills for a tile of `rows` rows of `row_bytes` bytes."""
    return -(-rows * (row_bytes // CHUNK) // threads)


def copy_geometry(rows: int, row_bytes: int, threads: int):
    """The 16-byte chunks each thread fills: chunk q = tid + j*threads is byte (q % cpr)*16 of row q // cpr.

    Returns (row0, byte0) per thread (numpy) and (r_j, c_j) per chunk such that chunk j of a
    thread sits at (row0 + r_j, byte0 + c_j): threads and chunks per row are powers of two, so
    adding j*threads never carries across the thread's own position within a row.
    """
    cpr = row_bytes // CHUNK
    tid = np.arange(threads)
    row0, byte0 = tid // cpr, (tid % cpr) * CHUNK
    rs, cs = [], []
    for j in range(chunks_per_thread(rows, row_bytes, threads)):
        q0 = j * threads
        rs.append(q0 // cpr)
        cs.append((q0 % cpr) * CHUNK)
    return row0, byte0, rs, cs


def setup_operand_copy(k, plan: TileCopyPlan, layout: SmemLayout, region: int, *, threads: int, src, rows_total,
                       tile_row0, row_bytes, tid, smem_base, name: str, krem=None, k_window=None) -> OperandCopy:
    """Hoisted part of the copy of one operand tile (see the module docstring).

    Each thread fills whole 16-byte chunks of the tile (one cp.async, or 16/width narrower
    copies when the plan's width is smaller), so one address serves a chunk.
    src: u64 global address of the matrix; rows_total: u32 rows of the matrix (M or N);
    tile_row0: u32 first row of this CTA's tile; row_bytes: u32 bytes per matrix row;
    krem: a register from another operand with the same per-thread byte pattern, to share.
    k_window: None (the whole row) or (first byte, bytes) u32 registers of the K range this CTA
    reads (split-K): the copies start at that byte and zero-fill past the window's end, so a CTA
    never reads bytes of another split's range.
    """
    thr = threads
    cpr = layout.row_bytes // CHUNK
    row0_np, byte0_np, rows, cols = copy_geometry(plan.rows, layout.row_bytes, thr)
    fam = plan_family(layout, row0_np, byte0_np, list(zip(rows, cols)), region)
    row0 = F.div(k, tid, cpr)
    byte0 = F.mul(k, F.rem(k, tid, cpr), CHUNK)
    dst_bases = fam.emit_bases(k, row0, byte0, smem_base, name=f"s{name}_dst")

    # rows still inside the matrix below the thread's first row: rows_total - tile_row0 - row0
    rowrem = k.sub(k.sub(rows_total, tile_row0, type=T.s32), row0, type=T.s32) if F.is_reg(row0) else \
        k.sub(rows_total, tile_row0, type=T.s32)
    total = plan.rows * cpr
    row_ok, exists = [], []
    for j, r in enumerate(rows):
        ok = k.setp("gt", rowrem, r, type=T.s32)
        ex = None
        if (j + 1) * thr > total:  # last, partial round: some threads have no chunk j
            ex = k.setp("lt", tid, total - j * thr, type=T.u32)
            k.setp("lt", tid, total - j * thr, type=T.u32, dst=ok, combine=("and", ok))
        row_ok.append(ok)
        exists.append(ex)

    # global pointer of the thread's first byte: src + (tile_row0 + row0) * row_bytes + byte0
    first_row = k.add(tile_row0, row0) if F.is_reg(row0) else tile_row0
    gptr = k.mad(first_row, row_bytes, src, mode="wide")
    gptr = F.add64(k, gptr, byte0) if F.is_reg(byte0) or byte0 else gptr
    span = row_bytes
    if k_window is not None:
        gptr = F.add64(k, gptr, k_window[0])
        span = k_window[1]
    row_step = {}
    prev = 0
    for r in rows:
        d = r - prev
        if d and d not in row_step:
            row_step[d] = k.mul(row_bytes, d, mode="wide")
        prev = r
    owns_krem = krem is None
    if owns_krem:
        krem = k.sub(span, byte0, type=T.s32) if F.is_reg(byte0) else k.mov(span, type=T.s32)
    loop = None
    if plan.method != "cp.async":
        # plain loads stay in registers until stored: unrolling every chunk would keep them all
        # live at once, so the fallback walks the chunks in a run-time loop
        tptr = k.mad(tile_row0, row_bytes, src, mode="wide")
        if k_window is not None:
            tptr = F.add64(k, tptr, k_window[0])
        loop = dict(tptr=tptr,
                    tkrem=k.mov(span, type=T.s32),
                    rows_left=k.sub(rows_total, tile_row0, type=T.s32),
                    region=k.add(smem_base, region) if region else smem_base,
                    tid=tid, row_bytes=row_bytes, layout=layout, chunks=len(rows), total=total, name=name,
                    threads=thr)
    return OperandCopy(plan, fam, dst_bases, rows, cols, row_ok, exists, gptr, row_step, krem, loop, owns_krem)


def issue_operand_copy(k, oc: OperandCopy, stage_off) -> None:
    """Copy the current k-tile into the stage at byte offset `stage_off` (u32 register or int)."""
    plan, w = oc.plan, oc.plan.width_bytes
    if oc.loop is not None:
        _load_store_loop(k, oc.loop, stage_off, w)
        return
    dsts = [k.add(b, stage_off) for b in oc.dst_bases] if F.is_reg(stage_off) else None
    cur, prev = oc.gptr, 0
    for j, acc in enumerate(oc.family.accesses):
        r, c = oc.rows[j], oc.cols[j]
        if r != prev:
            cur = k.add(cur, oc.row_step[r - prev])
            prev = r
        if dsts is not None:
            dst = Addr(dsts[acc.base], acc.imm)
        else:
            dst = Addr(oc.dst_bases[acc.base], acc.imm + stage_off)
        cache = plan.cache.lstrip(".") if plan.cache else None
        for x in range(0, CHUNK, w):
            # bytes past K (or a row past M/N) are zero-filled, never read
            valid = k.setp("gt", oc.krem, c + x, type=T.s32, combine=("and", oc.row_ok[j]))
            k.cp_async(dst + x, Addr(cur, c + x), w, cache=cache, ignore_src=~valid, pred=oc.exists[j],
                       prefetch=oc.prefetch)


def _load_store_loop(k, lp, stage_off, w):
    """The plain-load fallback: per chunk 16/w loads of w bytes (zero where invalid) and one
    16-byte shared store, in a run-time loop so only one chunk's bytes are live at a time."""
    lay = lp["layout"]
    cpr = lay.row_bytes // CHUNK
    t = T.u8 if w == 1 else T.u16
    with k.for_range(0, lp["chunks"], name=f"{lp['name']}_chunk") as j:
        q = k.add(k.mul(j, lp["threads"]), lp["tid"])
        row = F.div(k, q, cpr)
        byte = F.mul(k, F.rem(k, q, cpr), CHUNK)
        ok = k.setp("lt", row, lp["rows_left"], type=T.s32)
        exists = k.setp("lt", q, lp["total"], type=T.u32)
        src = k.add(k.mad(row, lp["row_bytes"], lp["tptr"], mode="wide"), k.cvt(byte, T.u64))
        dst = k.add(k.add(lp["region"], lay.emit_byte_offset(k, row, byte)), stage_off)
        left = k.sub(lp["tkrem"], byte, type=T.s32)
        parts = []
        for x in range(0, CHUNK, w):
            valid = k.setp("gt", left, x, type=T.s32, combine=("and", ok))
            v = k.mov(0, type=T.u32)
            k.ld(Addr(src, x), type=t, space="global", dst=v, pred=valid)
            parts.append(v)
        words = []
        if w == 1:
            for i in range(0, CHUNK, 4):
                lo = k.prmt(parts[i], parts[i + 1], 0x0040)
                hi = k.prmt(parts[i + 2], parts[i + 3], 0x0040)
                words.append(k.prmt(lo, hi, 0x5410))
        else:
            for i in range(0, len(parts), 2):
                words.append(k.prmt(parts[i], parts[i + 1], 0x5410))
        k.st(Addr(dst), words, type=T.b32, space="shared", pred=exists)


def advance_operand_copy(k, oc: OperandCopy, tile_bytes: int) -> None:
    """Move to the next k-tile: the global pointer and (when this copy owns it) the remaining-bytes counter."""
    if oc.loop is not None:
        k.add(oc.loop["tptr"], tile_bytes, dst=oc.loop["tptr"])
        k.sub(oc.loop["tkrem"], tile_bytes, dst=oc.loop["tkrem"])
        return
    k.add(oc.gptr, tile_bytes, dst=oc.gptr)
    if oc.owns_krem:
        k.sub(oc.krem, tile_bytes, dst=oc.krem)


def copy_plan(rows, cols, elem, threads, align, layout):
    """The copy planner's choice of width and method for one operand tile.

    The staging splits the tile into 16-byte chunks per thread itself, so only the width
    decision is taken from the plan; when narrow widths would exceed the planner's limit on
    unrolled copies per thread, the same decision is asked for with more threads.
    """
    try:
        return plan_tile_copy(rows, cols, elem, threads, src_align_bytes=align, layout=layout)
    except ValidationError:
        return plan_tile_copy(rows, cols, elem, 1024, src_align_bytes=align, layout=layout)


class OperandStaging:
    """Global -> shared staging of both operand tiles of a GEMM pipeline (cp.async, or plain loads
    where the copy width forbids it), set up once before the main loop.

    a, b: the `OperandCopy` of each operand; stage: the `StageLayout` whose regions they fill.
    Build it with `OperandStaging.setup`; each k-tile then costs one `copy_ktile`.
    """

    def __init__(self, a: OperandCopy, b: OperandCopy, stage):
        self.a, self.b, self.stage = a, b, stage

    @classmethod
    def setup(cls, k, schedule, stage, *, a, b, m, n, tile_m0, tile_n0, row_bytes, tid, smem_base, elem,
              k_window=None):
        """Plan and hoist the copies of the A tile (rows tile_m0.. of the M x K matrix at `a`) and
        the B tile (rows tile_n0.. of the N x K matrix at `b`) into the regions of `stage`.

        k: the KernelBuilder; schedule: the GemmSchedule (tile sizes, threads, copy width);
        m, n, row_bytes: u32 registers (matrix rows, bytes per packed row); tid: u32 thread index;
        smem_base: u32 shared address of the pipeline's memory; elem: the operands' PTX type.
        Writes a note with the copy plan's reason.  The two operands share one remaining-bytes
        counter (their rows have the same length).  k_window: the split-K byte range (see
        `setup_operand_copy`), None for the whole K.
        """
        threads = schedule.threads
        plan_a = copy_plan(schedule.block_m, schedule.block_k, elem, threads, schedule.copy_bytes, stage.a)
        plan_b = copy_plan(schedule.block_n, schedule.block_k, elem, threads, schedule.copy_bytes, stage.b)
        k.note("global -> shared copies", plan_a.reason)
        hint = f"L2::{schedule.l2_prefetch}B" if schedule.l2_prefetch else None
        ca = setup_operand_copy(k, plan_a, stage.a, stage.a_offset, threads=threads, src=a, rows_total=m,
                                tile_row0=tile_m0, row_bytes=row_bytes, tid=tid, smem_base=smem_base, name="a",
                                k_window=k_window)
        cb = setup_operand_copy(k, plan_b, stage.b, stage.b_offset, threads=threads, src=b, rows_total=n,
                                tile_row0=tile_n0, row_bytes=row_bytes, tid=tid, smem_base=smem_base, name="b",
                                krem=ca.krem, k_window=k_window)
        ca.prefetch = cb.prefetch = hint
        return cls(ca, cb, stage)

    def copy_ktile(self, k, stage_off) -> None:
        """Copy the current k-tile of A and B into the stage at byte `stage_off` (u32 register or
        int), step to the next k-tile and close the copies' commit group (cp.async.commit_group)."""
        issue_operand_copy(k, self.a, stage_off)
        issue_operand_copy(k, self.b, stage_off)
        tile_bytes = self.stage.row_bytes
        advance_operand_copy(k, self.a, tile_bytes)
        advance_operand_copy(k, self.b, tile_bytes)
        k.cp_async_commit()
