"""How fast the CPU interpreter runs kernels: instructions per second, per warp and per thread.

    python bench/interp_bench.py            # all kernels, shared-memory race tracking on and off
    python bench/interp_bench.py --quick    # fewer, smaller runs

A warp-instruction is one instruction issued for one warp (what a GPU counts); a thread-instruction
is one instruction for one thread.  Each row is the median of several runs after a warm-up (the
warm-up also compiles the kernel's executors once).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the sample GEMM (tests/support)

import ptxforge as pf  # noqa: E402
from ptxforge import b32, u8, u32, u64  # noqa: E402
from ptxforge import interp  # noqa: E402
from ptxforge.int4 import pack_int4  # noqa: E402
from ptxforge.testing.kernels import saxpy  # noqa: E402
from support.samples import Int4GemmSample  # noqa: E402


def pipeline_copy():
    """3-stage cp.async ring: each CTA streams `chunks` x 2 KB through shared memory, summing u32 lanes."""
    k = pf.KernelBuilder("cp_async_ring", target="sm_80", reqntid=128)
    src, dst = k.param_ptr("src", u8), k.param_ptr("dst", u8)
    chunks = k.param_value("chunks", u32)
    ring = k.shared("ring", 3 * 2048, align=128)
    t = k.tid()
    cta_off = k.mul(k.mul(k.ctaid(), chunks, type=u32), 2048, mode="wide")
    slot = k.add(k.shared_base(ring), k.shl(t, 4))
    s0 = k.add(k.add(src, cta_off), k.cvt(k.shl(t, 4), u64))
    for stage in range(2):
        k.cp_async(pf.Addr(slot, 2048 * stage), pf.Addr(s0, 2048 * stage), 16, pred=k.setp("gt", chunks, stage))
        k.cp_async_commit()
    acc = [k.mov(0, type=u32) for _ in range(4)]
    with k.for_range(0, chunks) as i:
        nxt = k.add(i, 2)
        k.cp_async(k.add(slot, k.mul(k.rem(nxt, 3), 2048)), k.add(s0, k.mul(nxt, 2048, mode="wide")), 16,
                   pred=k.setp("lt", nxt, chunks))
        k.cp_async_commit()
        k.cp_async_wait(2)
        k.bar_sync(0)
        v = k.ld(k.add(slot, k.mul(k.rem(i, 3), 2048)), type=u32, space="shared", vec=4)
        for j in range(4):
            k.add(acc[j], v[j], dst=acc[j])
        k.bar_sync(0)
    k.cp_async_wait_all()
    k.st(k.add(dst, k.mul(k.mad(k.ctaid(), 128, t), 16, mode="wide")), acc, type=u32)
    return k.module()


def alu_loop():
    """Integer hashing loop with per-thread trip counts (divergent, no memory in the loop)."""
    k = pf.KernelBuilder("alu_loop", target="sm_80", maxntid=256)
    out = k.param_ptr("out", u32)
    i = k.global_index()
    h = k.mov(i, type=u32)
    with k.for_range(0, k.add(k.and_(i, 63, type=b32), 64), uniform=False):
        k.xor(h, k.shl(h, 13, type=b32), dst=h)
        k.xor(h, k.shr(h, 17, type=b32), dst=h)
        k.lop3(h, k.shl(h, 5, type=b32), 0x9E3779B9, 0x96, dst=h)
        k.mad(h, 2654435761, 12345, dst=h, type=u32)
    k.st(k.add(out, k.mul(i, 4, mode="wide")), h, type=u32)
    return k.module()


def schedule_cases(rng, quick):
    """The project's Int4Gemm schedule (reference tiles 128x128x64, 3 stages, sm_90 default path)."""
    import warnings
    from ptxforge.schedules.gemm import Int4Gemm
    m = n = 128 if quick else 256
    k = 256 if quick else 1024
    s = Int4Gemm().for_problem(k, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = s.module
    a, b = pack_int4(rng.integers(-8, 8, (m, k))), pack_int4(rng.integers(-8, 8, (n, k)))
    yield (f"Int4Gemm ({s.path_name})", f"{m}x{n}x{k}", mod,
           dict(grid=s.grid(m, n), block=s.block, args=[a, b, np.zeros((m, n), np.int32), m, n, k],
                shared=s.shared_bytes))


def cases(quick):
    rng = np.random.default_rng(0)
    gemm_shapes = [(64, 64, 128)] if quick else [(64, 64, 128), (128, 128, 512), (256, 256, 512)]
    for path in ("s8", "s4"):
        cfg = Int4GemmSample(path=path)
        mod = cfg.module()
        for m, n, k in gemm_shapes if path == "s8" else gemm_shapes[:2]:
            a, b = pack_int4(rng.integers(-8, 8, (m, k))), pack_int4(rng.integers(-8, 8, (n, k)))
            c = np.zeros((m, n), np.int32)
            yield (f"int4 GEMM ({path} path)", f"{m}x{n}x{k}", mod,
                   dict(grid=cfg.grid(m, n), block=128, args=[a, b, c, m, n, k]))
    yield from schedule_cases(rng, quick)
    n = 1 << (16 if quick else 20)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    yield "saxpy", f"n={n}", saxpy(), dict(grid=n // 256, block=256, args=[x, y, n, 2.0])
    ctas, chunks = (4, 8) if quick else (16, 32)
    src = rng.integers(0, 256, ctas * chunks * 2048, dtype=np.uint8)
    dst = np.zeros(ctas * 128 * 16, np.uint8)
    yield ("cp.async 3-stage ring", f"{ctas} CTAs x {chunks} x 2 KB", pipeline_copy(),
           dict(grid=ctas, block=128, args=[src, dst, chunks]))
    nthreads = 4096 if quick else 16384
    yield "ALU loop (divergent)", f"{nthreads} threads", alu_loop(), dict(
        grid=nthreads // 256, block=256, args=[np.zeros(nthreads, np.uint32)])


def measure(mod, kw, races, repeat):
    interp.run(mod, races=races, **kw)  # warm-up: compiles the executors
    times, rep = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        rep = interp.run(mod, races=races, **kw)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rep


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}")
    head = (f"{'kernel':<26} {'shape':<22} {'races':<5} {'CTAs':>5} {'warp-instr':>11} {'thread-instr':>13} "
            f"{'seconds':>8} {'Mthr-inst/s':>11} {'kwarp-inst/s':>12}")
    print(head)
    print("-" * len(head))
    for name, shape, mod, kw in cases(args.quick):
        for races in (True, False):
            sec, rep = measure(mod, kw, races, args.repeat)
            print(f"{name:<26} {shape:<22} {'on' if races else 'off':<5} {rep.ctas:>5} {rep.warp_instructions:>11} "
                  f"{rep.thread_instructions:>13} {sec:>8.3f} {rep.thread_instructions / sec / 1e6:>11.2f} "
                  f"{rep.warp_instructions / sec / 1e3:>12.1f}")


if __name__ == "__main__":
    main()
