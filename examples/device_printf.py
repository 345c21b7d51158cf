"""printf from a kernel, on the CPU interpreter and on a GPU: a block-wise maximum that reports each block's
result from its thread 0.

    python examples/device_printf.py

`k.printf(fmt, *args)` writes the call nvcc writes for printf (`vprintf` with a format string in global memory
and the arguments in a per-thread buffer).  The interpreter prints each thread's line in thread order, into
`Report.printed` and stdout; a GPU prints them, in an order of its own, when the host next synchronizes.  The
arguments are checked against the format where the kernel is built: a float to %d, a 64-bit register to %d
(use %lld) or a length modifier CUDA's printf lacks (%hhu) is a ValidationError at that line.
"""

import argparse

import numpy as np

import ptxforge as pf
from ptxforge import interp
from ptxforge.cli import run_main

BLOCK = 128


def block_max_kernel(target="sm_80"):
    """out[b] = max of x over block b; thread 0 of each block prints it with the block's index and size."""
    k = pf.KernelBuilder("block_max", target=target, reqntid=BLOCK)
    x, out = k.param_ptr("x", pf.f32), k.param_ptr("out", pf.f32)
    tid, blk = k.tid(), k.ctaid()
    v = k.ld(k.add(x, k.mul(k.mad(blk, BLOCK, tid), 4, mode="wide")), type=pf.f32)
    for offset in (16, 8, 4, 2, 1):  # the warp's maximum, then the warps' through shared memory
        k.max(v, k.shfl("bfly", v, offset), dst=v)
    part = k.shared("part", 4 * (BLOCK // 32), align=16)
    base = k.shared_base(part)
    lane0 = k.setp("eq", k.and_(tid, 31), 0)
    k.st(k.add(base, k.mul(k.shr(tid, 5), 4)), v, type=pf.f32, space="shared", pred=lane0)
    k.bar_sync()
    first = k.setp("eq", tid, 0)
    with k.if_(first):
        best = k.ld(base, type=pf.f32, space="shared")
        for w in range(1, BLOCK // 32):
            k.max(best, k.ld(base, type=pf.f32, space="shared", offset=4 * w), dst=best)
        k.st(k.add(out, k.mul(blk, 4, mode="wide")), best)
        k.printf("block %d: max %.3f over %d values\n", blk, best, BLOCK)
    return k


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)  # --help; no options
    blocks = 4
    x = np.random.default_rng(0).standard_normal(blocks * BLOCK).astype(np.float32)
    want = x.reshape(blocks, BLOCK).max(axis=1)
    k = block_max_kernel()
    out = np.zeros(blocks, np.float32)
    report = interp.run(k.module(), grid=blocks, block=BLOCK, args=[x, out])
    assert np.array_equal(out, want), "the interpreter disagrees with numpy"
    assert report.printed == [f"block {b}: max {want[b]:.3f} over {BLOCK} values\n" for b in range(blocks)]
    print(f"interpreter: {len(report.printed)} lines, each block's maximum exact")
    try:
        fn = pf.load(k.module())["block_max"]
    except (pf.ToolchainMissing, pf.DriverError, ImportError) as e:
        print(f"no GPU run ({type(e).__name__}: {e})")
        return 0
    gpu_out = np.zeros(blocks, np.float32)
    fn(blocks, BLOCK, pf.In(x), pf.Out(gpu_out))  # Out copies back, which synchronizes: the lines print then
    assert np.array_equal(gpu_out, want), "the GPU disagrees with numpy"
    print("GPU: each block's maximum exact")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
