"""Runs a batch of CTAs: the instruction loop.

Each step executes one instruction for all threads that sit at the *lowest* pc among the threads
that can run, with the mask of those threads (with a priority per thread, `order=
"last-warpgroup-first"`: among the runnable threads of the highest priority only).  Threads that branch away wait at their target
until the others catch up, so structured control flow (if/else, loops with per-thread trip
counts) reconverges by itself, and a warp-collective instruction that part of a warp reaches is
seen as such.  While every runnable thread is at the same pc the loop keeps a scalar pc and one
mask ("converged" mode) and touches no per-thread pc array at all.

Threads leave the runnable set by exiting, waiting at bar.sync (blocked) or failing an mbarrier
test/try_wait (parked until the barrier changes).  When nothing can run, pending asynchronous
arrivals are delivered and parked threads retried; if that changes nothing it is a deadlock.

Not fair in one case: a thread spinning on an ordinary memory flag that only a thread at a
higher pc will set keeps the lowest pc forever (a GPU's independent thread scheduling would let
the setter run); such a loop ends in a "limit" finding.  Wait on an mbarrier instead.
"""

from __future__ import annotations

import numpy as np

from .ops import BRANCH, PLAIN

_PTXFORGE_INTERNAL = True


class Stats:
    """Execution counts of a run: scheduler steps, thread-instructions and warp-instructions."""
    __slots__ = ("steps", "thread_instructions", "warp_instructions")

    def __init__(self):
        self.steps = 0
        self.thread_instructions = 0
        self.warp_instructions = 0


def run_batch(S, stats: Stats, max_steps: int):
    """Run the batch `S` (a Machine) until every thread has exited, counting into `stats`.

    Each step picks the lowest pc among runnable threads and executes that instruction for all of them;
    blocked threads (barriers, waits) are resumed when their condition holds, and a deadlock or `max_steps`
    steps is a finding.
    """
    from .exec_sync import on_stall
    ops = S.prog.ops
    nops = len(ops)
    V = S.V
    pcs = S.pcs
    prio = S.priority
    count = np.count_nonzero
    runnable = ~(S.exited | S.blocked | S.parked)
    nrun = count(runnable)
    conv = False
    pc = 0
    mask = runnable
    nmask = nwarps = 0
    steps = tin = win = 0
    limit = max_steps
    while True:
        if not conv:
            if nrun == 0:
                if not on_stall(S):
                    break
                runnable = ~(S.exited | S.blocked | S.parked)
                nrun = count(runnable)
                continue
            if prio is None:
                pc = int(pcs[runnable].min())
                mask = runnable & (pcs == pc)
            else:  # the highest-priority runnable threads, at their lowest pc
                top = runnable & (prio == prio[runnable].max())
                pc = int(pcs[top].min())
                mask = top & (pcs == pc)
            nmask = count(mask)
            nwarps = count(mask.reshape(-1, 32).any(axis=1))
            conv = nmask == nrun
        if pc >= nops:  # ran past the last instruction: the threads end
            S.exited |= mask
            runnable = ~(S.exited | S.blocked | S.parked)
            nrun = count(runnable)
            conv = False
            continue
        op = ops[pc]
        S.step += 1
        steps += 1
        tin += nmask
        win += nwarps
        if steps > limit:
            S.fail("limit", f"more than {limit} steps: an endless loop? (raise max_steps= if the kernel is "
                   "just long)", op, np.flatnonzero(mask))
        g = op.guard
        if g >= 0:
            m = (mask & ~V[g]) if op.negate else (mask & V[g])
        else:
            m = mask
        flow = op.flow
        if flow == PLAIN:
            if g < 0 or m.any():
                op.fn(S, m)
            if conv:
                pc += 1
            else:
                pcs[mask] = pc + 1
        elif flow == BRANCH:
            if g < 0:
                if conv:
                    pc = op.target
                else:
                    pcs[mask] = op.target
                continue
            ntaken = count(m)
            if op.uni and 0 < ntaken < nmask:
                _check_uniform_branch(S, op, mask, m)
            if ntaken == 0:
                if conv:
                    pc += 1
                else:
                    pcs[mask] = pc + 1
            elif ntaken == nmask:
                if conv:
                    pc = op.target
                else:
                    pcs[mask] = op.target
            else:
                pcs[mask] = pc + 1
                pcs[m] = op.target
                conv = False
        else:  # BLOCKING
            pcs[mask] = pc + 1
            if g < 0 or m.any():
                op.fn(S, m)
            runnable = ~(S.exited | S.blocked | S.parked)
            nrun = count(runnable)
            conv = False
    stats.steps += steps
    stats.thread_instructions += tin
    stats.warp_instructions += win


def _check_uniform_branch(S, op, mask, m):
    """bra.uni promises that every active thread of a warp branches the same way."""
    mw = mask.reshape(-1, 32)
    tw = m.reshape(-1, 32)
    split = (tw.any(axis=1)) & ((mw & ~tw).any(axis=1))
    if split.any():
        w = int(np.flatnonzero(split)[0])
        # (the branch past a guarded call.uni's inlined body targets a `name@ret` label no PTX text can spell)
        what = "call.uni" if any("@ret" in str(x) for x in op.ins.operands) else "bra.uni"
        S.report("branch", f"{what} is divergent in {S.warp_of(w * 32)}: lanes "
                 f"{np.flatnonzero(tw[w]).tolist()} branch, lanes {np.flatnonzero(mw[w] & ~tw[w]).tolist()} do "
                 "not; use a plain bra (or make the condition warp-uniform)", op, np.flatnonzero(mw[w]) + 32 * w)
