"""Read PTX you already have (from nvcc, clang or Triton), check it, run it on the CPU, find its bug.

    python examples/read_ptx.py [--gpu]

`ptxforge.parse` reads PTX text into a Module through the same ISA tables the builder uses, so a line
the tables reject is an error naming the file's line.  The module then lists, assembles, runs on the
CPU interpreter (with its race checks) and, on a GPU, through the driver.  The kernel below is written
the way nvcc writes a block reduction: one partial sum per CTA.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import interp
from ptxforge.cli import run_main

BLOCK_SUM = r"""
.version 8.0
.target sm_80
.address_size 64

.visible .entry block_sum(
    .param .u64 block_sum_param_0,
    .param .u64 block_sum_param_1,
    .param .u32 block_sum_param_2
)
.maxntid 128, 1, 1
{
    .reg .pred %p<5>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<10>;
    // 128 partial sums, one per thread
    .shared .align 4 .b8 partial[512];

    ld.param.u64 %rd1, [block_sum_param_0];
    ld.param.u64 %rd2, [block_sum_param_1];
    ld.param.u32 %r5, [block_sum_param_2];
    mov.u32 %r1, %tid.x;
    mov.u32 %r6, %ctaid.x;
    mov.u32 %r7, %ntid.x;
    mad.lo.s32 %r2, %r6, %r7, %r1;
    mov.u32 %r15, 0;
    setp.ge.u32 %p1, %r2, %r5;
    @%p1 bra $L__BB0_2;
    cvta.to.global.u64 %rd3, %rd1;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.u32 %r15, [%rd5];
$L__BB0_2:
    shl.b32 %r8, %r1, 2;
    mov.u32 %r9, partial;
    add.s32 %r3, %r9, %r8;
    st.shared.u32 [%r3], %r15;
    bar.sync 0;
    mov.u32 %r14, 64;
$L__BB0_3:
    setp.ge.u32 %p2, %r1, %r14;
    @%p2 bra $L__BB0_5;
    shl.b32 %r10, %r14, 2;
    add.s32 %r11, %r3, %r10;
    ld.shared.u32 %r12, [%r11];
    ld.shared.u32 %r13, [%r3];
    add.s32 %r13, %r13, %r12;
    st.shared.u32 [%r3], %r13;
$L__BB0_5:
    bar.sync 0;
    shr.u32 %r14, %r14, 1;
    setp.ne.s32 %p3, %r14, 0;
    @%p3 bra $L__BB0_3;
    setp.ne.s32 %p4, %r1, 0;
    @%p4 bra $L__BB0_7;
    ld.shared.u32 %r13, [partial];
    cvta.to.global.u64 %rd6, %rd2;
    mul.wide.u32 %rd7, %r6, 4;
    add.s64 %rd8, %rd6, %rd7;
    st.global.u32 [%rd8], %r13;
$L__BB0_7:
    ret;
}
"""

BLOCK = 128


def sums(module: pf.Module, x: np.ndarray) -> tuple[np.ndarray, interp.Report]:
    """One sum per CTA of `x` (u32, wrapping), computed by `module`'s block_sum on the CPU interpreter."""
    grid = -(-x.size // BLOCK)
    out = np.full(grid, 0xDEADBEEF, np.uint32)  # poisoned: every CTA must write its sum
    report = interp.run(module, "block_sum", grid=grid, block=BLOCK, args=[x, out, x.size])
    return out, report


def reference(x: np.ndarray) -> np.ndarray:
    """The per-CTA sums numpy computes (u32 wraps as the kernel's add.s32 does)."""
    padded = np.zeros(-(-x.size // BLOCK) * BLOCK, np.uint64)
    padded[:x.size] = x
    return (padded.reshape(-1, BLOCK).sum(axis=1) % (1 << 32)).astype(np.uint32)


def main(argv=None) -> int:
    """Read, list, assemble and run BLOCK_SUM; then show what the reader and the interpreter catch."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="also run the kernel through the driver")
    args = ap.parse_args(argv)

    module = pf.parse(BLOCK_SUM, filename="block_sum.ptx")
    listing = module.listing().splitlines()
    print("\n".join(line for line in listing if "mad.lo" in line or "bar.sync" in line))
    print(pf.assemble(module, "sm_90").report())

    rng = np.random.default_rng(7)
    x = rng.integers(0, 1 << 32, 1000, dtype=np.uint32)
    out, report = sums(module, x)
    print(report)
    assert np.array_equal(out, reference(x)), "the interpreter disagrees with numpy"
    print(f"interpreter: {out.size} block sums == numpy")

    # The same text with the first bar.sync dropped: thread t reads partial[t + 64] before thread
    # t + 64 has stored it.  The interpreter names both accesses and their PTX lines.
    racy = BLOCK_SUM.replace("    bar.sync 0;\n    mov.u32 %r14, 64;", "    mov.u32 %r14, 64;")
    try:
        sums(pf.parse(racy, filename="racy.ptx"), x)
        raise AssertionError("the race went unseen")
    except interp.InterpError as e:
        print("\n".join(str(e).splitlines()[1:4]))

    # A typo the tables reject is an error at its line of the input, saying what is legal.
    typo = BLOCK_SUM.replace("mul.wide.u32 %rd4", "mul.wide.f32 %rd4")
    try:
        pf.parse(typo, filename="typo.ptx")
        raise AssertionError("the typo was read")
    except pf.parse.ParseError as e:
        print(str(e).splitlines()[0])

    if args.gpu:
        try:
            fn = pf.load(module)["block_sum"]
        except (pf.ToolchainMissing, pf.DriverError, ImportError) as e:
            print(f"read_ptx: --gpu: no GPU run ({type(e).__name__}: {e})", file=sys.stderr)
            return 1
        gpu_out = np.zeros_like(out)
        fn(out.size, BLOCK, x, gpu_out, x.size)
        assert np.array_equal(gpu_out, out), "the GPU disagrees with the interpreter"
        print("GPU: the same block sums")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
