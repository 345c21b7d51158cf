"""Reverse every block-sized segment of an array through shared memory, with bar.sync.

Each CTA loads its segment into a shared tile, waits at the barrier until the whole tile is
written, then reads it back mirrored.  The last segment may be short: only its m = n - base
valid elements are reversed.  No thread leaves before the barrier; the tail is predicated.
Checked against numpy; without a GPU, prints the PTX listing and assembles it offline.

    python examples/shared_reverse.py [--n N] [--block B] [--listing] [--sanitizer]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge.cli import int_in, positive_int, run_main
from ptxforge.runtime import gpu_skip_reason, offline_summary

MAX_BLOCK = 256


def build(target: str = "sm_80") -> pf.Module:
    k = pf.KernelBuilder("reverse_segments", target=target, maxntid=MAX_BLOCK)
    src = k.param_ptr("src", f32)
    dst = k.param_ptr("dst", f32)
    n = k.param_value("n", u32)
    tile = k.shared("tile", 4 * MAX_BLOCK, align=16)

    t, nt = k.tid(), k.ntid()
    base = k.mul(k.ctaid(), nt)  # first element of this CTA's segment
    i = k.add(base, t)
    inside = k.setp("lt", i, n)
    sbase = k.shared_base(tile)
    offset = k.mul(i, 4, mode="wide")

    with k.section("load the segment into shared memory"):
        with k.if_(inside):
            k.st(k.add(sbase, k.shl(t, 2)), k.ld(k.add(src, offset), type=f32), space="shared")
    k.bar_sync(0)  # every thread of the CTA reaches it: the tail is predicated, nobody returns early
    with k.section("write it back mirrored"):
        m = k.min(k.sub(n, base), nt)  # valid elements in this segment
        with k.if_(inside):
            j = k.sub(k.sub(m, 1), t)
            v = k.ld(k.add(sbase, k.shl(j, 2)), type=f32, space="shared")
            k.st(k.add(dst, offset), v)
    return k.module()


def reference(src: np.ndarray, block: int) -> np.ndarray:
    out = np.empty_like(src)
    for start in range(0, len(src), block):
        out[start:start + block] = src[start:start + block][::-1]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=positive_int, default=100_003)
    ap.add_argument("--block", type=int_in(1, MAX_BLOCK), default=MAX_BLOCK,
                    help=f"threads per CTA, 1 to {MAX_BLOCK} (the kernel's shared array)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    n = 5_003 if args.sanitizer else args.n
    module = build()

    reason = gpu_skip_reason()
    if reason is not None or args.listing:
        print(module.listing())
    if reason is not None:
        print(offline_summary(module, reason))
        return 0

    rng = np.random.default_rng(args.seed)
    src = rng.standard_normal(n, dtype=np.float32)
    dst = np.full(n, np.nan, dtype=np.float32)  # poisoned: an element the kernel misses stays NaN

    fn = pf.load(module)["reverse_segments"]
    grid = (n + args.block - 1) // args.block
    fn(grid, args.block, pf.In(src), pf.InOut(dst), n)

    ref = reference(src, args.block)
    bad = int(np.count_nonzero(dst != ref))
    print(f"{pf.device_info().name}: {fn}")
    if bad:
        first = int(np.flatnonzero(dst != ref)[0])
        print(f"shared_reverse MISMATCH: {bad} of {n} elements differ (first at {first}: {dst[first]} != {ref[first]})")
        return 1
    print(f"shared_reverse OK: n={n}, grid={grid}, block={args.block}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
