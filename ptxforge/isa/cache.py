"""Cache control without data: prefetchu (uniform-cache prefetch), discard (drop an L2 line
without writing it back), applypriority (set an L2 line's eviction priority), and the cache
policies of an address range (createpolicy.range) or a CUDA access property (createpolicy.cvt).

Legal forms as data: `CACHE_CONTROL` (opcode -> level, the state spaces it may name, the fixed
size operand, requirement).  None of them reads or writes a register; discard makes the 128
bytes it names undefined.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_value, int_arg, int_or_val, make
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


#: createpolicy priorities: any as the primary, evict_first/evict_unchanged as the secondary.
POLICY_PRIMARY = ("L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged")
POLICY_SECONDARY = ("L2::evict_first", "L2::evict_unchanged")
REQ_POLICY = Requirement(80, V("7.4"))


def createpolicy_range(d, addr, primary_size, total_size, primary="L2::evict_last", secondary=None, space=None):
    """createpolicy.range{.global}.primary{.secondary}.b64 d, [a], primary_size, total_size: a policy
    giving `primary_size` bytes from a the primary priority and the rest of `total_size` the
    secondary one (default evict_unchanged)."""
    if primary not in POLICY_PRIMARY:
        raise ValidationError(f"createpolicy primary priority is one of {', '.join(POLICY_PRIMARY)}, not {primary!r}")
    if secondary is not None and secondary not in POLICY_SECONDARY:
        raise ValidationError(f"createpolicy secondary priority is {' or '.join(POLICY_SECONDARY)}, not {secondary!r}")
    if space not in (None, "global"):
        raise ValidationError(f"createpolicy.range takes a generic or .global address, not {space!r}")
    check_value(d, T.b64, "createpolicy destination", imm_ok=False)
    a = check_addr(addr, space or "generic", "createpolicy.range")
    sizes = []
    for what, n in (("primary size", primary_size), ("total size", total_size)):
        if (v := int_arg(n, f"createpolicy.range {what}", ".u32")) is not None:
            if not 0 <= v <= 0xFFFFFFFF:
                raise ValidationError(f"createpolicy.range {what} {v} does not fit .u32")
            n = Imm(v)
        else:
            check_value(n, T.u32, f"createpolicy.range {what}", imm_ok=False)
        sizes.append(n)
    if isinstance(sizes[0], Imm) and isinstance(sizes[1], Imm) and sizes[0].value > sizes[1].value:
        raise ValidationError(f"createpolicy.range primary size {sizes[0].value} exceeds the total size "
                              f"{sizes[1].value}")
    return make("createpolicy", ("createpolicy", "range", space, primary, secondary, "b64"), (d, a, *sizes),
                n_dst=1, req=REQ_POLICY, mods=("range",))


def createpolicy_cvt(d, prop):
    """createpolicy.cvt.L2.b64 d, prop: the policy of a 64-bit CUDA access property."""
    check_value(d, T.b64, "createpolicy destination", imm_ok=False)
    check_value(prop, T.b64, "createpolicy.cvt access property", imm_ok=False)
    return make("createpolicy", ("createpolicy", "cvt", "L2", "b64"), (d, prop), n_dst=1, req=REQ_POLICY,
                mods=("cvt",))


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

    def createpolicy_range(self, addr, primary_size, total_size, *, primary="L2::evict_last", secondary=None,
                           space=None, dst=None):
        """`createpolicy.range{.global}.primary{.secondary}.b64 d, [addr], primary_size, total_size`:
        a 64-bit cache policy (for `policy=` of ld/st/atom/red and cp.async) that gives the first
        `primary_size` bytes at addr the primary priority and the rest up to `total_size` the
        secondary one."""
        d = self._dst(dst, T.b64)
        sizes = [int_or_val(self._val, n, f"createpolicy.range {what}", t=T.u32)
                 for what, n in (("primary size", primary_size), ("total size", total_size))]
        self.emit(createpolicy_range(d, self._addr(addr), *sizes, primary, secondary, space))
        return d

    def createpolicy_cvt(self, prop, *, dst=None):
        """`createpolicy.cvt.L2.b64 d, prop`: a cache policy from a CUDA access property (a .b64)."""
        d = self._dst(dst, T.b64)
        self.emit(createpolicy_cvt(d, self._val(prop)))
        return d
