"""Which rows of the PTX ISA 9.0 instruction index (`ptxforge.isa.coverage.ISA_ROWS`) ptxforge
expresses, derived from the ISA tables rather than written down: a row is expressed when some
legal form the tables enumerate (`ptxforge.testing.candidates`, on every tested target) emits an
instruction of that row.  `markdown_table()` is the table `docs/isa-coverage.md` shows (a test
keeps the page equal to it), `MISSING_WHY` says why each usable row is not expressed.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

from ..isa.coverage import ISA_ROWS, IsaRow
from .spec import FAMILIES, TARGETS

_PTXFORGE_INTERNAL = True

#: Why a row usable on sm_80 .. sm_90a has no legal form in the tables (a test checks that this is
#: exactly the set of such rows): none today.
MISSING_WHY: dict = {}


@dataclass(frozen=True)
class RowCoverage:
    """One ISA row and what ptxforge makes of it: an example mnemonic it emits (None: none)."""

    row: IsaRow
    example: str | None

    @property
    def expressed(self) -> bool:
        """Whether some legal form of the tables emits an instruction of this row."""
        return self.example is not None


@functools.lru_cache(maxsize=None)
def emitted_instructions() -> tuple:
    """Every distinct (opcode, mnemonic, instruction) the tables' legal forms emit on the tested targets."""
    from .emit import build_module
    from .candidates import legal_candidates
    seen, out = set(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for target in TARGETS:
            for fam in FAMILIES:
                specs = legal_candidates(target, fam)
                for i in range(0, len(specs), 400):
                    for k in build_module(target, specs[i:i + 400]).kernels:
                        for ins in k.instructions:
                            key = (ins.opcode, ins.mnemonic, _is_vec_mov(ins))
                            if key not in seen:
                                seen.add(key)
                                out.append(ins)
    return tuple(out)


def _is_vec_mov(ins) -> bool:
    from ..isa.operands import Vec
    return ins.opcode == "mov" and any(isinstance(o, Vec) for o in ins.operands)


@functools.lru_cache(maxsize=None)
def coverage() -> tuple:
    """A `RowCoverage` for every row of `ISA_ROWS`, in the ISA's order."""
    emitted = emitted_instructions()
    out = []
    for row in ISA_ROWS:
        hits = sorted({ins.mnemonic for ins in emitted if row.matches(ins)}, key=lambda m: (len(m), m))
        out.append(RowCoverage(row, hits[0] if hits else None))
    return tuple(out)


def counts() -> tuple:
    """(rows, rows usable on sm_80..sm_90a, usable rows expressed)."""
    cov = coverage()
    usable = [c for c in cov if c.row.usable]
    return len(cov), len(usable), sum(c.expressed for c in usable)


def markdown_table() -> str:
    """The coverage table as `docs/isa-coverage.md` shows it."""
    lines = ["| ISA section | instruction | sm_80-sm_90a | ptxforge emits, e.g. |", "|---|---|---|---|"]
    for c in coverage():
        usable = "yes" if c.row.usable else f"no ({c.row.why})"
        if c.expressed:
            got = f"`{c.example}`"
        elif c.row.usable:
            got = "missing: " + MISSING_WHY.get(c.row.name, "?")
        else:
            got = ""
        lines.append(f"| {c.row.section} | {c.row.name} | {usable} | {got} |")
    return "\n".join(lines) + "\n"
