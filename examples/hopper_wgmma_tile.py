"""One CTA computes a 128 x N tile of D = A * B^T with TMA-fed wgmma: s8 -> s32 (exact) and
bf16 -> f32, A from shared memory ("SS") or from registers ("RS").

Two warpgroups, each owning 64 rows of the tile.  Per 128-byte k-tile one thread announces the
bytes (mbarrier.arrive.expect_tx) and issues the TMA loads of the A tile (128 rows) and the B tile
(N rows), both K-major with 128-byte swizzle; everyone waits on the mbarrier's phase, then each
warpgroup issues four wgmma k-steps whose descriptors come from one `SmemTile` per operand (the
same object that gave the TMA box), commits, waits, and meets the other at a barrier before the
stage is refilled.  With A from registers, each thread loads its A fragment from global memory in
the layout `isa.wgmma.a_fragment_layout` states, and only B goes through TMA.  The accumulators go
to global memory by `isa.wgmma.accumulator_offset`.

    python examples/hopper_wgmma_tile.py [--dtype s8|bf16] [--rs] [--n N] [--k K] [--listing]

On the H200: a 1024 x 1024 x 1024 problem (8 x 4 CTAs); without a GPU the interpreter runs a
128 x 64 x 256 one.  Both are checked against numpy (exactly: the inputs are small integers).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge.cli import positive_int, run_main
from ptxforge.hopper.layout import SmemTile
from ptxforge.isa import types as T
from ptxforge.isa.wgmma import accumulator_offset, wgmma_form

M_TILE = 128
K_TILE_BYTES = 128  # one 128-byte swizzle span of K per TMA box


def build(dtype="s8", n=128, k_total=256, n_total=None, rs=False) -> pf.Module:
    """Kernel `wgmma_tile(a_map, b_map, a, d)`: the 128 x n tile (ctaid.y, ctaid.x) of D (M x n_total, s32/f32)."""
    n_total = n_total or n
    acc = "s32" if dtype == "s8" else "f32"
    form = wgmma_form(n, dtype, acc=acc)
    eb = T.lookup(dtype).bits // 8
    bk = K_TILE_BYTES // eb  # elements of K per k-tile
    if k_total % bk:
        raise ValueError(f"K = {k_total} must be a multiple of {bk}")
    ta = SmemTile(dtype, M_TILE, bk, "K", 128)
    tb = SmemTile(dtype, n, bk, "K", 128)
    k = pf.KernelBuilder(f"wgmma_tile_{dtype}_{'rs' if rs else 'ss'}", target="sm_90a", reqntid=256)
    a_map = k.param_tensormap("a_map")
    b_map = k.param_tensormap("b_map")
    a_ptr = k.param_ptr("a", T.s8 if dtype == "s8" else T.b16)
    d_ptr = k.param_ptr("d", T.u32)
    smem = k.dynamic_shared("smem", align=1024)  # A tile, B tile, mbarrier: shared_bytes(...) at launch
    sA = k.shared_base(smem)
    sB = k.add(sA, ta.nbytes)
    bar = k.add(sA, ta.nbytes + tb.nbytes)
    tid = k.tid()
    lead = k.setp("eq", tid, 0)
    wg = k.shr(tid, 7)
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    k.bar_sync(0)
    row_base = k.shl(k.ctaid("y"), 7)
    col_base = k.mul(k.ctaid("x"), n)
    lane = k.and_(tid, 31)
    warp = k.and_(k.shr(tid, 5), 3)
    g, t4 = k.shr(lane, 2), k.and_(lane, 3)
    my_row = k.add(k.add(row_base, k.shl(wg, 6)), k.mad(warp, 16, g, mode="lo"))  # row of accumulator e = 0
    # descriptors: template | (address >> 4); warpgroup 1 reads rows 64..127 of the A tile
    a_start = k.add(sA, k.mul(wg, ta.offset(64, 0)))
    desc_a0 = k.add(k.cvt(k.shr(a_start, 4), "u64"), k.mov(ta.descriptor_template(), type=T.u64))
    desc_b0 = k.add(k.cvt(k.shr(sB, 4), "u64"), k.mov(tb.descriptor_template(), type=T.u64))
    if rs:  # this thread's A fragment: rows my_row (+8), columns per_reg * t4 (+ 4 per_reg r//2) of each k-step
        per = 4 // eb
        a_row = k.add(a_ptr, k.mul(k.mad(my_row, k_total, k.mul(t4, per), mode="lo"), eb, mode="wide"))
    d = k.regs(T.b32, form.d_regs, "acc")
    tx_bytes = tb.nbytes + (0 if rs else ta.nbytes)
    with k.for_range(0, k_total // bk, name="kt") as kt:
        with k.if_(lead):
            k.mbarrier_arrive(bar, expect_tx=tx_bytes)
            kx = k.mul(kt, bk)
            if not rs:
                k.tensor_load(sA, a_map, (kx, row_base), bar)
            k.tensor_load(sB, b_map, (kx, col_base), bar)
        k.mbarrier_wait(bar, k.and_(kt, 1))
        accumulate = k.setp("ne", kt, 0)
        if rs:
            frags = []
            for s in range(bk // form.k):
                regs = k.regs(T.b32, 4, f"a{s}_")
                for r in range(4):
                    off = (8 * (r % 2) * k_total + s * form.k + 4 * per * (r // 2)) * eb
                    k.ld(a_row, type=T.b32, offset=off, dst=regs[r])
                frags.append(regs)
            k.add(a_row, bk * eb, dst=a_row)
        k.wgmma_fence()
        for s in range(bk // form.k):
            db = k.add(desc_b0, (tb.slice_start(s) >> 4))
            a = frags[s] if rs else k.add(desc_a0, (ta.slice_start(s) >> 4))
            k.wgmma(a, db, d, n=n, a_type=dtype, acc=acc, scale_d=accumulate if s == 0 else 1)
        k.wgmma_commit()
        k.wgmma_wait(0)
        k.bar_sync(0)  # both warpgroups are done with the stage before it is refilled
    with k.section("store the accumulators"):
        base = k.add(d_ptr, k.mul(k.mad(my_row, n_total, k.add(col_base, k.shl(t4, 1)), mode="lo"), 4, mode="wide"))
        for e in range(form.d_regs):
            dr, dc = accumulator_offset(form, e)
            k.st(base, d[e], type=T.b32, offset=4 * (dr * n_total + dc))
    return k.module()


def shared_bytes(dtype="s8", n=128) -> int:
    """Dynamic shared memory the kernel needs: the A and B tiles and the mbarrier."""
    bk = K_TILE_BYTES // (T.lookup(dtype).bits // 8)
    return SmemTile(dtype, M_TILE, bk, "K", 128).nbytes + SmemTile(dtype, n, bk, "K", 128).nbytes + 8


def inputs(dtype, m, n, kk, seed=0):
    """A (m x kk) and B (n x kk) row-major; small integers so every sum is exact."""
    rng = np.random.default_rng(seed)
    if dtype == "s8":
        return rng.integers(-128, 128, (m, kk), dtype=np.int8), rng.integers(-128, 128, (n, kk), dtype=np.int8)
    a = (rng.integers(-4, 5, (m, kk)) * 0.5).astype(np.float32)
    b = (rng.integers(-4, 5, (n, kk)) * 0.5).astype(np.float32)
    return bf16_bits(a), bf16_bits(b)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values that are exact in bf16 -> their bf16 bit patterns (uint16)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def reference(dtype, a, b):
    """A * B^T exactly (float64 holds these sums exactly)."""
    if dtype == "s8":  # float64 is exact here (|sum| < 2^53) and much faster than an int64 product
        return np.rint(a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int64)
    fa = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    fb = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return fa @ fb.T


def _maps(dtype, a_arr, b_arr, n, make):
    bk = K_TILE_BYTES // (1 if dtype == "s8" else 2)
    tdt = "s8" if dtype == "s8" else "bf16"
    return make(a_arr, (bk, M_TILE), tdt), make(b_arr, (bk, n), tdt)


def run_cpu(dtype="s8", rs=False, n=64, kk=256, seed=0):
    """(D from the interpreter, numpy reference) for one 128 x n tile."""
    from ptxforge import interp
    a, b = inputs(dtype, M_TILE, n, kk, seed)
    m = build(dtype, n, kk, n, rs)
    am, bm = _maps(dtype, a, b, n, lambda arr, box, dt: interp.host_tensor_map(arr, box, dtype=dt, swizzle=128))
    out = np.zeros((M_TILE, n), np.uint32)
    interp.run(m, grid=(1, 1), block=256, args=[am, bm, a, out], shared=shared_bytes(dtype, n))
    got = out.view(np.int32) if dtype == "s8" else out.view(np.float32)
    return got, reference(dtype, a, b)


def run_gpu(dtype="s8", rs=False, n=256, m=1024, n_total=1024, kk=1024, seed=0):
    """(D from the GPU, numpy reference)."""
    from ptxforge.runtime import DeviceBuffer, TensorMap
    a, b = inputs(dtype, m, n_total, kk, seed)
    mod = build(dtype, n, kk, n_total, rs)
    fn = pf.load(mod)[mod.kernels[0].name]
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    am, bm = _maps(dtype, da, db, n, lambda arr, box, dt: TensorMap.from_array(arr, box, dtype=dt, swizzle=128))
    dd = DeviceBuffer.empty((m, n_total), np.uint32)
    fn((n_total // n, m // M_TILE), 256, am, bm, da, dd, shared=shared_bytes(dtype, n))
    out = dd.to_host()
    got = out.view(np.int32) if dtype == "s8" else out.view(np.float32)
    return got, reference(dtype, a, b)


def main(argv=None) -> int:
    """Run every variant on the GPU (or the interpreter) and check; 0 when all are correct."""
    from ptxforge.runtime import gpu_skip_reason, offline_summary
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=("s8", "bf16"), default=None, help="default: both")
    ap.add_argument("--rs", action="store_true", help="A from registers only (default: SS and RS)")
    ap.add_argument("--n", type=positive_int, default=256)
    ap.add_argument("--k", type=positive_int, default=1024)
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    dtypes = [args.dtype] if args.dtype else ["s8", "bf16"]
    for dtype in dtypes:  # an N no wgmma has, a K of partial k-tiles: a usage error before anything runs
        try:
            build(dtype, args.n, args.k, args.n)
        except ValueError as e:  # the example's own checks, and ValidationError
            ap.error(f"no {dtype} kernel for N = {args.n}, K = {args.k}: {getattr(e, 'message', e)}")
    reason = gpu_skip_reason()
    status = 0
    for dtype in dtypes:
        for rs in ([True] if args.rs else [False, True]):
            if args.listing:
                print(build(dtype, args.n, args.k, args.n, rs).listing())
            if reason is not None:
                if dtype == "s8" and not rs:
                    print(offline_summary(build(dtype, args.n, args.k, args.n, rs), reason))
                got, want = run_cpu(dtype, rs)
                where = "interpreter, 128 x 64 x 256"
            else:
                small = args.sanitizer
                got, want = run_gpu(dtype, rs, n=64 if small else args.n, m=128 if small else 1024,
                                    n_total=64 if small else 1024, kk=256 if small else args.k)
                where = f"{pf.device_info().name}, {got.shape[0]} x {got.shape[1]} x {args.k if not small else 256}"
            ok = np.array_equal(got.astype(np.float64), want.astype(np.float64))
            print(f"hopper_wgmma_tile {dtype} {'RS' if rs else 'SS'} ({where}): {'OK' if ok else 'MISMATCH'}")
            status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(run_main(main))
