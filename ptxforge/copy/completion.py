"""Waiting for asynchronous copies: commit/wait groups, or an mbarrier.

* "groups": after issuing one stage's copies every thread commits a group
  (`cp.async.commit_group`, also when it issued nothing, so that group counts stay in step);
  `cp.async.wait_group N` then waits until at most the N newest groups are in flight.  The
  data is visible to the issuing thread; other threads need a barrier (bar.sync) after the wait.
* "mbarrier": producer threads arrive on a stage's mbarrier with
  `cp.async.mbarrier.arrive.noinc`, which fires when all of the thread's earlier cp.asyncs have
  landed and *is* the thread's arrival.  So the barrier is initialised with the number of
  producer threads, and every one of them must arrive once per phase (a producer with nothing
  to copy still arrives).  Consumers wait on the phase parity; no CTA-wide barrier is needed,
  which is what kernels with dedicated producer warps want.  When a plan fell back to plain
  loads and stores there is nothing asynchronous to track: the producer's ordinary
  `mbarrier.arrive` (a release) publishes its st.shared instead.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..isa import types as T

_PTXFORGE_INTERNAL = True

COMPLETIONS = ("groups", "mbarrier")


def _check(completion):
    if completion not in COMPLETIONS:
        raise ValidationError(f"copy completion must be one of {COMPLETIONS}, got {completion!r}")


def mbarrier_arrival_count(producer_threads: int) -> int:
    """The init count of a stage mbarrier completed by `producer_threads` .noinc arrivals."""
    if not T.is_integer(producer_threads) or producer_threads < 1:
        raise ValidationError(f"an mbarrier needs at least one arriving thread, got {producer_threads!r}")
    return int(producer_threads)


def emit_mbarrier_init(k, mbar, count, *, tid=None, first=None):
    """One thread initialises the mbarrier at `mbar` with `count` arrivals per phase.

    That thread is thread 0 (`tid` == 0), or the one where the predicate `first` holds (compute
    it once when initialising several barriers).  The caller puts a CTA barrier (bar.sync)
    between this and the first use by other threads.
    """
    if first is None:
        if tid is None:
            raise ValidationError("emit_mbarrier_init needs tid= (thread 0 initialises) or a first= predicate")
        first = k.setp("eq", tid, 0, type=T.u32)
    k.mbarrier_init(mbar, count, pred=first)


def emit_copy_commit(k, completion, *, mbar=None, method="cp.async"):
    """Close the copies this thread issued for one stage.

    groups: `cp.async.commit_group` (always, even for a thread that issued nothing).
    mbarrier: `cp.async.mbarrier.arrive.noinc [mbar]` for cp.async plans, `mbarrier.arrive
    [mbar]` for plans that fell back to ld/st.
    """
    _check(completion)
    if completion == "groups":
        if mbar is not None:
            raise ValidationError("commit/wait groups use no mbarrier; drop mbar= or use completion='mbarrier'")
        k.cp_async_commit()
        return
    if mbar is None:
        raise ValidationError("mbarrier completion needs mbar=: the shared address of the stage's mbarrier")
    if method == "cp.async":
        k.cp_async_mbarrier_arrive(mbar, noinc=True)
    elif method == "ld/st":
        k.mbarrier_arrive(mbar, state=k.reg(T.b64))
    else:
        raise ValidationError(f"copy method must be 'cp.async' or 'ld/st', got {method!r}")


def emit_copy_wait(k, completion, *, pending=0, mbar=None, phase=None):
    """Wait until a stage's copies have landed.

    groups: `cp.async.wait_group pending` (this thread's copies; bar.sync before reading other
    threads' bytes).  mbarrier: spin on `mbar` until the phase with parity `phase` (0/1 or a u32
    register) completes (try_wait on sm_90, test_wait before).
    """
    _check(completion)
    if completion == "groups":
        if not T.is_integer(pending) or pending < 0:
            raise ValidationError(f"pending groups must be a non-negative int, got {pending!r}")
        k.cp_async_wait(int(pending))
        return
    if mbar is None or phase is None:
        raise ValidationError("mbarrier completion waits on mbar= for the parity phase= (0 or 1)")
    k.mbarrier_wait(mbar, phase)
