"""Where the host time of `run()` goes on torch tensors (GPU only): the median nanoseconds of each read the
per-call path makes of a tensor, of the three reads together, of `run()`, of a prepared plan's call and of one
bare launch (`launch_pointers`), for the int4 GEMM at M = 32, N = K = 8192.

    python bench/run_host_breakdown.py

The driver's launch is most of `launch_pointers`; `run()` adds the three operand reads and one dictionary
lookup (see ptxforge/schedules/operands.py and schedules/hopper/run.py `launch_kept`).  The last two rows are
the floor: the driver call alone, and run()'s reads, lookups and driver call written inline without checks.
"""

import time

from ptxforge.schedules.gemm import Int4Gemm
from ptxforge.schedules.operands import _reader


def median_ns(fn, calls=20000, sync_every=50):
    import torch
    """The median host time of `fn()` over `calls` calls, synchronizing every `sync_every` (launch queues stay short)."""
    clock, times = time.perf_counter_ns, []
    for i in range(calls):
        t0 = clock()
        fn()
        times.append(clock() - t0)
        if i % sync_every == sync_every - 1:
            torch.cuda.synchronize()
    times.sort()
    return times[len(times) // 2]


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
    never = 10 ** 9  # reads launch nothing: no synchronization needed
    rows = [("empty call (the timer)", lambda: None, never), ("a.dtype", lambda: a.dtype, never),
            ("a.is_contiguous()", lambda: a.is_contiguous(), never), ("a.get_device()", lambda: a.get_device(), never),
            ("a.shape", lambda: a.shape, never), ("a.data_ptr()", lambda: a.data_ptr(), never),
            ("one operand read", lambda: _reader.read(a), never),
            ("three operand reads", lambda: (_reader.read(a), _reader.read(b), _reader.read(c)), never),
            ("g.run(a, b, c)", lambda: g.run(a, b, c), 50)]
    plan = g.plan(m, n, k)
    plan(a, b, c)
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    rows += [("plan(a, b, c)", lambda: plan(a, b, c), 50),
             ("plan.launch_pointers(...)", lambda: plan.launch_pointers(pa, pb, pc), 50)]
    rows += floor_rows(torch, plan, a, b, c)
    for _ in range(2):  # a first pass warms the host up (its medians run high); the second is reported
        got = [(name, median_ns(fn, sync_every=every)) for name, fn, every in rows]
    print(f"{type(g).__name__} for {m}x{n}x{k} int4; medians of 20000 calls, after a pass that warms the host up")
    for name, ns in got:
        print(f"{name:36s} {ns:7d} ns", flush=True)


def floor_rows(torch, plan, a, b, c) -> list:
    """The floor under run(): the plan's driver call alone, and the same work as run() (five reads of each
    tensor, the plan lookup, the argument block's lookup, the driver call) written inline without the
    library's checks, calls and launch record.  What run() costs above the second is its own code."""
    from ptxforge.runtime.driver import api
    import importlib
    hrun = importlib.import_module("ptxforge.schedules.hopper.run")  # the module (the package exports a run())
    if plan._dependent is None or not plan._swap:
        return []  # written for the M = 32 plan: swapped operands, a programmatic dependent launch
    d, config, func = api(), plan._dependent.config, plan.fn._func
    kept = hrun._plans[id(plan.cfg)][1]
    blobs = plan._blobs
    addr = next(iter(blobs.values())).addr

    def read(x):
        return x.dtype, x.is_contiguous(), x.get_device(), x.shape, x.data_ptr()

    def inline():
        ra, rb, rc = read(a), read(b), read(c)
        kept.get((ra[3], ra[0], rb[3], rb[0], rc[3], rc[0], None, None, 0))
        d.cuLaunchKernelEx(config, func, blobs[(rb[4], ra[4], rc[4])].addr, 0)

    return [("the driver call alone", lambda: d.cuLaunchKernelEx(config, func, addr, 0), 50),
            ("run()'s work written inline", inline, 50)]


if __name__ == "__main__":
    main()
