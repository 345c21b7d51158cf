"""Global memory that the CTAs of one launch share: the release/acquire chains that order it.

A CTA that reads global memory another CTA of the same launch wrote (a split-K workspace, a stream-K
partial tile, a flag) needs the write ordered before the read by the PTX memory model: the writing
side releases (an `atom`/`red`/`st` with `.release` or `.acq_rel` at `.gpu` or `.sys` scope, or a
relaxed one after that thread's `fence.acq_rel`/`fence.sc`/`fence.release`/`membar.gl` at such a scope)
at a location whose value the reading side then acquires (an `atom` or `ld` with `.acquire` or
`.acq_rel`, or a relaxed one that a fence of that thread other than `fence.release` follows);
read-modify-writes in between carry the release on (a release sequence); inside each CTA a barrier
carries the order from the writing threads to the releasing one, and from the acquiring thread to the
reading ones.  The interpreter steps threads in an
order where such writes have always landed before the read, so a missing link changes no value here;
this module records the links and reports a read that no chain orders after the write (an "order"
finding, naming both instructions), as `race` findings do for shared memory.  Two SC fences (`membar.gl`,
`fence.sc.gpu`) also order it, the writing side's after the write and the reading side's before the read,
as where every thread fences its partial sums and then one counts the CTA in with a relaxed atomic.

What it tracks: per 4-byte word of the global heap, the thread that last stored to it (plain or strong
stores and atomics), the step and the instruction; per word, the releases its read-modify-write chain
carries; per thread, the releases it acquired and when.  Two strong accesses (both with a memory order)
do not race; a weak read (`ld`, `ld.global.cg` ..., a TMA tensor load) of a word another CTA wrote is
checked (so are the reads of `cp.async` and of bulk copies, by the issuing thread when it issues them),
and TMA and bulk stores count as weak writes.  Bulk and TMA reductions are strong read-modify-writes: their
reads of words another CTA stored plainly are checked, reductions into the same words are not.  `.cluster`
scope orders the CTAs of one cluster, `.cta` none, on the releasing side as on the acquiring one.

The async proxy besides: a TMA or bulk copy that reads global words a generic store or atomic of this
launch wrote (another CTA's, or its own thread's) also needs a proxy fence that covers global memory
(`fence.proxy.async.global` or `fence.proxy.async`: `isa.sync.PROXY_FENCES`), by the writing thread after
its write or by the reading thread after the write and before the copy; without one it is a "proxy"
finding.  Words the TMA or bulk stores wrote are async-proxy writes already.
"""

from __future__ import annotations

import bisect

import numpy as np

from ..isa.sync import ORDERING_FENCES
from .machine import event_orders
from .memory import GLOBAL_BASE

_PTXFORGE_INTERNAL = True

#: fences that order a thread's accesses for the other CTAs of the launch (`.cluster`: of its cluster) -> scope
GPU_FENCES = {name: scope for name, (_, scope) in ORDERING_FENCES.items() if scope != "cta"}
#: the sequentially consistent ones (membar.gl is fence.sc.gpu): all of them are in one total order
SC_FENCES = frozenset(name for name, (order, _) in ORDERING_FENCES.items() if order == "sc")
_STRONG = ("relaxed", "acquire", "release", "acq_rel", "volatile")


class GlobalOrder:
    """The shadow of one launch's global heap and its release/acquire links (see the module docstring)."""

    def __init__(self, S):
        words = S.launch.heap.size // 4 + 1
        self.w_tid = np.full(words, -1, dtype=np.int64)
        self.w_time = np.full(words, -1, dtype=np.int64)
        self.w_pc = np.full(words, -1, dtype=np.int32)
        self.w_strong = np.zeros(words, dtype=bool)
        self.w_async = np.zeros(words, dtype=bool)  # written through the async proxy (TMA / bulk stores)
        self.releases: dict = {}  # word -> [(releasing thread, step, scope)] its read-modify-write chain carries
        self.acquired: dict = {}  # thread -> [(releasing thread, release step, acquire step)]
        self.by_cta: dict = {}  # CTA -> threads of it that acquired something
        self.pending: dict = {}  # thread -> [(releasing thread, step, scope)] read relaxed, acquired at its next fence
        self.fence = np.full(S.N, -1, dtype=np.int64)  # step of each thread's last releasing fence beyond .cta
        self.fence_scope: dict = {}  # thread -> the scope of that fence (cluster, gpu or sys)
        self.proxy_fences: dict = {}  # thread -> steps of its proxy fences that cover global memory
        self.sc_by_cta: dict = {}  # CTA -> [(step, thread)] of its threads' SC fences at gpu or sys scope
        self.cache: dict = {}


def state(S) -> GlobalOrder | None:
    """The launch's GlobalOrder, made on first use; None when the launch does not check "order"."""
    g = getattr(S, "global_order", False)
    if g is False:
        g = S.global_order = GlobalOrder(S) if (S.track and S.launch.checks & {"order", "proxy"}) else None
    return g


def _words(part, nbytes):
    """(word index per byte group, thread per word) of an access: every 4-byte word it touches."""
    first = part.off // 4
    last = (part.off + nbytes - 1) // 4
    span = int((last - first).max()) + 1 if len(first) else 0
    w = (first[:, None] + np.arange(span)).ravel()
    t = np.repeat(part.thr, span)
    keep = w <= np.repeat(last, span)
    return w[keep], t[keep]


def _scoped(S, sem, scope, a, b) -> bool:
    """Whether an access with memory order `sem` at `scope` orders threads a and b of different CTAs."""
    if sem not in ("release", "acquire", "acq_rel"):
        return False
    if scope in ("gpu", "sys"):
        return True
    return scope == "cluster" and _same_cluster(S, a, b)


def _same_cluster(S, a, b) -> bool:
    ca, cb = int(S.cta_local[a]), int(S.cta_local[b])
    rank = S.cluster_rank_of_cta
    return ca - int(rank[ca]) == cb - int(rank[cb])


def _release(S, g, t, sem, scope):
    """(step, scope) from which thread t's store/atomic releases, and how far: its own step and scope with
    .release/.acq_rel at cluster scope or wider, its last releasing fence's step and scope for a relaxed one
    after such a fence; None when it releases nothing."""
    if sem in ("release", "acq_rel") and scope in ("gpu", "sys", "cluster"):
        return S.step, scope
    if g.fence[t] >= 0:
        return int(g.fence[t]), g.fence_scope[t]
    return None


def _links(S, chain, tid, sem, scope, now):
    """The releases of `chain` that thread tid acquires at step `now` with an access or fence of `sem` at
    `scope`: both sides' scopes must reach the other thread (a .cluster release or acquire only inside the
    cluster)."""
    return [(r, tr, now) for r, tr, rscope in chain
            if _scoped(S, sem, scope, r, tid) and _scoped(S, "release", rscope, r, tid)]


def on_store(S, op, part, nbytes, sem, scope, proxy="generic"):
    """A global store by part.thr (proxy="async": a TMA or bulk store): record the writer of each word; a release
    starts the word's release sequence, any other store ends it."""
    g = state(S)
    if g is None:
        return
    w, t = _words(part, nbytes)
    g.w_tid[w] = t
    g.w_time[w] = S.step
    g.w_pc[w] = op.pc
    g.w_strong[w] = sem in _STRONG
    g.w_async[w] = proxy == "async"
    if sem in _STRONG:  # strong stores (rare: flags) may release
        for word, tid in zip(w.tolist(), t.tolist()):
            rel = _release(S, g, tid, sem, scope)
            if rel is not None:
                g.releases[word] = [(tid, *rel)]
            else:
                g.releases.pop(word, None)
    elif g.releases:  # a weak store ends the release sequences of the words it writes
        for word in np.unique(w[np.isin(w, np.fromiter(g.releases, dtype=np.int64))]).tolist():
            del g.releases[word]


def on_atomic(S, op, part, width, sem, scope):
    """An atom/red by part.thr, in their serialization order: each acquires what the word's release sequence
    carries (at once with .acquire/.acq_rel, at its next fence when relaxed) and adds its own release to it."""
    g = state(S)
    if g is None:
        return
    words = (part.off // 4).tolist()
    now = S.step
    for word, tid in zip(words, part.thr.tolist()):
        chain = g.releases.get(word)
        if chain:
            if sem in ("acquire", "acq_rel"):
                _acquire(S, g, tid, _links(S, chain, tid, sem, scope, now))
            else:
                g.pending.setdefault(tid, []).extend(chain)
        rel = _release(S, g, tid, sem, scope)
        if rel is not None:
            g.releases.setdefault(word, []).append((tid, *rel))
        g.w_tid[word], g.w_time[word], g.w_pc[word], g.w_strong[word] = tid, now, op.pc, True
        g.w_async[word] = False


def on_fence(S, m, kind):
    """A fence by the threads of mask m: later relaxed releases of theirs release from here (all but
    fence.acquire), and what their relaxed reads found in release sequences is acquired now (all but
    fence.release)."""
    g = state(S)
    scope = GPU_FENCES.get(kind)
    if g is None or scope is None:
        return
    order = ORDERING_FENCES[kind][0]
    thr = np.flatnonzero(m)
    if order != "acquire":
        g.fence[thr] = S.step
        g.fence_scope.update(dict.fromkeys(thr.tolist(), scope))
    if kind in SC_FENCES and scope != "cluster":
        for tid in thr.tolist():
            g.sc_by_cta.setdefault(int(S.cta_local[tid]), []).append((S.step, tid))
    if order == "release" or not g.pending:
        return
    for tid in thr.tolist():
        chain = g.pending.pop(tid, None)
        if chain:
            _acquire(S, g, tid, _links(S, chain, tid, "acquire", scope, S.step))


def _acquire(S, g, tid, links):
    if not links:
        return
    g.acquired.setdefault(tid, []).extend(links)
    g.by_cta.setdefault(int(S.cta_local[tid]), set()).add(tid)


def on_proxy_fence(S, m):
    """A proxy fence that covers global memory by the threads of mask m: their generic writes before it are
    visible to the async proxy, and so are the writes they read before it."""
    g = state(S)
    if g is not None:
        for tid in np.flatnonzero(m).tolist():
            g.proxy_fences.setdefault(tid, []).append(S.step)


def on_load(S, op, part, nbytes, sem, scope, proxy="generic"):
    """A global load by part.thr (proxy="async": a TMA or bulk copy): acquire (ld.acquire) or note for a fence
    (ld.relaxed) what the words' release sequences carry, then report words another CTA wrote that no
    release/acquire chain orders before it, and for the async proxy generic writes no proxy fence follows."""
    g = state(S)
    if g is None:
        return
    w, t = _words(part, nbytes)
    if g.releases and sem in _STRONG:
        for word, tid in zip(w.tolist(), t.tolist()):
            chain = g.releases.get(word)
            if not chain:
                continue
            if sem == "acquire":
                _acquire(S, g, tid, _links(S, chain, tid, sem, scope, S.step))
            else:
                g.pending.setdefault(tid, []).extend(chain)
    writer = g.w_tid[w]
    if proxy == "async":
        _proxy_check(S, g, op, w, t, writer)
    foreign = (writer >= 0) & (S.cta_local[np.maximum(writer, 0)] != S.cta_local[t])
    if sem in _STRONG:
        foreign &= ~g.w_strong[w]
    if not foreign.any():
        return
    idx = np.flatnonzero(foreign)
    bad = [i for i in idx.tolist() if not _ordered(S, g, int(writer[i]), int(g.w_time[w[i]]), int(t[i]))]
    if bad:
        i = bad[0]
        other = S.prog.instructions[int(g.w_pc[w[i]])]
        S.report("order", f"reads global memory that a thread of another CTA wrote in this launch "
                 f"({S.launch.heap.where(GLOBAL_BASE + int(w[i]) * 4, 4)}), "
                 "with no release/acquire between the write and this read: the writing CTA must release it "
                 "(atom/red/st .release or .acq_rel at .gpu scope, or a relaxed one after fence.acq_rel.gpu, "
                 "by a thread its writers reach through a barrier) at a location this CTA then acquires",
                 op, np.unique(t[bad]), other=other, other_threads=np.unique(writer[bad]))


def _proxy_check(S, g, op, w, t, writer):
    """Words w read by threads t through the async proxy: a generic write of this launch needs a proxy fence
    covering global memory between it and the read, by the writer (after the write, and itself ordered
    before the read) or by the reader (after the write reached it, before the read).  A write of another CTA
    that no chain orders before the read is the "order" finding's, not this one's."""
    generic = np.flatnonzero((writer >= 0) & ~g.w_async[w])
    if not len(generic):
        return
    triples = {(int(writer[i]), int(g.w_time[w[i]]), int(t[i])): i for i in generic.tolist()}
    bad = [i for (u, tu, q), i in triples.items() if not _proxy_fenced(S, g, u, tu, q)]
    if not bad:
        return
    i = bad[0]
    S.report("proxy", f"{op.ins.opcode} reads global memory ({S.launch.heap.where(GLOBAL_BASE + int(w[i]) * 4, 4)}) "
             "through the async proxy that a generic store or atomic of this launch wrote, with no proxy fence "
             "between them: the writing thread must execute fence.proxy.async.global (or fence.proxy.async) after "
             "its write and before what orders it before this read, or the reading thread after that and before "
             "this copy", op, np.unique(t[bad]), other=S.prog.instructions[int(g.w_pc[w[i]])],
             other_threads=np.unique(writer[bad]))


def _proxy_fenced(S, g, u, tu, q) -> bool:
    """Whether thread u's generic write at step tu reaches thread q's async-proxy read now through a proxy fence
    (True too where no chain orders it at all: that is an "order" finding)."""
    now = S.step
    if not _before(S, g, u, tu, q, now):
        return True
    mine = g.proxy_fences.get(u, ())
    i = bisect.bisect_left(mine, tu)
    if i < len(mine) and _before(S, g, u, mine[i], q, now):
        return True
    theirs = g.proxy_fences.get(q, ())
    j = bisect.bisect_right(theirs, now)
    return j > 0 and _before(S, g, u, tu, q, theirs[j - 1])


def _before(S, g, u, tu, q, tq) -> bool:
    """Whether thread u's access at step tu is ordered before thread q's at step tq: inside a CTA by program
    order or a barrier, between CTAs by a release/acquire chain or SC fences."""
    if int(S.cta_local[u]) == int(S.cta_local[q]):
        return _hb(S, u, tu, q, tq)
    return _ordered(S, g, u, tu, q, tq)


def _ordered(S, g, w, tw, q, now=None) -> bool:
    """Whether thread w's write at step tw is ordered before thread q's read at step `now` (None: this step):
    through a release its CTA made that q's CTA acquired, or through two SC fences (membar.gl, fence.sc.gpu),
    the writing side's after the write and the reading side's before the read (SC fences are in one order,
    which the interpreter's is)."""
    key = (w, tw, q)
    if now is None:
        if key in g.cache:
            return True
        now = S.step
    cw = int(S.cta_local[w])
    ok = any(int(S.cta_local[r]) == cw and _hb(S, w, tw, r, tr) and _hb(S, a, ta, q, now)
             for a in g.by_cta.get(int(S.cta_local[q]), ()) for r, tr, ta in g.acquired[a]) \
        or _sc_ordered(S, g, w, tw, q, now)
    if ok and now == S.step:
        g.cache[key] = True
    return ok


def _sc_ordered(S, g, w, tw, q, now) -> bool:
    mine = g.sc_by_cta.get(int(S.cta_local[w]))
    theirs = g.sc_by_cta.get(int(S.cta_local[q]))
    if not mine or not theirs:
        return False
    i = bisect.bisect_right(mine, (tw, S.N))
    published = next((tf for tf, x in mine[i:] if _hb(S, w, tw, x, tf)), None)
    if published is None:
        return False
    j = bisect.bisect_right(theirs, (published, S.N))
    return any(_hb(S, y, tg, q, now) for tg, y in theirs[j:])


def _hb(S, u, tu, v, tv) -> bool:
    """Whether thread u's access at step tu happens before thread v's at step tv inside their CTA: the same
    thread in program order, or a barrier (or mbarrier phase) both took part in between."""
    if u == v:
        return tu <= tv
    cta = int(S.cta_local[u])
    if cta != int(S.cta_local[v]) or tu >= tv:
        return False
    full = S.full_times[cta]
    i = bisect.bisect_right(full, tu)
    if i < len(full) and full[i] < tv:
        return True
    ev = S.events
    if ev and ev[0][0] > tu and S.events_dropped:  # older events were dropped: no finding without evidence
        return True
    j = bisect.bisect_right(ev, tu, key=lambda e: e[0])
    first, at, second = np.array([u]), np.array([tu]), np.array([v])
    while j < len(ev) and ev[j][0] < tv:
        if event_orders(ev[j], first, at, second)[0]:
            return True
        j += 1
    return False
