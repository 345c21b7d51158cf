"""Small reference kernels for tests and benchmarks: known shapes, known results.

    from ptxforge.testing.kernels import saxpy
    module = saxpy("sm_90")                   # y[i] = a * x[i] + y[i] for i < n
    module = saxpy(block=1024, out=True)      # out[i] = a * x[i] + y[i] for i < n
    module = transpose()                      # dst[c, r] = src[r, c] through a shared tile

Every caller that needs "a simple kernel" uses these, so a change to the builder's output shows
up in one place.  (examples/saxpy.py writes the same kernel out line by line, as a showcase.)
"""

from __future__ import annotations

from ..builder import KernelBuilder
from ..isa.types import f32, u32
from ..module import Module

__all__ = ["saxpy", "transpose", "TRANSPOSE_TILE", "TRANSPOSE_ROWS"]

#: The transpose kernel's tile edge (elements) and the rows of the tile one pass of the block covers.
TRANSPOSE_TILE = 32
TRANSPOSE_ROWS = 8


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


def transpose(target: str = "sm_80", *, name: str = "transpose") -> Module:
    """dst = src.T for a rows x cols f32 matrix, one 32 x 32 tile per CTA through shared memory.

    Parameters, in order: src, dst (f32 pointers, row-major, no padding), rows, cols (u32).
    Launch grid (ceil(cols / 32), ceil(rows / 32)), block (32, 8): each thread moves 4 elements
    of its CTA's tile in, waits at bar.sync, then 4 elements of the transposed tile out.  The
    shared tile has 33 columns so a column read touches 32 different banks.  Guards keep
    ragged edge tiles inside the matrix; every thread reaches the barrier.
    """
    t, r = TRANSPOSE_TILE, TRANSPOSE_ROWS
    k = KernelBuilder(name, target=target, reqntid=(t, r, 1))
    src, dst = k.param_ptr("src", f32), k.param_ptr("dst", f32)
    rows, cols = k.param_value("rows", u32), k.param_value("cols", u32)
    tile = k.shared("tile", 4 * t * (t + 1), align=16)
    tx, ty = k.tid("x"), k.tid("y")
    bx, by = k.ctaid("x"), k.ctaid("y")
    base = k.shared_base(tile)
    col0, row0 = k.mul(bx, t), k.mul(by, t)

    def element(ptr, row, col, width):
        return k.add(ptr, k.mul(k.mad(row, width, col), 4, mode="wide"))

    def slot(row, col):  # the tile's (row, col) in shared memory
        return k.add(base, k.mul(k.mad(row, t + 1, col), 4))

    with k.section("load the tile: rows row0 + ty + j, column col0 + tx"):
        x = k.add(col0, tx)
        for j in range(0, t, r):
            ty_j = k.add(ty, j)
            y = k.add(row0, ty_j)
            inside = k.setp("lt", x, cols, combine=("and", k.setp("lt", y, rows)))
            with k.if_(inside):
                k.st(slot(ty_j, tx), k.ld(element(src, y, x, cols), type=f32), space="shared")
    k.bar_sync(0)
    with k.section("store the transposed tile: rows col0 + ty + j of dst, column row0 + tx"):
        x = k.add(row0, tx)
        for j in range(0, t, r):
            ty_j = k.add(ty, j)
            y = k.add(col0, ty_j)
            inside = k.setp("lt", x, rows, combine=("and", k.setp("lt", y, cols)))
            with k.if_(inside):
                k.st(element(dst, y, x, rows), k.ld(slot(tx, ty_j), type=f32, space="shared"))
    return k.module()
