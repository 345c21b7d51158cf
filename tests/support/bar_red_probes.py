"""bar.red probe kernels shared by the CPU and GPU tests: each CTA reduces one predicate per thread."""

from __future__ import annotations

import numpy as np

import ptxforge as pf
from ptxforge import u32


def bar_red_probe(threads: int = 128):
    """out[cta, t, :] = (popc, and, or) of the predicates x[cta, t'] & 1 over the CTA's threads (barrier 0),
    then (popc, and, or) of !(x & 2) over the CTA's first two warps only (barrier 1 with a count of 64: the
    other warps reduce theirs on barrier 2, with a count of the threads they are)."""
    k = pf.KernelBuilder("bar_red_probe", target="sm_80", reqntid=threads)
    x = k.param_ptr("x", u32)
    out = k.param_ptr("out", u32)
    tid = k.tid()
    g = k.mad(k.ctaid(), threads, tid, mode="lo")
    v = k.ld(k.add(x, k.mul(g, 4, mode="wide")), type=u32)
    p = k.setp("ne", k.and_(v, 1), 0)
    row = k.add(out, k.mul(g, 24, mode="wide"))
    k.st(row, k.bar_red("popc", p, 0), type=u32)
    k.st(row, k.selp(1, 0, k.bar_red("and", p, 0), type=u32), type=u32, offset=4)
    k.st(row, k.selp(1, 0, k.bar_red("or", p, 0), type=u32), type=u32, offset=8)
    q = k.setp("eq", k.and_(v, 2), 0)
    first = k.setp("lt", tid, 64)
    group = k.selp(1, 2, first, type=u32)
    count = k.selp(64, threads - 64, first, type=u32)  # each barrier's count is its group's size
    k.st(row, k.bar_red("popc", q, group, count), type=u32, offset=12)
    k.st(row, k.selp(1, 0, k.bar_red("and", q, group, count), type=u32), type=u32, offset=16)
    k.st(row, k.selp(1, 0, k.bar_red("or", q, group, count), type=u32), type=u32, offset=20)
    return k


def bar_red_inputs(ctas: int, threads: int, rng) -> np.ndarray:
    """x for bar_red_probe: random words, with one CTA all odd and one all even (so .and and .or both flip)."""
    x = rng.integers(0, 1 << 32, (ctas, threads), dtype=np.uint32)
    x[0] |= 1
    if ctas > 1:
        x[1] &= ~np.uint32(1)
    return x


def expected_bar_red(x: np.ndarray) -> np.ndarray:
    """What bar_red_probe writes for inputs x [ctas, threads]."""
    ctas, threads = x.shape
    out = np.zeros((ctas, threads, 6), np.uint32)
    for c in range(ctas):
        p = (x[c] & 1) != 0
        out[c, :, 0:3] = (p.sum(), p.all(), p.any())
        q = (x[c] & 2) == 0
        for lo, hi in ((0, 64), (64, threads)):
            out[c, lo:hi, 3:6] = (q[lo:hi].sum(), q[lo:hi].all(), q[lo:hi].any())
    return out
