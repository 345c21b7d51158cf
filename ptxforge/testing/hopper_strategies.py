"""Hypothesis strategies for Hopper shared-memory layouts (ptxforge.hopper.SmemTile)."""

from __future__ import annotations

from hypothesis import strategies as st

from ..hopper.layout import SmemTile

_PTXFORGE_INTERNAL = True

_DTYPES = {8: ("s8", "u8"), 16: ("bf16", "f16"), 32: ("f32",)}


@st.composite
def smem_tiles(draw, majors=("K", "MN"), swizzles=(0, 32, 64, 128)):
    """A legal SmemTile: any major-ness and swizzle, 8/16/32-bit elements, whole atoms and k-steps."""
    major = draw(st.sampled_from(majors))
    swz = draw(st.sampled_from(swizzles))
    bits = draw(st.sampled_from((8, 16, 32)))
    dtype = draw(st.sampled_from(_DTYPES[bits]))
    eb = bits // 8
    span = swz or 16
    kstep = 32 // eb
    if major == "K":
        # cols (K): whole atoms of `span` bytes and whole 32-byte k-steps; rows: multiples of 8
        unit = max(span // eb, kstep)
        cols = unit * draw(st.integers(1, 3))
        rows = 8 * draw(st.integers(1, 8))
    else:
        rows = (span // eb) * draw(st.integers(1, 3))
        rows = max(rows, 8) if rows % 8 == 0 else rows * 8
        cols = kstep * draw(st.integers(1, 4))
        cols = cols if cols % 8 == 0 else cols * 8
    return SmemTile(dtype, rows, cols, major, swz)


@st.composite
def hopper_gemm_configs(draw, operands=("s8", "s4", "bf16", "f16")):
    """Keyword arguments of a HopperGemm, legal or not (the constructor decides: ValidationError or a schedule)."""
    op = draw(st.sampled_from(operands))
    kw = dict(operand=op, block_n=draw(st.sampled_from((64, 128, 192, 256))), wg_m=draw(st.sampled_from((64, 128))),
              consumers=draw(st.sampled_from((1, 2))), stages=draw(st.integers(2, 5)),
              block_k_bytes=draw(st.sampled_from((128, 256))), raster_group=draw(st.sampled_from((1, 4, 8, 16))))
    if op == "s4":
        kw["biased"] = draw(st.booleans())
    kw["cluster_m"], kw["cluster_n"] = draw(st.sampled_from(((1, 1), (2, 1), (1, 2))))
    kw["epilogue"] = draw(st.sampled_from(("registers", "tma")))
    return kw
