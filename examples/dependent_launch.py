"""Programmatic dependent launch: a chain of kernels, each starting while the one ahead of it finishes.

Each launch of `step` computes dst[i] = src[i] * mul + add from what the launch before it wrote.
Launched with `launch_dependent` (sm_90+), a launch's CTAs may be scheduled as soon as every CTA
of the launch ahead has executed `griddepcontrol.launch_dependents`; the kernel's
`griddepcontrol.wait` then holds it, before its first load, until that launch has completed and
its writes are visible.  The chain is checked against numpy, and the same chain is run on the
CPU interpreter (where griddepcontrol has nothing to wait for).  Without a GPU the example prints
the listing and assembles it offline.

    python examples/dependent_launch.py [--n N] [--steps S] [--listing]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import u32
from ptxforge.cli import positive_int, run_main
from ptxforge.runtime import gpu_skip_reason, offline_summary


def build(block: int = 256) -> pf.Module:
    """The kernel `step(src, dst, mul, add, n)`: dst[i] = src[i] * mul + add for i < n, after the wait."""
    k = pf.KernelBuilder("step", target="sm_90", maxntid=block)
    src = k.param_ptr("src", u32)
    dst = k.param_ptr("dst", u32)
    mul = k.param_value("mul", u32)
    add = k.param_value("add", u32)
    n = k.param_value("n", u32)
    i = k.global_index()
    # nothing before this line touches memory the launch ahead of this one writes
    k.griddepcontrol("wait")
    k.griddepcontrol("launch_dependents")
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(dst, off), k.mad(k.ld(k.add(src, off), type=u32), mul, add, type=u32))
    return k.module()


def chain(steps: int, x0: np.ndarray) -> np.ndarray:
    """numpy's result of `steps` pairs of launches: x -> x + 1 -> (x + 1) * 2."""
    x = x0.astype(np.uint32)
    for _ in range(steps):
        x = ((x + np.uint32(1)) * np.uint32(2)).astype(np.uint32)
    return x


def interpret(module: pf.Module, n: int, steps: int, x0: np.ndarray, block: int = 256) -> np.ndarray:
    """The same chain on the CPU interpreter."""
    from ptxforge import interp
    x, y = x0.copy(), np.zeros_like(x0)
    grid = -(-n // block)
    for _ in range(steps):
        interp.run(module, grid=grid, block=block, args=[x, y, 1, 1, n])
        interp.run(module, grid=grid, block=block, args=[y, x, 2, 0, n])
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=positive_int, default=1_000_003)
    ap.add_argument("--steps", type=positive_int, default=50)
    ap.add_argument("--listing", action="store_true", help="print the PTX listing")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    n = 10_001 if args.sanitizer else args.n
    module = build()
    x0 = np.random.default_rng(0).integers(0, 1 << 20, n).astype(np.uint32)
    want = chain(args.steps, x0)

    small = min(n, 3000)
    got = interpret(module, small, 2, x0[:small].copy())
    if not np.array_equal(got, chain(2, x0[:small])):
        print("dependent_launch MISMATCH on the interpreter")
        return 1
    reason = gpu_skip_reason()
    if reason is not None or args.listing:
        print(module.listing())
    if reason is not None:
        print(offline_summary(module, reason))
        return 0
    if pf.device_info().sm < 90:
        print(f"{pf.device_info().name} is {pf.device_info().arch}: programmatic dependent launch needs sm_90")
        return 0

    from ptxforge.runtime import DeviceBuffer, launch_dependent, load, synchronize
    fn = load(module)["step"]
    x, y = DeviceBuffer.from_host(x0), DeviceBuffer.empty((n,), np.uint32)
    grid = -(-n // 256)
    for _ in range(args.steps):
        launch_dependent(fn, grid, 256, x, y, 1, 1, n)
        launch_dependent(fn, grid, 256, y, x, 2, 0, n)
    synchronize()
    got = x.to_host()
    bad = int(np.count_nonzero(got != want))
    if bad:
        print(f"dependent_launch MISMATCH: {bad} of {n} elements differ after {2 * args.steps} launches")
        return 1
    print(f"dependent_launch OK: {2 * args.steps} dependent launches of {grid} CTAs, n={n}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
