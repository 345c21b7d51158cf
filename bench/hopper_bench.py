"""Hopper building blocks on the GPU, side by side in one run: TMA tile copy against the device-to-device
copy, and the wgmma issue rate of builder-made kernels (operands in shared memory and registers only).

    python bench/hopper_bench.py [--quick] [--json bench/results/hopper_h200.json]

Bars: TMA copy >= 0.92 x cuMemcpyDtoD bandwidth (bytes read + written); wgmma m64n256k32 s8 >= 1800
TOPS; wgmma m64n256k16 bf16 >= 900 TFLOPS.  Timing: CUDA events, median of repeated launches.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

import ptxforge as pf
from ptxforge import runtime as rt
from ptxforge.isa import types as T

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "examples"))

BARS = {"tma_copy": 0.92, "wgmma_s8": 1800.0, "wgmma_bf16": 900.0}


def wgmma_rate_kernel(dtype: str, warpgroups: int, unroll: int, iters: int) -> pf.Module:
    """Every warpgroup chains `iters` x `unroll` wgmma m64n256 on one accumulator, SS operands.

    Shared memory holds arbitrary non-zero bytes (written once); commit after each `unroll`
    wgmmas and wait_group 1, so one group is always queued behind the running one.
    """
    acc = "s32" if dtype == "s8" else "f32"
    k = pf.KernelBuilder(f"wgmma_rate_{dtype}", target="sm_90a", reqntid=128 * warpgroups)
    out = k.param_ptr("out", T.u32)
    n_iter = k.param_value("iters", T.u32)
    a_bytes, b_bytes = 64 * 32, 256 * 32  # one k-step of A (64 x 32 B) and B (256 x 32 B), no swizzle
    sA = k.shared("sA", a_bytes, align=1024)
    sB = k.shared("sB", b_bytes, align=1024)
    tid = k.tid()
    seed = k.mul(k.add(tid, 1), 0x9E3779B1, mode="lo")
    for j in range(0, b_bytes, 4 * 128 * warpgroups):
        o = k.add(k.shl(tid, 2), j)
        with k.if_(k.setp("lt", o, a_bytes)):
            k.st(k.add(k.shared_base(sA), o), seed, type=T.b32, space="shared")
        with k.if_(k.setp("lt", o, b_bytes)):
            k.st(k.add(k.shared_base(sB), o), k.xor(seed, j), type=T.b32, space="shared")
    k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)
    from ptxforge.isa.descriptors import encode_descriptor
    # K-major, no swizzle: 8-row core matrices of 128 B; K-adjacent cores 128 B apart (LBO), rows of cores 256 B
    tmpl = encode_descriptor(0, 128, 256, 0)
    da = k.add(k.cvt(k.shr(k.shared_base(sA), 4), "u64"), k.mov(tmpl, type=T.u64))
    db = k.add(k.cvt(k.shr(k.shared_base(sB), 4), "u64"), k.mov(tmpl, type=T.u64))
    d = k.regs(T.b32, 128, "acc")
    for r in d:
        k.mov(0, type=T.b32, dst=r)
    with k.for_range(0, n_iter, name="it"):
        k.wgmma_fence()
        for _ in range(unroll):
            k.wgmma(da, db, d, n=256, a_type=dtype, acc=acc, scale_d=1)
        k.wgmma_commit()
        k.wgmma_wait(1)
    k.wgmma_wait(0)
    x = d[0]
    for r in d[1:]:
        k.xor(x, r, dst=x)
    k.st(k.add(out, k.mul(tid, 4, mode="wide")), x, type=T.b32)
    return k.module()


def bench_wgmma(dtype, sm_count, quick):
    """The best wgmma rate over the warpgroup configurations (dict with rate_T in TOPS/TFLOPS)."""
    best = None
    configs = [(2, 8), (3, 8)] if not quick else [(2, 8)]
    for wgs, unroll in configs:
        iters = 50 if quick else 200
        m = wgmma_rate_kernel(dtype, wgs, unroll, iters)
        fn = rt.load(m)[f"wgmma_rate_{dtype}"]
        ctas = sm_count
        out = rt.DeviceBuffer.empty((ctas * 128 * wgs,), np.uint32)
        t = rt.benchmark(fn, ctas, 128 * wgs, out, iters, warmup=2, repeat=5 if quick else 10).median_us
        ops_per = 2 * 64 * 256 * (32 if dtype == "s8" else 16)
        rate = ctas * wgs * iters * unroll * ops_per / (t * 1e-6) / 1e12
        row = {"kernel": f"wgmma m64n256k{32 if dtype == 's8' else 16} {dtype} SS", "warpgroups_per_cta": wgs,
               "ctas": ctas, "unroll": unroll, "iters": iters, "us": t, "rate_T": rate, "registers": fn.registers}
        if best is None or rate > best["rate_T"]:
            best = row
    return best


def bench_copy(quick):
    """TMA tile copy vs cuMemcpyDtoD on a 512 MiB u16 array (bytes read + written)."""
    ex = __import__("hopper_tma_copy")
    rows, cols = (4096, 8192) if quick else (16384, 16384)
    nbytes = rows * cols * 2
    src = rt.DeviceBuffer.empty((rows, cols), np.uint16)
    src.copy_from_host(np.random.default_rng(0).integers(0, 1 << 16, (rows, cols), dtype=np.uint16))
    dst = rt.DeviceBuffer.empty((rows, cols), np.uint16)
    from cuda.bindings import driver as d

    def d2d():
        err, = d.cuMemcpyDtoDAsync(d.CUdeviceptr(dst.ptr), d.CUdeviceptr(src.ptr), nbytes, d.CUstream(0))
        if err:
            raise RuntimeError(f"cuMemcpyDtoDAsync failed: {err}")
    t_ref = rt.benchmark(d2d, warmup=3, repeat=10 if quick else 20).median_us
    sm = rt.device_info().sm_count
    results = []
    # (stages, CTAs per SM, box rows, stores in flight, L2 promotion bytes)
    sweep = [(4, 4, 64, 1, 128)] if quick else [
        (5, 3, 64, 1, 128), (6, 2, 128, 1, 128), (4, 1, 256, 1, 128),
        (6, 2, 64, 2, 256), (8, 2, 64, 3, 256), (6, 3, 64, 2, 256), (4, 4, 64, 2, 256),
        (6, 1, 128, 2, 256), (8, 1, 128, 3, 256), (4, 2, 128, 2, 256), (3, 2, 256, 2, 256)]
    for stages, per_sm, box_rows, lag, l2 in sweep:
        tx, nt = ex.tiles(rows, cols, box_rows)
        fn = rt.load(ex.build(stages, box_rows=box_rows, lag=lag))["tma_copy"]
        box = (ex.BOX[0], box_rows)
        sm_ = rt.TensorMap.from_array(src, box, swizzle=128, l2_promotion=l2)
        dm_ = rt.TensorMap.from_array(dst, box, swizzle=128, l2_promotion=l2)
        grid = min(nt, sm * per_sm)
        t = rt.benchmark(fn, grid, 32, sm_, dm_, tx, nt, shared=ex.copy_shared_bytes(stages, box_rows), warmup=3,
                         repeat=10 if quick else 20).median_us
        results.append({"stages": stages, "ctas_per_sm": per_sm, "box_rows": box_rows, "lag": lag, "l2_promotion": l2,
                        "grid": grid, "us": t})
    host_src, host_dst = src.to_host(), dst.to_host()
    ok = bool(np.array_equal(host_src, host_dst))
    best = min(results, key=lambda r: r["us"])
    gbps = lambda us: 2 * nbytes / (us * 1e-6) / 1e9  # noqa: E731
    return {"bytes": nbytes, "d2d_us": t_ref, "d2d_GBps": gbps(t_ref), "tma_us": best["us"], "tma_GBps": gbps(best["us"]),
            "ratio": t_ref / best["us"], "best": best, "sweep": results, "correct": ok}


def main(argv=None) -> int:
    """Run both benchmarks, print the table; 0 when every bar is met."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    reason = rt.gpu_skip_reason()
    if reason is not None:
        print(f"hopper_bench: no GPU ({reason}); assembling the kernels only")
        for dt in ("s8", "bf16"):
            pf.assemble(wgmma_rate_kernel(dt, 2, 8, 10))
        return 0
    info = rt.device_info()
    copy = bench_copy(args.quick)
    s8 = bench_wgmma("s8", info.sm_count, args.quick)
    bf = bench_wgmma("bf16", info.sm_count, args.quick)
    rows = [
        (f"TMA tile copy (128B swizzle, box 64x{copy['best']['box_rows']} u16)", f"{copy['tma_GBps']:.0f} GB/s",
         f"{copy['ratio']:.3f} x cuMemcpyDtoD ({copy['d2d_GBps']:.0f} GB/s)", f">= {BARS['tma_copy']}",
         copy["ratio"] >= BARS["tma_copy"] and copy["correct"]),
        (s8["kernel"], f"{s8['rate_T']:.0f} TOPS", f"{s8['warpgroups_per_cta']} WG/CTA, {s8['registers']} regs",
         f">= {BARS['wgmma_s8']:.0f}", s8["rate_T"] >= BARS["wgmma_s8"]),
        (bf["kernel"], f"{bf['rate_T']:.0f} TFLOPS", f"{bf['warpgroups_per_cta']} WG/CTA, {bf['registers']} regs",
         f">= {BARS['wgmma_bf16']:.0f}", bf["rate_T"] >= BARS["wgmma_bf16"]),
    ]
    print(f"{info}")
    print(f"| {'what':<44} | {'rate':>12} | {'detail':<40} | {'bar':>7} | ok |")
    print(f"|{'-' * 46}|{'-' * 14}|{'-' * 42}|{'-' * 9}|----|")
    for what, rate, detail, bar, ok in rows:
        print(f"| {what:<44} | {rate:>12} | {detail:<40} | {bar:>7} | {'yes' if ok else 'NO'} |")
    print(f"copy sweep: {copy['sweep']}; copy correct: {copy['correct']}")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.json).write_text(json.dumps({"device": str(info), "copy": copy, "wgmma_s8": s8,
                                                       "wgmma_bf16": bf}, indent=2))
    return 0 if all(r[-1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
