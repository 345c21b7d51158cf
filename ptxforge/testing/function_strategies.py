"""Hypothesis strategies for programs of device functions: `call_programs()` draws a kernel that
calls a chain of `.func`s (each a few integer steps, a lookup in a module `.const` table, calls
to the functions before it), with a `.local` round trip and a guarded call on demand, together
with the numpy reference of what every thread stores.

    @given(call_programs())
    def test(p):
        out = np.zeros(p.threads, np.uint32)
        interp.run(p.module, p.kernel, block=p.threads, args=[out])
        assert (out == p.expected()).all()
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

_PTXFORGE_INTERNAL = True

MASK = 0xFFFF_FFFF
#: One step of a function body: (kind, constant). "call" steps name an earlier function's index.
STEP_KINDS = ("add", "mul", "xor", "shl", "shr", "table", "call")


@dataclass
class CallProgram:
    """A drawn program: the module, its kernel's name, the threads to launch (one CTA), and what
    `expected()` says each thread stores (uint32)."""

    module: object
    kernel: str
    threads: int
    functions: tuple  # per function: tuple of (kind, constant) steps
    table: tuple  # the .const table's eight values
    local: bool  # the kernel passes its argument through a .local array
    guard: int | None  # only threads with tid % 2 == guard call; the others store KEEP
    keep: int

    def expected(self) -> np.ndarray:
        """The uint32 each thread stores, computed in Python."""
        out = []
        for t in range(self.threads):
            if self.guard is not None and t % 2 != self.guard:
                out.append(self.keep)
            else:
                out.append(self.apply(len(self.functions) - 1, (t * 2654435761) & MASK))
        return np.array(out, dtype=np.uint32)

    def apply(self, j: int, x: int) -> int:
        """Function `j` of the program applied to `x` (u32 arithmetic)."""
        for kind, c in self.functions[j]:
            if kind == "add":
                x = (x + c) & MASK
            elif kind == "mul":
                x = (x * c) & MASK
            elif kind == "xor":
                x ^= c
            elif kind == "shl":
                x = (x << c) & MASK
            elif kind == "shr":
                x >>= c
            elif kind == "table":
                x = (x + self.table[x & 7]) & MASK
            else:
                x = self.apply(c, x)
        return x


def _step(j: int):
    consts = st.integers(0, MASK)
    kinds = [st.tuples(st.sampled_from(("add", "mul", "xor")), consts),
             st.tuples(st.sampled_from(("shl", "shr")), st.integers(0, 31)),
             st.tuples(st.just("table"), st.just(0))]
    if j > 0:
        kinds.append(st.tuples(st.just("call"), st.integers(0, j - 1)))
    return st.one_of(kinds)


@st.composite
def call_programs(draw, target: str = "sm_80", max_functions: int = 3) -> CallProgram:
    """A kernel calling a chain of 1..`max_functions` device functions (see the module docstring)."""
    from ..builder import FunctionBuilder, KernelBuilder
    from ..declarations import variable
    from ..isa.types import u32
    n = draw(st.integers(1, max_functions))
    bodies = tuple(tuple(draw(st.lists(_step(j), min_size=1, max_size=4))) for j in range(n))
    table = tuple(draw(st.lists(st.integers(0, MASK), min_size=8, max_size=8)))
    local = draw(st.booleans())
    guard = draw(st.sampled_from((None, 0, 1)))
    keep = draw(st.integers(0, MASK))
    threads = draw(st.sampled_from((1, 7, 32, 40)))
    var = variable("table", u32, space="const", count=8, init=list(table), align=16)
    funcs = []
    for j, steps in enumerate(bodies):
        f = FunctionBuilder(f"f{j}", target=target, visible=draw(st.booleans()))
        x = f.param_value("x", u32)
        f.result("y", u32)
        for kind, c in steps:
            if kind in ("add", "mul", "xor", "shl", "shr"):
                op = {"add": f.add, "mul": lambda a, b: f.mul(a, b, mode="lo"), "xor": f.xor, "shl": f.shl,
                      "shr": f.shr}[kind]
                x = op(x, c)
            elif kind == "table":
                base = f.address_of(var)  # mov.u64 %rd, table: a .const-window address
                off = f.mul(f.and_(x, 7), 4, mode="wide")
                x = f.add(x, f.ld(f.add(base, off), type=u32, space="const"))
            else:
                x = f.call(funcs[c], args=[x])
        f.set_result(x)
        funcs.append(f)
    k = KernelBuilder("calls", target=target)
    out = k.param_ptr("out", u32)
    t = k.tid()
    arg = k.mul(t, 2654435761, mode="lo")
    if local:
        stash = k.local_array("stash", u32, 2)
        k.st(stash, arg, space="local", offset=4)
        arg = k.ld(stash, type=u32, space="local", offset=4)
    res = k.reg(u32, "res")
    k.mov(keep, dst=res)
    pred = None if guard is None else k.setp("eq", k.and_(t, 1), guard)
    k.call(funcs[-1], args=[arg], returns=[res], pred=pred)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), res)
    return CallProgram(k.module(), "calls", threads, bodies, table, local, guard, keep)
