"""Synchronization: bar.sync / bar.arrive / bar.red, bar.warp.sync, ret/exit/trap, and what happens when no
thread can run.

bar.sync blocks the arriving threads; the barrier completes when every thread of the CTA that
has not exited arrived (or, with a thread count, when that many warps' worth did).  The
threads that took part then count as synchronized for the race checks; a thread that arrived
with bar.arrive releases only the accesses it made before its arrival and acquires nothing (it
does not wait), so its later accesses are not ordered by that phase.  `bar` is `.aligned`
per warp: a warp arrives as a whole at one instruction (different warps may use different
instructions, as producer/consumer code with bar.arrive does).  bar.red is a bar.sync that, as it
completes, writes the reduction of the participants' predicates (.popc count, .and, .or) into each
one's destination.

When nothing can run, pending asynchronous arrivals are delivered and threads parked on
mbarriers retried; if that changes nothing it is a deadlock, reported with where every stuck
thread waits (and, for a warpgroup blocked at setmaxnreg.inc, how many registers it waits for).
"""

from __future__ import annotations

import numpy as np

from .access import where_shared

from ..isa import types as T
from .exec_mbarrier import flush
from .exec_regpool import waits
from .findings import InterpUnsupported

_PTXFORGE_INTERNAL = True


# ---------------------------------------------------------------- bar.sync / bar.arrive

def make_bar(P, op):
    """The executor of `bar.sync` / `bar.arrive` / `barrier.*`: records the arrival and blocks syncing threads
    until the barrier's thread count is reached; the barrier orders shared memory for race checking. Returns
    ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the
    Op being built.
    """
    ins = op.ins
    info = ins.info
    if info.kind not in ("sync", "arrive"):
        raise InterpUnsupported(f"bar.{info.kind} is not modelled", ins)
    return _arrival(P, op, info, blocking=info.kind == "sync")


def make_bar_red(P, op):
    """The executor of `bar.red.popc.u32` / `bar.red.{and,or}.pred`: a bar.sync whose completion also writes,
    into every participating thread's destination, the reduction of their predicates (popc: how many hold)."""
    ins = op.ins
    info = ins.info
    d, p = ins.operands[0], ins.operands[-1]
    get_p = P.pred_reader(p, ins)
    put = P.writer(d, ins.type, ins)
    return _arrival(P, op, info, blocking=True, vote=(info.op, get_p, put))


def _arrival(P, op, info, *, blocking: bool, vote=None):
    """Executor of an arrival at a CTA barrier (bar.sync / bar.arrive / bar.red): records it, blocks syncing
    threads, and completes the barrier when its count is reached.  vote: bar.red's (reduction, predicate
    reader, destination writer)."""
    ins = op.ins
    get_id = P.reader(info.id, T.u32, ins)
    get_count = P.reader(info.count, T.u32, ins) if info.count is not None else None

    def bar(S, m):
        ids = np.broadcast_to(np.asarray(get_id(S)).astype(np.int64), (S.N,))
        counts = (np.broadcast_to(np.asarray(get_count(S)).astype(np.int64), (S.N,))
                  if get_count is not None else None)
        preds = np.broadcast_to(np.asarray(vote[1](S)).astype(bool), (S.N,)) if vote is not None else None
        for b in np.unique(ids[m]):
            mb = m & (ids == b)
            b = int(b)
            arrived = S.bar_arrived.get(b)
            if arrived is None:
                arrived = S.bar_arrived[b] = np.zeros(S.N, dtype=bool)
                S.bar_pc[b] = np.full(S.N, -1, dtype=np.int64)
                S.bar_count[b] = np.zeros(S.N, dtype=np.int64)
                S.bar_step[b] = np.zeros(S.N, dtype=np.int64)
            S.bar_count[b][mb] = counts[mb] if counts is not None else 0
            S.bar_step[b][mb] = -1 if blocking else S.step  # (bar.arrive: its accesses after it are not released)
            arrived |= mb
            S.bar_pc[b][mb] = op.pc
            if vote is not None:
                votes = S.bar_vote.get(b)
                if votes is None:
                    votes = S.bar_vote[b] = (np.zeros(S.N, dtype=bool), {})
                votes[0][mb] = preds[mb]
                votes[1][op.pc] = vote
            if blocking:
                S.blocked |= mb
            check_barrier(S, b, np.unique(S.cta_local[mb]), op)
    return bar


def check_barrier(S, b, ctas, op=None):
    """Complete barrier `b` in each of `ctas` whose arrivals reach its count: check that warps arrived whole at
    one instruction (the .aligned rule), record the synchronization and unblock the threads.
    """
    arrived = S.bar_arrived.get(b)
    if arrived is None:
        return
    Tp = S.Tp
    for c in ctas:
        sl = slice(int(c) * Tp, (int(c) + 1) * Tp)
        arr = arrived[sl]
        if not arr.any():
            continue
        live = S.exists[sl] & ~S.exited[sl]
        cnt = S.bar_count[b][sl][arr]
        want = int(cnt.max()) if len(cnt) else 0
        if want == 0:
            complete = not (live & ~arr).any()
        else:
            warps = np.count_nonzero(arr.reshape(-1, 32).any(axis=1))
            complete = warps * 32 >= want
        if not complete:
            continue
        _check_warp_arrivals(S, b, int(c), arr, live)
        members = np.zeros(S.N, dtype=bool)
        members[sl] = arr
        everyone = not (live & ~arr).any()
        steps = S.bar_step[b]
        S.step += 1  # the barrier is an event between the steps before and after it
        if (steps[sl][arr] >= 0).any():  # bar.arrive: released up to its arrival, and it acquires nothing
            who = np.flatnonzero(members)
            at = steps[who]
            S.sync_event(None, groups=np.where(members & (steps < 0), int(c), -1),
                         cut=(who, np.where(at < 0, S.step, at), None))
        elif everyone:
            S.sync_event(members, cta_full=np.array([int(c)]))
        else:
            S.sync_event(members)
        if b in S.bar_vote:
            _reduce_votes(S, b, members)
        S.blocked[sl] &= ~arr
        arrived[sl] = False


def _reduce_votes(S, b, members):
    """bar.red at a completing barrier `b`: each member that arrived through a bar.red gets the reduction of the
    members' predicates.  Every member must have arrived through a bar.red with one reduction (PTX leaves a
    barrier that mixes them, or mixes bar.red with bar.sync / bar.arrive, undefined)."""
    votes, by_pc = S.bar_vote[b]
    pcs = S.bar_pc[b]
    reds = members & np.isin(pcs, list(by_pc))
    if not reds.any():  # a plain bar.sync of a barrier some bar.red used before
        return
    ops = {by_pc[int(pc)][0] for pc in np.unique(pcs[reds])}
    if len(ops) > 1 or (reds != members).any():
        first = int(np.flatnonzero(members)[0])
        S.report("barrier", f"barrier {b} completed with arrivals of "
                 + (f"different bar.red reductions ({', '.join(sorted(ops))})" if len(ops) > 1 else
                    "bar.red and of bar.sync / bar.arrive") + "; PTX leaves the result undefined: every thread "
                 "of a bar.red must use the same reduction at the same barrier", S.prog.ops[int(pcs[first])],
                 np.flatnonzero(members))
    held = votes[members]
    for pc in np.unique(pcs[reds]):
        red, _, put = by_pc[int(pc)]
        value = (np.uint32(np.count_nonzero(held)) if red == "popc" else held.all() if red == "and"
                 else held.any())
        put(S, np.full(S.N, value), reds & (pcs == pc))


def _check_warp_arrivals(S, b, c, arr, live):
    """bar is .aligned per warp: a warp arrives as a whole (its non-exited lanes), at one instruction.
    Different warps may use different bar instructions (producer/consumer with bar.arrive)."""
    Tp = S.Tp
    pcw = S.bar_pc[b][c * Tp:(c + 1) * Tp].reshape(-1, 32)
    aw, lw = arr.reshape(-1, 32), live.reshape(-1, 32)
    for w in np.flatnonzero(aw.any(axis=1)):
        pcs = np.unique(pcw[w][aw[w]])
        first = c * Tp + 32 * int(w)
        if len(pcs) > 1:
            where = "; ".join(f"'{S.prog.instructions[int(p)].render()}' ({S.prog.instructions[int(p)].loc})"
                              for p in pcs)
            S.report("barrier", f"barrier {b}: lanes of {S.warp_of(first)} arrived at different bar instructions "
                     f"({where}); bar is .aligned: a warp must execute one barrier instruction together",
                     S.prog.ops[int(pcs[0])], np.flatnonzero(aw[w]) + first)
        missing = lw[w] & ~aw[w]
        if missing.any():
            S.report("barrier", f"barrier {b} completed with only part of {S.warp_of(first)} arrived (lanes "
                     f"{np.flatnonzero(missing).tolist()} did not); bar is .aligned: the whole warp must execute it",
                     S.prog.ops[int(pcs[0])], np.flatnonzero(aw[w]) + first)


def recheck_barriers(S, ctas):
    """Re-check every barrier with arrivals in `ctas` (after threads exit, an arrival count may now be met).
    """
    for b in list(S.bar_arrived):
        check_barrier(S, b, ctas)


# ---------------------------------------------------------------- bar.warp.sync and member masks

def check_members(S, op, m, masks, what):
    """Warp-level .sync instructions: every lane named in a thread's member mask must execute the
    instruction with it, and the thread itself must be in its mask."""
    # lanes past the end of a partial last warp do not exist: naming them in a mask is harmless
    present = m | ~S.exists
    executing = (present.reshape(-1, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)).sum(axis=1)
    ex = np.repeat(executing, 32)
    masks = np.broadcast_to(np.asarray(masks).astype(np.uint64), (S.N,))
    own = np.uint64(1) << S.laneid.astype(np.uint64)
    bad = m & (((masks & ~ex) != 0) | ((masks & own) == 0))
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        missing = int(masks[t]) & ~int(ex[t]) & 0xFFFFFFFF
        why = (f"member mask {int(masks[t]):#010x} names lanes {_lanes(missing)} that did not execute it"
               if missing else f"lane {int(S.laneid[t])} is not in its own member mask {int(masks[t]):#010x}")
        S.report("collective", f"{what} in {S.warp_of(t)}: {why}", op, np.flatnonzero(bad))
        return False
    return _masks_agree(S, op, m, masks, what)


def _masks_agree(S, op, m, masks, what) -> bool:
    """Every lane a member mask names executes the instruction with that same mask (the ISA's rule for the
    warp-level .sync instructions: each waits for its mask's lanes with the same mask value); a lane whose
    mask differs from one it is named in is a "collective" finding."""
    mine = masks[m]
    if mine.size == 0 or (mine == mine[0]).all():
        return True
    mw, mm = masks.reshape(-1, 32), m.reshape(-1, 32)
    for j in range(32):
        names_j = (((mw >> np.uint64(j)) & np.uint64(1)) != 0) & mm & mm[:, j:j + 1]
        differ = names_j & (mw != mw[:, j:j + 1])
        if differ.any():
            w, lane = (int(x) for x in np.argwhere(differ)[0])
            t = w * 32 + lane
            S.report("collective", f"{what} in {S.warp_of(t)}: lane {lane} executes it with member mask "
                     f"{int(mw[w, lane]):#010x}, which names lane {j}, whose mask is {int(mw[w, j]):#010x}: every "
                     "lane of a member mask must pass the same mask", op, np.flatnonzero(differ.ravel()))
            return False
    return True


def _lanes(bits: int) -> str:
    return ",".join(str(i) for i in range(32) if bits >> i & 1)


def make_bar_warp_sync(P, op):
    """The executor of `bar.warp.sync`: the lanes of the member mask must all execute it (a "collective" finding
    otherwise), and it orders their memory. Returns ``fn(S, m)``, which executes it on Machine `S` for the
    threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    get_mask = P.reader(ins.operands[0], T.b32, ins)

    def bar_warp_sync(S, m):
        masks = np.broadcast_to(np.asarray(get_mask(S)).astype(np.uint64), (S.N,))
        check_members(S, op, m, masks, "bar.warp.sync")
        S.step += 1
        S.sync_event(None, groups=np.where(m, np.arange(S.N) // 32, -1))
    return bar_warp_sync


# ---------------------------------------------------------------- exit, trap, no-ops

def make_exit(P, op):
    """The executor of `exit` / `ret`: the threads end, and barriers waiting on them are re-checked. Returns
    ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the
    Op being built.
    """
    def exit_(S, m):
        bulk = getattr(S, "bulk", None)
        if bulk is not None and bulk.records:  # a bulk / TMA store still reading the CTA's shared memory
            pending = [t for t, _, _ in bulk.records if m[t]]
            if pending:
                S.report("async", "a thread exits while its bulk (TMA) store may still be reading shared memory: "
                         "cp.async.bulk.wait_group.read must retire the store first (the shared memory goes with "
                         "the CTA)", op, np.array(pending))
        S.exited |= m
        S.blocked &= ~m
        S.parked &= ~m
        recheck_barriers(S, np.unique(S.cta_local[m]))
        if getattr(S, "cluster_bar", None) is not None:
            from .exec_cluster import check_clusters
            check_clusters(S, np.unique(S.cluster_of[m]))
    return exit_


def make_trap(P, op):
    """The executor of `trap`: a "trap" finding that stops the run. Returns ``fn(S, m)``, which executes it on
    Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    def trap(S, m):
        S.fail("trap", "trap executed", op, np.flatnonzero(m))
    return trap


# ---------------------------------------------------------------- nothing can run

def on_stall(S):
    """Called when no thread can run.  Returns True if something changed (run again)."""
    live = S.exists & ~S.exited
    if not live.any():
        return False
    progressed = False
    for state in list(S.mbars.values()):
        progressed |= flush(S, state)
    if progressed:
        return True
    if S.parked.any() and S.mbar_epoch != S.unpark_epoch:
        S.unpark_epoch = S.mbar_epoch
        S.parked[:] = False
        return True
    # deadlock: describe who waits where, then end the batch
    stuck = live & (S.blocked | S.parked)
    groups = {}
    for t in np.flatnonzero(stuck):
        groups.setdefault(int(S.pcs[t]) - 1, []).append(t)
    msgs = []
    for pc, ts in sorted(groups.items()):
        ins = S.prog.instructions[pc]
        msgs.append(f"{len(ts)} threads at '{ins.render()}' ({ins.loc})")
    for state in S.mbars.values():  # why the barriers they wait on cannot complete
        if state.tx > 0:
            who = S.prog.instructions[state.tx_pc] if state.tx_pc >= 0 else None
            msgs.append(f"the mbarrier at {where_shared(S, state.key)} still expects {state.tx} transaction "
                        "bytes that no copy in flight will deliver (expect_tx announced more bytes than the "
                        "copies bring" + (f": '{who.render()}' at {who.loc}: {getattr(who.loc, 'code', '')}"
                                           if who is not None else "") + ")")
        elif state.pending > 0 and state.pending < state.count:
            msgs.append(f"the mbarrier at {where_shared(S, state.key)} still expects {state.pending} of its "
                        f"{state.count} arrivals")
        elif (S.parked & (S.park_key == state.key) & live).any():
            msgs.append(f"the mbarrier at {where_shared(S, state.key)} has completed {state.phase} phase(s) and "
                        f"nothing has arrived in its current one (parity {state.phase & 1}): its waiters wait for "
                        "arrivals that never come (a missing arrive / release, or a wait on the wrong phase: the "
                        "parity flips once per completed phase)")
    msgs += waits(S, stuck)  # warpgroups waiting at setmaxnreg.inc for registers nobody will give back
    exited_n = int(np.count_nonzero(S.exists & S.exited))
    first_pc = min(groups) if groups else 0
    S.report("barrier", "deadlock: no thread can make progress; " + "; ".join(msgs)
             + (f"; {exited_n} threads have exited" if exited_n else ""),
             S.prog.ops[first_pc], np.flatnonzero(stuck))
    S.exited |= stuck
    S.blocked[:] = False
    S.parked[:] = False
    return True
