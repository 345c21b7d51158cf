"""Emission of the warp-specialized persistent TMA + wgmma GEMM kernel (see config.HopperGemm).

Kernel parameters: `tmap_a`, `tmap_b` (by-value tensor maps over A [M, K] and B [N, K], boxes
`HopperGemm.load_boxes`, 128-byte swizzle), `c` (C [M, N], dense), `m`, `n`, `k`, `splits`, then
`a_sums`, `b_sums` (biased s4 only), `ws` and `counters` (split_reduce='kernel' only: the in-kernel
split-K reduction's workspace and per-tile counters, see splitk.emit_fixup) and `tmap_c`
(epilogue='tma' only: a 3-D tensor map over C viewed as [splits, M, N] (the 'launch' reduction's
workspace when K is split; [1, M, N] over C with split_reduce='kernel'), box (32, 64, 1), 128-byte
swizzle; `c` is then not read).
Dynamic shared memory: `HopperGemm.smem_bytes` (the base is rounded up to 1024 in the kernel).
With a cluster (`HopperGemm.cluster_size` 2) the work units are pairs of C tiles, walked by
cluster (%clusterid.x, %nclusterid.x); rank r of the pair takes tile 2 x pair + r along M (or N).
Here: the setup, the work units and their tile order, the TMA producer and the consumers that read both
operands from shared memory; the register-sourced s4 consumers and converter warps are `s4_pipeline`'s,
the stores of C `epilogue`'s.
"""

from __future__ import annotations

import functools

from ...errors import emitter_locations
from ...builder import KernelBuilder
from ...hopper.pipeline import ClusterRing, MbarrierRing, WarpSpecialized
from ...isa import types as T
from ...isa.operands import Addr

from ..gemm.dependent import wait_for_previous_kernel
from .convert import CONVERTER_WARPS, emit_s4_widen
from .epilogue import epilogue
from .s4_pipeline import S4Consumer, converter
from .splitk import SplitFixup

_PTXFORGE_INTERNAL = True
_PTXFORGE_EMITTER = True  # its instructions name its lines (errors.emitter_locations)


def _ceil_div(k, a, b: int):
    return k.div(k.add(a, b - 1, type=T.u32), b, type=T.u32)


class Work:
    """The persistent grid's work units: (C tile, K split) pairs, computed once per kernel.

    unit u -> split = u / ntiles, tile = u % ntiles; split s covers k-stages
    [s * kper, min((s + 1) * kper, ktiles)) with kper = ceil(ktiles / splits) (the host passes a
    split count whose every split is non-empty).
    """

    def __init__(self, k, ntiles, ktiles, splits, clustered=False):
        self.k, self.ntiles, self.ktiles, self.splits = k, ntiles, ktiles, splits
        self.clustered = clustered  # units walked per cluster (%clusterid.x) instead of per CTA
        self.units = k.mul(ntiles, splits, type=T.u32, dst=k.reg(T.u32, "units"))
        self.kper = k.div(k.add(ktiles, k.sub(splits, 1, type=T.u32), type=T.u32), splits, type=T.u32,
                          dst=k.reg(T.u32, "kper"))

    def loop(self):
        """with w.loop() as (tile, split, kt0, kt1): the body runs once per unit of this CTA."""
        return _UnitLoop(self)

    def unit(self, u):
        """(tile, split, kt0, kt1) registers of unit `u`: its C tile index, its K split and k-stage range."""
        k = self.k
        split = k.div(u, self.ntiles, type=T.u32)
        tile = k.sub(u, k.mul(split, self.ntiles, type=T.u32), type=T.u32)
        kt0 = k.mul(split, self.kper, type=T.u32)
        kt1 = k.min(k.add(kt0, self.kper, type=T.u32), self.ktiles, type=T.u32)
        return tile, split, kt0, kt1


class _UnitLoop:
    """The context manager of `Work.loop` (a class of the module, not one made per call: a class object is
    part of reference cycles, which would keep the kernel builder alive until the garbage collector ran)."""

    def __init__(self, work):
        self.work = work

    def __enter__(self):
        work = self.work
        k = work.k
        first = k.sreg("clusterid.x") if work.clustered else k.ctaid()
        self.unit = k.mov(first, type=T.u32, dst=k.reg(T.u32, "unit"))
        self.step = k.sreg("nclusterid.x") if work.clustered else k.nctaid()
        self.cm = k.loop("units")
        self.cm.__enter__()
        k.break_(k.setp("ge", self.unit, work.units, type=T.u32))
        return work.unit(self.unit)

    def __exit__(self, *exc):
        if exc[0] is None:
            self.work.k.add(self.unit, self.step, dst=self.unit)
        return self.cm.__exit__(*exc)


def _raster(k, cfg, tile, tiles_m, tiles_n):
    """(tm, tn) of a linear tile index: groups of `raster_group` tile rows walked column by column."""
    g = cfg.raster_group
    per_group = k.mul(tiles_n, g, type=T.u32)
    group = k.div(tile, per_group, type=T.u32)
    first = k.mul(group, g, type=T.u32)
    gsz = k.min(k.sub(tiles_m, first, type=T.u32), g, type=T.u32)
    r = k.sub(tile, k.mul(group, per_group, type=T.u32), type=T.u32)
    tm = k.add(first, k.rem(r, gsz, type=T.u32), type=T.u32)
    tn = k.div(r, gsz, type=T.u32)
    return tm, tn


class Placement:
    """Which C tile (tm, tn) a work unit's tile index names for this CTA.

    Without a cluster: the grouped raster over the tiles_m x tiles_n tiles.  With clusters of two
    along M (N): the raster walks pairs of tiles, ceil(tiles_m / 2) x tiles_n of them (or
    tiles_m x ceil(tiles_n / 2)), and CTA rank r takes tile 2 x pair_m + r (2 x pair_n + r);
    a rank whose tile lies past the edge still loads (zeros), multicasts its half and stores nothing.
    """

    def __init__(self, k, cfg, tiles_m, tiles_n, rank):
        self.k, self.cfg, self.rank = k, cfg, rank
        self.tiles_m = _ceil_div(k, tiles_m, cfg.cluster_m) if cfg.cluster_m > 1 else tiles_m
        self.tiles_n = _ceil_div(k, tiles_n, cfg.cluster_n) if cfg.cluster_n > 1 else tiles_n
        self.units = k.mul(self.tiles_m, self.tiles_n, type=T.u32)

    def __call__(self, tile):
        """(tm, tn) registers of this CTA's C tile in unit tile `tile`."""
        k, cfg = self.k, self.cfg
        tm, tn = _raster(k, cfg, tile, self.tiles_m, self.tiles_n)
        if cfg.cluster_m > 1:
            tm = k.mad(tm, cfg.cluster_m, self.rank, type=T.u32)
        if cfg.cluster_n > 1:
            tn = k.mad(tn, cfg.cluster_n, self.rank, type=T.u32)
        return tm, tn


class Output:
    """Where the epilogue writes: the C pointer, or (epilogue='tma') C's tensor map and the staging buffers;
    `fixup`: the in-kernel split-K reduction the stores wait for (`splitk.SplitFixup`), or None."""

    def __init__(self, c_ptr, tmap_c=None, staging=None):
        self.c_ptr, self.tmap_c, self.staging = c_ptr, tmap_c, staging
        self.fixup = None


def emit_kernel(cfg) -> KernelBuilder:
    """The KernelBuilder of configuration `cfg` (finished by the caller)."""
    extra = dict(reqnctapercluster=cfg.cluster) if cfg.cluster_size > 1 else {}
    k = KernelBuilder(cfg.kernel_name, target="sm_90a", maxntid=cfg.threads, minnctapersm=1, **extra)
    k.note("path", f"sm_90a warp-specialized TMA + wgmma ({cfg.operand})")
    tmap_a = k.param_tensormap("tmap_a")
    tmap_b = k.param_tensormap("tmap_b")
    c_t = T.lookup(cfg.c_type)
    c_ptr = k.param_ptr("c", c_t)
    m = k.param_value("m", T.u32)
    n = k.param_value("n", T.u32)
    kk = k.param_value("k", T.u32)
    splits = k.param_value("splits", T.u32)
    sums = (k.param_ptr("a_sums", T.s32), k.param_ptr("b_sums", T.s32)) if cfg.biased else None
    fused = (k.param_ptr("ws", T.b32), k.param_ptr("counters", T.u32)) if cfg.reduces_in_kernel else None
    tmap_c = k.param_tensormap("tmap_c") if cfg.epilogue == "tma" else None

    smem = k.dynamic_shared("smem", align=1024)
    raw = k.shared_base(smem)
    base = k.and_(k.add(raw, 1023, type=T.u32), 0xFFFFFC00, type=T.b32, dst=k.reg(T.u32, "smem_base"))
    conv_base = k.add(base, cfg.stages * cfg.stage_bytes, type=T.u32, dst=k.reg(T.u32, "conv_base"))
    store_base = k.add(conv_base, cfg.convert_bytes, type=T.u32, dst=k.reg(T.u32, "store_base"))
    red_base = k.add(store_base, cfg.store_bytes, type=T.u32, dst=k.reg(T.u32, "red_base"))
    bars = k.add(red_base, cfg.reduce_bytes, type=T.u32, dst=k.reg(T.u32, "bars"))
    if cfg.reduce_in_buffers:  # the second consumer's widened B buffers
        red_base = k.add(conv_base, cfg.hand_over_stride, type=T.u32, dst=red_base)
    out = Output(c_ptr, tmap_c, store_base if cfg.epilogue == "tma" else None)

    ws = WarpSpecialized(k, cfg.consumers, producer_regs=cfg.producer_regs, consumer_regs=cfg.consumer_regs)
    # arrivals on empty[s]: one lane per consumer warp where only the async proxy reads the stage; on the
    # register-sourced s4 path every thread reads it with ld.shared, so every reader arrives itself
    # (with interleave_k one consumer warpgroup reads each stage)
    rs = cfg.a_in_registers
    readers = 1 if cfg.interleave_k else cfg.consumers
    releasers = (128 * readers + (32 * CONVERTER_WARPS if cfg.converter else 0) if rs
                 else 4 * cfg.consumers + (CONVERTER_WARPS if cfg.converter else 0))
    clustered = cfg.cluster_size > 1
    rank = None
    if clustered:
        rank = k.cluster_ctarank()
        peer_bars = k.mapa(bars, k.xor(rank, 1, type=T.b32))
        # each CTA's multicast fills both CTAs' stage s: empty[s] hears from the consumers of both
        ring = ClusterRing(k, cfg.stages, bars, [peer_bars], producer_arrivals=1,
                           consumer_arrivals=releasers * cfg.cluster_size)
    else:
        ring = MbarrierRing(k, cfg.stages, bars, producer_arrivals=1, consumer_arrivals=releasers)
    t0 = k.setp("eq", ws.tid, 0, type=T.u32)
    hand = None
    if cfg.converter:
        # B-buffer handover: ready[b] (the converter warps arrive), free[b] (every consumer warp arrives)
        ready = k.add(bars, MbarrierRing.nbytes(cfg.stages), type=T.u32, dst=k.reg(T.u32, "bready"))
        free = k.add(ready, 8 * cfg.convert_buffers, type=T.u32, dst=k.reg(T.u32, "bfree"))
        for b in range(cfg.convert_buffers):
            k.mbarrier_init(Addr(ready, 8 * b), 32 * CONVERTER_WARPS, pred=t0)
            k.mbarrier_init(Addr(free, 8 * b), 4 * readers, pred=t0)
        hand = (ready, free)
    ring.init(pred=t0)
    k.prefetch_tensormap(tmap_a, pred=t0)
    k.prefetch_tensormap(tmap_b, pred=t0)
    if tmap_c is not None:
        k.prefetch_tensormap(tmap_c, pred=t0)
    if clustered:
        k.cluster_sync()  # both CTAs' barriers initialized before any multicast or remote arrive
    else:
        k.bar_sync(0)
    tiles_m = _ceil_div(k, m, cfg.block_m)
    tiles_n = _ceil_div(k, n, cfg.block_n)
    place = Placement(k, cfg, tiles_m, tiles_n, rank)
    ktiles = _ceil_div(k, kk, cfg.block_k)
    work = Work(k, place.units, ktiles, splits, clustered=clustered)
    if fused is not None:  # the in-kernel split-K reduction: see splitk.emit_fixup
        tiles_n = k.mul(place.tiles_n, cfg.cluster_n, type=T.u32) if cfg.cluster_n > 1 else place.tiles_n
        out.fixup = SplitFixup(*fused, Addr(bars, cfg.fixup_flag_offset), splits, tiles_n,
                               k.mul(place.units, cfg.cluster_size, type=T.u32) if clustered else place.units,
                               k.sub(ws.tid, 128, type=T.u32), 128 * (1 if cfg.shared_rows else cfg.consumers))
    if cfg.early_prefetch:
        _early_prefetch(k, cfg, tmap_a if cfg.swap_ab else tmap_b, place, work, t0)
    if cfg.pdl:  # nothing above reads or writes global memory; everything below comes after the kernel ahead
        wait_for_previous_kernel(k)

    with ws.producer():
        _producer(k, cfg, ring, ws, work, place, tmap_a, tmap_b, base, rank)
        if cfg.converter:
            conv = k.setp("ge", ws.warp_in_group, 4 - CONVERTER_WARPS, type=T.u32)
            with k.if_(conv):
                converter(k, cfg, ring, ws, base, conv_base, hand, work)

    with ws.consumer() as cidx:
        if cfg.a_in_registers:
            S4Consumer(k, cfg, ring, ws, cidx, base, conv_base, work, hand, sums, kk).emit(out, m, n, place, red_base)
        else:
            _consumer(k, cfg, ring, ws, cidx, base, conv_base, out, m, n, work, place)
    if clustered:
        # no CTA leaves while its peer may still arrive on its empty barriers (or read its multicast)
        k.cluster_sync()
    return k


def _producer(k, cfg, ring, ws, work, place, tmap_a, tmap_b, base, rank):
    """Warp 0 of the producer warpgroup: per k-stage of each work unit, wait for the slot to be empty, expect
    its bytes and issue the TMA loads of A and B (a multicast half each with a cluster), one elected lane;
    with l2_prefetch the weight boxes some stages ahead are asked of the L2 first, with rotate_k each
    unit's stages start at (tile mod count)."""
    la, lb = cfg.load_tiles
    warp0 = k.setp("eq", ws.warp_in_group, 0, type=T.u32)
    with k.if_(warp0):
        lead = k.elect_sync()
        st = ring.producer_state()
        with work.loop() as (tile, split, kt0, kt1):
            tm, tn = place(tile)
            row_a = k.mul(tm, cfg.block_m, type=T.u32)
            row_b = k.mul(tn, cfg.block_n, type=T.u32)
            loads = []  # (tile, map, first row, shared offset, multicast)
            for tile_l, tmap, row, off, mc in ((la, tmap_a, row_a, 0, cfg.multicast[0]),
                                               (lb, tmap_b, row_b, la.nbytes, cfg.multicast[1])):
                if mc:
                    # this rank's half of the rows, at its place in both CTAs' tiles
                    half = tile_l.strided_extent // 2
                    row = k.mad(rank, half, row, type=T.u32)
                    off = (off, k.mul(rank, half * tile_l.span, type=T.u32))
                loads.append((tile_l, tmap, row, off, mc))
            if cfg.rotate_k:  # the unit's stages from (tile mod count), wrapping
                count = k.sub(kt1, kt0, type=T.u32)
                rot = k.sub(k.rem(tile, count, type=T.u32), kt0, type=T.u32)  # kt + rot: 0-based, rotated
            if cfg.l2_prefetch:
                weights = loads[0 if cfg.swap_ab else 1][:3]  # (tile, map, first row)

                def prefetch(j):
                    _prefetch_stage(k, *weights, j, pred=lead)

                first = k.min(k.add(kt0, cfg.l2_prefetch, type=T.u32), kt1, type=T.u32)
                with k.for_range(kt0, first, name="pf") as j:
                    prefetch(j)
            with k.for_range(kt0, kt1, name="kt") as kt:
                if cfg.l2_prefetch:
                    ahead = k.add(kt, cfg.l2_prefetch, type=T.u32)
                    with k.if_(k.setp("lt", ahead, kt1, type=T.u32)):
                        prefetch(ahead)
                ring.acquire(st)
                # every byte of the stage lands here: this CTA's own loads and its peer's multicast half
                ring.expect_tx(st, cfg.stage_bytes, pred=lead)
                sa = k.mad(st.stage, cfg.stage_bytes, base, type=T.u32)
                if cfg.rotate_k:
                    j = k.add(kt, rot, type=T.u32)
                    j = k.selp(k.sub(j, count, type=T.u32), j, k.setp("ge", j, count, type=T.u32), type=T.u32)
                    kx = k.mul(k.add(j, kt0, type=T.u32), la.cols, type=T.u32)
                else:
                    kx = k.mul(kt, la.cols, type=T.u32)
                for tile_l, tmap, row, off, mc in loads:
                    dst_base = k.add(sa, off[1], type=T.u32) if mc else sa
                    const = off[0] if mc else off
                    for i in range(tile_l.tma_copies):
                        soff, coff = tile_l.tma_copy_offset(i)
                        x = k.add(kx, coff, type=T.u32) if coff else kx
                        k.tensor_load(Addr(dst_base, const + soff), tmap, (x, row), ring.full(st),
                                      multicast=0b11 if mc else None, pred=lead)
                st.advance()



def _prefetch_stage(k, tile, tmap, row, j, pred=None):
    """Ask the L2 for the boxes of k-stage `j` of the operand tile whose first row is `row` (a hint)."""
    xj = k.mul(j, tile.cols, type=T.u32)
    for i in range(tile.tma_copies):
        coff = tile.tma_copy_offset(i)[1]
        k.tensor_prefetch(tmap, (k.add(xj, coff, type=T.u32) if coff else xj, row), pred=pred)


def _early_prefetch(k, cfg, tmap, place, work, t0):
    """early_prefetch: thread 0 asks the L2 for the weight boxes (the kernel's B, or A with swap_ab) of the
    first `early_prefetch` k-stages of the CTA's first unit, before griddepcontrol.wait."""
    unit = k.ctaid()
    go = k.and_(t0, k.setp("lt", unit, work.units, type=T.u32), type=T.pred)
    tile_i, _, kt0, kt1 = work.unit(unit)
    tm, tn = place(tile_i)
    tile = cfg.load_tiles[0 if cfg.swap_ab else 1]
    row = k.mul(tm if cfg.swap_ab else tn, tile.strided_extent, type=T.u32)
    end = k.min(kt1, k.add(kt0, cfg.early_prefetch, type=T.u32), type=T.u32)
    with k.if_(go):
        with k.for_range(kt0, end, name="epf") as j:
            _prefetch_stage(k, tile, tmap, row, j)


def _consumer(k, cfg, ring, ws, cidx, base, conv_base, out, m, n, work, place):
    ta, tb = cfg.tiles
    la, lb = cfg.load_tiles
    lane = ws.lane
    lane0 = k.setp("eq", lane, 0, type=T.u32)
    ptrue = k.setp("eq", lane, lane, type=T.u32)
    st = ring.consumer_state()
    tmpl_a, tmpl_b = ta.descriptor_template(), tb.descriptor_template()
    a_hi, b_hi = tmpl_a >> 32, tmpl_b >> 32
    mma_t = T.lookup(cfg.mma_type)
    acc_t = T.s32 if cfg.c_type == "s32" else T.f32
    nsub = cfg.wg_m // 64
    accs = [k.regs(acc_t, cfg.block_n // 2, name=f"acc{i}_") for i in range(nsub)]
    a_row_bytes = k.mul(cidx, cfg.wg_m * 128, type=T.u32)  # this consumer's first A row, in one atom
    prev = k.reg(T.u32, "prev_stage")
    k.mov(0, type=T.u32, dst=prev)
    if cfg.operand == "s4":
        it = k.mov(0, type=T.u32, dst=k.reg(T.u32, "kiter"))  # global k-iteration: picks the s8 buffer
        ctid = k.sub(ws.tid, 128, type=T.u32)
        buf_bytes = ta.nbytes + tb.nbytes

    w = ws.warp_in_group
    g = k.shr(lane, 2, type=T.u32)
    t = k.and_(lane, 3, type=T.b32)

    with work.loop() as (tile, split, kt0, kt1):
        tm, tn = place(tile)
        with k.for_range(kt0, kt1, name="kt") as kt:
            ring.wait_full(st)
            not_first = k.setp("ne", kt, kt0, type=T.u32)
            if cfg.operand == "s4":
                stage_addr = k.mad(st.stage, cfg.stage_bytes, base, type=T.u32)
                buf = k.mad(k.and_(it, 1, type=T.b32), buf_bytes, conv_base, type=T.u32)
                (pa, pb) = cfg.packed_tiles
                emit_s4_widen(k, cfg, stage_addr, buf, ctid, [(pa, ta, 0, 0), (pb, tb, pa.nbytes, ta.nbytes)],
                              widen=cfg.widen)
                k.fence("fence.proxy.async.shared::cta")  # generic writes -> wgmma (async proxy)
                ring.release(st, pred=lane0)  # the packed stage is read: hand it back now
                # the other buffer was read by the previous k-step's wgmmas: all of them must be done
                # before any consumer widens into it next step (the barrier below orders that)
                k.wgmma_wait(0)
                k.bar_sync(1, 128 * cfg.consumers)
                k.add(it, 1, dst=it)
                sa_lo = k.shr(buf, 4, type=T.u32)
            else:
                sa = k.mad(st.stage, cfg.stage_bytes, base, type=T.u32)
                sa_lo = k.shr(sa, 4, type=T.u32)
            a_lo0 = k.add(sa_lo, k.shr(a_row_bytes, 4, type=T.u32), type=T.u32)
            a_lo0 = k.add(a_lo0, tmpl_a & 0xFFFFFFFF, type=T.u32)
            b_lo0 = k.add(sa_lo, (ta.nbytes >> 4) + (tmpl_b & 0xFFFFFFFF), type=T.u32)
            k.wgmma_fence()
            for ks in range(ta.k_slices):
                b_lo = k.add(b_lo0, tb.slice_start(ks) >> 4, type=T.u32)
                b_desc = k.mov([b_lo, b_hi], type=T.b64)
                for mi in range(nsub):
                    a_lo = k.add(a_lo0, (ta.slice_start(ks) + mi * 64 * 128) >> 4, type=T.u32)
                    a_desc = k.mov([a_lo, a_hi], type=T.b64)
                    k.wgmma(a_desc, b_desc, accs[mi], n=cfg.block_n, a_type=mma_t,
                            scale_d=not_first if ks == 0 else ptrue)
            k.wgmma_commit()
            if cfg.operand != "s4":
                # the previous stage's wgmmas are done once at most this one group is pending
                k.wgmma_wait(1)
                rel = k.and_(not_first, lane0, type=T.pred)
                ring.release(prev, pred=rel)
                k.mov(st.stage, type=T.u32, dst=prev)
            st.advance()
        k.wgmma_wait(0)
        if cfg.operand != "s4":
            ring.release(prev, pred=lane0)
        epilogue(k, cfg, accs, out, split, m, n, tm, tn, cidx, w, g, t)


def fresh_module(cfg):
    """The Module of one configuration, emitted anew (what timing the emission measures).  Each instruction
    is located at the schedule's line that asked for it (`emitter_locations`), as the mma.sync schedules' are;
    finding it walks a few frames per instruction, about a fifth of the emission time (s4 default 14 -> 18 ms,
    s8 8 -> 10 ms against one position found per module)."""
    with emitter_locations():
        return emit_kernel(cfg).module()


@functools.lru_cache(maxsize=64)
def module_for(cfg):
    """The Module of one configuration (emitted once per process)."""
    return fresh_module(cfg)
