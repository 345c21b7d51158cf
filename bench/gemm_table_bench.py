"""Every GEMM shape and type the README reports, as a user calls it, beside cuBLAS and Triton: one run.

For int4 (packed, two values per byte), int8 and bf16, at 8192^3, 4096^3 and M in {1024, 128, 32} with
N = K = 8192:

* ptxforge: `Int4Gemm / Int8Gemm / Bf16Gemm.for_shape(m, n, k)` (what this GPU gets by default), timed
  through the documented call `g.run(a, b, c)` on torch tensors and through the prepared launcher
  (`plan = g.plan(m, n, k)`, then `plan(a, b, c)`);
* cuBLAS: `torch._int_mm` (int8; for int4 the same values unpacked to int8, since cuBLAS has no int4
  GEMM; it takes more than 16 rows, so for M <= 16 it multiplies A zero-padded to 32 rows, padded before
  the timing) and `torch.matmul` (bf16);
* Triton: the matmul written in `bench/hopper_gemm_bench.py` (int8 and bf16; autotuned over its
  configurations, skinny tiles among them; Triton has no int4 dot).

Each path is checked before it is timed, C poisoned first: ours and Triton's exact against cuBLAS for
the integer types, bf16 within a float tolerance of cuBLAS.  Timing: CUDA events over batches of
back-to-back calls after warm-up (the median batch), every path cycling through input sets that
together exceed the 60 MB L2 three times over, random non-zero data.  TOPS = 2 M N K / time.

    python bench/gemm_table_bench.py [--shapes 8192 4096,4096,4096 32,8192,8192 ...] [--ops int4,int8,bf16]
                                     [--out bench/results/gemm_table_h200]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from hopper_gemm_bench import dev_operands, triton_matmul, widen_torch  # noqa: E402
from run_overhead_bench import events_us, parse_shape  # noqa: E402

from ptxforge.runtime import gpu_skip_reason  # noqa: E402
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm  # noqa: E402
from ptxforge.schedules.hopper import Bf16Gemm  # noqa: E402

L2_BYTES = 60 << 20
SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (1024, 8192, 8192), (128, 8192, 8192), (32, 8192, 8192)]
OPS = {"int4": ("s4", Int4Gemm, 0.5), "int8": ("s8", Int8Gemm, 1), "bf16": ("bf16", Bf16Gemm, 2)}


def input_sets(op, m, n, k, torch):
    """Random operand pairs on the GPU, enough of them that one pass over all is three L2s or more (at most 8)."""
    code, _, per_value = OPS[op]
    count = int(min(8, max(2, -(-3 * L2_BYTES // int((m + n) * k * per_value)))))
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1)
    sets = [dev_operands(code, m, n, k, gen) for _ in range(count)]
    if op == "int4":  # packed bytes are uint8 for ptxforge; cuBLAS gets the values unpacked to int8
        sets = [(a.view(torch.uint8), b.view(torch.uint8)) for a, b in sets]
    return sets


def padded_rows(a, torch):
    """`a` itself, or zero-padded to 32 rows when it has 16 or fewer: torch._int_mm takes more than 16."""
    if a.shape[0] > 16:
        return a
    padded = torch.zeros((32, a.shape[1]), dtype=a.dtype, device=a.device)
    padded[:a.shape[0]] = a
    return padded


def int_mm(a, b, torch):
    """cuBLAS int8 C = A . B^T (through zero-padded rows for M <= 16, the padding rows dropped)."""
    return torch._int_mm(padded_rows(a, torch), b.t())[:a.shape[0]]


def reference(op, a, b, torch):
    if op == "int4":
        return int_mm(widen_torch(a.view(torch.int8)), widen_torch(b.view(torch.int8)), torch)
    if op == "int8":
        return int_mm(a, b, torch)
    return torch.matmul(a, b.t()).float()


def agrees(op, got, want, k, torch) -> bool:
    if op in ("int4", "int8"):
        return bool(torch.equal(got, want))
    return bool(torch.allclose(got.float(), want, rtol=2e-2, atol=2e-1 * (k ** 0.5) / 8))


def poisoned(op, m, n, torch):
    c = torch.empty((m, n), dtype=torch.int32 if op != "bf16" else torch.float32, device="cuda")
    c.view(torch.uint8).fill_(0xFF)
    return c


def time_cycling(torch, fn, sets, calls):
    """Median µs per call of fn(a, b) over back-to-back calls cycling through `sets`."""
    cyc = itertools.cycle(sets)

    def one():
        a, b = next(cyc)
        fn(a, b)
    return events_us(torch, one, calls)


def problem(op, shape, torch):
    """(input sets, cuBLAS's C for the first, the configuration `for_shape` gives) of an M x N x K problem."""
    m, n, k = shape
    sets = input_sets(op, m, n, k, torch)
    want = reference(op, *sets[0], torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = OPS[op][1].for_shape(m, n, k)
    return sets, want, g


def run_shape(op, shape, torch) -> dict:
    m, n, k = shape
    sets, want, g = problem(op, shape, torch)
    ops = 2.0 * m * n * k
    calls = 50 if m * n * k >= 2 ** 36 else 200
    row = {"op": op, "shape": list(shape), "input_sets": len(sets)}
    row["schedule"] = getattr(g, "kernel_name", None) or g.describe()
    c = poisoned(op, m, n, torch)
    g.run(*sets[0], c)
    torch.cuda.synchronize()
    row["run_ok"] = agrees(op, c, want, k, torch)
    plan = g.plan(m, n, k)
    c = poisoned(op, m, n, torch)
    plan(*sets[0], c)
    torch.cuda.synchronize()
    row["plan_ok"] = agrees(op, c, want, k, torch)
    row["us_run"] = time_cycling(torch, lambda a, b: g.run(a, b, c), sets, calls)
    row["us_plan"] = time_cycling(torch, lambda a, b: plan(a, b, c), sets, calls)
    if op == "int4":  # cuBLAS on the unpacked values (twice the bytes): what an int4 user of cuBLAS runs
        wide = [(padded_rows(widen_torch(a.view(torch.int8)), torch), widen_torch(b.view(torch.int8)))
                for a, b in sets[:3]]
        row["us_cublas"] = time_cycling(torch, lambda a, b: torch._int_mm(a, b.t()), wide, calls)
        del wide
    elif op == "int8":
        padded = [(padded_rows(a, torch), b) for a, b in sets]  # (made before the timing)
        row["us_cublas"] = time_cycling(torch, lambda a, b: torch._int_mm(a, b.t()), padded, calls)
    else:
        row["us_cublas"] = time_cycling(torch, lambda a, b: torch.matmul(a, b.t()), sets, calls)
    if op in ("int8", "bf16"):
        try:
            tm = triton_matmul("s8" if op == "int8" else "bf16")
            ct = poisoned(op, m, n, torch)
            tm(*sets[0], ct)
            torch.cuda.synchronize()
            row["triton_ok"] = agrees(op, ct, want, k, torch)
            row["us_triton"] = time_cycling(torch, lambda a, b: tm(a, b, ct), sets, calls)
        except Exception as e:  # keep ours and cuBLAS's numbers
            row["triton_error"] = f"{type(e).__name__}: {e}"
    for key in ("run", "plan", "cublas", "triton"):
        if "us_" + key in row:
            row["tops_" + key] = ops / (row["us_" + key] * 1e-6) / 1e12
    del sets
    torch.cuda.empty_cache()
    return row


def table(rows) -> str:
    lines = ["| shape | op | ptxforge run() µs | TOPS run() | TOPS plan() | cuBLAS TOPS | Triton TOPS "
             "| run() / cuBLAS | run() / Triton | exact (run, plan, Triton) | schedule |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, n, k = r["shape"]
        shape = f"{m}³" if m == n == k else f"{m}x{n}x{k}"
        tri = r.get("tops_triton")
        tri_ratio = f"{r['tops_run'] / tri:.2f}x" if tri else "-"
        ok = ", ".join("yes" if r.get(key) else ("-" if key not in r else "NO")
                       for key in ("run_ok", "plan_ok", "triton_ok"))
        lines.append(f"| {shape} | {r['op']} | {r['us_run']:.1f} | {r['tops_run']:.0f} | {r['tops_plan']:.0f} | "
                     f"{r['tops_cublas']:.0f} | {tri and round(tri) or '-'} | "
                     f"{r['tops_run'] / r['tops_cublas']:.2f}x | {tri_ratio} | "
                     f"{ok} | {r['schedule']} |")
    return "\n".join(lines)


def shape_args(doc: str, shapes, out: str, argv=None, more=()):
    """The arguments of a table over shapes and types (--shapes, --ops, --out, and `more`: (flags, keywords)
    pairs of add_argument), or None without a GPU (said)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--shapes", type=parse_shape, nargs="+", default=shapes)
    ap.add_argument("--ops", default="int4,int8,bf16")
    ap.add_argument("--out", default=os.path.join(HERE, "results", out))
    for flags, kw in more:
        ap.add_argument(*flags, **kw)
    args = ap.parse_args(argv)
    reason = gpu_skip_reason()
    if reason:
        print(f"no GPU: {reason}")
        return None
    return args


def save(out: str, text: str, rows) -> None:
    """The table as `out`.md and the rows as `out`.json; the table printed."""
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out + ".md", "w") as f:
        f.write(text)
    with open(out + ".json", "w") as f:
        json.dump(rows, f, indent=1)
    print(text)


def main(argv=None) -> int:
    args = shape_args(__doc__, SHAPES, "gemm_table_h200", argv)
    if args is None:
        return 0
    import torch
    rows = []
    for shape in args.shapes:
        for op in args.ops.split(","):
            try:
                rows.append(run_shape(op, shape, torch))
                r = rows[-1]
                print(f"{op} {shape}: run() {r['us_run']:.1f} us {r['tops_run']:.0f} TOPS, cuBLAS "
                      f"{r['tops_cublas']:.0f}, Triton {r.get('tops_triton', 0):.0f}", flush=True)
            except Exception as e:
                print(f"{op} {shape}: FAILED {type(e).__name__}: {e}", flush=True)
    name = torch.cuda.get_device_name()
    text = (f"# The documented call beside cuBLAS and Triton ({name})\n\nCommand: python bench/gemm_table_bench.py"
            f"\n\n{table(rows)}\n")
    save(args.out, text, rows)
    return 0 if all(r["run_ok"] and r["plan_ok"] for r in rows) and len(rows) == len(args.shapes) * len(
        args.ops.split(",")) else 1


if __name__ == "__main__":
    sys.exit(main())
