"""K split or whole, and where the partial sums meet, for decode-sized GEMMs: one run, through `run()`.

For each shape and type (int4 packed, int8, bf16) the default configuration (`for_shape`) is timed through
the documented call `g.run(a, b, c, splits=S)` on torch tensors:

* K whole (S = 1) and what the plan takes by itself (`auto`: `splitk.auto_splits`);
* S = 2, 3, 4, 6, 8 with the in-kernel reduction (split_reduce='kernel': the last unit of a tile adds
  the partial sums, one launch);
* S = 2 and 4 with the reduction in a second launch (split_reduce='launch');
* with `--overrides`, the default with other fields (tiles, stages, K per stage), each at its own split.

Every variant is checked first against cuBLAS (exact for the integer types, within a float tolerance for
bf16) with C poisoned.  Timing as in `gemm_table_bench.py`: CUDA events over batches of back-to-back
calls after warm-up, the median batch, operands cycling through input sets of three L2s or more.

    python bench/splitk_bench.py [--shapes 16,4096,4096 ...] [--ops int4,int8,bf16] [--out ...]
                                 [--overrides '{"block_k_bytes": 256}' ...] [--no-splits]
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from gemm_table_bench import OPS, agrees, input_sets, poisoned, reference, save, shape_args, time_cycling  # noqa: E402

from ptxforge.errors import ValidationError  # noqa: E402
from ptxforge.runtime import device_info  # noqa: E402
from ptxforge.schedules.hopper.splitk import auto_splits, nonempty_splits  # noqa: E402

SHAPES = [(1, 8192, 8192), (16, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336), (32, 8192, 8192),
          (64, 8192, 8192), (256, 4096, 4096)]


def variants(g, m, n, k, sms, overrides=(), splits=True):
    """(label, configuration, splits) to time: whole K, the plan's own choice, in-kernel and second-launch
    reductions (split counts that leave every split non-empty, each once), then the default with each of
    `overrides` (dicts of HopperGemm fields; those it does not take are left out) at the split its plan
    takes by itself."""
    km, kn = (n, m) if g.swap_ab else (m, n)
    ktiles = g.tile_counts(km, kn, k)[2]
    launch = dataclasses.replace(g, split_reduce="launch")
    out = [("whole", g, 1), (f"auto ({auto_splits(g, m, n, k, sms)})", g, None)]
    for ov in overrides:
        try:
            h = dataclasses.replace(g, **ov)
            h.check_problem(m, n, k)
        except ValidationError:
            continue
        out.append((" ".join(f"{key}={val}" for key, val in ov.items())
                    + f" ({auto_splits(h, m, n, k, sms)})", h, None))
    if not splits:
        return out
    seen = {1}
    for s in (2, 3, 4, 6, 8):
        got = nonempty_splits(ktiles, min(s, ktiles))
        if got not in seen:
            seen.add(got)
            out.append((f"kernel {got}", g, got))
    for s in (2, 4):
        got = nonempty_splits(ktiles, min(s, ktiles))
        if got > 1:
            out.append((f"launch {got}", launch, got))
    return out


def run_shape(op, shape, torch, sms, overrides=(), splits=True) -> list:
    m, n, k = shape
    sets = input_sets(op, m, n, k, torch)
    want = reference(op, *sets[0], torch)
    _, cls, _ = OPS[op]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = cls.for_shape(m, n, k)
    rows = []
    for label, cfg, count in variants(g, m, n, k, sms, overrides, splits):
        c = poisoned(op, m, n, torch)
        cfg.run(*sets[0], c, splits=count)
        torch.cuda.synchronize()
        ok = agrees(op, c, want, k, torch)
        us = time_cycling(torch, lambda a, b: cfg.run(a, b, c, splits=count), sets, 200)
        rows.append({"op": op, "shape": list(shape), "variant": label, "splits": count, "ok": ok, "us": us,
                     "schedule": cfg.kernel_name})
        print(f"{op} {m}x{n}x{k} {label:12s} {us:8.2f} us {'exact' if ok else 'WRONG'}", flush=True)
    del sets
    torch.cuda.empty_cache()
    return rows


def table(rows) -> str:
    """One line per shape and type: µs per run() call of each variant, the fastest in bold."""
    labels = []
    for r in rows:
        key = r["variant"].split(" (")[0]
        if key not in labels:
            labels.append(key)
    lines = ["| shape | op | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    groups = {}
    for r in rows:
        groups.setdefault((tuple(r["shape"]), r["op"]), []).append(r)
    for (shape, op), rs in groups.items():
        best = min(r["us"] for r in rs)
        cells = []
        for lab in labels:
            hit = [r for r in rs if r["variant"].split(" (")[0] == lab]
            if not hit:
                cells.append("-")
                continue
            r = hit[0]
            txt = f"{r['us']:.1f}" + ("" if r["ok"] else " WRONG") + (f" ({r['variant'].split('(')[1]}"
                                                                    if "(" in r["variant"] else "")
            cells.append(f"**{txt}**" if r["us"] == best else txt)
        lines.append(f"| {'x'.join(map(str, shape))} | {op} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = shape_args(__doc__, SHAPES, "splitk_h200", argv, more=[
        (("--overrides",), dict(type=json.loads, nargs="*", default=[],
                                help='configurations to time beside the default, as JSON: \'{"block_k_bytes": 256}\'')),
        (("--no-splits",), dict(action="store_true", help="time whole and auto only (with the overrides)"))])
    if args is None:
        return 0
    import torch
    sms = device_info().sm_count
    rows = []
    for shape in args.shapes:
        for op in args.ops.split(","):
            try:
                rows += run_shape(op, shape, torch, sms, args.overrides, not args.no_splits)
            except Exception as e:
                print(f"{op} {shape}: FAILED {type(e).__name__}: {e}", flush=True)
                rows.append({"op": op, "shape": list(shape), "variant": "failed", "ok": False, "us": float("nan"),
                             "error": f"{type(e).__name__}: {e}"})
    text = (f"# K split or whole through run() ({torch.cuda.get_device_name()})\n\nCommand: python "
            f"bench/splitk_bench.py\n\nµs per `run()` call, back to back (the fastest in bold; auto: the "
            f"split the plan takes by itself)\n\n{table([r for r in rows if r['variant'] != 'failed'])}\n")
    save(args.out, text, rows)
    return 0 if rows and all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
