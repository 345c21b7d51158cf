"""Hypothesis strategies for launching kernels: sizes, block shapes, data, scalar parameters.

Data comes from a drawn seed rather than element by element, so every example gets fresh
random values of any size at no shrinking cost; the seed is what Hypothesis reports.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ..isa import types as T

#: Scalar parameter types a launch packs (the .param types a kernel may declare).
SCALAR_PARAM_TYPES = (T.s8, T.u8, T.s16, T.u16, T.s32, T.u32, T.s64, T.u64, T.b8, T.b16, T.b32, T.b64,
                      T.f16, T.f32, T.f64, T.bf16)


def seeds():
    """A seed for numpy's generator (0 .. 2**32-1): arrays are drawn with numpy, and shrinking works on the seed.
    """
    return st.integers(0, 2**32 - 1)


def element_counts(max_n: int = 1 << 16, block: int = 256):
    """Array lengths in [1, max_n] (max_n >= 1), weighted towards the edges of a block (1, block-1, block,
    block+1, ...)."""
    if max_n < 1:
        raise ValueError(f"element_counts: max_n must be >= 1, got {max_n}")
    edges = sorted({1, 2, 31, 32, 33, block - 1, block, block + 1, 2 * block - 1, 2 * block + 1})
    edges = [e for e in edges if 1 <= e <= max_n]
    return st.one_of(st.sampled_from(edges), st.integers(1, max_n))


def block_sizes(max_threads: int = 1024, warp_multiple: bool = True):
    """1-D block sizes: multiples of 32 up to `max_threads` (or any size from 1 when not warp_multiple)."""
    if max_threads < (32 if warp_multiple else 1):
        raise ValueError(f"block_sizes: max_threads={max_threads} holds no whole warp" if warp_multiple else
                         f"block_sizes: max_threads must be >= 1, got {max_threads}")
    if warp_multiple:
        return st.sampled_from(list(range(32, max_threads + 1, 32)))
    return st.integers(1, max_threads)


def random_array(seed: int, shape, dtype=np.float32, low=-4.0, high=4.0) -> np.ndarray:
    """Reproducible random data for a drawn seed: floats in [low, high), integers over their range."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(low, high, size=shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
    raise ValueError(f"random_array: unsupported dtype {dt}")


def arrays(shape, dtype=np.float32, **kw):
    """A strategy of random arrays of a fixed shape (drawn through a seed)."""
    return seeds().map(lambda s: random_array(s, shape, dtype, **kw))


def bf16_representable_floats():
    """Finite float32 values that round to a finite bfloat16 (beyond about 3.39e38 they overflow)."""
    bound = float(np.float32(3e38))
    return st.floats(-bound, bound, width=32)


def scalar_values(t: T.ScalarType):
    """Values a scalar parameter of type `t` accepts."""
    if t.is_int or t.kind == "b":
        lo = -(1 << (t.bits - 1)) if t.is_signed else 0
        hi = (1 << (t.bits - 1)) - 1 if t.is_signed else (1 << t.bits) - 1
        return st.integers(lo, hi)
    if t is T.f16:
        return st.floats(-65504, 65504, allow_nan=False, width=16)
    if t is T.bf16:
        return bf16_representable_floats()
    if t is T.f32:
        return st.floats(allow_nan=False, width=32)
    if t is T.f64:
        return st.floats(allow_nan=False)
    raise ValueError(f"no scalar strategy for .{t.name}")


@st.composite
def scalar_params(draw, max_params: int = 8):
    """A list of (PTX type, value) pairs: a kernel's scalar parameter list and matching arguments."""
    types = draw(st.lists(st.sampled_from(SCALAR_PARAM_TYPES), min_size=1, max_size=max_params))
    return [(t, draw(scalar_values(t))) for t in types]
