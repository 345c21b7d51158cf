"""The `.pragma` strings ptxas knows: where each may stand, the argument it takes and the PTX ISA it needs
(ptxas 13.0: nounroll from the start, used_bytes_mask from 8.3, enable_smem_spilling from 8.7, frequency
from 9.0; each refused below that)."""

from __future__ import annotations

import re
from typing import NamedTuple

from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True


class Pragma(NamedTuple):
    """One pragma: `where` it may stand ("anywhere" or "function": inside a body only), the regular
    expression of its one argument (None: it takes none) and what it needs."""

    where: str
    arg: str | None
    req: Requirement


PRAGMAS = {
    "nounroll": Pragma("anywhere", None, BASE),
    "used_bytes_mask": Pragma("function", r"0[xX][0-9a-fA-F]+|\d+", Requirement(80, V("8.3"))),
    "enable_smem_spilling": Pragma("function", None, Requirement(80, V("8.7"))),
    "frequency": Pragma("function", r"\d+", Requirement(80, V("9.0"))),
}

_WORD = re.compile(r'"([^"]*)"')


def pragma_requirements(line: str):
    """(Requirement, pragma word) of each known pragma a `.pragma "w1", "w2";` line names that needs more than
    the base PTX ISA."""
    for word in _WORD.findall(line):
        parts = word.split()
        info = PRAGMAS.get(parts[0]) if parts else None
        if info is not None and info.req is not BASE:
            yield info.req, parts[0]
