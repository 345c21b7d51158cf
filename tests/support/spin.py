"""A kernel that runs as long as it is asked to, for the GPU tests of timing, timeouts and stream order."""

import ptxforge as pf
from ptxforge import f32, u32


def spin_module(name: str = "spin"):
    """Kernel `name`(out, iters): a dependent chain of `iters` FMAs per thread, then one store of the sum to
    out[tid]; its run time grows with iters."""
    k = pf.KernelBuilder(name, target="sm_80")
    out = k.param_ptr("out", f32)
    iters = k.param_value("iters", u32)
    acc = k.mov(1.0, type=f32)
    with k.for_range(0, iters):
        k.fma(acc, 1.0001, 0.5, dst=acc)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), acc)
    return k.module()
