"""When each CTA of a GEMM launch starts, passes griddepcontrol.wait and ends (GPU only): the kernel `for_shape`
picks, its PTX text instrumented with %globaltimer stamps, launched back to back through its plan over input
sets rotated beyond the L2; the stamps of the last launch of each series are printed as percentiles over the
CTAs, in microseconds from the first CTA's start.

    python bench/cta_timeline.py [--op int4] [--shapes 32,8192,8192 128,8192,8192] [--launches 40] [--reps 3]

The instrumentation: thread 0 of each CTA stores the time at the kernel's entry and after its
griddepcontrol.wait, and lane 0 of every warp takes the maximum of the time at its `ret` into the CTA's end
stamp (atom.global.max), into a stamp buffer whose address is written into the PTX as an immediate.  The
plan is made with the instrumented kernel in place of its own (the stamps cost a few instructions per warp).
With a programmatic dependent launch the next launch overwrites each stamp, so what is read after the series
is its last launch's.  %globaltimer ticks in steps of about 0.26 us on an H100.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from gemm_table_bench import OPS, input_sets  # noqa: E402
from run_overhead_bench import parse_shape  # noqa: E402

_ENTRY = """    .reg .u64 %tlA, %tlB, %tlC;
    .reg .u32 %tlR;
    .reg .pred %tlP;
    mov.u32 %tlR, %ctaid.x;
    mul.wide.u32 %tlB, %tlR, 32;
    mov.u64 %tlA, {addr};
    add.u64 %tlA, %tlA, %tlB;
    mov.u32 %tlR, %tid.x;
    setp.eq.u32 %tlP, %tlR, 0;
    mov.u64 %tlC, %globaltimer;
    @%tlP st.global.u64 [%tlA], %tlC;
"""
_AFTER_WAIT = """    mov.u64 %tlC, %globaltimer;
    @%tlP st.global.u64 [%tlA+8], %tlC;
"""
_BEFORE_RET = """    mov.u32 %tlR, %laneid;
    setp.eq.u32 %tlP, %tlR, 0;
    mov.u64 %tlC, %globaltimer;
    @%tlP atom.global.max.u64 %tlB, [%tlA+16], %tlC;
"""


def instrumented(ptx: str, addr: int) -> str:
    """`ptx` (one kernel) with the stamps written at 32 * ctaid.x + {0, 8, 16} bytes past `addr`."""
    out, entered = [], False
    for line in ptx.splitlines():
        s = line.strip()
        if s.endswith("ret;"):
            out.append(_BEFORE_RET)
        out.append(line)
        if s == "{" and not entered:
            entered = True
            out.append(_ENTRY.format(addr=addr))
        elif s == "griddepcontrol.wait;":
            out.append(_AFTER_WAIT)
    if not entered:
        raise ValueError("no kernel body found in the PTX")
    return "\n".join(out) + "\n"


def timeline(torch, op: str, shape, launches: int, reps: int) -> list:
    """Per series: (start, after-wait, end) arrays over the CTAs of its last launch, us from the first start."""
    import ptxforge as pf
    import ptxforge.schedules.hopper.plan as hplan
    m, n, k = shape
    g = OPS[op][1].for_shape(m, n, k)
    stamps = torch.zeros(4 * 1024, dtype=torch.int64, device="cuda")
    text = instrumented(str(g.for_launch(m if g.swap_ab else n, 1, m * n).module), stamps.data_ptr())
    own = hplan.load_kernel
    hplan.load_kernel = lambda cfg: pf.load(text, cache=False)[cfg.kernel_name]
    try:
        plan = g.plan(m, n, k, splits=1)
    finally:
        hplan.load_kernel = own
    sets = input_sets(op, m, n, k, torch)
    c = torch.empty((m, n), dtype=torch.float32 if op == "bf16" else torch.int32, device="cuda")
    out = []
    for rep in range(reps + 1):  # the first series warms up
        stamps.zero_()
        torch.cuda.synchronize()
        for i in range(launches):
            plan(*sets[i % len(sets)], c)
        torch.cuda.synchronize()
        st = stamps.view(-1, 4)[:plan.grid[0], :3].cpu().numpy().astype(np.float64)
        if rep:
            out.append((st - st[:, 0].min()) / 1e3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--op", default="int4", choices=sorted(OPS))
    ap.add_argument("--shapes", nargs="+", default=["32,8192,8192", "128,8192,8192"], help="M,N,K each")
    ap.add_argument("--launches", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    import torch
    pct = (0, 10, 50, 90, 100)
    for shape in map(parse_shape, args.shapes):
        for rep, st in enumerate(timeline(torch, args.op, shape, args.launches, args.reps)):
            start, wait, end = st.T
            print(f"{args.op} {'x'.join(map(str, shape))}, series {rep}: {len(st)} CTAs; us from the first start, "
                  f"percentiles {pct} over the CTAs")
            for name, x in (("start", start), ("after wait", wait), ("end", end), ("end - after wait", end - wait)):
                print(f"  {name:17s} " + " ".join(f"{v:6.2f}" for v in np.percentile(x, pct)))
            # (each CTA but those on idle SMs starts as a CTA of the launch ahead leaves its SM)
            print(f"  last end - median end {end.max() - np.median(end):.2f} us; the wait passed (median) "
                  f"{np.median(wait) - start.max():.2f} us after the last CTA started", flush=True)


if __name__ == "__main__":
    main()
