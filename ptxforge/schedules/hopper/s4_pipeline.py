"""The register-sourced s4 path of the Hopper GEMM kernel (`a_registers`): A widened from packed nibbles into
registers and fed to wgmma from there, B widened into shared s8 tiles, pipelined so that the widening overlaps
the tensor cores.

`converter` emits the producer warpgroup's converter warps (B widened there, handed over through ready/free
barriers); `S4Consumer` emits a consumer warpgroup: its widening, its groups of wgmmas, its stages and the
unit loop, then the epilogue.  The instructions of the widening itself are `convert`'s.
"""

from __future__ import annotations

from ...hopper.layout import SmemTile
from ...hopper.pipeline import RingState
from ...isa import types as T
from ...isa.operands import Addr

from .convert import AFragments, emit_s4_widen, s4_widen_steps
from .epilogue import epilogue, reduce_consumers

_PTXFORGE_INTERNAL = True
_PTXFORGE_EMITTER = True  # its instructions name its lines (errors.emitter_locations)


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


def converter(k, cfg, ring, ws, base, conv_base, hand, work):
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


class S4Consumer:
    """The s4 consumer warpgroups: A widened into registers, B widened into shared s8 tiles (by the consumers,
    or by the converter warps when `hand` holds their ready/free barriers), pipelined so that widening
    overlaps the tensor cores.  Made inside the consumer branch (its registers are set up there);
    `emit(out, m, n, place, red_base)` emits the unit loop and the epilogue.

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

    def __init__(self, k, cfg, ring, ws, cidx, base, conv_base, work, hand=None, sums=None, kk=None):
        self.k, self.cfg, self.ring, self.cidx, self.base, self.work, self.hand = k, cfg, ring, cidx, base, work, hand
        ta, tb = cfg.tiles
        pa, pb = cfg.packed_tiles
        self.tb = tb
        lane = ws.lane
        self.lane0 = k.setp("eq", lane, 0, type=T.u32)
        self.ptrue = k.setp("eq", lane, lane, type=T.u32)
        self.il = il = cfg.interleave_k
        tmpl_b = tb.descriptor_template()
        self.b_lo_template, self.b_hi = tmpl_b & 0xFFFFFFFF, tmpl_b >> 32
        self.nsub = nsub = cfg.wg_m // 64
        self.accs = [k.regs(T.s32, cfg.block_n // 2, name=f"acc{i}_") for i in range(nsub)]
        # acc_sets=2: the odd k-steps accumulate into a second set, added into the first at the end of a unit
        self.sets = [self.accs] + [[k.regs(T.s32, cfg.block_n // 2, name=f"acc{i}b_") for i in range(nsub)]
                                   for _ in range(cfg.acc_sets - 1)]
        self.w = ws.warp_in_group
        self.g = k.shr(lane, 2, type=T.u32)
        self.t = k.and_(lane, 3, type=T.b32)
        self.ss = ss = cfg.split_stage
        # whose rows of the tile
        self.rows_c = k.mov(0, type=T.u32, dst=k.reg(T.u32, "rows_c")) if cfg.shared_rows else cidx
        # split_stage: consumer c reads half c of every stage: its A from there, its B widened from there into
        # half c of the buffer (the halves are whole atoms, so the half is laid out as a tile of half the columns)
        a_shift = self.b_shift = None
        self.b_parts = [(pb, tb, pa.nbytes, 0)]  # what a B widening reads and writes
        if ss:
            a_shift = k.mul(cidx, pa.nbytes // 2, type=T.u32, dst=k.reg(T.u32, "a_half"))
            self.b_shift = k.mul(cidx, pb.nbytes // 2, type=T.u32, dst=k.reg(T.u32, "b_half"))
            self.b_parts = [(SmemTile("u8", pb.rows, pb.cols // 2), SmemTile(tb.dtype, tb.rows, tb.cols // 2),
                             pa.nbytes, 0)]
        self.frags = AFragments(k, cfg, self.rows_c, self.w, self.g, self.t, widen=cfg.widen, shift=a_shift)
        self.op_t = T.u8 if cfg.biased else T.s8
        self.bias = None
        if cfg.biased:
            # 128 K - 64 Kpad: what the biased products add beyond 8 (rowsum A + colsum B)
            kpad = k.mul(work.ktiles, cfg.block_k, type=T.u32)
            kc = k.sub(k.shl(kk, 7, type=T.b32), k.shl(kpad, 6, type=T.b32), type=T.u32, dst=k.reg(T.u32, "kconst"))
            self.bias = (sums[0], sums[1], kc)
        if cfg.shared_rows:  # each warpgroup widens its own B (its stages, or its half of each) under its own barrier
            self.ctid = k.sub(ws.tid, k.mad(cidx, 128, 128, type=T.u32), type=T.u32)  # thread in this warpgroup
            self.nthr, self.bar_id = 128, k.add(cidx, 4, type=T.u32, dst=k.reg(T.u32, "widen_bar"))
        else:
            self.ctid = k.sub(ws.tid, 128, type=T.u32)
            self.nthr, self.bar_id = 128 * cfg.consumers, 1
        if il:
            own = k.mul(cidx, cfg.convert_buffers * tb.nbytes, type=T.u32)
            self.conv_mine = conv_base if hand else k.add(conv_base, own, type=T.u32, dst=k.reg(T.u32, "conv_mine"))
            self.gs = k.reg(T.u32, "gstage")  # the CTA's global index of this warpgroup's current stage
            self.st = RingState(k, k.reg(T.u32, "cons_stage"), k.reg(T.u32, "cons_phase"), cfg.stages)
            self.unit_base = k.mov(0, type=T.u32, dst=k.reg(T.u32, "unit_base"))
            self.wit = k.mov(0, type=T.u32, dst=k.reg(T.u32, "wstage"))  # this warpgroup's stages: its B buffers
            self.stage_it, self.buf_it = self.gs, self.wit
        else:
            # split_stage: this warpgroup's half of every buffer
            self.conv_mine = (k.mad(cidx, tb.nbytes // 2, conv_base, type=T.u32, dst=k.reg(T.u32, "conv_mine"))
                              if ss else conv_base)
            self.st = ring.consumer_state()
            it = k.mov(0, type=T.u32, dst=k.reg(T.u32, "kiter"))  # global k-iteration: picks the B buffer
            self.stage_it = self.buf_it = it
        self.nb = cfg.convert_buffers
        a_group = cfg.a_group
        nks = tb.k_slices // (2 if ss else 1)  # the k-steps this warpgroup issues per stage
        self.groups = [range(j, j + a_group) for j in range(0, nks, a_group)]  # an even count (checked by the config)
        self.regs = [[self.frags.registers(a_group, f"a{h}{mi}_") for mi in range(nsub)] for h in range(2)]

    # ------------------------------------------------------------ stage counters and buffers
    def _seek(self):
        """interleave_k: the ring slot and phase of global stage `gs`."""
        k, st, stages = self.k, self.st, self.cfg.stages
        k.rem(self.gs, stages, type=T.u32, dst=st.stage)
        k.and_(k.div(self.gs, stages, type=T.u32), 1, type=T.b32, dst=st.phase)

    def _step(self):
        """On to this warpgroup's next stage."""
        k = self.k
        if self.il:
            k.add(self.gs, self.cfg.consumers, dst=self.gs)
            k.add(self.wit, 1, dst=self.wit)
            self._seek()
        else:
            k.add(self.stage_it, 1, dst=self.stage_it)
            self.st.advance()

    def _b_src(self, sa):
        """The stage address the B widening reads from (split_stage: moved to this warpgroup's half)."""
        return self.k.add(sa, self.b_shift, type=T.u32) if self.ss else sa

    def _stage_addr(self):
        return self.k.mad(self.st.stage, self.cfg.stage_bytes, self.base, type=T.u32)

    def _buffer(self, at):
        """(index, use count, address) of the widened B buffer of stage counter `at`."""
        b, u = _buffer(self.k, at, self.nb)
        return b, u, self.k.mad(b, self.tb.nbytes, self.conv_mine, type=T.u32)

    def _current(self):
        return self._buffer(self.stage_it if self.hand else self.buf_it)

    def _previous(self):
        k = self.k
        at = self.stage_it if self.hand else self.buf_it
        return _buffer(k, k.sub(at, self.cfg.consumers if self.hand and self.il else 1, type=T.u32), self.nb)[0]

    # ------------------------------------------------------------ widening and issuing
    def _widen_a(self, sa, j):
        """Group j of the stage's A into register set j % 2."""
        for mi in range(self.nsub):
            self.frags.load(sa, mi, self.groups[j], dst=self.regs[j % 2][mi])

    def _issue(self, buf, j, not_first):
        """Group j of the stage's register-A wgmmas against the widened B tile at `buf`, fenced and committed."""
        k, cfg, tb, sets = self.k, self.cfg, self.tb, self.sets
        b_lo0 = k.add(k.shr(buf, 4, type=T.u32), self.b_lo_template, type=T.u32)
        k.wgmma_fence()
        for i, ks in enumerate(self.groups[j]):
            b_lo = k.add(b_lo0, tb.slice_start(ks) >> 4, type=T.u32)
            b_desc = k.mov([b_lo, self.b_hi], type=T.b64)
            for mi in range(self.nsub):
                k.wgmma(self.regs[j % 2][mi][i], b_desc, sets[ks % len(sets)][mi], n=cfg.block_n, a_type=self.op_t,
                        scale_d=not_first if ks < len(sets) else self.ptrue)
        k.wgmma_commit()

    def _free_previous(self, not_first=None):
        """Converter: the previous stage's B buffer is free (its wgmmas are complete); lane 0 of each warp
        arrives (and with `not_first` only where it holds)."""
        k = self.k
        addr = Addr(k.mad(self._previous(), 8, self.hand[1], type=T.u32))
        pred = self.lane0 if not_first is None else k.and_(not_first, self.lane0, type=T.pred)
        k.mbarrier_arrive(addr, state="_", pred=pred)

    def _prepare(self, sa, first: bool):
        """The stage is full: its B widened (or ready) and its first half of A in registers."""
        k, cfg, nb = self.k, self.cfg, self.nb
        b, u, buf = self._current()
        if self.hand:
            if not first:
                k.wgmma_wait(1)
            self._widen_a(sa, 0)
            _wait(k, Addr(k.mad(b, 8, self.hand[0], type=T.u32)), k.and_(u, 1, type=T.b32))
            return
        if nb == 1 and not first:  # the one buffer: the stage before must be done reading it
            k.wgmma_wait(0)
        if nb <= 2:  # every widener is past the wait that retired its reads of this buffer (one or two stages back)
            k.bar_sync(self.bar_id, self.nthr)
        # (with 3 or more buffers the barrier that ended the previous stage's prepare suffices: whoever
        # passed it had waited with wait_group 1 after issuing the stage before, so every wgmma that read
        # this buffer, three or more stages back, has retired)
        emit_s4_widen(k, cfg, self._b_src(sa), buf, self.ctid, self.b_parts, nthreads=self.nthr, widen=cfg.widen)
        k.fence("fence.proxy.async.shared::cta")  # generic writes of B -> wgmma (async proxy)
        if not first and nb > 1:
            k.wgmma_wait(1)
        self._widen_a(sa, 0)
        k.bar_sync(self.bar_id, self.nthr)  # B complete before anyone's wgmmas read it

    # ------------------------------------------------------------ stages
    def _body(self, not_first, final: bool):
        k, groups = self.k, self.groups
        sa = self._stage_addr()
        _, _, buf = self._current()
        for j in range(len(groups)):
            self._issue(buf, j, not_first if j == 0 else self.ptrue)
            if j + 1 == len(groups):
                break
            k.wgmma_wait(1)  # only group j in flight: the register set of group j + 1 is free
            if self.hand and j == 0:  # the previous stage's wgmmas are complete: its B buffer is free
                self._free_previous(not_first)
            self._widen_a(sa, j + 1)
        self.ring.release(self.st)  # every reader of the packed stage (A here, B before or by the converter) arrives
        self._step()
        if not final:
            self.ring.wait_full(self.st)
            self._prepare(self._stage_addr(), first=False)

    def _body_ahead(self, not_first):
        """widen_ahead: a stage that has a next one.  Once the next stage has landed and every consumer's
        wait after this stage's first group has retired the stage before (the last reader of the buffer
        the next B goes to), the next stage's B is widened a chunk after each group is issued; then the
        next stage's first A, and one barrier before anyone's wgmmas read the new B."""
        k, cfg, groups = self.k, self.cfg, self.groups
        sa = self._stage_addr()
        _, _, buf = self._current()
        slots = len(groups) - 1
        per = []
        for j in range(len(groups)):
            self._issue(buf, j, not_first if j == 0 else self.ptrue)
            if j + 1 == len(groups):
                break
            k.wgmma_wait(1)  # only group j in flight
            if j == 0:
                nxt = self.st.following()
                self.ring.wait_full(nxt)
                k.bar_sync(self.bar_id, self.nthr)  # every consumer's wgmmas of the stage before have retired
                nbuf = self._buffer(k.add(self.buf_it, 1, type=T.u32))[2]
                chunks = s4_widen_steps(k, cfg, self._b_src(k.mad(nxt.stage, cfg.stage_bytes, self.base, type=T.u32)),
                                        nbuf, self.ctid, self.b_parts, nthreads=self.nthr, widen=cfg.widen)
                per = [chunks[i * len(chunks) // slots:(i + 1) * len(chunks) // slots] for i in range(slots)]
            self._widen_a(sa, j + 1)
            for chunk in per[j]:
                chunk()
        k.fence("fence.proxy.async.shared::cta")  # generic writes of the next B -> wgmma (async proxy)
        self.ring.release(self.st)
        self._step()
        k.wgmma_wait(1)  # the second-last group retired: its register set is free
        self._widen_a(self._stage_addr(), 0)
        k.bar_sync(self.bar_id, self.nthr)  # the next B complete everywhere before its wgmmas

    def _pipeline(self, count):
        """This warpgroup's `count` (>= 1) stages of the unit, then every wgmma retired."""
        k = self.k
        self.ring.wait_full(self.st)
        self._prepare(self._stage_addr(), first=True)
        last = k.sub(count, 1, type=T.u32)
        with k.for_range(0, last, name="kt") as j:
            if self.cfg.widen_ahead:
                self._body_ahead(k.setp("ne", j, 0, type=T.u32))
            else:
                self._body(k.setp("ne", j, 0, type=T.u32), final=False)
        self._body(k.setp("ne", last, 0, type=T.u32), final=True)
        k.wgmma_wait(0)
        for other in self.sets[1:]:
            for acc, more in zip(self.accs, other):
                for r, x in zip(acc, more):
                    k.add(r, x, type=T.s32, dst=r)
        if self.hand:  # the buffer of the warpgroup's last stage
            self._free_previous()

    def _interleaved(self, count):
        """interleave_k: consumer c runs the unit's stages whose global index is c modulo the consumers (the
        first of them at unit_base + ((c - unit_base) mod consumers)), so with a ring of a multiple of the
        consumers each slot serves one consumer in every unit, whatever the units' stage counts; the sums
        meet in consumer 0, which stores C."""
        k, cidx, unit_base = self.k, self.cidx, self.unit_base
        nc = self.cfg.consumers
        if nc == 2:  # the same values by parity (the form of the two-consumer kernels measured)
            off = k.and_(k.xor(unit_base, cidx, type=T.b32), 1, type=T.b32)
        else:
            off = k.rem(k.sub(k.add(cidx, nc, type=T.u32), k.rem(unit_base, nc, type=T.u32), type=T.u32), nc,
                        type=T.u32)
        k.add(unit_base, off, dst=self.gs)
        self._seek()
        ahead = k.sub(k.add(count, nc - 1, type=T.u32), off, type=T.u32)  # ceil((count - off) / nc) stages
        mine = k.shr(ahead, 1, type=T.u32) if nc == 2 else k.div(ahead, nc, type=T.u32)
        with k.if_(k.setp("ne", mine, 0, type=T.u32)):
            self._pipeline(mine)
        with k.else_():  # a unit of fewer stages than consumers leaves this one nothing to add
            for acc in self.accs:
                for r in acc:
                    k.mov(0, type=T.s32, dst=r)
        k.add(unit_base, count, dst=unit_base)

    def emit(self, out, m, n, place, red_base):
        """The work-unit loop: each unit's stages, then its C (split-K: the biased correction added once, by
        split 0; with shared rows the consumers' sums meet in consumer 0, which stores C)."""
        k, cfg, accs, bias = self.k, self.cfg, self.accs, self.bias
        w, g, t = self.w, self.g, self.t
        with self.work.loop() as (tile, split, kt0, kt1):
            tm, tn = place(tile)
            count = k.sub(kt1, kt0, type=T.u32)
            first_split = k.setp("eq", split, 0, type=T.u32) if bias else None
            if not self.il:
                self._pipeline(count)
            else:
                self._interleaved(count)
            if not cfg.shared_rows:
                epilogue(k, cfg, accs, out, split, m, n, tm, tn, self.cidx, w, g, t, bias, first_split=first_split)
            else:
                reduce_consumers(k, cfg, accs, red_base, self.cidx, self.ctid)
                with k.if_(k.setp("eq", self.cidx, 0, type=T.u32)):
                    epilogue(k, cfg, accs, out, split, m, n, tm, tn, self.rows_c, w, g, t, bias,
                             first_split=first_split)
