"""Hypothesis strategies for the integer GEMM schedules: legal parameter sets, problem shapes, data.

Every schedule drawn here passes validation, so a property test can assemble it (and, on a GPU,
run it) without filtering.  Use them to property-test kernels built from the same parts.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from ..copy import SmemLayout
from ..isa.targets import Target
from ..schedules.gemm import Int4Gemm, Int8Gemm
from ..schedules.gemm.config import MAX_ACC_REGS, REG_MARGIN, paths_for

TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")


def _native_on(path: str, target: str) -> bool:
    return not path.startswith("native") or Target.parse(target).mma_s4_native


def _stage_bytes(block_m: int, block_n: int, block_k: int, bits: int, layout: str) -> int:
    """Shared memory of one pipeline stage (the A and B tiles, as the schedule lays them out)."""
    row = block_k * bits // 8
    return SmemLayout(block_m, row, layout).nbytes + SmemLayout(block_n, row, layout).nbytes


def _check_options(targets, operands, max_acc, max_threads, copy_bytes):
    """InvalidArgument for options that leave no schedule to draw."""
    if not (targets and operands and copy_bytes):
        raise InvalidArgument("gemm_schedules: targets, operands and copy_bytes each need at least one value")
    if max_threads < 32:
        raise InvalidArgument(f"gemm_schedules: max_threads={max_threads} leaves no warp (a CTA has 32 threads or more)")
    least = min(m * n // 32 for m, n in WARP_TILES)
    if max_acc < least:
        raise InvalidArgument(f"gemm_schedules: max_acc={max_acc} leaves no warp tile: the smallest, 16x16, needs "
                              f"{least} accumulator registers per thread")


#: Warp tiles (M, N) gemm_schedules draws from.
WARP_TILES = tuple((m, n) for m in (16, 32, 48, 64) for n in (16, 32, 64))


@st.composite
def gemm_schedules(draw, *, targets=TARGETS, operands=("s4", "u4", "s8", "u8"), allow_emulated: bool = False,
                   max_acc: int = 64, max_threads: int = 256, copy_bytes=(16, 8, 4, 2, 1)):
    """A legal Int4Gemm / Int8Gemm.

    max_acc bounds the accumulator registers per thread (warp tile area / 32) to keep kernels
    small; allow_emulated lets native 4-bit paths be drawn for targets where ptxas emulates them.
    Tiles, k-steps and layouts are drawn among those whose two stages fit the target's shared
    memory; options that leave nothing to draw (max_acc below 8, no targets...) are an InvalidArgument.
    """
    _check_options(targets, operands, max_acc, max_threads, copy_bytes)
    target = draw(st.sampled_from(targets))
    shared = Target.parse(target).limits.shared_per_cta
    operand = draw(st.sampled_from(operands))
    paths = [p for p in paths_for(operand) if allow_emulated or _native_on(p, target)]
    path = draw(st.sampled_from([None] + paths))
    warps_m = draw(st.sampled_from([w for w in (1, 2, 4) if 32 * w <= max_threads]))
    warps_n = draw(st.sampled_from([w for w in (1, 2, 4) if 32 * warps_m * w <= max_threads]))
    threads = 32 * warps_m * warps_n
    most = min(max_acc, MAX_ACC_REGS, min(255, 65536 // threads // 8 * 8) - REG_MARGIN)
    bits = 4 if operand in ("s4", "u4") else 8
    kstep = 256 // bits

    def fitting(m, n):  # (block_k, layout) whose two stages fit for warp tile m x n
        return [(k, lay) for k in (kstep, 2 * kstep, 4 * kstep) for lay in ("swizzle", "padded")
                if 2 * _stage_bytes(m * warps_m, n * warps_n, k, bits, lay) <= shared]

    tiles = [(m, n) for m, n in WARP_TILES if m * n // 32 <= most and fitting(m, n)]
    warp_m, warp_n = draw(st.sampled_from(tiles))
    options = fitting(warp_m, warp_n)
    block_k = draw(st.sampled_from(sorted({k for k, _ in options})))
    layout = draw(st.sampled_from([lay for k, lay in options if k == block_k]))
    block_m, block_n = warp_m * warps_m, warp_n * warps_n
    per_stage = _stage_bytes(block_m, block_n, block_k, bits, layout)
    stages = draw(st.integers(2, min(4, shared // per_stage)))
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
