"""saxpy, composed instruction by instruction: y[i] = a * x[i] + y[i] for i < n.

The grid is rounded up to whole blocks, so the threads past n (the tail) are guarded
off by a predicate.  The kernel runs on numpy arrays (x copied in, y copied in and back)
and the result is checked against numpy.  Without a GPU it prints the PTX listing and
assembles it offline instead.

    python examples/saxpy.py [--n N] [--block B] [--listing] [--sanitizer]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge.cli import int_in, positive_int, run_main
from ptxforge.runtime import gpu_skip_reason, offline_summary


def build(target: str = "sm_80", block: int = 256) -> pf.Module:
    k = pf.KernelBuilder("saxpy", target=target, maxntid=block)
    x = k.param_ptr("x", f32)  # a global-window address (ld.param + cvta.to.global)
    y = k.param_ptr("y", f32)
    n = k.param_value("n", u32)
    a = k.param_value("a", f32)
    i = k.global_index()  # ctaid.x * ntid.x + tid.x
    inside = k.setp("lt", i, n)
    with k.if_(inside):  # the tail: threads at i >= n branch over the body
        offset = k.mul(i, 4, mode="wide")  # byte offset, 64-bit
        px = k.add(x, offset)
        py = k.add(y, offset)
        k.st(py, k.fma(a, k.ld(px, type=f32), k.ld(py, type=f32)))
    return k.module()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=positive_int, default=1_000_003, help="elements (default: not a multiple of the block)")
    ap.add_argument("--block", type=int_in(1, 1024), default=256, help="threads per CTA, 1 to 1024")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--listing", action="store_true", help="print the PTX listing")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    n = 10_001 if args.sanitizer else args.n
    module = build(block=args.block)

    reason = gpu_skip_reason()
    if reason is not None or args.listing:
        print(module.listing())
    if reason is not None:
        print(offline_summary(module, reason))
        return 0

    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal(n, dtype=np.float32)
    y0 = rng.standard_normal(n, dtype=np.float32)
    a = np.float32(rng.uniform(-3, 3))
    y = y0.copy()

    fn = pf.load(module)["saxpy"]
    grid = (n + args.block - 1) // args.block
    fn(grid, args.block, pf.In(x), pf.InOut(y), n, a)

    # fma rounds once, so the float64 result rounded to float32 is the exact expectation
    ref = (np.float64(a) * x.astype(np.float64) + y0).astype(np.float32)
    bad = int(np.count_nonzero(~np.isclose(y, ref, rtol=1e-6, atol=1e-6)))
    print(f"{pf.device_info().name}: {fn}")
    if bad:
        first = int(np.flatnonzero(~np.isclose(y, ref, rtol=1e-6, atol=1e-6))[0])
        print(f"saxpy MISMATCH: {bad} of {n} elements differ (first at {first}: {y[first]} != {ref[first]})")
        return 1
    print(f"saxpy OK: n={n}, grid={grid}, block={args.block}, max |err| = {np.max(np.abs(y - ref)):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
