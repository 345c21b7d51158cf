"""Planted bugs: copies of a finished kernel with one kind of synchronization removed or weakened.

A test that runs a kernel on the interpreter should fail when the kernel loses a barrier or a
wait; these give it the mutant to prove that it does:

    bad = drop_bar_sync(module.kernel("copy"), nth=0)
    report = interp.run(bad, grid=..., block=..., args=..., check=False)
    assert report.by_kind("race")

`nth` picks one of the matching instructions in body order (None: all of them).  A mutation that
matches nothing raises ValidationError, so a test can never pass because the bug was not planted.

`off_by_one_guard` loosens or tightens one comparison (setp.lt <-> le, gt <-> ge, lo <-> ls,
hi <-> hs): the classic bounds-guard bug.  `weaken_memory_order` relaxes one acquire/release access or
drops one gpu-scope fence: what publishes one CTA's global writes to another goes missing.
`drop_proxy_fence` removes one proxy fence (fence.proxy.async ...): generic writes that wgmma or a TMA /
bulk copy reads are no longer made visible to the async proxy.  `early_mbarrier_arrive` moves one plain
mbarrier arrival above the shared-memory access before it: a consumer that frees a ring slot while it still
reads it, or a producer that announces a buffer before its last write.  `mutants_of(kernel)` lists every
single-site mutant of every kind that applies to a kernel, as `Mutant`s (what testing.mutation runs).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from ..kernel import Kernel
from ..errors import ValidationError
from ..isa.async_copy import wait_group
from ..isa.control import setp
from ..isa.instruction import Instruction
from ..isa.sync import ORDERING_FENCES, PROXY_FENCES

__all__ = ["drop_bar_sync", "loosen_wait_group", "drop_mbarrier_wait", "off_by_one_guard", "weaken_memory_order",
           "drop_proxy_fence", "early_mbarrier_arrive", "Mutant", "mutants_of", "MUTANT_KINDS", "OFF_BY_ONE"]

def _takes_kernel(fn):
    """Make `fn(kernel, ...)` refuse anything but a finished Kernel, naming itself and how to get one."""
    @functools.wraps(fn)
    def checked(kernel, *args, **kw):
        if not isinstance(kernel, Kernel):
            from ..module import Module
            names = [k.name for k in kernel.kernels] if isinstance(kernel, Module) else []
            how = f"module.kernel({names[0]!r})" if len(names) == 1 else "module.kernel(name)"
            raise TypeError(f"{fn.__name__} takes a finished Kernel ({how}), got {type(kernel).__name__}")
        return fn(kernel, *args, **kw)
    return checked


#: setp comparisons and the comparison one step looser or tighter at the boundary.
OFF_BY_ONE = {"lt": "le", "le": "lt", "gt": "ge", "ge": "gt", "lo": "ls", "ls": "lo", "hi": "hs", "hs": "hi"}


@_takes_kernel
def drop_bar_sync(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel without its CTA barrier(s) (bar.sync / barrier.sync)."""
    return _mutate(kernel, lambda i: i.opcode == "bar" and i.info.kind == "sync", lambda i: [], nth, "bar.sync")


@_takes_kernel
def loosen_wait_group(kernel: Kernel, by: int = 1, nth: int | None = None) -> Kernel:
    """The kernel with `cp.async.wait_group N` turned into `wait_group N+by`: one group too few waited for."""
    def looser(ins):
        return [wait_group(int(ins.info) + by).with_loc(ins.loc)]
    return _mutate(kernel, lambda i: i.opcode == "cp.async.wait_group", looser, nth, "cp.async.wait_group")


@_takes_kernel
def drop_mbarrier_wait(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel without its mbarrier wait loop(s): the test_wait / try_wait and the branch that
    spins on its result."""
    waits = [i for i in kernel.body if isinstance(i, Instruction) and i.opcode in ("mbarrier.try_wait",
                                                                                     "mbarrier.test_wait")]
    chosen = _pick(waits, nth, "mbarrier test_wait / try_wait", kernel)
    spins = {i.operands[0].name for i in chosen}
    gone = {id(i) for i in chosen}
    for i in kernel.body:
        if (isinstance(i, Instruction) and i.opcode == "bra" and i.guard is not None
                and i.guard.reg.name in spins):
            gone.add(id(i))
    return dataclasses.replace(kernel, body=tuple(i for i in kernel.body if id(i) not in gone))


def _is_guard(i) -> bool:
    return i.opcode == "setp" and i.mods and i.mods[0] in OFF_BY_ONE and i.type is not None and not i.type.is_float


@_takes_kernel
def off_by_one_guard(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel with integer comparison(s) moved by one at the boundary: setp.lt becomes setp.le
    (and le -> lt, gt <-> ge, lo <-> ls, hi <-> hs), so a guard admits (or drops) one more index."""
    def shifted(ins):
        boolop = ins.mods[1] if len(ins.mods) > 1 else None
        ops = ins.operands
        new = setp(OFF_BY_ONE[ins.mods[0]], ins.type, ops[0], ops[1], ops[2], boolop, ops[3] if boolop else None)
        return [new.with_guard(ins.guard).with_loc(ins.loc)]
    return _mutate(kernel, _is_guard, shifted, nth, "integer setp comparison")


#: memory orders a `weaken_memory_order` mutant relaxes (the fences it drops: isa.sync.ORDERING_FENCES beyond .cta)
_ORDERS = ("acquire", "release", "acq_rel")


def _is_ordered(i) -> bool:
    if i.opcode in ("atom", "red", "ld", "st"):
        return getattr(i.info, "sem", None) in _ORDERS
    return i.opcode in ("fence", "membar") and ORDERING_FENCES.get(i.info, ("", "cta"))[1] != "cta"


@_takes_kernel
def weaken_memory_order(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel with memory ordering taken away: an atom/red/ld/st with .acquire, .release or .acq_rel made
    .relaxed (same scope), a fence.acq_rel / fence.sc / membar at gpu, cluster or sys scope removed.  What
    publishes one CTA's global writes to another is then missing (the interpreter's "order" findings)."""
    def weaker(ins):
        if ins.opcode in ("fence", "membar"):
            return []
        sem = ins.info.sem
        info = dataclasses.replace(ins.info, sem="relaxed")
        return [Instruction(ins.opcode, ins.mnemonic.replace(f".{sem}.", ".relaxed.", 1), ins.operands, ins.n_dst,
                            ins.guard, ins.req, info, tuple("relaxed" if m == sem else m for m in ins.mods),
                            ins.type, ins.loc, ins.comment)]
    return _mutate(kernel, _is_ordered, weaker, nth, "memory-ordered access or fence")


def _is_proxy_fence(i) -> bool:
    return i.opcode == "fence" and i.info in PROXY_FENCES


@_takes_kernel
def drop_proxy_fence(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel without its proxy fence(s) (isa.sync.PROXY_FENCES: fence.proxy.async and its state-space forms):
    shared or global memory written by ordinary stores is then read by wgmma or a TMA / bulk copy without being
    made visible to the async proxy (the interpreter's "proxy" findings)."""
    return _mutate(kernel, _is_proxy_fence, lambda i: [], nth, "proxy fence")


#: what an arrival is not moved across: control flow and every synchronization, fence or asynchronous operation
_FIXED = ("bra", "ret", "exit", "call", "bar", "barrier", "mbarrier", "fence", "membar", "wgmma", "cp.",
          "griddepcontrol", "setmaxnreg", "tensormap", "st.async", "red.async", "elect")


def _touches_shared(i) -> bool:
    """A synchronous shared-memory access: ld / st / atom / red of a shared state space, ldmatrix, stmatrix."""
    if i.opcode in ("ldmatrix", "stmatrix"):
        return True
    return i.opcode in ("ld", "st", "ldu", "atom", "red") and str(getattr(i.info, "space", "")).startswith("shared")


def _early_arrivals(kernel: Kernel) -> list:
    """(arrival, the body index it moves to) for each plain mbarrier arrival that a shared-memory access comes
    before in its straight-line code, with nothing in between that it may not cross (`_FIXED`, a label, or an
    instruction that writes a register the arrival reads or reads the one it writes)."""
    body = kernel.body
    out = []
    for j, ins in enumerate(body):
        if not (isinstance(ins, Instruction) and ins.opcode == "mbarrier.arrive"
                and getattr(ins.info, "op", None) == "arrive"):
            continue
        writes = {r.name for r in ins.written_registers()}
        reads = {r.name for r in ins.registers()} - writes
        for k in range(j - 1, -1, -1):
            other = body[k]
            if not isinstance(other, Instruction) or other.opcode.startswith(_FIXED):
                break
            if reads & {r.name for r in other.written_registers()} or writes & {r.name for r in other.registers()}:
                break
            if _touches_shared(other):
                out.append((ins, k))
                break
    return out


@_takes_kernel
def early_mbarrier_arrive(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel with plain mbarrier arrival(s) moved above the shared-memory access just before them in
    their straight-line code: the access now comes after the arrival, which orders only what came before it
    (the interpreter reports the access as a race once another thread relies on that phase)."""
    sites = _early_arrivals(kernel)
    chosen = {id(i) for i in _pick([ins for ins, _ in sites], nth, "mbarrier arrival after a shared-memory access",
                                   kernel)}
    # (no two arrivals move to one place: the later one's walk back stops at the earlier arrival)
    before = {k: ins for ins, k in sites if id(ins) in chosen}
    body = []
    for k, item in enumerate(kernel.body):
        if id(item) in chosen:
            continue
        if k in before:
            body.append(before[k])
        body.append(item)
    return dataclasses.replace(kernel, body=tuple(body))


@dataclass(frozen=True)
class Mutant:
    """One planted bug: its kind (a mutant function's name), which match it changes (`nth`), the
    instruction and the Python line that emitted it; `apply(kernel)` makes the mutated copy."""

    kind: str
    nth: int
    instruction: str
    where: str

    @property
    def label(self) -> str:
        """kind #nth: the instruction (file:line)."""
        return f"{self.kind} #{self.nth}: {self.instruction}  ({self.where})"

    def apply(self, kernel: Kernel) -> Kernel:
        """The mutated copy of `kernel` (ValidationError when it has no such site)."""
        return MUTANT_KINDS[self.kind][0](kernel, nth=self.nth)

    def __str__(self) -> str:
        return self.label


def _is_wait(i) -> bool:
    return i.opcode in ("mbarrier.try_wait", "mbarrier.test_wait")


def _matching(pred):
    """The sites of a kernel that a per-instruction mutant changes: its instructions that `pred` holds for."""
    return lambda kernel: [i for i in kernel.body if isinstance(i, Instruction) and pred(i)]


#: Mutant kinds: name -> (function, kernel -> the instructions it changes, in the order `nth` counts them).
MUTANT_KINDS = {
    "drop_bar_sync": (drop_bar_sync, _matching(lambda i: i.opcode == "bar" and i.info.kind == "sync")),
    "loosen_wait_group": (loosen_wait_group, _matching(lambda i: i.opcode == "cp.async.wait_group")),
    "drop_mbarrier_wait": (drop_mbarrier_wait, _matching(_is_wait)),
    "off_by_one_guard": (off_by_one_guard, _matching(_is_guard)),
    "weaken_memory_order": (weaken_memory_order, _matching(_is_ordered)),
    "drop_proxy_fence": (drop_proxy_fence, _matching(_is_proxy_fence)),
    "early_mbarrier_arrive": (early_mbarrier_arrive, lambda kernel: [i for i, _ in _early_arrivals(kernel)]),
}


@_takes_kernel
def mutants_of(kernel: Kernel, kinds=None, *, max_per_kind: int | None = None) -> list:
    """Every single-site Mutant of `kinds` (one kind's name, several, or None: all of MUTANT_KINDS) that
    applies to `kernel`, at most `max_per_kind` (a whole number >= 1, or None: every site) of each kind,
    spread evenly over the kernel's matches."""
    if max_per_kind is not None and (isinstance(max_per_kind, bool) or not isinstance(max_per_kind, int)
                                     or max_per_kind < 1):
        raise ValueError(f"max_per_kind must be a whole number >= 1, or None for every site, got {max_per_kind!r}")
    out = []
    for kind in ((kinds,) if isinstance(kinds, str) else kinds or MUTANT_KINDS):
        if kind not in MUTANT_KINDS:
            raise ValidationError(f"unknown mutant kind {kind!r}; kinds: {sorted(MUTANT_KINDS)}")
        sites = MUTANT_KINDS[kind][1](kernel)
        picks = range(len(sites))
        if max_per_kind is not None and len(sites) > max_per_kind:
            picks = sorted({round(j * (len(sites) - 1) / max(1, max_per_kind - 1)) for j in range(max_per_kind)})
        for n in picks:
            ins = sites[n]
            where = str(ins.loc) if ins.loc is not None else "?"
            out.append(Mutant(kind, n, ins.render().strip(), where))
    return out


def _pick(found, nth, what, kernel):
    if not found:
        raise ValidationError(f"kernel {kernel.name} has no {what} to mutate")
    if nth is None:
        return found
    if not -len(found) <= nth < len(found):
        raise ValidationError(f"kernel {kernel.name} has {len(found)} {what}; nth={nth} is not one of them")
    return [found[nth]]


def _mutate(kernel, match, replace, nth, what):
    chosen = {id(i) for i in _pick([i for i in kernel.body if isinstance(i, Instruction) and match(i)], nth, what,
                                   kernel)}
    body = []
    for item in kernel.body:
        body.extend(replace(item) if id(item) in chosen else [item])
    return dataclasses.replace(kernel, body=tuple(body))
