"""Skinny int4 GEMM (M <= 1024, N = K = 8192) on the H200: split-K mma.sync candidates beside cuBLAS int8.

One run does, in order:
  1. correctness: ragged skinny shapes with split-K schedules against numpy (int64), C poisoned,
     each launched twice (the second launch must find the arrival counters reset);
  2. for each M in --ms, every candidate of `tuning.splitk_space` (tiles x k-tile x stages x
     splits) is checked exactly against torch._int_mm on the unpacked values (C poisoned, two
     launches), then timed: CUDA events around back-to-back launches of the prepared plan
     (`GemmSchedule.plan(m, n, k).launch_pointers`), cycling through input sets whose weights
     together exceed the 60 MB L2 (values drawn in [-8, 7], never zeros);
  3. cuBLAS int8 (torch._int_mm, NT) timed the same way on the same values (int8, twice the bytes);
     the Hopper TMA + wgmma schedule (its own split-K and reduction kernel) where it takes the shape;
     the separate reduction kernel's cost on a [splits, M, N] workspace (the alternative to
     reducing in the last CTA);
  4. a table (best per M, the default, cuBLAS) printed last; everything under $OUT/skinny.json.

    python bench/skinny_bench.py --ms 32 128 256 1024 --budget-s 150
    python bench/skinny_bench.py --dry-run        # no GPU: emit every candidate, print the floors
"""

from __future__ import annotations

import argparse
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
from ptxforge.isa.targets import Target  # noqa: E402
from ptxforge.schedules.gemm import Int4Gemm  # noqa: E402
from ptxforge.schedules.gemm.tuning import splitk_space  # noqa: E402

N = K = 8192
BANDWIDTH = 4.0e12  # measured device-to-device copy on the H200 (read + write), bytes/s
MMA_SYNC_S4 = 847e12  # s4 unpacked to 2x mma.sync s8, ldmatrix-fed, measured ceiling
L2_BYTES = 60 << 20
POISON = -0x5A5A5A5A
RAGGED = [(33, 1000, 4000), (1, 77, 8192 + 64), (130, 520, 2050), (17, 3001, 96), (31, 8190, 8192 - 32)]


def floors(m, n, k):
    """Bytes (int4 operands once, C once) and operations of one product, and their times."""
    byts = (m + n) * k / 2 + 4.0 * m * n
    ops = 2.0 * m * n * k
    return {"bytes": byts, "ops": ops, "t_bytes_us": byts / BANDWIDTH * 1e6, "t_mma_us": ops / MMA_SYNC_S4 * 1e6}


def candidates(m):
    t = Target.parse("sm_90")
    space = splitk_space(m, N, K, t) if m <= 256 else []
    base = Int4Gemm.for_shape(m, N, K, "sm_90", hopper=False)
    out = [base]
    # split candidates first (the budget may end a sweep early), then the unsplit ones
    for c in sorted(space, key=lambda c: c.get("splits", 1) == 1):
        g = Int4Gemm(target=t, **c)
        if g not in out:
            out.append(g)
    if m > 256:
        import dataclasses
        out.append(dataclasses.replace(base, l2_prefetch=256))
    return out


def desc(g):
    return (f"{g.block_m}x{g.block_n}x{g.block_k} w{g.warps_m}x{g.warps_n} s{g.stages} "
            f"g{g.raster_group} k{g.splits}" + ("l" if g.splits > 1 and g.splitk_sync == "leader" else "")
            + (f" p{g.l2_prefetch}" if g.l2_prefetch else ""))


class Inputs:
    """Input sets on the GPU for one M: int8 values in [-8, 7] (cuBLAS) and the same packed (int4)."""

    def __init__(self, torch, m, seed):
        gen = torch.Generator(device="cuda")
        gen.manual_seed(seed)
        per = N * K // 2
        self.count = max(3, -(-2 * L2_BYTES // per) + 1)  # packed weights: >= 2x the L2 in all
        self.a8, self.b8, self.a4, self.b4 = [], [], [], []
        for _ in range(self.count):
            a = torch.randint(-8, 8, (m, K), dtype=torch.int8, device="cuda", generator=gen)
            b = torch.randint(-8, 8, (N, K), dtype=torch.int8, device="cuda", generator=gen)
            self.a8.append(a)
            self.b8.append(b)
            self.a4.append(pack(torch, a))
            self.b4.append(pack(torch, b))
        self.c = torch.empty((m, N), dtype=torch.int32, device="cuda")
        self.want = torch._int_mm(self.a8[0], self.b8[0].t())


def pack(torch, v):
    """Two int4 values per byte, even k in the low nibble (ptxforge.int4.pack_int4's layout)."""
    lo = v[:, 0::2].to(torch.int16) & 0xF
    hi = v[:, 1::2].to(torch.int16) & 0xF
    return (lo | (hi << 4)).to(torch.uint8).contiguous()


def time_launches(torch, launch, count, reps=7, inner=40):
    """Median per-launch time (us) of `inner` back-to-back launches between CUDA events, and the
    host's time per launch (to see whether the host kept the GPU fed)."""
    for i in range(8):
        launch(i % count)
    torch.cuda.synchronize()
    times, host = [], []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        h0 = time.perf_counter()
        for i in range(inner):
            launch(i % count)
        h1 = time.perf_counter()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / inner)
        host.append((h1 - h0) * 1e6 / inner)
    return statistics.median(times), statistics.median(host), times


def check_ragged(torch, log):
    """Step 1: split-K schedules on ragged skinny shapes against numpy, twice each."""
    from ptxforge.runtime import DeviceBuffer
    scheds = [
        Int4Gemm(block_m=32, block_n=64, block_k=256, warps_m=1, warps_n=4, stages=4, raster_group=1, splits=4),
        Int4Gemm(block_m=32, block_n=128, block_k=512, warps_m=1, warps_n=4, stages=3, raster_group=1, splits=8),
        Int4Gemm(block_m=128, block_n=64, block_k=256, warps_m=2, warps_n=2, stages=3, raster_group=1, splits=2),
        Int4Gemm(block_m=32, block_n=64, block_k=1024, warps_m=1, warps_n=4, stages=3, raster_group=1, splits=4,
                 splitk_sync="leader", l2_prefetch=256),
        Int4Gemm(block_m=64, block_n=64, block_k=256, warps_m=2, warps_n=2, stages=3, raster_group=1, splits=2,
                 splitk_sync="leader"),
    ]
    rng = np.random.default_rng(11)
    bad = 0
    for (m, n, k) in RAGGED:
        a = pack_int4(rng.integers(-8, 8, (m, k)), signed=True)
        b = pack_int4(rng.integers(-8, 8, (n, k)), signed=True)
        want = scheds[0].reference(a, b, k)
        da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
        for g in scheds:
            for rep in range(2):
                try:
                    dc = DeviceBuffer.from_host(np.full((m, n), POISON, np.int32))
                    g.run(da, db, dc, k=k)
                    got = dc.to_host().astype(np.int64)
                    ok = np.array_equal(got, want)
                    why = f"{int((got != want).sum())} differ"
                except Exception as e:
                    ok, why = False, f"{type(e).__name__}: {str(e)[:200]}"
                bad += not ok
                if not ok:
                    log(f"WRONG ragged {desc(g)} {m}x{n}x{k} launch {rep}: {why}")
    log(f"ragged split-K checks: {len(scheds) * len(RAGGED) * 2 - bad} of {len(scheds) * len(RAGGED) * 2} exact")
    return bad


def run_m(torch, m, budget_end, log, results):
    inp = Inputs(torch, m, seed=m)
    f = floors(m, N, K)
    log(f"M={m}: floors bytes {f['t_bytes_us']:.2f} us ({f['bytes'] / 1e6:.1f} MB at 4.0 TB/s), "
        f"mma.sync s4 {f['t_mma_us']:.2f} us; {inp.count} input sets")
    rows = []

    # cuBLAS int8 (same values, int8 bytes)
    def cub(i):
        torch._int_mm(inp.a8[i], inp.b8[i].t())
    us, host, _ = time_launches(torch, cub, inp.count)
    rows.append(dict(m=m, impl="cuBLAS int8 (torch._int_mm)", us=us, host_us=host))
    log(f"  cuBLAS int8: {us:.2f} us ({2 * m * N * K / us / 1e6:.0f} TOPS)")

    cands = candidates(m)
    for idx, g in enumerate(cands):
        if time.time() > budget_end:
            log(f"  budget reached: {len(cands) - idx} candidates of M={m} skipped")
            break
        row = dict(m=m, impl="ptxforge Int4Gemm" + (" (for_shape today)" if idx == 0 else ""), config=desc(g),
                   params=dict(block_m=g.block_m, block_n=g.block_n, block_k=g.block_k, warps_m=g.warps_m,
                               warps_n=g.warps_n, stages=g.stages, raster_group=g.raster_group, splits=g.splits,
                               splitk_sync=g.splitk_sync, l2_prefetch=g.l2_prefetch))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                plan = g.plan(m, N, K)
            for rep in range(2):
                inp.c.fill_(POISON)
                plan(inp.a4[0], inp.b4[0], inp.c)
                torch.cuda.synchronize()
                if not torch.equal(inp.c, inp.want):
                    raise AssertionError(f"launch {rep}: {int((inp.c != inp.want).sum())} of {m * N} differ")
            a_ptr = [x.data_ptr() for x in inp.a4]
            b_ptr = [x.data_ptr() for x in inp.b4]
            c_ptr = inp.c.data_ptr()
            lp = plan.launch_pointers
            us, host, _ = time_launches(torch, lambda i: lp(a_ptr[i], b_ptr[i], c_ptr), inp.count)
            row.update(us=us, host_us=host, ok=True)
            log(f"  {desc(g):32s} {us:7.2f} us {2 * m * N * K / us / 1e6:6.0f} TOPS (host {host:.1f} us/launch)")
        except Exception as e:  # a broken candidate is reported, never timed
            row.update(ok=False, error=f"{type(e).__name__}: {e}"[:300])
            log(f"  {desc(g):32s} FAILED {row['error']}")
        rows.append(row)

    if m >= 128:
        try:
            from ptxforge.schedules.hopper.plan import Plan
            from ptxforge.schedules.hopper.tuning import choose_hopper
            cfg = choose_hopper(m, N, K, "s4")
            plans = [Plan(cfg, inp.a4[i], inp.b4[i], inp.c) for i in range(inp.count)]
            inp.c.fill_(POISON)
            plans[0].launch()
            torch.cuda.synchronize()
            ok = torch.equal(inp.c, inp.want)
            us, host, _ = time_launches(torch, lambda i: plans[i].launch(), inp.count)
            rows.append(dict(m=m, impl="ptxforge HopperGemm (TMA+wgmma, split-K + reduce kernel)", us=us,
                             host_us=host, ok=ok, splits=plans[0].splits))
            log(f"  HopperGemm: {us:.2f} us ok={ok} splits={plans[0].splits}")
        except Exception as e:
            log(f"  HopperGemm skipped: {type(e).__name__}: {str(e)[:200]}")

    # the alternative reduction: a second kernel over a [splits, M, N] workspace
    try:
        from ptxforge.runtime import DeviceBuffer, load
        from ptxforge.schedules.hopper.splitk import REDUCE_THREADS, reduce_module
        red = load(reduce_module("s32"))["splitk_reduce_s32"]
        for sp in (4, 8):
            ws = DeviceBuffer.empty((sp, m, N), np.int32)
            ws.fill_bytes(1)
            bl = red.bind((-(-(m * N) // REDUCE_THREADS), 1, 1), (REDUCE_THREADS, 1, 1), ws, inp.c, m * N, sp)
            us, host, _ = time_launches(torch, lambda i: bl.launch(), 1)
            rows.append(dict(m=m, impl=f"separate reduction kernel alone, splits={sp}", us=us, host_us=host))
            log(f"  separate reduction kernel (splits {sp}): {us:.2f} us per launch")
    except Exception as e:
        log(f"  reduction-kernel timing skipped: {type(e).__name__}: {str(e)[:200]}")
    results.extend(rows)
    torch.cuda.empty_cache()


def table(results):
    out = ["", "| M | implementation | config | us | TOPS | x cuBLAS int8 |", "|---|---|---|---|---|---|"]
    for m in sorted({r["m"] for r in results}):
        rs = [r for r in results if r["m"] == m and r.get("us")]
        cub = next((r for r in rs if r["impl"].startswith("cuBLAS")), None)
        ours = [r for r in rs if r["impl"].startswith("ptxforge Int4Gemm") and r.get("ok")]
        pick = []
        if ours:
            pick.append(min(ours, key=lambda r: r["us"]))
            today = next((r for r in ours if "today" in r["impl"]), None)
            if today is not None and today is not pick[0]:
                pick.append(today)
        pick += [r for r in rs if "HopperGemm" in r["impl"]]
        if cub:
            pick.append(cub)
        for r in pick:
            tops = 2 * m * N * K / r["us"] / 1e6
            ratio = cub["us"] / r["us"] if cub else float("nan")
            name = ("best " if r is (pick[0] if ours else None) else "") + r["impl"]
            out.append(f"| {m} | {name} | {r.get('config', '')} | {r['us']:.2f} | {tops:.0f} | {ratio:.2f} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", type=int, nargs="+", default=[32, 128, 256, 1024])
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.time()
    out_dir = os.environ.get("OUT", ".")
    logf = open(os.path.join(out_dir, "skinny.log"), "w")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    if args.dry_run:
        for m in args.ms:
            f = floors(m, N, K)
            cs = candidates(m)
            for g in cs:
                _ = g.module
            log(f"M={m}: {len(cs)} candidates emitted; floors bytes {f['t_bytes_us']:.2f} us, mma {f['t_mma_us']:.2f} us")
        log(f"dry run {time.time() - t0:.1f} s")
        return 0
    import torch
    log(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    results = []
    bad = check_ragged(torch, log)
    # the budget is shared: M=32 first, then the larger shapes get what is left
    shares = {32: 0.5, 128: 0.3, 256: 0.12, 1024: 0.08}
    for m in args.ms:
        left = args.budget_s - (time.time() - t0)
        end = time.time() + max(5.0, left * shares.get(m, 0.1) / sum(shares.get(x, 0.1) for x in args.ms
                                                                      if x >= m))
        try:
            run_m(torch, m, end, log, results)
        except Exception as e:
            log(f"M={m} FAILED: {type(e).__name__}: {str(e)[:300]}")
        with open(os.path.join(out_dir, "skinny.json"), "w") as fh:
            json.dump(dict(results=results, ragged_failures=bad, floors={m: floors(m, N, K) for m in args.ms}),
                      fh, indent=1)
    log(table(results))
    log(f"ragged failures: {bad}; wrong candidates: {sum(1 for r in results if r.get('ok') is False)}; "
        f"total {time.time() - t0:.1f} s")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
