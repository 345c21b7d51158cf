"""Split-K for the mma.sync GEMM: K ranges per CTA, and the reduction by the last CTA of each tile.

A skinny problem (M of a decode step: 32 rows) has few C tiles, so ceil(N/block_n) CTAs each
streaming all of K leave most SMs idle.  With `splits` = S > 1 the grid gains a z dimension of
S: CTA z of a tile computes the k-tiles [z*P, min((z+1)*P, KT)) with P = ceil(KT/S), its copies
zero-filling past the end of that range (it never reads another split's bytes).

Reduction, in the same launch (no second kernel, no zeroed C):

    store the partial tile to slice z of the workspace W [S, M, N] (s32, masked like C)
    fence (membar.gl, every thread), bar.sync
    thread 0: old = atom.global.add.u32 [counters + 4*tile], 1   -> shared
    bar.sync; every thread reads old
    if old == S-1 (this CTA arrived last; every other slice is written and fenced):
        thread 0 resets the counter to 0 (the next launch finds it zeroed)
        membar.gl; acc = W[0] + W[1] + ... + W[S-1] (ld.global.cg: L2, never a stale L1 line;
        the slices unrolled, their loads independent)
        the ordinary epilogue stores C

With ``splitk_sync="leader"`` only thread 0 fences: bar.sync, then fence.acq_rel.gpu, the
(relaxed) atom and fence.acq_rel.gpu again (a release and an acquire pattern; the CTA barriers
carry the order to and from the other threads), and the last CTA needs no second membar.gl.

Integer addition is exact and associative, so C is the same on every run whatever order the
CTAs finish in.  The counters must be zero before the first launch (`SplitKWorkspace` allocates
them zeroed); each launch leaves them zero.  One workspace serves launches that are ordered
(one stream); concurrent launches need a workspace each.
"""

from __future__ import annotations

import threading

import numpy as np

from ... import fold as F
from ...isa import types as T
from ...isa.operands import Addr, Vec
from ...isa.memory import ld
from .epilogue import _rows

_PTXFORGE_INTERNAL = True

#: Most splits a schedule may ask for (the z dimension and the reduction's loads stay small).
MAX_SPLITS = 32


def splitk_range(k, s, row_bytes, tile_bytes: int):
    """Emit this CTA's K range; returns (local k-tile count u32, (first byte, bytes) window).

    k_tiles = ceil(row_bytes / tile_bytes), P = ceil(k_tiles / S), first = ctaid.z * P; the
    count is min(P, k_tiles - first) clamped at 0, the window [first*tile_bytes,
    min(row_bytes, (first+P)*tile_bytes)).
    """
    sp = s.splits
    k_tiles = k.shr(k.add(row_bytes, tile_bytes - 1), F.log2(tile_bytes), dst=k.reg(T.u32, "k_tiles_all"))
    per = k.add(k_tiles, sp - 1)
    per = k.shr(per, F.log2(sp)) if F.is_pow2(sp) else k.div(per, sp)
    z = k.ctaid("z")
    first = k.mul(z, per, dst=k.reg(T.u32, "kt_first"))
    left = k.max(k.sub(k_tiles, first, type=T.s32), 0, type=T.s32)
    count = k.min(left, per, type=T.s32, dst=k.reg(T.s32, "kt_count"))
    byte0 = k.shl(first, F.log2(tile_bytes), dst=k.reg(T.u32, "k_byte0"))
    end = k.min(k.add(byte0, k.shl(per, F.log2(tile_bytes))), row_bytes, type=T.u32)
    span = k.max(k.sub(end, byte0, type=T.s32), 0, type=T.s32, dst=k.reg(T.s32, "k_span"))
    return count, (byte0, span)


def _tile_positions(k, acc, *, m, n, row0, col0):
    """(address of C-like [row0, col0] as byte offset u64, eight-row step, row remainder, column
    predicates) shared by the partial store and the reduction loads."""
    nj = len(acc[0])
    rowrem = k.sub(m, row0, type=T.s32)
    colrem = k.sub(n, col0, type=T.s32)
    off = k.shl(k.mul(row0, n, mode="wide"), 2)
    off = k.add(off, k.mul(col0, 4, mode="wide"), dst=off)
    down8 = k.mul(n, 32, mode="wide")
    col_ok = [k.setp("gt", colrem, 8 * j, type=T.s32) for j in range(nj)]
    col_ok1 = [k.setp("gt", colrem, 8 * j + 1, type=T.s32) for j in range(nj)]
    return off, down8, rowrem, col_ok, col_ok1


def _walk(k, acc, base, down8, rowrem, visit):
    """visit(ptr, i, h, j, pair) for every accumulator pair of rows inside the matrix."""
    _rows(k, acc, len(acc), len(acc[0]), base, down8, rowrem, visit)  # the C epilogue's own row walk


def _load_pair(k, ptr, off: int, regs, vector: int, col_ok, col_ok1, j):
    """ld.global.cg of a pair (v2 when `vector` == 2) or of two single values, predicated by column."""
    if vector == 2:
        k.emit(ld(T.b32, Vec(tuple(regs)), Addr(ptr, off), "global", 2, cop="cg"), col_ok[j])
    else:
        k.emit(ld(T.b32, regs[0], Addr(ptr, off), "global", 1, cop="cg"), col_ok[j])
        k.emit(ld(T.b32, regs[1], Addr(ptr, off + 4), "global", 1, cop="cg"), col_ok1[j])


def splitk_epilogue(k, s, acc, out, *, w, counters, tid, finish) -> None:
    """Emit the split-K reduction (see the module docstring), then `finish()` (the C epilogue) in
    the CTA that arrives last.  w, counters: u64 global addresses (kernel parameters)."""
    from .epilogue import store_tile
    sp = s.splits
    z = k.ctaid("z")
    mn4 = k.mul(k.mul(out.m, out.n, mode="wide"), 4)
    slice0 = k.add(w, k.mul(k.cvt(z, T.u64), mn4, type=T.u64))
    with k.section(f"split-K: partial tile to workspace slice ctaid.z of {sp}"):
        store_tile(k, acc, c_ptr=slice0, m=out.m, n=out.n, row0=out.row0, col0=out.col0, vector=s.c_vector)
        if s.splitk_sync == "all":
            k.membar("gl")
        k.bar_sync(0)
    with k.section("split-K: count arrivals at this tile"):
        flag = k.shared("splitk_arrived", 4, align=4)
        tile = k.mad(k.ctaid("y"), k.nctaid("x"), k.ctaid("x"), mode="lo")
        cptr = k.add(counters, k.mul(tile, 4, mode="wide"))
        first = k.setp("eq", tid, 0, type=T.u32)
        old = k.reg(T.u32, "arrived")
        k.mov(0, type=T.u32, dst=old)
        if s.splitk_sync == "leader":
            # release: the CTA barrier orders every thread's partial stores before thread 0's fence
            k.fence("fence.acq_rel.gpu", pred=first)
        k.atom("add", cptr, 1, type=T.u32, dst=old, pred=first)
        if s.splitk_sync == "leader":
            # acquire: the other CTAs' partials are visible to everything thread 0 orders after this
            k.fence("fence.acq_rel.gpu", pred=first)
        k.st(flag, old, type=T.u32, space="shared", pred=first)
        k.bar_sync(0)
        seen = k.ld(flag, type=T.u32, space="shared")
        last = k.setp("eq", seen, sp - 1, type=T.u32)
    with k.if_(last):
        with k.section("split-K: the last CTA of the tile sums every slice in order"):
            k.st(cptr, 0, type=T.u32, pred=first)
            if s.splitk_sync == "all":
                k.membar("gl")
            off, down8, rowrem, col_ok, col_ok1 = _tile_positions(k, acc, m=out.m, n=out.n, row0=out.row0,
                                                                  col0=out.col0)
            base = k.add(w, off)
            vec = s.c_vector
            _walk(k, acc, base, down8, rowrem,
                  lambda ptr, j, pair: _load_pair(k, ptr, 32 * j, pair, vec, col_ok, col_ok1, j))
            # the slices' loads do not depend on each other: unrolled, so they can all be in flight
            for _ in range(1, sp):
                base = k.add(base, mn4)

                def add_pair(ptr, j, pair):
                    # a fresh zeroed pair per load: lanes past N add 0, and the registers live only here
                    t = [k.mov(0, type=T.b32) for _ in range(2)]
                    _load_pair(k, ptr, 32 * j, t, vec, col_ok, col_ok1, j)
                    for ra, rt in zip(pair, t):
                        k.add(ra, rt, type=T.s32, dst=ra)
                _walk(k, acc, base, down8, rowrem, add_pair)
        finish()


class SplitKWorkspace:
    """GPU memory one split-K launch needs: the partial tiles W [splits, M, N] (s32) and one u32
    arrival counter per C tile, allocated zeroed (each launch leaves the counters zero again).

    `args` are the two extra kernel arguments (after a, b, c, m, n, k).  One workspace may be
    reused by launches ordered on one stream, not by launches that can run at the same time.
    """

    def __init__(self, schedule, m: int, n: int):
        from ...runtime.memory import DeviceBuffer
        tiles = -(-m // schedule.block_m) * -(-n // schedule.block_n)
        self.partials = DeviceBuffer.empty((schedule.splits * m * n,), np.int32)
        self.counters = DeviceBuffer.from_host(np.zeros(tiles, np.uint32))
        self.args = (self.partials, self.counters)


_workspaces: dict = {}
_lock = threading.Lock()


def workspace_for(schedule, m: int, n: int, stream: int) -> SplitKWorkspace:
    """A cached `SplitKWorkspace` per (schedule, M, N, stream handle): launches on one stream are
    ordered, so they may share one."""
    key = (schedule.splits, schedule.block_m, schedule.block_n, m, n, stream)
    ws = _workspaces.get(key)
    if ws is None:
        with _lock:
            if len(_workspaces) > 32:
                _workspaces.clear()
            ws = _workspaces[key] = SplitKWorkspace(schedule, m, n)
    return ws


def choose_splits(m: int, n: int, k_tiles: int, block_m: int, block_n: int, sms: int, ctas_per_sm: int = 2,
                  max_splits: int = 16) -> int:
    """Splits so that tiles x splits about fills `ctas_per_sm` waves of the SMs, each split with at
    least four k-tiles (1: no split)."""
    tiles = -(-m // block_m) * -(-n // block_n)
    want = max(1, sms * ctas_per_sm // tiles)
    sp = 1
    while sp * 2 <= min(want, max_splits) and k_tiles // (sp * 2) >= 4:
        sp *= 2
    return sp
