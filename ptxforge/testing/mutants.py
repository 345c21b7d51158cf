"""Planted bugs: copies of a finished kernel with one kind of synchronization removed or weakened.

A test that runs a kernel on the interpreter should fail when the kernel loses a barrier or a
wait; these give it the mutant to prove that it does:

    bad = drop_bar_sync(module.kernel("copy"), nth=0)
    report = interp.run(bad, grid=..., block=..., args=..., check=False)
    assert report.by_kind("race")

`nth` picks one of the matching instructions in body order (None: all of them).  A mutation that
matches nothing raises ValidationError, so a test can never pass because the bug was not planted.
"""

from __future__ import annotations

import dataclasses

from ..kernel import Kernel
from ..errors import ValidationError
from ..isa.async_copy import wait_group
from ..isa.instruction import Instruction

__all__ = ["drop_bar_sync", "loosen_wait_group", "drop_mbarrier_wait"]


def drop_bar_sync(kernel: Kernel, nth: int | None = None) -> Kernel:
    """The kernel without its CTA barrier(s) (bar.sync / barrier.sync)."""
    return _mutate(kernel, lambda i: i.opcode == "bar" and i.info.kind == "sync", lambda i: [], nth, "bar.sync")


def loosen_wait_group(kernel: Kernel, by: int = 1, nth: int | None = None) -> Kernel:
    """The kernel with `cp.async.wait_group N` turned into `wait_group N+by`: one group too few waited for."""
    def looser(ins):
        return [wait_group(int(ins.info) + by).with_loc(ins.loc)]
    return _mutate(kernel, lambda i: i.opcode == "cp.async.wait_group", looser, nth, "cp.async.wait_group")


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
