"""Property-test your own kernel: a block-sum reduction and a tiled transpose, in a few lines each.

Each kernel gets a ProblemSpace (its sizes, arrays, launch and numpy reference) and one call to
`ptxforge.testing.check`, which draws problems (edge sizes first: 0, 1, a block +- 1), runs
them on the CPU interpreter (and on the GPU when there is one), compares with numpy, reads the
interpreter's race / out-of-bounds findings, and shrinks a failure to the smallest problem.
Then `mutation_check` plants bugs (a dropped bar.sync, an off-by-one guard) to show that the
property test catches them.  See docs/property-testing.md.

    python examples/property_test.py [--examples N] [--bug]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from hypothesis import settings

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge.cli import positive_int, run_main
from ptxforge.testing import Array, ProblemSpace, PropertyFailure, Size, cdiv, check, mutation_check, relative
from ptxforge.testing.kernels import TRANSPOSE_ROWS, TRANSPOSE_TILE, transpose

BLOCK = 256


def block_sums(target: str = "sm_80", *, bug: bool = False) -> pf.Module:
    """sums[c] = x[c*256] + ... + x[c*256 + 255] (the elements below n), a tree in shared memory."""
    k = pf.KernelBuilder("block_sums", target=target, reqntid=(BLOCK, 1, 1))
    x, sums = k.param_ptr("x", f32), k.param_ptr("sums", f32)
    n = k.param_value("n", u32)
    partial = k.shared("partial", 4 * BLOCK, align=16)
    t, i = k.tid(), k.global_index()
    mine = k.add(k.shared_base(partial), k.shl(t, 2))
    v = k.mov(0.0, type=f32)
    with k.if_(k.setp("le" if bug else "lt", i, n)):  # the bug: one element past the end
        k.ld(k.add(x, k.mul(i, 4, mode="wide")), type=f32, dst=v)
    k.st(mine, v, space="shared")
    k.bar_sync(0)
    s = BLOCK // 2
    while s:
        with k.if_(k.setp("lt", t, s)):
            a = k.ld(mine, type=f32, space="shared")
            b = k.ld(mine, type=f32, space="shared", offset=4 * s)
            k.st(mine, k.add(a, b), space="shared")
        if s > 1:  # after the last step thread 0 reads only what it wrote itself
            k.bar_sync(0)
        s //= 2
    with k.if_(k.setp("eq", t, 0)):
        k.st(k.add(sums, k.mul(k.ctaid(), 4, mode="wide")), k.ld(mine, type=f32, space="shared"))
    return k.module()


def sums_reference(x, n):
    """numpy's sum per block: another order of additions than the tree, hence a tolerance."""
    padded = np.zeros(cdiv(n, BLOCK) * BLOCK, np.float32)
    padded[:n] = x
    return padded.reshape(-1, BLOCK).sum(axis=1, dtype=np.float64).astype(np.float32)


SUMS = ProblemSpace(
    sizes=[Size("n", 1, 3 * BLOCK + 1, tile=BLOCK)],
    arrays=[Array("x", ("n",), np.float32, low=0, high=1),
            Array("sums", lambda p: (cdiv(p.n, BLOCK),), np.float32, role="out", tolerance=relative(1e-5))],
    grid=lambda p: cdiv(p.n, BLOCK), block=BLOCK,
    reference=sums_reference)

TRANSPOSE = ProblemSpace(
    sizes=[Size("rows", 0, 3 * TRANSPOSE_TILE, tile=TRANSPOSE_TILE),
           Size("cols", 1, 3 * TRANSPOSE_TILE, tile=TRANSPOSE_TILE)],
    arrays=[Array("src", ("rows", "cols"), np.float32), Array("dst", ("cols", "rows"), np.float32, role="out")],
    grid=lambda p: (cdiv(p.cols, TRANSPOSE_TILE), cdiv(p.rows, TRANSPOSE_TILE)), block=(TRANSPOSE_TILE, TRANSPOSE_ROWS),
    reference=lambda src: src.T)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=positive_int, default=30, help="problems per check")
    ap.add_argument("--bug", action="store_true", help="plant an off-by-one guard in block_sums and show the report")
    args = ap.parse_args(argv)

    if args.bug:
        try:
            check(block_sums(bug=True), SUMS, max_examples=args.examples)
        except PropertyFailure as e:
            print(e)
            return 0
        print("the planted bug was not found")
        return 1

    for name, module, space in (("block_sums", block_sums(), SUMS), ("transpose", transpose(), TRANSPOSE)):
        print(check(module, space, max_examples=args.examples))
        # the same problems every run, so the verdict on each mutant is stable
        report = mutation_check(module, space, max_examples=args.examples, max_per_kind=3,
                                settings=settings(derandomize=True, database=None))
        print(report)
        if report.survivors:
            print(f"{name}: the property test lets {len(report.survivors)} planted bug(s) through")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
