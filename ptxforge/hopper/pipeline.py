"""An N-stage ring of full/empty mbarriers and warp-specialization helpers for sm_90 kernels.

    ring = MbarrierRing(k, stages=4, base=bar_addr, consumer_arrivals=8)
    ring.init(pred=is_thread0)                     # mbarrier.init x 2N + fence.mbarrier_init
    k.bar_sync(0)
    ws = WarpSpecialized(k, consumer_groups=2)      # warpgroup 0 produces, 1..2 consume
    with ws.producer():
        st = ring.producer_state()
        ...  ring.acquire(st); ring.expect_tx(st, nbytes, pred=leader); k.tensor_load(..., ring.full(st)); st.advance()
    with ws.consumer() as cwg:
        st = ring.consumer_state()
        ...  ring.wait_full(st); <wgmma ...>; ring.release(st, pred=lane0); st.advance()

Phases follow the usual convention: a fresh barrier is in phase 0; waiting on parity 1 of a fresh
barrier succeeds at once, so the producer starts at parity 1 on the "empty" barriers (every slot
starts free) and the consumer at parity 0 on the "full" ones; both flip their parity each time
their stage index wraps around the ring.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from ..isa import types as T
from ..isa.operands import Addr, Reg
from ..isa.tensor import directive_entry_registers, entry_register_cap

_PTXFORGE_INTERNAL = True


def _count_operand(name: str, v):
    """A count the instructions take as an immediate or a register: a numpy integer becomes an int (the
    instruction layer takes Python ints as immediates), a bool or a float is refused."""
    if isinstance(v, (bool, float, np.bool_, np.floating)):
        raise ValidationError(f"{name} must be an int or a register, got {v!r}")
    return int(v) if T.is_integer(v) else v


def _at_least_one(name: str, v) -> int:
    """`v` (a Python or numpy integer, no bool) as an int >= 1."""
    if not T.is_integer(v) or v < 1:
        raise ValidationError(f"{name} must be an int >= 1, got {v!r}")
    return int(v)


@dataclass
class RingState:
    """One role's position in a ring: the stage index and the phase parity to wait on (registers)."""

    k: object
    stage: Reg
    phase: Reg
    stages: int

    def following(self) -> "RingState":
        """The state one stage on, in new registers (this one unchanged): to wait on a stage ahead."""
        k = self.k
        nxt = k.add(self.stage, 1, type=T.u32)
        wrap = k.setp("eq", nxt, self.stages, type=T.u32)
        return RingState(k, k.selp(0, nxt, wrap, type=T.u32), k.xor(self.phase, k.selp(1, 0, wrap, type=T.u32),
                                                                    type=T.b32), self.stages)

    def advance(self) -> None:
        """Move to the next stage; flip the parity when the index wraps (add, setp, 2 predicated ops)."""
        k = self.k
        k.add(self.stage, 1, dst=self.stage)
        wrap = k.setp("eq", self.stage, self.stages, type=T.u32)
        k.mov(0, type=T.u32, dst=self.stage, pred=wrap)
        k.xor(self.phase, 1, dst=self.phase, pred=wrap)


class MbarrierRing:
    """N stages of (full, empty) mbarrier pairs at shared address `base` (16 bytes per stage).

    full[s] completes when the producer's `producer_arrivals` arrivals and all expected TMA bytes
    have landed; empty[s] when `consumer_arrivals` consumer arrivals say the slot may be refilled.
    `suspend_ns` is the try_wait suspend-time hint of the wait loops (None: no hint).  `base` (an int,
    a register or a symbol) must be 8-byte aligned, as every mbarrier object is; an int base is checked.
    """

    def __init__(self, k, stages: int, base, *, producer_arrivals: int = 1, consumer_arrivals: int = 1,
                 suspend_ns: int | None = None):
        stages = _at_least_one("a ring's stage count (stages)", stages)
        if k.target.sm < 90:
            raise ValidationError(f"MbarrierRing uses mbarrier.try_wait and expect_tx (sm_90); target is {k.target}")
        if T.is_integer(base) and (base < 0 or base % 8):
            raise ValidationError(f"ring base {base!r} must be an 8-byte aligned shared address (each mbarrier is 8 "
                                  "bytes, 8-byte aligned)")
        self.k, self.stages, self.base = k, stages, base
        self.producer_arrivals = _count_operand("producer_arrivals", producer_arrivals)
        self.consumer_arrivals = _count_operand("consumer_arrivals", consumer_arrivals)
        self.suspend_ns = suspend_ns

    #: shared-memory bytes the ring's barriers take
    @staticmethod
    def nbytes(stages: int) -> int:
        """Bytes of shared memory `stages` stages of barriers need (8-byte aligned)."""
        return 16 * _at_least_one("a ring's stage count (stages)", stages)

    def _bar(self, which: int, stage) -> Addr:
        k = self.k
        if T.is_integer(stage) or isinstance(stage, (bool, float)):
            if isinstance(stage, (bool, float)) or not 0 <= stage < self.stages:
                raise ValidationError(f"stage {stage!r} is not a stage of this ring: 0..{self.stages - 1}")
            return Addr(self.base, 8 * (which * self.stages + int(stage)))
        a = k.mad(stage, 8, self.base, mode="lo", type=T.u32)
        return Addr(a, 8 * which * self.stages)

    def full(self, st) -> Addr:
        """Address of the full barrier of a state's stage (or of stage index `st`)."""
        return self._bar(0, st.stage if isinstance(st, RingState) else st)

    def empty(self, st) -> Addr:
        """Address of the empty barrier of a state's stage (or of stage index `st`)."""
        return self._bar(1, st.stage if isinstance(st, RingState) else st)

    def init(self, *, pred=None) -> None:
        """mbarrier.init every barrier (guard with `pred` so one thread does it) + fence.mbarrier_init.

        The caller follows with a CTA barrier (bar.sync) before any thread uses the ring.
        """
        k = self.k
        for s in range(self.stages):
            k.mbarrier_init(self._bar(0, s), self.producer_arrivals, pred=pred)
            k.mbarrier_init(self._bar(1, s), self.consumer_arrivals, pred=pred)
        k.fence("fence.mbarrier_init.release.cluster", pred=pred)

    def _state(self, phase: int, name: str) -> RingState:
        k = self.k
        s = k.mov(0, type=T.u32, dst=k.reg(T.u32, f"{name}_stage"))
        p = k.mov(phase, type=T.u32, dst=k.reg(T.u32, f"{name}_phase"))
        return RingState(k, s, p, self.stages)

    def producer_state(self) -> RingState:
        """Stage 0, waiting on parity 1 of the empty barriers (free at start)."""
        return self._state(1, "prod")

    def consumer_state(self) -> RingState:
        """Stage 0, waiting on parity 0 of the full barriers."""
        return self._state(0, "cons")

    def _wait(self, addr: Addr, phase) -> None:
        k = self.k
        top = k.label("ring_wait")
        k.place(top)
        p = k.mbarrier_try_wait(addr, phase, suspend_ns=self.suspend_ns)
        k.bra(top, pred=~p)

    def acquire(self, st: RingState) -> None:
        """Producer: wait until the slot of `st` is empty (try_wait.parity loop on empty[stage])."""
        self._wait(self.empty(st), st.phase)

    def expect_tx(self, st: RingState, nbytes, *, pred=None) -> None:
        """Producer: mbarrier.arrive.expect_tx on full[stage] for the bytes the TMA copies will bring."""
        self.k.mbarrier_arrive(self.full(st), expect_tx=_count_operand("expect_tx nbytes", nbytes), pred=pred)

    def wait_full(self, st: RingState) -> None:
        """Consumer: wait until the slot of `st` is filled (try_wait.parity loop on full[stage])."""
        self._wait(self.full(st), st.phase)

    def release(self, st_or_stage, *, pred=None) -> None:
        """Consumer: arrive on empty[stage] (after the reads of the slot are complete)."""
        self.k.mbarrier_arrive(self.empty(st_or_stage), state="_", pred=pred)


class ClusterRing(MbarrierRing):
    """A ring whose stages the CTAs of a cluster fill together (TMA multicast into every CTA's stage).

    A producer refills stage s in every CTA its multicast reaches, so its empty[s] must hear from
    the consumers of all those CTAs: `release` arrives on this CTA's empty[s] and, through
    `mbarrier.arrive.release.cluster.shared::cluster`, on empty[s] of each peer whose ring base
    (`peer_bases`, shared::cluster addresses from `mapa` of this CTA's `base`) is given.
    `consumer_arrivals` is then the count of one CTA's releasing threads times the CTAs that
    release into it.  Initialize, then `cluster_sync` (not bar.sync) before any thread of the
    cluster uses the ring, and `cluster_sync` again before exit, so no CTA exits while a peer may
    still arrive on its barriers or multicast into its shared memory.
    """

    def __init__(self, k, stages: int, base, peer_bases, **kw):
        super().__init__(k, stages, base, **kw)
        if not peer_bases:
            raise ValidationError("a ClusterRing needs the shared::cluster ring base of at least one peer CTA")
        self.peer_bases = tuple(peer_bases)

    def release(self, st_or_stage, *, pred=None) -> None:
        """Consumer: arrive on empty[stage] here and on empty[stage] of every peer CTA."""
        k = self.k
        super().release(st_or_stage, pred=pred)
        stage = st_or_stage.stage if isinstance(st_or_stage, RingState) else st_or_stage
        for peer in self.peer_bases:
            if T.is_integer(stage):
                a = Addr(peer, 8 * (self.stages + int(stage)))
            else:
                a = Addr(k.mad(stage, 8, peer, mode="lo", type=T.u32), 8 * self.stages)
            k.mbarrier_arrive(a, space="shared::cluster", pred=pred)


def register_split(threads: int, producer_groups: int, consumer_groups: int, producer_regs: int,
                   consumer_regs: int, *, entry: int | None = None) -> None:
    """Check a setmaxnreg plan: counts are multiples of 8 in 24..256, and the counts asked for fit the
    registers the CTA starts with (`threads` x `entry`): setmaxnreg.inc only takes registers that other
    warpgroups released, so a plan asking for more than the launch gave waits forever.  `entry`: the
    registers per thread at the kernel's entry (`isa.tensor.directive_entry_registers` of its directives);
    None: `entry_register_cap(threads)`, the cap of .maxntid `threads` with .minnctapersm 1.  Every
    count is an int (numpy integers too); there is at least one producer and one consumer warpgroup."""
    for n, what in ((producer_regs, "producer"), (consumer_regs, "consumer")):
        if not T.is_integer(n) or n % 8 or not 24 <= n <= 256:
            raise ValidationError(f"{what} register count must be a multiple of 8 in 24..256, got {n!r}")
    producer_groups = _at_least_one("producer_groups", producer_groups)
    consumer_groups = _at_least_one("consumer_groups", consumer_groups)
    if not T.is_integer(threads):
        raise ValidationError(f"threads must be an int, got {threads!r}")
    if threads != 128 * (producer_groups + consumer_groups):
        raise ValidationError(f"{threads} threads is not {producer_groups} + {consumer_groups} warpgroups of 128")
    total = 128 * (producer_groups * producer_regs + consumer_groups * consumer_regs)
    if entry is None:
        entry = entry_register_cap(threads)
    if total > threads * entry:
        most = (threads * entry // 128 - producer_groups * producer_regs) // consumer_groups // 8 * 8
        raise ValidationError(f"register split {producer_regs}/{consumer_regs} x {consumer_groups}: {total} registers, but "
                              f"a CTA of {threads} threads starts with {entry} per thread ({threads * entry}) and "
                              "setmaxnreg.inc only takes what the other warpgroups released, so it would wait "
                              f"forever; with {producer_regs} per producer thread, at most {most} per consumer thread")


class WarpSpecialized:
    """Split a CTA into one producer warpgroup (index 0) and `consumer_groups` consumer warpgroups.

    The kernel must be built with maxntid = 128 x (1 + consumer_groups) and minnctapersm=1 (or
    .maxnreg), so there is an entry register cap for `setmaxnreg` to move registers from.  Use
    `producer()` then `consumer()` as consecutive with-blocks: one if/else on the warpgroup index,
    the first statement of each branch a `setmaxnreg.dec` / `.inc`.
    """

    def __init__(self, k, consumer_groups: int = 2, *, producer_regs: int = 40, consumer_regs: int | None = None):
        consumer_groups = _at_least_one("consumer_groups", consumer_groups)
        self.k, self.consumer_groups = k, consumer_groups
        threads = 128 * (1 + consumer_groups)
        lim = k.directives
        if not any(key in ("maxntid", "reqntid") for key, _ in lim) or not any(
                key in ("minnctapersm", "maxnreg") for key, _ in lim):
            raise ValidationError("warp specialization with setmaxnreg needs an entry register cap: build the "
                                  f"kernel with maxntid={threads} (or reqntid) and minnctapersm=1 (or maxnreg)")
        for key, shape in lim:
            if key in ("maxntid", "reqntid") and shape[0] * shape[1] * shape[2] != threads:
                raise ValidationError(f"the kernel's .{key} {', '.join(map(str, shape))} is "
                                      f"{shape[0] * shape[1] * shape[2]} threads, but one producer and "
                                      f"{consumer_groups} consumer warpgroup(s) are {threads}: build it with "
                                      f"{key}={threads} (the register split is computed for that many)")
        entry = directive_entry_registers(lim)  # what each thread starts with: the pool the split moves within
        if consumer_regs is None:  # the most the launch's registers allow (see register_split)
            slots = threads * entry // 128
            consumer_regs = min(256, ((slots - producer_regs) // consumer_groups) // 8 * 8)
        register_split(threads, 1, consumer_groups, producer_regs, consumer_regs, entry=entry)
        self.producer_regs, self.consumer_regs, self.threads = int(producer_regs), int(consumer_regs), threads
        tid = k.tid()
        self.warpgroup = k.shr(tid, 7, type=T.u32, dst=k.reg(T.u32, "warpgroup"))
        self.warp_in_group = k.and_(k.shr(tid, 5, type=T.u32), 3, type=T.b32, dst=k.reg(T.u32, "warp_in_wg"))
        self.lane = k.and_(tid, 31, type=T.b32, dst=k.reg(T.u32, "lane"))
        self.tid = tid
        self._is_producer = k.setp("eq", self.warpgroup, 0, type=T.u32)

    @contextmanager
    def producer(self):
        """The producer branch (warpgroup 0): setmaxnreg.dec to producer_regs first."""
        k = self.k
        with k.if_(self._is_producer):
            k.setmaxnreg("dec", self.producer_regs)
            yield

    @contextmanager
    def consumer(self):
        """The consumer branch: setmaxnreg.inc to consumer_regs; yields the consumer index (0-based) register."""
        k = self.k
        with k.else_():
            k.setmaxnreg("inc", self.consumer_regs)
            c = k.sub(self.warpgroup, 1, type=T.u32, dst=k.reg(T.u32, "consumer"))
            yield c

    def elect_one(self):
        """elect.sync over the full warp: a predicate true in exactly one lane."""
        return self.k.elect_sync()
