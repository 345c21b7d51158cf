"""TileCopy bandwidth against a device-to-device copy of the same bytes, in the same run.

For each dtype, a matrix of several GB (random bytes, never zeros) is streamed global -> shared
-> global by the TileCopy kernel and copied by torch's `dst.copy_(src)` (cuMemcpyDtoD when
torch is missing).  Both are timed with CUDA events: median of many launches after a warm-up.
Bandwidth counts bytes read plus bytes written.  Goal: TileCopy >= 0.85x the copy for
16-byte-aligned data.

First a sweep of tile shape x threads x stages x CTAs per SM x completion (on int8; at 16-byte
alignment the element type only renames the columns) picks the fastest configuration; then
every dtype runs with it and with the default configuration, each next to its own reference
copy.  The destination is checked against the source after the timed runs.

    python bench/copy_bench.py                     # ~2 GiB per buffer, default sweep
    python bench/copy_bench.py --gib 4 --full      # larger sweep
    python bench/copy_bench.py --quick             # defaults only, no sweep
    python bench/copy_bench.py --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from ptxforge import runtime as rt  # noqa: E402
from ptxforge.errors import PtxforgeError  # noqa: E402
from ptxforge.schedules import TileCopy  # noqa: E402
from ptxforge.runtime import gpu_skip_reason  # noqa: E402

BITS = {"s4": 4, "s8": 8, "bf16": 16, "f32": 32}
ROW_BYTES = 16384  # 16-byte-aligned rows: the case the 0.85x goal is about
GOAL = 0.85
SMEM_PER_SM = 224 * 1024  # H100/H200: 228 KB per SM, 1 KB of it reserved per CTA


# ---------------------------------------------------------------- buffers

class Buffers:
    """src and dst of `nbytes` each, random non-zero bytes in src; torch when available."""

    def __init__(self, nbytes: int, seed: int = 0):
        self.nbytes = nbytes
        try:
            import torch
            self.torch = torch
        except Exception:
            self.torch = None
        if self.torch is not None:
            g = self.torch.Generator(device="cuda").manual_seed(seed)
            self.src = self.torch.randint(1, 256, (nbytes,), dtype=self.torch.uint8, device="cuda", generator=g)
            self.dst = self.torch.empty_like(self.src)
        else:
            self.src = rt.DeviceBuffer(nbytes)
            rng = np.random.default_rng(seed)
            chunk = 1 << 28
            host = np.empty(nbytes, np.uint8)
            for i in range(0, nbytes, chunk):
                host[i:i + chunk] = rng.integers(1, 256, size=min(chunk, nbytes - i), dtype=np.uint8)
            self.src.copy_from_host(host)
            self.dst = rt.DeviceBuffer(nbytes)

    @property
    def reference_name(self) -> str:
        return "torch copy_" if self.torch is not None else "cuMemcpyDtoD"

    def poison(self):
        if self.torch is not None:
            self.dst.fill_(0xA5)
        else:
            self.dst.fill_bytes(0xA5)

    def reference_copy(self):
        if self.torch is not None:
            self.dst.copy_(self.src)
        else:
            from cuda.bindings import driver as d
            err, = d.cuMemcpyDtoDAsync(d.CUdeviceptr(self.dst.ptr), d.CUdeviceptr(self.src.ptr), self.nbytes,
                                       d.CUstream(0))
            if err:
                raise RuntimeError(f"cuMemcpyDtoDAsync failed: {err}")

    def equal(self) -> bool:
        if self.torch is not None:
            self.torch.cuda.synchronize()
            return bool(self.torch.equal(self.src, self.dst))
        from cuda.bindings import driver as d
        d.cuCtxSynchronize()
        step = 1 << 26
        for off in range(0, self.nbytes, step * 16):  # sampled: whole buffers through the host are slow
            n = min(step, self.nbytes - off)
            a, b = np.empty(n, np.uint8), np.empty(n, np.uint8)
            d.cuMemcpyDtoH(a.ctypes.data, d.CUdeviceptr(self.src.ptr + off), n)
            d.cuMemcpyDtoH(b.ctypes.data, d.CUdeviceptr(self.dst.ptr + off), n)
            if not np.array_equal(a, b):
                return False
        return True


# ---------------------------------------------------------------- timing

def gbps(nbytes_moved: int, us: float) -> float:
    return nbytes_moved / (us * 1e-6) / 1e9


def time_reference(buf: Buffers, warmup: int, repeat: int) -> float:
    return rt.benchmark(buf.reference_copy, warmup=warmup, repeat=repeat).median_us


def make(dtype, rows, *, tile_rows, tile_bytes, threads, stages, ctas_per_sm, completion, layout="linear"):
    cols = ROW_BYTES * 8 // BITS[dtype]
    return TileCopy(rows, cols, dtype, tile_rows=tile_rows, tile_cols=tile_bytes * 8 // BITS[dtype], threads=threads,
                    stages=stages, layout=layout, completion=completion, ctas_per_sm=ctas_per_sm)


def time_tile_copy(tc: TileCopy, buf: Buffers, sm_count: int, warmup: int, repeat: int) -> float:
    fn = rt.load(tc.emit())[tc.kernel_name]
    args = tc.args(buf.src, buf.dst)
    return rt.benchmark(fn, tc.grid(sm_count=sm_count), tc.block, *args, shared=tc.shared_bytes, warmup=warmup,
                        repeat=repeat).median_us


def config_text(c: dict) -> str:
    return (f"{c['tile_rows']}x{c['tile_bytes']}B t{c['threads']} s{c['stages']} c{c['ctas_per_sm']} "
            f"{c['completion']}")


# The fastest configuration of the H200 sweep (0.94x the driver's copy for every dtype), and TileCopy's default.
DEFAULT = dict(tile_rows=32, tile_bytes=256, threads=128, stages=3, ctas_per_sm=2, completion="mbarrier")


def sweep_space(full: bool):
    """Configurations to time; those whose CTAs could not all be resident at once are left out."""
    tiles = [(16, 512), (32, 256), (32, 512), (64, 256)] + ([(64, 512), (128, 128), (16, 1024)] if full else [])
    threads = [128, 256] + ([512] if full else [])
    stages = [3, 4] + ([2, 6] if full else [])
    ctas = [2, 4] + ([1, 8] if full else [])
    for (tr, tb), th, s, c, comp in itertools.product(tiles, threads, stages, ctas, ["groups", "mbarrier"]):
        if s * tr * tb * c > SMEM_PER_SM:
            continue
        yield dict(tile_rows=tr, tile_bytes=tb, threads=th, stages=s, ctas_per_sm=c, completion=comp)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gib", type=float, default=2.0, help="size of each of src and dst (GiB)")
    p.add_argument("--dtypes", default="s4,s8,bf16,f32")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="no sweep: the default configuration only")
    p.add_argument("--full", action="store_true", help="a larger sweep")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    reason = gpu_skip_reason()
    if reason is not None:
        print(f"copy_bench needs a GPU: {reason}")
        return 2
    info = rt.device_info()
    print(info)
    rows = int(a.gib * 2**30) // ROW_BYTES
    nbytes = rows * ROW_BYTES
    buf = Buffers(nbytes)
    moved = 2 * nbytes
    print(f"buffers: 2 x {nbytes / 2**30:.2f} GiB ({rows} rows x {ROW_BYTES} B); reference: {buf.reference_name}; "
          f"bandwidth = (read + write) / median time of {a.repeat} launches after {a.warmup} warm-up")
    ref_us = time_reference(buf, a.warmup, a.repeat)
    print(f"reference copy: {gbps(moved, ref_us):8.1f} GB/s ({ref_us:.1f} us)\n")
    results = {"device": str(info), "bytes_per_buffer": nbytes, "reference": buf.reference_name, "sweep": [],
               "table": []}

    best = DEFAULT
    if not a.quick:
        print("sweep (s8):")
        scored = []
        for c in sweep_space(a.full):
            try:
                tc = make("s8", rows, **c)
                us = time_tile_copy(tc, buf, info.sm_count, 2, max(5, a.repeat // 3))
            except PtxforgeError as e:
                print(f"  {config_text(c):40s} skipped: {str(e).splitlines()[0]}")
                continue
            scored.append((us, c))
            results["sweep"].append({**c, "us": us, "gbps": gbps(moved, us)})
            print(f"  {config_text(c):40s} {gbps(moved, us):8.1f} GB/s")
        scored.sort(key=lambda x: x[0])
        best = scored[0][1]
        print(f"fastest: {config_text(best)}\n")

    print(f"{'dtype':5s} {'config':40s} {'TileCopy GB/s':>14s} {'copy GB/s':>10s} {'ratio':>6s}  check")
    worst = None
    configs = [("default", DEFAULT)] + ([("best", best)] if best != DEFAULT else [])
    for dtype in a.dtypes.split(","):
        for label, c in configs:
            tc = make(dtype, rows, **c)
            buf.poison()
            us = time_tile_copy(tc, buf, info.sm_count, a.warmup, a.repeat)
            ok = buf.equal()
            r_us = time_reference(buf, a.warmup, a.repeat)  # measured right next to it
            ratio = r_us / us
            if c == best:
                worst = ratio if worst is None else min(worst, ratio)
            row = {"dtype": dtype, "config": label, **c, "us": us, "gbps": gbps(moved, us), "copy_us": r_us,
                   "copy_gbps": gbps(moved, r_us), "ratio": ratio, "bit_exact": ok,
                   "load": tc.copy_plan.describe(), "store": tc.store_plan.describe()}
            results["table"].append(row)
            print(f"{dtype:5s} {label + ': ' + config_text(c):40s} {gbps(moved, us):14.1f} {gbps(moved, r_us):10.1f} "
                  f"{ratio:6.3f}  {'bit-exact' if ok else 'MISMATCH'}")
    print(f"\ngoal: >= {GOAL}x the reference copy for 16-byte-aligned data; worst ratio of the chosen "
          f"configuration ({config_text(best)}): {worst:.3f} -> {'met' if worst >= GOAL else 'NOT met'}")
    print("if not met: compare the sweep's spread (stages/CTAs per SM move latency hiding; threads and tile move "
          "issue overhead), and profile the kernel with\n  ncu --clock-control none --section MemoryWorkloadAnalysis "
          "--section WarpStateStats python bench/copy_bench.py --quick --gib 1 --dtypes s8 --repeat 3")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if all(r["bit_exact"] for r in results["table"]) else 1


if __name__ == "__main__":
    sys.exit(main())
