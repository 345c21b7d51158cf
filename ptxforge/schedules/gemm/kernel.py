"""The GEMM kernel: CTA tile choice, the cp.async software pipeline, and the main loop.

Pipeline (S stages, KT k-tiles, one barrier per k-tile):

    prologue: copy k-tiles 0 .. S-2 into stages 0 .. S-2, one commit group each
    for t in 0 .. KT-1:
        cp.async.wait_group S-2     (k-tile t has landed for this thread)
        bar.sync                    (... for every thread; and every warp is done with stage t-1)
        copy k-tile t+S-1 into stage (t-1) % S, commit (always: an empty group keeps the count)
        compute k-tile t from stage t % S
    cp.async.wait_all                (no copy may still be writing when the CTA exits)
    epilogue

Inside a k-tile the ldmatrix loads of k-step s+1 are issued before the mmas of k-step s.
Copies of k-tiles past the end zero-fill whole stages that are never read.
"""

from __future__ import annotations

from ...builder import KernelBuilder
from ...copy.plan import plan_tile_copy
from ...errors import ValidationError
from ...isa import types as T
from . import emit as E
from .copy import advance_operand_copy, issue_operand_copy, setup_operand_copy
from .epilogue import scale_back, store_tile
from .fragments import (compute_kstep, emit_a_lane_origin, emit_b_lane_origin, load_kstep,
                             plan_a_fragments, plan_b_fragments)


_ELEM = {"s4": T.s4, "u4": T.u4, "s8": T.s8, "u8": T.u8}


def _log2(n: int) -> int:
    return n.bit_length() - 1


def cta_tile(k, s, m, n):
    """(first row of the CTA's C tile, first column) as u32 registers."""
    if s.raster_group == 1:
        pid_n, pid_m = k.ctaid("x"), k.ctaid("y")
    else:
        # groups of `raster_group` tile rows are walked column by column, so CTAs running at the
        # same time share A rows and B columns in L2
        g = s.raster_group
        pid = k.ctaid("x")
        tiles_n = k.shr(k.add(n, s.block_n - 1), _log2(s.block_n)) if _pow2(s.block_n) else \
            k.div(k.add(n, s.block_n - 1), s.block_n)
        tiles_m = k.shr(k.add(m, s.block_m - 1), _log2(s.block_m)) if _pow2(s.block_m) else \
            k.div(k.add(m, s.block_m - 1), s.block_m)
        width = k.mul(tiles_n, g)
        grp = k.div(pid, width)
        first_m = k.mul(grp, g)
        gsz = k.min(k.sub(tiles_m, first_m), g)
        r = k.sub(pid, k.mul(grp, width))
        pid_m = k.add(first_m, k.rem(r, gsz))
        pid_n = k.div(r, gsz)
    return k.mul(pid_m, s.block_m, dst=k.reg(T.u32, "tile_m0")), k.mul(pid_n, s.block_n, dst=k.reg(T.u32, "tile_n0"))


def _pow2(n):
    return n & (n - 1) == 0


def copy_plan(rows, cols, elem, threads, align, layout):
    """The copy planner's choice of width and method for one operand tile.

    The schedule splits the tile into 16-byte chunks per thread itself (gemm.copy), so only the
    width decision is taken from the plan; when narrow widths would exceed the planner's limit
    on unrolled copies per thread, the same decision is asked for with more threads.
    """
    try:
        return plan_tile_copy(rows, cols, elem, threads, src_align_bytes=align, layout=layout)
    except ValidationError:
        return plan_tile_copy(rows, cols, elem, 1024, src_align_bytes=align, layout=layout)


def build_kernel(s):
    """A KernelBuilder holding the whole kernel of schedule `s` (see GemmSchedule.emit)."""
    path = s.compute_path
    nthreads = s.threads
    kw = {"reqntid": nthreads}
    if s.max_registers is not None:
        kw["maxnreg"] = s.max_registers
    k = KernelBuilder(s.kernel_name, target=s.target, **kw)
    k.note("compute path", f"{path.name}: {path.summary}")
    k.note("path chosen because", s.path_reason)
    k.note("tiles", f"CTA {s.block_m}x{s.block_n}x{s.block_k} .{s.operand}, {s.warps_m}x{s.warps_n} warps of "
                    f"{s.warp_m}x{s.warp_n}, {s.stages} stages, {s.smem_layout} shared layout")
    k.note("launch", f"block ({nthreads}, 1, 1), {s.shared_bytes} B dynamic shared memory, "
                     + ("grid (ceil(N/%d), ceil(M/%d), 1)" % (s.block_n, s.block_m) if s.raster_group == 1 else
                        "grid (ceil(M/%d)*ceil(N/%d), 1, 1), raster groups of %d tile rows"
                        % (s.block_m, s.block_n, s.raster_group)))

    with k.section("parameters and thread geometry"):
        a = k.param_ptr("a", _ELEM[s.operand])
        b = k.param_ptr("b", _ELEM[s.operand])
        c = k.param_ptr("c", T.s32)
        m = k.param_value("m", T.u32)
        n = k.param_value("n", T.u32)
        kk = k.param_value("k", T.u32)
        smem = k.dynamic_shared("smem", align=128)
        sbase = k.shared_base(smem)
        tid = k.tid()
        lane = k.and_(tid, 31, dst=k.reg(T.u32, "lane"))
        warp = k.shr(tid, 5, dst=k.reg(T.u32, "warp"))
        wm = k.and_(warp, s.warps_m - 1) if s.warps_m > 1 else 0
        wn = k.shr(warp, _log2(s.warps_m)) if s.warps_m > 1 else warp
        tile_m0, tile_n0 = cta_tile(k, s, m, n)
        row_bytes = k.shr(kk, 1, dst=k.reg(T.u32, "row_bytes")) if s.bits == 4 else kk

    la, lb = s.layouts
    elem = _ELEM[s.operand]
    with k.section("global -> shared copy plan (hoisted)"):
        plan_a = copy_plan(s.block_m, s.block_k, elem, nthreads, s.copy_bytes, la)
        plan_b = copy_plan(s.block_n, s.block_k, elem, nthreads, s.copy_bytes, lb)
        k.note("global -> shared copies", plan_a.reason)
        ca = setup_operand_copy(k, plan_a, la, 0, threads=nthreads, src=a, rows_total=m, tile_row0=tile_m0,
                                row_bytes=row_bytes, tid=tid, smem_base=sbase, name="a")
        # both tiles have the same row length, so each thread's bytes within a row match: one
        # remaining-bytes counter serves both operands
        cb = setup_operand_copy(k, plan_b, lb, la.nbytes, threads=nthreads, src=b, rows_total=n, tile_row0=tile_n0,
                                row_bytes=row_bytes, tid=tid, smem_base=sbase, name="b", krem=ca.krem)

    ks_n = s.ksteps
    mi, npairs = s.warp_m // 16, s.warp_n // 16
    with k.section("ldmatrix addresses (hoisted)"):
        fa = plan_a_fragments(la, 0, nthreads, s.warps_m, s.warp_m, ks_n)
        fb = plan_b_fragments(lb, la.nbytes, nthreads, s.warps_m, s.warp_n, ks_n)
        wm_row = k.mul(wm, s.warp_m) if not isinstance(wm, int) else 0
        wn_row = k.mul(wn, s.warp_n)
        a_bases = fa.emit_bases(k, *emit_a_lane_origin(k, lane, wm_row), sbase, name="sa_ld")
        b_bases = fb.emit_bases(k, *emit_b_lane_origin(k, lane, wn_row), sbase, name="sb_ld")

    with k.section("accumulators"):
        acc = [[k.regs(T.s32, 4, name=f"acc{i}_{j}_") for j in range(2 * npairs)] for i in range(mi)]
        E.zero(k, [r for row in acc for v in row for r in v])
        issue = E.MmaIssuer(k, path.mma_shape, path.mma_type)

    stage_bytes, n_stages = s.stage_bytes, s.stages
    tile_k_bytes = s.row_bytes_k

    def issue_and_advance(stage_off):
        issue_operand_copy(k, ca, stage_off)
        issue_operand_copy(k, cb, stage_off)
        advance_operand_copy(k, ca, tile_k_bytes)
        advance_operand_copy(k, cb, tile_k_bytes, krem_too=cb.krem is not ca.krem)
        k.cp_async_commit()

    with k.section(f"pipeline prologue: k-tiles 0..{n_stages - 2}"):
        for st in range(n_stages - 1):
            issue_and_advance(st * stage_bytes)
        k_tiles = k.shr(k.add(row_bytes, tile_k_bytes - 1), _log2(tile_k_bytes), dst=k.reg(T.u32, "k_tiles"))
        wstage = k.mov((n_stages - 1) * stage_bytes, type=T.u32, dst=k.reg(T.u32, "write_stage"))
        rstage = k.mov(0, type=T.u32, dst=k.reg(T.u32, "read_stage"))

    def next_stage(reg):
        k.add(reg, stage_bytes, dst=reg)
        k.mov(0, type=T.u32, dst=reg, pred=k.setp("eq", reg, n_stages * stage_bytes, type=T.u32))

    with k.section("main loop over k-tiles"):
        with k.for_range(0, k_tiles, name="kt"):
            k.cp_async_wait(n_stages - 2)
            k.bar_sync(0)
            with k.section("copy k-tile kt + stages - 1"):
                issue_and_advance(wstage)
                next_stage(wstage)
            with k.section(f"compute k-tile kt: {ks_n} k-steps of {mi}x{2 * npairs} x "
                           f"{path.mmas_per_kstep} mma.{path.mma_shape}.{path.mma_type}"):
                ra = [k.add(x, rstage) for x in a_bases]
                rb = [k.add(x, rstage) for x in b_bases]
                cur = (load_kstep(k, fa, ra, 0, mi), load_kstep(k, fb, rb, 0, npairs))
                for ks in range(ks_n):
                    nxt = None
                    if ks + 1 < ks_n:
                        nxt = (load_kstep(k, fa, ra, ks + 1, mi), load_kstep(k, fb, rb, ks + 1, npairs))
                    compute_kstep(k, path, cur[0], cur[1], acc, issue)
                    cur = nxt
                next_stage(rstage)
        k.cp_async_wait_all()

    with k.section("epilogue: C = A . B^T, masked at the edges"):
        if path.result_shift:
            scale_back(k, acc, path.result_shift)
        g = k.shr(lane, 2)
        t2 = k.shl(k.and_(lane, 3), 1)
        row0 = k.add(k.add(tile_m0, wm_row) if not isinstance(wm_row, int) else tile_m0, g)
        col0 = k.add(k.add(tile_n0, wn_row), t2)
        store_tile(k, acc, c_ptr=c, m=m, n=n, row0=row0, col0=col0, vector=s.c_vector)
    return k
