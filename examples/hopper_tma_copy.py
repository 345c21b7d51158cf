"""Copy a 2-D array through shared memory with TMA: tile loads and tile stores, 128-byte swizzle,
ragged edges.

One thread per CTA drives the tensor-memory-access engine: it keeps `stages` boxes in flight
(mbarrier.arrive.expect_tx + cp.async.bulk.tensor load per box), and as each box lands
(mbarrier.try_wait.parity) stores it back with cp.async.bulk.tensor ... bulk_group; before a
stage is refilled, cp.async.bulk.wait_group.read 1 makes sure the store that read it has read
it.  The array's edges need no special code: the load fills the part of a box outside the array
with zeros and the store writes only the part inside.  CTAs are persistent: CTA c copies boxes
c, c + grid, ...  A second kernel dumps one landed box raw, so the swizzled shared-memory image
can be compared with `SmemTile`'s numpy model.

On the H200 it copies a 16384 x 8192 u16 array and checks it; without a GPU the interpreter runs
it (with --stages slots) on a 200 x 152 array (both edges ragged; rows are a multiple of 16 bytes,
as tensor maps need: --cols must be a multiple of 8) and checks it against numpy.

    python examples/hopper_tma_copy.py [--rows R] [--cols C] [--stages S] [--listing] [--sanitizer]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import u32
from ptxforge.cli import int_in, positive_int, run_main

BOX = (64, 64)  # innermost first: 64 u16 = 128 bytes (one 128-byte swizzle span) x 64 rows
BOX_BYTES = BOX[0] * BOX[1] * 2


def copy_shared_bytes(stages: int = 4, box_rows: int = BOX[1]) -> int:
    """Dynamic shared memory of `tma_copy`: `stages` boxes and their mbarriers."""
    return stages * BOX[0] * 2 * box_rows + 8 * stages


def build(stages: int = 4, target: str = "sm_90a", box_rows: int = BOX[1], lag: int = 1) -> pf.Module:
    """The copy kernel `tma_copy(src_map, dst_map, tiles_x, ntiles)` (boxes of 64 x `box_rows`, launch
    with shared=copy_shared_bytes(stages, box_rows)) and `tma_box_dump` (one 64 x 64 box).

    `lag` (1 <= lag < stages): how many stores may still be reading shared memory when a stage is
    refilled.  After storing box i the kernel refills the stage of box i - lag, once
    `cp.async.bulk.wait_group.read lag` has seen that store read it: `lag` stores and
    `stages - lag` loads stay in flight."""
    if not 1 <= lag < stages:
        raise ValueError(f"lag must be in [1, {stages - 1}] for {stages} stages, got {lag}")
    box_bytes = BOX[0] * 2 * box_rows
    k = pf.KernelBuilder("tma_copy", target=target, reqntid=32)
    src = k.param_tensormap("src_map")
    dst = k.param_tensormap("dst_map")
    tiles_x = k.param_value("tiles_x", u32)
    ntiles = k.param_value("ntiles", u32)
    smem = k.dynamic_shared("smem", align=1024)  # the boxes, then the mbarriers
    buf_base = k.shared_base(smem)
    bars_base = k.add(buf_base, stages * box_bytes)
    tid = k.tid()
    leader = k.setp("eq", tid, 0)
    with k.if_(leader):
        k.prefetch_tensormap(src)
        k.prefetch_tensormap(dst)
        for s in range(stages):
            k.mbarrier_init(k.add(bars_base, 8 * s), 1)
        k.fence("fence.mbarrier_init.release.cluster")
        first = k.ctaid()
        step = k.nctaid()

        def tile_coords(t):
            ty = k.div(t, tiles_x)
            tx = k.sub(t, k.mul(ty, tiles_x))
            return k.shl(tx, 6), k.mul(ty, box_rows)

        def slot(t_local):  # stage of the CTA's t_local-th box
            return k.rem(t_local, stages)

        def issue_load(t_global, t_local):
            s = slot(t_local)
            bar = k.add(bars_base, k.shl(s, 3))
            dst_s = k.add(buf_base, k.mul(s, box_bytes))
            k.mbarrier_arrive(bar, expect_tx=box_bytes)
            x, y = tile_coords(t_global)
            k.tensor_load(dst_s, src, (x, y), bar)

        # prologue: the first `stages` boxes of this CTA
        t = k.mov(first, type=u32)
        n = k.mov(0, type=u32)
        for s in range(stages):
            more = k.setp("lt", t, ntiles)
            with k.if_(more):
                issue_load(t, n)
            k.add(t, step, dst=t)
            k.add(n, 1, dst=n)
        # steady state: box i lands, goes back out; the stage of box i-1 is refilled with box i-1+stages
        i = k.mov(0, type=u32)
        ti = k.mov(first, type=u32)
        with k.loop("boxes"):
            k.break_(k.setp("ge", ti, ntiles))
            s = slot(i)
            bar = k.add(bars_base, k.shl(s, 3))
            parity = k.and_(k.div(i, stages), 1)
            k.mbarrier_wait(bar, parity)
            x, y = tile_coords(ti)
            k.tensor_store(dst, (x, y), k.add(buf_base, k.mul(s, box_bytes)))
            k.bulk_commit()
            # refill the stage of box i - lag once its store has read it
            has_prev = k.setp("ge", i, lag)
            with k.if_(has_prev):
                k.bulk_wait(lag, read=True)
                prev = k.sub(i, lag)
                nxt = k.add(prev, stages)
                tn = k.add(first, k.mul(nxt, step))
                more = k.setp("lt", tn, ntiles)
                with k.if_(more):
                    issue_load(tn, nxt)
            k.add(i, 1, dst=i)
            k.add(ti, step, dst=ti)
        k.bulk_wait(0, read=True)

    d = pf.KernelBuilder("tma_box_dump", target=target, reqntid=128)
    src = d.param_tensormap("src_map")
    out = d.param_ptr("out", u32)
    x0, y0 = d.param_value("x0", u32), d.param_value("y0", u32)
    tile = d.shared("tile", BOX_BYTES, align=1024)
    bar = d.shared("bar", 8, align=8)
    tid = d.tid()
    lead = d.setp("eq", tid, 0)
    d.mbarrier_init(bar, 1, pred=lead)
    d.fence("fence.mbarrier_init.release.cluster", pred=lead)
    d.bar_sync(0)
    with d.if_(lead):
        d.mbarrier_arrive(bar, expect_tx=BOX_BYTES)
        d.tensor_load(tile, src, (x0, y0), bar)
    d.mbarrier_wait(bar, 0)
    for j in range(BOX_BYTES // (128 * 16)):
        o = d.add(d.shl(tid, 4), j * 128 * 16)
        v = d.ld(d.add(d.shared_base(tile), o), type=pf.b32, space="shared", vec=4)
        d.st(d.add(out, d.cvt(o, "u64")), list(v), type=pf.b32)
    return pf.Module([k, d])


def tiles(rows: int, cols: int, box_rows: int = BOX[1]):
    """(tiles_x, ntiles) for a rows x cols array and boxes of 64 x box_rows."""
    tx = -(-cols // BOX[0])
    return tx, tx * -(-rows // box_rows)


def swizzled_box(a: np.ndarray, x0: int, y0: int) -> np.ndarray:
    """The shared-memory image of the box at (x0, y0): zero-filled outside `a`, laid out by SmemTile."""
    from ptxforge.hopper.layout import SmemTile
    box = np.zeros((BOX[1], BOX[0]), dtype=np.uint16)
    part = a[y0:y0 + BOX[1], x0:x0 + BOX[0]]
    box[:part.shape[0], :part.shape[1]] = part
    return SmemTile("u16", BOX[1], BOX[0], "K", 128).store(box)


def run_cpu(rows=200, cols=152, stages=3, grid=2, seed=0, box_rows=BOX[1], lag=1):
    """Run both kernels on the interpreter; returns (dst, dump, src, corner of the dumped box)."""
    from ptxforge import interp
    m = build(stages, box_rows=box_rows, lag=lag)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 1 << 16, (rows, cols), dtype=np.uint16)
    dst = np.zeros_like(src)
    tx, nt = tiles(rows, cols, box_rows)
    box = (BOX[0], box_rows)
    interp.run(m, "tma_copy", grid=grid, block=32, shared=copy_shared_bytes(stages, box_rows),
               args=[interp.host_tensor_map(src, box, swizzle=128), interp.host_tensor_map(dst, box, swizzle=128),
                     tx, nt])
    dump = np.zeros(BOX_BYTES // 4, np.uint32)
    tx, nt = tiles(rows, cols)
    x0, y0 = (tx - 1) * BOX[0], (nt // tx - 1) * BOX[1]  # the ragged corner box
    interp.run(m, "tma_box_dump", block=128, args=[interp.host_tensor_map(src, BOX, swizzle=128), dump, x0, y0])
    return dst, dump, src, (x0, y0)


def run_gpu(rows, cols, stages=4, grid=None, seed=0):
    """Run on the GPU; returns (dst, dump, src, corner) like run_cpu."""
    from ptxforge.runtime import DeviceBuffer, TensorMap
    m = build(stages)
    lm = pf.load(m)
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 1 << 16, (rows, cols), dtype=np.uint16)
    d_src, d_dst = DeviceBuffer.from_host(src), DeviceBuffer.empty(src.shape, np.uint16)
    tx, nt = tiles(rows, cols)
    grid = grid or min(nt, 132 * 2)
    lm["tma_copy"](grid, 32, TensorMap.from_array(d_src, BOX, swizzle=128), TensorMap.from_array(d_dst, BOX, swizzle=128),
                   tx, nt, shared=copy_shared_bytes(stages))
    dump = np.zeros(BOX_BYTES // 4, np.uint32)
    x0, y0 = (tx - 1) * BOX[0], (nt // tx - 1) * BOX[1]
    lm["tma_box_dump"](1, 128, TensorMap.from_array(d_src, BOX, swizzle=128), pf.Out(dump), x0, y0)
    return d_dst.to_host(), dump, src, (x0, y0)


def main(argv=None) -> int:
    """Run on the GPU (or the interpreter without one) and check; 0 when correct."""
    from ptxforge.runtime import gpu_skip_reason, offline_summary
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=positive_int, default=16384 + 37)
    ap.add_argument("--cols", type=positive_int, default=8192 + 24)
    ap.add_argument("--stages", type=int_in(2), default=4, help="ring slots, at least 2")
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    if args.cols % 8:  # the tensor maps' row stride: whole 16-byte units (cuTensorMapEncodeTiled)
        ap.error(f"--cols {args.cols}: a row of u16 must be a whole number of 16-byte units (a multiple of 8 columns)")
    module = build(args.stages)
    if args.listing:
        print(module.listing())
    reason = gpu_skip_reason()
    if reason is not None:
        print(offline_summary(module, reason))
        dst, dump, src, corner = run_cpu(stages=args.stages)
    else:
        rows, cols = (300, 208) if args.sanitizer else (args.rows, args.cols)
        dst, dump, src, corner = run_gpu(rows, cols, args.stages)
    ok_copy = np.array_equal(dst, src)
    ok_swz = np.array_equal(dump.view(np.uint8), swizzled_box(src, *corner))
    where = "interpreter" if reason is not None else pf.device_info().name
    print(f"hopper_tma_copy on {where}: {src.shape[0]} x {src.shape[1]} u16, copy "
          f"{'OK' if ok_copy else 'MISMATCH'}, swizzled box image {'OK' if ok_swz else 'MISMATCH'}")
    return 0 if ok_copy and ok_swz else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
