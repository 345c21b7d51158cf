"""The documented call, timed as a user makes it: `GemmSchedule.run()` on torch tensors.

For each shape and schedule (what `for_shape` picks on this GPU), side by side in one run:

* host time per call of `run()` on torch tensors, of the prepared plan and of `launch_pointers`
  (one driver launch: the floor), each call timed on its own with a host clock in batches of 20
  back-to-back calls, the three taking turns batch by batch, the GPU drained between batches so the
  launch queue never fills: the median call (what a Python loop around the call pays), and the
  median batch mean (which also carries the first call after each drain);
* throughput of back-to-back calls, CUDA events over batches of launches, for `run()`, the
  prepared launcher (`plan = g.plan(m, n, k)`, then `plan(a, b, c)`) and `plan.launch_pointers`
  (the floor: one cuLaunchKernel), each cycling through input sets larger than the 60 MB L2;
* torch._int_mm (cuBLAS int8) on the same data as the outside reference.

The schedules are what `for_shape` gives for this machine's GPU (`runtime.native_target`: on an
H200 the Hopper TMA + wgmma path where it is chosen, mma.sync where that measured faster).

Every path is first checked for exact equality with torch._int_mm.  Operands are random int4
values (packed two per byte for Int4Gemm), never zeros.

    python bench/run_overhead_bench.py [--shapes 32,8192,8192 ...] [--out bench/results/run_overhead_h200]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxforge.int4 import pack_int4  # noqa: E402
from ptxforge.runtime import gpu_skip_reason  # noqa: E402
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm  # noqa: E402

L2_BYTES = 60 << 20
SHAPES = [(32, 8192, 8192), (128, 8192, 8192), (1024, 8192, 8192), (8192, 8192, 8192)]
HOST_BAR_US = 10.0


def parse_shape(text):
    parts = [int(p) for p in text.split(",")]
    return tuple(parts * 3) if len(parts) == 1 else tuple(parts)


def make_sets(m, n, k, torch):
    per_set = (m + n) * k * 3 // 2
    count = int(min(8, max(2, -(-3 * L2_BYTES // per_set))))
    rng = np.random.default_rng(0)
    sets = []
    for _ in range(count):
        a = rng.integers(-8, 8, (m, k), dtype=np.int8)
        b = rng.integers(-8, 8, (n, k), dtype=np.int8)
        sets.append({"a8": torch.from_numpy(a).cuda(), "b8": torch.from_numpy(b).cuda(),
                     "a4": torch.from_numpy(pack_int4(a)).cuda(), "b4": torch.from_numpy(pack_int4(b)).cuda()})
    return sets


def events_us(torch, fn, calls, repeat=15):
    """Median device time per call over `repeat` event-timed batches of `calls` back-to-back calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) * 1e3 / calls)
    return statistics.median(samples)


def host_times(torch, fns: dict, calls=20, repeat=40) -> dict:
    """Host time per call of each of `fns` (name -> call): name -> (median of single calls, median batch mean).

    Batches of `calls` back-to-back calls, the GPU drained before each so that the launch queue never
    fills (a full queue makes a launch wait for the GPU, and the clock would then time the kernels,
    not the call).  The calls take turns batch by batch, so a slower stretch of the host weighs on
    all of them alike.  Each call is timed on its own: the median of those is what a call in a loop
    costs; the batch mean also carries the first call after each drain (the thread waking up, cold
    caches) and any preemption of the process."""
    for fn in fns.values():
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    singles = {name: [] for name in fns}
    means = {name: [] for name in fns}
    clock = time.perf_counter_ns
    for _ in range(repeat):
        for name, fn in fns.items():
            times = []
            for _ in range(calls):
                t = clock()
                fn()
                times.append(clock() - t)
            singles[name].extend(times)
            means[name].append(sum(times) / calls / 1e3)
            torch.cuda.synchronize()
    return {name: (statistics.median(singles[name]) / 1e3, statistics.median(means[name])) for name in fns}


def host_row(torch, via_run, via_plan, via_pointers) -> dict:
    """Host time per call of run(), the plan and launch_pointers (the floor: one driver launch)."""
    row = {}
    got = host_times(torch, {"run": via_run, "plan": via_plan, "pointers": via_pointers})
    for key, (single, batch) in got.items():
        row["host_us_" + key], row["host_batch_us_" + key] = single, batch
    return row


def run_shape(shape, arch, torch):
    m, n, k = shape
    sets = make_sets(m, n, k, torch)
    want = torch._int_mm(sets[0]["a8"], sets[0]["b8"].t())
    c = torch.empty((m, n), dtype=torch.int32, device="cuda")
    out = {"shape": list(shape), "input_sets": len(sets)}
    ops = 2.0 * m * n * k
    for label, cls, key in (("int4", Int4Gemm, "4"), ("int8", Int8Gemm, "8")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = cls.for_shape(m, n, k)
            a, b = sets[0]["a" + key], sets[0]["b" + key]
            c.fill_(-0x5A5A5A5A)
            g.run(a, b, c)
            torch.cuda.synchronize()
            if not torch.equal(c, want):
                raise AssertionError(f"{label} run(): {int((c != want).sum())} elements differ")
            plan = g.plan(m, n, k)
            c.fill_(-0x5A5A5A5A)
            plan(a, b, c)
            torch.cuda.synchronize()
            if not torch.equal(c, want):
                raise AssertionError(f"{label} plan(): {int((c != want).sum())} elements differ")
        pairs = [(s["a" + key], s["b" + key]) for s in sets]
        ptrs = [(x.data_ptr(), y.data_ptr()) for x, y in pairs]
        cyc_run, cyc_plan, cyc_ptr = itertools.cycle(pairs), itertools.cycle(pairs), itertools.cycle(ptrs)
        cp = c.data_ptr()

        def via_run():
            x, y = next(cyc_run)
            g.run(x, y, c)

        def via_plan():
            x, y = next(cyc_plan)
            plan(x, y, c)

        def via_pointers():
            x, y = next(cyc_ptr)
            plan.launch_pointers(x, y, cp)
        calls = 50 if m * n * k >= 2 ** 36 else 200
        row = {"schedule": g.describe(), "path": g.path_name,
               **host_row(torch, via_run, via_plan, via_pointers),
               "us_run": events_us(torch, via_run, calls), "us_plan": events_us(torch, via_plan, calls),
               "us_pointers": events_us(torch, via_pointers, calls)}
        for kk in ("run", "plan", "pointers"):
            row["tops_" + kk] = ops / (row["us_" + kk] * 1e-6) / 1e12
        out[label] = row
    cyc = itertools.cycle([(s["a8"], s["b8"].t()) for s in sets])

    def cublas():
        x, yt = next(cyc)
        torch._int_mm(x, yt)
    us = events_us(torch, cublas, 50 if m * n * k >= 2 ** 36 else 200)
    out["cublas_int8"] = {"us": us, "tops": ops / (us * 1e-6) / 1e12}
    return out


def table(rows):
    lines = ["| shape | op (path) | host µs/call run() | host µs plan() | host µs launch_pointers | run() batch mean "
             "| µs/call run() | µs/call plan() | µs launch_pointers | TOPS run() | TOPS plan() | cuBLAS int8 µs "
             "| run()/cuBLAS |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m, n, k = r["shape"]
        for label in ("int4", "int8"):
            x = r[label]
            lines.append(f"| {m}x{n}x{k} | {label} ({x['path']}) | {x['host_us_run']:.1f} | {x['host_us_plan']:.1f} | "
                         f"{x['host_us_pointers']:.1f} | {x['host_batch_us_run']:.1f} | "
                         f"{x['us_run']:.1f} | {x['us_plan']:.1f} | {x['us_pointers']:.1f} | {x['tops_run']:.0f} | "
                         f"{x['tops_plan']:.0f} | {r['cublas_int8']['us']:.1f} | "
                         f"{r['cublas_int8']['us'] / x['us_run']:.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=parse_shape, nargs="+", default=SHAPES)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "run_overhead_h200"))
    args = ap.parse_args(argv)
    reason = gpu_skip_reason()
    if reason:
        print(f"no GPU ({reason}): nothing to time")
        return 0
    import torch
    from ptxforge.runtime import device_info
    arch = device_info().arch
    rows = []
    for shape in args.shapes:
        rows.append(run_shape(shape, arch, torch))
        print(json.dumps(rows[-1]), flush=True)
    md = table(rows)
    worst = max(r[lab]["host_us_run"] for r in rows for lab in ("int4", "int8"))
    md += (f"\n\nhost time per run() call (median call): worst {worst:.1f} µs (bar {HOST_BAR_US} µs); "
           f"launch_pointers alone (one driver launch): "
           f"{min(r[lab]['host_us_pointers'] for r in rows for lab in ('int4', 'int8')):.1f}-"
           f"{max(r[lab]['host_us_pointers'] for r in rows for lab in ('int4', 'int8')):.1f} µs\n")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write(f"# run() as users call it ({torch.cuda.get_device_name()}, {arch})\n\n"
                f"Command: python bench/run_overhead_bench.py\n\n{md}")
    with open(args.out + ".json", "w") as f:
        json.dump(rows, f, indent=1)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
