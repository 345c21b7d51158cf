"""TileCopy: stream a matrix global -> shared -> global through a multi-stage cp.async pipeline.

Each CTA walks its share of the tiles (tile t, t + gridDim, ...), so a few CTAs per SM keep
`stages - 1` tiles in flight while they store an earlier one; the pipeline, not the grid size,
hides memory latency.  It is the data-movement skeleton of every tiled kernel, kept on its own
so it can be checked bit-exactly and timed against a plain device-to-device copy.

Matrices are rows x cols elements of `dtype`, row-major, with row strides in bytes.  Packed
int4 rows of n values are n/2 bytes; an odd n is allowed only with an explicit row stride
(whole bytes, so each row starts on a byte): the last byte's unused high nibble is copied along
with its row, exactly like the padding nibble of the numpy reference.  Bytes of a row beyond
the data (the rest of the stride) are never touched.

completion="groups": every thread copies and stores; cp.async groups plus bar.sync order the
stages.  completion="mbarrier": the first half of the warps are producers (cp.async, arriving
on the stage's "full" mbarrier with .noinc), the second half consumers (wait "full", store,
arrive on "empty"); no CTA-wide barrier in the loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..copy import COMPLETIONS, LAYOUT_KINDS as LAYOUTS  # the names TileCopy validates against
from ..copy import SmemLayout, plan_tile_copy, plan_tile_store
from ..errors import ValidationError
from ..isa import types as T
from ..isa.targets import Target
from .operands import require_numpy

#: dtype name -> (PTX type, numpy container of one element; packed int4 lives in bytes)
DTYPES = {"s4": (T.s4, np.uint8), "s8": (T.s8, np.int8), "bf16": (T.bf16, np.uint16), "f32": (T.f32, np.float32)}
DTYPE_ALIASES = {"int4": "s4", "int8": "s8", "bfloat16": "bf16", "float32": "f32"}
DEFAULT_TILE_ROW_BYTES = 256
POISON = 0xA5

# its frames are skipped when an error names a line: errors about a TileCopy's parameters or arrays name the
# caller's; the instructions are tile_copy_emit's, whose lines the listings show
_PTXFORGE_INTERNAL = True


def canonical_dtype(name) -> str:
    """The canonical dtype name ('s4', 's8', 'bf16', 'f32') of a name or alias such as 'int8'."""
    key = str(name).lower().lstrip(".")
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise ValidationError(f"TileCopy dtype must be one of {sorted(DTYPES)} (or {sorted(DTYPE_ALIASES)}), "
                              f"got {name!r}")
    return key


@dataclass(frozen=True)
class TileCopy:
    """A pipelined tile copy of a rows x cols matrix of `dtype` (see the module docstring).

    tile_cols defaults to 256 bytes of elements.  src/dst_row_stride_bytes default to the packed
    row length.  ctas_per_sm sizes the grid: min(tiles, SMs * ctas_per_sm) CTAs walk the tiles.
    target: the PTX target, stored as a `Target` (a name such as "sm_90" is parsed once, here); its
    `limits` bound the shared memory.  The integer parameters take Python or numpy integers (stored as
    int); bools and floats are refused.
    """

    rows: int
    cols: int
    dtype: str = "s8"
    tile_rows: int = 32
    tile_cols: int | None = None
    threads: int = 128
    stages: int = 3
    layout: str = "linear"
    completion: str = "mbarrier"
    target: Target | str = "sm_90"
    src_row_stride_bytes: int | None = None
    dst_row_stride_bytes: int | None = None
    ctas_per_sm: int = 2
    _plans: tuple = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen dataclass)
        set_("dtype", canonical_dtype(self.dtype))
        t = self.elem
        if self.tile_cols is None:
            set_("tile_cols", DEFAULT_TILE_ROW_BYTES * 8 // t.bits)
        for name in ("rows", "cols", "tile_rows", "tile_cols", "threads", "stages", "ctas_per_sm"):
            v = _integer(getattr(self, name), f"TileCopy.{name}", "a positive integer")
            if v < 1:
                raise ValidationError(f"TileCopy.{name} must be a positive integer, got {v!r}")
            set_(name, v)
        if self.rows >= 2**31 or self.cols >= 2**31:
            raise ValidationError(f"TileCopy handles matrices below 2**31 rows and columns, got {self.rows}x{self.cols}")
        if (self.tile_cols * t.bits) % 8:
            raise ValidationError(f"TileCopy: a tile row of {self.tile_cols} .{t.name} values is not whole bytes; "
                                  f"tile_cols must be a multiple of {8 // t.bits}")
        if self.layout not in LAYOUTS:
            raise ValidationError(f"TileCopy.layout must be one of {LAYOUTS}, got {self.layout!r}")
        chunks = self.tile_row_bytes // 16
        if self.layout != "linear" and (self.tile_row_bytes % 16 or (self.layout == "swizzle" and not (
                chunks in (1, 2, 4) or chunks % 8 == 0))):
            legal = "16, 32, 64 or a multiple of 128" if self.layout == "swizzle" else "a multiple of 16"
            other = "layout='padded' or 'linear'" if self.layout == "swizzle" else "layout='linear'"
            raise ValidationError(
                f"TileCopy.layout={self.layout!r} needs tile rows of {legal} bytes; tile_cols={self.tile_cols} "
                f".{t.name} values are {self.tile_row_bytes} bytes: change tile_cols or use {other}")
        if self.completion not in COMPLETIONS:
            raise ValidationError(f"TileCopy.completion must be one of {COMPLETIONS}, got {self.completion!r}")
        target = Target.parse(self.target)
        set_("target", target)
        if target.sm < 80:
            raise ValidationError(f"TileCopy uses cp.async, which needs sm_80 or newer; got {self.target}")
        if self.threads % 32 or self.threads > 1024:
            raise ValidationError(f"TileCopy.threads must be a multiple of 32 up to 1024, got {self.threads}")
        if self.completion == "mbarrier" and self.threads % 64:
            raise ValidationError(f"completion='mbarrier' splits the CTA into producer and consumer warps: threads "
                                  f"must be a multiple of 64, got {self.threads}")
        if self.stages > 16:
            raise ValidationError(f"TileCopy.stages must be at most 16, got {self.stages}")
        set_("src_row_stride_bytes", self._stride(self.src_row_stride_bytes, "src_row_stride_bytes"))
        set_("dst_row_stride_bytes", self._stride(self.dst_row_stride_bytes, "dst_row_stride_bytes"))
        if self.row_bytes + self.tile_row_bytes > 2**32:  # byte columns of the last tile are u32
            raise ValidationError(f"rows of {self.row_bytes} bytes with tiles of {self.tile_row_bytes}: the last tile's "
                                  f"byte columns would pass 2**32; rows may hold at most 2**32 - {self.tile_row_bytes} "
                                  "bytes (split the matrix into narrower ones)")
        if self.n_tiles >= 2**32:
            raise ValidationError(f"{self.n_tiles} tiles do not fit a 32-bit tile index; use larger tiles")
        copy = plan_tile_copy(self.tile_rows, self.tile_cols, t, self.producers,
                              src_row_stride_bytes=self.src_row_stride_bytes, src_align_bytes=16,
                              layout=self.smem_layout)
        store = plan_tile_store(self.tile_rows, self.tile_cols, t, self.consumers,
                                dst_row_stride_bytes=self.dst_row_stride_bytes, dst_align_bytes=16,
                                layout=self.smem_layout)
        set_("_plans", (copy, store))
        most = target.limits.shared_per_cta
        if self.smem_total > most:
            raise ValidationError(f"TileCopy needs {self.smem_total} bytes of shared memory ({self.stages} stages of "
                                  f"{self.stage_bytes} B); a CTA on {target.name} may use at most {most}: use fewer "
                                  "stages or smaller tiles")

    def _stride(self, stride, name):
        t = self.elem
        if stride is None:
            bits = self.cols * t.bits
            if bits % 8:
                raise ValidationError(
                    f"rows of {self.cols} .{t.name} values are {bits / 8:g} bytes, so packed rows would start "
                    f"inside a byte; give {name} (whole bytes, at least {self.row_bytes}) to pad each row")
            return bits // 8
        stride = _integer(stride, name, f"an integer of at least the row's {self.row_bytes} bytes")
        if stride < self.row_bytes:
            raise ValidationError(f"{name} must be an integer of at least the row's {self.row_bytes} bytes, "
                                  f"got {stride!r}")
        if stride % self.itemsize:
            raise ValidationError(f"{name} {stride} is not a multiple of the {self.itemsize}-byte element size")
        if stride >= 2**32:
            raise ValidationError(f"{name} {stride} does not fit 32 bits")
        return stride

    # ------------------------------------------------------------ derived sizes
    @property
    def elem(self) -> T.ScalarType:
        """The PTX element type of `dtype`."""
        return DTYPES[canonical_dtype(self.dtype)][0]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of one element's container (bytes for packed s4)."""
        return np.dtype(DTYPES[self.dtype][1])

    @property
    def itemsize(self) -> int:
        """Bytes per element of the host container (1 for packed int4: two values per byte)."""
        return self.numpy_dtype.itemsize

    @property
    def row_bytes(self) -> int:
        """Bytes of data in one row (an odd int4 row rounds up to its half-used last byte)."""
        return -(-self.cols * self.elem.bits // 8)

    @property
    def tile_row_bytes(self) -> int:
        """Bytes of one tile row."""
        return self.tile_cols * self.elem.bits // 8

    @property
    def tiles_x(self) -> int:
        """Tiles across the columns (the last one may be ragged)."""
        return -(-self.cols // self.tile_cols)

    @property
    def tiles_y(self) -> int:
        """Tiles down the rows (the last one may be ragged)."""
        return -(-self.rows // self.tile_rows)

    @property
    def n_tiles(self) -> int:
        """Tiles of the whole matrix."""
        return self.tiles_x * self.tiles_y

    @property
    def producers(self) -> int:
        """Threads that copy global -> shared (half the CTA with mbarrier completion, else all)."""
        return self.threads // 2 if self.completion == "mbarrier" else self.threads

    @property
    def consumers(self) -> int:
        """Threads that store shared -> global (the other half with mbarrier completion, else all)."""
        return self.threads - self.producers if self.completion == "mbarrier" else self.threads

    @property
    def smem_layout(self) -> SmemLayout:
        """The `SmemLayout` of one stage's tile."""
        return SmemLayout(self.tile_rows, self.tile_row_bytes, self.layout)

    @property
    def copy_plan(self):
        """The `TileCopyPlan` of the global -> shared copy."""
        return self._plans[0]

    @property
    def store_plan(self):
        """The `TileCopyPlan` of the shared -> global store."""
        return self._plans[1]

    @property
    def stage_bytes(self) -> int:
        """Bytes of one pipeline stage (the tile, rounded up to 128)."""
        return -(-self.smem_layout.nbytes // 128) * 128

    @property
    def mbarrier_bytes(self) -> int:
        """Bytes of the full/empty mbarrier pair of every stage (0 with commit-group completion)."""
        return 16 * self.stages if self.completion == "mbarrier" else 0

    @property
    def smem_total(self) -> int:
        """Shared memory of the CTA: all stages plus their mbarriers."""
        return self.stages * self.stage_bytes + self.mbarrier_bytes

    @property
    def uses_dynamic_shared(self) -> bool:
        """True when the shared memory exceeds what the target allows statically (48 KB)."""
        return self.smem_total > self.target.limits.static_shared

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory to pass at launch (0 when the stages fit static shared memory)."""
        return self.smem_total if self.uses_dynamic_shared else 0

    @property
    def block(self) -> tuple:
        """The CTA shape, (threads, 1, 1)."""
        return (self.threads, 1, 1)

    def grid(self, shape=None, *, sm_count: int = 132) -> tuple:
        """CTAs for a rows x cols `shape` (default: this copy's): min(tiles, sm_count * ctas_per_sm)."""
        if shape is None:
            n = self.n_tiles
        else:
            r, c = shape
            n = -(-r // self.tile_rows) * -(-c // self.tile_cols)
        return (max(1, min(n, sm_count * self.ctas_per_sm)), 1, 1)

    @property
    def kernel_name(self) -> str:
        """The kernel's entry name, spelling out the parameters that change its code."""
        name = (f"tile_copy_{self.dtype}_{self.tile_rows}x{self.tile_cols}_t{self.threads}_s{self.stages}_"
                f"{self.layout}_{self.completion}_w{self.copy_plan.width_bytes}_{self.store_plan.width_bytes}")
        return re.sub(r"[^A-Za-z0-9_]", "_", name)

    @property
    def bytes_moved(self) -> int:
        """Bytes read plus bytes written by one run (the bandwidth numerator)."""
        return 2 * self.rows * self.row_bytes

    def describe(self) -> str:
        """A few lines: the matrix, tiles, threads, stages, the copy and store plans, shared memory."""
        return (f"TileCopy {self.rows}x{self.cols} .{self.dtype}, tiles {self.tile_rows}x{self.tile_cols} "
                f"({self.n_tiles}), {self.threads} threads, {self.stages} stages, {self.layout}, {self.completion}\n"
                f"  load:  {self.copy_plan.describe()}\n  store: {self.store_plan.describe()}\n"
                f"  shared: {self.smem_total} B ({'dynamic' if self.uses_dynamic_shared else 'static'})")

    # ------------------------------------------------------------ host data
    @property
    def src_shape(self) -> tuple:
        """The source array's shape in elements (rows, row stride)."""
        return (self.rows, self.src_row_stride_bytes // self.itemsize)

    @property
    def dst_shape(self) -> tuple:
        """The destination array's shape in elements (rows, row stride)."""
        return (self.rows, self.dst_row_stride_bytes // self.itemsize)

    def random_source(self, rng=None) -> np.ndarray:
        """A source array of random bytes, none of them zero (so zero-fill and skipped bytes show)."""
        rng = np.random.default_rng(rng)
        raw = rng.integers(1, 256, size=self.rows * self.src_row_stride_bytes, dtype=np.uint8)
        return raw.view(self.numpy_dtype).reshape(self.src_shape)

    def poisoned_destination(self) -> np.ndarray:
        """A destination array filled with the POISON byte, so unwritten elements show."""
        raw = np.full(self.rows * self.dst_row_stride_bytes, POISON, dtype=np.uint8)
        return raw.view(self.numpy_dtype).reshape(self.dst_shape)

    def _bytes(self, a, shape, what) -> np.ndarray:
        a = np.asarray(a)
        if a.shape != shape or a.dtype.itemsize != self.itemsize or not a.flags.c_contiguous:
            raise ValidationError(f"{what} must be a C-contiguous {shape} array of {self.itemsize}-byte elements "
                                  f"(rows x row stride), got {a.shape} {a.dtype}")
        return a.view(np.uint8).reshape(self.rows, -1)

    def reference(self, src, dst=None) -> np.ndarray:
        """What the kernel leaves in dst: each row's data bytes from src, dst's other bytes unchanged."""
        s = self._bytes(src, self.src_shape, "src")
        out = self.poisoned_destination() if dst is None else np.array(dst, copy=True)
        o = self._bytes(out, self.dst_shape, "dst")
        o[:, :self.row_bytes] = s[:, :self.row_bytes]
        return out

    def args(self, src, dst) -> tuple:
        """Kernel arguments after the two pointers' owners: src, dst, rows, cols, strides, tiles."""
        return (src, dst, self.rows, self.cols, self.src_row_stride_bytes, self.dst_row_stride_bytes,
                self.tiles_x, self.n_tiles)

    # ------------------------------------------------------------ kernel
    def emit(self):
        """The kernel as a Module (a function of the tile configuration and the strides' alignment)."""
        from .tile_copy_emit import TileCopyEmitter
        return TileCopyEmitter(self).module()

    def run(self, src, dst=None, *, stream=None, ctas=None):
        """Copy `src` on the GPU and return dst.

        src/dst: host numpy arrays (copied in and out) or device arrays (DeviceBuffer, torch,
        CuPy: no copies), shaped as src_shape/dst_shape.  Without dst, a poisoned one is made
        (host for a host src, a DeviceBuffer otherwise).  Device bases must be 16-byte aligned,
        as the plans assume.  `ctas` caps the grid (fewer CTAs walk more tiles each).  stream: None is torch's
        current stream for torch tensors, else the legacy default stream.
        """
        from .. import runtime as rt
        if stream is None:  # torch arrays: torch's current stream (runtime.streams.current_stream_of)
            stream = rt.streams.current_stream_of((src, dst))
        host = isinstance(src, np.ndarray)
        for a, shape, what in ((src, self.src_shape, "src"), (dst, self.dst_shape, "dst")):
            if isinstance(a, np.ndarray):  # host arrays are checked before anything needs a GPU
                self._bytes(a, shape, what)
        fn = rt.load(self.emit())[self.kernel_name]
        grid = self._capped(self.grid(sm_count=rt.device_info().sm_count), ctas)
        if dst is None:
            if host:
                dst = self.poisoned_destination()
            else:
                dst = rt.DeviceBuffer.empty(self.dst_shape, self.numpy_dtype).fill_bytes(POISON, stream=stream)
        for a, shape, what in ((src, self.src_shape, "src"), (dst, self.dst_shape, "dst")):
            if not isinstance(a, np.ndarray):
                _check_device_array(a, self.rows * (shape[1] * self.itemsize), what)
        s_arg = rt.In(src) if isinstance(src, np.ndarray) else src
        d_arg = rt.InOut(dst) if isinstance(dst, np.ndarray) else dst
        fn(grid, self.block, *self.args(s_arg, d_arg), shared=self.shared_bytes, stream=stream)
        return dst


    def interpret(self, src, dst=None, *, ctas=None, check: bool = True):
        """(dst, report): the copy run by this kernel on the CPU interpreter, no GPU needed.

        src/dst: numpy arrays shaped as src_shape/dst_shape (without dst, a poisoned one is made, so
        bytes the copy should not touch show).  The grid is one CTA per tile (`ctas` caps it: fewer CTAs
        walk more tiles each, through more turns of the pipeline).  check=True raises
        `interp.InterpError` at the first finding (a race, a read of cp.async data before its wait, an
        out-of-bounds access); check=False collects them in the report.
        """
        from .. import interp
        for a, what in ((src, "src"), (dst, "dst")):
            if a is not None:
                require_numpy(what, a, "to run on the interpreter")
        self._bytes(src, self.src_shape, "src")
        dst = self.poisoned_destination() if dst is None else dst
        self._bytes(dst, self.dst_shape, "dst")
        grid = self._capped(self.grid(sm_count=self.n_tiles), ctas)
        report = interp.run(self.emit(), self.kernel_name, grid=grid, block=self.block, shared=self.shared_bytes,
                            args=list(self.args(src, dst)), check=check)
        return dst, report

    @staticmethod
    def _capped(grid: tuple, ctas) -> tuple:
        """`grid` with at most `ctas` CTAs (None: as it is)."""
        if ctas is None:
            return grid
        if not T.is_integer(ctas) or ctas < 1:
            raise ValidationError(f"ctas must be a positive int, got {ctas!r}")
        return (min(grid[0], int(ctas)), 1, 1)


def _integer(v, name, what) -> int:
    """`v` as an int when it is a Python or numpy integer; bools, floats and anything else are refused."""
    if not T.is_integer(v):
        raise ValidationError(f"{name} must be {what} (a Python or numpy integer), got {v!r} ({type(v).__name__})")
    return int(v)


def _check_device_array(a, nbytes, what):
    cai = getattr(a, "__cuda_array_interface__", None)
    if cai is None:
        return  # DLPack-only arrays: the runtime checks what it can
    ptr = int(cai["data"][0])
    if ptr % 16:
        raise ValidationError(f"{what} starts at {ptr:#x}, not 16-byte aligned; the copy plans assume 16")
    size = getattr(a, "nbytes", None)
    if size is not None and int(size) < nbytes:
        raise ValidationError(f"{what} holds {size} bytes; the copy needs {nbytes}")
