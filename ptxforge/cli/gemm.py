"""`ptxforge gemm-int4`: emit, inspect, assemble and (on a GPU) run and time the int4 GEMM.

Without a GPU it emits the kernel, summarizes the listing (instruction mix, chosen compute path
and why), prints the assembler's resource report for each requested arch, and runs the kernel on
the CPU interpreter at a small ragged shape (at most 130 x 200 x 1024; a larger K keeps its remainder
modulo 256, so its partial k-tile runs too: --k 2050 is checked at K 770), checking it against numpy
exactly and reporting any race or early read the interpreter finds.  With a GPU it runs the
kernel at the whole shape on random data instead, checks it against numpy and prints TOPS.

Which kernel: on sm_90a (what an H100/H200 gets, and the target without a GPU) the TMA + wgmma
kernel, unless --mma-sync, --operand u4 or a tile option (--block-m ... --path) asks for the mma.sync
schedule; on every other target, sm_90 without the `a` features included, the mma.sync kernel.
--arch names the archs of the resource report: the mma.sync kernel is assembled for each of them; the
TMA + wgmma kernel only for sm_90a (wgmma and setmaxnreg exist nowhere else), so it reports sm_90a and
says, for each other arch asked for, that it was not assembled there.  A warning the kernel raises (a
4-bit mma.sync that ptxas emulates) is printed once.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings

#: The target of the TMA + wgmma kernel, the only one with wgmma and setmaxnreg; also the target without a GPU.
HOPPER_TARGET = "sm_90a"


def add_parser(sub) -> None:
    """Add the `gemm-int4` subcommand to the subparsers `sub`."""
    p = sub.add_parser("gemm-int4", help="the int4 GEMM schedule: listing summary, resources, run and TOPS",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--m", type=int, default=1024)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--block-m", type=int, default=None, help="CTA tile rows (default 128)")
    p.add_argument("--block-n", type=int, default=None, help="CTA tile columns (default 128)")
    p.add_argument("--block-k", type=int, default=None, help="k-tile in int4 values (default 64)")
    p.add_argument("--warps-m", type=int, default=None)
    p.add_argument("--warps-n", type=int, default=None)
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--layout", choices=("swizzle", "padded"), default=None, help="shared-memory layout")
    p.add_argument("--raster-group", type=int, default=None)
    p.add_argument("--path", default=None, help="compute path: native_s4, s8_scaled, s8_signext (s4); native_u4, "
                                                "u8 (u4); default: chosen per target")
    p.add_argument("--operand", choices=("s4", "u4"), default="s4")
    p.add_argument("--target", default=None, help="PTX target: sm_90a takes the TMA + wgmma kernel, any other "
                                                  "(sm_90 too) the mma.sync kernel (default: this GPU's, sm_90a "
                                                  "on an H100/H200; without a GPU sm_90a)")
    p.add_argument("--auto", action="store_true", help="choose the mma.sync kernel's tiles for the shape "
                                                       "(Int4Gemm.for_shape; the TMA + wgmma kernel's always are)")
    p.add_argument("--arch", default="sm_80,sm_90", help="comma-separated archs for the resource report ('' for "
                                                         "none); the TMA + wgmma kernel assembles for sm_90a only "
                                                         "and names each other arch it skips")
    p.add_argument("--listing", action="store_true", help="print the full PTX listing")
    p.add_argument("--bench", action="store_true", help="time more launches (on a GPU)")
    p.add_argument("--repeat", type=int, default=None, help="timed launches (default 20, 200 with --bench)")
    p.add_argument("--no-run", action="store_true", help="do not run, on the GPU or on the interpreter")
    p.add_argument("--mma-sync", action="store_true", help="on sm_90a, build the mma.sync schedule instead of "
                                                           "the TMA + wgmma one")
    p.set_defaults(func=run_cli)


def _schedule(args, target):
    from ..schedules.gemm import Int4Gemm
    given = {name: getattr(args, attr) for name, attr in (
        ("block_m", "block_m"), ("block_n", "block_n"), ("block_k", "block_k"), ("warps_m", "warps_m"),
        ("warps_n", "warps_n"), ("stages", "stages"), ("smem_layout", "layout"), ("raster_group", "raster_group"),
        ("path", "path")) if getattr(args, attr) is not None}
    given["operand"] = args.operand
    if args.auto:  # the tiles of the mma.sync schedule: the TMA + wgmma one is _hopper_schedule's
        return Int4Gemm.for_shape(args.m, args.n, args.k, target, hopper=False, **given)
    return Int4Gemm(target=target, **given).for_problem(args.k, args.n)


def _mix_line(mix: dict) -> str:
    groups = {"tensor": ("mma",), "ldmatrix": ("ldmatrix",), "cp.async": ("cp.async",),
              "global/shared ld/st": ("ld", "st"), "sync": ("bar", "cp.async.wait_group", "cp.async.commit_group",
                                                          "cp.async.wait_all")}
    shown, out = set(), []
    for name, ops in groups.items():
        n = sum(v for op, v in mix.items() if op in ops)
        shown.update(ops)
        out.append(f"{name} {n}")
    rest = sum(v for op, v in mix.items() if op not in shown)
    out.append(f"integer/logic/control {rest}")
    return ", ".join(out)


def _check_args(args) -> list:
    """The archs to report on, after refusing sizes and archs no GEMM could have (CliError names them)."""
    from ..assembler import available_backends
    from ..errors import CliError, TargetError, ToolchainMissing
    from ..isa.targets import Target
    for name in ("m", "n", "k"):
        v = getattr(args, name)
        if v < 1:
            raise CliError(f"--{name} must be a positive size, got {v}")
    if args.k % 2:
        raise CliError(f"--k must be even (two 4-bit values share a byte of a packed row), got {args.k}")
    if args.repeat is not None and args.repeat < 1:
        raise CliError(f"--repeat must be at least 1, got {args.repeat}")
    for attr in ("block_m", "block_n", "block_k", "warps_m", "warps_n", "stages", "raster_group"):
        v = getattr(args, attr)
        if v is not None and v < 1:
            raise CliError(f"--{attr.replace('_', '-')} must be at least 1, got {v}")
    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    for a in archs + ([args.target] if args.target else []):
        try:
            Target.parse(a)
        except TargetError as e:
            raise CliError(f"unknown arch {a!r}: {e.message}") from None
    if archs and not available_backends():
        raise ToolchainMissing("no PTX assembler found (nvJitLink or ptxas), so nothing can be assembled; install "
                               "NVIDIA's nvJitLink wheel or put ptxas on PATH, or pass --arch ''")
    return archs


@contextlib.contextmanager
def _each_warning_once():
    """Within the block a warning is printed once, as `ptxforge: warning: ...` on stderr: emitting the kernel,
    emitting it again (the steady timing) and counting its instructions each warn from their own line, with the
    same words, and the Python line inside ptxforge that warned is no business of the command's user."""
    shown = set()
    with warnings.catch_warnings():
        warnings.simplefilter("always")

        def once(message, category, filename, lineno, file=None, line=None):
            key = (category, str(message))
            if key not in shown:
                shown.add(key)
                print(f"ptxforge: warning: {message} ({category.__name__})", file=sys.stderr)
        warnings.showwarning = once
        yield


def _target(args) -> str:
    """--target, else this GPU's target with its arch-specific features (sm_90a on an H100/H200), else
    HOPPER_TARGET."""
    from ..runtime.device import native_target
    return args.target if args.target is not None else native_target(HOPPER_TARGET).name


def run_cli(args) -> int:
    """Run `ptxforge gemm-int4` with parsed arguments; returns the exit status."""
    with _each_warning_once():
        return _run(args)


def _run(args) -> int:
    from ..runtime.device import gpu_available
    archs = _check_args(args)
    on_gpu = gpu_available() and not args.no_run
    target = _target(args)
    hopper = _hopper_schedule(args, target)
    if hopper is not None:
        return _run_hopper(hopper, args, archs, on_gpu)
    g = _schedule(args, target)
    g.check_problem(args.m, args.n, args.k)  # a problem the kernel cannot compute is refused before any report
    t0 = time.perf_counter()
    text = str(g.emit())
    first_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    text = str(g.emit())  # again, with imports and first-use caches warm: the steady cost
    emit_ms = (time.perf_counter() - t0) * 1e3
    print(f"schedule: {g.describe()}")
    print(f"problem:  C[{args.m}, {args.n}] int32 = A[{args.m}, {args.k}] . B[{args.n}, {args.k}]^T, packed "
          f"{g.operand}; grid {g.grid(args.m, args.n)}, block {g.block}, {g.shared_bytes} B dynamic shared memory")
    print(f"path:     {g.path_name} -- {g.path_reason}")
    mix = g.instruction_mix()
    print(f"emitted:  {sum(mix.values())} instructions, {len(text.splitlines())} PTX lines in {emit_ms:.1f} ms "
          f"(first call in the process: {first_ms:.1f} ms)")
    print(f"mix:      {_mix_line(mix)}")
    ks = g.ksteps
    path = g.compute_path
    per_tile = (g.warp_m // 16) * (g.warp_n // 8) * path.mmas_per_kstep * ks
    print(f"per warp and k-tile: {per_tile} mma.{path.mma_shape}.{path.mma_type}, "
          f"{ks * (g.warp_m // 16 + g.warp_n // 16)} ldmatrix.x4")
    if args.listing:
        print(g.listing())
    failed = []
    for arch in archs:
        try:
            rep = g.retarget(arch).assemble()
        except Exception as e:  # the report goes on for the other archs
            print(f"{arch}: cannot assemble: {e}")
            failed.append(arch)
            continue
        from ..assembler import assembler_name
        print(f"  {rep}; assembled by {assembler_name(rep.assembly.backend)}")
        try:
            ops = rep.sass_opcodes()
        except Exception:
            continue
        key = {o: n for o, n in ops.items() if o.startswith(("IMMA", "LDSM", "LDGSTS", "CALL"))}
        print("     SASS: " + ", ".join(f"{o} x{n}" for o, n in sorted(key.items())))
    if failed:
        print(f"ptxforge: error: could not assemble for {', '.join(failed)}", file=sys.stderr)
        return 1
    if not on_gpu:
        if args.no_run:
            done = "emitted and assembled" if archs else "emitted (no arch asked for, nothing assembled)"
            print(f"run skipped (--no-run); {done}")
            return 0
        return _run_on_interpreter(g, args)
    return _run_on_gpu(g, args)


#: the largest problem the CLI runs on the interpreter when there is no GPU: ragged against every default tile
INTERP_SHAPE = (130, 200, 1024)
#: a K above INTERP_SHAPE's is checked at a K below it with the same remainder modulo this (the largest k-tile of
#: a default schedule): the asked K's partial k-tile and row alignment run on the interpreter too
K_TAIL_PERIOD = 256


def interpreter_shape(m: int, n: int, k: int) -> tuple:
    """(m, n, k) of the interpreter's check of an asked problem: each at most INTERP_SHAPE, a larger K brought
    below it with its remainder modulo K_TAIL_PERIOD kept (2050 -> 770)."""
    cap_k = INTERP_SHAPE[2]
    if k > cap_k:
        k = cap_k - K_TAIL_PERIOD + k % K_TAIL_PERIOD
    return min(m, INTERP_SHAPE[0]), min(n, INTERP_SHAPE[1]), k


def _run_on_interpreter(g, args) -> int:
    """No GPU: C of a small ragged problem (interpreter_shape of the asked one) from the kernel on the CPU
    interpreter, checked against numpy exactly, with the interpreter's findings; 0 when exact and clean."""
    import numpy as np
    from ..int4 import pack_int4, random_int4
    m, n, k = interpreter_shape(args.m, args.n, args.k)
    signed = g.operand == "s4"
    rng = np.random.default_rng(0)
    av, bv = random_int4((m, k), rng, signed=signed), random_int4((n, k), rng, signed=signed)
    t0 = time.perf_counter()
    c, report = g.interpret(pack_int4(av, signed=signed), pack_int4(bv, signed=signed), k=k, check=False)
    seconds = time.perf_counter() - t0
    ok = np.array_equal(c.astype(np.int64), av.astype(np.int64) @ bv.astype(np.int64).T)
    found = f"{len(report.findings)} finding(s)" if report.findings else "no findings"
    print(f"interp:   no GPU here; the kernel on the CPU interpreter at {m}x{n}x{k}: "
          f"{'exact match with numpy' if ok else 'MISMATCH with numpy'}, {found} ({seconds:.1f} s)")
    if report.findings:
        print(report)
    return 0 if ok and not report.findings else 1


def _run_on_gpu(g, args) -> int:
    import numpy as np
    from ..int4 import pack_int4, random_int4
    from ..runtime import DeviceBuffer, benchmark
    from ..schedules.gemm.run import bind_gemm
    rng = np.random.default_rng(0)
    signed = g.operand == "s4"
    m, n, k = args.m, args.n, args.k
    a = pack_int4(random_int4((m, k), rng, signed=signed), signed=signed)
    b = pack_int4(random_int4((n, k), rng, signed=signed), signed=signed)
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dc = DeviceBuffer.from_host(np.full((m, n), -1, np.int32))
    g.run(da, db, dc)
    c = dc.to_host()
    # large problems: check a random sample of rows (numpy on the CPU would take minutes)
    rows = np.arange(m) if m * n * k <= 2 ** 33 else np.sort(rng.choice(m, 64, replace=False))
    want = g.reference(a[rows], b, k)
    ok = np.array_equal(c[rows].astype(np.int64), want)
    what = f"{m}x{n}x{k}" + ("" if len(rows) == m else f", {len(rows)} sampled rows")
    print(f"check:    {'exact match with numpy' if ok else 'MISMATCH with numpy'} ({what})")
    repeat = args.repeat or (200 if args.bench else 20)
    bound = bind_gemm(g, da, db, dc)
    t = benchmark(bound, warmup=5 if not args.bench else 20, repeat=repeat)
    tops = 2.0 * m * n * k / (t.median_us * 1e-6) / 1e12
    print(f"time:     median {t.median_us:.1f} us over {repeat} launches -> {tops:.1f} TOPS")
    return 0 if ok else 1


# ---------------------------------------------------------------- the sm_90a path

_TILE_OPTIONS = ("block_m", "block_n", "block_k", "warps_m", "warps_n", "stages", "layout", "raster_group", "path")


def _hopper_schedule(args, target):
    """The TMA + wgmma schedule for the sm_90a target (not plain sm_90: it lacks wgmma) when no mma.sync option
    is given, else None."""
    from ..isa.targets import Target
    if args.mma_sync or args.operand != "s4" or Target.parse(target).name != HOPPER_TARGET:
        return None
    if any(getattr(args, o) is not None for o in _TILE_OPTIONS):
        return None
    from ..schedules.gemm import Int4Gemm
    from ..schedules.hopper import HopperGemm
    g = Int4Gemm.for_shape(args.m, args.n, args.k, HOPPER_TARGET)
    return g if isinstance(g, HopperGemm) else None


def _report_hopper(g, archs) -> bool:
    """With any arch asked for: the sm_90a resource report of the Hopper kernel, then one line for each other arch
    asked for, saying why the kernel is not assembled there.  False when it does not assemble."""
    from ..isa.targets import Target
    if not archs:
        print("  no arch asked for (--arch ''): nothing assembled")
        return True
    ok = True
    try:
        rep = g.assemble()
    except Exception as e:  # the lines for the other archs still follow
        print(f"{HOPPER_TARGET}: cannot assemble: {e}")
        ok = False
    else:
        print(f"  {rep.report()}")
        try:
            ops = rep.sass_opcodes(g.kernel_name)
        except Exception:  # no disassembler here: the report stands without the SASS counts
            ops = None
        if ops is not None:
            key = {o: n for o, n in ops.items() if o.startswith(("IGMMA", "UTMALDG", "USETMAXREG", "CALL"))}
            print("     SASS: " + ", ".join(f"{o} x{n}" for o, n in sorted(key.items())))
    for arch in dict.fromkeys(archs):
        if Target.parse(arch).name != HOPPER_TARGET:
            print(f"  {arch}: not assembled -- the TMA + wgmma kernel uses wgmma and setmaxnreg, which only "
                  f"{HOPPER_TARGET} has, so it is assembled for {HOPPER_TARGET} alone; --mma-sync assembles the "
                  f"mma.sync kernel for {arch}")
    return ok


def _run_hopper(g, args, archs, on_gpu: bool) -> int:
    """Describe, assemble and (on a GPU) check and time the Hopper schedule."""
    from ..schedules.hopper.emit import fresh_module
    t0 = time.perf_counter()
    text = g.module.render().text
    first_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    fresh_module(g).render()  # again, past the per-configuration cache: the steady cost
    emit_ms = (time.perf_counter() - t0) * 1e3
    print(f"schedule: {g.describe()}")
    print(f"problem:  C[{args.m}, {args.n}] int32 = A[{args.m}, {args.k}] . B[{args.n}, {args.k}]^T, packed s4")
    print(f"path:     {g.path_name} -- {g.path_reason}")
    print(f"emitted:  {len(text.splitlines())} PTX lines in {emit_ms:.1f} ms (first call in the process: "
          f"{first_ms:.1f} ms)")
    if args.listing:
        print(g.listing())
    if not _report_hopper(g, archs):
        print(f"ptxforge: error: could not assemble for {HOPPER_TARGET}", file=sys.stderr)
        return 1
    if not on_gpu:
        if args.no_run:
            done = "emitted and assembled for sm_90a" if archs else "emitted (no arch asked for, nothing assembled)"
            print(f"run skipped (--no-run); {done}")
            return 0
        return _run_on_interpreter(g, args)
    import numpy as np
    from ..int4 import pack_int4, random_int4
    from ..runtime import DeviceBuffer, benchmark
    from ..schedules.hopper import prepare
    rng = np.random.default_rng(0)
    m, n, k = args.m, args.n, args.k
    av, bv = random_int4((m, k), rng, signed=True), random_int4((n, k), rng, signed=True)
    a, b = pack_int4(av, signed=True), pack_int4(bv, signed=True)
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)
    dc = DeviceBuffer.from_host(np.full((m, n), -1, np.int32))
    plan = prepare(g, da, db, dc, k=k)
    plan.launch()
    c = dc.to_host()
    rows = np.arange(m) if m * n * k <= 2 ** 33 else np.sort(rng.choice(m, 64, replace=False))
    want = av[rows].astype(np.int64) @ bv.astype(np.int64).T
    ok = np.array_equal(c[rows].astype(np.int64), want)
    what = f"{m}x{n}x{k}" + ("" if len(rows) == m else f", {len(rows)} sampled rows")
    print(f"check:    {'exact match with numpy' if ok else 'MISMATCH with numpy'} ({what}), {plan.splits} K split(s)")
    repeat = args.repeat or (200 if args.bench else 20)
    t = benchmark(plan.launch, warmup=5 if not args.bench else 20, repeat=repeat)
    tops = 2.0 * m * n * k / (t.median_us * 1e-6) / 1e12
    print(f"time:     median {t.median_us:.1f} us over {repeat} launches -> {tops:.1f} TOPS")
    return 0 if ok else 1
