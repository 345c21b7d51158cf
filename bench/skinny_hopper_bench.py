"""Skinny int4 (M <= 256, N = K = 8192) on the H200 through the TMA + wgmma kernel, tuned side by side.

The kernel (`HopperGemm("s4", ...)`) widens A in registers, pipelined against the tensor cores
(groups of 4 k-steps in two register sets by turns, `wgmma.wait_group 1`), and B into shared s8 tiles, by
the consumers or by converter warps of the producer warpgroup.  This script sweeps orientation
(`swap_ab`), consumers, converter buffers, ring depth and widening for each M, beside the
mma.sync schedule (`Int4Gemm.for_shape(..., hopper=False)`) and cuBLAS int8 (torch._int_mm).
`--probe` first times kernels that only read the weights: through the same TMA boxes (what the
access pattern alone allows) and with plain 16-byte loads (what the memory allows without TMA).

Per candidate: exact against torch._int_mm on the unpacked values (C poisoned first), then
CUDA events around back-to-back launches of the prepared plan, cycling five weight sets
(160 MB of packed weights, beyond the 60 MB L2; values in [-8, 7], never all zero).  With
`--rounds R` every row of an M (cuBLAS included) is timed R times, the rows in turns, and the
median is reported: differences of 1-2 % then stand out of the drift between moments of a run.
Candidates are assembled by ptxas in parallel threads before the GPU work starts.

    python bench/skinny_hopper_bench.py --ms 32 128 --budget-s 240 [--json out.json] [--rounds 5]
    python bench/skinny_hopper_bench.py --dry-run     # no GPU: assemble every candidate, print resources
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import itertools
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from ptxforge.errors import ValidationError  # noqa: E402
from ptxforge.int4 import pack_int4  # noqa: E402
from ptxforge.schedules.hopper import HopperGemm  # noqa: E402
from ptxforge.schedules.hopper.defaults import (DEFAULTS, SKINNY_S4, SKINNY_S4_32, SKINNY_S4_64,  # noqa: E402
                                              SKINNY_S4_256)
from ptxforge.schedules.hopper.plan import assembled  # noqa: E402
from run_overhead_bench import events_us  # noqa: E402  (bench/ is this script's folder)

N = K = 8192
POISON = -0x5A5A5A5A
SETS = 5


def candidates(m: int) -> list:
    """HopperGemm configurations worth timing at M = m (N = K = 8192)."""
    out = []

    def add(**kw):
        try:
            g = HopperGemm("s4", **{"block_k_bytes": 256, **kw})
            g.check_problem(m, N, K)
        except ValidationError:
            return
        if g not in out:
            out.append(g)

    if m <= 32:
        # two consumer warpgroups on alternate stages, two widened B buffers each: the default before
        two = {**SKINNY_S4_32, "consumers": 2, "consumer_regs": 232, "convert_buffers": 2}
        add(**SKINNY_S4_32)  # what for_shape picks: three consumers on every third stage
        add(**two)
        add(**{**SKINNY_S4_32, "early_prefetch": 0})
        for ep in (1, 3, 4):  # how many k-stages asked of the L2 before the wait (the default: 2)
            add(**{**SKINNY_S4_32, "early_prefetch": ep})
        add(**{**SKINNY_S4_32, "a_group": 4})
        add(**{**SKINNY_S4_32, "stages": 3})
        add(**{**SKINNY_S4_32, "block_k_bytes": 256, "stages": 12, "a_group": 4})
        add(**{**SKINNY_S4_32, "consumer_regs": 160, "producer_regs": 24})
        add(**{**SKINNY_S4_32, "l2_promotion": 256})  # the weights' boxes promoted to the L2 in 256-byte lines
        add(**{**SKINNY_S4_32, "acc_sets": 2})  # two accumulator chains per consumer (odd and even k-steps)
        # four consumers: 640 threads start with 96 registers each, so 40 + 4 x 104 (112 hung: the setmaxnreg.inc
        # waited for registers nobody would release); rings of a multiple of 4
        four = {**SKINNY_S4_32, "consumers": 4, "consumer_regs": 104}
        add(**{**four, "block_k_bytes": 256, "stages": 12, "a_group": 4})
        add(**{**four, "stages": 4, "a_group": 4})
        add(**{**four, "stages": 4})
        add(**{**two, "early_prefetch": 0})  # the default two rounds before: nothing asked of the L2 before the wait
        for ep in (1, 3):
            add(**{**two, "early_prefetch": ep})
        add(**{**two, "interleave_k": False, "split_stage": True, "a_group": 4, "widen_ahead": True})
        add(**{**two, "acc_sets": 2})
        add(**{**two, "stages": 4})  # the ring before (64 KB of weights on their way)
        add(**{**two, "convert_buffers": 1})
        add(**{**two, "stages": 8, "convert_buffers": 1})  # one widened B buffer leaves room for 8
        add(**{**two, "l2_promotion": 256})
        add(**{**two, "a_group": 4})
        add(**{**two, "pdl": False, "early_prefetch": 0})
        add(**{**two, "l2_prefetch": 4})  # the weights asked of the L2 4 stages ahead of the ring's loads
        # 256-value stages (a shorter last stage) in deeper rings: one widened B buffer leaves room for 12
        add(**{**two, "block_k_bytes": 256, "stages": 12, "convert_buffers": 1, "a_group": 4})
        add(**{**two, "block_k_bytes": 256, "stages": 8, "a_group": 4})
    elif m <= 64:
        add(**SKINNY_S4_64)
        alternate = {**SKINNY_S4_64, "split_stage": False, "widen_ahead": False, "interleave_k": True,
                     "convert_buffers": 1}  # the consumers on alternate stages, one widened B buffer each
        add(**{**alternate, "early_prefetch": 0})  # the default before
        add(**alternate)
        add(**{**alternate, "block_k_bytes": 256, "stages": 6, "convert_buffers": 2})  # the default two rounds before
        add(**{**SKINNY_S4_64, "a_group": 2})
        add(**{**SKINNY_S4_64, "widen_ahead": False})
        # three consumers taking every third stage, as at M <= 32 (shorter stages: three widened B buffers fit)
        thirds = {**SKINNY_S4_64, "split_stage": False, "widen_ahead": False, "interleave_k": True, "consumers": 3,
                  "consumer_regs": 152, "convert_buffers": 1}
        add(**{**thirds, "block_k_bytes": 256, "stages": 6, "a_group": 4})
        add(**{**thirds, "block_k_bytes": 256, "stages": 9, "a_group": 4})
        add(**{**thirds, "block_k_bytes": 512, "stages": 3, "a_group": 8})
        add(**{**SKINNY_S4_64, "acc_sets": 2})  # two accumulator chains per consumer
        add(**{**SKINNY_S4_64, "early_prefetch": 3})
        add(**{**SKINNY_S4_64, "early_prefetch": 0})
        add(**{**SKINNY_S4_64, "pdl": False, "early_prefetch": 0})
    elif m <= 128:
        add(**SKINNY_S4)  # the next stage's B widened while this stage's wgmmas run (widen_ahead)
        add(**{**SKINNY_S4, "early_prefetch": 0})  # the default before
        add(**{**SKINNY_S4, "early_prefetch": 3})
        add(**{**SKINNY_S4, "a_group": 2})
        add(**{**SKINNY_S4, "a_group": 8})
        add(**{**SKINNY_S4, "widen_ahead": False, "a_group": 2})  # B widened between the stages (the default before)
        add(**{**SKINNY_S4, "l2_promotion": 128})
        add(**{**SKINNY_S4, "l2_prefetch": 2})
        add(**{**SKINNY_S4, "pdl": False, "early_prefetch": 0})
        add(**{**SKINNY_S4, "cluster_n": 2, "early_prefetch": 0})  # the activations multicast to two CTAs: half their L2 reads
        alternate_128 = {**SKINNY_S4_64, "split_stage": False, "widen_ahead": False, "interleave_k": True}
        between = {**SKINNY_S4, "widen_ahead": False, "a_group": 2}  # arrangements that widen B between the stages
        add(**{**between, "stages": 4, "convert_buffers": 1})  # one widened B buffer leaves room for a 4th stage
        add(**{**between, "convert_buffers": 3, "stages": 2})
        add(**{**between, "wg_m": 128, "interleave_k": True, "block_k_bytes": 256, "stages": 6, "convert_buffers": 1})
        add(**{**alternate_128, "block_n": 128, "block_k_bytes": 256, "stages": 6})  # swapped, alternate stages
    else:
        add(**SKINNY_S4_256)
        add(**{**SKINNY_S4_256, "early_prefetch": 0})  # the default before
        add(**{**SKINNY_S4_256, "rotate_k": True})
        add(**{**SKINNY_S4_256, "widen_ahead": False})  # B widened between the stages (the default before)
        add(**{**SKINNY_S4_256, "l2_promotion": 256})
        add(**{**SKINNY_S4_256, "pdl": False, "early_prefetch": 0})
        add(**DEFAULTS["s4"])  # the large-problem default (K split to fill the SMs)
    return out


def stream_probe(rows: int, row_bytes: int, stages: int, rotate: bool = False, rows_inner: bool = False,
                 blocked: bool = False):
    """A kernel that only streams: CTA c loads rows [c rows, (c + 1) rows) of the packed weights through
    the same TMA boxes as the GEMM's B tile (128 bytes x `rows`, 128-byte swizzle), `row_bytes` of
    each row per stage, a `stages`-deep mbarrier ring, one thread; no consumer.  Its time is what the
    access pattern alone allows.  rotate: CTA c starts at stage c mod nstages (and wraps), so CTAs
    streaming at the same moment read different columns.  rows_inner: one 3-D box (128 bytes,
    row_bytes / 128 atoms, rows) per stage over the weights viewed as [rows][K / 256 atoms][128 bytes],
    so each row's row_bytes are read in one contiguous run.  blocked: the weights as if stored in
    blocks of `rows` x 128 bytes (each box one contiguous run of rows x 128 bytes, a CTA's blocks
    one after another), the layout a pre-blocked weight buffer gives.  Launch: grid N / rows, 32 threads, shared stages x rows x row_bytes + 8 stages."""
    from ptxforge import fold as F
    from ptxforge.builder import KernelBuilder
    from ptxforge.isa import types as T
    from ptxforge.isa.operands import Addr
    k = KernelBuilder("stream_probe", target="sm_90a", reqntid=32)
    tmap = k.param_tensormap("w")
    nst = k.param_value("nstages", T.u32)  # stages of the row: K / 2 / row_bytes
    stage_bytes = rows * row_bytes
    smem = k.dynamic_shared("smem", align=1024)
    base = k.and_(k.add(k.shared_base(smem), 1023, type=T.u32), 0xFFFFFC00, type=T.b32)
    bars = k.add(base, stages * stage_bytes, type=T.u32)
    row = k.mul(k.ctaid(), rows, type=T.u32)
    with k.if_(k.setp("eq", k.tid(), 0, type=T.u32)):
        for st in range(stages):
            k.mbarrier_init(Addr(bars, 8 * st), 1)
        k.fence("fence.mbarrier_init.release.cluster")

        def issue(i, st):
            """Stage i of the row into ring slot st (ints in the prologue, registers in the loop)."""
            bar = Addr(F.mad(k, st, 8, bars))
            k.mbarrier_arrive(bar, expect_tx=stage_bytes)
            dst = F.mad(k, st, stage_bytes, base)
            if rotate:
                i = k.rem(F.add(k, i, k.ctaid()), nst, type=T.u32)
            x0 = F.mul(k, i, row_bytes)
            if rows_inner:
                k.tensor_load(Addr(dst, 0), tmap, (0, F.div(k, x0, 128), row), bar)
                return
            for b in range(row_bytes // 128):
                if blocked:  # box b of this stage: line (row block x 32 atoms + atom) x rows
                    line = k.mul(F.add(k, k.mad(k.ctaid(), K // 256, F.div(k, x0, 128), type=T.u32), b), rows,
                                 type=T.u32)
                    k.tensor_load(Addr(dst, b * rows * 128), tmap, (0, line), bar)
                else:
                    k.tensor_load(Addr(dst, b * rows * 128), tmap, (F.add(k, x0, 128 * b), row), bar)
        for st in range(stages):
            issue(st, st)
        with k.for_range(0, nst) as i:
            st = k.rem(i, stages, type=T.u32)
            k.mbarrier_wait(Addr(k.mad(st, 8, bars, type=T.u32)), k.and_(k.div(i, stages, type=T.u32), 1,
                                                                            type=T.b32))
            nxt = k.add(i, stages, type=T.u32)
            with k.if_(k.setp("lt", nxt, nst, type=T.u32)):
                issue(nxt, st)
    return k.module(), 1024 + stages * stage_bytes + 8 * stages


def ldg_probe(unroll: int):
    """A kernel that only reads: each thread loads `unroll` 16-byte vectors (ld.global.nc.v4.u32) a grid-stride
    apart per iteration, `iters` iterations, and folds them with xor (stored only if it equals a value it never
    takes, so the loads stay).  Its time is what plain loads of the weights allow, without TMA or compute."""
    from ptxforge.builder import KernelBuilder
    from ptxforge.isa import types as T
    k = KernelBuilder("ldg_probe", target="sm_90a", maxntid=1024)
    w = k.param_ptr("w", T.u32)
    out = k.param_ptr("out", T.u32)
    iters = k.param_value("iters", T.u32)
    i = k.global_index()
    stride = k.mul(k.nctaid(), k.ntid(), type=T.u32)
    acc = k.mov(0, type=T.b32)
    idx = k.mov(i, type=T.u32)
    with k.for_range(0, iters):
        vecs = [k.ld(k.add(w, k.mul(k.mad(stride, j, idx, type=T.u32), 16, mode="wide")), type=T.u32, vec=4, nc=True)
                for j in range(unroll)]
        for v in vecs:
            for r in v:
                k.xor(acc, r, type=T.b32, dst=acc)
        k.mad(stride, unroll, idx, type=T.u32, dst=idx)
    k.st(k.add(out, k.mul(i, 4, mode="wide")), acc, type=T.u32, pred=k.setp("eq", acc, 0x12345679, type=T.b32))
    return k.module()


LDG_PROBES = [(4, 512, 512), (4, 1024, 512), (8, 512, 512), (4, 2048, 256)]  # (unroll, CTAs, threads)


def run_ldg_probes(torch, w4, probes=LDG_PROBES):
    """Microseconds of the plain-load probe over the weight sets in turn (bound launches), per configuration."""
    from ptxforge.runtime import load
    v32 = [w.view(torch.int32) for w in w4]
    out = torch.zeros(1 << 22, dtype=torch.int32, device="cuda")
    nvec = N * K // 2 // 16
    rows = []
    for unroll, ctas, thr in probes:
        per = ctas * thr * unroll
        if nvec % per:
            continue
        fn = load(ldg_probe(unroll))["ldg_probe"]
        cyc = itertools.cycle([fn.bind(ctas, thr, v, out, nvec // per) for v in v32])
        us = ev_time(torch, lambda: next(cyc).launch())
        rows.append(dict(M=0, what=f"ld.global.nc.v4 probe, unroll {unroll}, {ctas} x {thr} threads", us=us,
                         tbps=N * K / 2 / us / 1e6))
        print(rows[-1], flush=True)
    return rows


PROBES = [  # (rows, row bytes per stage, stages, rotate, rows_inner / "blocked", L2 promotion)
    (64, 128, 8, False, False, 128), (64, 128, 8, False, False, 256), (64, 512, 4, False, True, 256),
    (64, 128, 8, False, "blocked", 256), (64, 256, 6, False, "blocked", 256), (64, 512, 4, False, "blocked", 256),
    (64, 512, 4, False, "blocked", 128)]


def run_probes(torch, w4, probes=PROBES):
    """Microseconds of the streaming probe over the five weight sets in turn, per configuration."""
    from ptxforge.runtime import load
    from ptxforge.runtime.tensormap import TensorMap
    out = []
    for rows, rb, st, rot, inner, l2 in probes:
        if st * rows * rb > 200 * 1024:
            continue
        mod, smem = stream_probe(rows, rb, st, rot, inner is True, inner == "blocked")
        fn = load(mod)["stream_probe"]
        if inner == "blocked":
            maps = [TensorMap("u8", w.data_ptr(), (128, N * K // 256), (128, rows), (128,), swizzle=128,
                              l2_promotion=l2).encode() for w in w4]
        elif inner:
            maps = [TensorMap("u8", w.data_ptr(), (128, K // 256, N), (128, rb // 128, rows), (128, K // 2),
                              swizzle=128, l2_promotion=l2).encode() for w in w4]
        else:
            maps = [TensorMap("u8", w.data_ptr(), (K // 2, N), (128, rows), (K // 2,), swizzle=128,
                              l2_promotion=l2).encode() for w in w4]
        cyc = itertools.cycle(maps)
        us = ev_time(torch, lambda: fn(N // rows, 32, next(cyc), K // 2 // rb, shared=smem))
        out.append(dict(M=0, what=f"stream probe rows {rows} x {rb} B/stage, {st} stages" + (", rotated" if rot else "")
                        + (", blocked weights" if inner == "blocked" else ", 3-D rows-inner box" if inner else "")
                        + f", L2 promotion {l2}",
                        us=us,
                        tbps=N * K / 2 / us / 1e6))
        print(out[-1], flush=True)
    return out


def ev_time(torch, fn):
    """Median microseconds per call of `fn`: 7 event-timed batches of 40 back-to-back calls."""
    return events_us(torch, fn, 40, repeat=7)


def finishes(torch, seconds: float) -> bool:
    """Whether the work queued so far completes within `seconds` (polls an event)."""
    e = torch.cuda.Event()
    e.record()
    end = time.time() + seconds
    while not e.query():
        if time.time() > end:
            return False
        time.sleep(0.001)
    return True


def describe(g: HopperGemm) -> str:
    return (("swap " if g.swap_ab else "") + f"{g.block_m}x{g.block_n}x{g.block_k} c{g.consumers} s{g.stages} {g.widen}"
            + (" ik" if g.interleave_k else "") + (f" cv{g.convert_buffers}" if g.converter else "")
            + (f" wb{g.convert_buffers}" if not g.converter and g.convert_buffers != 2 else "")
            + (" rk" if g.rotate_k else "") + (f" l2={g.l2_promotion}" if g.l2_promotion != 128 else "")
            + (f" pf{g.l2_prefetch}" if g.l2_prefetch else "") + (" ahead" if g.widen_ahead else "")
            + (f" cluster {g.cluster_m}x{g.cluster_n}" if g.cluster_size > 1 else "")
            + (f" ag{g.a_group}" if g.a_group != 4 else "") + (" ss" if g.split_stage else "")
            + (" as2" if g.acc_sets == 2 else "") + (f" ep{g.early_prefetch}" if g.early_prefetch else "")
            + (" pdl" if g.pdl else "") + (f" r{g.producer_regs}/{g.consumer_regs}" if g.consumer_regs != 232 else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--budget-s", type=float, default=240)
    ap.add_argument("--json", default=None)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--probe", action="store_true", help="time the streaming probe first")
    ap.add_argument("--probe-only", action="store_true", help="time the streaming probe and stop")
    ap.add_argument("--only", default=None,
                    help="time only the candidates whose description contains this (or one of A|B|...)")
    ap.add_argument("--defaults", action="store_true",
                    help="time only what for_shape picks and the default before it (the first two candidates)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="time every row of an M this many times, in turns, and report the median")
    args = ap.parse_args()
    wanted = args.only.split("|") if args.only else None
    cands = {m: [g for g in candidates(m) if wanted is None or any(w in describe(g) for w in wanted)]
             for m in args.ms}
    if args.defaults:
        cands = {m: c[:2] for m, c in cands.items()}
    every = [g for m in args.ms for g in cands[m]]
    t0 = time.time()
    with cf.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 2)) as ex:
        results = list(ex.map(assembled, every))
    print(f"assembled {len(every)} candidates in {time.time() - t0:.1f} s", flush=True)
    for g, r in zip(every, results):
        if r is not None and (r.resources().spills or "C7513" in r.log):
            print("  WARN", g.kernel_name, "spills" if r.resources().spills else "C7513", flush=True)
    if args.dry_run:
        for m in args.ms:
            for g in cands[m]:
                print(m, describe(g), g.smem_bytes)
        return

    import torch
    from ptxforge.schedules.gemm import Int4Gemm
    deadline = time.time() + args.budget_s
    rng = np.random.default_rng(7)
    w8 = [torch.from_numpy(rng.integers(-8, 8, (N, K), dtype=np.int8)).cuda() for _ in range(SETS)]
    w4 = [torch.from_numpy(pack_int4(w.cpu().numpy())).cuda() for w in w8]
    rows = run_ldg_probes(torch, w4) + run_probes(torch, w4) if args.probe or args.probe_only else []
    for m in [] if args.probe_only else args.ms:
        x8 = torch.from_numpy(rng.integers(-8, 8, (m, K), dtype=np.int8)).cuda()
        x4 = torch.from_numpy(pack_int4(x8.cpu().numpy())).cuda()
        want = torch._int_mm(x8, w8[0].t()) if m >= 17 else (x8.long() @ w8[0].long().t()).int()
        c = torch.empty((m, N), dtype=torch.int32, device="cuda")
        ops = 2.0 * m * N * K
        cyc8 = itertools.cycle(w8)
        timers = []  # (row, its timed call): the later rounds time them again, in turns

        def timed(row, fn):
            row["us"] = ev_time(torch, fn)
            timers.append((row, fn))
            return row
        if m >= 17:
            rows.append(timed(dict(M=m, what="cuBLAS int8 (torch._int_mm)"),
                              lambda: torch._int_mm(x8, next(cyc8).t())))
        base = Int4Gemm.for_shape(m, N, K, "sm_90", hopper=False)
        plan = base.plan(m, N, K)
        cyc = itertools.cycle(w4)
        cp, xp = c.data_ptr(), x4.data_ptr()
        c.fill_(POISON)
        plan(x4, w4[0], c)
        torch.cuda.synchronize()
        ok = bool(torch.equal(c, want))
        rows.append(timed(dict(M=m, what=f"mma.sync schedule (for_shape, hopper=False: {base.block_m}x{base.block_n})",
                               ok=ok), lambda p=plan: p.launch_pointers(xp, next(cyc).data_ptr(), cp)))
        print(rows[-1], flush=True)
        for g in cands[m]:
            if time.time() > deadline:
                print("budget spent", flush=True)
                break
            try:
                hp = g.plan(m, N, K)
            except Exception as e:  # noqa: BLE001 -- report and go on with the sweep
                print("plan fails", g.kernel_name, e, flush=True)
                continue
            c.fill_(POISON)
            hp(x4, w4[0], c)
            if not finishes(torch, 5.0):
                print("HANG", g.kernel_name, flush=True)
                os._exit(3)  # a hung kernel holds the GPU: stop rather than spend the run
            ok = bool(torch.equal(c, want))
            rows.append(timed(dict(M=m, what=describe(g), ok=ok, splits=hp.splits, grid=hp.grid[0],
                                   name=g.kernel_name), lambda p=hp: p.launch_pointers(xp, next(cyc).data_ptr(), cp)))
            print(rows[-1], flush=True)
        for row, _ in timers:
            row["rounds"] = [row["us"]]
        for _ in range(args.rounds - 1):
            for row, fn in timers:
                row["rounds"].append(ev_time(torch, fn))
        for row, _ in timers:
            row["us"] = float(np.median(row["rounds"]))
        cub = next((r["us"] for r in rows if r["M"] == m and "cuBLAS" in r["what"]), None)
        for r in rows:
            if r["M"] == m:
                r["tops"] = ops / r["us"] / 1e6
                if cub:
                    r["x_cublas"] = cub / r["us"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    for r in rows:
        if r["M"] == 0:
            print(f"| probe | {r['what']} | {r['us']:.2f} us | {r['tbps']:.2f} TB/s |")
    print("\n| M | implementation | us | TOPS | x cuBLAS int8 | exact |")
    print("|---|---|---|---|---|---|")
    for m in args.ms:
        mine = sorted((r for r in rows if r["M"] == m), key=lambda r: r["us"])
        for r in mine[:10] + [r for r in mine[10:] if "cuBLAS" in r["what"] or "mma.sync" in r["what"]]:
            print(f"| {m} | {r['what']} | {r['us']:.2f} | {r.get('tops', 0):.0f} | {r.get('x_cublas', 0):.2f} | "
                  f"{r.get('ok', '')} |")


if __name__ == "__main__":
    main()
