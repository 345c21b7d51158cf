"""Tile-copy planning: which copy width each thread uses, and which bytes each thread moves.

A plan is pure data.  `plan_tile_copy` (global -> shared) picks the widest cp.async that the
tile's row length, the source alignment and the shared layout all allow (16 bytes when it can),
falls back to 8 and 4, and last to plain loads and stores, recording why.  `plan_tile_store`
(shared -> global) does the same for vector ld.shared/st.global.  `TileCopyPlan.copies(tid)` is
the Python model of the bytes one thread moves; the emitters follow it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..isa import types as T
from .elems import as_elem_type
from .layout import SmemLayout

_PTXFORGE_INTERNAL = True

METHODS = ("cp.async", "ld/st")
#: More copies than this per thread make huge kernels; ask for more threads instead.
MAX_COPIES_PER_THREAD = 256


def lowbit(n: int) -> int:
    """The largest power of two dividing n (n > 0)."""
    return n & -n


@dataclass(frozen=True)
class TileCopyPlan:
    """How `threads` threads copy a rows x cols tile of `elem_type`.

    width_bytes: bytes per copy instruction; method: "cp.async" or "ld/st"; cache: ".cg"/".ca"
    for cp.async (None for ld/st); copies_per_thread: copies each thread issues (the last round
    may leave threads idle; unrolled up to 64 a thread, beyond that a run-time loop of
    batches); reason: why this width.  Copy q (= tid + j*threads)
    moves bytes [(q % copies_per_row) * width, + width) of tile row q // copies_per_row.
    """

    rows: int
    cols: int
    elem_type: T.ScalarType
    threads: int
    width_bytes: int
    method: str
    cache: str | None
    copies_per_thread: int
    reason: str
    layout: SmemLayout | None = None
    direction: str = "g2s"  # "g2s": global -> shared; "s2g": shared -> global

    @property
    def row_bytes(self) -> int:
        """Bytes of one tile row (`cols` elements; packed 4-bit types count half a byte each)."""
        return self.cols * self.elem_type.bits // 8

    @property
    def tile_bytes(self) -> int:
        """Bytes of the whole tile."""
        return self.rows * self.row_bytes

    @property
    def copies_per_row(self) -> int:
        """Copies of `width_bytes` that cover one row."""
        return self.row_bytes // self.width_bytes

    @property
    def total_copies(self) -> int:
        """Copies of `width_bytes` that cover the tile, over all threads."""
        return self.rows * self.copies_per_row

    @property
    def smem_layout(self) -> SmemLayout:
        """The shared-memory layout the copies write: the one given, or a linear tile of `rows` x `row_bytes`.
        """
        return self.layout if self.layout is not None else SmemLayout(self.rows, self.row_bytes, "linear")

    def copies(self, tid: int):
        """[(row, col_byte)] that thread `tid` (0..threads-1) moves, each `width_bytes` long, in issue order."""
        if not T.is_integer(tid) or not 0 <= tid < self.threads:
            raise ValidationError(f"thread {tid!r} is not one of the plan's threads 0..{self.threads - 1}")
        tid = int(tid)
        out = []
        for j in range(self.copies_per_thread):
            q = tid + j * self.threads
            if q < self.total_copies:
                out.append((q // self.copies_per_row, q % self.copies_per_row * self.width_bytes))
        return out

    def describe(self) -> str:
        """One line for listings and reports: the tile, the method and width chosen, copies per thread and why.
        """
        what = (f"{self.method} {self.cache} {self.width_bytes} B" if self.method == "cp.async"
                else f"ld/st {self.width_bytes} B")
        return (f"{self.rows}x{self.cols} .{self.elem_type.name} ({self.tile_bytes} B) by {self.threads} threads: "
                f"{what}, {self.copies_per_thread} per thread; {self.reason}")


def _as_int(v):
    """A Python or numpy integer as an int; anything else (bools and floats included) as it is."""
    return int(v) if T.is_integer(v) else v


def _check_common(rows, cols, t, threads, layout):
    """(rows, cols, threads as ints, row bytes, the layout) after checking them."""
    rows, cols, threads = _as_int(rows), _as_int(cols), _as_int(threads)
    for name, v in (("rows", rows), ("cols", cols), ("threads", threads)):
        if not T.is_integer(v) or v < 1:
            raise ValidationError(f"tile copy: {name} must be a positive int, got {v!r}")
    if threads > 1024:
        raise ValidationError(f"tile copy: {threads} threads; a CTA has at most 1024")
    bits = cols * t.bits
    if bits % 8:
        raise ValidationError(
            f"tile copy: a tile row of {cols} .{t.name} values is {bits / 8:g} bytes; tile rows must be whole "
            f"bytes (cols a multiple of {8 // t.bits} for .{t.name})")
    row_bytes = bits // 8
    if layout is None:
        layout = SmemLayout(rows, row_bytes, "linear")
    if not isinstance(layout, SmemLayout):
        raise ValidationError(f"layout must be a SmemLayout, got {layout!r}")
    if (layout.rows, layout.row_bytes) != (rows, row_bytes):
        raise ValidationError(f"layout is {layout.rows} rows x {layout.row_bytes} B, but the tile is {rows} rows x "
                              f"{row_bytes} B ({cols} .{t.name})")
    return rows, cols, threads, row_bytes, layout


def _align_of(what, align, stride):
    """(alignment every row start keeps, text naming the limit)."""
    align, stride = _as_int(align), _as_int(stride)
    if not T.is_integer(align) or align < 1:
        raise ValidationError(f"{what} alignment must be a positive number of bytes, got {align!r}")
    a, why = lowbit(align), f"{what} is {lowbit(align)}-byte aligned"
    if stride is not None:
        if not T.is_integer(stride) or stride < 1:
            raise ValidationError(f"{what} row stride must be a positive number of bytes, got {stride!r}")
        if lowbit(stride) < a:
            a, why = lowbit(stride), f"{what} rows are {stride} bytes apart (only {lowbit(stride)}-byte aligned)"
    return a, why


def _widest(widths, row_bytes, src_a, dst_a):
    for w in widths:
        if row_bytes % w == 0 and src_a % w == 0 and dst_a % w == 0:
            return w
    return None


def _limit_text(w, row_bytes, src, dst):
    """Why width w is not possible."""
    if row_bytes % w:
        return f"tile rows are {row_bytes} bytes (not a multiple of {w})"
    if src[0] % w:
        return src[1]
    return dst[1]


def _per_thread(total, threads):
    cpt = -(-total // threads)
    if cpt > MAX_COPIES_PER_THREAD:
        raise ValidationError(f"tile copy: {cpt} copies per thread would be emitted; use more threads or a "
                              f"smaller tile (at most {MAX_COPIES_PER_THREAD} per thread)")
    return cpt


def plan_tile_copy(rows, cols, elem_type, threads, *, src_row_stride_bytes=None, src_align_bytes=16,
                   layout=None) -> TileCopyPlan:
    """Plan a global -> shared copy of a rows x cols tile (cols in elements) by `threads` threads.

    src_align_bytes: alignment of the matrix's element (0, 0) in global memory.
    src_row_stride_bytes: bytes between source rows when known (its alignment limits the width).
    layout: the shared layout of the tile (default: linear rows).  Its base must be 16-byte aligned.
    Tile origins are assumed to sit at multiples of the tile's width (so every copy keeps the
    alignment the plan assumed).

    Picks the widest cp.async (16, 8, 4 bytes) that the row length and both alignments allow;
    when none does (e.g. 2-byte-aligned rows) falls back to plain ld.global/st.shared of 2 or 1
    bytes.  `reason` says which limit decided.
    """
    t = as_elem_type(elem_type)
    rows, cols, threads, row_bytes, layout = _check_common(rows, cols, t, threads, layout)
    src = _align_of("the source", src_align_bytes, src_row_stride_bytes)
    dst = _align_of("the shared tile", 16, layout.row_stride)
    w = _widest((16, 8, 4), row_bytes, src[0], dst[0])
    if w is not None:
        method, cache = "cp.async", ".cg" if w == 16 else ".ca"
        if w == 16:
            reason = "16-byte cp.async.cg (the widest): rows and both alignments allow it"
        else:
            reason = (f"{w}-byte cp.async.ca: {2 * w} bytes are not possible because "
                      f"{_limit_text(2 * w, row_bytes, src, dst)}")
    else:
        w = _widest((2, 1), row_bytes, src[0], dst[0])
        method, cache = "ld/st", None
        reason = (f"plain {w}-byte ld.global/st.shared: cp.async needs at least 4 bytes, and "
                  f"{_limit_text(4, row_bytes, src, dst)}")
    cpt = _per_thread(rows * row_bytes // w, threads)
    return TileCopyPlan(rows, cols, t, threads, w, method, cache, cpt, reason, layout, "g2s")


def plan_tile_store(rows, cols, elem_type, threads, *, dst_row_stride_bytes=None, dst_align_bytes=16,
                    layout=None) -> TileCopyPlan:
    """Plan a shared -> global store of a tile with vector ld.shared/st.global (16, 8, 4, 2, 1 bytes)."""
    t = as_elem_type(elem_type)
    rows, cols, threads, row_bytes, layout = _check_common(rows, cols, t, threads, layout)
    dst = _align_of("the destination", dst_align_bytes, dst_row_stride_bytes)
    src = _align_of("the shared tile", 16, layout.row_stride)
    w = _widest((16, 8, 4, 2, 1), row_bytes, dst[0], src[0])
    reason = ("16-byte vector stores (the widest)" if w == 16 else
              f"{w}-byte stores: {2 * w} bytes are not possible because "
              f"{_limit_text(2 * w, row_bytes, dst, src)}")
    cpt = _per_thread(rows * row_bytes // w, threads)
    return TileCopyPlan(rows, cols, t, threads, w, "ld/st", None, cpt, reason, layout, "s2g")
