"""Hypothesis strategies and a checker for running kernels on the CPU interpreter.

    from hypothesis import given
    from ptxforge.testing.interp_strategies import check_against_reference, seeds

    @given(m=st.integers(1, 100), seed=seeds())
    def test_my_kernel(m, seed):
        rng = np.random.default_rng(seed)
        x = rng.integers(...); out = poison(np.empty(m, np.int32))
        check_against_reference(module, "kern", grid=..., block=128, args=[x, out, m],
                                expected={1: reference(x)})

`check_against_reference` runs the kernel under the interpreter with every check on (a race,
out-of-bounds access or missing wait fails the test with the interpreter's report) and
compares the arrays the kernel wrote with the reference, bit for bit unless a tolerance is
given.  The strategies draw from the same legal-form tables the validator uses.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ..interp import run
from ..isa.bulk_reduce import BULK_REDUCE_TYPES
from ..isa.memory import LDMATRIX_FORMS, STMATRIX_FORMS
from ..isa.tensor import MMA_FORMS

POISON_BYTE = 0xA7


def seeds():
    """A seed for numpy's generator: arrays are drawn with numpy, shrinking works on the seed."""
    return st.integers(0, 2 ** 32 - 1)


def mma_forms(*, integer=None, max_sm=None):
    """Every mma.sync form of the ISA table (optionally only integer / float ones, or up to an arch)."""
    forms = [f for f in MMA_FORMS
             if (integer is None or (f.a_type.is_int or f.bitop is not None) == integer)
             and (max_sm is None or f.req.min_sm <= max_sm)]
    if not forms:
        least = min(f.req.min_sm for f in MMA_FORMS)
        raise ValueError(f"mma_forms: no mma.sync form with integer={integer!r}, max_sm={max_sm!r}; the forms start "
                         f"at sm_{least} (max_sm >= {least}, or None)")
    return st.sampled_from(forms)


def ldmatrix_forms():
    """The ldmatrix forms the interpreter models (m8n8 .b16: x1/x2/x4, with and without .trans)."""
    return st.sampled_from([f for f in LDMATRIX_FORMS if f.shape == "m8n8"])


def stmatrix_forms():
    """A strategy for the stmatrix forms of the ISA table that the interpreter models (the m8n8 ones)."""
    return st.sampled_from([f for f in STMATRIX_FORMS if f.shape == "m8n8"])


def bulk_reduce_forms(destination="global"):
    """(reduction, element type name) pairs of `cp.reduce.async.bulk` into `destination` ('global' or
    'shared::cluster'): every pair of `isa.bulk_reduce.BULK_REDUCE_TYPES`."""
    return st.sampled_from([(op, t) for op, types in BULK_REDUCE_TYPES[destination].items() for t in types])


#: a float format -> (the numpy dtype of its values, the unsigned dtype of its bit patterns)
FLOAT_FORMATS = {"f16": (np.float16, np.uint16), "bf16": (np.uint16, np.uint16), "f32": (np.float32, np.uint32),
                 "f64": (np.float64, np.uint64)}


def rounding_modes():
    """The four rounding modes of PTX float arithmetic and conversions: rn, rz, rm, rp."""
    from ..interp.rounding import MODES
    return st.sampled_from(MODES)


def float_arrays(fmt: str, min_size: int = 1, max_size: int = 64):
    """numpy arrays of format `fmt` (f16, bf16 as bit patterns, f32, f64) drawn over every bit pattern: each
    binade as likely as any other, subnormals, both zeros, infinities and NaNs included."""
    if fmt not in FLOAT_FORMATS:
        raise ValueError(f"float_arrays: fmt must be one of {', '.join(map(repr, FLOAT_FORMATS))}, got {fmt!r}")
    values, bits = FLOAT_FORMATS[fmt]
    width = np.dtype(bits).itemsize * 8
    return st.lists(st.integers(0, 2 ** width - 1), min_size=min_size, max_size=max_size).map(
        lambda xs: np.array(xs, dtype=np.uint64).astype(bits).view(values))


def exact_rationals(max_exponent: int = 1100):
    """Nonzero rationals n / d * 2^e of every sign and magnitude (e within +-max_exponent): exact results to
    round, for checking a rounding against its definition."""
    from fractions import Fraction
    return st.builds(lambda n, d, e: Fraction(n, d) * Fraction(2) ** e,
                     st.integers(-10 ** 30, 10 ** 30).filter(bool), st.integers(1, 10 ** 20),
                     st.integers(-max_exponent, max_exponent))


def packed_words(lanes: int, min_size: int = 1, max_size: int = 64):
    """uint32 arrays whose `lanes` half-words (2) or bytes (4) are each drawn from the lane's edges (0, 1, the
    signed and unsigned extremes) or anywhere: inputs for SIMD instructions, whose saturation and sign
    extension live at those edges."""
    if lanes not in (2, 4):
        raise ValueError(f"packed_words: lanes must be 2 (half-words) or 4 (bytes), got {lanes!r}")
    w = 32 // lanes
    lane = st.one_of(st.sampled_from([0, 1, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1, (1 << (w - 1)) + 1]),
                     st.integers(0, (1 << w) - 1))
    word = st.lists(lane, min_size=lanes, max_size=lanes).map(lambda ls: sum(v << (i * w) for i, v in enumerate(ls)))
    return st.lists(word, min_size=min_size, max_size=max_size).map(lambda xs: np.array(xs, dtype=np.uint32))


@st.composite
def printf_conversions(draw, max_conversions: int = 3):
    """(format, values) of a C printf call: conversion specifications drawn over flags, widths (`*` too),
    precisions (of %a too), the length modifiers CUDA's printf takes (h, l, ll) and every conversion but %s
    and %p, between literal text; `values` one per argument the format takes (`isa.vprintf.conversions`),
    ints for the integer conversions, %c and `*`, floats (zeros of both signs, infinities, NaN, subnormals)
    for the others."""
    from ..isa.vprintf import conversions
    parts = [draw(st.text(alphabet="abc =:<>", max_size=3))]
    for _ in range(draw(st.integers(1, max_conversions))):
        conv = draw(st.sampled_from("diouxXcfFeEgGaA"))
        flags = "".join(draw(st.lists(st.sampled_from("-+ #0"), max_size=3, unique=True)))
        width = draw(st.sampled_from(["", "1", "7", "13", "*"]))
        prec = draw(st.sampled_from(["", ".0", ".1", ".4", ".*"])) if conv != "c" else ""
        length = draw(st.sampled_from(["", "l", "ll", "h"])) if conv in "diouxX" else ""  # what CUDA's printf takes
        parts.append(f"%{flags}{width}{prec}{length}{conv}")
        parts.append(draw(st.text(alphabet="abc =:<>", max_size=3)))
    fmt = "".join(parts)
    values = []
    for a in conversions(fmt):
        if a.kind == "float":
            values.append(draw(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                         st.sampled_from([0.0, -0.0, 5e-324, 1e300, -2.5e-7]))))
        elif a.conv == "c":
            values.append(draw(st.integers(32, 126)))
        elif a.conv == "*":
            values.append(draw(st.integers(-20, 20)))
        else:
            values.append(draw(st.integers(-(1 << (8 * a.nbytes - 1)), (1 << (8 * a.nbytes - 1)) - 1)))
    return fmt, values


def launch_shapes(max_threads=256, max_ctas=4):
    """(grid, block) pairs: 1-3-D blocks up to max_threads threads, up to max_ctas CTAs (both >= 1)."""
    if max_threads < 1 or max_ctas < 1:
        raise ValueError(f"launch_shapes: max_threads and max_ctas must be >= 1, got {max_threads} and {max_ctas}")
    def blocks(total):
        return st.tuples(st.integers(1, total), st.integers(1, 4), st.integers(1, 2)).filter(
            lambda b: b[0] * b[1] * b[2] <= total)
    return st.tuples(st.tuples(st.integers(1, max_ctas), st.integers(1, 2)).filter(
        lambda g: g[0] * g[1] <= max_ctas), blocks(max_threads))


@st.composite
def access_patterns(draw, max_threads=96, max_buffer_bytes=512):
    """Per-thread global accesses for checking the interpreter's traffic counts.

    A dict: `threads`; `width` (element bytes: 1, 2, 4 or 8) and `vec` (1, 2 or 4; width*vec
    <= 16); `nbytes` (size of the buffers); per thread, `reads` and `writes` (byte offsets aligned
    to width*vec, inside the buffers), `active` (whether the thread accesses at all) and
    `src_size` (0..16: bytes a 16-byte zero-filling cp.async reads).  Offsets are drawn from a
    few values, so several threads often touch the same bytes.
    """
    threads = draw(st.integers(1, max_threads))
    width = draw(st.sampled_from([1, 2, 4, 8]))
    vec = draw(st.sampled_from([v for v in (1, 2, 4) if width * v <= 16]))
    size = width * vec
    slots = draw(st.integers(1, max_buffer_bytes // 16))
    nbytes = 16 * slots
    offsets = st.integers(0, nbytes // size - 1).map(lambda i: i * size)
    few = draw(st.lists(offsets, min_size=1, max_size=6))
    per_thread = st.lists(st.one_of(st.sampled_from(few), offsets), min_size=threads, max_size=threads)
    return dict(threads=threads, width=width, vec=vec, nbytes=nbytes, reads=draw(per_thread),
                writes=draw(per_thread), active=draw(st.lists(st.booleans(), min_size=threads, max_size=threads)),
                src_size=draw(st.lists(st.integers(0, 16), min_size=threads, max_size=threads)))


def poison(array: np.ndarray) -> np.ndarray:
    """Fill an output array with a recognizable byte pattern (in place); returns it."""
    array.reshape(-1).view(np.uint8)[...] = POISON_BYTE
    return array


def check_against_reference(module, kernel=None, *, grid, block, args, expected, shared=0, rtol=0.0, atol=0.0,
                            checks=None, **run_options):
    """Run under the interpreter (raising on any finding) and compare outputs with a reference.

    expected: {argument index: array} or a function of the arguments (copies taken before the
    run) returning such a dict.  Integer outputs must match exactly (a reference value the type
    cannot hold never matches); float outputs within rtol/atol, except that an element holding
    `poison`'s bytes (never written), or expected to, matches only bit for bit.  Returns the
    interpreter's Report.
    """
    from .tolerance import exact, relative
    if callable(expected):
        expected = expected([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    report = run(module, kernel, grid=grid, block=block, args=args, shared=shared, check=True, checks=checks,
                 **run_options)
    for idx, want in expected.items():
        got = args[idx]
        want = np.asarray(want)
        if got.shape != want.shape:  # (a reference of the output's size in another shape is a wrong reference)
            raise ValueError(f"the expected value for argument {idx} has shape {want.shape}; the output has "
                             f"{got.shape}")
        if got.dtype.kind == "c":
            ok = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        else:  # as check() compares: poison (0xA7 bytes, a tiny float) is no value within atol of anything
            marked = np.frombuffer(bytes([POISON_BYTE]) * got.dtype.itemsize, got.dtype)[0]
            ok = (relative(rtol, atol) if (rtol or atol) else exact()).passes(got, want, poison=marked)
        if not np.all(ok):
            bad = np.argwhere(~np.asarray(ok))
            first = [tuple(int(i) for i in b) for b in bad[:5]]
            pairs = ", ".join(f"{i}: got {got[i]!r} want {want[i]!r}" for i in first)
            raise AssertionError(f"argument {idx}: {len(bad)} of {got.size} elements differ from the reference "
                                 f"(first {pairs})\n{report}")
    return report
