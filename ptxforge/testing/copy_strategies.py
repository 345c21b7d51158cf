"""Hypothesis strategies for data movement: element counts, copy plans, layouts, tile-copy schedules.

They draw from the same rules the copy planner enforces (ptxforge.copy), so a property test can
ask for "any legal request" or "any illegal one" and check what the library does with it.
"""

from __future__ import annotations

from hypothesis import assume, strategies as st
from hypothesis.errors import InvalidArgument

from ..copy import SmemLayout, legal_counts
from ..isa import types as T

#: Element types a copy counts (packed 1- and 4-bit types included).
COPY_ELEM_TYPES = (T.b1, T.s4, T.u4, T.s8, T.u8, T.b16, T.f16, T.bf16, T.s32, T.f32, T.u64, T.f64)
#: The types TileCopy streams.
TILE_COPY_DTYPES = ("s4", "s8", "bf16", "f32")
ALIGNMENTS = (1, 2, 4, 8, 16, 32, 256)


def elem_types():
    """A strategy for the element types the copy layer moves (`COPY_ELEM_TYPES`: 1-bit and packed 4-bit
    up to 64-bit)."""
    return st.sampled_from(COPY_ELEM_TYPES)


@st.composite
def legal_cp_async(draw, types=None):
    """(elem_type, count, nbytes) for one legal cp.async."""
    t = draw(st.sampled_from(types) if types is not None else elem_types())
    legal = legal_counts(t)
    assume(legal)
    w = draw(st.sampled_from(sorted(legal)))
    return t, legal[w], w


@st.composite
def illegal_cp_async(draw):
    """(elem_type, count) that no cp.async can express: not whole bytes, or not 4/8/16 bytes."""
    t = draw(elem_types())
    count = draw(st.integers(min_value=-3, max_value=300))
    legal = set(legal_counts(t).values())
    assume(count not in legal)
    return t, count


@st.composite
def zero_fill_tails(draw, types=None):
    """(elem_type, count, valid, nbytes): a legal copy and a valid-element count in 0..count."""
    t, count, w = draw(legal_cp_async(types))
    valid = draw(st.integers(min_value=0, max_value=count))
    return t, count, valid, w


def _feasible_layouts(rows, row_bytes):
    kinds = ["linear"]
    if row_bytes % 16 == 0:
        kinds.append("padded")
        n = row_bytes // 16
        if n in (1, 2, 4) or n % 8 == 0:
            kinds.append("swizzle")
    return kinds


@st.composite
def smem_layouts(draw, max_rows=40, max_row_bytes=512, kinds=("linear", "padded", "swizzle")):
    """A SmemLayout of any kind its row length allows."""
    kind = draw(st.sampled_from(kinds))
    rows = draw(st.integers(min_value=1, max_value=max_rows))
    if kind == "swizzle":
        row_bytes = draw(st.sampled_from([b for b in (16, 32, 64, 128, 256, 384, 512) if b <= max_row_bytes]))
    elif kind == "padded":
        row_bytes = 16 * draw(st.integers(min_value=1, max_value=max_row_bytes // 16))
    else:
        row_bytes = draw(st.integers(min_value=1, max_value=max_row_bytes))
    pad = 16 * draw(st.integers(min_value=1, max_value=4)) if kind == "padded" else 16
    return SmemLayout(rows, row_bytes, kind, pad)


@st.composite
def tile_copy_requests(draw, max_rows=24, max_row_bytes=256, types=(T.s4, T.u4, T.s8, T.bf16, T.f16, T.f32, T.f64),
                       thread_counts=(32, 64, 96, 128, 256)):
    """Keyword arguments of plan_tile_copy: tile shape, type, threads, source stride/alignment, layout.

    Some requests are legal and some are not (e.g. 2-byte aligned data); the planner decides.
    """
    t = draw(st.sampled_from(types))
    per_byte = 8 // t.bits if t.bits < 8 else 1
    elem_bytes = max(t.bits // 8, 1)
    rows = draw(st.integers(min_value=1, max_value=max_rows))
    row_bytes = elem_bytes * draw(st.integers(min_value=1, max_value=max_row_bytes // elem_bytes))
    cols = row_bytes * per_byte // elem_bytes
    threads = draw(st.sampled_from(thread_counts))
    stride = draw(st.one_of(st.none(), st.integers(min_value=row_bytes, max_value=row_bytes + 64)))
    if stride is not None:
        stride = stride - stride % elem_bytes
        stride = max(stride, row_bytes)
    align = draw(st.sampled_from(ALIGNMENTS))
    kind = draw(st.sampled_from(_feasible_layouts(rows, row_bytes)))
    layout = SmemLayout(rows, row_bytes, kind, 16 * draw(st.integers(1, 3)) if kind == "padded" else 16)
    return dict(rows=rows, cols=cols, elem_type=t, threads=threads, src_row_stride_bytes=stride,
                src_align_bytes=align, layout=layout)


@st.composite
def copy_situations(draw, plan):
    """Where the planned tile sits in a matrix: dict(rows, cols, stride, row0, col0) in elements/bytes.

    The tile origin is a multiple of the tile's shape; the tile may hang over any edge, and the
    matrix may be narrower or shorter than one tile.  The stride keeps the plan's alignment.
    """
    t = plan.elem_type
    w = plan.width_bytes
    tiles_down = draw(st.integers(min_value=0, max_value=2))
    tiles_across = draw(st.integers(min_value=0, max_value=2))
    row0, col0 = tiles_down * plan.rows, tiles_across * plan.cols
    rows = draw(st.integers(min_value=max(1, row0 - plan.rows // 2), max_value=row0 + plan.rows + 3))
    assume(rows > row0 or draw(st.booleans()))  # mostly tiles that touch the matrix
    cols_min = max(1, col0 - plan.cols // 2)
    cols = draw(st.integers(min_value=cols_min, max_value=col0 + plan.cols + 8))
    row_len = -(-cols * t.bits // 8)
    stride = row_len + draw(st.integers(min_value=0, max_value=3 * w))
    stride = -(-stride // w) * w
    return dict(rows=rows, cols=cols, stride=stride, row0=row0, col0=col0)


@st.composite
def tile_copy_schedules(draw, *, max_tiles=12, dtypes=TILE_COPY_DTYPES, targets=("sm_90",),
                        completions=("groups", "mbarrier"), tile_rows=(1, 2, 4, 8, 16),
                        tile_row_bytes=(16, 32, 64, 128), threads=(32, 64, 128), stages=(1, 2, 3, 4),
                        ctas_per_sm=(1, 2)):
    """A TileCopy of any shape up to `max_tiles` tiles (ragged edges included), strides with padding,
    any layout and completion.  Shapes are drawn as a tile count plus a partial last tile.

    Every draw constructs, whatever the options: each choice is drawn among those the rest can
    complete, among the values given (mbarrier completion is drawn only with a thread count that is a
    multiple of 64).  The tile row holds whole elements of the dtype (`tile_row_bytes` a multiple of the
    element size); the layout is one the row's width allows ("padded" needs a multiple of 16 bytes,
    "swizzle" 16, 32, 64 or a multiple of 128); the tile height, completion, threads, target and stage
    count keep the shared memory within the target's and the copies per thread within what the
    planner unrolls, at the narrowest width the strides may force.  Options that leave nothing to draw
    are an InvalidArgument."""
    from ..copy.plan import MAX_COPIES_PER_THREAD
    from ..schedules.tile_copy import TileCopy, DTYPES
    from ..isa.targets import Target

    if not (dtypes and targets and completions and tile_rows and tile_row_bytes and threads and stages
            and ctas_per_sm):
        raise InvalidArgument("tile_copy_schedules: every option needs at least one value")
    bad = ([f"threads {n!r}" for n in threads if isinstance(n, bool) or not isinstance(n, int) or n < 32
            or n > 1024 or n % 32]
           + [f"stages {n!r}" for n in stages if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 16]
           + [f"{what} {n!r}" for what, opts in (("tile_rows", tile_rows), ("tile_row_bytes", tile_row_bytes),
                                                 ("ctas_per_sm", ctas_per_sm))
              for n in opts if isinstance(n, bool) or not isinstance(n, int) or n < 1])
    if bad or isinstance(max_tiles, bool) or not isinstance(max_tiles, int) or max_tiles < 1:
        raise InvalidArgument("tile_copy_schedules: TileCopy cannot take " + (", ".join(bad) or f"max_tiles {max_tiles!r}")
                              + " (threads: multiples of 32 up to 1024; stages: 1 to 16; sizes: positive ints)")
    if not [c for c in completions if c != "mbarrier" or any(n % 64 == 0 for n in threads)]:
        raise InvalidArgument(f"tile_copy_schedules: mbarrier completion splits the CTA into two halves of whole "
                              f"warps, so it needs a multiple of 64 threads; threads {tuple(threads)} has none")
    limits = {name: Target.parse(name).limits.shared_per_cta for name in targets}
    most = max(limits.values())
    cheapest = "groups" if "groups" in completions else completions[0]
    fewest = min(stages)

    def widths(name):  # tile rows of whole elements
        return [b for b in tile_row_bytes if b % max(DTYPES[name][0].bits // 8, 1) == 0]

    def smem(t_rows, t_bytes, layout="linear", completion=cheapest, n=fewest):
        # TileCopy.smem_total: stages of the tile rounded up to 128 bytes, plus a stage's mbarriers
        stage = -(-SmemLayout(t_rows, t_bytes, layout).nbytes // 128) * 128
        return n * (stage + (16 if completion == "mbarrier" else 0))

    def thread_counts(completion):  # mbarrier completion splits the CTA into two halves of whole warps
        return [n for n in threads if completion != "mbarrier" or n % 64 == 0]

    def copies_fit(t_rows, t_bytes, completion, n, itemsize):
        # the narrowest copy a stride can force is one element; each half copies with mbarrier completion
        per_side = n // 2 if completion == "mbarrier" else n
        return -(-(t_rows * t_bytes // itemsize) // per_side) <= MAX_COPIES_PER_THREAD

    def possible(t_rows, t_bytes, itemsize, completion=None):
        return any(smem(t_rows, t_bytes, completion=c) <= most
                   and any(copies_fit(t_rows, t_bytes, c, n, itemsize) for n in thread_counts(c))
                   for c in (completions if completion is None else (completion,)))

    def size_of(name):
        return max(DTYPES[name][0].bits // 8, 1)

    usable = [d for d in dtypes if any(possible(r, b, size_of(d)) for r in tile_rows for b in widths(d))]
    if not usable:
        raise InvalidArgument(
            f"tile_copy_schedules: no tile_row_bytes in {tuple(tile_row_bytes)} holds whole "
            f"{' or '.join(dtypes)} elements" if not any(widths(d) for d in dtypes) else
            f"tile_copy_schedules: no tile of tile_rows {tuple(tile_rows)} x tile_row_bytes {tuple(tile_row_bytes)} "
            f"fits {most} bytes of shared memory in {fewest} stage(s) and {MAX_COPIES_PER_THREAD} copies per "
            f"thread with threads {tuple(threads)}")
    dtype = draw(st.sampled_from(usable))
    t = DTYPES[dtype][0]
    itemsize = size_of(dtype)
    per_byte = 8 // t.bits if t.bits < 8 else 1
    t_rows = draw(st.sampled_from([r for r in tile_rows if any(possible(r, b, itemsize) for b in widths(dtype))]))
    t_bytes = draw(st.sampled_from([b for b in widths(dtype) if possible(t_rows, b, itemsize)]))
    t_cols = t_bytes * per_byte // itemsize
    tiles_y = draw(st.integers(min_value=1, max_value=max_tiles))
    tiles_x = draw(st.integers(min_value=1, max_value=max(1, max_tiles // tiles_y)))
    rows = draw(st.integers(min_value=(tiles_y - 1) * t_rows + 1, max_value=tiles_y * t_rows))
    cols = draw(st.integers(min_value=(tiles_x - 1) * t_cols + 1, max_value=tiles_x * t_cols))
    row_bytes = -(-cols * t.bits // 8)
    need_stride = (cols * t.bits) % 8 != 0

    def stride():
        extra = draw(st.sampled_from([0, 0, 1, 2, 4, 8, 16, 24, 48]))
        return -(-(row_bytes + extra) // itemsize) * itemsize

    s_stride = stride() if need_stride or draw(st.booleans()) else None
    d_stride = stride() if need_stride or draw(st.booleans()) else None
    completion = draw(st.sampled_from([c for c in completions if possible(t_rows, t_bytes, itemsize, c)]))
    n_threads = draw(st.sampled_from([n for n in thread_counts(completion)
                                      if copies_fit(t_rows, t_bytes, completion, n, itemsize)]))
    layout = draw(st.sampled_from([k for k in _feasible_layouts(t_rows, t_bytes)
                                   if smem(t_rows, t_bytes, k, completion) <= most]))
    target = draw(st.sampled_from([name for name in targets
                                   if smem(t_rows, t_bytes, layout, completion) <= limits[name]]))
    n_stages = draw(st.sampled_from([n for n in stages
                                     if smem(t_rows, t_bytes, layout, completion, n) <= limits[target]]))
    return TileCopy(rows, cols, dtype, tile_rows=t_rows, tile_cols=t_cols, threads=n_threads, stages=n_stages,
                    layout=layout, completion=completion, target=target, src_row_stride_bytes=s_stride,
                    dst_row_stride_bytes=d_stride, ctas_per_sm=draw(st.sampled_from(ctas_per_sm)))
