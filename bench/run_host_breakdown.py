"""Where the host time of `run()` goes on torch tensors (GPU only): the median nanoseconds of each read the
per-call path makes of a tensor, of the three reads together, of `run()`, of a prepared plan's call and of one
bare launch (`launch_pointers`), for the int4 GEMM at M = 32, N = K = 8192.

    python bench/run_host_breakdown.py

The driver's launch is most of `launch_pointers`; `run()` adds the three operand reads and one dictionary
lookup (see ptxforge/schedules/operands.py and schedules/hopper/run.py `launch_kept`).
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
    print(f"{type(g).__name__} for {m}x{n}x{k} int4; medians of 20000 calls")
    for name, fn, every in rows:
        print(f"{name:28s} {median_ns(fn, sync_every=every):7d} ns", flush=True)


if __name__ == "__main__":
    main()
