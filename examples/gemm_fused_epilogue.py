"""A GEMM with a fused epilogue, C = clamp(A . B^T + bias[n], LO, HI) in s32, built from the GEMM's parts.

The schedule emits its main loop; the epilogue is a function that receives the accumulator tile
(each register with the C element it holds) and C's geometry, adds the bias, clamps and hands
the result to the default masked store.  Checked exactly on the CPU interpreter against numpy.

    python examples/gemm_fused_epilogue.py [M N K]
"""

import argparse

import numpy as np

import ptxforge as pf
from ptxforge import interp
from ptxforge.cli import run_main
from ptxforge.schedules.gemm import Int8Gemm, store_c

LO, HI = -3000, 3000


def bias_clamp(k, acc, out):
    """Epilogue: a kernel parameter `bias` (s32[N]); acc += bias[col], clamped to [LO, HI]; store C."""
    bias = k.param_ptr("bias", pf.s32)
    col_bias = {}  # one load per distinct column offset of this thread's accumulators
    for reg, _, dcol in acc.elements():
        if dcol not in col_bias:
            col = k.add(out.col0, dcol)
            v = k.mov(0, type=pf.s32)
            k.ld(pf.Addr(k.add(bias, k.mul(col, 4, mode="wide"))), type=pf.s32, space="global", dst=v,
                 pred=k.setp("lt", col, out.n))
            col_bias[dcol] = v
        k.max(k.min(k.add(reg, col_bias[dcol], dst=reg), HI, dst=reg), LO, dst=reg)
    store_c(k, acc, out)


def run(schedule, m: int, n: int, k: int, seed: int = 0):
    """Emit the fused kernel for an M x N x K problem, run it on the interpreter: (C, numpy's C, module)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-2000, 2000, n, dtype=np.int32)
    s = schedule.for_problem(k, n)
    module = s.emit(epilogue=bias_clamp)
    c = np.full((m, n), -0x5A5A5A5A, np.int32)
    rep = interp.run(module, grid=s.grid(m, n), block=s.block, args=[a, b, c, m, n, k, bias], shared=s.shared_bytes)
    assert rep.ok, str(rep)
    want = np.clip(a.astype(np.int64) @ b.T.astype(np.int64) + bias, LO, HI)
    return c, want, module


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("size", nargs="*", type=int, metavar="M N K",
                    help="the problem (default 45 37 100: ragged, no tile divides them)")
    args = ap.parse_args(argv)
    if args.size and len(args.size) != 3:
        ap.error(f"give the problem as three sizes M N K, got {len(args.size)}")
    m, n, k = args.size or (45, 37, 100)
    schedule = Int8Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1)
    try:  # a size below 1 (or a problem the kernel cannot compute) is refused before anything is emitted
        schedule.for_problem(k, n).check_problem(m, n, k)
    except pf.ValidationError as e:
        ap.error(f"cannot run M={m} N={n} K={k}: {e.message}")
    c, want, module = run(schedule, m, n, k)
    print(f"{m}x{n}x{k}: exact = {np.array_equal(c, want)}; {pf.assemble(module).resources()}")
    return 0 if np.array_equal(c, want) else 1


if __name__ == "__main__":
    raise SystemExit(run_main(main))
