"""The int4 Hopper GEMM (TMA + wgmma, A widened in registers, B widened ahead) on the CPU interpreter:
no GPU needed.

The same kernel `for_shape` picks on an H200 for a decode-sized problem runs on the interpreter at a
small ragged shape, through host tensor maps over numpy operands (`HopperGemm.interpret`), once in each
of the interpreter's thread orders: lockstep ("lowest-pc") and "last-warpgroup-first", in which each
consumer warpgroup runs as far ahead of the others as its barriers let it.  C is checked against
numpy exactly, and the report must be free of findings (races, rewrites of bytes an in-flight wgmma
holds, proxy fences, mbarrier phases).  Then the schedule's problem space checks drawn shapes the same
way (`ptxforge.testing.check`, interpreter backend).  The skinny defaults ask the L2 for their first
weight boxes before `griddepcontrol.wait` (`early_prefetch`, a no-op hint here); `SKINNY_S4_64` splits
every stage between its two consumer warpgroups (`split_stage`); an odd N takes the kernel variant with
4-byte C stores (`for_c_columns`).

    python examples/hopper_gemm_interp.py [--m M] [--n N] [--k K] [--config SKINNY_S4|SKINNY_S4_32|...]

A problem the kernel cannot compute exactly is refused with the reason before anything runs: a size below 1,
or a K that is not a multiple of 32 (the tensor maps take operand rows of whole 16-byte units).
"""

from __future__ import annotations

import argparse

import numpy as np

from ptxforge import ValidationError, interp
from ptxforge.cli import run_main
from ptxforge.schedules.hopper import HopperGemm, random_operands, reference
from ptxforge.schedules.hopper import defaults as hopper_defaults


def run_cpu(cfg: HopperGemm, m: int, n: int, k: int, order: str, seed: int = 0):
    """(C from the interpreter, numpy's C, the interpreter's report) of one M x N x K problem.

    `cfg.interpret` makes the launch a plan would (host tensor maps over the numpy operands, the grid,
    the shared memory) and returns C, poisoned first so that an element the kernel leaves shows."""
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(seed))
    c, report = cfg.interpret(a, b, order=order, check=False)
    return c, reference(cfg, a, b), report


def s4_configurations() -> dict:
    """The skinny int4 configurations `for_shape` takes on sm_90a (`defaults.SKINNY["s4"]`), by name."""
    by_identity = {id(options): name for name, options in vars(hopper_defaults).items() if name.isupper()}
    return {by_identity[id(options)]: HopperGemm("s4", **options) for _, options in hopper_defaults.SKINNY["s4"]}


def main(argv=None) -> int:
    """Run one problem in both thread orders and a few drawn shapes on the interpreter; 0 when every C is exact
    and no report has a finding (a problem the kernel cannot run is a usage error first)."""
    configs = s4_configurations()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=100)
    ap.add_argument("--n", type=int, default=70)
    ap.add_argument("--k", type=int, default=2560, help="a multiple of 32 (rows of whole 16-byte units)")
    ap.add_argument("--config", default="SKINNY_S4", choices=sorted(configs),
                    help="a configuration of schedules.hopper.defaults")
    args = ap.parse_args(argv)
    cfg = configs[args.config]
    try:  # what the kernel cannot compute exactly (sizes below 1, a K of partial 16-byte rows) is refused here
        cfg.check_problem(args.m, args.n, args.k)
    except ValidationError as e:
        ap.error(f"{args.config} cannot run M={args.m} N={args.n} K={args.k}: {e.message}")
    print(f"{cfg.kernel_name}: {cfg.threads} threads, {cfg.smem_bytes} B shared, M={args.m} N={args.n} K={args.k}")
    for order in interp.ORDERS:
        c, want, report = run_cpu(cfg, args.m, args.n, args.k, order)
        exact = np.array_equal(c.astype(np.int64), want)
        print(f"  order {order:21s}: exact {exact}, findings {len(report.findings)}, {report.ctas} CTAs")
        if not exact or report.findings:
            print(report)
            return 1
    from ptxforge.testing import check, problem_space
    check(cfg, problem_space(cfg, max_m=80, max_n=80), backends=("interp",), max_examples=5)
    print("  problem space: 5 drawn shapes exact on the interpreter")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
