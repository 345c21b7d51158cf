"""Run a tensor-core kernel on the CPU, then let the interpreter find a bug in it.

    python examples/interpret.py

No GPU needed: ptxforge.interp executes the kernel's instructions with numpy, exactly (integer
results are bit-identical to a GPU's), and checks every shared-memory access on the way.
"""

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import interp
from ptxforge.cli import run_main
from ptxforge.int4 import pack_int4, random_int4
from ptxforge.schedules import Int4Gemm
from ptxforge.testing.mutants import drop_bar_sync


def main(argv=()) -> int:
    """Run the GEMM on the interpreter, check it, then plant a missing barrier and show the race report; `argv`
    takes --help alone (the script passes its command line)."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(list(argv))
    rng = np.random.default_rng(0)
    m, n, k = 100, 70, 256
    gemm = Int4Gemm(target="sm_90").for_problem(k, n)  # int4 stored, nibbles unpacked to s8, m16n8k32 mma
    a, b = pack_int4(random_int4((m, k), rng)), pack_int4(random_int4((n, k), rng))
    c = np.zeros((m, n), np.int32)
    report = interp.run(gemm.module, grid=gemm.grid(m, n), block=gemm.block, shared=gemm.shared_bytes,
                        args=[a, b, c, m, n, k])
    print(report)
    assert np.array_equal(c, gemm.reference(a, b, k)), "the interpreter disagrees with numpy"
    print("C == A @ B.T exactly\n")

    # The same kernel with its bar.sync removed: every thread waits for its own cp.async copies,
    # but ldmatrix reads rows that other threads copied.
    buggy = drop_bar_sync(gemm.module.kernels[0])
    try:
        interp.run(buggy, grid=gemm.grid(m, n), block=gemm.block, shared=gemm.shared_bytes,
                   args=[a, b, c, m, n, k])
    except interp.InterpError as e:
        print(e)

    # A small kernel of your own: out[i] = popc(x[i]) ^ i, with a guarded tail.
    kb = pf.KernelBuilder("popc_xor", target="sm_90", maxntid=128)
    x, out = kb.param_ptr("x", pf.u32), kb.param_ptr("out", pf.u32)
    count = kb.param_value("n", pf.u32)
    i = kb.global_index()
    with kb.if_(kb.setp("lt", i, count)):
        off = kb.mul(i, 4, mode="wide")
        kb.st(kb.add(out, off), kb.xor(kb.popc(kb.ld(kb.add(x, off), type=pf.u32)), i))
    xs = rng.integers(0, 2 ** 32, 1000, dtype=np.uint32)
    ys = np.zeros(1000, np.uint32)
    print(interp.run(kb.module(), grid=8, block=128, args=[xs, ys, 1000]))
    want = np.array([bin(int(v)).count("1") for v in xs], np.uint32) ^ np.arange(1000, dtype=np.uint32)
    assert np.array_equal(ys, want)
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main, sys.argv[1:]))
