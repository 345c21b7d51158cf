"""Where the host time of `run()` goes on torch tensors (GPU only): the median nanoseconds of each read the
per-call path makes of a tensor, of the three reads together, of `run()`, of a prepared plan's call and of one
bare launch (`launch_pointers`), for the int4 GEMM at M = 32, N = K = 8192.

    python bench/run_host_breakdown.py

The driver's launch is most of `launch_pointers`; `run()` adds the three operand reads, the query of torch's
current stream (given no `stream=`) and one dictionary lookup (see ptxforge/schedules/operands.py and schedules/hopper/run.py `launch_kept`).  The last rows are
the floor: the driver call alone (and, beside it, the same kernel launched without the programmatic
dependent-launch attribute, by cuLaunchKernelEx and by cuLaunchKernel: what the attribute costs the host),
and run()'s reads, lookups and driver call written inline without checks.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

from ptxforge.runtime.streams import current_stream_of
from ptxforge.schedules.gemm import Int4Gemm
from ptxforge.schedules.operands import _reader


def medians_ns(torch, rows, batches=400, batch=50) -> list:
    """The median host time of each row's call, in ns: `batches` rounds in which every row takes its turn
    of `batch` calls, each timed on its own (a slower stretch of the host weighs on every row alike), the
    GPU drained after each turn of a row that launches (launch queues stay short)."""
    clock = time.perf_counter_ns
    times = [[] for _ in rows]
    for _ in range(batches):
        for (_, fn, launches), got in zip(rows, times):
            for _ in range(batch):
                t0 = clock()
                fn()
                got.append(clock() - t0)
            if launches:
                torch.cuda.synchronize()
    return [sorted(t)[len(t) // 2] for t in times]


def main():
    try:
        import torch
    except ImportError:
        raise SystemExit("run_host_breakdown needs torch with a GPU (torch is not installed)")
    if not torch.cuda.is_available():
        raise SystemExit("run_host_breakdown needs a GPU (torch.cuda.is_available() is False)")
    m, n, k = 32, 8192, 8192
    g = Int4Gemm.for_shape(m, n, k)
    a = torch.randint(0, 256, (m, k // 2), dtype=torch.uint8, device="cuda")
    b = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device="cuda")
    c = torch.empty((m, n), dtype=torch.int32, device="cuda")
    for _ in range(5):
        g.run(a, b, c)
    torch.cuda.synchronize()
    rows = [("empty call (the timer)", lambda: None, False), ("a.dtype", lambda: a.dtype, False),
            ("a.is_contiguous()", lambda: a.is_contiguous(), False), ("a.get_device()", lambda: a.get_device(), False),
            ("a.shape", lambda: a.shape, False), ("a.data_ptr()", lambda: a.data_ptr(), False),
            ("one operand read", lambda: _reader.read(a), False),
            ("three operand reads", lambda: (_reader.read(a), _reader.read(b), _reader.read(c)), False),
            ("torch's current stream (current_stream_of)", lambda: current_stream_of((a, b, c)), False),
            ("g.run(a, b, c)", lambda: g.run(a, b, c), True)]
    plan = g.plan(m, n, k)
    plan(a, b, c)
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    rows += [("plan(a, b, c)", lambda: plan(a, b, c), True),
             ("plan.launch_pointers(...)", lambda: plan.launch_pointers(pa, pb, pc), True)]
    rows += floor_rows(torch, plan, a, b, c)
    medians_ns(torch, rows, batches=40)  # warms the host up: a first pass ran up to 3 us high
    got = medians_ns(torch, rows)
    print(f"{type(g).__name__} for {m}x{n}x{k} int4; medians of 20000 calls per row, the rows taking turns in "
          "batches of 50")
    for (name, _, _), ns in zip(rows, got):
        print(f"{name:36s} {ns:7d} ns", flush=True)


def floor_rows(torch, plan, a, b, c) -> list:
    """The floor under run(): the plan's driver call alone, and the same work as run() (five reads of each
    tensor, the plan lookup, the argument block's lookup, the driver call) written inline without the
    library's checks, calls and launch record.  What run() costs above the second is its own code."""
    from ptxforge.runtime.driver import api
    import importlib
    hrun = importlib.import_module("ptxforge.schedules.hopper.run")  # the module (the package exports a run())
    from ptxforge.runtime.dependent import DependentLaunch
    if not plan.cfg.pdl or plan.cfg.cluster_size > 1 or not plan._swap:
        return []  # written for the M = 32 plan: swapped operands, a programmatic dependent launch
    d, config, func = api(), DependentLaunch(plan.fn, plan._cfg, plan.stream).config, plan.fn._func
    kept = hrun._plans[id(plan.cfg)][1]
    blobs = plan._blobs
    addr = next(iter(blobs.values())).addr

    def read(x):
        return x.dtype, x.is_contiguous(), x.get_device(), x.shape, x.data_ptr()

    def inline():
        ra, rb, rc = read(a), read(b), read(c)
        kept.get((ra[3], ra[0], rb[3], rb[0], rc[3], rc[0], None, None, 0))
        d.cuLaunchKernelEx(config, func, blobs[(ra[4], rb[4], rc[4])].addr, 0)

    from ptxforge.runtime.launch_ex import launch_config
    bare = launch_config(d, plan._cfg, plan.stream, [])  # the same launch without the dependent-launch attribute
    gx, gy, gz, bx, by, bz, shared = plan._cfg
    cu_stream = d.CUstream(plan.stream)
    return [("the driver call alone", lambda: d.cuLaunchKernelEx(config, func, addr, 0), True),
            ("  the same, no launch attribute", lambda: d.cuLaunchKernelEx(bare, func, addr, 0), True),
            ("  the same by cuLaunchKernel", lambda: d.cuLaunchKernel(func, gx, gy, gz, bx, by, bz, shared, cu_stream,
                                                                       addr, 0), True),
            ("run()'s work written inline", inline, True)]


if __name__ == "__main__":
    main()
