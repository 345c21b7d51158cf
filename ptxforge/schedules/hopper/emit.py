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
"""

from __future__ import annotations

import functools

from ...errors import held_location
from ...builder import KernelBuilder
from ...hopper.layout import SmemTile
from ...hopper.pipeline import ClusterRing, MbarrierRing, RingState, WarpSpecialized
from ...isa import types as T
from ...isa.operands import Addr

from ..gemm import emit as GE
from ..gemm.dependent import wait_for_previous_kernel
from .convert import CONVERTER_WARPS, AFragments, emit_s4_widen, s4_widen_steps
from .splitk import SplitFixup, emit_fixup

_PTXFORGE_INTERNAL = True


def _wait(k, addr, parity):
    """try_wait.parity loop on the mbarrier at `addr` (an Addr or register) for phase parity `parity`."""
    top = k.label("hand_wait")
    k.place(top)
    p = k.mbarrier_try_wait(addr, parity)
    k.bra(top, pred=~p)


def _buffer(k, it, nb: int):
    """(index it % nb, use count it / nb) of the widened-B buffer of global k-iteration `it`."""
    if nb & (nb - 1) == 0:
        return k.and_(it, nb - 1, type=T.b32), k.shr(it, nb.bit_length() - 1, type=T.u32)
    return k.rem(it, nb, type=T.u32), k.div(it, nb, type=T.u32)


def _converter(k, cfg, ring, ws, base, conv_base, hand, work):
    """Warps 2-3 of the producer warpgroup: widen each stage's packed B into s8 buffer it % convert_buffers.

    Before the u-th use of buffer b it waits for phase u - 1 of free[b] (every consumer warp's
    wgmmas on it are complete; a fresh barrier passes parity 1), widens, fences the generic writes
    for the async proxy, and arrives on ready[b] and on the stage's empty barrier (every converter
    thread: each one's writes and reads are then ordered before the phases the others wait for).
    """
    ready, free = hand
    pa, pb = cfg.packed_tiles
    _, tb = cfg.tiles
    nthr = cfg.widen_threads
    ctid = k.sub(ws.tid, 128 - nthr, type=T.u32)
    st = ring.consumer_state()
    it = k.mov(0, type=T.u32, dst=k.reg(T.u32, "cv_iter"))
    with work.loop() as (_, _, kt0, kt1):
        with k.for_range(kt0, kt1, name="ckt"):
            ring.wait_full(st)
            b, u = _buffer(k, it, cfg.convert_buffers)
            _wait(k, Addr(k.mad(b, 8, free, type=T.u32)), k.xor(k.and_(u, 1, type=T.b32), 1, type=T.b32))
            stage_addr = k.mad(st.stage, cfg.stage_bytes, base, type=T.u32)
            buf = k.mad(b, tb.nbytes, conv_base, type=T.u32)
            emit_s4_widen(k, cfg, stage_addr, buf, ctid, [(pb, tb, pa.nbytes, 0)], nthreads=nthr, widen=cfg.widen)
            k.fence("fence.proxy.async.shared::cta")
            # every writer arrives itself: its writes are ordered before the phase the consumers wait for
            k.mbarrier_arrive(Addr(k.mad(b, 8, ready, type=T.u32)), state="_")
            ring.release(st)
            k.add(it, 1, dst=it)
            st.advance()


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


def _unit_c(k, c_ptr, split, m, n, elem_bytes: int):
    """C (or this split's slice of the split-K workspace): c + split * M * N * elem_bytes."""
    mn = k.mul(m, n, type=T.u32, mode="wide")
    off = k.mul(k.mul(mn, elem_bytes, type=T.u64), k.cvt(split, T.u64, frm=T.u32), type=T.u64)
    return k.add(c_ptr, off, type=T.u64)


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
    la, lb = cfg.load_tiles
    ta, tb = cfg.tiles
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
    rs = cfg.operand == "s4" and cfg.a_registers
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

        if cfg.converter:
            conv = k.setp("ge", ws.warp_in_group, 4 - CONVERTER_WARPS, type=T.u32)
            with k.if_(conv):
                _converter(k, cfg, ring, ws, base, conv_base, hand, work)

    with ws.consumer() as cidx:
        if cfg.operand == "s4" and cfg.a_registers:
            _consumer_s4_rs(k, cfg, ring, ws, cidx, base, conv_base, out, m, n, work, place, hand, sums, kk,
                            red_base)
        else:
            _consumer(k, cfg, ring, ws, cidx, base, conv_base, out, m, n, work, place)
    if clustered:
        # no CTA leaves while its peer may still arrive on its empty barriers (or read its multicast)
        k.cluster_sync()
    return k


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
        _epilogue(k, cfg, accs, out, split, m, n, tm, tn, cidx, w, g, t)


def _consumer_s4_rs(k, cfg, ring, ws, cidx, base, conv_base, out, m, n, work, place, hand=None, sums=None,
                    kk=None, red_base=None):
    """s4 consumers: A widened into registers, B widened into shared s8 tiles (by the consumers, or by the
    converter warps when `hand` holds their ready/free barriers), pipelined so that widening overlaps
    the tensor cores.

    Each stage's k-steps are issued in groups of `a_group` (an even count of groups), A of the
    groups in two register sets by turns: the wgmmas of one group run while the next group's A is
    widened (`wgmma.wait_group 1` before a set is rewritten: only the group that does not read it
    may be in flight, so ptxas keeps the wgmmas asynchronous).  Per stage of this warpgroup:

        for each group j: issue G_j; wait(1)  [G_j-1 done; at j = 0 the previous stage's last group:
                                               with the converter its B buffer is free -> free[]]
                          widen A of G_j+1
        (after the last group) release the packed stage
        next stage (not after the unit's last): wait full;
          consumers widen B: barrier (nobody reads the buffer two stages back), widen B, fence.proxy
          wait(1) [the second-last group done]; widen A G_0 of the next stage; converter: wait ready[]
          / consumers: barrier

    The unit's last stage is the same body without the look-ahead (emitted once more, after the
    loop).  The consumers split the tile's rows, or with interleave_k its k-stages: consumer c takes
    the unit's stages whose index in the CTA's global stage count is c modulo the consumers (with a ring
    of a multiple of them, every slot then serves one consumer in every unit, whatever the units' stage
    counts), widens its own B into its own buffers under its own named barrier, and the others add their
    accumulators into the first's through shared memory before the first stores C.

    The last stage is peeled rather than the loop rotated (preparing at the top of the loop) because
    ptxas keeps the groups asynchronous only while at most one of them crosses the loop's back edge:
    a loop that ended with two groups in flight was serialized without a warning (every
    `WARPGROUP.DEPBAR.LE gsb0` became 0x0; tests/test_hopper_skinny.py checks the SASS).
    """
    ta, tb = cfg.tiles
    pa, pb = cfg.packed_tiles
    lane = ws.lane
    lane0 = k.setp("eq", lane, 0, type=T.u32)
    ptrue = k.setp("eq", lane, lane, type=T.u32)
    il = cfg.interleave_k
    tmpl_b = tb.descriptor_template()
    b_hi = tmpl_b >> 32
    nsub = cfg.wg_m // 64
    accs = [k.regs(T.s32, cfg.block_n // 2, name=f"acc{i}_") for i in range(nsub)]
    # acc_sets=2: the odd k-steps accumulate into a second set, added into the first at the end of a unit
    sets = [accs] + [[k.regs(T.s32, cfg.block_n // 2, name=f"acc{i}b_") for i in range(nsub)]
                     for _ in range(cfg.acc_sets - 1)]
    w = ws.warp_in_group
    g = k.shr(lane, 2, type=T.u32)
    t = k.and_(lane, 3, type=T.b32)
    ss = cfg.split_stage
    rows_c = k.mov(0, type=T.u32, dst=k.reg(T.u32, "rows_c")) if cfg.shared_rows else cidx  # whose rows of the tile
    # split_stage: consumer c reads half c of every stage: its A from there, its B widened from there into
    # half c of the buffer (the halves are whole atoms, so the half is laid out as a tile of half the columns)
    a_shift = b_shift = None
    b_parts = [(pb, tb, pa.nbytes, 0)]  # what a B widening reads and writes
    if ss:
        a_shift = k.mul(cidx, pa.nbytes // 2, type=T.u32, dst=k.reg(T.u32, "a_half"))
        b_shift = k.mul(cidx, pb.nbytes // 2, type=T.u32, dst=k.reg(T.u32, "b_half"))
        b_parts = [(SmemTile("u8", pb.rows, pb.cols // 2), SmemTile(tb.dtype, tb.rows, tb.cols // 2), pa.nbytes, 0)]
    frags = AFragments(k, cfg, rows_c, w, g, t, widen=cfg.widen, shift=a_shift)
    op_t = T.u8 if cfg.biased else T.s8
    bias = None
    if cfg.biased:
        # 128 K - 64 Kpad: what the biased products add beyond 8 (rowsum A + colsum B)
        kpad = k.mul(work.ktiles, cfg.block_k, type=T.u32)
        kc = k.sub(k.shl(kk, 7, type=T.b32), k.shl(kpad, 6, type=T.b32), type=T.u32, dst=k.reg(T.u32, "kconst"))
        bias = (sums[0], sums[1], kc)
    if cfg.shared_rows:  # each warpgroup widens its own B (its stages, or its half of each) under its own barrier
        ctid = k.sub(ws.tid, k.mad(cidx, 128, 128, type=T.u32), type=T.u32)  # thread in this warpgroup
        nthr, bar_id = 128, k.add(cidx, 4, type=T.u32, dst=k.reg(T.u32, "widen_bar"))
    else:
        ctid = k.sub(ws.tid, 128, type=T.u32)
        nthr, bar_id = 128 * cfg.consumers, 1
    if il:
        own = k.mul(cidx, cfg.convert_buffers * tb.nbytes, type=T.u32)
        conv_mine = conv_base if hand else k.add(conv_base, own, type=T.u32, dst=k.reg(T.u32, "conv_mine"))
        gs = k.reg(T.u32, "gstage")  # the CTA's global index of this warpgroup's current stage
        st = RingState(k, k.reg(T.u32, "cons_stage"), k.reg(T.u32, "cons_phase"), cfg.stages)
        unit_base = k.mov(0, type=T.u32, dst=k.reg(T.u32, "unit_base"))
        wit = k.mov(0, type=T.u32, dst=k.reg(T.u32, "wstage"))  # this warpgroup's stages: its B buffers

        def seek():
            k.rem(gs, cfg.stages, type=T.u32, dst=st.stage)
            k.and_(k.div(gs, cfg.stages, type=T.u32), 1, type=T.b32, dst=st.phase)

        def step():
            k.add(gs, cfg.consumers, dst=gs)
            k.add(wit, 1, dst=wit)
            seek()
        stage_it, buf_it = gs, wit
    else:
        # split_stage: this warpgroup's half of every buffer
        conv_mine = (k.mad(cidx, tb.nbytes // 2, conv_base, type=T.u32, dst=k.reg(T.u32, "conv_mine")) if ss
                     else conv_base)
        st = ring.consumer_state()
        it = k.mov(0, type=T.u32, dst=k.reg(T.u32, "kiter"))  # global k-iteration: picks the B buffer

        def step():
            k.add(it, 1, dst=it)
            st.advance()
        stage_it = buf_it = it
    nb = cfg.convert_buffers
    gs_ = cfg.a_group
    nks = tb.k_slices // (2 if ss else 1)  # the k-steps this warpgroup issues per stage
    groups = [range(j, j + gs_) for j in range(0, nks, gs_)]  # an even count (checked by the config)

    def b_src(sa):
        """The stage address the B widening reads from (split_stage: moved to this warpgroup's half)."""
        return k.add(sa, b_shift, type=T.u32) if ss else sa
    regs = [[frags.registers(gs_, f"a{h}{mi}_") for mi in range(nsub)] for h in range(2)]

    def stage_addr():
        return k.mad(st.stage, cfg.stage_bytes, base, type=T.u32)

    def buffer(at):
        """(index, use count, address) of the widened B buffer of stage counter `at`."""
        b, u = _buffer(k, at, nb)
        return b, u, k.mad(b, tb.nbytes, conv_mine, type=T.u32)

    def current():
        return buffer(stage_it if hand else buf_it)

    def previous():
        at = stage_it if hand else buf_it
        return _buffer(k, k.sub(at, cfg.consumers if hand and il else 1, type=T.u32), nb)[0]

    def widen_a(sa, j):
        """Group j of the stage's A into register set j % 2."""
        for mi in range(nsub):
            frags.load(sa, mi, groups[j], dst=regs[j % 2][mi])

    def issue(buf, j, not_first):
        """Group j of the stage's register-A wgmmas against the widened B tile at `buf`, fenced and committed."""
        b_lo0 = k.add(k.shr(buf, 4, type=T.u32), tmpl_b & 0xFFFFFFFF, type=T.u32)
        k.wgmma_fence()
        for i, ks in enumerate(groups[j]):
            b_lo = k.add(b_lo0, tb.slice_start(ks) >> 4, type=T.u32)
            b_desc = k.mov([b_lo, b_hi], type=T.b64)
            for mi in range(nsub):
                k.wgmma(regs[j % 2][mi][i], b_desc, sets[ks % len(sets)][mi], n=cfg.block_n, a_type=op_t,
                        scale_d=not_first if ks < len(sets) else ptrue)
        k.wgmma_commit()

    def prepare(sa, first: bool):
        """The stage is full: its B widened (or ready) and its first half of A in registers."""
        b, u, buf = current()
        if hand:
            if not first:
                k.wgmma_wait(1)
            widen_a(sa, 0)
            _wait(k, Addr(k.mad(b, 8, hand[0], type=T.u32)), k.and_(u, 1, type=T.b32))
            return
        if nb == 1 and not first:  # the one buffer: the stage before must be done reading it
            k.wgmma_wait(0)
        if nb <= 2:  # every widener is past the wait that retired its reads of this buffer (one or two stages back)
            k.bar_sync(bar_id, nthr)
        # (with 3 or more buffers the barrier that ended the previous stage's prepare suffices: whoever
        # passed it had waited with wait_group 1 after issuing the stage before, so every wgmma that read
        # this buffer, three or more stages back, has retired)
        emit_s4_widen(k, cfg, b_src(sa), buf, ctid, b_parts, nthreads=nthr, widen=cfg.widen)
        k.fence("fence.proxy.async.shared::cta")  # generic writes of B -> wgmma (async proxy)
        if not first and nb > 1:
            k.wgmma_wait(1)
        widen_a(sa, 0)
        k.bar_sync(bar_id, nthr)  # B complete before anyone's wgmmas read it

    def body(not_first, final: bool):
        sa = stage_addr()
        _, _, buf = current()
        for j in range(len(groups)):
            issue(buf, j, not_first if j == 0 else ptrue)
            if j + 1 == len(groups):
                break
            k.wgmma_wait(1)  # only group j in flight: the register set of group j + 1 is free
            if hand and j == 0:  # the previous stage's wgmmas are complete: its B buffer is free
                k.mbarrier_arrive(Addr(k.mad(previous(), 8, hand[1], type=T.u32)), state="_",
                                  pred=k.and_(not_first, lane0, type=T.pred))
            widen_a(sa, j + 1)
        ring.release(st)  # every reader of the packed stage (A here, B before or by the converter) arrives
        step()
        if not final:
            ring.wait_full(st)
            prepare(stage_addr(), first=False)

    def body_ahead(not_first):
        """widen_ahead: a stage that has a next one.  Once the next stage has landed and every consumer's
        wait after this stage's first group has retired the stage before (the last reader of the buffer
        the next B goes to), the next stage's B is widened a chunk after each group is issued; then the
        next stage's first A, and one barrier before anyone's wgmmas read the new B."""
        sa = stage_addr()
        _, _, buf = current()
        slots = len(groups) - 1
        per = []
        for j in range(len(groups)):
            issue(buf, j, not_first if j == 0 else ptrue)
            if j + 1 == len(groups):
                break
            k.wgmma_wait(1)  # only group j in flight
            if j == 0:
                nxt = st.following()
                ring.wait_full(nxt)
                k.bar_sync(bar_id, nthr)  # every consumer's wgmmas of the stage before have retired
                nbuf = buffer(k.add(buf_it, 1, type=T.u32))[2]
                chunks = s4_widen_steps(k, cfg, b_src(k.mad(nxt.stage, cfg.stage_bytes, base, type=T.u32)), nbuf,
                                        ctid, b_parts, nthreads=nthr, widen=cfg.widen)
                per = [chunks[i * len(chunks) // slots:(i + 1) * len(chunks) // slots] for i in range(slots)]
            widen_a(sa, j + 1)
            for chunk in per[j]:
                chunk()
        k.fence("fence.proxy.async.shared::cta")  # generic writes of the next B -> wgmma (async proxy)
        ring.release(st)
        step()
        k.wgmma_wait(1)  # the second-last group retired: its register set is free
        widen_a(stage_addr(), 0)
        k.bar_sync(bar_id, nthr)  # the next B complete everywhere before its wgmmas

    def pipeline(count):
        """This warpgroup's `count` (>= 1) stages of the unit, then every wgmma retired."""
        ring.wait_full(st)
        prepare(stage_addr(), first=True)
        last = k.sub(count, 1, type=T.u32)
        with k.for_range(0, last, name="kt") as j:
            if cfg.widen_ahead:
                body_ahead(k.setp("ne", j, 0, type=T.u32))
            else:
                body(k.setp("ne", j, 0, type=T.u32), final=False)
        body(k.setp("ne", last, 0, type=T.u32), final=True)
        k.wgmma_wait(0)
        for other in sets[1:]:
            for acc, more in zip(accs, other):
                for r, x in zip(acc, more):
                    k.add(r, x, type=T.s32, dst=r)
        if hand:  # the buffer of the warpgroup's last stage
            k.mbarrier_arrive(Addr(k.mad(previous(), 8, hand[1], type=T.u32)), state="_", pred=lane0)

    with work.loop() as (tile, split, kt0, kt1):
        tm, tn = place(tile)
        count = k.sub(kt1, kt0, type=T.u32)
        first_split = k.setp("eq", split, 0, type=T.u32) if bias else None
        if not il:
            pipeline(count)
        else:
            # consumer c runs the unit's stages whose global index is c modulo the consumers (the first of them
            # at unit_base + ((c - unit_base) mod consumers)), so with a ring of a multiple of the consumers each
            # slot serves one consumer in every unit, whatever the units' stage counts; the sums meet in
            # consumer 0, which stores C
            nc = cfg.consumers
            if nc == 2:  # the same values by parity (the form of the two-consumer kernels measured)
                off = k.and_(k.xor(unit_base, cidx, type=T.b32), 1, type=T.b32)
            else:
                off = k.rem(k.sub(k.add(cidx, nc, type=T.u32), k.rem(unit_base, nc, type=T.u32), type=T.u32), nc,
                            type=T.u32)
            k.add(unit_base, off, dst=gs)
            seek()
            ahead = k.sub(k.add(count, nc - 1, type=T.u32), off, type=T.u32)  # ceil((count - off) / nc) stages
            mine = k.shr(ahead, 1, type=T.u32) if nc == 2 else k.div(ahead, nc, type=T.u32)
            with k.if_(k.setp("ne", mine, 0, type=T.u32)):
                pipeline(mine)
            with k.else_():  # a unit of fewer stages than consumers leaves this one nothing to add
                for acc in accs:
                    for r in acc:
                        k.mov(0, type=T.s32, dst=r)
            k.add(unit_base, count, dst=unit_base)
        # split-K: the correction of the biased path is added once, by split 0
        if not cfg.shared_rows:
            _epilogue(k, cfg, accs, out, split, m, n, tm, tn, cidx, w, g, t, bias, first_split=first_split)
        else:
            _reduce_consumers(k, cfg, accs, red_base, cidx, ctid)  # the sums meet in consumer 0, which stores C
            with k.if_(k.setp("eq", cidx, 0, type=T.u32)):
                _epilogue(k, cfg, accs, out, split, m, n, tm, tn, rows_c, w, g, t, bias, first_split=first_split)


def _reduce_consumers(k, cfg, accs, red_base, cidx, ctid):
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


def _epilogue(k, cfg, accs, out, split, m, n, tm, tn, cidx, w, g, t, bias=None, first_split=None):
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


def fresh_module(cfg):
    """The Module of one configuration, emitted anew (what timing the emission measures).  Every frame of
    the emitter is internal, so each instruction's position is the caller's line: found once
    (`held_location`), not per instruction."""
    with held_location():
        return emit_kernel(cfg).module()


@functools.lru_cache(maxsize=64)
def module_for(cfg):
    """The Module of one configuration (emitted once per process)."""
    return fresh_module(cfg)
