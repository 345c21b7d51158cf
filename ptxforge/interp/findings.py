"""What the interpreter reports: findings (bugs it caught) and the errors that carry them.

A `Finding` names the kind of bug, the instruction, the threads involved and the Python line
that emitted the instruction; a second access (the conflicting write, the in-flight copy)
is named where there is one.  `InterpError` carries a list of findings; `InterpUnsupported`
says that the interpreter does not model an instruction (it refuses rather than guesses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import PtxforgeError, SourceLoc

_PTXFORGE_INTERNAL = True

#: Every kind of finding, with what it means.
KINDS = {
    "oob": "memory access outside every buffer / shared variable",
    "misaligned": "memory access not aligned to its size",
    "race": "shared memory accessed by two threads with no barrier between (RAW, WAR or WAW)",
    "async": "cp.async / bulk-copy destination touched before the copy completed",
    "collective": "warp-collective instruction reached by part of a warp, or a shuffle from an inactive lane",
    "barrier": "bar.sync / mbarrier misuse: deadlock (setmaxnreg.inc waiting for registers too), divergent "
               "barrier, too many arrivals, use before init, a parity wait that skips a phase, another CTA's shared "
               "memory touched before a cluster barrier showed that CTA running",
    "branch": "bra.uni taken by part of a warp",
    "uninit": "shared memory read before anything wrote it (off by default)",
    "arith": "integer division by zero",
    "trap": "trap executed",
    "limit": "step limit exceeded (an endless loop?)",
    "wgmma": "a wgmma accumulator register touched before the wgmma.wait_group that retires it",
    "registers": "setmaxnreg again in a warpgroup whose warps did not synchronize after the last one",
    "proxy": "memory read by the async proxy (wgmma, TMA and bulk copies) after generic writes with no proxy fence "
             "covering it (fence.proxy.async.shared::cta for shared memory, .global for global memory), or a tensor "
             "map written during the launch used by TMA without fence.proxy.tensormap::generic.acquire",
    "order": "global memory one CTA wrote, read by another CTA of the launch with no release/acquire chain between",
    "readonly": "global memory stored to inside an argument whose numpy array is read-only: a launch takes such an "
                "array as input only, so what the kernel writes there never reaches it",
    "sparse": "mma.sp / wgmma.mma_async.sp sparsity metadata the PTX ISA leaves undefined: two equal indices, indices "
              "not ascending under ::ordered_metadata, a .tf32 nibble other than 0b0100 or 0b1110",
}

#: Findings reported unless the caller chooses otherwise.
DEFAULT_CHECKS = frozenset(KINDS) - {"uninit"}


@dataclass(frozen=True)
class ThreadId:
    """One thread of the launch: its CTA and thread index (x, y, z)."""

    cta: tuple
    tid: tuple

    @property
    def linear_tid(self) -> int:
        """The thread's x index (the linear index for one-dimensional blocks)."""
        return self.tid[0]  # callers that need more build it from the block shape

    def __str__(self) -> str:
        cta = self.cta if any(self.cta[1:]) else self.cta[0]
        tid = self.tid if any(self.tid[1:]) else self.tid[0]
        return f"cta {cta} tid {tid}"


@dataclass
class Finding:
    """One bug the interpreter caught.

    Attributes:
        kind: a key of `KINDS` ("race", "oob", "async", "barrier" ...).
        message: what happened, in words.
        kernel: the kernel's name.
        pc: the index of the instruction in the kernel's instruction list.
        instruction: the `Instruction` (its `loc` is the Python line that emitted it).
        threads: the first few threads involved (`ThreadId`).
        nthreads: how many threads were involved in all.
        other: the conflicting instruction (the writer, the copy in flight), or None.
        other_threads: the threads that executed `other`.
        count: how many times the same finding happened.
        details: kind-specific facts (addresses, sizes ...).
    """
    kind: str
    message: str
    kernel: str = ""
    pc: int = -1  # index of the instruction in the kernel's instruction list
    instruction: object = None  # ptxforge.isa.instruction.Instruction
    threads: tuple = ()  # ThreadId, the first few involved
    nthreads: int = 0  # how many threads were involved in all
    other: object = None  # the conflicting Instruction (writer, in-flight copy, ...)
    other_threads: tuple = ()
    count: int = 1  # how many times the same finding (kind, pc, other) happened
    details: dict = field(default_factory=dict)

    @property
    def loc(self) -> SourceLoc | None:
        """The Python line that emitted the instruction, or None."""
        return getattr(self.instruction, "loc", None)

    @property
    def key(self):
        """What makes two findings the same one (kind, kernel, instruction, other instruction): repeats are
        counted, not listed.
        """
        return (self.kind, self.kernel, self.pc, id(self.other) if self.other is not None else None)

    def __str__(self) -> str:
        lines = [f"[{self.kind}] {self.message}"]
        if self.instruction is not None:
            lines.append(f"  instruction: {self.instruction.render()}  (kernel {self.kernel})")
            lines.append(f"  emitted at {_where(self.loc)}")
        if self.threads:
            more = f" (+{self.nthreads - len(self.threads)} more)" if self.nthreads > len(self.threads) else ""
            lines.append("  threads: " + ", ".join(str(t) for t in self.threads) + more)
        if self.other is not None:
            who = (" by " + ", ".join(str(t) for t in self.other_threads)) if self.other_threads else ""
            lines.append(f"  other access{who}: {self.other.render()}")
            lines.append(f"  emitted at {_where(getattr(self.other, 'loc', None))}")
        if self.count > 1:
            lines.append(f"  (happened {self.count} times)")
        return "\n".join(lines)


def _where(loc: SourceLoc | None) -> str:
    if loc is None:
        return "?"
    code = loc.code
    return f"{loc}" + (f": {code}" if code else "")


class InterpError(PtxforgeError):
    """The interpreter caught a bug; `findings` lists it (and any others collected before)."""

    def __init__(self, message: str, findings=(), loc: SourceLoc | None = None):
        super().__init__(message, loc)
        self.findings = list(findings)

    def __str__(self) -> str:
        # the findings already name their Python lines; do not append the location twice
        return self.message


class InterpUnsupported(InterpError):
    """An instruction (or a form of it) that the interpreter does not model."""

    def __init__(self, message: str, instruction=None):
        loc = getattr(instruction, "loc", None)
        if instruction is not None:
            message = f"{message}\n  instruction: {instruction.render()}\n  emitted at {_where(loc)}"
        super().__init__(message, (), loc)
        self.instruction = instruction
