"""A kernel that calls device functions, reads a coefficient table from .const memory and keeps
per-thread scratch in a .local array.

`horner(x)` evaluates a polynomial whose coefficients live in the module-scope `.const` table
`COEFFS`; `softclip(x, limit)` calls it and clamps the result.  The kernel calls `softclip` once per
element, keeps the last four results of a thread's grid-stride walk in a `.local` ring and writes
their mean (checked against numpy).  Without a GPU it prints the listing, assembles the module
offline and runs it on the CPU interpreter.

    python examples/device_functions.py [--n N] [--listing]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge.cli import positive_int, run_main
from ptxforge.runtime import gpu_skip_reason, offline_summary

KERNEL = "softclip_map"
COEFFS = np.array([0.25, -0.5, 1.0, 0.125], dtype=np.float32)  # c0 + c1 x + c2 x^2 + c3 x^3
LIMIT = 2.0


def build(target: str = "sm_80") -> pf.Module:
    table = pf.variable("coeffs", f32, space="const", count=len(COEFFS), init=COEFFS, align=16)

    horner = pf.FunctionBuilder("horner", target=target)
    x = horner.param_value("x", f32)
    horner.result("y", f32)
    acc = horner.ld(table, type=f32, space="const", offset=4 * (len(COEFFS) - 1))
    for j in reversed(range(len(COEFFS) - 1)):  # acc = acc * x + c_j
        acc = horner.fma(acc, x, horner.ld(table, type=f32, space="const", offset=4 * j))
    horner.set_result(acc)

    clip = pf.FunctionBuilder("softclip", target=target)
    v = clip.param_value("v", f32)
    limit = clip.param_value("limit", f32)
    clip.result("r", f32)
    p = clip.call(horner, args=[v])  # { .param ...; call (..), horner, (..); ld.param ... }
    clip.set_result(clip.max(clip.min(p, limit), clip.neg(limit)))

    k = pf.KernelBuilder(KERNEL, target=target, maxntid=128)
    src = k.param_ptr("src", f32)
    dst = k.param_ptr("dst", f32)
    n = k.param_value("n", u32)
    ring = k.local_array("ring", f32, 4, align=16)  # the last four values this thread produced
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        y = k.call(clip, args=[k.ld(k.add(src, off), type=f32), LIMIT])
        for j in range(4):  # fill the ring with y, y/2, y/4, y/8 and average it back
            k.st(ring, k.mul(y, 0.5 ** j), space="local", offset=4 * j)
        total = k.ld(ring, type=f32, space="local")
        for j in range(1, 4):
            total = k.add(total, k.ld(ring, type=f32, space="local", offset=4 * j))
        k.st(k.add(dst, off), k.mul(total, 0.25))
    return k.module()


def reference(x: np.ndarray) -> np.ndarray:
    """What the kernel computes, in numpy."""
    x = x.astype(np.float32)
    p = np.polynomial.polynomial.polyval(x, COEFFS).astype(np.float32)
    y = np.clip(p, -LIMIT, LIMIT)
    return (y * (1 + 0.5 + 0.25 + 0.125) * 0.25).astype(np.float32)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=positive_int, default=10_007)
    ap.add_argument("--listing", action="store_true")
    args = ap.parse_args(argv)
    module = build()
    x = np.linspace(-3, 3, args.n).astype(np.float32)
    y = np.full_like(x, np.nan)
    grid = (args.n + 127) // 128

    reason = gpu_skip_reason()
    if reason is not None or args.listing:
        print(module.listing())
    if reason is not None:
        print(offline_summary(module, reason))
        from ptxforge import interp
        interp.run(module, KERNEL, grid=grid, block=128, args=[x, y, args.n])
        where = "the CPU interpreter"
    else:
        fn = pf.load(module)[KERNEL]
        fn(grid, 128, pf.In(x), pf.InOut(y), args.n)
        where = pf.device_info().name
    bad = int(np.count_nonzero(~np.isclose(y, reference(x), rtol=1e-5, atol=1e-6)))
    if bad:
        print(f"device_functions MISMATCH on {where}: {bad} of {args.n} elements differ")
        return 1
    print(f"device_functions OK on {where}: n={args.n}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
