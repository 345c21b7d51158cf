"""Decode-sized GEMMs (a few rows of activations against a weight matrix) in int4, int8 and bf16.

`Int4Gemm / Int8Gemm / Bf16Gemm.for_shape(m, n, k)` pick the configuration measured for the shape on an
H200 and say why (`path_reason`): for few rows the operands are swapped, so the weights are the wgmma's
M side and stream from every SM; K is split where the tiles are too few to fill the SMs and each
streams 256 KB or more, the partial sums added by the last unit of each tile in the same launch (a call
is one launch either way).  This script prints what each GEMM picks for the shapes of one transformer
layer, then checks one of them:

* on a GPU (sm_90a): every type through the documented call, `g.run(a, b, c)` on device buffers, the
  result against numpy (exact for the integer types, within the f32-accumulation bound for bf16);
* without one: the same int4 and bf16 configurations at a small ragged shape on the CPU interpreter
  (`ptxforge.interp`), against numpy, with no finding.

    python examples/decode_gemms.py [--m 16] [--n 4096] [--k 4096]
"""

from __future__ import annotations

import argparse

import numpy as np

from ptxforge import ValidationError, interp, runtime
from ptxforge.cli import run_main
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
from ptxforge.schedules.hopper import Bf16Gemm, choose_hopper, hopper_reason, random_operands, reference
from ptxforge.schedules.hopper.interp_launch import interpreter_launch, interpreter_module
from ptxforge.schedules.hopper.splitk import auto_splits
from ptxforge.schedules.operands import check_sizes

#: the weight matrices of one layer of a 7B-class model, N x K
LAYER = {"attention q/k/v/o": (4096, 4096), "mlp up/gate": (14336, 4096), "mlp down": (4096, 14336)}


def k_splits(g, m: int, n: int, k: int, sms: int = 132) -> int:
    """How many ways a launch of `g` splits K for an M x N x K problem on `sms` SMs (1: whole)."""
    return auto_splits(g, m, n, k, sms)


def describe(m: int) -> None:
    """What each GEMM picks for `m` rows against each weight matrix of LAYER, and why."""
    for what, (n, k) in LAYER.items():
        for operand in ("s4", "s8", "bf16"):
            g = choose_hopper(m, n, k, operand)
            splits = k_splits(g, m, n, k)
            print(f"  {what:18s} {m}x{n}x{k} {operand:4s}: {g.kernel_name}, "
                  f"{'K whole' if splits == 1 else f'K split {splits} ways'}")
    for operand in ("s4", "bf16"):
        print(f"  why ({operand}):", hopper_reason(m, 4096, 4096, operand)[1])


def bf16_bound(a, b, k):
    """The f32-accumulation bound of a bf16 GEMM over uint16 bit patterns (per element)."""
    af = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    bf = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return k * 2.0 ** -21 * (np.abs(af) @ np.abs(bf).T) + 1e-30


def agrees(operand: str, got, want, a, b, k: int) -> bool:
    """C against numpy's: exact for the integer types, within the f32-accumulation bound for bf16."""
    if operand == "bf16":
        return bool(np.all(np.abs(got - want) <= bf16_bound(a, b, k)))
    return bool(np.array_equal(got.astype(np.int64), want))


def gemms(m: int, n: int, k: int, target=None) -> dict:
    """The GEMM of each type `for_shape` picks for M x N x K on `target` (default: this GPU's)."""
    return {"int4": Int4Gemm.for_shape(m, n, k, target), "int8": Int8Gemm.for_shape(m, n, k, target),
            "bf16": Bf16Gemm.for_shape(m, n, k, target=target)}


def run_gpu(m: int, n: int, k: int) -> bool:
    """Every type through `run()` on device buffers, against numpy; True when all agree."""
    from ptxforge.runtime import DeviceBuffer
    ok = True
    rng = np.random.default_rng(0)
    for name, g in gemms(m, n, k).items():
        cfg = g if name == "bf16" else choose_hopper(m, n, k, "s4" if name == "int4" else "s8")
        a, b = random_operands(cfg, m, n, k, rng)
        da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
        dc = DeviceBuffer.empty((m, n), np.float32 if name == "bf16" else np.int32)
        g.run(da, db, dc)
        good = agrees(cfg.operand, dc.to_host(), reference(cfg, a, b), a, b, k)
        print(f"  {name}: {'matches numpy' if good else 'DIFFERS from numpy'} ({type(g).__name__})")
        ok &= good
    return ok


def run_cpu(operand: str, m: int = 13, n: int = 136, k: int = 1024):
    """(C, numpy's C, report, whether they agree) of the decode configuration of `operand` on the interpreter at
    a small shape."""
    cfg = choose_hopper(16, 4096, 4096, operand)  # the configuration a 16-row decode call gets
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(1))
    c = np.full((m, n), -7, np.int32 if operand != "bf16" else np.float32)  # poisoned
    args, grid, shared = interpreter_launch(cfg, a, b, c, k)
    report = interp.run(interpreter_module(cfg, m, n), grid=grid, block=cfg.threads, shared=shared, args=args,
                        check=False)
    want = reference(cfg, a, b)
    return c, want, report, agrees(operand, c, want, a, b, k)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    args = ap.parse_args(argv)
    try:  # sizes below 1, and a K some type's kernel cannot take (bf16 rows of 16-byte multiples), are refused
        check_sizes(args.m, args.n, args.k)  # before anything is chosen or run
        for g in gemms(args.m, args.n, args.k, "sm_90a").values():
            g.check_problem(args.m, args.n, args.k)
    except ValidationError as e:
        ap.error(e.message)
    print(f"what {args.m} rows get:")
    describe(args.m)
    if runtime.gpu_available() and runtime.native_target().name == "sm_90a":
        print(f"on the GPU, {args.m}x{args.n}x{args.k}:")
        return 0 if run_gpu(args.m, args.n, args.k) else 1
    print("no sm_90a GPU: the decode configurations on the CPU interpreter, 13x136x1024")
    for operand in ("s4", "bf16"):
        _, _, report, good = run_cpu(operand)
        print(f"  {operand}: {'matches numpy' if good else 'DIFFERS'}, {len(report.findings)} findings")
        if not good or report.findings:
            print(report)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
