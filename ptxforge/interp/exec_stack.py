"""The alloca stack on the interpreter: alloca, stacksave, stackrestore.

A kernel that uses them gets a per-thread stack of `memory.STACK_BYTES` at the top of its `.local`
memory (`LocalLayout.stack_base` .. `stack_top`); the stack pointer (`Machine.sp`, a local offset)
starts at the top and alloca moves it down: `ptr = (sp - size) rounded down to max(align, 8)`,
the lowest byte of the allocation, a `.local` address for ld.local / st.local (cvta.local makes
it generic).  stacksave reads the pointer, stackrestore sets it.  Stack bytes below the pointer
are out of bounds, so memory released by stackrestore, or by the return of the device function
that allocated it, is an `oob` finding when touched.  An alloca past the bottom of the stack is an
`oob` finding (the pointer stays), as is a stackrestore to a value outside the stack.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.operands import Imm

_PTXFORGE_INTERNAL = True

#: alloca's alignment when none is given: PTX's minimum guaranteed alignment
MIN_ALIGN = 8


def make_stacksave(P, op):
    """The executor of `stacksave.u64 d`: d = the thread's stack pointer. Returns ``fn(S, m)``."""
    put = P.writer(op.ins.operands[0], T.u64, op.ins)
    return lambda S, m: put(S, S.sp.astype(np.uint64), m)


def make_stackrestore(P, op):
    """The executor of `stackrestore.u64 a`: the stack pointer = a (within the stack, else a finding). Returns
    ``fn(S, m)``."""
    read = P.reader(op.ins.operands[0], T.u64, op.ins)

    def run(S, m):
        L = S.launch.local
        v = np.broadcast_to(np.asarray(read(S)).astype(np.int64), (S.N,))
        bad = m & ((v < L.stack_base) | (v > L.stack_top))
        if bad.any():
            t = np.flatnonzero(bad)
            S.report("oob", f"stackrestore to {int(v[t[0]]):#x}, which is not in the alloca stack (local offsets "
                            f"{L.stack_base}..{L.stack_top}): restore a value stacksave returned", op, t)
        ok = m & ~bad
        S.sp[ok] = v[ok]
    return run


def make_alloca(P, op):
    """The executor of `alloca.u64 ptr, size{, align}`: moves the stack pointer down by `size` bytes, aligned,
    and returns it. Returns ``fn(S, m)``."""
    ins = op.ins
    put = P.writer(ins.operands[0], T.u64, ins)
    read_size = P.reader(ins.operands[1], T.u64, ins)
    align = max(int(ins.operands[2].value) if len(ins.operands) > 2 and isinstance(ins.operands[2], Imm) else 0,
                MIN_ALIGN)

    def run(S, m):
        L = S.launch.local
        size = np.broadcast_to(np.asarray(read_size(S)).astype(np.uint64), (S.N,))
        big = size > np.uint64(L.stack_bytes)
        new = (S.sp - np.minimum(size, np.uint64(L.stack_bytes)).astype(np.int64)) & ~np.int64(align - 1)
        over = m & (big | (new < L.stack_base))
        if over.any():
            t = np.flatnonzero(over)
            used = L.stack_top - int(S.sp[t[0]])
            S.report("oob", f"stack overflow: alloca of {int(size[t[0]])} bytes (aligned to {align}) with {used} "
                            f"bytes in use; the interpreter's stack holds {L.stack_bytes} bytes per thread", op, t)
        ok = m & ~over
        S.sp[ok] = new[ok]
        put(S, np.where(over, new, S.sp).astype(np.uint64), m)
    return run
