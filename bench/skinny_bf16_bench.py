"""Skinny bf16 (M <= 256, N = K = 8192) on the H200: TMA + wgmma configurations side by side with cuBLAS and Triton.

A few rows of activations against a large weight matrix are bound by the weights' bytes (128 MB of
bf16 at N = K = 8192: about 32 us at 4 TB/s), not by the tensor cores.  The large-problem default
(128 x 256 tiles) gives only 32 CTAs at N = 8192 and pads M to 128 rows; this script times
configurations that stream the weights from every SM instead: the operands swapped (the weights the
wgmma M side, 64 rows per CTA, the activations its N), or 128 x 64 tiles, deeper rings, programmatic
dependent launches with the first stages asked of the L2 before the wait.  Beside them cuBLAS
(`torch.matmul`) and the Triton matmul of `bench/hopper_gemm_bench.py` (autotuned, skinny tiles
among its configurations).

Per candidate: checked against cuBLAS within the f32-accumulation tolerance of hopper_gemm_bench (C
poisoned first); then CUDA events over back-to-back launches of the prepared plan, cycling three weight
sets (384 MB, beyond the 60 MB L2), random normal values.  With `--rounds R` every row of an M is timed
R times, rows in turns, and the median reported.

    python bench/skinny_bf16_bench.py --ms 32 64 128 256 --rounds 5 [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from hopper_gemm_bench import triton_matmul  # noqa: E402
from run_overhead_bench import events_us  # noqa: E402

from ptxforge.errors import ValidationError  # noqa: E402
from ptxforge.schedules.hopper import Bf16Gemm, HopperGemm  # noqa: E402
from ptxforge.schedules.hopper.tuning import DEFAULTS  # noqa: E402

N = K = 8192
SETS = 3


def candidates(m: int) -> list:
    """(label, HopperGemm) worth timing at M = m: what for_shape picks first, then the others."""
    out = []

    def add(label, **kw):
        try:
            g = HopperGemm("bf16", **kw)
            g.check_problem(m, N, K)
        except ValidationError:
            return
        if all(g.kernel_name != h.kernel_name for _, h in out):
            out.append((label, g))

    out.append(("for_shape", Bf16Gemm.for_shape(m, N, K)))
    add("large default", **DEFAULTS["bf16"])
    swapped = dict(swap_ab=True, wg_m=64, consumers=1, pdl=True)
    bn = 32 if m <= 32 else 64 if m <= 64 else 128
    if m <= 128:
        for stages in (8, 12, 16):
            add(f"swapped, {bn} activation rows, 1 consumer, {stages} stages, 4 early",
                **swapped, block_n=bn, stages=stages, early_prefetch=4)
        add(f"swapped, {bn} activation rows, 1 consumer, 12 stages, 2 early", **swapped, block_n=bn, stages=12,
            early_prefetch=2)
        add("swapped, 2 consumers on alternate stages, 12 stages", **{**swapped, "consumers": 2}, block_n=bn,
            stages=12, early_prefetch=4, interleave_k=True)
    if 64 < m <= 128:
        add("swapped, 128 activation rows, 1 consumer, 6 stages, 2 early", **swapped, block_n=128, stages=6,
            early_prefetch=2)
    if 128 < m <= 256:
        add("swapped, 256 activation rows, 1 consumer, 5 stages, 2 early", **swapped, block_n=256, stages=5,
            early_prefetch=2)
        add("128 x 128 tiles, 2 consumers, 6 stages, 4 early", block_n=128, wg_m=64, consumers=2, stages=6,
            pdl=True, early_prefetch=4)
    if m > 32:
        for stages in (6, 8):
            add(f"128 x 64 tiles, 2 consumers, {stages} stages, 2 early", block_n=64, wg_m=64, consumers=2,
                stages=stages, pdl=True, early_prefetch=2)
    if m > 128:
        for stages in (4, 6):
            add(f"128 x 128 tiles, 2 consumers, {stages} stages, 2 early", block_n=128, wg_m=64, consumers=2,
                stages=stages, pdl=True, early_prefetch=2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ms", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run", action="store_true", help="list the candidates (no GPU)")
    args = ap.parse_args()
    if args.dry_run:
        for m in args.ms:
            for label, g in candidates(m):
                print(m, label, g.kernel_name, g.smem_bytes)
        return 0
    import torch
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    w = [torch.randn(N, K, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(SETS)]
    tri = triton_matmul("bf16")
    rows = []
    for m in args.ms:
        x = torch.randn(m, K, dtype=torch.bfloat16, device="cuda", generator=gen)
        want = torch.matmul(x, w[0].t()).float()
        c = torch.empty((m, N), dtype=torch.float32, device="cuda")
        ops = 2.0 * m * N * K
        timers = []

        def timed(row, fn):
            cyc = itertools.cycle(w)
            call = (lambda: fn(next(cyc)))
            row["rounds"] = [events_us(torch, call, 40, repeat=7)]
            timers.append((row, call))
            rows.append(row)
            print(row, flush=True)

        def close(got):
            return bool(torch.allclose(got.float(), want, rtol=2e-2, atol=2e-1 * (K ** 0.5) / 8))

        timed(dict(M=m, what="cuBLAS bf16 (torch.matmul)", ok=True), lambda b: torch.matmul(x, b.t()))
        ct = torch.empty((m, N), dtype=torch.float32, device="cuda")
        tri(x, w[0], ct)
        torch.cuda.synchronize()
        timed(dict(M=m, what="Triton bf16 (hopper_gemm_bench.triton_matmul)", ok=close(ct)),
              lambda b: tri(x, b, ct))
        for label, g in candidates(m):
            try:
                plan = g.plan(m, N, K)
            except Exception as e:  # noqa: BLE001 -- report and go on with the sweep
                print("plan fails", g.kernel_name, e, flush=True)
                continue
            c.view(torch.uint8).fill_(0xFF)
            plan(x, w[0], c)
            torch.cuda.synchronize()
            timed(dict(M=m, what=label, name=g.kernel_name, splits=plan.splits, grid=plan.grid[0], ok=close(c)),
                  lambda b, p=plan: p(x, b, c))
        for _ in range(args.rounds - 1):
            for row, call in timers:
                row["rounds"].append(events_us(torch, call, 40, repeat=7))
        cub = None
        for row, _ in timers:
            row["us"] = sorted(row["rounds"])[len(row["rounds"]) // 2]
            row["tflops"] = ops / row["us"] / 1e6
            cub = row["us"] if "cuBLAS" in row["what"] else cub
            row["x_cublas"] = cub / row["us"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n| M | implementation | us (median of rounds) | TFLOPS | x cuBLAS bf16 | close to cuBLAS | kernel |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['M']} | {r['what']} | {r['us']:.2f} | {r['tflops']:.0f} | {r['x_cublas']:.2f} | "
              f"{'yes' if r['ok'] else 'NO'} | {r.get('name', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
