"""Running a HopperGemm configuration on the interpreter for the tests: operands whose sums are exact in
every arithmetic, the tensor maps, the biased row sums, C poisoned, and numpy's C beside it."""

import numpy as np
from hypothesis import strategies as st

from ptxforge import interp
from ptxforge.schedules.hopper import random_operands, reference
from ptxforge.schedules.hopper.interp_launch import interpreter_launch, interpreter_module
from ptxforge.schedules.hopper.splitk import nonempty_splits
from ptxforge.testing.hopper_shapes import hopper_gemm_shapes
from ptxforge.schedules.hopper.operands import c_numpy_type


def small_operands(cfg, m, n, k, rng):
    """Operands whose products and sums are exact in every arithmetic (floats: small halves)."""
    if cfg.operand in ("bf16", "f16"):
        a = (rng.integers(-4, 5, (m, k)) * 0.5).astype(np.float32)
        b = (rng.integers(-4, 5, (n, k)) * 0.5).astype(np.float32)
        if cfg.operand == "f16":
            return a.astype(np.float16).view(np.uint16), b.astype(np.float16).view(np.uint16)
        return (a.view(np.uint32) >> 16).astype(np.uint16), (b.view(np.uint32) >> 16).astype(np.uint16)
    return random_operands(cfg, m, n, k, rng)




def round_to_c16(cfg, x):
    """float64 values (exact in f32) rounded to nearest-even in the 16-bit C type, returned as float64."""
    f = np.asarray(x, np.float32)
    if cfg.operand == "f16":
        return f.astype(np.float16).astype(np.float64)
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return r.view(np.float32).astype(np.float64)


def c_values(cfg, c):
    """C as float64 (bf16 C arrives as its uint16 bits)."""
    if cfg.c16 and cfg.operand == "bf16":
        return (c.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return c.astype(np.float64)


def draw_problem(cfg, data) -> tuple:
    """(m, n, k, splits, clusters) drawn for `cfg` with Hypothesis' `data`: a ragged shape small enough for the
    interpreter (up to about two tiles, 160 rows), K split in two or three or not (every split non-empty, as a
    plan makes it; 16-bit C splits only with the in-kernel reduction), one CTA (or cluster) walking every unit
    or one per unit."""
    m, n, k = data.draw(hopper_gemm_shapes(cfg, max_m=min(2 * cfg.block_m * cfg.cluster_m + 1, 160),
                                           max_n=min(2 * cfg.block_n * cfg.cluster_n + 1, 160),
                                           max_k=2 * cfg.block_k + 32))
    ktiles = -(-k // cfg.block_k)
    most = 1 if cfg.c16 and not cfg.reduces_in_kernel else 3
    splits = nonempty_splits(ktiles, min(data.draw(st.sampled_from((1, 2, 3))), ktiles, most))
    return m, n, k, splits, data.draw(st.sampled_from((None, 1)))


def run_on_interpreter(cfg, m, n, k, *, splits=1, clusters=None, seed=0, races=True, order="lowest-pc"):
    """(C summed over the K splits, numpy's C, the interpreter's result) of one launch; `clusters`: the
    grid in clusters (default: one per work unit).  16-bit C (c16): numpy's C rounded to it.  order: the
    interpreter's thread order (`interp.run`)."""
    rng = np.random.default_rng(seed)
    a, b = small_operands(cfg, m, n, k, rng)
    dt = c_numpy_type(cfg)
    slices = splits if not cfg.reduces_in_kernel else 1  # split_reduce='launch': the partial sums, to add here
    c = np.full((slices, m, n), 0xFFFF if dt == np.uint16 else np.nan if dt == np.float16 else -7, dt)  # poisoned
    args, grid, shared = interpreter_launch(cfg, a, b, c, k, splits=splits, clusters=clusters)
    r = interp.run(interpreter_module(cfg, m, n, splits), grid=grid, block=cfg.threads, shared=shared, args=args, check=False,
                   races=races, order=order)
    want = reference(cfg, a, b).astype(np.float64)
    return c_values(cfg, c).sum(0), round_to_c16(cfg, want) if cfg.c16 else want, r


