"""A half-precision GEMM on the warp-level matrix API (wmma), run on the CPU interpreter (and on a GPU when
there is one), checked against numpy.

    python examples/wmma_gemm.py

C (M x N, f32) = A (M x K, f16, row-major) x B (K x N, f16, stored column-major, i.e. as B^T row-major).
Each warp of a 4-warp CTA owns one 16 x 16 tile of C and walks K in steps of 16: wmma.load of A and B
straight from global memory, wmma.mma into the accumulator fragment, wmma.store at the end.  M, N and K
are multiples of 16 here (wmma has no masked form: a ragged problem pads its operands).

The interpreter runs wmma with a fragment layout of its own (PTX leaves the layout to the implementation),
so loading, multiplying, storing and an operation on every element (the alpha scaling below) give what a
GPU gives; a kernel that reads single elements of a fragment would not port either way.
"""

import argparse

import numpy as np

import ptxforge as pf
from ptxforge import interp
from ptxforge.cli import run_main

TILE = 16
WARPS = 4  # a CTA: 2 x 2 tiles of C


def wmma_gemm_kernel(target="sm_80"):
    """The kernel: params a, b, c, m, n, k, alpha; grid (n / 32, m / 32), 128 threads."""
    kb = pf.KernelBuilder("wmma_gemm", target=target, reqntid=32 * WARPS)
    a, b, c = kb.param_ptr("a", pf.f16), kb.param_ptr("b", pf.f16), kb.param_ptr("c", pf.f32)
    m, n, k = (kb.param_value(x, pf.u32) for x in "mnk")
    alpha = kb.param_value("alpha", pf.f32)
    warp = kb.shr(kb.tid(), 5)
    row = kb.mad(kb.ctaid("y"), 2 * TILE, kb.mul(kb.shr(warp, 1), TILE))  # the tile's first row of C
    col = kb.mad(kb.ctaid("x"), 2 * TILE, kb.mul(kb.and_(warp, 1), TILE))  # and first column
    acc = pf.Vec(tuple(kb.mov(0.0, type=pf.f32) for _ in range(8)))  # the accumulator fragment, all zeros
    with kb.for_range(0, k, TILE, name="kk") as kk:
        a_at = kb.add(a, kb.mul(kb.mad(row, k, kk), 2, mode="wide"))  # A[row, kk], rows k elements apart
        b_at = kb.add(b, kb.mul(kb.mad(col, k, kk), 2, mode="wide"))  # B^T[col, kk]: B column-major
        fa = kb.wmma_load("a", a_at, shape="m16n16k16", type="f16", layout="row", stride=k, space="global")
        fb = kb.wmma_load("b", b_at, shape="m16n16k16", type="f16", layout="col", stride=k, space="global")
        kb.wmma_mma(fa, fb, acc, shape="m16n16k16", type="f16", acc="f32", dst=acc)
    for r in acc.regs:  # C = alpha * A B: one operation on every element of the fragment
        kb.mul(r, alpha, dst=r)
    c_at = kb.add(c, kb.mul(kb.mad(row, n, col), 4, mode="wide"))
    kb.wmma_store(c_at, acc, shape="m16n16k16", type="f32", layout="row", stride=n, space="global")
    return kb.module()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, nargs=3, default=(64, 96, 128), metavar=("M", "N", "K"))
    p.add_argument("--sanitizer", action="store_true", help="the default small size, for compute-sanitizer runs")
    args = p.parse_args(argv)
    m, n, k = args.size
    if m % 32 or n % 32 or k % TILE:
        p.error("M and N must be multiples of 32 and K of 16")
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (m, k)).astype(np.float16)  # small integers: every sum is exact in f32
    b = rng.integers(-4, 5, (k, n)).astype(np.float16)
    want = 0.5 * (a.astype(np.float64) @ b.astype(np.float64))
    mod = wmma_gemm_kernel()
    print("\n".join(line for line in mod.ptx.splitlines() if "wmma." in line))  # the wmma lines it emits
    bt = np.ascontiguousarray(b.T)
    c = np.full((m, n), np.nan, np.float32)
    report = interp.run(mod, grid=(n // 32, m // 32), block=32 * WARPS, args=[a, bt, c, m, n, k, 0.5])
    print(report)
    assert np.array_equal(c, want), "the interpreter disagrees with numpy"
    print(f"interpreter: C ({m} x {n}) == 0.5 * A @ B exactly")
    try:
        from ptxforge.runtime import DeviceBuffer
        fn = pf.load(mod)["wmma_gemm"]
    except (pf.ToolchainMissing, pf.DriverError, ImportError) as e:
        print(f"no GPU run ({type(e).__name__}: {e})")
        return 0
    dc = DeviceBuffer.from_host(np.zeros((m, n), np.float32))
    fn((n // 32, m // 32), 32 * WARPS, DeviceBuffer.from_host(a), DeviceBuffer.from_host(bt), dc, m, n, k,
       np.float32(0.5))
    assert np.array_equal(dc.to_host(), want), "the GPU disagrees with numpy"
    print(f"GPU: C ({m} x {n}) == 0.5 * A @ B exactly")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
