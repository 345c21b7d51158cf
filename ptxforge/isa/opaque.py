"""What PTX text may hold that the legal-form tables do not know: opaque instructions, free-form
labels and operands kept verbatim.

An *opaque* instruction is a line of PTX that ptxforge read but could not match to a legal form
(`ptxforge.parse(..., strict=False)`).  It renders exactly as it was read, names the registers it
uses (so they stay declared), is marked in listings and is refused by the interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .instruction import Instruction
from .operands import Label, Operand
from .targets import BASE

_PTXFORGE_INTERNAL = True

#: The opcode every opaque instruction carries (no family, no interpreter executor).
OPAQUE = "opaque"


@dataclass(frozen=True, slots=True)
class RawOperand(Operand):
    """An operand spelled verbatim (e.g. `%envreg2`, an address expression): rendered as read."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class PlainLabel(Label):
    """A label whose name is rendered as written (`LOOP`, `$Lfoo`), not as ptxforge's `$L_<name>`."""

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class OpaqueInfo:
    """Why an instruction is opaque, and the mnemonic as read (the first word of the statement)."""

    mnemonic: str
    reason: str


def opaque(mnemonic: str, operands: tuple, reason: str, *, n_dst: int = 0, guard=None,
           loc=None) -> Instruction:
    """An instruction rendered verbatim as `mnemonic op, op, ...;` that no table vouches for.

    `operands` are the operands as read (registers stay `Reg`, so the kernel keeps declaring them);
    `reason` says what the tables rejected.  The opcode is `OPAQUE`, so the interpreter refuses it
    with that reason when a thread reaches it.
    """
    return Instruction(OPAQUE, mnemonic, tuple(operands), n_dst, guard, BASE,
                       OpaqueInfo(mnemonic, reason), (), None, loc)


def is_opaque(ins) -> bool:
    """Whether an instruction was kept verbatim instead of matched to a legal form."""
    return isinstance(ins, Instruction) and ins.opcode == OPAQUE
