"""Copy one ragged matrix through the TileCopy pipeline and check it bit for bit against numpy.

By default a small ragged case that hangs over both edges of its last tiles (the one to run
under compute-sanitizer memcheck and racecheck):

    python examples/tile_copy.py
    compute-sanitizer --tool memcheck  python examples/tile_copy.py
    compute-sanitizer --tool racecheck python examples/tile_copy.py --completion groups
    python examples/tile_copy.py --dtype s4 --rows 77 --cols 301 --src-stride 160 --completion mbarrier
    python examples/tile_copy.py --listing        # the PTX, with the Python line of every instruction
    python examples/tile_copy.py --interpret      # run on the CPU interpreter instead of a GPU

Exit status 0 when the copy matches, 1 when it does not.  Without a GPU it runs on the
interpreter, which also reports races and early reads of copies, and checks that every byte of
the matrix was read and written exactly once and the stride padding never touched.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from ptxforge import ValidationError, interp  # noqa: E402
from ptxforge.cli import int_in, positive_int, run_main  # noqa: E402
from ptxforge.schedules import TileCopy  # noqa: E402
from ptxforge.runtime import gpu_skip_reason  # noqa: E402


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtype", default="bf16", choices=["s4", "s8", "bf16", "f32"])
    p.add_argument("--rows", type=positive_int, default=77)
    p.add_argument("--cols", type=positive_int, default=301)
    p.add_argument("--src-stride", type=int, default=None,
                   help="source row stride in bytes (default: the row rounded up to 16 bytes)")
    p.add_argument("--dst-stride", type=int, default=None, help="destination row stride in bytes (same default)")
    p.add_argument("--packed", action="store_true", help="rows back to back (strides = row bytes): the "
                   "planner's narrower fallbacks")
    p.add_argument("--tile-rows", type=positive_int, default=16)
    p.add_argument("--tile-cols", type=positive_int, default=None, help="default: 128 bytes of elements")
    p.add_argument("--threads", type=positive_int, default=128)
    p.add_argument("--stages", type=positive_int, default=3)
    p.add_argument("--layout", default="swizzle", choices=["linear", "padded", "swizzle"])
    p.add_argument("--completion", default="groups", choices=["groups", "mbarrier"])
    p.add_argument("--ctas-per-sm", type=positive_int, default=4)
    p.add_argument("--ctas", type=int_in(0), default=2, help="cap on the grid: few CTAs walk many tiles each, so the "
                   "ring of stages is reused (0: no cap)")
    p.add_argument("--target", default="sm_90")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--listing", action="store_true", help="print the annotated PTX and exit")
    p.add_argument("--interpret", action="store_true", help="run on the CPU interpreter (ptxforge.interp)")
    p.add_argument("--sanitizer", action="store_true",
                   help="accepted like the other examples; the defaults are already sized for compute-sanitizer")
    a = p.parse_args(argv)
    try:  # what TileCopy refuses (threads not whole warps, strides shorter than a row ...) is a usage error
        a.tile_copy = make(a)
    except ValidationError as e:
        p.error(e.message)
    return a


def make(a) -> TileCopy:
    bits = {"s4": 4, "s8": 8, "bf16": 16, "f32": 32}[a.dtype]
    tile_cols = a.tile_cols if a.tile_cols is not None else 128 * 8 // bits
    row_bytes = -(-a.cols * bits // 8)
    # 16-byte-aligned rows take 16-byte cp.async with zero-filled ragged edges; odd int4 rows need
    # a whole-byte stride in any case
    padded = row_bytes + 1 if (a.packed and (a.cols * bits) % 8) else row_bytes if a.packed else -(-row_bytes // 16) * 16
    src_stride = a.src_stride if a.src_stride is not None else padded
    dst_stride = a.dst_stride if a.dst_stride is not None else padded
    return TileCopy(a.rows, a.cols, a.dtype, tile_rows=a.tile_rows, tile_cols=tile_cols, threads=a.threads,
                    stages=a.stages, layout=a.layout, completion=a.completion, target=a.target,
                    src_row_stride_bytes=src_stride, dst_row_stride_bytes=dst_stride, ctas_per_sm=a.ctas_per_sm)


def run_interpreted(tc: TileCopy, src, dst, cap):
    """dst after the copy on the interpreter, and a list of problems (findings, bytes moved not once)."""
    # no cap: one CTA per tile, as TileCopy.interpret runs it
    ctas = tc.grid(sm_count=tc.n_tiles)[0] if not cap else min(cap, tc.grid()[0])
    report = interp.run(tc.emit(), tc.kernel_name, grid=ctas, block=tc.threads, args=list(tc.args(src, dst)),
                        shared=tc.shared_bytes, check=False, count_accesses=True)
    problems = [str(f) for f in report.findings]
    traffic = (("read from src", report.accesses["src"].reads), ("written to dst", report.accesses["dst"].writes))
    for what, counts in traffic:
        data, padding = counts[:, :tc.row_bytes], counts[:, tc.row_bytes:]
        if (data != 1).any():
            problems.append(f"{int((data != 1).sum())} matrix bytes {what} other than exactly once")
        if padding.any():
            problems.append(f"{int((padding != 0).sum())} padding bytes {what}")
    print(f"interpreter: {report.ctas} CTAs, {report.warp_instructions} warp-instructions in {report.seconds:.2f} s")
    return dst, problems


def main(argv=None) -> int:
    a = parse(argv)
    tc = a.tile_copy
    print(tc.describe())
    if a.listing:
        print(tc.emit().listing())
        return 0
    src = tc.random_source(a.seed)
    dst = tc.poisoned_destination()
    reason = gpu_skip_reason()
    problems = []
    if a.interpret or reason is not None:
        if reason is not None and not a.interpret:
            print(f"no GPU ({reason}): running on the interpreter")
        got, problems = run_interpreted(tc, src, dst.copy(), a.ctas)
        where = "interpreter"
    else:
        got = tc.run(src, dst.copy(), ctas=a.ctas or None)
        where = "GPU"
    want = tc.reference(src, dst)
    g = got.view(np.uint8).reshape(tc.rows, -1)
    w = want.view(np.uint8).reshape(tc.rows, -1)
    bad = np.argwhere(g != w)
    if len(bad):
        r, c = bad[0]
        problems.insert(0, f"MISMATCH: {len(bad)} bytes differ; first at row {r}, byte {c}: "
                           f"{g[r, c]:#04x} instead of {w[r, c]:#04x}")
    if problems:
        print(f"FAILED on the {where}:\n" + "\n".join(problems))
        return 1
    checked = ", each byte read and written once, no findings" if where == "interpreter" else ""
    print(f"OK on the {where}: {tc.rows}x{tc.cols} .{tc.dtype} copied bit-exactly ({tc.n_tiles} tiles){checked}")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
