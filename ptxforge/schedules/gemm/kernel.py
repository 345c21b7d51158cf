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

from ... import fold as F
from ...builder import KernelBuilder
from ...isa import types as T
from .accumulators import AccumulatorTile
from .copy import OperandStaging
from .dependent import prefetch_b_rows, wait_for_previous_kernel
from .emit import MmaIssuer
from .epilogue import GemmOutput, scale_back, store_c
from .fragments import WarpFragments, compute_kstep
from .splitk import splitk_epilogue, splitk_range


_ELEM = {"s4": T.s4, "u4": T.u4, "s8": T.s8, "u8": T.u8}


def cta_tile(k, s, m, n):
    """(first row of the CTA's C tile, first column) as u32 registers."""
    if s.raster_group == 1:
        pid_n, pid_m = k.ctaid("x"), k.ctaid("y")
    else:
        # groups of `raster_group` tile rows are walked column by column, so CTAs running at the
        # same time share A rows and B columns in L2
        g = s.raster_group
        pid = k.ctaid("x")
        tiles_n = k.shr(k.add(n, s.block_n - 1), F.log2(s.block_n)) if F.is_pow2(s.block_n) else \
            k.div(k.add(n, s.block_n - 1), s.block_n)
        tiles_m = k.shr(k.add(m, s.block_m - 1), F.log2(s.block_m)) if F.is_pow2(s.block_m) else \
            k.div(k.add(m, s.block_m - 1), s.block_m)
        width = k.mul(tiles_n, g)
        grp = k.div(pid, width)
        first_m = k.mul(grp, g)
        gsz = k.min(k.sub(tiles_m, first_m), g)
        r = k.sub(pid, k.mul(grp, width))
        pid_m = k.add(first_m, k.rem(r, gsz))
        pid_n = k.div(r, gsz)
    return k.mul(pid_m, s.block_m, dst=k.reg(T.u32, "tile_m0")), k.mul(pid_n, s.block_n, dst=k.reg(T.u32, "tile_n0"))


def build_kernel(s, epilogue=None):
    """A KernelBuilder holding the whole kernel of schedule `s` (see GemmSchedule.emit).

    epilogue: called as `epilogue(k, acc, out)` once the main loop is done and the accumulators
    hold C exactly (the scaled paths' shift applied): k the KernelBuilder, acc the
    `AccumulatorTile`, out a `GemmOutput` (C's address, m, n, the thread's origin in C).  It may
    declare further kernel parameters and emit anything; default `store_c` (C in s32).

    With `s.splits` > 1 the kernel takes two more parameters after k, `w` (s32 workspace
    [splits, M, N]) and `counters` (u32 per C tile, zero before the first launch), computes
    the K range of ctaid.z, and the last CTA of each tile sums the partials before the
    epilogue (``ptxforge.schedules.gemm.splitk``).
    """
    epilogue = store_c if epilogue is None else epilogue
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
        if s.splits > 1:
            w = k.param_ptr("w", T.s32)
            counters = k.param_ptr("counters", T.u32)
        smem = k.dynamic_shared("smem", align=128)
        sbase = k.shared_base(smem)
        tid = k.tid()
        lane = k.and_(tid, 31, dst=k.reg(T.u32, "lane"))
        warp = k.shr(tid, 5, dst=k.reg(T.u32, "warp"))
        wm = k.and_(warp, s.warps_m - 1) if s.warps_m > 1 else 0
        wn = k.shr(warp, F.log2(s.warps_m)) if s.warps_m > 1 else warp
        tile_m0, tile_n0 = cta_tile(k, s, m, n)
        row_bytes = k.shr(kk, 1, dst=k.reg(T.u32, "row_bytes")) if s.bits == 4 else kk

    stage = s.stage_layout
    k_window = None
    if s.splits > 1:
        with k.section(f"split-K: this CTA's k-tiles (ctaid.z of {s.splits} splits)"):
            local_tiles, k_window = splitk_range(k, s, row_bytes, stage.row_bytes)
    if s.pdl_prefetch:
        with k.section(f"before the wait on the previous kernel: L2 prefetch of {s.pdl_prefetch} B of each B row"):
            prefetch_b_rows(k, s, b, n, tile_n0, row_bytes, tid, k_window)
    with k.section("global -> shared copy plan (hoisted)"):
        staging = OperandStaging.setup(k, s, stage, a=a, b=b, m=m, n=n, tile_m0=tile_m0, tile_n0=tile_n0,
                                       row_bytes=row_bytes, tid=tid, smem_base=sbase, elem=_ELEM[s.operand],
                                       k_window=k_window)

    ks_n = s.ksteps
    mi, npairs = s.warp_m // 16, s.warp_n // 16
    with k.section("ldmatrix addresses (hoisted)"):
        wm_row = k.mul(wm, s.warp_m) if F.is_reg(wm) else 0
        wn_row = k.mul(wn, s.warp_n)
        frags = WarpFragments.setup(k, s, stage, lane=lane, wm_row=wm_row, wn_row=wn_row, smem_base=sbase)

    with k.section("accumulators"):
        acc = AccumulatorTile.zeros(k, mi, 2 * npairs)
        issue = MmaIssuer(k, path.mma_shape, path.mma_type)

    stage_bytes, n_stages = stage.stage_bytes, s.stages
    tile_k_bytes = stage.row_bytes

    if s.pdl:
        with k.section("programmatic dependent launch: wait for the kernel ahead, then let the next one start"):
            wait_for_previous_kernel(k)
    with k.section(f"pipeline prologue: k-tiles 0..{n_stages - 2}"):
        for st in range(n_stages - 1):
            staging.copy_ktile(k, stage.stage_offset(st))
        if s.splits > 1:
            k_tiles = local_tiles
        else:
            k_tiles = k.shr(k.add(row_bytes, tile_k_bytes - 1), F.log2(tile_k_bytes), dst=k.reg(T.u32, "k_tiles"))
        wstage = k.mov((n_stages - 1) * stage_bytes, type=T.u32, dst=k.reg(T.u32, "write_stage"))
        rstage = k.mov(0, type=T.u32, dst=k.reg(T.u32, "read_stage"))

    def next_stage(reg):
        k.add(reg, stage_bytes, dst=reg)
        k.mov(0, type=T.u32, dst=reg, pred=k.setp("eq", reg, stage.total_bytes, type=T.u32))

    with k.section("main loop over k-tiles"):
        with k.for_range(0, k_tiles, name="kt", type=T.s32 if s.splits > 1 else T.u32):
            k.cp_async_wait(n_stages - 2)
            k.bar_sync(0)
            with k.section("copy k-tile kt + stages - 1"):
                staging.copy_ktile(k, wstage)
                next_stage(wstage)
            with k.section(f"compute k-tile kt: {ks_n} k-steps of {mi}x{2 * npairs} x "
                           f"{path.mmas_per_kstep} mma.{path.mma_shape}.{path.mma_type}"):
                bases = frags.at_stage(k, rstage)
                cur = frags.load(k, bases, 0)
                for ks in range(ks_n):
                    nxt = frags.load(k, bases, ks + 1) if ks + 1 < ks_n else None
                    compute_kstep(k, path, cur[0], cur[1], acc, issue)
                    cur = nxt
                next_stage(rstage)
        k.cp_async_wait_all()

    with k.section("epilogue: C = A . B^T, masked at the edges"):
        if path.result_shift:
            scale_back(k, acc, path.result_shift)
        g, t2 = AccumulatorTile.emit_lane_origin(k, lane)
        row0 = k.add(F.add(k, tile_m0, wm_row), g)
        col0 = k.add(k.add(tile_n0, wn_row), t2)
        out = GemmOutput(s, c, m, n, row0, col0)
        if s.splits > 1:
            splitk_epilogue(k, s, acc, out, w=w, counters=counters, tid=tid, finish=lambda: epilogue(k, acc, out))
        else:
            epilogue(k, acc, out)
    return k
