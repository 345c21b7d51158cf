"""Where the time of a skinny Hopper GEMM goes: the kernel beside timing-only variants of itself.

For each row: a HopperGemm configuration at M x 8192 x 8192 (N = K = 8192), timed as a prepared plan
(`launch_pointers`) over weight sets cut from a 200 MB pool (beyond the 60 MB L2), CUDA events over
7 batches of 40 back-to-back launches, three samples (min and median reported).  Rows built normally
are first checked for exact equality with numpy.

`compute`: a timing-only variant whose producer issues no TMA copy and arrives on each full barrier at
once, so the consumers run on whatever the ring holds: what the consumers take when the weights cost
nothing.  Its results are wrong by design and are not checked; the variant is emitted under another
`raster_group` (which does not change a one-column grid) so that it never shares a cache entry with
the real kernel.

    python bench/skinny_breakdown.py [--only TEXT]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from ptxforge.builder import KernelBuilder  # noqa: E402
from ptxforge.hopper.pipeline import MbarrierRing  # noqa: E402
from ptxforge.schedules.hopper import HopperGemm, reference  # noqa: E402
from ptxforge.schedules.hopper.defaults import SKINNY_S4, SKINNY_S4_32, SKINNY_S4_64, SKINNY_S8_32  # noqa: E402
from ptxforge.schedules.hopper.plan import assembled  # noqa: E402
from run_overhead_bench import events_us  # noqa: E402  (this script's folder)

N = K = 8192
POOL_BYTES = 200 << 20

#: the M <= 32 default before SKINNY_S4_32 took three consumers: two, on alternate stages, two B buffers each
TWO = dict(consumers=2, consumer_regs=232, convert_buffers=2)

#: (label, operand, configuration, M, mode): mode "" (the kernel) or "compute" (no copies, timing only)
ROWS = [
    ("M=32 default", "s4", SKINNY_S4_32, 32, ""),
    ("M=32 no early prefetch", "s4", {**SKINNY_S4_32, "early_prefetch": 0}, 32, ""),
    ("M=32 early prefetch 6", "s4", {**SKINNY_S4_32, "early_prefetch": 6}, 32, ""),
    ("M=32 two consumers (before)", "s4", {**SKINNY_S4_32, **TWO}, 32, ""),
    ("M=32 two consumers only", "s4", {**SKINNY_S4_32, **TWO}, 32, "compute"),
    ("M=32 split stages, B ahead", "s4", {**SKINNY_S4_32, **TWO, "interleave_k": False, "split_stage": True,
                                          "a_group": 4, "widen_ahead": True}, 32, ""),
    ("M=32 two accumulator sets", "s4", {**SKINNY_S4_32, **TWO, "acc_sets": 2}, 32, ""),
    ("M=32 consumers only", "s4", SKINNY_S4_32, 32, "compute"),
    ("M=64 default", "s4", SKINNY_S4_64, 64, ""),
    ("M=64 alternate stages (before)", "s4", {**SKINNY_S4_64, "split_stage": False, "widen_ahead": False,
                                              "interleave_k": True, "convert_buffers": 1, "early_prefetch": 0}, 64, ""),
    ("M=64 consumers only", "s4", SKINNY_S4_64, 64, "compute"),
    ("M=128 default", "s4", SKINNY_S4, 128, ""),
    ("M=128 no early prefetch", "s4", {**SKINNY_S4, "early_prefetch": 0}, 128, ""),
    ("M=128 consumers only", "s4", SKINNY_S4, 128, "compute"),
    ("s8 M=32 default", "s8", SKINNY_S8_32, 32, ""),
    ("s8 M=32 no early prefetch", "s8", {**SKINNY_S8_32, "early_prefetch": 0}, 32, ""),
]


def consumers_only(cfg: HopperGemm) -> HopperGemm:
    """The timing-only variant of `cfg`: emitted and assembled with the producer's copies taken out."""
    variant = dataclasses.replace(cfg, raster_group=cfg.raster_group + 1)
    orig_tx, orig_load = MbarrierRing.expect_tx, KernelBuilder.tensor_load
    try:
        MbarrierRing.expect_tx = lambda self, st, nbytes, pred=None: self.k.mbarrier_arrive(
            self.full(st), state="_", pred=pred)
        KernelBuilder.tensor_load = lambda self, *a, **kw: None
        assembled(variant)  # emits (and caches) the module under the patch
    finally:
        MbarrierRing.expect_tx, KernelBuilder.tensor_load = orig_tx, orig_load
    return variant


def time_row(torch, pool, cfg: HopperGemm, m: int, check: bool) -> tuple:
    """(min us, median us, exact or None) of back-to-back launches of cfg's plan at m x N x K."""
    rb = K * cfg.bits // 8
    size = N * rb
    sets = [pool[i * size:(i + 1) * size].view(N, rb) for i in range(min(64, pool.numel() // size))]
    x = torch.randint(1, 256, (m, rb), dtype=torch.uint8, device="cuda")
    c = torch.empty((m, N), dtype=torch.int32, device="cuda")
    plan = cfg.plan(m, N, K)
    plan(x, sets[0], c)
    torch.cuda.synchronize()
    exact = None
    if check:
        xa, wa = x.cpu().numpy(), sets[0].cpu().numpy()
        if cfg.operand == "s8":
            xa, wa = xa.view(np.int8), wa.view(np.int8)
        exact = bool(np.array_equal(c.cpu().numpy().astype(np.int64), reference(cfg, xa, wa)))
    cyc = itertools.cycle(sets)
    xp, cp = x.data_ptr(), c.data_ptr()
    us = [events_us(torch, lambda: plan.launch_pointers(xp, next(cyc).data_ptr(), cp), 40, repeat=7)
          for _ in range(3)]
    return min(us), statistics.median(us), exact


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="time only the rows whose label contains this")
    args = ap.parse_args()
    import torch
    pool = torch.randint(1, 256, (POOL_BYTES,), dtype=torch.uint8, device="cuda")  # never all zero
    out = []
    for label, op, kw, m, mode in ROWS:
        if args.only and args.only not in label:
            continue
        cfg = HopperGemm(op, **kw)
        cfg = consumers_only(cfg) if mode == "compute" else cfg
        lo, med, exact = time_row(torch, pool, cfg, m, check=mode != "compute")
        out.append((label, lo, med, "timing only" if exact is None else exact))
        print(out[-1], flush=True)
    print("\n| row | min us | median us | exact |\n|---|---|---|---|")
    for label, lo, med, exact in out:
        print(f"| {label} | {lo:.2f} | {med:.2f} | {exact} |")


if __name__ == "__main__":
    main()
