"""The state of one batch of CTAs executing together: every thread of every CTA in the batch is one
element of the register arrays.

Each CTA's threads are padded to a whole number of warps (padding threads never exist), so warp
w of the batch is threads 32w..32w+31 and never straddles two CTAs.  %laneid is the linear
thread index modulo 32 (what hardware does); %warpid is documented by PTX as a volatile physical
slot, and here it is the linear thread index / 32 — never index with it on a GPU.
"""

from __future__ import annotations

import numpy as np

from .findings import Finding, InterpError, ThreadId
from .values import WORDS128, from_words128

_PTXFORGE_INTERNAL = True

#: Registers start with this pattern rather than zero, so code that reads a register it never
#: wrote computes garbage here as it would on a GPU instead of passing by luck.
REGISTER_POISON = 0x5A5A5A5A5A5A5A5A
#: Shared memory starts filled with this byte for the same reason.
SHARED_POISON = 0xA5


class Machine:
    """The register file, control state and shared memory of one batch of CTAs running together.

    Every thread of every CTA in the batch is one element of numpy arrays (registers, program counters,
    exited/blocked masks), so one instruction executes for a whole group of threads at once.

    Args:
        launch: the `Launch` the batch belongs to (memory, parameters, checks).
        prog: the `Program` (executors and register tables) of the kernel.
        ctas: the CTA indices (x, y, z) of this batch.
    """
    def __init__(self, launch, prog, ctas):
        self.launch = launch
        self.prog = prog
        self.ctas = list(ctas)  # CTA indices (x, y, z) of this batch
        L = launch
        B = len(self.ctas)
        T = L.nthreads
        Tp = -(-T // 32) * 32
        N = B * Tp
        self.B, self.T, self.Tp, self.N = B, T, Tp, N
        idx = np.arange(N, dtype=np.int64)
        local = idx % Tp
        cta_local = idx // Tp
        self.cta_local = cta_local
        self.local_tid = local
        # the scheduler's priority per thread (None: lowest pc first, whatever the warpgroup)
        self.priority = local // 128 if L.order == "last-warpgroup-first" else None
        exists = local < T
        self.exists = exists
        bx, by, _ = L.block
        self.tid_x = np.where(exists, local % bx, 0).astype(np.uint32)
        self.tid_y = np.where(exists, (local // bx) % by, 0).astype(np.uint32)
        self.tid_z = np.where(exists, local // (bx * by), 0).astype(np.uint32)
        cta = np.array(self.ctas, dtype=np.uint32).reshape(B, 3)
        self.ctaid_x = cta[cta_local, 0]
        self.ctaid_y = cta[cta_local, 1]
        self.ctaid_z = cta[cta_local, 2]
        # clusters: the batch holds whole clusters, CTAs of one cluster consecutive in rank order
        cx, cy, cz = getattr(L, "cluster", (1, 1, 1))
        self.cluster_size = cx * cy * cz
        rel = np.stack([cta[:, 0] % cx, cta[:, 1] % cy, cta[:, 2] % cz], axis=1)
        rank = (rel[:, 0] + cx * (rel[:, 1] + cy * rel[:, 2])).astype(np.uint32)
        self.cluster_rank_of_cta = rank
        self.cluster_ctarank = rank[cta_local]
        self.cluster_ctaid_x, self.cluster_ctaid_y, self.cluster_ctaid_z = (rel[cta_local, i].astype(np.uint32)
                                                                           for i in range(3))
        self.clusterid_x = (cta[cta_local, 0] // cx).astype(np.uint32)
        self.clusterid_y = (cta[cta_local, 1] // cy).astype(np.uint32)
        self.clusterid_z = (cta[cta_local, 2] // cz).astype(np.uint32)
        self.cluster_of = cta_local // self.cluster_size  # batch-local cluster index per thread
        lane = (local % 32).astype(np.uint32)
        self.laneid = lane
        self.warpid = (local // 32).astype(np.uint32)
        one = np.uint64(1)
        bit = (one << lane.astype(np.uint64))
        self.lanemask_eq = bit.astype(np.uint32)
        self.lanemask_lt = (bit - one).astype(np.uint32)
        self.lanemask_le = ((bit << one) - one).astype(np.uint32)
        self.lanemask_ge = (~self.lanemask_lt).astype(np.uint32)
        self.lanemask_gt = (~self.lanemask_le).astype(np.uint32)
        # registers and their typed views
        self.R = []
        for dt in prog.reg_types:
            if dt == np.bool_:
                self.R.append(np.zeros(N, dtype=bool))
            elif dt == WORDS128:
                self.R.append(from_words128(np.full((N, 2), REGISTER_POISON, dtype=np.uint64)))
            else:
                self.R.append(np.full(N, REGISTER_POISON & ((1 << (8 * dt.itemsize)) - 1), dtype=dt))
        self.V = [self.R[i].view(dt) for i, dt in prog.slots]
        # control state
        self.pcs = np.zeros(N, dtype=np.int64)
        self.exited = ~exists
        self.blocked = np.zeros(N, dtype=bool)
        self.parked = np.zeros(N, dtype=bool)
        self.step = 0
        # shared memory and its shadow
        S_bytes = L.smem.size
        self.smem = np.full(B * S_bytes, SHARED_POISON, dtype=np.uint8)
        self.smem_views = {1: self.smem, 2: self.smem.view(np.uint16), 4: self.smem.view(np.uint32),
                           8: self.smem.view(np.uint64)}
        self.smem_base = cta_local * S_bytes
        # per-thread .local memory (the kernel's and its callees' .local arrays), poisoned like shared memory
        self.local = np.full(N * L.local.size, SHARED_POISON, dtype=np.uint8)
        self.sp = np.full(N, L.local.stack_top, dtype=np.int64)  # each thread's alloca stack pointer
        self.local_views = {w: self.local.view(dt) for w, dt in ((1, np.uint8), (2, np.uint16), (4, np.uint32),
                                                                 (8, np.uint64))}
        self.track = L.track_shared
        self.check_uninit = "uninit" in L.checks
        if self.track:
            n = B * S_bytes
            self.w_tid = np.full(n, -1, dtype=np.int64)
            self.w_time = np.full(n, -1, dtype=np.int64)
            self.w_pc = np.full(n, -1, dtype=np.int32)
            self.r_tid = np.full(n, -1, dtype=np.int64)
            self.r_time = np.full(n, -1, dtype=np.int64)
            # a second reader (two consumer warpgroups reading one operand): -1 none; with r_tid -2 unused
            self.r2_tid = np.full(n, -1, dtype=np.int64)
            self.r2_time = np.full(n, -1, dtype=np.int64)
            self.pend_pc = np.full(n, -1, dtype=np.int32)
            self.pend_tid = np.full(n, -1, dtype=np.int64)
        self.events = []  # (time, group per thread, cut) of partial synchronizations (see sync_event)
        self.events_dropped = False  # whether the oldest events were dropped (see sync_event)
        self.last_full = np.full(B, -1, dtype=np.int64)  # time of the last CTA-wide barrier per CTA
        self.full_times = [[] for _ in range(B)]  # every CTA-wide barrier's time, per CTA (global_order reads it)
        # barriers, async copies, mbarriers (see exec_sync / exec_async)
        self.bar_arrived = {}
        self.bar_pc = {}
        self.bar_count = {}
        self.bar_step = {}  # barrier id -> the step of each thread's bar.arrive; -1 for a blocking arrival (bar.sync)
        self.bar_vote = {}  # bar.red: barrier id -> each thread's predicate, and the reduction each arrival asked
        self.park_key = np.full(N, -1, dtype=np.int64)
        self.cp_records = []
        self.cp_committed = np.zeros(N, dtype=np.int64)
        self.bulk_groups = []
        self.mbars = {}
        self.mbar_epoch = 0
        self.unpark_epoch = -1

    # ------------------------------------------------------------ identities
    def thread_id(self, n: int) -> ThreadId:
        """The `ThreadId` (CTA and thread index) of batch thread `n`."""
        b, local = divmod(int(n), self.Tp)
        bx, by, _ = self.launch.block
        return ThreadId(tuple(int(c) for c in self.ctas[b]), (local % bx, (local // bx) % by, local // (bx * by)))

    def warp_of(self, n: int) -> str:
        """"cta (x, y, z) warp w" for batch thread `n`, for messages."""
        b, local = divmod(int(n), self.Tp)
        return f"cta {self.ctas[b]} warp {local // 32}"

    # ------------------------------------------------------------ findings
    def report(self, kind, message, op, threads=(), *, other=None, other_threads=(), details=None):
        """Record a finding of `kind` at instruction `op` for `threads` (batch indices), unless the launch does
        not check that kind.

        Args:
            kind: a key of `KINDS`.
            message: what happened.
            op: the executing op (its pc and instruction are recorded), or None.
            threads: the batch threads involved.
            other: the conflicting instruction, if any.
            other_threads: the threads that executed it.
            details: kind-specific facts.
        """
        L = self.launch
        if kind not in L.checks:
            return
        threads = np.asarray(threads, dtype=np.int64).ravel()
        other_threads = np.asarray(other_threads, dtype=np.int64).ravel()
        f = Finding(kind, message, self.prog.name, op.pc if op is not None else -1,
                    op.ins if op is not None else None,
                    tuple(self.thread_id(t) for t in threads[:4]), int(len(threads)), other,
                    tuple(self.thread_id(t) for t in other_threads[:4]), 1, dict(details or {}))
        L.add_finding(f)

    def fail(self, kind, message, op, threads=()):
        """A finding that stops execution whatever the collection mode (nothing sensible follows)."""
        self.report(kind, message, op, threads)
        raise InterpError(message + (f"\n{self.launch.findings[-1]}" if self.launch.findings else ""),
                          self.launch.findings, getattr(op, "ins", None) and op.ins.loc)

    # ------------------------------------------------------------ synchronization events
    def sync_event(self, members, cta_full=None, groups=None, cut=None):
        """Record that threads synchronized now: their earlier accesses are ordered before the later
        accesses of every thread of the same group.  `members`: bool mask (one group per CTA), or
        `groups`: int group per thread (-1: not taking part).  `cta_full`: CTA indices where every
        live thread took part (kept as one timestamp per CTA).  `cut`: the event is the phase of one barrier
        whose sides differ, (threads, steps, inits): the threads (ascending, with a step each: where they
        arrived, or -1) release their accesses before their step, and besides them the accesses `inits` names
        (None, or the sorted `access_key`s of mbarrier.init operations that a fence.mbarrier_init released:
        `mbarriers.released_inits`); the threads of `groups` (>= 0; the threads that observe the phase join
        them later) acquire; recorded even when nobody acquires yet.  See `event_orders`."""
        if groups is None:
            groups = np.where(members, self.cta_local, -1)
        if cta_full is not None and len(cta_full):
            self.last_full[cta_full] = self.step
            for c in np.asarray(cta_full).tolist():
                self.full_times[c].append(self.step)
            groups = np.where(np.isin(self.cta_local, cta_full), -1, groups)
        if cut is None and not (groups >= 0).any():
            return None
        self.events.append((self.step, groups, cut))
        if len(self.events) > 4096:
            del self.events[:2048]
            self.events_dropped = True
        return groups

    def warps_touched(self, m):
        """The indices of the warps with at least one thread set in the thread mask `m`."""
        return np.flatnonzero(m.reshape(-1, 32).any(axis=1))

    def check_full_warps(self, op, m, what="warp-collective instruction"):
        """`.aligned` instructions: every existing lane of each participating warp must execute it."""
        mw = m.reshape(-1, 32)
        ew = self.exists.reshape(-1, 32)
        touched = mw.any(axis=1)
        missing = touched & (ew & ~mw).any(axis=1)
        if missing.any():
            w = int(np.flatnonzero(missing)[0])
            lanes = np.flatnonzero(ew[w] & ~mw[w])
            exited = np.flatnonzero(ew[w] & ~mw[w] & self.exited.reshape(-1, 32)[w])
            why = f"lanes {_ranges(lanes)} of {self.warp_of(w * 32)} did not execute it"
            if len(exited):
                why += f" (lanes {_ranges(exited)} have exited)"
            self.report("collective", f"{what} reached by part of a warp: {why}; it must be executed by all "
                        "32 lanes together (.sync.aligned)", op, np.flatnonzero(mw[w]) + w * 32)
            return False
        return True


#: `access_key`: the bits of the step; the thread's index is above them
_KEY_SHIFT = 40


def access_key(tids, steps):
    """One int64 per access, naming it by its thread and the step it was made at (a thread makes at most
    one instruction's accesses per step): how a sync event's cut names single accesses it releases."""
    return (np.asarray(tids, dtype=np.int64) << _KEY_SHIFT) | np.asarray(steps, dtype=np.int64)


def key_threads(keys):
    """The threads of `access_key`s."""
    return keys >> _KEY_SHIFT


def released_before(cut, tids):
    """Per thread of `tids`: the step before which all its accesses are released by a sync event's `cut`
    (threads in ascending order, steps, inits; see `Machine.sync_event`), -1 where the cut does not name it
    (single accesses the cut's `inits` release aside: see `released`)."""
    who, steps, _ = cut
    out = np.full(len(tids), -1, dtype=np.int64)
    if len(who):
        pos = np.minimum(np.searchsorted(who, tids), len(who) - 1)
        named = who[pos] == tids
        out[named] = steps[pos[named]]
    return out


def released(cut, tids, times):
    """Mask: whether a sync event's `cut` releases the access of each thread of `tids` at step `times`: made
    before the thread's step in the cut, or one of the cut's `inits`."""
    ok = released_before(cut, tids) > times
    inits = cut[2]
    if inits is not None:
        keys = access_key(tids, times)
        pos = np.minimum(np.searchsorted(inits, keys), len(inits) - 1)
        ok |= inits[pos] == keys
    return ok


def event_orders(event, first_tid, first_time, second_tid):
    """Mask: whether sync event `event` (time, groups, cut) orders the access of each `first_tid` at step
    `first_time` before a later access of the matching `second_tid`: both took part in one group of a
    barrier, the first access before the barrier; or, for a barrier whose sides differ (`cut`), the first
    thread released it by arriving after it (`released`) and the second thread observed the phase."""
    time, groups, cut = event
    if cut is None:
        g1 = groups[first_tid]
        return (time > first_time) & (g1 >= 0) & (g1 == groups[second_tid])
    return released(cut, first_tid, first_time) & (groups[second_tid] >= 0)


def _ranges(xs) -> str:
    xs = [int(x) for x in xs]
    out, i = [], 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(f"{xs[i]}" if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ",".join(out)
