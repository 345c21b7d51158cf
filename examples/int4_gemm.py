"""A packed int4 GEMM on a ragged shape: C[M, N] = A[M, K] . B[N, K]^T, exact int32.

M and N are not multiples of the tile and K is not a multiple of 32 (its packed rows are not a
multiple of 16 bytes), so the kernel zero-fills the ragged edges on load, masks them on store
and copies with narrower cp.async.  The output starts poisoned; the result must match numpy
exactly.  Without a GPU it runs the same kernel on the CPU interpreter (a smaller problem),
whose checks include out-of-bounds accesses and shared-memory races.

    python examples/int4_gemm.py [--m M --n N --k K] [--path P] [--listing] [--sanitizer]

Under compute-sanitizer (memcheck / racecheck) pass --sanitizer: smaller sizes, one launch.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ptxforge import ValidationError
from ptxforge.cli import run_main
from ptxforge.int4 import pack_int4, random_int4
from ptxforge.schedules.gemm import Int4Gemm
from ptxforge.runtime import gpu_skip_reason

POISON = -0x5A5A5A5A


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--n", type=int, default=999)
    ap.add_argument("--k", type=int, default=1000, help="even; 1000 = 500-byte rows: 4-byte cp.async")
    ap.add_argument("--path", default=None, help="compute path (default: the target's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="small sizes, for compute-sanitizer runs")
    args = ap.parse_args(argv)
    m, n, k = (300, 257, 200) if args.sanitizer else (args.m, args.n, args.k)

    reason = gpu_skip_reason()
    target = "sm_90"
    if reason is None:
        from ptxforge.runtime import device_info
        target = device_info().arch
    try:  # an unknown path, a size below 1, an odd K (two values a byte), a K beyond the path's range: refused
        g = Int4Gemm(target=target, path=args.path)  # before anything runs
        g.for_problem(k, n).check_problem(m, n, k)
    except ValidationError as e:
        ap.error(f"the int4 GEMM cannot run M={m} N={n} K={k}: {e.message}")
    if reason is not None:
        m, n, k = min(m, 150), min(n, 130), min(k, 200)
    v = g.for_problem(k, n)
    print(f"{v.describe()}\nproblem {m}x{n}x{k}: grid {v.grid(m, n)}, copies of {v.copy_bytes} B, "
          f"C stored {'in pairs' if v.c_vector == 2 else 'value by value'}")
    if args.listing:
        print(v.listing())

    rng = np.random.default_rng(args.seed)
    a = pack_int4(random_int4((m, k), rng))
    b = pack_int4(random_int4((n, k), rng))
    want = g.reference(a, b, k)

    if reason is not None:
        print(f"no GPU here ({reason}): running on the CPU interpreter")
        c, rep = g.interpret(a, b, np.full((m, n), POISON, np.int32), k=k)  # the variant run() would launch
        print(rep)
    else:
        from ptxforge.runtime import DeviceBuffer
        dc = DeviceBuffer.from_host(np.full((m, n), POISON, np.int32))
        g.run(DeviceBuffer.from_host(a), DeviceBuffer.from_host(b), dc)
        c = dc.to_host()
    bad = int((c.astype(np.int64) != want).sum())
    print("exact match with numpy" if bad == 0 else f"MISMATCH: {bad} of {m * n} elements differ")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
