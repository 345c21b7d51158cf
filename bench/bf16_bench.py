"""bf16 on the H200: TMA + wgmma configurations side by side with cuBLAS and Triton, rounds in turns.

Skinny problems (M <= 256, N = K = 8192, `--ms`): a few rows of activations against a large weight matrix
are bound by the weights' bytes (128 MB of bf16 at N = K = 8192: about 32 us at 4 TB/s), not by the tensor
cores.  The large-problem default (128 x 256 tiles) gives only 32 CTAs at N = 8192 and pads M to 128 rows;
the candidates stream the weights from every SM instead: the operands swapped (the weights the wgmma M
side, 64 rows per CTA, the activations its N), or 128 x 64 / 128 x 128 tiles, deeper rings, programmatic
dependent launches with the first stages asked of the L2 before the wait.
Large problems (`--shapes M,N,K ...`): the large-problem default beside deeper rings, pdl, other tile
orders and 128-row consumers.

Beside them cuBLAS (`torch.matmul`) and the Triton matmul of `bench/hopper_gemm_bench.py` (autotuned,
skinny tiles among its configurations).  Per candidate: checked against cuBLAS within the
f32-accumulation tolerance of hopper_gemm_bench (C poisoned first); then CUDA events over back-to-back
launches of the prepared plan, cycling weight sets beyond the 60 MB L2, random normal values.  With
`--rounds R` every row of a shape is timed R times, rows in turns, and the median reported.

    python bench/bf16_bench.py --ms 32 64 128 256 --rounds 3 [--json out.json]
    python bench/bf16_bench.py --ms --shapes 8192,8192,8192 4096,4096,4096 --rounds 3
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
from run_overhead_bench import events_us, parse_shape  # noqa: E402

from ptxforge.errors import ValidationError  # noqa: E402
from ptxforge.schedules.hopper import Bf16Gemm, HopperGemm  # noqa: E402
from ptxforge.schedules.hopper.defaults import DEFAULTS  # noqa: E402

L2_BYTES = 60 << 20


def candidates(m: int, n: int, k: int) -> list:
    """(label, HopperGemm) worth timing for an M x N x K problem: what for_shape picks first, then the others."""
    out = []

    def add(label, **kw):
        try:
            g = HopperGemm("bf16", **kw)
            g.check_problem(m, n, k)
        except ValidationError:
            return
        if all(g.kernel_name != h.kernel_name for _, h in out):
            out.append((label, g))

    out.append(("for_shape", Bf16Gemm.for_shape(m, n, k)))
    add("large default", **DEFAULTS["bf16"])
    if m > 256:  # large problems: the default tile with more stages, pdl, wider tile orders, 128-row consumers
        base = dict(DEFAULTS["bf16"])
        add("large default + pdl", **base, pdl=True)
        add("large default, 4 stages + pdl", **{**base, "stages": 4}, pdl=True)
        add("large default, tile groups of 16 + pdl", **base, pdl=True, raster_group=16)
        add("256 x 128 tiles (two 128-row consumers), 4 stages + pdl", block_n=128, wg_m=128,
            consumers=2, stages=4, pdl=True)
        add("large default, 16-bit C through the TMA store + pdl", **base, pdl=True, epilogue="tma", c16=True)
        # 2-CTA clusters sharing a tile of B (cluster_m) or A (cluster_n) through TMA multicast: fewer L2 reads
        add("large default, 2-CTA clusters sharing B", **base, cluster_m=2)
        add("large default, 2-CTA clusters sharing A", **base, cluster_n=2)
        add("large default, 2-CTA clusters sharing B, 16-bit C through the TMA store", **base, cluster_m=2,
            epilogue="tma", c16=True)
        return out
    swapped = dict(swap_ab=True, wg_m=64, consumers=1, pdl=True)
    bn = 32 if m <= 32 else 64 if m <= 64 else 128
    if m <= 128:
        for stages in (8, 12, 16):
            add(f"swapped, {bn} activation rows, 1 consumer, {stages} stages, 4 early",
                **swapped, block_n=bn, stages=stages, early_prefetch=4)
        add(f"swapped, {bn} activation rows, 1 consumer, 12 stages, 2 early", **swapped, block_n=bn, stages=12,
            early_prefetch=2)
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
    ap.add_argument("--ms", type=int, nargs="*", default=[32, 64, 128, 256], help="skinny M (N = K = 8192)")
    ap.add_argument("--shapes", type=parse_shape, nargs="*", default=[], help="more problems, M,N,K each")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run", action="store_true", help="list the candidates (no GPU)")
    args = ap.parse_args()
    shapes = [(m, 8192, 8192) for m in args.ms] + list(args.shapes)
    if args.dry_run:
        for shape in shapes:
            for label, g in candidates(*shape):
                print(shape, label, g.kernel_name, g.smem_bytes)
        return 0
    import torch
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    tri = triton_matmul("bf16")
    rows = []
    for m, n, k in shapes:
        sets = int(min(8, max(2, -(-3 * L2_BYTES // (2 * (m + n) * k)))))
        w = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(sets)]
        x = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda", generator=gen) for _ in range(sets)]
        want = torch.matmul(x[0], w[0].t()).float()
        c = torch.empty((m, n), dtype=torch.float32, device="cuda")
        ops = 2.0 * m * n * k
        calls = 40 if ops < 2e11 else 10
        timers = []

        def timed(row, fn):
            cyc = itertools.cycle(list(zip(x, w)))
            call = (lambda: fn(*next(cyc)))
            row["rounds"] = [events_us(torch, call, calls, repeat=7)]
            timers.append((row, call))
            rows.append(row)
            print(row, flush=True)

        def close(got):
            return bool(torch.allclose(got.float(), want, rtol=2e-2, atol=2e-1 * (k ** 0.5) / 8))

        shape = dict(M=m, N=n, K=k)
        timed(dict(shape, what="cuBLAS bf16 (torch.matmul)", ok=True), lambda a, b: torch.matmul(a, b.t()))
        ct = torch.empty((m, n), dtype=torch.float32, device="cuda")
        tri(x[0], w[0], ct)
        torch.cuda.synchronize()
        timed(dict(shape, what="Triton bf16 (hopper_gemm_bench.triton_matmul)", ok=close(ct)),
              lambda a, b: tri(a, b, ct))
        for label, g in candidates(m, n, k):
            try:
                plan = g.plan(m, n, k)
                out = c if g.c_type == "f32" else torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
                out.view(torch.uint8).fill_(0xFF)
                plan(x[0], w[0], out)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 -- report and go on with the sweep
                print("fails", g.kernel_name, e, flush=True)
                continue
            timed(dict(shape, what=label, name=g.kernel_name, splits=plan.splits, grid=plan.grid[0], ok=close(out)),
                  lambda a, b, p=plan, o=out: p(a, b, o))
        for _ in range(args.rounds - 1):
            for row, call in timers:
                row["rounds"].append(events_us(torch, call, calls, repeat=7))
        cub = None
        for row, _ in timers:
            row["us"] = sorted(row["rounds"])[len(row["rounds"]) // 2]
            row["tflops"] = ops / row["us"] / 1e6
            cub = row["us"] if "cuBLAS" in row["what"] else cub
            row["x_cublas"] = cub / row["us"]
        del w, x
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n| M,N,K | implementation | us (median of rounds) | TFLOPS | x cuBLAS bf16 | close to cuBLAS | kernel |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['M']},{r['N']},{r['K']} | {r['what']} | {r['us']:.2f} | {r['tflops']:.0f} | {r['x_cublas']:.2f} | "
              f"{'yes' if r['ok'] else 'NO'} | {r.get('name', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
