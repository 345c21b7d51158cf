"""The emit-side fragment helpers of ptxforge.isa.fragments: each lane map agrees with the numpy
fragment tables, and the PTX it emits (run on the interpreter) agrees with its int evaluation."""

import itertools

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T
from ptxforge.isa.fragments import (INT_OPS, MATRIX_ROW_BYTES, acc_coords, acc_lane_origin, acc_offset, lane_group,
                                    ldmatrix_lane_origin, ldmatrix_tile_origin, matrix_layout, mma_fragment)
from ptxforge.isa.tensor import MMA_FORMS, mma_form

LANES = np.arange(32)
TILE_CASES = [(num, rb, first) for num, rb, first in itertools.product((1, 2, 4), (1, 2, 4), (True, False))
              if num % rb == 0]


@pytest.mark.parametrize("form", MMA_FORMS, ids=str)
def test_acc_coords_is_the_d_fragment_table(form):
    c = mma_fragment(form, "d")
    rows = c.rows.reshape(32, -1)
    cols = c.cols.reshape(32, -1)
    for e in range(rows.shape[1]):
        r, col = acc_coords(form, LANES, e)
        assert np.array_equal(r, rows[:, e]) and np.array_equal(col, cols[:, e]), e
    with pytest.raises(ValueError, match="accumulator elements"):
        acc_coords(form, 0, rows.shape[1])


def test_acc_offset_and_origin_compose():
    g, t = lane_group(LANES)
    assert np.array_equal(g, LANES // 4) and np.array_equal(t, LANES % 4)
    assert [acc_offset(e) for e in range(4)] == [(0, 0), (0, 1), (8, 0), (8, 1)]
    row0, col0 = acc_lane_origin(LANES)
    assert np.array_equal(row0, LANES // 4) and np.array_equal(col0, 2 * (LANES % 4))


def test_ldmatrix_lane_origin_is_the_address_lane_of_the_matrix_layout():
    for num in (1, 2, 4):
        lay = matrix_layout(num, False)
        for lane in range(8 * num):
            j, r = ldmatrix_lane_origin(num, lane)
            assert lay.address_lane(j, r) == lane


def _tile_words(num, row_blocks, rows_first, tile):
    """What ldmatrix.x{num} puts in each lane's registers when lane l addresses the tile row and
    chunk the helper gives: (32, num) words of two b16 halves, modelled with matrix_layout."""
    row, chunk = ldmatrix_tile_origin(num, LANES, row_blocks=row_blocks, rows_first=rows_first)
    chunk = np.broadcast_to(chunk, LANES.shape)
    lay = matrix_layout(num, False)
    out = np.zeros((32, num), np.uint32)
    for lane in range(32):
        for j in range(num):
            src = 8 * j + lay.rows[lane, j, 0]          # the lane that addressed this matrix row
            halves = [tile[row[src], 8 * chunk[src] + lay.cols[lane, j, h]] for h in (0, 1)]
            out[lane, j] = int(halves[0]) | int(halves[1]) << 16
    return out


def test_a_tile_origin_feeds_the_m16_a_fragment():
    """A 16 x 32 B tile (s8), one ldmatrix.x4 rows-first: the registers are the mma A fragment."""
    form = mma_form("m16n8k32", "s8")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (16, 32))                              # bytes
    tile16 = (a[:, 0::2] | (a[:, 1::2] << 8)).astype(np.uint16)     # 16 rows x 16 b16
    words = _tile_words(4, 2, True, tile16)
    frag = mma_fragment(form, "a")
    want = np.zeros((32, 4), np.uint32)
    for lane, r, j in itertools.product(range(32), range(4), range(4)):
        want[lane, r] |= np.uint32(a[frag.rows[lane, r, j], frag.cols[lane, r, j]]) << np.uint32(8 * j)
    assert np.array_equal(words, want)


def test_b_pair_tile_origin_feeds_two_n8_b_fragments():
    """Two n8 blocks of B (16 N-rows x 32 B, K contiguous), one ldmatrix.x4 chunks-first:
    registers {0, 1} are the B fragment of the first block, {2, 3} of the second."""
    form = mma_form("m16n8k32", "s8")
    rng = np.random.default_rng(2)
    bt = rng.integers(0, 256, (16, 32))                             # B^T: N rows, K bytes
    tile16 = (bt[:, 0::2] | (bt[:, 1::2] << 8)).astype(np.uint16)
    words = _tile_words(4, 2, False, tile16)
    frag = mma_fragment(form, "b")                                   # rows = k, cols = n
    for blk in range(2):
        want = np.zeros((32, 2), np.uint32)
        for lane, r, j in itertools.product(range(32), range(2), range(4)):
            kk, nn = frag.rows[lane, r, j], frag.cols[lane, r, j]
            want[lane, r] |= np.uint32(bt[8 * blk + nn, kk]) << np.uint32(8 * j)
        assert np.array_equal(words[:, 2 * blk:2 * blk + 2], want), blk


@pytest.mark.parametrize("num,row_blocks,rows_first", TILE_CASES)
def test_tile_origin_in_bytes_is_sixteen_times_the_chunk(num, row_blocks, rows_first):
    row, chunk = ldmatrix_tile_origin(num, LANES, row_blocks=row_blocks, rows_first=rows_first)
    row_b, byte = ldmatrix_tile_origin(num, LANES, row_blocks=row_blocks, rows_first=rows_first, in_bytes=True)
    assert np.array_equal(row_b, row)
    assert np.array_equal(np.broadcast_to(byte, LANES.shape), MATRIX_ROW_BYTES * np.broadcast_to(chunk, LANES.shape))


@pytest.mark.parametrize("num,row_blocks,rows_first", TILE_CASES)
def test_tile_origin_stays_inside_the_tile(num, row_blocks, rows_first):
    row, chunk = ldmatrix_tile_origin(num, LANES, row_blocks=row_blocks, rows_first=rows_first)
    chunk = np.broadcast_to(chunk, LANES.shape)
    assert row.min() >= 0 and row.max() < 8 * row_blocks
    assert chunk.min() >= 0 and chunk.max() < num // row_blocks
    used = {(int(r) // 8, int(c)) for r, c in zip(row[:8 * num], chunk[:8 * num])}
    assert len(used) == num                                         # each matrix a distinct block


def _emitted(maps):
    """Run a 32-thread kernel storing each map's values of %laneid; returns {name: uint32[32]}."""
    k = pf.KernelBuilder("lane_maps", target="sm_80", reqntid=32)
    outs = [k.param_ptr(f"o{i}", T.u32) for i in range(len(maps))]
    lane = k.laneid()
    off = k.mul(lane, 4, mode="wide")
    for out, fn in zip(outs, maps.values()):
        v = fn(lane, k)
        if isinstance(v, int):
            v = k.mov(v, type=T.u32)
        k.st(k.add(out, off), v, type=T.u32)
    arrays = [np.zeros(32, np.uint32) for _ in maps]
    interp.run(k.module(), block=32, args=arrays)
    return dict(zip(maps, arrays))


def test_emitted_lane_maps_equal_their_int_evaluation():
    maps = {
        "g": lambda lane, ops: lane_group(lane, ops)[0],
        "t": lambda lane, ops: lane_group(lane, ops)[1],
        "acc_row": lambda lane, ops: acc_lane_origin(lane, ops)[0],
        "acc_col": lambda lane, ops: acc_lane_origin(lane, ops)[1],
    }
    for num, rb, first in TILE_CASES:
        for i, what in enumerate(("row", "chunk")):
            for in_bytes in (False, True):
                maps[f"{what}_{num}_{rb}_{first}_{in_bytes}"] = (
                    lambda lane, ops, num=num, rb=rb, first=first, i=i, in_bytes=in_bytes:
                    ldmatrix_tile_origin(num, lane, row_blocks=rb, rows_first=first, in_bytes=in_bytes, ops=ops)[i])
    got = _emitted(maps)
    for name, fn in maps.items():
        want = np.broadcast_to(fn(LANES, INT_OPS), LANES.shape)
        assert np.array_equal(got[name], want), name


def test_the_gemm_lane_patterns_emit_as_before():
    """The A and B ldmatrix.x4 patterns of the GEMM, in bytes: the same instructions the GEMM wrote
    by hand (A: and 15 / shr 4, shl 4; B: and 7, shr 4, shl 3, add / shl 1, and 16)."""
    k = pf.KernelBuilder("pat", target="sm_80")
    lane = k.laneid()
    ldmatrix_tile_origin(4, lane, row_blocks=2, in_bytes=True, ops=k)
    ldmatrix_tile_origin(4, lane, row_blocks=2, rows_first=False, in_bytes=True, ops=k)
    ops = [(i.opcode, i.operands[2].value) for i in k.finish().instructions if i.opcode in ("and", "shr", "shl")]
    assert ops == [("and", 15), ("shr", 4), ("shl", 4), ("and", 7), ("shr", 4), ("shl", 3), ("shl", 1), ("and", 16)]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="1, 2 or 4"):
        ldmatrix_lane_origin(3, 0)
    with pytest.raises(ValueError, match="row_blocks"):
        ldmatrix_tile_origin(2, 0, row_blocks=4)
    with pytest.raises(ValueError, match=">= 0"):
        acc_offset(-1)
    assert MATRIX_ROW_BYTES == 8 * T.b16.bits // 8
