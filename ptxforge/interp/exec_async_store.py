"""st.async and red.async (sm_90): a store or an atomic reduction into a cluster CTA's shared memory that
completes on that CTA's mbarrier.

Each thread's access is its own transfer, like a small bulk copy to a partner (`exec_async.queue_landing`): the
value is read from the registers when the instruction issues, the destination is in flight from then on (a
load of it, or another write, before the mbarrier phase that counts its bytes completes is an "async"
finding), and the bytes land, stored or combined into what is there, when the destination's mbarrier is
polled, counting their size against its transaction count (`mbarrier::complete_tx::bytes`).  red.async
combines as `atom` does: `.inc` / `.dec` wrap at the source value, `.min` / `.max` by the type's sign.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from .exec_memory import address_reader
from .exec_async import queue_landing
from .exec_reduce import combine
from .values import UINT

_PTXFORGE_INTERNAL = True


def make_async_store(P, op):
    """Executor of `st.async` / `red.async`: per thread, the value queued to land at its shared::cluster
    destination on the mbarrier it names (see the module docstring)."""
    ins = op.ins
    info = ins.info
    t = info.type
    get_dst = address_reader(P, ins.operands[0], ins, "shared")
    get_mbar = address_reader(P, ins.operands[2], ins, "shared")
    bt = T.lookup(f"b{t.bits}")
    readers = [P.reader(r, bt, ins) for r in P.regs_of(ins.operands[1])]
    udt = UINT[t.bits]
    nbytes = t.bits // 8 * len(readers)
    land = None if info.op is None else (lambda old, new: combine(info.op, t.name, old, new))
    what = f"{ins.opcode} destination"

    def async_store(S, m):
        thr = np.flatnonzero(m)
        if not len(thr):
            return
        cols = np.stack([np.broadcast_to(np.asarray(r(S)).astype(udt), (S.N,))[thr] for r in readers], axis=1)
        data = np.ascontiguousarray(cols).view(np.uint8).reshape(len(thr), nbytes)
        dsts = np.broadcast_to(np.asarray(get_dst(S)), (S.N,))[thr]
        mbars = np.broadcast_to(np.asarray(get_mbar(S)), (S.N,))[thr]
        for i in range(len(thr)):
            queue_landing(S, op, dsts[i:i + 1], thr[i:i + 1], data[i:i + 1], mbars[i:i + 1], what, land,
                          align=nbytes, atomic=land is not None)
    return async_store
