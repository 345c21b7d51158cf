"""Cache control without data: prefetchu (uniform-cache prefetch), discard (drop an L2 line
without writing it back), applypriority (set an L2 line's eviction priority).

Legal forms as data: `CACHE_CONTROL` (opcode -> level, the state spaces it may name, the fixed
size operand, requirement).  None of them reads or writes a register; discard makes the 128
bytes it names undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from .instruction import check_addr, make
from .operands import Imm
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class CacheControlForm:
    """One cache-control opcode: its level modifier, spaces (None: generic), size operand, requirement."""

    opcode: str
    level: str
    spaces: tuple
    size: int | None
    req: Requirement


CACHE_CONTROL = {
    "prefetchu": CacheControlForm("prefetchu", "L1", (None,), None, BASE),
    "discard": CacheControlForm("discard", "L2", (None, "global"), 128, Requirement(80, V("7.4"))),
    "applypriority": CacheControlForm("applypriority", "L2::evict_normal", (None, "global"), 128,
                                      Requirement(80, V("7.4"))),
}


def cache_control(opcode, addr, space=None):
    """`prefetchu.L1 [a]`, `discard{.global}.L2 [a], 128`, `applypriority{.global}.L2::evict_normal [a], 128`."""
    form = CACHE_CONTROL.get(opcode)
    if form is None:
        raise ValidationError(f"unknown cache-control opcode {opcode!r}; one of {', '.join(CACHE_CONTROL)}")
    if space not in form.spaces:
        raise ValidationError(f"{opcode} takes " + " or ".join("a generic" if s is None else "a ." + s
                                                              for s in form.spaces) + f" address, not {space!r}")
    a = check_addr(addr, space or "generic", opcode)
    ops = (a,) if form.size is None else (a, Imm(form.size))
    return make(opcode, (opcode, space, form.level), ops, req=form.req, info=form, mods=(space,) if space else ())


class CacheOps:
    """Builder methods for cache control."""

    def prefetchu(self, addr, *, offset=0, pred=None):
        """`prefetchu.L1 [addr]`: bring the line at a generic address into the uniform cache."""
        self.emit(cache_control("prefetchu", self._addr(addr, offset)), pred)

    def discard(self, addr, *, space="global", offset=0, pred=None):
        """`discard{.global}.L2 [addr], 128`: drop the 128-byte L2 line without writing it back; its
        contents become undefined (space "global" or None for a generic address)."""
        self.emit(cache_control("discard", self._addr(addr, offset), space), pred)

    def applypriority(self, addr, *, space="global", offset=0, pred=None):
        """`applypriority{.global}.L2::evict_normal [addr], 128`: give the 128-byte L2 line normal
        eviction priority (undoing an evict_last policy)."""
        self.emit(cache_control("applypriority", self._addr(addr, offset), space), pred)
