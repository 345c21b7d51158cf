"""Hypothesis strategies for the integer GEMM schedules: legal parameter sets, problem shapes, data.

Every schedule drawn here passes validation, so a property test can assemble it (and, on a GPU,
run it) without filtering.  Use them to property-test kernels built from the same parts.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from ..isa.targets import Target
from ..schedules.gemm import Int4Gemm, Int8Gemm
from ..schedules.gemm.config import MAX_ACC_REGS, REG_MARGIN, paths_for

TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")


def _native_on(path: str, target: str) -> bool:
    return not path.startswith("native") or Target.parse(target).mma_s4_native


@st.composite
def gemm_schedules(draw, *, targets=TARGETS, operands=("s4", "u4", "s8", "u8"), allow_emulated: bool = False,
                   max_acc: int = 64, max_threads: int = 256, copy_bytes=(16, 8, 4, 2, 1)):
    """A legal Int4Gemm / Int8Gemm.

    max_acc bounds the accumulator registers per thread (warp tile area / 32) to keep kernels
    small; allow_emulated lets native 4-bit paths be drawn for targets where ptxas emulates them.
    """
    target = draw(st.sampled_from(targets))
    operand = draw(st.sampled_from(operands))
    paths = [p for p in paths_for(operand) if allow_emulated or _native_on(p, target)]
    path = draw(st.sampled_from([None] + paths))
    warps_m = draw(st.sampled_from([1, 2, 4]))
    warps_n = draw(st.sampled_from([w for w in (1, 2, 4) if 32 * warps_m * w <= max_threads]))
    threads = 32 * warps_m * warps_n
    most = min(max_acc, MAX_ACC_REGS, min(255, 65536 // threads // 8 * 8) - REG_MARGIN)
    tiles = [(m, n) for m in (16, 32, 48, 64) for n in (16, 32, 64) if m * n // 32 <= most]
    warp_m, warp_n = draw(st.sampled_from(tiles))
    bits = 4 if operand in ("s4", "u4") else 8
    kstep = 256 // bits
    block_k = draw(st.sampled_from([kstep, 2 * kstep, 4 * kstep]))
    layout = draw(st.sampled_from(["swizzle", "padded"]))
    block_m, block_n = warp_m * warps_m, warp_n * warps_n
    per_stage = (block_m + block_n) * (block_k * bits // 8 + (16 if layout == "padded" else 0))
    most = min(4, Target.parse(target).limits.shared_per_cta // per_stage)
    stages = draw(st.integers(2, max(2, most)))
    cls = Int4Gemm if bits == 4 else Int8Gemm
    return cls(block_m=block_m, block_n=block_n, block_k=block_k, warps_m=warps_m, warps_n=warps_n,
               stages=stages, path=path, smem_layout=layout, target=target, operand=operand,
               raster_group=draw(st.sampled_from([1, 3, 8])), copy_bytes=draw(st.sampled_from(copy_bytes)),
               c_vector=draw(st.sampled_from([1, 2])))


@st.composite
def gemm_problems(draw, *, max_m: int = 300, max_n: int = 300, max_k: int = 600, bits: int = 4):
    """(M, N, K): any M, N >= 1; K >= 2, even for 4-bit operands."""
    m = draw(st.integers(1, max_m))
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, max_k // 2)) * 2 if bits == 4 else draw(st.integers(1, max_k))
    return m, n, k


@st.composite
def int4_matrices(draw, *, max_rows: int = 16, max_k: int = 64, signed: bool = True):
    """A random int8 matrix of 4-bit values with an even number of columns."""
    rows = draw(st.integers(1, max_rows))
    k = 2 * draw(st.integers(1, max(1, max_k // 2)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    lo, hi = (-8, 7) if signed else (0, 15)
    return np.random.default_rng(seed).integers(lo, hi + 1, size=(rows, k), dtype=np.int8)
