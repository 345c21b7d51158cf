"""Weighted sum of S slices into one tensor with TMA reductions: out += w[0] X[0] + ... + w[S-1] X[S-1].

Each CTA takes one 32 x 8 box of one slice: a TMA tile load brings it into shared memory, the warp
scales it by the slice's weight (ordinary stores, so `fence.proxy.async.shared::cta` and a barrier
make them visible to the async proxy), and one thread reduces it into the output tensor with
`cp.reduce.async.bulk.tensor ... .add` (`k.tensor_reduce`), which combines element by element in
global memory, atomically, clipping the box at the tensor's edges.  The S partial boxes of a tile meet
in whatever order their CTAs run: exact for int32 (the order of an integer sum does not matter), the
split-K pattern without a workspace or a second launch.

On a GPU it sums 4 slices of 1000 x 1000 int32 and checks against numpy; without one the interpreter
runs a 4 x 40 x 72 problem (both edges ragged) and checks it the same way.

    python examples/tma_reduce.py [--slices S] [--rows R] [--cols C] [--listing] [--sanitizer]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import s32, u32
from ptxforge.cli import positive_int, run_main

BOX = (32, 8)  # innermost first: 32 int32 (128 bytes) x 8 rows
PER_THREAD = BOX[0] * BOX[1] // 32


def build(target: str = "sm_90a") -> pf.Module:
    """`tma_weighted_sum(x_map, out_map, w, tiles_x, tiles)`: CTA c reduces w[s] * box t of slice s into out,
    where s = c / tiles and t = c % tiles (one warp per CTA; launch tiles * S CTAs)."""
    k = pf.KernelBuilder("tma_weighted_sum", target=target, reqntid=32)
    x_map, out_map = k.param_tensormap("x_map"), k.param_tensormap("out_map")
    w = k.param_ptr("w", s32)
    tiles_x, tiles = k.param_value("tiles_x", u32), k.param_value("tiles", u32)
    box = k.shared("box", 4 * BOX[0] * BOX[1], align=128)
    bar = k.shared("bar", 8, align=8)
    tid, cta = k.tid(), k.ctaid()
    lead = k.setp("eq", tid, 0)
    s, t = k.div(cta, tiles), k.rem(cta, tiles)
    x0 = k.mul(k.rem(t, tiles_x), BOX[0])
    y0 = k.mul(k.div(t, tiles_x), BOX[1])
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    k.bar_sync(0)
    with k.if_(lead):
        k.mbarrier_arrive(bar, expect_tx=4 * BOX[0] * BOX[1])
        k.tensor_load(box, x_map, (x0, y0, s), bar)
    k.mbarrier_wait(bar, 0)
    weight = k.ld(k.mad(s, 4, w, mode="wide"), type=s32)
    for j in range(PER_THREAD):  # element j * 32 + tid of the box
        at = k.add(k.shared_base(box), k.shl(k.add(tid, 32 * j), 2))
        k.st(at, k.mul(k.ld(at, type=s32, space="shared"), weight, mode="lo"), type=s32, space="shared")
    k.fence("fence.proxy.async.shared::cta")  # the scaled box is read by the async proxy next
    k.bar_sync(0)
    with k.if_(lead):
        k.tensor_reduce(out_map, (x0, y0), box, "add")
        k.bulk_commit()
        k.bulk_wait(0, read=True)  # the box stays until the reduction has read it
    return k.module()


def launch_shape(rows: int, cols: int, slices: int) -> tuple:
    """(tiles_x, tiles per slice, CTAs) of a rows x cols output summed over `slices`."""
    tx = -(-cols // BOX[0])
    tiles = tx * -(-rows // BOX[1])
    return tx, tiles, tiles * slices


def operands(slices: int, rows: int, cols: int, seed: int = 0) -> tuple:
    """(X [S, rows, cols], weights [S], out before the sums) of int32, never all zeros."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-1000, 1000, (slices, rows, cols), dtype=np.int32),
            rng.integers(-5, 6, slices, dtype=np.int32), rng.integers(-9, 10, (rows, cols), dtype=np.int32))


def reference(x, w, out):
    """numpy: out + sum_s w[s] x[s] (int64, then int32 as the GPU wraps)."""
    return (out.astype(np.int64) + np.tensordot(w.astype(np.int64), x.astype(np.int64), 1)).astype(np.int32)


def run_cpu(slices=4, rows=40, cols=72, seed=0):
    """On the interpreter: (result, expected)."""
    from ptxforge import interp
    x, w, out = operands(slices, rows, cols, seed)
    want = reference(x, w, out)
    tx, tiles, ctas = launch_shape(rows, cols, slices)
    interp.run(build(), grid=ctas, block=32, args=[interp.host_tensor_map(x, (*BOX, 1)),
                                                   interp.host_tensor_map(out, BOX), w, tx, tiles])
    return out, want


def run_gpu(slices=4, rows=1000, cols=1000, seed=0):
    """On the GPU: (result, expected)."""
    from ptxforge.runtime import DeviceBuffer, TensorMap
    x, w, out = operands(slices, rows, cols, seed)
    want = reference(x, w, out)
    dx, dout = DeviceBuffer.from_host(x), DeviceBuffer.from_host(out)
    tx, tiles, ctas = launch_shape(rows, cols, slices)
    pf.load(build())["tma_weighted_sum"](ctas, 32, TensorMap.from_array(dx, (*BOX, 1)),
                                         TensorMap.from_array(dout, BOX), w, tx, tiles)
    return dout.to_host(), want


def main(argv=None) -> int:
    """Run on the GPU (or the interpreter without one) and check; 0 when correct."""
    from ptxforge.runtime import gpu_skip_reason, offline_summary
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slices", type=positive_int, default=4)
    ap.add_argument("--rows", type=positive_int, default=1000)
    ap.add_argument("--cols", type=positive_int, default=1000)
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    if args.cols % 4:  # the tensor maps' row stride: whole 16-byte units (cuTensorMapEncodeTiled)
        ap.error(f"--cols {args.cols}: a row of int32 must be a whole number of 16-byte units (a multiple of 4 "
                 "columns)")
    if args.listing:
        print(build().listing())
    reason = gpu_skip_reason()
    if reason is not None:
        print(offline_summary(build(), reason))
        got, want = run_cpu(args.slices)
    else:
        got, want = run_gpu(args.slices, *((40, 72) if args.sanitizer else (args.rows, args.cols)))
    where = "interpreter" if reason is not None else pf.device_info().name
    ok = np.array_equal(got, want)
    print(f"tma_reduce on {where}: {args.slices} slices of {got.shape[0]} x {got.shape[1]} int32 summed by TMA "
          f"reductions: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
