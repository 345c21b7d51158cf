"""Hypothesis strategies for Hopper shared-memory layouts (ptxforge.hopper.SmemTile)."""

from __future__ import annotations

from hypothesis import strategies as st

from ..hopper.layout import SmemTile

_PTXFORGE_INTERNAL = True

_DTYPES = {8: ("s8", "u8"), 16: ("bf16", "f16"), 32: ("f32",)}


@st.composite
def smem_tiles(draw, majors=("K", "MN"), swizzles=(0, 32, 64, 128)):
    """A legal SmemTile a wgmma can read: any major-ness and swizzle, whole atoms and k-steps; 8/16/32-bit
    elements K-major, 16-bit MN-major (only .f16/.bf16 operands transpose)."""
    major = draw(st.sampled_from(majors))
    swz = draw(st.sampled_from(swizzles))
    bits = draw(st.sampled_from((8, 16, 32) if major == "K" else (16,)))
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
def hopper_gemm_configs(draw, operands=("s8", "s4", "bf16", "f16"), *, s4_options: bool = False):
    """Keyword arguments of a HopperGemm, legal or not (the constructor decides: ValidationError or a schedule).

    s4_options: for s4 also draw the options of its register-sourced path (widening, converter warps and
    their buffers, one to four widened B buffers, the k-stages taken in turn by two or three consumers,
    swapped operands, the wgmma group size, B widened ahead, stages split between the consumers, two
    accumulator sets, 512-value stages, rotated stages, L2 prefetch ahead of the ring and before
    griddepcontrol.wait, pdl), so that the combinations the skinny defaults do not use come up too.
    Every operand draws where a K split's partial sums meet (`split_reduce`: in the kernel or in a
    second launch) and the registers a consumer warpgroup raises itself to (`consumer_regs`).
    """
    op = draw(st.sampled_from(operands))
    s4x = s4_options and op == "s4"
    kw = dict(operand=op, block_n=draw(st.sampled_from((32, 64, 128, 256) if s4x else (64, 128, 192, 256))),
              wg_m=draw(st.sampled_from((64, 128))), consumers=draw(st.sampled_from((1, 2))),
              stages=draw(st.integers(2, 6 if s4x else 5)),
              block_k_bytes=draw(st.sampled_from((256, 512) if s4x else (128, 256))),
              raster_group=draw(st.sampled_from((1, 4, 8, 16))))
    kw["consumer_regs"] = draw(st.sampled_from((232, 200, 168)))  # fewer leave room for smaller tiles only
    if op == "s4":
        kw["biased"] = draw(st.booleans())
    kw["cluster_m"], kw["cluster_n"] = draw(st.sampled_from(((1, 1), (2, 1), (1, 2))))
    kw["epilogue"] = draw(st.sampled_from(("registers", "tma")))
    if s4x:  # one arrangement of B's widening, with the options it admits; the rest drawn freely
        kw["scaled"] = not kw["biased"] and draw(st.booleans())
        kw["a_group"] = draw(st.sampled_from((2, 4, 8)) if kw["block_k_bytes"] == 512 else st.sampled_from((2, 4)))
        kw["rotate_k"] = draw(st.booleans())
        kw["l2_prefetch"] = 0 if kw["rotate_k"] else draw(st.sampled_from((0, 2)))
        kw["pdl"] = draw(st.booleans())
        kw["acc_sets"] = draw(st.sampled_from((1, 2)))
        how = draw(st.sampled_from(("between", "ahead", "alternate", "converter", "split", "thirds")))
        if how == "ahead":
            kw["widen_ahead"] = True
        elif how == "converter":
            kw["converter"] = True
            kw["convert_buffers"] = draw(st.integers(2, 4))
        elif how == "alternate":  # two consumers on alternate k-stages: even rings, registers epilogue
            kw.update(interleave_k=True, consumers=2, stages=2 * draw(st.integers(1, 3)), cluster_m=1, cluster_n=1,
                      epilogue="registers", swap_ab=draw(st.booleans()), convert_buffers=draw(st.integers(1, 4)))
            if kw["swap_ab"]:
                kw["block_n"] = draw(st.sampled_from((32, 64)))
        elif how == "thirds":  # three consumers taking every third k-stage: rings of 3 or 6, 152 registers each
            kw.update(interleave_k=True, consumers=3, consumer_regs=152, stages=3 * draw(st.integers(1, 2)),
                      cluster_m=1, cluster_n=1, epilogue="registers", swap_ab=draw(st.booleans()),
                      convert_buffers=draw(st.integers(1, 2)), wg_m=64)
            if kw["swap_ab"]:
                kw["block_n"] = draw(st.sampled_from((32, 64)))
        elif how == "split":  # two consumers on the halves of every stage: 512-value stages, registers epilogue
            kw.update(split_stage=True, consumers=2, block_k_bytes=512, cluster_m=1, cluster_n=1, epilogue="registers",
                      a_group=draw(st.sampled_from((2, 4))), widen_ahead=draw(st.booleans()),
                      swap_ab=draw(st.booleans()))
        else:
            kw["convert_buffers"] = draw(st.integers(1, 4))
        if kw["pdl"] and not kw["rotate_k"] and (kw["cluster_m"], kw["cluster_n"]) == (1, 1):
            kw["early_prefetch"] = draw(st.sampled_from((0, 2, 8)))  # where it is legal: one CTA per unit, in order
    kw["split_reduce"] = draw(st.sampled_from(("kernel", "launch")))  # where a K split's partial sums meet
    if kw.get("epilogue") == "registers":
        kw["wide_c"] = draw(st.booleans())  # C's element offsets in 64 bits (a plan takes it for M x N >= 2^32)
    return kw
