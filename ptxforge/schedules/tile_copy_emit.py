"""The TileCopy kernel (see `tile_copy`): the cp.async pipeline over the CTA's tiles, with cp.async groups or
mbarriers ordering the stages.  Its instructions name these lines in listings and interpreter reports."""

from __future__ import annotations

from contextlib import contextmanager

from ..builder import KernelBuilder
from ..copy import (emit_copy_commit, emit_copy_wait, emit_mbarrier_init, emit_tile_copy, emit_tile_store,
                    mbarrier_arrival_count)
from .. import fold as F
from ..isa import types as T
from ..isa.operands import Addr

@contextmanager
def _uniform_if(k, cond):
    """Body runs where `cond` holds; the condition is the same for the whole CTA (bra.uni)."""
    end = k.label("uend")
    k.bra(end, pred=~cond, uni=True)
    yield
    k.place(end)


def cta_tile_count(k, n_tiles, cta, ncta):
    """How many of the tiles cta, cta + ncta, ... lie below n_tiles (u32 registers): ceil((n_tiles - cta) /
    ncta), 0 for a CTA past the last tile.  Computed as (n_tiles - cta - 1) / ncta + 1, whose terms stay
    below n_tiles, so any u32 tile count is exact (n_tiles - cta + ncta - 1 wraps past 2**32)."""
    has = k.setp("gt", n_tiles, cta)
    later = k.div(k.sub(k.sub(n_tiles, cta), 1), ncta)  # tiles after the first; garbage where not `has`
    return k.selp(k.add(later, 1), 0, has, type=T.u32)


class TileCopyEmitter:
    """The kernel of one TileCopy (`module()`), emitted here so that its listing names these lines."""

    def __init__(self, tc):
        self.tc = tc
        self.copy_plan, self.store_plan = tc.copy_plan, tc.store_plan
        self.layout = tc.smem_layout

    def module(self):
        """The kernel's Module: parameters, the CTA's walk over its tiles, the pipeline of copies and stores."""
        tc = self.tc
        k = self.k = KernelBuilder(tc.kernel_name, target=tc.target, maxntid=tc.threads)
        k.note("tiles", f"{tc.tile_rows}x{tc.tile_cols} .{tc.dtype}, {tc.stages} stages, {self.layout.describe()}")
        k.note("load", self.copy_plan.describe())
        k.note("store", self.store_plan.describe())
        self.src = k.param_ptr("src")
        self.dst = k.param_ptr("dst")
        self.rows = k.param_value("rows", T.u32)
        self.cols = k.param_value("cols", T.u32)
        self.sstride = k.param_value("src_stride", T.u32)
        self.dstride = k.param_value("dst_stride", T.u32)
        self.tiles_x = k.param_value("tiles_x", T.u32)
        n_tiles = k.param_value("n_tiles", T.u32)
        self.tid = k.tid()
        cta, ncta = k.ctaid(), k.nctaid()
        self.cta, self.ncta = cta, ncta
        with k.section("shared memory"):
            if tc.uses_dynamic_shared:
                sym = k.dynamic_shared("smem", 128)
                self.stage0 = k.shared_base(sym)
                self.mbar0 = k.add(self.stage0, tc.stages * tc.stage_bytes) if tc.mbarrier_bytes else None
            else:
                self.stage0 = k.shared_base(k.shared("stages", tc.stages * tc.stage_bytes, 128))
                self.mbar0 = k.shared_base(k.shared("mbar", tc.mbarrier_bytes, 8)) if tc.mbarrier_bytes else None
        with k.section("tiles of this CTA"):
            self.my = cta_tile_count(k, n_tiles, cta, ncta)
        if tc.completion == "groups":
            self._groups()
        else:
            self._mbarrier()
        return k.module()

    # ------------------------------------------------------------ tiles
    def _tile(self, t):
        """(row0, col0, inside) of tile index t; `inside` holds when no edge of the matrix cuts the tile."""
        k, tc = self.k, self.tc
        ty = k.div(t, self.tiles_x)
        tx = k.sub(t, k.mul(ty, self.tiles_x))
        row0 = k.mul(ty, tc.tile_rows)
        col0 = k.mul(tx, tc.tile_cols)
        in_r = k.setp("le", k.add(row0, tc.tile_rows), self.rows)
        inside = k.setp("le", k.add(col0, tc.tile_cols), self.cols, combine=("and", in_r))
        return row0, col0, inside

    def _stage_addr(self, stage):
        return self.k.mad(stage, self.tc.stage_bytes, self.stage0)

    def _issue(self, t, stage, tid):
        self._whole_or_ragged(t, stage, "dst", emit_tile_copy, self.copy_plan, ("ragged_load", "loaded"),
                              ("load a whole tile", "load a tile cut by the matrix edge (zero-filled)"),
                              src=self.src, src_row_stride=self.sstride, tid=tid)

    def _store(self, t, stage, tid):
        self._whole_or_ragged(t, stage, "src", emit_tile_store, self.store_plan, ("ragged_store", "stored"),
                              ("store a whole tile", "store the part of the tile inside the matrix"),
                              dst=self.dst, dst_row_stride=self.dstride, tid=tid)

    def _whole_or_ragged(self, t, stage, shared_side, emit, plan, labels, sections, **operands):
        """Tile t moved by `emit` between global memory and `stage` (the `shared_side` operand):
        without bounds arithmetic when no matrix edge cuts the tile (the CTA branches uniformly),
        clipped to the matrix otherwise."""
        k = self.k
        row0, col0, inside = self._tile(t)
        operands[shared_side] = self._stage_addr(stage)
        common = dict(row0=row0, col0=col0, layout=self.layout, **operands)
        skip, done = k.label(labels[0]), k.label(labels[1])
        k.bra(skip, pred=~inside, uni=True)
        with k.section(sections[0]):
            emit(k, plan, rows_total=None, cols_total=None, **common)
        k.bra(done, uni=True)
        k.place(skip)
        with k.section(sections[1]):
            emit(k, plan, rows_total=self.rows, cols_total=self.cols, **common)
        k.place(done)

    def _next_stage(self, stage, parity=None):
        """stage = (stage + 1) % stages; flips `parity` when it wraps."""
        k, S = self.k, self.tc.stages
        if S == 1:
            if parity is not None:
                k.xor(parity, 1, dst=parity)
            return
        nxt = k.add(stage, 1)
        wrap = k.setp("eq", nxt, S)
        k.selp(0, nxt, wrap, type=T.u32, dst=stage)
        if parity is not None:
            k.xor(parity, 1, dst=parity, pred=wrap)

    # ------------------------------------------------------------ completion by groups
    def _groups(self):
        k, tc = self.k, self.tc
        S = tc.stages
        # consumers read bytes another warp copied, so the barriers are what makes them visible
        ctid = F.rem(k, k.add(self.tid, 32), tc.threads) if tc.threads > 32 else self.tid
        wstage = k.mov(0, type=T.u32)
        t_w = k.mov(self.cta, type=T.u32)
        back = (S - 1)
        with k.for_range(0, k.add(self.my, S - 1), name="it") as it:
            with k.section("issue the copy of tile it"):
                with _uniform_if(k, k.setp("lt", it, self.my)):
                    self._issue(t_w, wstage, self.tid)
                emit_copy_commit(k, "groups")
            with _uniform_if(k, k.setp("ge", it, back)):
                with k.section(f"tile it-{back} has landed: store it"):
                    emit_copy_wait(k, "groups", pending=back)
                    k.bar_sync(0)
                    rstage = wstage
                    if S > 1:
                        rstage = k.add(wstage, 1)
                        k.selp(0, rstage, k.setp("eq", rstage, S), type=T.u32, dst=rstage)
                    t_r = k.sub(t_w, k.mul(self.ncta, back)) if back else t_w
                    self._store(t_r, rstage, ctid)
                    k.bar_sync(0)
            self._next_stage(wstage)
            k.add(t_w, self.ncta, dst=t_w)
        k.cp_async_wait_all()

    # ------------------------------------------------------------ completion by mbarriers
    def _mbarrier(self):
        k, tc = self.k, self.tc
        S, P = tc.stages, tc.producers
        full0, empty0 = self.mbar0, k.add(self.mbar0, 8 * S)
        with k.section("mbarriers: full (producers arrive) and empty (consumers arrive), one pair per stage"):
            first = k.setp("eq", self.tid, 0)
            for s in range(S):
                emit_mbarrier_init(k, Addr(full0, 8 * s), mbarrier_arrival_count(P), first=first)
                emit_mbarrier_init(k, Addr(empty0, 8 * s), mbarrier_arrival_count(tc.consumers), first=first)
            k.bar_sync(0)
        consumer = k.label("consumer")
        end = k.label("end")
        k.bra(consumer, pred=k.setp("ge", self.tid, P), uni=True)  # whole warps take one side
        with k.section("producer warps"):
            stage = k.mov(0, type=T.u32)
            parity = k.mov(0, type=T.u32)
            t = k.mov(self.cta, type=T.u32)
            with k.for_range(0, self.my, name="i") as i:
                with _uniform_if(k, k.setp("ge", i, S)):
                    # the consumers released this stage's previous tile
                    emit_copy_wait(k, "mbarrier", mbar=k.mad(stage, 8, empty0), phase=k.xor(parity, 1))
                self._issue(t, stage, self.tid)
                emit_copy_commit(k, "mbarrier", mbar=k.mad(stage, 8, full0), method=self.copy_plan.method)
                self._next_stage(stage, parity)
                k.add(t, self.ncta, dst=t)
            k.cp_async_wait_all()
            k.bra(end, uni=True)
        k.place(consumer)
        with k.section("consumer warps"):
            ctid = k.sub(self.tid, P)
            stage = k.mov(0, type=T.u32)
            parity = k.mov(0, type=T.u32)
            t = k.mov(self.cta, type=T.u32)
            with k.for_range(0, self.my, name="i") as i:
                emit_copy_wait(k, "mbarrier", mbar=k.mad(stage, 8, full0), phase=parity)
                self._store(t, stage, ctid)
                k.mbarrier_arrive(k.mad(stage, 8, empty0), state=k.reg(T.b64))
                self._next_stage(stage, parity)
                k.add(t, self.ncta, dst=t)
        k.place(end)
