"""The tensormap proxy: TMA reads a tensor map in global memory through it, so a map written there during the
launch (by `tensormap.cp_fenceproxy`, or by `tensormap.replace` in global memory) is seen by a TMA copy only
after the issuing thread executed `fence.proxy.tensormap::generic.acquire.<scope> [map], 128` since the write.
A copy through such a map without that acquire is a "proxy" finding naming the write.  (The release half,
which cp_fenceproxy carries itself, is not checked.)
"""

from __future__ import annotations

import numpy as np

from .access import map_access
from .exec_memory import address_reader

_PTXFORGE_INTERNAL = True


class TensormapOrder:
    """When each map in global memory was last written (heap offset -> (step, pc)), and when each thread last
    acquired each one ((thread, heap offset) -> step)."""

    def __init__(self):
        self.written: dict = {}
        self.acquired: dict = {}


def state(S) -> TensormapOrder:
    """The launch's TensormapOrder, made on first use."""
    st = getattr(S, "tensormap_order", None)
    if st is None:
        st = S.tensormap_order = TensormapOrder()
    return st


def on_written(S, op, off: int) -> None:
    """The 128-byte map at heap offset `off` was written by `op` now."""
    state(S).written[off] = (S.step, op.pc)


def make_tensormap_acquire(P, op):
    """Executor of `fence.proxy.tensormap::generic.acquire.<scope> [map], 128`: each thread's acquire of the map."""
    ins = op.ins
    get_addr = address_reader(P, ins.operands[0], ins, "generic")

    def acquire(S, m):
        thr = np.flatnonzero(m)
        st = state(S)
        for part in map_access(S, op, "generic", get_addr(S)[thr], thr, 128, align=64, what=ins.opcode):
            if part.space == "global":
                for t, off in zip(part.thr.tolist(), part.off.tolist()):
                    st.acquired[(t, off)] = S.step
    return acquire


def check_acquired(S, op, off: int, thread: int) -> None:
    """A TMA copy by `thread` reads the map at heap offset `off`: report it when this launch wrote the map and the
    thread has not acquired it since."""
    st = getattr(S, "tensormap_order", None)
    if st is None or off not in st.written:
        return
    step, pc = st.written[off]
    if st.acquired.get((thread, off), -1) < step:
        S.report("proxy", f"{op.ins.opcode} reads a tensor map that this launch wrote into global memory without "
                 "fence.proxy.tensormap::generic.acquire.<scope> [map], 128 by this thread since the write (TMA "
                 "reads maps through the tensormap proxy)", op, np.array([thread]),
                 other=S.prog.instructions[pc], other_threads=np.array([], dtype=np.int64))
