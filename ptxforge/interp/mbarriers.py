"""Finding the mbarriers an instruction names: shared by the mbarrier instructions and by the
asynchronous copies that complete on a barrier (cp.async.mbarrier.arrive, bulk copies).

An mbarrier's state lives in `S.mbars`, keyed by its shared-memory offset (see exec_mbarrier.py).
"""

from __future__ import annotations

import numpy as np

from .access import Part, map_access, shadow_read

_PTXFORGE_INTERNAL = True


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
