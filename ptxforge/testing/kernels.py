"""Small reference kernels for tests and benchmarks: known shapes, known results.

    from ptxforge.testing.kernels import saxpy
    module = saxpy("sm_90")                   # y[i] = a * x[i] + y[i] for i < n
    module = saxpy(block=1024, out=True)      # out[i] = a * x[i] + y[i] for i < n

Every caller that needs "a simple kernel" uses these, so a change to the builder's output shows
up in one place.  (examples/saxpy.py writes the same kernel out line by line, as a showcase.)
"""

from __future__ import annotations

from ..builder import KernelBuilder
from ..isa.types import f32, u32
from ..module import Module

__all__ = ["saxpy"]


def saxpy(target: str = "sm_80", *, block: int = 256, name: str = "saxpy", out: bool = False) -> Module:
    """y = a*x + y over f32 with a guarded tail, as a one-kernel Module.

    Parameters, in order: x, y (f32 pointers), n (u32), a (f32); with `out=True` a separate
    output pointer comes after y (x, y, out, n, a) and y is only read.  Launch one thread per
    element (grid rounded up); threads at i >= n do nothing.  `block` is the .maxntid bound.
    """
    k = KernelBuilder(name, target=target, maxntid=block)
    x, y = k.param_ptr("x", f32), k.param_ptr("y", f32)
    dst = k.param_ptr("out", f32) if out else y
    n, a = k.param_value("n", u32), k.param_value("a", f32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        pd = k.add(dst, off)
        py = pd if not out else None
        k.st(pd, k.fma(a, k.ld(k.add(x, off), type=f32), k.ld(py or k.add(y, off), type=f32)))
    return k.module()
