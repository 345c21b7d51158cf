"""What C's starting address costs a GEMM on the GPU: one problem's launches on views of one tensor that start
0, 8, 16, 32 and 64 bytes in.

For int8 8192 x 8192 x 256 (a K small enough that C's writes weigh), through one prepared plan's
`launch_pointers` (no per-call host path: the device time of the kernel alone), for the TMA-store
configuration `for_shape` picks and for the same with `epilogue='registers'`; a TMA-store plan hands a C that
is not 16-byte aligned to its registers-epilogue plan, which the lines name.  Then torch's own `fill_` of
the same views, and the host time of `run()` on an aligned and a shifted C (the call, not the kernel).  CUDA
events over back-to-back calls after warm-up (`run_overhead_bench.events_us`), medians.  The operands (4 MB
each) are not rotated: what is measured is C's writes, 268 MB per call, four times the L2, through views of one
tensor so that only C's start differs between the rows.

    python bench/c_alignment_bench.py [--shape 8192,8192,256]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from run_overhead_bench import events_us, parse_shape  # noqa: E402
from ptxforge.runtime import gpu_skip_reason  # noqa: E402

OFFSETS = (0, 8, 16, 32, 64)  # bytes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=parse_shape, default=(8192, 8192, 256))
    args = ap.parse_args(argv)
    why = gpu_skip_reason()
    if why:
        print(f"c_alignment_bench needs a GPU: {why}")
        return 0
    import torch
    from ptxforge.schedules.hopper import choose_hopper
    m, n, k = args.shape
    a = torch.randint(-128, 127, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 127, (n, k), dtype=torch.int8, device="cuda")
    whole = torch.zeros((m * n + 64,), dtype=torch.int32, device="cuda")
    views = {off: whole[off // 4:off // 4 + m * n].view(m, n) for off in OFFSETS}
    g = choose_hopper(m, n, k, "s8")
    print(f"{torch.cuda.get_device_name()}, {m} x {n} x {k} int8, for_shape: {g.kernel_name}")
    for cfg in (g, dataclasses.replace(g, epilogue="registers")):
        plan = cfg.plan(m, n, k)
        for off, c in views.items():
            plan(a, b, c)  # (checked; makes the registers plan where C needs it)
            torch.cuda.synchronize()
            us = events_us(torch, lambda c=c: plan.launch_pointers(a.data_ptr(), b.data_ptr(), c.data_ptr()), 20)
            kernel = "registers" if cfg.epilogue == "registers" or off % 16 else "tma"
            print(f"{cfg.epilogue:9s} plan, C +{off:2d} B: {us:8.1f} us per launch (the {kernel} kernel)", flush=True)
    for off in (0, 8):
        c = views[off]
        g.run(a, b, c)
        torch.cuda.synchronize()
        per = []
        for _ in range(20):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                g.run(a, b, c)
            per.append((time.perf_counter() - t0) / 20 * 1e6)
        print(f"run() host time per call (20 enqueued, not waited for), C +{off} B: {statistics.median(per):.1f} us",
              flush=True)
    for off in OFFSETS[:3]:
        c = views[off]
        us = events_us(torch, lambda c=c: c.fill_(3), 20)
        print(f"torch fill_, C +{off:2d} B: {us:.1f} us = {m * n * 4 / us / 1e6:.2f} TB/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
