"""Launches of one GEMM plan for a profiler to look at (GPU only): `for_shape`'s plan of an M x N x K problem,
called back to back over input sets rotated beyond the L2, then synchronized; nothing is timed here.

    ncu --clock-control none --launch-skip 2 --launch-count 2 -k regex:hgemm --metrics <...> \\
        python bench/profile_launches.py [--op int4] [--shape 32,8192,8192] [--launches 6]
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gemm_table_bench import OPS, input_sets  # noqa: E402
from run_overhead_bench import parse_shape  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="int4", choices=sorted(OPS))
    ap.add_argument("--shape", default="32,8192,8192", help="M,N,K")
    ap.add_argument("--launches", type=int, default=6)
    args = ap.parse_args()
    import torch
    m, n, k = parse_shape(args.shape)
    sets = input_sets(args.op, m, n, k, torch)
    plan = OPS[args.op][1].for_shape(m, n, k).plan(m, n, k)
    c = torch.empty((m, n), dtype=torch.float32 if args.op == "bf16" else torch.int32, device="cuda")
    for i in range(args.launches):
        plan(*sets[i % len(sets)], c)
    torch.cuda.synchronize()
    print(f"{args.launches} launches of {args.op} {m}x{n}x{k}")


if __name__ == "__main__":
    main()
