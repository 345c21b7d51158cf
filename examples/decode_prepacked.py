"""A decode step's int4 GEMM over weights prepacked once: C[M, N] = A[M, K] . W[N, K]^T, M small.

Weights that stay the same from call to call are reordered once (`HopperGemm.prepack`) into the order
the weight-streaming kernel reads them in: front to back, 512 contiguous bytes per warp load, so
they stream at the rate of plain sequential reads (`schedules/hopper/prepack.py`).  Each call then
takes the activations A (packed int4, row-major) and the `PrepackedWeights`.  The results are checked
against numpy; without a GPU the same kernel runs on the CPU interpreter at a small shape.

    python examples/decode_prepacked.py [--m M] [--n N] [--k K] [--calls C]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ptxforge.int4 import pack_int4
from ptxforge.runtime import gpu_skip_reason
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.config import SKINNY_S4_PREPACKED


def gemm(m: int) -> HopperGemm:
    """The weight-streaming configuration for M rows of activations (block_n: M rounded up to 32 or 64)."""
    return HopperGemm("s4", **{**SKINNY_S4_PREPACKED, "block_n": 32 if m <= 32 else 64,
                               "stages": 4 if m <= 32 else 2})


def operands(m: int, n: int, k: int, seed: int = 0) -> tuple:
    """Signed int4 values in [-8, 7] (never all zero): (A values, W values, A packed, W packed)."""
    rng = np.random.default_rng(seed)
    a, w = rng.integers(-8, 8, (m, k)), rng.integers(-8, 8, (n, k))
    return a, w, pack_int4(a), pack_int4(w)


def run_cpu(m: int = 20, n: int = 130, k: int = 544) -> tuple:
    """(C from the interpreter, numpy's C) at a small ragged shape."""
    from ptxforge import interp
    from ptxforge.schedules.hopper.prepack import prepack_numpy
    g = gemm(m)
    a, w, pa, pw = operands(m, n, k)
    c = np.full((m, n), -7, np.int32)
    units = -(-n // g.block_m) * -(-m // g.block_n)
    # swap_ab: the kernel computes W . A^T (its M is N) and stores it transposed into C
    interp.run(g.module, grid=units, block=g.threads, shared=g.smem_bytes,
               args=[prepack_numpy(pw), pa, c, n, m, k, 1])
    return c, a @ w.T


def run_gpu(m: int, n: int, k: int, calls: int) -> bool:
    """Prepack the weights once, run `calls` decode steps through the documented run(); True when exact."""
    from ptxforge.runtime import DeviceBuffer, synchronize
    g = gemm(m)
    print(g.describe())
    ok = True
    a, w, pa, pw = operands(m, n, k, seed=1)
    weights = g.prepack(DeviceBuffer.from_host(pw))  # once, on the GPU
    for step in range(calls):
        a, _, pa, _ = operands(m, n, k, seed=10 + step)  # new activations each step, the same weights
        c = g.run(DeviceBuffer.from_host(pa), weights)
        synchronize()
        same = np.array_equal(c.to_host(), a @ w.T)
        ok &= same
        print(f"step {step}: {'exact' if same else 'MISMATCH'}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=32)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args(argv)
    reason = gpu_skip_reason()
    if reason is None:
        from ptxforge.runtime import driver as drv
        if drv.device_info().compute_capability < (9, 0):
            reason = "the weight-streaming kernel needs sm_90a (an H100/H200)"
    if reason is not None:
        print(f"no sm_90 GPU ({reason}): running a small problem on the CPU interpreter")
        got, want = run_cpu()
        same = np.array_equal(got, want)
        print("interpreter:", "exact" if same else "MISMATCH")
        return 0 if same else 1
    return 0 if run_gpu(args.m, args.n, args.k, args.calls) else 1


if __name__ == "__main__":
    sys.exit(main())
