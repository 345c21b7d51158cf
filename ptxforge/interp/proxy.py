"""The generic proxy and the async proxy: shared memory that wgmma or a TMA store reads through the
async proxy must not be last written by an ordinary store (or cp.async) of a thread that has not
executed `fence.proxy.async` since (the "proxy" finding).  Writes by TMA / bulk copies are
async-proxy writes already.  A proxy fence that covers shared memory (`isa.sync.PROXY_FENCES`:
fence.proxy.async, its .shared::cta / .shared::cluster forms, the ::generic.release form) records its
time per thread (exec_async.make_fence); `fence.proxy.async.global` does not count here.  Global memory
the async proxy reads is checked in `global_order`.
"""

from __future__ import annotations

import numpy as np

_PTXFORGE_INTERNAL = True


def proxy_check(S, op, flat, reader):
    """Bytes `flat` read through the async proxy: last written by a generic write not yet fenced?"""
    if not S.track:
        return
    w = S.w_tid[flat]
    written = w >= 0
    if not written.any():
        return
    idx = np.flatnonzero(written)
    pcs = S.w_pc[flat[idx]]
    ins = S.prog.instructions
    generic = np.array([not ins[int(p)].opcode.startswith("cp.async.bulk") for p in np.unique(pcs)])
    gen_pcs = np.unique(pcs)[generic]
    if not len(gen_pcs):
        return
    idx = idx[np.isin(pcs, gen_pcs)]
    fence = getattr(S, "proxy_fence", None)
    fenced_at = fence[w[idx]] if fence is not None else np.full(len(idx), -1)
    bad = idx[fenced_at < S.w_time[flat[idx]]]
    if len(bad):
        from .access import where_shared
        writer = ins[int(S.w_pc[flat[bad[0]]])]
        S.report("proxy", f"{op.ins.opcode} reads shared memory ({where_shared(S, flat[bad[0]])}) through the async "
                 "proxy that ordinary stores wrote without a later fence.proxy.async (the writing threads must "
                 "execute fence.proxy.async.shared::cta before the barrier that precedes this read)", op,
                 np.array([reader]), other=writer, other_threads=np.unique(w[bad]))
