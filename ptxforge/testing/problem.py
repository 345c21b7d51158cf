"""A kernel's problem space, described once: sizes, arrays, scalars, launch, numpy reference.

    from ptxforge.testing import Array, ProblemSpace, Size, cdiv

    space = ProblemSpace(
        sizes=[Size("rows", 0, 80, tile=32), Size("cols", 1, 80, tile=32)],
        arrays=[Array("src", ("rows", "cols"), np.float32),
                Array("dst", ("cols", "rows"), np.float32, role="out")],
        grid=lambda p: (cdiv(p.cols, 32), cdiv(p.rows, 32)),
        block=(32, 8),
        reference=lambda src: {"dst": src.T},
    )
    space.problems()                  # a Hypothesis strategy of whole Problems
    space.make(rows=3, cols=33)       # one Problem, built the same way (for a reproducer)

Sizes draw weighted towards the edges (0 where `low` allows it, 1, tile - 1, tile, tile + 1,
2 * tile +- 1, the tile's quarters, the bounds), so ragged tiles and odd sizes come up by default.  Arrays are
shaped from the sizes, filled from one drawn seed (shrinking works on the seed, never on
elements); outputs (`role="out"`) start filled with poison so an element the kernel misses
stays visible: the byte 0xA7 in integers, a quiet NaN in floats (`poison_of`), which no
tolerance mistakes for a written value.  Packed int4 arrays (`dtype="s4"` / `"u4"`) take their shape in values,
two per byte along the last axis (see ptxforge.int4).  Kernel arguments are bound by parameter
name (sizes, arrays and scalars named like the kernel's parameters) unless `args` lists them.
"""

from __future__ import annotations

import inspect
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from ..int4 import pack_int4
from .launch_strategies import seeds
from .tolerance import check_tolerance

__all__ = ["Size", "Array", "Scalar", "ProblemSpace", "Problem", "cdiv", "POISON_BYTE", "INT4_DTYPES", "poison_of",
           "literal", "float_from_bits"]

#: What an integer output holds before the kernel runs (every byte); float outputs hold `poison_of`'s NaN,
#: whose payload repeats it.
POISON_BYTE = 0xA7
#: Packed 4-bit element types an Array may declare, with whether they are signed.
INT4_DTYPES = {"s4": True, "u4": False}
_BF16 = "bf16"


def poison_of(dtype, *, bf16: bool = False) -> np.ndarray:
    """What an output of `dtype` holds before the kernel runs, as a 0-d array of that dtype.

    Integers (and anything not a float): every byte POISON_BYTE.  Floats (float16, float32,
    float64, and bfloat16 bits in uint16 with `bf16=True`): a positive quiet NaN whose payload
    bits below the quiet bit are those of repeated POISON_BYTE bytes (float32 0x7fe7a7a7, float16
    0x7fa7, bfloat16 0x7fe7, float64 0x7fffa7a7a7a7a7a7).  A NaN, because a small poison value would
    pass under an absolute tolerance.
    """
    dt = np.dtype(dtype)
    raw = int.from_bytes(bytes([POISON_BYTE]) * dt.itemsize, "little")
    if bf16 or dt.kind == "f":
        width = 16 if bf16 else 8 * dt.itemsize
        mantissa = 7 if bf16 else np.finfo(dt).nmant
        quiet = 1 << (mantissa - 1)
        exponent = ((1 << (width - 1)) - 1) & ~((1 << mantissa) - 1)
        raw = exponent | quiet | (raw & (quiet - 1))
    return np.frombuffer(raw.to_bytes(dt.itemsize, "little"), dtype=dt.newbyteorder("<")).astype(dt).reshape(())


def is_whole(v) -> bool:
    """Whether `v` is an integer (int or numpy integer), not a bool: what sizes, tiles and seeds must be."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def cdiv(a: int, b: int) -> int:
    """a / b rounded up: the number of b-sized tiles that cover a (0 for a = 0)."""
    return -(-int(a) // int(b))


# ---------------------------------------------------------------- the parts of a space

@dataclass(frozen=True)
class Size:
    """A size parameter: an integer in [low, high], a multiple of `multiple_of`.

    tile: the kernel's tile (or block) length along this size; the drawn values are weighted
    towards 0 (where low allows it), 1, 2, 3, tile - 1, tile, tile + 1, 2*tile - 1, 2*tile + 1,
    the quarters of the tile and one more (tile/4, tile/2, 3*tile/4, +1 each, for a tile that
    is a multiple of 4 from 8 up) and the bounds.  `edges` adds (or, with `default_edges=False`, replaces) such values;
    an edge that is not a multiple moves to the nearest multiples, and one outside [low, high] is dropped.  low, high,
    multiple_of, tile and edges are ints (numpy integers too; not bools or floats), tile >= 1.  A size named like a
    kernel parameter is passed to it.
    """

    name: str
    low: int = 1
    high: int = 256
    tile: int | None = None
    multiple_of: int = 1
    edges: tuple = ()
    default_edges: bool = True

    def __post_init__(self):
        for field_name in ("low", "high", "multiple_of", "tile"):
            v = getattr(self, field_name)
            if not (is_whole(v) or (field_name == "tile" and v is None)):
                raise TypeError(f"Size {self.name}: {field_name} must be a whole number (an int)"
                                f"{' or None' if field_name == 'tile' else ''}, got {v!r}")
        bad = [e for e in self.edges if not is_whole(e)]
        if bad:
            raise TypeError(f"Size {self.name}: edges must be whole numbers (ints), got {bad}")
        if self.low < 0 or self.high < self.low:
            raise ValueError(f"Size {self.name}: need 0 <= low <= high, got [{self.low}, {self.high}]")
        if self.multiple_of < 1:
            raise ValueError(f"Size {self.name}: multiple_of must be >= 1, got {self.multiple_of}")
        if self.tile is not None and self.tile < 1:
            raise ValueError(f"Size {self.name}: tile must be >= 1 (or None), got {self.tile}")
        if not self.values_near_edges():
            if not any(self._legal(v) for v in range(self.low, min(self.high, self.low + self.multiple_of) + 1)):
                raise ValueError(f"Size {self.name}: no multiple of {self.multiple_of} lies in "
                                 f"[{self.low}, {self.high}]")
            raise ValueError(f"Size {self.name}: none of its edge values {tuple(self.edges)} lies in "
                             f"[{self.low}, {self.high}] (as a multiple of {self.multiple_of}), and "
                             "default_edges=False leaves no others: give edges inside the bounds, or default_edges=True")

    def _legal(self, v: int) -> bool:
        return self.low <= v <= self.high and v % self.multiple_of == 0

    def values_near_edges(self) -> list:
        """The edge values this size draws often, ascending."""
        cands = set(self.edges)
        if self.default_edges:
            cands |= {0, 1, 2, 3, self.low, self.low + 1, self.high}
            if self.tile:
                t = self.tile
                cands |= {t - 1, t, t + 1, 2 * t - 1, 2 * t + 1}
                if t % 4 == 0 and t >= 8:  # a tile's quarters: ragged tiles that end inside each row group
                    cands |= {q + d for q in (t // 4, t // 2, 3 * t // 4) for d in (0, 1)}
        m = self.multiple_of
        snapped = set()
        for v in cands:  # a value that is not a multiple moves to the nearest multiples
            for w in (v // m * m, cdiv(v, m) * m):
                if self._legal(w):
                    snapped.add(w)
        return sorted(snapped)

    def strategy(self):
        """Integers of this size: any legal value or (as often) an edge value.  The plain integers come
        first, so a failure shrinks numerically towards `low`, through the values between the edges."""
        m = self.multiple_of
        lo, hi = cdiv(self.low, m), self.high // m
        return st.one_of(st.integers(lo, hi).map(lambda i: i * m), st.sampled_from(self.values_near_edges()))


@dataclass(frozen=True)
class Array:
    """An array parameter.

    shape: a tuple of size names, ints and callables of the Problem, or one callable of the
    Problem returning the tuple.  For packed int4 (`dtype="s4"` / `"u4"`) it counts values;
    the array passed to the kernel holds bytes (uint8), the last axis halved (rounded up: an
    odd count leaves a zero high nibble).  `"bf16"` arrays live in uint16.
    role: "in" (drawn, read only: a write is a failure), "out" (poisoned, compared with the
    reference) or "inout" (drawn, then compared).  low/high: the value range drawn (floats in
    [low, high), integers in [low, high], inside the type; default: floats in [-4, 4), every integer of the
    type, every 4-bit value; float data is drawn in float64, rounded to the type and kept in
    [low, high): a value rounding carries to `high`, or below a `low` the type cannot hold,
    becomes the nearest value of the type inside).  tolerance: how outputs of floats compare (see testing.tolerance;
    default exact bits).  fill: a function (rng, shape) -> array replacing the random data.
    write_once: an output none of whose bytes may be written twice (checked on the interpreter's
    access counts): catches two CTAs or threads storing the same element, a global-memory
    conflict that the interpreter's race tracking (shared memory only) does not report.
    """

    name: str
    shape: Any
    dtype: Any = np.float32
    role: str = "in"
    low: float | None = None
    high: float | None = None
    tolerance: Any = None
    fill: Callable | None = None
    write_once: bool = False

    def __post_init__(self):
        if not (self.int4 or self.bf16):
            try:
                kind = np.dtype(self.dtype).kind
            except TypeError:
                kind = None
            if kind not in ("b", "i", "u", "f"):
                raise TypeError(f"Array {self.name}: dtype must be a numpy number or bool type, 's4', 'u4' or 'bf16' "
                                f"(e.g. np.float32, np.int8), got {self.dtype!r}")
        if self.write_once and self.role == "in":
            raise ValueError(f"Array {self.name}: write_once is for outputs; an input may not be written at all")
        if self.role not in ("in", "out", "inout"):
            raise ValueError(f"Array {self.name}: role must be 'in', 'out' or 'inout', got {self.role!r}")
        check_tolerance(self.tolerance, f"Array {self.name}")
        if self.role != "out" and self.fill is None and (self.bf16 or self.container.kind == "f"):
            self.float_range()  # a range no value of the type lies in is refused here
        elif self.role != "out" and self.fill is None and (self.int4 or self.container.kind in "iu"):
            self.int_range()  # as numpy would at the first draw, but naming the array and the type's range

    @property
    def is_output(self) -> bool:
        """Whether the kernel writes this array (role "out" or "inout") and the reference judges it."""
        return self.role in ("out", "inout")

    @property
    def int4(self) -> bool:
        """Whether this is packed 4-bit data ("s4" / "u4")."""
        return isinstance(self.dtype, str) and self.dtype in INT4_DTYPES

    @property
    def bf16(self) -> bool:
        """Whether this is bfloat16 (held in uint16)."""
        return isinstance(self.dtype, str) and self.dtype == _BF16

    @property
    def container(self) -> np.dtype:
        """The numpy dtype of the array passed to the kernel."""
        if self.int4:
            return np.dtype(np.uint8)
        if self.bf16:
            return np.dtype(np.uint16)
        return np.dtype(self.dtype)

    def _low(self) -> float:
        return -4.0 if self.low is None else float(self.low)

    def _high(self) -> float:
        return 4.0 if self.high is None else float(self.high)

    def float_range(self) -> tuple:
        """(least, greatest) value of this float array's type (bf16 included) in [low, high): the
        bounds random data is clipped to after rounding would otherwise leave the range."""
        lo, hi = self._low(), self._high()
        least = [v for v in _representable_near(lo, self.container, self.bf16) if v >= lo]
        most = [v for v in _representable_near(hi, self.container, self.bf16) if v < hi]
        if not least or not most or min(least) > max(most):
            kind = "bf16" if self.bf16 else self.container.name
            raise ValueError(f"Array {self.name}: no {kind} value lies in [low, high) = [{lo}, {hi})")
        return min(least), max(most)

    def int_range(self) -> tuple:
        """(least, greatest) integer drawn for this integer (or packed int4) array: low and high, each
        defaulting to its type's bound; ValueError unless both are whole numbers inside the type with
        low <= high."""
        if self.int4:
            least, most = (-8, 7) if INT4_DTYPES[self.dtype] else (0, 15)
        else:
            info = np.iinfo(self.container)
            least, most = int(info.min), int(info.max)
        lo = least if self.low is None else self.low
        hi = most if self.high is None else self.high
        if not all(is_whole(v) or (isinstance(v, (float, np.floating)) and float(v).is_integer()) for v in (lo, hi)) \
                or not least <= lo <= hi <= most:
            kind = self.dtype if self.int4 else self.container.name
            raise ValueError(f"Array {self.name}: low and high must be whole numbers with {least} <= low <= high <= "
                             f"{most} (the range of {kind}), got low={self.low!r}, high={self.high!r}")
        return int(lo), int(hi)

    @property
    def poison(self) -> np.ndarray:
        """What this array holds before the kernel runs, when it is an output (see `poison_of`)."""
        return poison_of(self.container, bf16=self.bf16)

    def logical_shape(self, p) -> tuple:
        """The shape in elements (values, for int4) for problem `p`."""
        if callable(self.shape):
            shape = self.shape(p)
        else:
            shape = [p.sizes[d] if isinstance(d, str) else d(p) if callable(d) else d for d in self.shape]
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        shape = tuple(shape)
        if not all(is_whole(d) and d >= 0 for d in shape):
            raise ValueError(f"Array {self.name}: shape {shape} for problem {p.call_args()}: dimensions must be whole "
                             f"numbers >= 0 (ints; a size of 0 is an empty array)")
        return tuple(int(d) for d in shape)

    def host_shape(self, p) -> tuple:
        """The shape of the array passed to the kernel (packed int4: bytes along the last axis)."""
        shape = self.logical_shape(p)
        if self.int4 and shape:
            shape = shape[:-1] + (cdiv(shape[-1], 2),)
        return shape

    def make(self, p, rng) -> np.ndarray:
        """This array for problem `p`: random data from `rng`, or poison for an output."""
        shape = self.logical_shape(p)
        if self.role == "out":
            out = np.empty(self.host_shape(p), self.container)
            pattern = np.frombuffer(self.poison.tobytes(), np.uint8)
            out.reshape(-1).view(np.uint8)[...] = np.tile(pattern, out.size)
            return out
        if self.fill is not None:
            a = np.ascontiguousarray(self.fill(rng, shape))
            if a.shape != self.host_shape(p) or a.dtype != self.container:
                raise ValueError(f"Array {self.name}: fill returned {a.dtype} {a.shape}, expected "
                                 f"{self.container} {self.host_shape(p)}")
            return a
        if self.int4:
            signed = INT4_DTYPES[self.dtype]
            lo, hi = self.int_range()
            v = rng.integers(lo, hi, size=shape, endpoint=True)
            if v.size == 0:
                return np.zeros(self.host_shape(p), np.uint8)
            if shape[-1] % 2:  # an odd count: the last byte's high nibble is 0
                v = np.concatenate([v, np.zeros(shape[:-1] + (1,), v.dtype)], axis=-1)
            return pack_int4(v, signed=signed)
        dt = self.container
        if self.bf16 or dt.kind == "f":
            lo, hi = self.float_range()
            v = np.clip(rng.uniform(self._low(), self._high(), size=shape), lo, hi)  # rounding stays inside
            if self.bf16:  # truncated (a monotone rounding): exactly representable
                return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            return v.astype(dt)
        if dt.kind in "iu":
            lo, hi = self.int_range()
            return rng.integers(lo, hi, size=shape, endpoint=True, dtype=dt)
        if dt.kind == "b":
            return rng.integers(0, 2, size=shape).astype(bool)
        raise ValueError(f"Array {self.name}: no random data for dtype {dt}")


def _representable_near(v: float, dt: np.dtype, bf16: bool) -> list:
    """Values of float type `dt` (bf16: bfloat16, in uint16) next to `v`: its rounding, the values one step
    either side of that, zero and the least subnormals of either sign (the steps across zero); as Python
    floats, NaNs left out."""
    width = 16 if bf16 else 8 * dt.itemsize
    u = np.dtype(f"u{width // 8}")
    with np.errstate(all="ignore"):
        if bf16:
            bits = int(np.array(v, np.float32).view(np.uint32)) >> 16

            def value(b):
                return float(np.array(b << 16, np.uint32).view(np.float32))
        else:
            bits = int(np.array(v, dt).view(u))

            def value(b):
                return float(np.array(b, u).view(dt))
    sign = 1 << (width - 1)
    out = [value(b % (1 << width)) for b in (bits - 1, bits, bits + 1, 0, 1, sign | 1)]
    return [x for x in out if x == x]


@dataclass(frozen=True)
class Scalar:
    """A scalar parameter: a constant, a Hypothesis strategy, or a callable of the drawn sizes
    (attributes: `s.n`) returning a strategy, for a scalar whose range depends on them."""

    name: str
    values: Any

    def __post_init__(self):
        if isinstance(self.values, list):
            raise TypeError(f"Scalar {self.name}: values is a list; a scalar takes one number: for one of several, "
                            f"pass st.sampled_from({self.values!r})")


# ---------------------------------------------------------------- one problem

@dataclass
class Problem:
    """One drawn problem: sizes, launch, scalars, fresh arrays (outputs poisoned) and its seed.

    Attribute access falls back to sizes and scalars (`p.rows`), which is how grid, shape and
    shared-memory callables read them.  `initial` keeps pristine copies of every array as made.
    """

    sizes: dict
    launch: dict  # the drawn launch choices: block and any `choices` of the space
    seed: int
    scalars: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    initial: dict = field(default_factory=dict)  # every array as made (outputs poisoned), kept pristine
    grid: tuple = (1, 1, 1)
    block: tuple = (1, 1, 1)
    shared: int = 0

    def __getattr__(self, name):
        for d in ("sizes", "scalars", "launch"):
            table = self.__dict__.get(d, {})
            if name in table:
                return table[name]
        raise AttributeError(f"problem has no size, scalar or launch choice {name!r}")

    def fresh_arrays(self) -> dict:
        """New copies of the arrays as made (for another backend's run)."""
        return {k: v.copy() for k, v in self.initial.items()}

    def values(self) -> dict:
        """Every named value: sizes, scalars, launch choices, and the arrays as made."""
        out = dict(self.sizes)
        out.update(self.scalars)
        out.update(self.launch)
        out.update(self.initial)
        return out

    def call_args(self) -> str:
        """Keyword arguments for ProblemSpace.make that rebuild this problem, as Python text (see
        `literal`: a NaN or infinite float needs `float_from_bits` imported)."""
        parts = [f"{k}={literal(v)}" for d in (self.sizes, self.launch, self.scalars) for k, v in d.items()]
        parts.append(f"seed={self.seed}")
        return ", ".join(parts)

    def describe(self) -> str:
        """The problem's values and its resolved launch, on one line."""
        return f"{self.call_args()}; grid={self.grid}, block={self.block}, shared={self.shared}"

    def __repr__(self) -> str:
        return f"Problem({self.call_args()})"

    def _repr_pretty_(self, printer, cycle):  # Hypothesis prints examples this way: sizes and seed, no arrays
        printer.text(repr(self))


def float_from_bits(bits: int, dtype="float64"):
    """The float of `dtype` with these bits: a Python float for float64, else a numpy scalar (how a
    reproducer spells a NaN with its sign and payload)."""
    dt = np.dtype(dtype)
    v = np.array(bits, f"u{dt.itemsize}").view(dt)[()]
    return float(v) if dt == np.float64 else v


def literal(v) -> str:
    """Python text that evaluates to `v` exactly: repr, except that a Python float infinity or
    Python's own NaN is `float('inf')` / `float('nan')`, any other NaN or non-finite numpy float is
    `float_from_bits(0x..., 'float32')` (bits, sign and payload kept), and tuples and lists are
    spelled element by element."""
    if isinstance(v, (tuple, list)):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else f"({inner})" if isinstance(v, tuple) \
            else f"[{inner}]"
    if type(v) is float and v in (math.inf, -math.inf):
        return "float('inf')" if v > 0 else "-float('inf')"
    if type(v) is float and v != v and struct.pack("<d", v) == struct.pack("<d", math.nan):
        return "float('nan')"
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        dt = np.dtype(type(v)) if isinstance(v, np.floating) else np.dtype(np.float64)
        bits = int(np.array(v, dt).view(f"u{dt.itemsize}"))
        return f"float_from_bits({bits:#0{2 + 2 * dt.itemsize}x}, {dt.name!r})"
    return repr(v.item() if isinstance(v, np.generic) else v)


def _dims(v) -> tuple:
    if isinstance(v, (int, np.integer)):
        v = (int(v),)
    v = tuple(int(x) for x in v)
    return v + (1,) * (3 - len(v))


# ---------------------------------------------------------------- the space

class ProblemSpace:
    """Everything needed to draw, launch and judge problems of one kernel.

    sizes: Size list.  arrays: Array list.  scalars: Scalar list.
    grid: a callable of the Problem (or constant dims): 1 to 3 whole numbers >= 0; a dimension that
    computes to 0 (a size of 0) is launched as 1, so a zero size tests the kernel's guards.  block: dims, a list of
    dims, or a Hypothesis strategy of dims (a launch choice).  choices: {name: list or strategy}
    of further launch choices the grid / shared callables read (e.g. how many CTAs).
    shared: dynamic shared memory bytes (int or callable of the Problem).
    reference: a function of named values (sizes, scalars, launch choices, arrays as made;
    it receives only the names its signature asks for, or all with **kw) returning
    {output name: expected array}, or one array when there is one output.  Expected arrays
    must have the output's shape (for an "out" array: what the kernel leaves in it, its
    poison included where it writes nothing); a "bf16" output's may be float values, rounded once
    to the nearest bfloat16 (`ptxforge.bfloat16.to_bf16`), instead of uint16 bit patterns.
    args: the kernel's arguments in order, as names (or callables of the Problem); default:
    the kernel's parameter names.  where: a predicate on the Problem's sizes; drawn sizes that
    fail it are discarded (keep it loose).  kernel: for a kernel that depends on the problem
    (a schedule's variant), a callable of the Problem returning the Module / Kernel to run.
    name: what reports call the kernel.  repro: Python text defining `target` and `space` for
    the reproducer a failure prints (the schedules' spaces set it; by default the reproducer
    names them `kernel` and `space`).
    device: for a kernel whose launch needs device addresses (tensor maps, workspaces), a
    function (problem, arrays) that runs the problem on the GPU itself and leaves the outputs in
    `arrays` (numpy); the GPU backend calls it instead of launching the kernel with `args`.
    interpretable: False for a space the interpreter cannot run (such a device launch): the
    interpreter backend is then skipped, or fails when it is demanded.
    interp_args: for such a kernel that the interpreter can run from host data (tensor maps it
    makes over numpy arrays), a function (problem, arrays) returning the argument list the
    interpreter backend launches with instead of `args`.
    """

    def __init__(self, *, sizes=(), arrays=(), scalars=(), grid=1, block=(128,), reference=None, args=None,
                 shared=0, choices=None, where=None, kernel=None, name=None, repro=None, device=None,
                 interpretable=True, interp_args=None):
        self.sizes = tuple(sizes)
        self.arrays = tuple(arrays)
        self.scalars = tuple(scalars)
        self.grid = grid
        self.block = block
        self.shared = shared
        self.reference = reference
        self.args = tuple(args) if args is not None else None
        self.choices = dict(choices or {})
        self.where = where
        self.kernel = kernel
        self.name = name
        self.repro = repro  # Python text that rebuilds this space (schedules set it), for reproducers
        self.device = device
        self.interpretable = interpretable
        self.interp_args = interp_args
        names = [s.name for s in self.sizes] + [a.name for a in self.arrays] + [s.name for s in self.scalars]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"ProblemSpace: names used twice: {sorted(dup)}")
        if not any(a.is_output for a in self.arrays):
            raise ValueError("ProblemSpace: no array has role 'out' or 'inout'; there is nothing to check")
        for what, v in [("block", block), *((f"choices[{k!r}]", v) for k, v in self.choices.items())]:
            if isinstance(v, (list, tuple)) and not isinstance(v, st.SearchStrategy) and len(v) == 0:
                raise ValueError(f"ProblemSpace: {what} is an empty list: give at least one value (or a "
                                 "Hypothesis strategy)")
        if reference is not None:
            _check_reference(reference, names + list(self.choices) + ["block"])
        known = [s.name for s in self.sizes]
        for a in self.arrays:
            for d in (() if callable(a.shape) else a.shape if isinstance(a.shape, (tuple, list)) else (a.shape,)):
                if isinstance(d, str) and d not in known:
                    raise ValueError(f"Array {a.name}: shape names {d!r}, which is not a size of the space "
                                     f"(sizes: {known})")

    @property
    def outputs(self) -> tuple:
        """The arrays the kernel writes (role "out" or "inout")."""
        return tuple(a for a in self.arrays if a.is_output)

    def array(self, name: str) -> Array:
        """The Array called `name`."""
        for a in self.arrays:
            if a.name == name:
                return a
        raise KeyError(name)

    # ------------------------------------------------------------ drawing
    def _block_strategy(self):
        b = self.block
        if isinstance(b, st.SearchStrategy):
            return b.map(_dims)
        if isinstance(b, list):
            return st.sampled_from([_dims(x) for x in b])
        return st.just(_dims(b))

    def problems(self):
        """A Hypothesis strategy of whole Problems of this space."""
        size_st = st.fixed_dictionaries({s.name: s.strategy() for s in self.sizes})
        if self.where is not None:
            size_st = size_st.filter(lambda d: bool(self.where(_SizesView(d))))
        launch_st = st.fixed_dictionaries({"block": self._block_strategy(),
                                           **{k: v if isinstance(v, st.SearchStrategy) else st.sampled_from(list(v))
                                              for k, v in self.choices.items()}})

        @st.composite
        def draw_problem(draw):
            sizes = draw(size_st)
            launch = draw(launch_st)
            scalars = {}
            for sc in self.scalars:
                v = sc.values
                if isinstance(v, st.SearchStrategy):
                    v = draw(v)
                elif callable(v):
                    made = v(_SizesView(sizes))
                    if not isinstance(made, st.SearchStrategy):
                        raise TypeError(f"Scalar {sc.name}: values called on the sizes must return a Hypothesis "
                                        f"strategy, got {type(made).__name__} (wrap a constant in st.just(...))")
                    v = draw(made)
                scalars[sc.name] = v
            return self.build(sizes, launch, scalars, draw(seeds()))

        return draw_problem()

    def make(self, *, seed: int = 0, **values) -> Problem:
        """The problem with these sizes, launch choices and scalars (defaults: sizes at their low
        bound, the first block and choice, scalars' constants) and data from `seed`.  Sizes are whole
        numbers >= 0 (ints or numpy integers, not bools or floats; they may lie outside the Size's
        bounds), `seed` one of the drawn range [0, 2**32 - 1]."""
        sizes = {}
        for s in self.sizes:
            v = values.pop(s.name, s.values_near_edges()[0])
            if not is_whole(v) or v < 0:
                raise TypeError(f"make: size {s.name} must be a whole number >= 0 (an int; the space draws "
                                f"[{s.low}, {s.high}]), got {v!r}")
            sizes[s.name] = int(v)
        if not is_whole(seed) or not 0 <= seed <= 2 ** 32 - 1:
            raise ValueError(f"make: seed must be a whole number in [0, 2**32 - 1] (what the space draws), got {seed!r}")
        launch = {"block": _dims(values.pop("block")) if "block" in values else _first(self.block, _dims)}
        for k, v in self.choices.items():
            launch[k] = values.pop(k) if k in values else _first(v if isinstance(v, st.SearchStrategy) else list(v))
        scalars = {}
        for sc in self.scalars:
            if sc.name in values:
                scalars[sc.name] = values.pop(sc.name)
            elif isinstance(sc.values, st.SearchStrategy) or callable(sc.values):
                raise ValueError(f"make: give a value for scalar {sc.name!r} (it is drawn from a strategy)")
            else:
                scalars[sc.name] = sc.values
        if values:
            raise ValueError(f"make: unknown names {sorted(values)}")
        return self.build(sizes, launch, scalars, seed)

    def build(self, sizes, launch, scalars, seed) -> Problem:
        """A Problem from drawn values: its launch resolved and its arrays made from `seed`."""
        p = Problem(dict(sizes), dict(launch), int(seed), dict(scalars))
        p.block = _dims(launch["block"])
        g = self.grid(p) if callable(self.grid) else self.grid
        dims = (g,) if is_whole(g) or not isinstance(g, (tuple, list)) else tuple(g)
        if not (1 <= len(dims) <= 3 and all(is_whole(d) and d >= 0 for d in dims)):
            raise ValueError(f"ProblemSpace: grid gave {g!r} for problem {p.call_args()}: it must be 1 to 3 whole "
                             "numbers >= 0 (a 0 is launched as 1), e.g. cdiv(p.n, 128) rather than p.n / 128")
        p.grid = tuple(max(1, d) for d in _dims(dims))
        shared = self.shared(p) if callable(self.shared) else self.shared
        if not is_whole(shared) or shared < 0:
            raise ValueError(f"ProblemSpace: shared gave {shared!r} for problem {p.call_args()}: dynamic shared memory "
                             "is a whole number of bytes >= 0")
        p.shared = int(shared)
        rng = np.random.default_rng(p.seed)
        for a in self.arrays:
            p.initial[a.name] = a.make(p, rng)
        p.arrays = p.fresh_arrays()
        return p

    # ------------------------------------------------------------ using a problem
    def kernel_args(self, p: Problem, arrays: dict, param_names, kernel: str = "the kernel") -> list:
        """The launch's argument list: `arrays` (this run's copies) and p's values, in kernel order.
        ValueError when `args=` lists another number of arguments than `param_names` (the parameters of
        `kernel`, which the message names); KeyError for a name that is no value of the problem."""
        order = self.args if self.args is not None else tuple(param_names)
        if len(order) != len(param_names):
            raise ValueError(f"the space's args= lists {len(order)} arguments; {kernel} takes {len(param_names)} "
                             f"({', '.join(param_names)}): give one per parameter, in order")
        table = {**p.sizes, **p.scalars, **p.launch, **arrays}
        out = []
        for item in order:
            if callable(item):
                out.append(item(p))
            elif item in table:
                out.append(table[item])
            else:
                raise KeyError(f"kernel argument {item!r} is not a size, array, scalar or launch choice of the "
                               f"problem space (known: {sorted(table)}); name it so or pass args=")
        return out

    def expected(self, p: Problem) -> dict:
        """{output name: expected array} from the reference; ValueError unless it gives every output, each
        in the output's shape (the array passed to the kernel: bytes for packed int4)."""
        if self.reference is None:
            raise ValueError("ProblemSpace has no reference")
        values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in p.values().items()}
        want = call_with_names(self.reference, values)
        outs = self.outputs
        if not isinstance(want, dict):
            if len(outs) != 1:
                raise ValueError(f"the reference returned one array, but there are {len(outs)} outputs "
                                 f"({', '.join(a.name for a in outs)}): return a dict")
            want = {outs[0].name: want}
        nothing = [k for k, v in want.items() if v is None]
        if nothing:
            raise ValueError(f"the reference returned None for output {', '.join(nothing)} (a missing return?): it "
                             "must return the expected array, or {name: array} for several outputs")
        unknown = set(want) - {a.name for a in outs}
        if unknown:
            raise ValueError(f"the reference returned {sorted(unknown)}, which are not outputs")
        missing = [a.name for a in outs if a.name not in want]
        if missing:
            raise ValueError(f"the reference returned no value for output(s) {missing}: it must give every output "
                             "whole (its poison, or its data as made, where the kernel writes nothing)")
        want = {k: np.asarray(v) for k, v in want.items()}
        for a in outs:
            if a.bf16 and want[a.name].dtype.kind == "f":  # values, not bit patterns: round them to bf16 once
                from ..bfloat16 import to_bf16
                want[a.name] = to_bf16(want[a.name])
            shape = p.initial[a.name].shape
            if want[a.name].shape != shape:
                raise ValueError(f"the reference gave output {a.name} shape {want[a.name].shape}; the array has "
                                 f"shape {shape}")
        return want


def _check_reference(fn, names: list) -> None:
    """TypeError unless `fn` can be called as call_with_names calls it: a function whose parameters
    without defaults are keyword-capable and among `names` (the space's values)."""
    if not callable(fn):
        raise TypeError(f"ProblemSpace: reference must be a function of the problem's named values (e.g. "
                        f"lambda src: src.T), got {type(fn).__name__}")
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: judged when it is called
        return
    positional = [q.name for q in params if q.kind is q.VAR_POSITIONAL or
                  (q.kind is q.POSITIONAL_ONLY and q.default is q.empty)]
    if positional:
        raise TypeError(f"the reference is called with names (those of {sorted(names)}), but takes {positional} "
                        f"positionally: take them as parameters named like the values, or **values")
    if not any(q.kind is q.VAR_KEYWORD for q in params):
        unknown = [q.name for q in params if q.name not in names and q.default is q.empty
                   and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
        if unknown:
            raise TypeError(f"the reference asks for {unknown}, which the problem does not have (it has "
                            f"{sorted(names)})")


def call_with_names(fn, values: dict):
    """fn(**the values its signature names); all of them when it takes **kwargs."""
    sig = inspect.signature(fn)
    params = sig.parameters.values()
    if any(q.kind is q.VAR_KEYWORD for q in params):
        return fn(**values)
    missing = [q.name for q in params if q.name not in values and q.default is q.empty
               and q.kind in (q.POSITIONAL_OR_KEYWORD, q.KEYWORD_ONLY)]
    if missing:
        raise TypeError(f"the reference asks for {missing}, which the problem does not have (it has "
                        f"{sorted(values)})")
    return fn(**{q.name: values[q.name] for q in params if q.name in values})


class _SizesView:
    """Attribute access to a dict of sizes (for `where` and scalar callables)."""

    def __init__(self, d):
        self.__dict__.update(d)

    def __getattr__(self, name):
        raise AttributeError(f"where= and scalar functions see the sizes only ({', '.join(self.__dict__)}), not "
                             f"{name!r}: arrays, scalars and launch choices are drawn after them")


def _first(spec, convert=lambda v: v):
    """The value `make` takes when none is given: a list's first, a constant itself, and for a
    Hypothesis strategy its simplest example."""
    if isinstance(spec, st.SearchStrategy):
        from hypothesis import find
        return convert(find(spec, lambda _: True))
    if isinstance(spec, list):
        return convert(spec[0])
    return convert(spec)
