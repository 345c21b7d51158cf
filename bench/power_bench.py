"""What the board runs at while a large GEMM runs back to back: SM clock, power draw and the clock-event
reasons nvidia-smi reports, beside the TOPS, for ptxforge and cuBLAS.

Large dense GEMMs on the H200 draw the board to its power limit: the clock the kernel gets then depends on
the energy of its instructions and of its data (random full-range int8 or normal bf16 values toggle more
bits than small ones), not only on its schedule.  This script runs each GEMM for `--seconds` back to back
(two input sets in turn) while a thread samples nvidia-smi, and prints the TOPS over the run with the
median sample and the last one.  Reason 0x4 is the software power cap.

    python bench/power_bench.py [--size 8192] [--seconds 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ptxforge.runtime import gpu_skip_reason  # noqa: E402
from ptxforge.schedules.gemm import Int8Gemm  # noqa: E402
from ptxforge.schedules.hopper import Bf16Gemm  # noqa: E402

QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"


def sample(stop, out):
    """Append nvidia-smi's SM clock, power draw and clock-event reasons every 0.25 s until `stop` is set."""
    while not stop.is_set():
        r = subprocess.run(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader"], capture_output=True,
                           text=True)
        out.append(r.stdout.strip())
        time.sleep(0.25)


def cases(torch, size):
    """(label, ptxforge call, cuBLAS call), each taking the index of the call (the input set is i % 2)."""
    m = n = k = size
    g8 = Int8Gemm.for_shape(m, n, k)
    out = []
    for label, lo, hi in (("int8 full range", -128, 128), ("int8 values in [-8, 8)", -8, 8)):
        a = [torch.randint(lo, hi, (m, k), dtype=torch.int8, device="cuda") for _ in range(2)]
        b = [torch.randint(lo, hi, (n, k), dtype=torch.int8, device="cuda") for _ in range(2)]
        c = torch.empty((m, n), dtype=torch.int32, device="cuda")
        out.append((label, lambda i, a=a, b=b, c=c: g8.run(a[i % 2], b[i % 2], c),
                    lambda i, a=a, b=b: torch._int_mm(a[i % 2], b[i % 2].t())))
    gb = Bf16Gemm.for_shape(m, n, k)
    a = [torch.randn(m, k, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
    b = [torch.randn(n, k, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
    c = torch.empty((m, n), dtype=torch.float32, device="cuda")
    out.append(("bf16 normal values", lambda i: gb.run(a[i % 2], b[i % 2], c),
                lambda i: torch.matmul(a[i % 2], b[i % 2].t())))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    reason = gpu_skip_reason()
    if reason:
        print(f"no GPU: {reason}")
        return 0
    import torch
    ops = 2.0 * args.size ** 3
    print(f"| GEMM ({args.size}^3) | who | TOPS | calls | median sample ({QUERY}) | last sample |")
    print("|---|---|---|---|---|---|")
    for label, ours, cublas in cases(torch, args.size):
        for who, fn in (("ptxforge run()", ours), ("cuBLAS", cublas)):
            for i in range(5):
                fn(i)
            torch.cuda.synchronize()
            stop, samples = threading.Event(), []
            th = threading.Thread(target=sample, args=(stop, samples))
            th.start()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            t, i = time.time(), 0
            while time.time() - t < args.seconds:
                for _ in range(20):
                    fn(i)
                    i += 1
                torch.cuda.synchronize()
            e.record()
            e.synchronize()
            stop.set()
            th.join()
            ms = s.elapsed_time(e) / i
            print(f"| {label} | {who} | {ops / ms / 1e9:.0f} | {i} | {samples[len(samples) // 2]} | "
                  f"{samples[-2] if len(samples) > 1 else samples[-1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
