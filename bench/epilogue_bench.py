"""Which epilogue the large-problem int8 and bf16 GEMMs should write C with, as K shrinks, on the GPU.

For each shape, through the documented call `g.run(a, b, c)` on torch tensors, side by side in one run:

* `for_shape`'s configuration (`Int8Gemm / Bf16Gemm.for_shape(m, n, k)`: C through shared memory and TMA
  stores where K <= `defaults.TMA_STORE_MAX_K`, from registers above);
* the same configuration with the other epilogue (`epilogue='registers'` or `'tma'`), to show the rule's
  choice against the one it did not make;
* the default again on a C 8 bytes past 16-byte alignment (a slice of a larger tensor), which a TMA-store
  plan hands to its registers-epilogue kernel: what such a C costs.

Every path is checked against cuBLAS first (C poisoned; exact for int8, within the float tolerance for
bf16).  Timing: CUDA events over back-to-back calls cycling input sets of three L2s
(`gemm_table_bench.time_cycling`), the variants in turns for several rounds, medians.

    python bench/epilogue_bench.py [--shapes 8192,8192,512 ...] [--ops int8,bf16] [--rounds 3]
                                   [--out bench/results/h200_lane/epilogue]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gemm_table_bench import agrees, problem, save, shape_args, time_cycling  # noqa: E402

SHAPES = [(8192, 8192, 8192), (8192, 8192, 2048), (8192, 8192, 1024), (8192, 8192, 512), (8192, 8192, 256),
          (16384, 16384, 256)]


def c_at(op, m, n, offset, torch):
    """A poisoned C [m, n] `offset` elements into a larger tensor (0: the tensor's own, 16-byte aligned, start)."""
    whole = torch.empty((m * n + 4,), dtype=torch.int32 if op != "bf16" else torch.float32, device="cuda")
    whole.view(torch.uint8).fill_(0xFF)
    return whole[offset:offset + m * n].view(m, n)


def shape_rows(torch, op, shape, rounds=3) -> list:
    m, n, k = shape
    sets, want, g = problem(op, shape, torch)
    other = "registers" if g.epilogue == "tma" else "tma"
    kinds = {f"for_shape ({g.epilogue})": (g, 0), f"epilogue='{other}'": (dataclasses.replace(g, epilogue=other), 0),
             "for_shape, C 8 B past 16": (g, 2)}
    cs = {label: c_at(op, m, n, off, torch) for label, (_, off) in kinds.items()}
    ok, kernel = {}, {}
    for label, (cfg, _) in kinds.items():
        cfg.run(*sets[0], cs[label])
        torch.cuda.synchronize()
        ok[label] = agrees(op, cs[label], want, k, torch)
        kernel[label] = cfg.plan(m, n, k).kernel_name_for(cs[label].data_ptr())
    del want
    calls = 20 if m * n * k >= 2 ** 38 else 30
    times = {label: [] for label in kinds}
    for _ in range(rounds):
        for label, (cfg, _) in kinds.items():
            c = cs[label]
            times[label].append(time_cycling(torch, lambda a, b, cfg=cfg, c=c: cfg.run(a, b, c), sets, calls))
    del sets, cs
    torch.cuda.empty_cache()
    base = statistics.median(times[next(iter(kinds))])
    return [{"op": op, "shape": list(shape), "variant": label, "ok": ok[label], "us": statistics.median(times[label]),
             "rounds_us": times[label], "vs_default": statistics.median(times[label]) / base,
             "schedule": kernel[label]} for label in kinds]


def table(rows) -> str:
    lines = ["| shape | op | variant | µs per run() | / for_shape's | exact | kernel |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {'x'.join(map(str, r['shape']))} | {r['op']} | {r['variant']} | {r['us']:.1f} | "
                     f"{r['vs_default']:.3f} | {'yes' if r['ok'] else 'NO'} | {r['schedule']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = shape_args(__doc__, SHAPES, os.path.join("h200_lane", "epilogue"), argv,
                      more=((("--rounds",), dict(type=int, default=3)),))
    if args is None:
        return 0
    import torch
    rows = []
    for op in args.ops.split(","):
        if op == "int4":  # (s4's ring and C's staging do not fit together: it has the register epilogue only)
            continue
        for shape in args.shapes:
            rows += shape_rows(torch, op, shape, args.rounds)
            print(table(rows[-3:]).splitlines()[-3:], flush=True)
    name = torch.cuda.get_device_name()
    save(args.out, f"# The epilogue as K shrinks ({name})\n\nCommand: python bench/epilogue_bench.py\n\n" + table(rows),
         rows)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
