"""One compiled instruction of the interpreter (`Op`) and how it changes control flow.

`dispatch.py` builds an `Op` for each instruction, the `exec_*` files build its executor, the
scheduler reads its `flow`, and `program.py` keeps the list.  These names live here so that
each of those files can import them without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..isa.instruction import Instruction
from ..isa.operands import Addr

_PTXFORGE_INTERNAL = True

# How an op changes control flow (the scheduler dispatches on it).
PLAIN = 0  # every thread of the step moves to pc + 1
BRANCH = 1  # bra: the scheduler splits the step by the guard
BLOCKING = 2  # may exit, block or park threads (ret, bar, mbarrier waits, trap)


@dataclass
class Op:
    """One instruction ready to run: its executor `fn(S, mask)`, its control-flow kind and branch target, its guard slot."""

    pc: int
    ins: Instruction
    fn: object  # fn(S, m) -> None
    flow: int = PLAIN
    target: int = -1  # branch target pc
    uni: bool = False
    guard: int = -1  # slot of the guard predicate, -1 when unguarded
    negate: bool = False


def address_parts(addr):
    """(base operand, constant offset) of a memory operand."""
    if isinstance(addr, Addr):
        return addr.base, addr.offset
    return addr, 0
