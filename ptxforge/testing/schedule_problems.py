"""Problem spaces of the project's schedules, so `check(schedule)` needs no further code.

    check(Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1))   # M, N, K around the tiles
    check(TileCopy(40, 70, "s8", tile_rows=8, tile_cols=32))        # shapes, strides, CTA counts
    check(HopperGemm("s8", block_n=128))                             # TMA + wgmma: interpreter and GPU
    problem_space(schedule)                                          # the ProblemSpace itself

A schedule is a family of kernels: each problem runs the variant the schedule would pick for
it (`GemmSchedule.for_problem`: copy width and C stores narrowed for K and N; a TileCopy of the
problem's shape and strides), so the space's `kernel` is a function of the problem.

Schedules register here by class (`register_problem_space`); lookup walks the class's MRO, so
a subclass inherits its parent's space unless it registers its own.  A new schedule adds
itself with

    @register_problem_space(MySchedule)
    def my_space(schedule, **options) -> ProblemSpace: ...
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from hypothesis import strategies as st

from .problem import Array, ProblemSpace, Size

__all__ = ["problem_space", "register_problem_space", "gemm_space", "tile_copy_space", "hopper_gemm_space",
           "registered", "constructor_text"]

_REGISTRY: dict = {}  # class -> factory(schedule, **options) -> ProblemSpace


def register_problem_space(cls):
    """Decorator: `factory(schedule, **options)` builds the ProblemSpace of `cls` schedules."""
    def add(factory):
        _REGISTRY[cls] = factory
        return factory
    return add


def registered() -> dict:
    """{schedule class: space factory} (the built-in schedules included)."""
    _builtin()
    return dict(_REGISTRY)


def problem_space(schedule, **options) -> ProblemSpace:
    """The ProblemSpace of a schedule instance (options go to its factory, e.g. max_m=)."""
    _builtin()
    for cls in type(schedule).__mro__:
        if cls in _REGISTRY:
            return _REGISTRY[cls](schedule, **options)
    known = ", ".join(sorted(c.__name__ for c in _REGISTRY))
    raise TypeError(f"no problem space is registered for {type(schedule).__name__} (registered: {known}); pass a "
                    "ProblemSpace to check, or register one with testing.schedule_problems.register_problem_space")


def _repro(schedule) -> str:
    """Python that rebuilds `schedule` (its non-default constructor fields) for a reproducer."""
    cls = type(schedule).__name__
    return f"from ptxforge.schedules import {cls}\nfrom ptxforge.testing import check_problem\n" \
           f"target, space = {constructor_text(schedule)}, None"


def constructor_text(schedule) -> str:
    """`Cls(field=value, ...)` for a dataclass schedule: the init fields that differ from their
    defaults, targets by name, so the text evaluates with only the class imported."""
    parts = []
    for f in dataclasses.fields(schedule):
        if not f.init:
            continue
        v = getattr(schedule, f.name)
        if type(v).__name__ == "Target":
            v = v.name
        if f.default is not dataclasses.MISSING and _same(v, f.default):
            continue
        parts.append(f"{f.name}={v!r}" if f.default is not dataclasses.MISSING or f.kw_only else repr(v))
    return f"{type(schedule).__name__}({', '.join(parts)})"


def _same(v, default) -> bool:
    d = default.name if type(default).__name__ == "Target" else default
    return type(v) is type(d) and v == d


# ---------------------------------------------------------------- the integer GEMMs

def gemm_space(s, *, max_m: int | None = None, max_n: int | None = None, max_k: int | None = None) -> ProblemSpace:
    """C[M, N] = A[M, K] . B[N, K]^T for a GemmSchedule: M, N from 1 (default up to 2 tiles + 1),
    K from 0 (even for 4-bit; default up to 2 k-tiles + one k-step), data over every value of
    the operand type, C poisoned, each element stored once and equal to `schedule.reference`."""
    bits = s.bits
    kstep = 256 // bits
    max_m = max_m or 2 * s.block_m + 1
    max_n = max_n or 2 * s.block_n + 1
    max_k = max_k or 2 * s.block_k + kstep
    limit = s.compute_path.k_limit
    if s.path is not None and limit is not None:
        max_k = min(max_k, limit - 1)  # an explicitly chosen scaled path is exact below its limit only
    even = 2 if bits == 4 else 1
    operand = s.operand if bits == 4 else {"s8": np.int8, "u8": np.uint8}[s.operand]

    @functools.lru_cache(maxsize=32)
    def variant(k, n):
        return s.for_problem(k, n)

    def v(p):
        return variant(p.k, p.n)

    return ProblemSpace(
        name=s.kernel_name,
        sizes=[Size("m", 1, max_m, tile=s.block_m), Size("n", 1, max_n, tile=s.block_n),
               Size("k", 0, max_k, tile=s.block_k, multiple_of=even, edges=(kstep, kstep + even))],
        arrays=[Array("a", ("m", "k"), operand), Array("b", ("n", "k"), operand),
                Array("c", ("m", "n"), np.int32, role="out", write_once=True)],
        kernel=lambda p: v(p).module,
        grid=lambda p: v(p).grid(p.m, p.n), block=s.block, shared=lambda p: v(p).shared_bytes,
        reference=lambda a, b, k: s.reference(a, b, k),
        repro=_repro(s))


# ---------------------------------------------------------------- TileCopy

def tile_copy_space(tc, *, max_tiles: int = 3, max_ctas: int = 6, max_pad: int = 48) -> ProblemSpace:
    """A TileCopy's tiles over matrices of 1 to `max_tiles` tiles + 1 per side (ragged edges
    included), each row padded by 0..max_pad bytes in src and dst, walked by 1..max_ctas CTAs
    (a launch choice; CTAs beyond the tile count must leave).  Source bytes are random and never
    zero; dst starts poisoned; each byte is stored at most once and the padding comes back
    untouched."""
    item = tc.itemsize

    @functools.lru_cache(maxsize=64)
    def variant(rows, cols, src_pad, dst_pad):
        row = -(-cols * tc.elem.bits // 8)
        return dataclasses.replace(tc, rows=rows, cols=cols, src_row_stride_bytes=row + src_pad,
                                   dst_row_stride_bytes=row + dst_pad)

    modules: dict = {}

    def module(c):
        # the kernel is a function of the tiles and the plans (which the strides' alignment picks), not of
        # the shape: one emission (and one interpreter compilation) serves every shape of a plan
        key = (c.kernel_name, c.copy_plan.describe(), c.store_plan.describe())
        if key not in modules:
            modules[key] = c.emit()
        return modules[key]

    def v(p):
        return variant(p.rows, p.cols, p.src_pad, p.dst_pad)

    def source(p):
        return v(p).src_shape

    def fill(rng, shape):
        raw = rng.integers(1, 256, size=int(np.prod(shape)) * item, dtype=np.uint8)
        return raw.view(tc.numpy_dtype).reshape(shape)

    return ProblemSpace(
        name=tc.kernel_name,
        sizes=[Size("rows", 1, max_tiles * tc.tile_rows + 1, tile=tc.tile_rows),
               Size("cols", 1, max_tiles * tc.tile_cols + 1, tile=tc.tile_cols),
               Size("src_pad", 0, max_pad, multiple_of=item, edges=(16,)),
               Size("dst_pad", 0, max_pad, multiple_of=item, edges=(16,))],
        arrays=[Array("src", source, tc.numpy_dtype, fill=fill),
                Array("dst", lambda p: v(p).dst_shape, tc.numpy_dtype, role="out", write_once=True)],
        # mostly few CTAs, so each walks more tiles than it has stages and the pipeline wraps
        choices={"ctas": st.one_of(st.just(1), st.just(2), st.integers(1, max_ctas))},
        kernel=lambda p: module(v(p)),
        grid=lambda p: (p.ctas,), block=tc.block,  # more CTAs than tiles: the spare ones must do nothing
        shared=lambda p: v(p).shared_bytes,
        args=("src", "dst", "rows", "cols", lambda p: v(p).src_row_stride_bytes,
              lambda p: v(p).dst_row_stride_bytes, lambda p: v(p).tiles_x, lambda p: v(p).n_tiles),
        reference=lambda src, dst, rows, cols, src_pad, dst_pad: variant(rows, cols, src_pad, dst_pad).reference(
            src, dst),
        repro=_repro(tc))


# ---------------------------------------------------------------- the Hopper GEMM (TMA + wgmma)

def hopper_gemm_space(g, *, max_m: int | None = None, max_n: int | None = None,
                      max_k: int | None = None) -> ProblemSpace:
    """C = A . B^T for a HopperGemm: M, N from 1 (default up to 2 tiles + 1), K a positive
    multiple of what the tensor maps need (16-byte rows; default up to 2 stages + one step).
    s8 / s4 data over every value, bf16 / f16 in [-1, 1); C poisoned, integers compared exactly,
    floats within relative(1e-3, atol=1e-3); N a multiple of 4 with the TMA-store epilogue (its C
    rows must be 16-byte multiples).  On the GPU a problem runs through `schedule.run` (tensor maps
    made from the device arrays); on the interpreter through the same launch with host tensor maps
    over the numpy arrays, one CTA (or cluster) per C tile (`hopper.interp_launch`).  c16
    configurations (16-bit C) are refused: their C is rounded once from f32, which this space's
    tolerance does not describe."""
    from ..errors import ValidationError
    from .tolerance import relative
    if getattr(g, "c16", False):
        raise ValidationError(f"{g.kernel_name}: a c16 (16-bit C) HopperGemm has no problem space; "
                              "tests/test_hopper_gemm_variants.py checks it against numpy's rounding")
    step = 128 // g.bits  # K values per 16 bytes of row
    block_k = g.block_k_bytes * 8 // g.bits
    # the C tile along the problem's M and N (swap_ab: the kernel's N tile runs along M)
    tile_m, tile_n = (g.block_n, g.block_m) if g.swap_ab else (g.block_m, g.block_n)
    max_m = max_m or 2 * tile_m + 1
    max_n = max_n or 2 * tile_n + 1
    max_k = max_k or 2 * block_k + step
    n_step = 4 if getattr(g, "epilogue", "registers") == "tma" else 1
    floats = g.operand in ("bf16", "f16")
    dtype = {"s8": np.int8, "s4": "s4", "bf16": "bf16", "f16": np.float16}[g.operand]
    bounds = dict(low=-1, high=1) if floats else {}
    c = Array("c", ("m", "n"), np.float32 if floats else np.int32, role="out",
              tolerance=relative(1e-3, atol=1e-3) if floats else None)

    def device(p, arrays):
        arrays["c"][...] = g.run(arrays["a"], arrays["b"], k=p.k)

    def reference(a, b):
        from ..schedules.hopper import reference as hopper_reference
        return hopper_reference(g, a, b)

    def interp_args(p, arrays):
        from ..schedules.hopper.interp_launch import interpreter_launch
        return interpreter_launch(g, arrays["a"], arrays["b"], arrays["c"], p.k)[0]

    def grid(p):
        from ..schedules.hopper.interp_launch import interpreter_grid
        return interpreter_grid(g, p.m, p.n)

    def kernel(p):
        from ..schedules.hopper.interp_launch import interpreter_module
        return interpreter_module(g, p.m, p.n)

    return ProblemSpace(
        name=g.kernel_name,
        sizes=[Size("m", 1, max_m, tile=tile_m),
               Size("n", 4 if n_step > 1 else 1, max_n, tile=tile_n, multiple_of=n_step),
               Size("k", step, max_k, tile=block_k, multiple_of=step)],
        arrays=[Array("a", ("m", "k"), dtype, **bounds), Array("b", ("n", "k"), dtype, **bounds), c],
        kernel=kernel, grid=grid, block=g.threads, shared=g.smem_bytes, reference=reference,
        device=device, interp_args=interp_args,
        repro=_repro(g).replace("from ptxforge.schedules import", "from ptxforge.schedules.hopper import"))


def _builtin():
    """Register the built-in schedules (imported on first lookup: the GEMM machinery is not small)."""
    if _builtin.done:
        return
    _builtin.done = True
    from .. import schedules
    _REGISTRY.setdefault(schedules.GemmSchedule, gemm_space)
    _REGISTRY.setdefault(schedules.TileCopy, tile_copy_space)
    from ..schedules.hopper import HopperGemm
    _REGISTRY.setdefault(HopperGemm, hopper_gemm_space)


_builtin.done = False
