"""setmaxnreg: the CTA's register pool that warpgroups move registers within.

A kernel with a register cap at entry (`Kernel.entry_registers`: its .maxnreg, or the cap that
.maxntid with .minnctapersm gives) starts every warp with that many registers per thread; the CTA's
warps hold all of them, so its pool of free registers starts empty.  ``setmaxnreg.dec n`` gives a
warpgroup's registers above n per thread back to the pool; ``setmaxnreg.inc n`` takes the registers
up to n from it, and waits while the pool holds fewer.  So a plan that asks for more than the launch
gave never continues on a GPU: here its warpgroups stay blocked, and when nothing else can run the
deadlock report says how many registers each waits for and how many the pool has (exec_sync.on_stall
reads `waits`).

After a setmaxnreg the warpgroup's four warps must synchronize before the next one (PTX): a second one
without a synchronization among them in between is a "registers" finding.  An .inc to no more registers
than the warpgroup holds moves nothing, as does a .dec to no fewer (a
CTA of 256 threads starts with 255 each, so its consumers' .inc to 232 keeps what they have; such
kernels run on the H200).  Registers of warps that exit are not counted as returned to the pool
(nothing in PTX promises it).  A kernel without an entry cap: ptxas ignores setmaxnreg there
(warning C7508), and so does the interpreter.
"""

from __future__ import annotations

import numpy as np

from .access import ordered
from .exec_wgmma import WARPGROUP, whole_warpgroups

_PTXFORGE_INTERNAL = True


class RegisterPool:
    """Per batch: each warpgroup's registers per thread, each CTA's free registers, the waiting .inc's."""

    __slots__ = ("entry", "held", "free", "waiting", "last")

    def __init__(self, S, entry: int):
        self.entry = entry
        self.held = np.full(S.N // WARPGROUP, entry, dtype=np.int64)  # per thread, per warpgroup
        self.free = np.zeros(S.B, dtype=np.int64)  # registers of each CTA no warp holds
        self.waiting: list = []  # (warpgroup, registers per thread asked for, op), oldest first
        self.last = np.full(S.N // WARPGROUP, -1, dtype=np.int64)  # step of each warpgroup's last setmaxnreg

    def grant(self, S) -> None:
        """Give waiting .inc's the registers they asked for, oldest first per CTA, while the pool has them."""
        left = []
        for g, n, op in self.waiting:
            c = S.cta_local[g * WARPGROUP]
            need = (n - self.held[g]) * WARPGROUP
            if need <= self.free[c]:
                self.free[c] -= need
                self.held[g] = n
                S.blocked[g * WARPGROUP:(g + 1) * WARPGROUP] = False
            else:
                left.append((g, n, op))
        self.waiting = left


def pool_of(S):
    """The batch's RegisterPool, made on the first setmaxnreg; None when the kernel has no entry cap."""
    pool = getattr(S, "regpool", None)
    if pool is None:
        entry = S.prog.kernel.entry_registers
        if entry is None:
            return None
        pool = S.regpool = RegisterPool(S, entry)
    return pool


def make_setmaxnreg(P, op):
    """The executor of `setmaxnreg.{inc,dec}`: checked to run in whole warpgroups (.sync.aligned), then the
    registers move between the warpgroup and its CTA's pool; an .inc the pool cannot serve blocks the
    warpgroup until a .dec elsewhere frees enough. Returns ``fn(S, m)``, which executes it on Machine `S` for
    the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    action, n = op.ins.info

    def setmaxnreg(S, m):
        groups = whole_warpgroups(S, op, m, "setmaxnreg")
        pool = pool_of(S)
        if pool is None:
            return
        for g in groups:
            g = int(g)
            if pool.last[g] >= 0 and not _warps_synchronized(S, g, int(pool.last[g])):
                S.report("registers", "a second setmaxnreg in a warpgroup whose warps have not synchronized since "
                         "its last one: PTX asks all four warps to synchronize explicitly in between (a bar.sync "
                         "of the warpgroup's threads, for one)", op, np.arange(g * WARPGROUP, (g + 1) * WARPGROUP))
            pool.last[g] = S.step
            held = int(pool.held[g])
            if action == "dec":
                if n < held:
                    pool.free[S.cta_local[g * WARPGROUP]] += (held - n) * WARPGROUP
                    pool.held[g] = n
            elif n > held:
                pool.waiting.append((g, n, op))
                S.blocked[g * WARPGROUP:(g + 1) * WARPGROUP] = True
        pool.grant(S)
    return setmaxnreg


def _warps_synchronized(S, g: int, since: int) -> bool:
    """Whether the four warps of warpgroup `g` have all synchronized with each other after step `since`."""
    lead = g * WARPGROUP + 32 * np.arange(4)
    first, second = np.repeat(lead, 4), np.tile(lead, 4)
    return bool(ordered(S, first, np.full(16, since, dtype=np.int64), second).all())


def waits(S, stuck) -> list:
    """Why the warpgroups blocked at setmaxnreg.inc among the `stuck` threads cannot go on (for the
    deadlock report)."""
    pool = getattr(S, "regpool", None)
    if pool is None:
        return []
    msgs = []
    for g, n, op in pool.waiting:
        t = g * WARPGROUP
        if not stuck[t]:
            continue
        c = S.cta_local[t]
        need = (n - int(pool.held[g])) * WARPGROUP
        msgs.append(f"the warpgroup of threads {S.local_tid[t]}..+127 of cta {S.ctas[c]} waits at '{op.ins.render()}' "
                    f"({op.ins.loc}) for {need} registers, and its CTA's pool holds {int(pool.free[c])}: the CTA "
                    f"started with {S.T} threads x {pool.entry} registers ({S.T * pool.entry}), and .inc only takes "
                    "what other warpgroups gave back with .dec (ask for fewer, or have another warpgroup give more)")
    return msgs
