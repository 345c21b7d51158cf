"""Finding the mbarriers an instruction names: shared by the mbarrier instructions and by the
asynchronous copies that complete on a barrier (cp.async.mbarrier.arrive, bulk copies); and what the
ordering fences lend the .relaxed mbarrier operations.

An mbarrier's state lives in `S.mbars`, keyed by its shared-memory offset (see exec_mbarrier.py).

A .relaxed arrival (and complete_tx, which is always .relaxed) releases nothing by itself: after an ordering
fence other than fence.acquire, at the arrival's scope or wider, it releases the accesses its thread made
before the last such fence (a release pattern: every later arrival forms one with the same fence;
`releasing`).  fence.mbarrier_init.release.cluster is lighter: a later relaxed arrival at cluster scope or
narrower (the cluster barrier's among them) releases only the mbarrier.init operations its thread made
before it (`on_init`, `on_init_fence`, `released_inits`); a thread that made both keeps what its last
ordering fence releases.  A .relaxed wait that passes acquires nothing by itself: the thread joins the phase
it observed at its next ordering fence other than fence.release, at the wait's scope or wider
(`defer_acquire`, `on_fence`).
"""

from __future__ import annotations

import numpy as np

from .access import Part, map_access, shadow_read
from .machine import access_key, key_threads

_PTXFORGE_INTERNAL = True


#: how far each fence or mbarrier scope reaches, for "at the same scope or wider"
_REACH = {"cta": 1, "cluster": 2, "gpu": 3, "sys": 3}


def on_fence(S, m, order: str, scope: str) -> None:
    """An ordering fence (`isa.sync.ORDERING_FENCES`: order, scope) by the threads of mask m: all but
    fence.acquire let their later relaxed arrivals at this scope or narrower release the accesses before the
    fence; all but fence.release join them to the phases their relaxed waits at this scope or narrower
    observed."""
    thr = np.flatnonzero(m)
    reach = _REACH[scope]
    if order != "acquire":
        at = getattr(S, "mbar_release_at", None)
        if at is None:  # per thread and reach: the step of its last releasing fence that reaches so far
            at = S.mbar_release_at = np.full((S.N, 4), -1, dtype=np.int64)
        at[thr, 1:reach + 1] = S.step
    pending = getattr(S, "mbar_unacquired", None)
    if order == "release" or not pending:
        return
    for t in thr.tolist():
        left = []
        for groups, key, need in pending.pop(t, ()):
            if need <= reach:
                groups[t] = key
            else:
                left.append((groups, key, need))
        if left:
            pending[t] = left


#: how far fence.mbarrier_init.release.cluster reaches
_INIT_REACH = _REACH["cluster"]


def on_init_fence(S, m) -> None:
    """fence.mbarrier_init.release.cluster by the threads of mask m: their later relaxed arrivals at cluster
    scope or narrower release the mbarrier.init operations they made before it (`releasing`)."""
    at = getattr(S, "mbar_init_fence_at", None)
    if at is None:  # per thread: the step of its last fence.mbarrier_init
        at = S.mbar_init_fence_at = np.full(S.N, -1, dtype=np.int64)
    at[m] = S.step


def on_init(S, thr) -> None:
    """Threads `thr` made an mbarrier.init now: kept (as `access_key`s, sorted) for `released_inits`."""
    keys = access_key(thr, S.step)
    old = getattr(S, "mbar_init_keys", None)
    S.mbar_init_keys = keys if old is None else np.union1d(old, keys)


def releasing(S, thr, scope: str):
    """(threads, steps, inits): the threads of `thr` whose relaxed arrival at `scope` releases something, the
    step of their last ordering fence that reaches that far, before which their accesses are released (-1:
    none), and per thread the step of its fence.mbarrier_init where that is later and reaches, before which
    its mbarrier.init operations are released as well (-1: none; None: no thread of `thr` has one)."""
    at = getattr(S, "mbar_release_at", None)
    init_at = getattr(S, "mbar_init_fence_at", None)
    if at is None and init_at is None:
        return thr[:0], thr[:0], None
    reach = _REACH[scope]
    steps = at[thr, reach] if at is not None else np.full(len(thr), -1, dtype=np.int64)
    if init_at is not None and reach <= _INIT_REACH:
        inits = init_at[thr]
        later = inits > steps
        if later.any():
            ok = (steps >= 0) | later
            return thr[ok], steps[ok], np.where(later, inits, -1)[ok]
    ok = steps >= 0
    return thr[ok], steps[ok], None


def released_inits(S, thr, before):
    """The sorted `access_key`s of the mbarrier.init operations that threads `thr` (ascending) made before
    their steps `before` (-1: none), for a sync event's cut (`Machine.sync_event`); None when there are none."""
    keys = getattr(S, "mbar_init_keys", None)
    some = before >= 0
    if keys is None or not some.any():
        return None
    thr, before = thr[some], before[some]
    who = key_threads(keys)
    pos = np.minimum(np.searchsorted(thr, who), len(thr) - 1)
    out = keys[(thr[pos] == who) & (keys < access_key(who, before[pos]))]
    return out if len(out) else None


def defer_acquire(S, thr, groups, key, scope: str) -> None:
    """Threads `thr` passed a relaxed wait on the phase whose members are `groups` (barrier `key`): they join
    it at their next acquiring fence of `scope` or wider (`on_fence`)."""
    pending = getattr(S, "mbar_unacquired", None)
    if pending is None:
        pending = S.mbar_unacquired = {}
    need = _REACH[scope]
    for t in thr.tolist():
        pending.setdefault(t, []).append((groups, key, need))


def mbar_lookup(S, op, addr, thr, *, init=False):
    """Group the threads of an mbarrier instruction by barrier: yields (key, threads, state)."""
    for part in map_access(S, op, "shared", addr, thr, 8, what="mbarrier access"):
        keys = part.off
        for key in np.unique(keys):
            sel = keys == key
            kthr = part.thr[sel]
            state = S.mbars.get(int(key))
            if init:
                yield int(key), kthr, None, part, sel
                continue
            if state is None:
                S.report("barrier", "mbarrier used before mbarrier.init (or after mbarrier.inval)", op, kthr)
                continue
            if S.track:
                shadow_read(S, op, Part("shared", part.sel[sel], part.off[sel], kthr), 8, record=False)
            yield int(key), kthr, state
