"""A 2-CTA cluster shares the B operand through TMA multicast: D (M x N, s32) = A (M x K, s8) * B^T.

The two CTAs of a cluster compute 64 rows each of the same 64 x N column block, so they need the
same B tile.  Per 128-byte k-tile each CTA loads its own A tile (64 rows) and half of the B tile,
multicast (.multicast::cluster, mask 0b11) into both CTAs' shared memory at the same offset,
completing on both CTAs' mbarriers; each CTA's mbarrier therefore expects its A bytes plus the
whole B tile.  One warpgroup per CTA runs the wgmma k-steps (descriptors from `SmemTile`), and a
cluster barrier (barrier.cluster.arrive.release / wait.acquire) keeps either CTA from refilling
its partner's B half while the partner still reads it.  At the start the CTAs also greet each
other through distributed shared memory (mapa + st.shared::cluster), checked in `flags`.

    python examples/hopper_cluster_multicast.py [--n N] [--k K] [--listing] [--sanitizer]

On the H200 (cuLaunchKernelEx with a (2, 1, 1) cluster): M = 1024, N = 512, K = 1024; without a GPU
the interpreter runs M = 128, N = 64, K = 256.  Checked exactly against numpy.
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

BK = 128  # K elements (bytes, s8) per k-tile: one 128-byte swizzle span


def tiles(n):
    """(A tile, B tile) layouts of one CTA."""
    return SmemTile("s8", 64, BK, "K", 128), SmemTile("s8", n, BK, "K", 128)


def shared_bytes(n) -> int:
    """Dynamic shared memory: A tile, B tile, the mbarrier and the greeting word."""
    ta, tb = tiles(n)
    return ta.nbytes + tb.nbytes + 16


def build(n=64, k_total=256, n_total=None) -> pf.Module:
    """Kernel `cluster_gemm(a_map, b_map, d, flags)`, clusters of (2, 1, 1) CTAs."""
    n_total = n_total or n
    form = wgmma_form(n, "s8")
    if n % 16:  # each CTA's half of B is a TMA box into the swizzled tile: it must start on a 1024-byte pattern
        raise pf.ValidationError(f"N = {n}: each CTA multicasts N/2 rows of B, whose 128-byte-swizzled box must land "
                                 "on a 1024-byte boundary (8 rows of 128 bytes), so N must be a multiple of 16")
    ta, tb = tiles(n)
    half = n // 2
    k = pf.KernelBuilder("cluster_gemm", target="sm_90a", reqntid=128, reqnctapercluster=(2, 1, 1))
    a_map, b_map = k.param_tensormap("a_map"), k.param_tensormap("b_map")
    d_ptr = k.param_ptr("d", T.s32)
    flags = k.param_ptr("flags", T.u32)
    smem = k.dynamic_shared("smem", align=1024)
    sA = k.shared_base(smem)
    sB = k.add(sA, ta.nbytes)
    bar = k.add(sA, ta.nbytes + tb.nbytes)
    hello = k.add(bar, 8)
    tid = k.tid()
    lead = k.setp("eq", tid, 0)
    rank = k.cluster_ctarank()
    with k.if_(lead):
        k.mbarrier_init(bar, 1)
        k.fence("fence.mbarrier_init.release.cluster")
    k.cluster_sync()  # both CTAs running (a remote write needs its target started), both barriers initialized
    with k.if_(lead):
        k.st(k.mapa(hello, k.xor(rank, 1)), k.add(rank, 100), type=T.u32, space="shared::cluster")
    k.cluster_sync()  # both greetings delivered
    with k.if_(lead):
        k.st(k.add(flags, k.mul(k.ctaid(), 4, mode="wide")), k.ld(hello, type=T.u32, space="shared"), type=T.u32)
    row0 = k.shl(k.ctaid(), 6)  # this CTA's 64 rows of D
    col0 = k.mul(k.ctaid("y"), n)  # the column block both CTAs share
    desc_a = k.add(k.cvt(k.shr(sA, 4), "u64"), k.mov(ta.descriptor_template(), type=T.u64))
    desc_b = k.add(k.cvt(k.shr(sB, 4), "u64"), k.mov(tb.descriptor_template(), type=T.u64))
    my_half = k.add(sB, k.mul(rank, tb.offset(half, 0)))
    d = k.regs(T.b32, form.d_regs, "acc")
    with k.for_range(0, k_total // BK, name="kt") as kt:
        with k.if_(lead):
            k.mbarrier_arrive(bar, expect_tx=ta.nbytes + tb.nbytes)  # own A + both halves of B
            kx = k.mul(kt, BK)
            k.tensor_load(sA, a_map, (kx, row0), bar)
            k.tensor_load(my_half, b_map, (kx, k.add(col0, k.mul(rank, half))), bar, multicast=0b11)
        k.mbarrier_wait(bar, k.and_(kt, 1))
        accumulate = k.setp("ne", kt, 0)
        k.wgmma_fence()
        for s in range(BK // form.k):
            k.wgmma(k.add(desc_a, ta.slice_start(s) >> 4), k.add(desc_b, tb.slice_start(s) >> 4), d, n=n,
                    a_type="s8", scale_d=accumulate if s == 0 else 1)
        k.wgmma_commit()
        k.wgmma_wait(0)
        k.cluster_sync()  # the partner has read its B half: it may be refilled
    r0, c0 = k.wgmma_accumulator_origin()
    base = k.add(d_ptr, k.mul(k.mad(k.add(row0, r0), n_total, k.add(col0, c0), mode="lo"), 4, mode="wide"))
    for e in range(form.d_regs):
        dr, dc = accumulator_offset(form, e)
        k.st(base, d[e], type=T.b32, offset=4 * (dr * n_total + dc))
    return k.module()


def inputs(m, n, kk, seed=0):
    """Random s8 A (m x kk) and B (n x kk)."""
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, (m, kk), dtype=np.int8), rng.integers(-128, 128, (n, kk), dtype=np.int8)


def reference(a, b):
    """A * B^T exactly (float64 is exact for these sums and fast)."""
    return np.rint(a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int64)


def expected_flags(grid_x):
    """Each CTA holds its partner's rank + 100."""
    return np.array([100 + ((x % 2) ^ 1) for x in range(grid_x)], dtype=np.uint32)


def run_cpu(n=64, m=128, kk=256, seed=0):
    """(D, flags, reference D) from the interpreter."""
    from ptxforge import interp
    a, b = inputs(m, n, kk, seed)
    ta, tb = tiles(n)
    d = np.zeros((m, n), np.int32)
    flags = np.zeros(m // 64, np.uint32)
    interp.run(build(n, kk, n), grid=(m // 64, 1), block=128, shared=shared_bytes(n),
               args=[interp.host_tensor_map(a, (BK, 64), swizzle=128),
                     interp.host_tensor_map(b, (BK, n // 2), swizzle=128), d, flags])
    return d, flags, reference(a, b)


def run_gpu(n=256, m=1024, n_total=512, kk=1024, seed=0):
    """(D, flags, reference D) from the GPU, launched in (2, 1, 1) clusters."""
    from ptxforge.runtime import DeviceBuffer, TensorMap, launch_cluster
    a, b = inputs(m, n_total, kk, seed)
    fn = pf.load(build(n, kk, n_total))["cluster_gemm"]
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dd = DeviceBuffer.empty((m, n_total), np.int32)
    df = DeviceBuffer.empty((m // 64,), np.uint32)
    launch_cluster(fn, (m // 64, n_total // n), 128, (2, 1, 1), TensorMap.from_array(da, (BK, 64), swizzle=128),
                   TensorMap.from_array(db, (BK, n // 2), swizzle=128), dd, df, shared=shared_bytes(n))
    return dd.to_host(), df.to_host(), reference(a, b)


def main(argv=None) -> int:
    """Run on the GPU (or the interpreter) and check; 0 when correct."""
    from ptxforge.runtime import gpu_skip_reason, offline_summary
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=positive_int, default=256, help="a wgmma N that is a multiple of 16 (16 to 256)")
    ap.add_argument("--k", type=positive_int, default=1024, help=f"a multiple of {BK}")
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    if args.k % BK:
        ap.error(f"K = {args.k} must be a multiple of {BK} (whole k-tiles)")
    try:
        build(args.n, args.k)
    except pf.ValidationError as e:
        ap.error(f"no kernel for N = {args.n}: {e.message}")
    if args.listing:
        print(build(args.n, args.k).listing())
    reason = gpu_skip_reason()
    if reason is not None:
        print(offline_summary(build(args.n, args.k), reason))
        d, flags, want = run_cpu()
        where = "interpreter"
    else:
        d, flags, want = run_gpu(64, 128, 64, 256) if args.sanitizer else run_gpu(args.n, 1024, 512, args.k)
        where = pf.device_info().name
    ok = np.array_equal(d.astype(np.int64), want) and np.array_equal(flags, expected_flags(len(flags)))
    print(f"hopper_cluster_multicast on {where}: D {d.shape[0]} x {d.shape[1]}, {len(flags)} CTAs in clusters of 2: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
