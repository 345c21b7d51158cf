"""What 64-bit C offsets cost (`HopperGemm.wide_c`, the kernel a C of 2^32 or more elements takes), on the GPU.

Two parts, each side by side in one run, through the documented call `g.run(a, b, c)` on torch tensors:

* the same problem (8192^3, int8 and int4) through the default kernel and through the same configuration
  with `wide_c=True` forced, the two taking turns: the price of the 64-bit offsets themselves;
* a C of 2^32 elements (65536 x 65536, K = 256: 17 GB of int32 written per call) through `run()` (int8: the
  TMA store epilogue `for_shape` picks at small K; int4: the wide registers kernel, picked by itself) and,
  where its shared memory fits, the same configuration with the other epilogue, beside cuBLAS int8
  (`torch._int_mm` into a C of the same size).  The call is bound by C's writes, so the operands (16 MB
  each) are not rotated beyond the L2: the C written is 280 times the L2.  The same at 16384 x 16384 x 256
  (1 GB of C: no wide offsets).

Every result is checked exact against cuBLAS first (C poisoned).  CUDA events over back-to-back calls after
warm-up (`gemm_table_bench.events_us`), the median of rounds.

    python bench/wide_c_bench.py [--out bench/results/h200_lane/wide_c]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gemm_table_bench import (OPS, agrees, events_us, input_sets, poisoned, problem, reference, save,  # noqa: E402
                              time_cycling)
from ptxforge.runtime import gpu_skip_reason  # noqa: E402


def forced_rows(torch, op, shape, rounds=5) -> list:
    """The default kernel and the same with wide_c forced, rounds in turns."""
    m, n, k = shape
    sets, want, g = problem(op, shape, torch)
    kinds = {"default": g, "wide_c": dataclasses.replace(g, wide_c=True)}
    c = poisoned(op, m, n, torch)
    ok, times = {}, {label: [] for label in kinds}
    for label, cfg in kinds.items():
        c.view(torch.uint8).fill_(0xFF)
        cfg.run(*sets[0], c)
        torch.cuda.synchronize()
        ok[label] = agrees(op, c, want, k, torch)
    for _ in range(rounds):
        for label, cfg in kinds.items():
            times[label].append(time_cycling(torch, lambda a, b, cfg=cfg: cfg.run(a, b, c), sets, 50))
    del sets
    torch.cuda.empty_cache()
    return [{"op": op, "shape": list(shape), "variant": label, "ok": ok[label],
             "us": statistics.median(times[label]), "schedule": cfg.for_launch(n, 1, m * n).kernel_name}
            for label, cfg in kinds.items()]


def wide_rows(torch, op, shape, rounds=3) -> list:
    """run() on a C written at the memory's pace (K small) beside cuBLAS int8 writing a C of the same size: the kernel run()
    picks (int8: the TMA store epilogue, whose tensor maps address C in 64 bits by themselves; int4: the registers
    epilogue, with 64-bit offsets for 2^32 elements) and, where it fits, the same with the other epilogue."""
    from ptxforge.errors import ValidationError
    m, n, k = shape
    (a, b), = input_sets(op, m, n, k, torch)[:1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = OPS[op][1].for_shape(m, n, k)
    other = "registers" if g.epilogue == "tma" else "tma"
    kinds = [(f"run()'s kernel ({g.epilogue} epilogue)", g)]
    try:
        kinds.append((f"epilogue='{other}'", dataclasses.replace(g, epilogue=other)))
    except ValidationError as e:  # (the s4 tile's ring and C's staging do not fit together)
        print(f"{op}: no TMA store epilogue: {e}".splitlines()[0], flush=True)
    want = reference(op, a, b, torch)
    c = poisoned(op, m, n, torch)
    ok = {}
    for label, cfg in kinds:
        c.view(torch.uint8).fill_(0xFF)
        cfg.run(a, b, c)
        torch.cuda.synchronize()
        ok[label] = agrees(op, c, want, k, torch)
    del want
    torch.cuda.empty_cache()
    ia, ib = (a, b) if op == "int8" else (None, None)
    if ia is None:  # cuBLAS on int8 operands of the same shape: what the int4 C costs it
        ia = torch.randint(-8, 8, (m, k), dtype=torch.int8, device="cuda")
        ib = torch.randint(-8, 8, (n, k), dtype=torch.int8, device="cuda")
    times = {label: [] for label, _ in kinds}
    theirs = []
    for _ in range(rounds):
        for label, cfg in kinds:
            times[label].append(events_us(torch, lambda cfg=cfg: cfg.run(a, b, c), 5))
        theirs.append(events_us(torch, lambda: torch._int_mm(ia, ib.t()), 5))
    return [{"op": op, "shape": list(shape), "variant": label, "ok": ok[label], "us": statistics.median(times[label]),
             "cublas_us": statistics.median(theirs), "schedule": cfg.plan(m, n, k).kernel_cfg.kernel_name}
            for label, cfg in kinds]


def table(rows) -> str:
    lines = ["| shape | op | variant | µs per run() | TB/s of C written | cuBLAS int8 µs | exact | kernel |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, n, _ = r["shape"]
        tbps = m * n * 4 / (r["us"] * 1e-6) / 1e12
        cub = f"{r['cublas_us']:.0f}" if "cublas_us" in r else "-"
        lines.append(f"| {'x'.join(map(str, r['shape']))} | {r['op']} | {r['variant']} | {r['us']:.1f} | "
                     f"{tbps:.2f} | {cub} | {'yes' if r['ok'] else 'NO'} | {r['schedule']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(HERE, "results", "h200_lane", "wide_c"))
    ap.add_argument("--ops", default="int8,int4")
    args = ap.parse_args(argv)
    why = gpu_skip_reason()
    if why:
        print(f"wide_c_bench needs a GPU: {why}")
        return 0
    import torch
    rows = []
    for op in args.ops.split(","):
        rows += forced_rows(torch, op, (8192, 8192, 8192))
        rows += wide_rows(torch, op, (65536, 65536, 256))
        rows += wide_rows(torch, op, (16384, 16384, 256))  # (below 2^32 elements: what the TMA store does there)
        torch.cuda.empty_cache()
        print(table(rows), flush=True)
    save(args.out, "Command: python bench/wide_c_bench.py\n\n" + table(rows), rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
