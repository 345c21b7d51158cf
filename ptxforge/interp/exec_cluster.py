"""Clusters: mapa and barrier.cluster.arrive / wait, over CTAs that run in one batch.

A launch with clusters (`interp.run(..., cluster=(x, y, z))`, or the kernel's .reqnctapercluster)
puts whole clusters in each batch, CTAs of a cluster consecutive in rank order, so the shared
memory of every CTA of a cluster is there to read and write ("distributed shared memory").
Addresses: `mapa` returns the CTA-local offset with (rank + 1) << 24 added (see
access.CLUSTER_RANK_SHIFT); a plain shared address in a .shared::cluster access means the
executing CTA, as in PTX.  barrier.cluster.arrive marks a thread; when every live thread of the
cluster has arrived the phase completes (a synchronization event for the race checks) and the
threads blocked in barrier.cluster.wait go on.  The phase orders what each thread did before its arrive
before what the threads that wait for the phase do after their wait (an access between a thread's arrive and
its wait is ordered by neither side); a .relaxed arrive orders only what came before the thread's last
fence of cluster scope or wider that releases, and the mbarrier.init operations before its last
fence.mbarrier_init.release.cluster, which releases those and nothing else (data written before it and read
by the partner CTA after the wait is a race unless a release fence covers it: `mbarriers.releasing`).
A wait with no arrive before it is reported, and so is an access to another CTA's shared memory (a load,
store, atomic, mbarrier operation, bulk copy or TMA multicast) by a thread that has not yet come out of a
cluster wait: until then the other CTA may not have started (a DSMEM access to it is undefined; on an H100
such a ring of stores failed the launch in some runs and not in others).
Not checked: races between CTAs that only a CTA-local bar.sync separates (a cluster barrier or
an mbarrier phase orders them).
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .access import CLUSTER_RANK_SHIFT, cluster_address
from .mbarriers import released_inits, releasing
from .memory import SHARED_WINDOW

_PTXFORGE_INTERNAL = True


def make_mapa(P, op):
    """Executor of mapa: the same shared offset in CTA `rank` of the cluster, as a .shared::cluster address."""
    ins = op.ins
    d, a, rank = ins.operands
    generic = ins.info == "generic"
    t = T.u64 if generic else T.u32
    get_a = P.reader(a, t, ins)
    get_r = P.reader(rank, T.u32, ins)
    put = P.writer(d, t, ins)

    def mapa(S, m):
        addr = np.broadcast_to(np.asarray(get_a(S)).astype(np.int64), (S.N,))
        r = np.broadcast_to(np.asarray(get_r(S)).astype(np.int64), (S.N,))
        bad = m & (r >= S.cluster_size)
        if bad.any():
            S.report("oob", f"mapa to CTA rank {int(r[bad][0])} of a cluster of {S.cluster_size} CTAs", op,
                     np.flatnonzero(bad))
        out = cluster_address((addr - SHARED_WINDOW) if generic else addr, r) + (SHARED_WINDOW if generic else 0)
        put(S, out.astype(np.uint64 if generic else np.uint32), m)
    return mapa


def make_getctarank(P, op):
    """Executor of getctarank: the cluster rank of the CTA whose shared memory a shared::cluster (or generic)
    address names, the inverse of mapa; a CTA-local shared address names the executing CTA."""
    ins = op.ins
    d, a = ins.operands
    generic = ins.info == "generic"
    get_a = P.reader(a, ins.type, ins)
    put = P.writer(d, T.u32, ins)

    def getctarank(S, m):
        addr = np.broadcast_to(np.asarray(get_a(S)).astype(np.int64), (S.N,))
        off = addr - SHARED_WINDOW if generic else addr
        outside = m & ((off < 0) | (off >= (S.cluster_size + 1) << CLUSTER_RANK_SHIFT))
        if outside.any():
            S.report("oob", f"getctarank of {'address' if generic else 'shared::cluster address'} "
                     f"{int(addr[outside][0]):#x}, which is no CTA's shared memory in a cluster of {S.cluster_size}",
                     op, np.flatnonzero(outside))
        field = np.clip(off, 0, None) >> CLUSTER_RANK_SHIFT  # 0: the executing CTA; r + 1: CTA r (from mapa)
        own = S.cluster_rank_of_cta[S.cta_local]
        put(S, np.where(field > 0, field - 1, own).astype(np.uint32), m & ~outside)
    return getctarank


class ClusterBarrier:
    """Per batch: which threads arrived in the current phase, and the phase count per cluster."""

    def __init__(self, S):
        nclusters = S.B // S.cluster_size
        self.arrived = np.zeros(S.N, dtype=bool)
        self.gen = np.zeros(nclusters, dtype=np.int64)
        self.arrive_gen = np.full(S.N, -1, dtype=np.int64)
        self.arrive_step = np.full(S.N, -1, dtype=np.int64)  # the step of each thread's arrival
        # per thread: the step of the fence.mbarrier_init before which its arrival releases its mbarrier inits too,
        # -1 for none (`mbarriers.releasing`); None until a relaxed arrival has one
        self.arrive_inits = None
        self.acquirers = {}  # cluster -> the group array of its last completed phase, joined by the waits on it
        self.waiting = np.zeros(S.N, dtype=bool)
        #: threads that came out of a barrier.cluster.wait: they know every CTA of their cluster is running, which
        #: an access to another CTA's shared memory needs (access.check_peer_started)
        self.seen_all = np.zeros(S.N, dtype=bool)


def cluster_state(S) -> ClusterBarrier:
    """The batch's ClusterBarrier (created on first use)."""
    st = getattr(S, "cluster_bar", None)
    if st is None:
        st = S.cluster_bar = ClusterBarrier(S)
    return st


def check_clusters(S, clusters):
    """Complete the phase of every cluster in `clusters` whose live threads have all arrived."""
    st = getattr(S, "cluster_bar", None)
    if st is None:
        return
    for c in clusters:
        c = int(c)
        members = S.cluster_of == c
        live = members & S.exists & ~S.exited
        if not (st.arrived & members).any() or (live & ~st.arrived).any():
            continue
        st.gen[c] += 1
        S.step += 1
        release = st.waiting & members
        # the arrivals release what came before them; the threads that wait for the phase acquire it
        arrived = st.arrived & members
        who = np.flatnonzero(arrived & (st.arrive_step >= 0))
        inits = None
        if st.arrive_inits is not None:
            by_init = np.flatnonzero(arrived)
            inits = released_inits(S, by_init, st.arrive_inits[by_init])
        st.acquirers[c] = np.where(release, c, -1)
        S.sync_event(None, groups=st.acquirers[c], cut=(who, st.arrive_step[who], inits))
        st.arrived &= ~members
        S.blocked &= ~release
        st.waiting &= ~release
        st.seen_all |= release


def make_barrier_cluster(P, op):
    """Executor of barrier.cluster.arrive (mark, maybe complete the phase) or .wait (block until it completes)."""
    kind = op.ins.info.kind

    if kind == "arrive":
        relaxed = op.ins.info.sem == "relaxed"

        def arrive(S, m):
            st = cluster_state(S)
            again = m & st.arrived
            if again.any():
                S.report("barrier", "barrier.cluster.arrive twice in one phase (a wait must come between)", op,
                         np.flatnonzero(again))
            st.arrived |= m
            st.arrive_gen[m] = st.gen[S.cluster_of[m]]
            if st.arrive_inits is not None:
                st.arrive_inits[m] = -1
            if relaxed:  # releases only what came before a releasing fence of cluster scope or wider
                st.arrive_step[m] = -1
                thr, steps, inits = releasing(S, np.flatnonzero(m), "cluster")
                st.arrive_step[thr] = steps
                if inits is not None:  # and the mbarrier inits before a fence.mbarrier_init
                    if st.arrive_inits is None:
                        st.arrive_inits = np.full(S.N, -1, dtype=np.int64)
                    st.arrive_inits[thr] = inits
            else:
                st.arrive_step[m] = S.step
            check_clusters(S, np.unique(S.cluster_of[m]))
        return arrive

    def wait(S, m):
        st = cluster_state(S)
        never = m & (st.arrive_gen < 0)
        if never.any():
            S.report("barrier", "barrier.cluster.wait without a barrier.cluster.arrive before it", op,
                     np.flatnonzero(never))
        done = st.arrive_gen < st.gen[S.cluster_of]
        block = m & ~done & ~never
        st.waiting |= block
        S.blocked |= block
        passed = m & done
        observed = passed & ~never
        for c in np.unique(S.cluster_of[observed]):  # they observe the phase their arrival was in: they acquire it
            st.acquirers[int(c)][observed & (S.cluster_of == c)] = c
        st.arrive_gen[passed] = -1
        st.seen_all |= passed
    return wait
