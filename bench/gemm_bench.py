"""Integer GEMM throughput: ptxforge's int4 and int8 schedules beside cuBLAS int8 (torch._int_mm).

For each shape it first prints the floors: the time the operations need at the int8 dense peak
(1979 TOPS) and at the mma.sync s8 ceiling (~1300 TOPS), and the time the bytes need at ~4.0 TB/s
(operands once, C once).  The gap between a measured time and the larger floor is what tuning
can still win.

Then, side by side in one run, TOPS = 2*M*N*K / time for
  * the default int4 path (Int4Gemm.for_shape: unpacked to s8 on sm_90),
  * the native s4 path (mma.sync m16n8k64.s4; emulated by ptxas on sm_90; skipped at 8192^3),
  * the Int8Gemm schedule (same machinery, 8-bit operands),
  * torch._int_mm (cuBLAS int8, NT: torch._int_mm(a, b.t()) with a [M, K], b [N, K]),
each the median of many CUDA-event-timed launches after warm-up, on random data, cycling through
several input sets so that operands are not served from the 60 MB L2.  Every implementation is
first checked for exact equality against torch._int_mm (or numpy without torch).

    python bench/gemm_bench.py                    # the table; writes bench/results/gemm_h200.{md,json}
    python bench/gemm_bench.py --sweep            # also try several configs per shape, print the best
    python bench/gemm_bench.py --shapes 8192,8192,8192 32,8192,8192 --sweep-full

Without a GPU it prints the floors and the emission time only.
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
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm  # noqa: E402
from ptxforge.runtime import gpu_skip_reason  # noqa: E402

PEAK_INT8 = 1979e12  # dense int8 tensor peak (H100/H200 SXM datasheet)
MMA_SYNC_S8 = 1300e12  # measured mma.sync m16n8k32.s8 issue ceiling on the H200
BANDWIDTH = 4.0e12  # bytes/s, device-to-device copy, read + write
L2_BYTES = 60 << 20
SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (32, 8192, 8192), (128, 8192, 8192)]
EMIT_BAR_MS = 20.0


def floors(m, n, k):
    ops = 2.0 * m * n * k
    b4 = (m + n) * k / 2 + 4.0 * m * n
    b8 = (m + n) * k + 4.0 * m * n
    return {"ops": ops, "bytes_int4": b4, "bytes_int8": b8, "t_peak_us": ops / PEAK_INT8 * 1e6,
            "t_mma_sync_us": ops / MMA_SYNC_S8 * 1e6, "t_bytes_int4_us": b4 / BANDWIDTH * 1e6,
            "t_bytes_int8_us": b8 / BANDWIDTH * 1e6}


def emission_ms(repeat=20):
    g = Int4Gemm()
    str(g.emit())  # imports and first-use caches
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        str(g.emit())
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples), min(samples)


def shape_name(s):
    m, n, k = s
    return f"{m}^3" if m == n == k else f"{m}x{n}x{k}"


# ---------------------------------------------------------------- GPU side

class Inputs:
    """Several random input sets of one shape: int8 values in [-8, 7] on the GPU (for cuBLAS and
    Int8Gemm), and the same values packed two per byte (for the int4 kernels)."""

    def __init__(self, m, n, k, torch, seed=0):
        from ptxforge.runtime import DeviceBuffer
        per_set = (m + n) * k * 3 // 2
        self.count = int(min(8, max(2, -(-3 * L2_BYTES // per_set))))
        rng = np.random.default_rng(seed)
        self.sets = []
        for _ in range(self.count):
            a = rng.integers(-8, 8, (m, k), dtype=np.int8)
            b = rng.integers(-8, 8, (n, k), dtype=np.int8)
            entry = {"a4": DeviceBuffer.from_host(pack_int4(a)), "b4": DeviceBuffer.from_host(pack_int4(b))}
            if torch is not None:
                entry["a8"] = torch.from_numpy(a).cuda()
                entry["b8"] = torch.from_numpy(b).cuda()
            else:
                entry["a8"], entry["b8"] = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
            if not self.sets:
                entry["host"] = (a, b)
            self.sets.append(entry)
        self.c = DeviceBuffer.empty((m, n), np.int32)


def reference_c(inp, torch):
    e = inp.sets[0]
    if torch is not None:
        return torch._int_mm(e["a8"], e["b8"].t()).cpu().numpy()
    a, b = e["host"]
    return (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int32)


def time_callable(fn, budget_s=0.6, least=20, most=400):
    from ptxforge.runtime import benchmark
    est = benchmark(fn, warmup=3, repeat=3).median_us
    repeat = int(min(most, max(least, budget_s * 1e6 / max(est, 1.0))))
    return benchmark(fn, warmup=10, repeat=repeat)


def ours(g, inp, operands, want):
    """Check then time a schedule cycling through the input sets; returns (timing, schedule used)."""
    from ptxforge.runtime import DeviceBuffer
    from ptxforge.schedules.gemm.run import bind_gemm
    e = inp.sets[0]
    a, b = e[operands[0]], e[operands[1]]
    m, n = want.shape
    poison = DeviceBuffer.from_host(np.full((m, n), -0x5A5A5A5A, np.int32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g.run(a, b, poison)
        got = poison.to_host()
    if not np.array_equal(got, want):
        raise AssertionError(f"{g.kernel_name}: {int((got != want).sum())} of {got.size} elements differ")
    launches = [bind_gemm(g, s[operands[0]], s[operands[1]], inp.c) for s in inp.sets]
    it = itertools.cycle(launches)
    try:
        return time_callable(lambda: next(it).launch())
    finally:
        for bl in launches:
            bl.close()


def cublas(inp, torch, want):
    e = inp.sets[0]
    got = torch._int_mm(e["a8"], e["b8"].t()).cpu().numpy()
    assert np.array_equal(got, want)
    pairs = itertools.cycle([(s["a8"], s["b8"].t()) for s in inp.sets])

    def call():
        a, bt = next(pairs)
        torch._int_mm(a, bt)
    torch.cuda.synchronize()
    return time_callable(call)


def tops(shape, timing):
    m, n, k = shape
    return 2.0 * m * n * k / (timing.median_us * 1e-6) / 1e12


def run_shape(shape, arch, torch, args):
    m, n, k = shape
    print(f"\n== {shape_name(shape)} ==", flush=True)
    inp = Inputs(m, n, k, torch)
    want = reference_c(inp, torch)
    row = {"shape": list(shape), "floors": floors(m, n, k), "input_sets": inp.count}
    impls = [
        ("int4_default", lambda: Int4Gemm.for_shape(m, n, k, arch), ("a4", "b4")),
        ("int4_native_s4", lambda: Int4Gemm.for_shape(m, n, k, arch, path="native_s4"), ("a4", "b4")),
        ("int8_schedule", lambda: Int8Gemm.for_shape(m, n, k, arch), ("a8", "b8")),
    ]
    for name, make, operands in impls:
        if name == "int4_native_s4" and m * n * k > 4096 ** 3 and not args.native_everywhere:
            row[name] = {"skipped": "emulated on this GPU: too slow at this size"}
            print(f"  {name:16s} skipped (too slow here)")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = make()
            t = ours(g, inp, operands, want)
            row[name] = {"tops": tops(shape, t), "median_us": t.median_us, "iqr_us": t.iqr_us,
                         "config": g.describe(), "kernel": g.kernel_name, "launches": t.repeat}
            print(f"  {name:16s} {row[name]['tops']:8.1f} TOPS  {t.median_us:10.1f} us   {g.kernel_name}", flush=True)
        except Exception as e:  # keep the other columns
            row[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"  {name:16s} ERROR {type(e).__name__}: {e}", flush=True)
    if torch is not None:
        try:
            t = cublas(inp, torch, want)
            row["torch_int_mm"] = {"tops": tops(shape, t), "median_us": t.median_us, "iqr_us": t.iqr_us,
                                   "launches": t.repeat}
            print(f"  {'torch._int_mm':16s} {row['torch_int_mm']['tops']:8.1f} TOPS  {t.median_us:10.1f} us",
                  flush=True)
        except Exception as e:
            row["torch_int_mm"] = {"error": f"{type(e).__name__}: {e}"}
            print(f"  torch._int_mm ERROR {e}")
    if args.sweep or args.sweep_full:
        row["sweep"] = sweep(shape, arch, inp, want, full=args.sweep_full)
    return row


def sweep(shape, arch, inp, want, full=False):
    from ptxforge.isa.targets import Target
    from ptxforge.schedules.gemm.tuning import sweep_space
    m, n, k = shape
    results = []
    space = sweep_space(m, n, k, Target.parse(arch), "s4", quick=not full)
    print(f"  sweep: {len(space)} configurations", flush=True)
    for params in space:
        try:
            g = Int4Gemm(target=arch, **params).for_problem(k, n)
            t = ours(g, inp, ("a4", "b4"), want)
            results.append({"params": params, "tops": tops(shape, t), "median_us": t.median_us,
                            "kernel": g.kernel_name})
            print(f"    {tops(shape, t):8.1f} TOPS  {g.kernel_name}", flush=True)
        except Exception as e:
            results.append({"params": params, "error": f"{type(e).__name__}: {e}"})
            print(f"    ERROR {params}: {e}", flush=True)
    ok = sorted([r for r in results if "tops" in r], key=lambda r: -r["tops"])
    if ok:
        best = ok[0]
        params = ", ".join(f"{k}={v!r}" for k, v in best["params"].items())
        print(f"  best: {best['tops']:.1f} TOPS with Int4Gemm({params})")
    return results


# ---------------------------------------------------------------- report

def fmt_t(us):
    return f"{us:.1f} us" if us < 1000 else f"{us / 1000:.2f} ms"


def cell(r):
    if r is None:
        return "-"
    if "tops" in r:
        return f"{r['tops']:.0f} ({fmt_t(r['median_us'])})"
    return "skipped" if "skipped" in r else "error"


def markdown(rows, meta):
    out = [f"# Integer GEMM on {meta['device']}", "",
           f"Command: `{meta['command']}`  ", f"Date: {meta['date']}  ",
           f"Emission of the reference kernel (128x128x64, 3 stages, schedule -> PTX text): "
           f"median {meta['emit_ms']:.1f} ms (bar {EMIT_BAR_MS:.0f} ms)", "",
           "## Floors", "",
           "| shape | ops at 1979 TOPS | ops at 1300 TOPS (mma.sync) | int4 bytes at 4 TB/s | int8 bytes at 4 TB/s |",
           "|---|---|---|---|---|"]
    for r in rows:
        f = r["floors"]
        out.append(f"| {shape_name(r['shape'])} | {fmt_t(f['t_peak_us'])} | {fmt_t(f['t_mma_sync_us'])} | "
                   f"{fmt_t(f['t_bytes_int4_us'])} | {fmt_t(f['t_bytes_int8_us'])} |")
    out += ["", "## TOPS (2*M*N*K / median time)", "",
            "| shape | int4 default | int4 native s4 | Int8Gemm | torch._int_mm (cuBLAS) | int4 / cuBLAS |",
            "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "-"
        a, b = r.get("int4_default"), r.get("torch_int_mm")
        if a and b and "tops" in a and "tops" in b:
            ratio = f"{a['tops'] / b['tops']:.2f}x"
        out.append(f"| {shape_name(r['shape'])} | {cell(r.get('int4_default'))} | {cell(r.get('int4_native_s4'))} | "
                   f"{cell(r.get('int8_schedule'))} | {cell(r.get('torch_int_mm'))} | {ratio} |")
    out += ["", "## Bars", ""] + [f"- {line}" for line in bars(rows, meta)]
    out += ["", "## Configurations", ""]
    for r in rows:
        for key in ("int4_default", "int4_native_s4", "int8_schedule"):
            x = r.get(key) or {}
            if "config" in x:
                out.append(f"- {shape_name(r['shape'])} {key}: {x['config']}")
    return "\n".join(out) + "\n"


def bars(rows, meta):
    by = {tuple(r["shape"]): r for r in rows}
    lines = []

    def ratio(shape):
        r = by.get(shape)
        if not r:
            return None
        a, b = r.get("int4_default") or {}, r.get("torch_int_mm") or {}
        return a["tops"] / b["tops"] if "tops" in a and "tops" in b else None
    x = ratio((8192, 8192, 8192))
    if x is not None:
        lines.append(f"int4 default at 8192^3 = {x:.2f}x torch._int_mm (bar >= 0.6x, aim 1.0x): "
                     f"{'PASS' if x >= 0.6 else 'FAIL'}")
    x = ratio((32, 8192, 8192))
    if x is not None:
        lines.append(f"int4 default at M=32, N=K=8192 = {x:.2f}x torch._int_mm (bar >= 1.3x): "
                     f"{'PASS' if x >= 1.3 else 'FAIL'}")
    r = by.get((4096, 4096, 4096), {}).get("int4_native_s4") or {}
    if "tops" in r:
        lines.append(f"native s4 at 4096^3 = {r['tops']:.1f} TOPS (bar >= 35): {'PASS' if r['tops'] >= 35 else 'FAIL'}")
    lines.append(f"emission of the reference kernel = {meta['emit_ms']:.1f} ms (bar <= {EMIT_BAR_MS:.0f} ms): "
                 f"{'PASS' if meta['emit_ms'] <= EMIT_BAR_MS else 'FAIL'}")
    return lines


def parse_shape(text):
    parts = [int(x) for x in text.replace("x", ",").split(",")]
    if len(parts) == 1:
        parts *= 3
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"shape {text!r}: write M,N,K (or one number for a cube)")
    return tuple(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=parse_shape, nargs="+", default=SHAPES)
    ap.add_argument("--sweep", action="store_true", help="also try a few configurations per shape")
    ap.add_argument("--sweep-full", action="store_true", help="try the whole candidate space (slow)")
    ap.add_argument("--native-everywhere", action="store_true", help="time the native s4 path at every size")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "gemm_h200"),
                    help="results path without extension (.md and .json are written)")
    args = ap.parse_args(argv)

    print("floors (the time the work needs at the ceilings):")
    print(f"  {'shape':>16s} {'ops@1979':>11s} {'ops@1300':>11s} {'int4 bytes':>11s} {'int8 bytes':>11s}")
    for s in args.shapes:
        f = floors(*s)
        print(f"  {shape_name(s):>16s} {fmt_t(f['t_peak_us']):>11s} {fmt_t(f['t_mma_sync_us']):>11s} "
              f"{fmt_t(f['t_bytes_int4_us']):>11s} {fmt_t(f['t_bytes_int8_us']):>11s}")
    med, best = emission_ms()
    print(f"emission of the reference kernel: median {med:.1f} ms, best {best:.1f} ms (bar {EMIT_BAR_MS:.0f} ms)")

    reason = gpu_skip_reason()
    if reason is not None:
        print(f"\nno GPU here ({reason}): floors and emission only")
        return 0
    from ptxforge.runtime import device_info
    info = device_info()
    arch = info.arch
    try:
        import torch
        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    print(f"\ndevice: {info}" + ("" if torch is not None else "  (no torch: cuBLAS column skipped)"))
    rows = [run_shape(s, arch, torch, args) for s in args.shapes]
    meta = {"device": info.name, "arch": arch, "command": "python bench/gemm_bench.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M"), "emit_ms": med, "emit_best_ms": best,
            "torch": getattr(torch, "__version__", None)}
    md = markdown(rows, meta)
    print("\n" + md)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write(md)
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)
    print(f"wrote {args.out}.md and {args.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
