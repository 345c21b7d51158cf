"""Emission and assembly speed of ptxforge.

Builds a ~10,000-instruction kernel (an unrolled int8 tile loop: cp.async staging, ldmatrix,
mma.sync, address arithmetic, predicates and branches), then reports

* instructions emitted per second (builder calls + validation), and render time (str(module));
* the emission of each Hopper GEMM schedule `for_shape` can pick (its PTX module built and rendered,
  as `HopperGemm.module` does the first time), against the 30 ms bar;
* assembly time per kernel with nvJitLink and with ptxas, for that kernel and a small one.

Run: python bench/emit_bench.py [--instructions N] [--repeat R] [--no-assemble]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # run from a checkout

import ptxforge as pf
from ptxforge import s32, u32
from ptxforge.assembler import available_backends
from ptxforge.testing.kernels import saxpy


def tile_loop_kernel(n_instructions: int, target: str = "sm_80") -> pf.Module:
    """An unrolled k-loop of an int8 warp tile: about 40 instructions per step."""
    k = pf.KernelBuilder("bench_tile", target=target, maxntid=128)
    a = k.param_ptr("a", pf.s8)
    b = k.param_ptr("b", pf.s8)
    d = k.param_ptr("d", s32)
    n = k.param_value("n", u32)
    lane = k.laneid()
    sa = k.shared_base(k.shared("sA", 4096, 128))
    sb = k.shared_base(k.shared("sB", 2048, 128))
    row = k.and_(lane, 15)
    col = k.shr(lane, 4)
    a_off = k.mad(row, 32, k.shl(col, 4))
    b_off = k.mad(k.and_(lane, 7), 32, k.shl(k.and_(k.shr(lane, 3), 1), 4))
    acc = [k.regs(s32, 4, name=f"acc{j}_") for j in range(4)]
    for v in acc:
        for r in v:
            k.mov(0, dst=r)
    step = 0
    while len(k._body) - step < n_instructions:  # one section comment per step
        with k.section(f"k-step {step}"):
            stage = (step % 2) * 1024
            goff = k.mul(k.add(lane, step * 32), 16, mode="wide")
            ok = k.setp("lt", k.add(lane, step), n)
            k.cp_async(k.add(sa, k.add(k.shl(lane, 4), stage)), k.add(a, goff), 16, pred=ok)
            k.cp_async(k.add(sb, k.add(k.shl(lane, 4), stage // 2)), k.add(b, goff), 16, pred=ok)
            k.cp_async_commit()
            k.cp_async_wait(1)
            k.bar_sync(0)
            fa = k.ldmatrix(k.add(sa, k.add(a_off, stage)), num=4)
            fb = k.ldmatrix(k.add(sb, k.add(b_off, stage // 2)), num=2)
            for j, v in enumerate(acc):
                k.mma(fa, fb, v, shape="m16n8k32", a_type="s8", dst=v)
            x = k.lop3(fa[0], fb[0], fa[1], lambda p, q, r: (p ^ q) & r)
            y = k.prmt(x, fa[2], 0x5410)
            k.add(acc[0][0], k.popc(y), dst=acc[0][0])
            k.bar_sync(0)
        step += 1
    out = k.add(d, k.mul(lane, 64, mode="wide"))
    for j, v in enumerate(acc):
        k.st(out, list(v), offset=16 * j)
    return k.module()


#: the bar for emitting one Hopper GEMM schedule (build, validate, render)
HOPPER_EMIT_BAR_MS = 30.0


def hopper_schedules() -> list:
    """(name, HopperGemm) of every configuration `for_shape` picks on sm_90a."""
    from ptxforge.schedules.hopper import HopperGemm
    from ptxforge.schedules.hopper.defaults import DEFAULTS, SKINNY
    out = [(f"{op} default", HopperGemm(op, **kw)) for op, kw in DEFAULTS.items()]
    out += [(f"{op} M <= {most}", HopperGemm(op, **kw)) for op, sizes in SKINNY.items() for most, kw in sizes]
    return out


def hopper_emission_rows(repeat: int) -> list:
    """Rows of emission times of each Hopper schedule: a fresh module per repeat (the per-configuration
    cache bypassed), built and rendered."""
    from ptxforge.schedules.hopper.emit import fresh_module
    rows = []
    for name, cfg in hopper_schedules():
        best, med, m = _best(lambda: fresh_module(cfg).render(), repeat)
        rows.append((f"emit {name} ({m.text.count(chr(10))} lines)", f"{best * 1e3:.1f} ms",
                     f"median {med * 1e3:.1f} ms, bar {HOPPER_EMIT_BAR_MS:.0f} ms: "
                     + ("PASS" if med * 1e3 <= HOPPER_EMIT_BAR_MS else "FAIL")))
    return rows


def _best(fn, repeat):
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-assemble", action="store_true")
    args = ap.parse_args(argv)

    build_best, build_med, module = _best(lambda: tile_loop_kernel(args.instructions), args.repeat)
    n = module.instruction_count()

    def render():
        module._cache.clear()  # time a fresh rendering, not the cached text
        return str(module)

    render_best, render_med, text = _best(render, args.repeat)
    listing_best, _, _ = _best(lambda: module.listing(), args.repeat)

    rows = [
        ("instructions in kernel", f"{n}", ""),
        ("PTX lines / bytes", f"{text.count(chr(10))} / {len(text)}", ""),
        ("build + validate", f"{build_best * 1e3:.1f} ms", f"median {build_med * 1e3:.1f} ms"),
        ("render str(module)", f"{render_best * 1e3:.1f} ms", f"median {render_med * 1e3:.1f} ms"),
        ("listing()", f"{listing_best * 1e3:.1f} ms", "with Python source lines"),
        ("emitted per second", f"{n / (build_best + render_best):,.0f} instr/s", "build + validate + render"),
    ]
    rows += hopper_emission_rows(max(args.repeat, 9))
    if not args.no_assemble:
        small = saxpy()
        runs = itertools.count()

        def fresh(m):
            # a different text each time: some nvJitLink builds cache by content and would time a lookup
            return str(m) + f"// assembly run {next(runs)}\n"

        for be in available_backends():
            t_small, _, r = _best(lambda: pf.assemble(fresh(small), backend=be), args.repeat)
            rows.append((f"assemble saxpy ({be})", f"{t_small * 1e3:.1f} ms",
                         f"{r.resources().registers} registers"))
            t_big, _, r = _best(lambda: pf.assemble(fresh(module), backend=be), max(1, args.repeat // 2))
            rows.append((f"assemble {n}-instr kernel ({be})", f"{t_big * 1e3:.0f} ms",
                         f"{r.resources().registers} registers, {r.resources().spills} B spilled"))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'measure':<{w0}}  {'best':>{w1}}  note")
    print(f"{'-' * w0}  {'-' * w1}  {'-' * 28}")
    for name, value, note in rows:
        print(f"{name:<{w0}}  {value:>{w1}}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
