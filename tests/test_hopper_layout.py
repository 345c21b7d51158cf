"""Descriptors, canonical layouts and SmemTile: the descriptor a layout makes addresses its numpy model."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxforge.errors import ValidationError
from ptxforge.hopper import SmemTile
from ptxforge.isa.descriptors import (SWIZZLES, DescriptorFields, apply_swizzle, canonical_offset,
                                      decode_descriptor, descriptor_address, encode_descriptor)
from ptxforge.testing.hopper_strategies import smem_tiles


def test_descriptor_bit_positions():
    d = encode_descriptor(0x1230, 0x40, 0x400, 128, base_offset=5)
    assert d & 0x3FFF == 0x123
    assert (d >> 16) & 0x3FFF == 0x4
    assert (d >> 32) & 0x3FFF == 0x40
    assert (d >> 49) & 7 == 5
    assert d >> 62 == 1
    assert encode_descriptor(0, 0, 0, 64) >> 62 == 2
    assert encode_descriptor(0, 0, 0, 32) >> 62 == 3
    assert encode_descriptor(0, 0, 0, 0) >> 62 == 0


def test_descriptor_matches_golden_example():
    # 06_wgmma_s8_sm90a.ptx: LBO_enc 8, SBO_enc 16, no swizzle; cores at i*256 + j*128
    d = encode_descriptor(0x400, 128, 256, 0)
    lo, hi = d & 0xFFFFFFFF, d >> 32
    assert lo == (0x400 >> 4) | (8 << 16) and hi == 16


@given(st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1),
       st.sampled_from(sorted(SWIZZLES)), st.integers(0, 7))
def test_descriptor_round_trip(a, lbo, sbo, swz, base):
    f = decode_descriptor(encode_descriptor(a << 4, lbo << 4, sbo << 4, swz, base))
    assert f == DescriptorFields(a << 4, lbo << 4, sbo << 4, swz, base)


@pytest.mark.parametrize("bad", [dict(start_addr=8), dict(start_addr=1 << 18), dict(swizzle=16),
                                 dict(base_offset=8), dict(leading_byte_offset=-16)])
def test_descriptor_rejects(bad):
    kw = dict(start_addr=0, leading_byte_offset=0, stride_byte_offset=0, swizzle=0)
    kw.update(bad)
    with pytest.raises(ValidationError):
        encode_descriptor(**kw)


def test_swizzle_128_is_chunk_xor_row():
    # row r of a 128-byte-wide tile: chunk c lands at chunk c ^ (r % 8)
    for r in range(16):
        for c in range(8):
            assert canonical_offset("K", 128, 8, 16, 128, r, 16 * c) == r * 128 + 16 * (c ^ (r % 8))
    assert apply_swizzle(0x90, 64) == 0x90 ^ 0x10


@settings(max_examples=60, deadline=None)
@given(smem_tiles(), st.data())
def test_descriptor_addresses_numpy_model(tile, data):
    """For every k-slice, the decoded descriptor reads exactly where element_offsets() says."""
    base = tile.alignment * data.draw(st.integers(0, 8))
    offs = tile.element_offsets()
    assert len(np.unique(offs)) == offs.size  # a bijection onto the tile's bytes
    assert offs.min() >= 0 and offs.max() < tile.nbytes
    ks = data.draw(st.integers(0, tile.k_slices - 1))
    f = decode_descriptor(tile.descriptor(base, ks))
    eb = tile.element_bits // 8
    rows = range(tile.rows)
    for r in rows:
        for c in range(tile.k_elems):
            got = descriptor_address(f, tile.major, tile.element_bits, r, c)
            assert got == base + offs[r, ks * tile.k_elems + c], (r, c)
    assert tile.offset(tile.rows - 1, tile.cols - 1) == offs[-1, -1]
    assert eb * tile.rows * tile.cols == tile.nbytes


def test_smem_tile_facts():
    t = SmemTile("s8", 128, 128)
    assert (t.nbytes, t.alignment, t.tma_box, t.tma_swizzle, t.k_advance_bytes) == (16384, 1024, (128, 128), 128, 32)
    f = t.descriptor_fields(0x2000, 3)
    assert f.start_addr == 0x2000 + 96 and f.stride_byte_offset == 1024
    b = SmemTile("bf16", 256, 64)
    assert b.tma_box == (64, 256) and b.k_elems == 16 and b.k_slices == 4
    n = SmemTile("s8", 64, 64, swizzle=0)
    assert n.tma_copies == 4 and n.tma_box == (16, 64)
    lo, hi = n.descriptor(0, 1) & 0xFFFFFFFF, n.descriptor(0, 1) >> 32
    assert (lo & 0x3FFF) == (2 * 64 * 16) >> 4 and hi & 0x3FFF == 128 >> 4


def test_smem_tile_store_places_bytes():
    t = SmemTile("bf16", 16, 64, swizzle=64)
    x = np.arange(16 * 64, dtype=np.uint16).reshape(16, 64)
    raw = t.store(x)
    offs = t.element_offsets()
    assert raw.view(np.uint8)[offs[5, 33]:offs[5, 33] + 2].view(np.uint16)[0] == x[5, 33]


@pytest.mark.parametrize("kw", [dict(dtype="s4"), dict(cols=100), dict(rows=12), dict(swizzle=16),
                                dict(major="M")])
def test_smem_tile_rejects(kw):
    args = dict(dtype="s8", rows=64, cols=128, major="K", swizzle=128)
    args.update(kw)
    with pytest.raises(ValidationError):
        SmemTile(**args)


@pytest.mark.parametrize("rows,cols", [(64.0, 128), (64, 128.5), (True, 128), ("64", 128)])
def test_smem_tile_takes_int_sizes_only(rows, cols):
    with pytest.raises(ValidationError, match="must be an int"):
        SmemTile("s8", rows, cols)
    assert SmemTile("s8", np.int64(64), 128).nbytes == 8192  # numpy integers are ints


@pytest.mark.parametrize("dtype", ["s8", "u8", "e4m3", "tf32", "f32"])
def test_an_mn_major_tile_wgmma_cannot_transpose_has_no_descriptor(dtype):
    tile = SmemTile(dtype, 128, 64, major="MN", swizzle=128)
    assert tile.tma_box  # still a TMA box
    for get in (lambda: tile.descriptor(0), tile.descriptor_template):
        with pytest.raises(ValidationError, match=f"no wgmma reads an MN-major tile of .{dtype}"):
            get()
    assert SmemTile("bf16", 64, 64, major="MN", swizzle=128).descriptor(0)  # 16-bit operands transpose


def test_misaligned_base_rejected():
    with pytest.raises(ValidationError, match="128-byte aligned"):
        SmemTile("s8", 64, 128).descriptor(512 + 64)
    with pytest.raises(ValidationError, match="128-byte aligned"):
        SmemTile("s8", 64, 128).element_offsets(base=16)


@pytest.mark.parametrize("swz, base", [(128, 0), (128, 1024), (128, 128), (128, 384), (128, 1024 + 896),
                                       (64, 512), (64, 384), (64, 640), (32, 256), (32, 128), (32, 384), (0, 384)])
def test_descriptor_base_offset_stays_zero_at_any_128_byte_base(swz, base):
    """wgmma takes the swizzle row from the absolute address (measured on the H200):
    a tile at any 128-byte boundary keeps base offset 0; the start address field is base >> 4."""
    t = SmemTile("bf16", 64, (swz or 16) // 2 * 2, "K", swz)
    d = t.descriptor(base)
    assert (d >> 49) & 7 == 0 == t.descriptor_fields(base).base_offset
    assert d & 0x3FFF == base >> 4


@settings(max_examples=60, deadline=None)
@given(smem_tiles(), st.data())
def test_a_tile_off_its_pattern_is_read_where_tma_wrote_it(tile, data):
    """A tile at any 128-byte boundary: the descriptor (with its base offset) addresses exactly the bytes
    where the absolute-address swizzle (what TMA writes at that destination) put each element."""
    base = 128 * data.draw(st.integers(0, 63))
    offs = tile.element_offsets(base)
    assert len(np.unique(offs)) == offs.size and offs.min() >= 0 and offs.max() < tile.nbytes
    ks = data.draw(st.integers(0, tile.k_slices - 1))
    f = decode_descriptor(tile.descriptor(base, ks))
    r = np.arange(tile.rows)[:, None]
    c = np.arange(tile.k_elems)[None, :]
    got = descriptor_address(f, tile.major, tile.element_bits, r, c)
    np.testing.assert_array_equal(got, base + offs[:, ks * tile.k_elems:(ks + 1) * tile.k_elems])
    if base % tile.alignment == 0:
        np.testing.assert_array_equal(offs, tile.element_offsets())
    r0, c0 = data.draw(st.integers(0, tile.rows - 1)), data.draw(st.integers(0, tile.cols - 1))
    lin = canonical_offset(tile.major, 0, tile.element_bits, tile.rows, tile.cols, r0, c0) if not tile.swizzle else \
        None
    if lin is not None:  # without swizzle the base changes nothing
        assert offs[r0, c0] == lin
    else:  # the absolute swizzle of base + the unswizzled offset
        from ptxforge.isa.descriptors import canonical_offset_linear
        lo = canonical_offset_linear(tile.major, tile.swizzle, tile.element_bits, tile.rows, tile.cols, r0, c0)
        assert base + offs[r0, c0] == apply_swizzle(base + lo, tile.swizzle)


def test_a_non_zero_base_offset_shifts_the_rows_read():
    """Base offset b: the swizzle row of each address is its absolute row minus b, so the bytes read are
    those of the absolute swizzle b rows further on: the wrong base offset gives wrong bytes."""
    t = SmemTile("s8", 64, 128, "K", 128)
    right = decode_descriptor(t.descriptor(384))
    wrong = DescriptorFields(right.start_addr, right.leading_byte_offset, right.stride_byte_offset, 128, 3)
    r = np.arange(8)[:, None]
    c = np.arange(32)[None, :]
    a_right = descriptor_address(right, "K", 8, r, c)
    a_wrong = descriptor_address(wrong, "K", 8, r, c)
    np.testing.assert_array_equal(a_right, 384 + t.element_offsets(384)[:8, :32])
    np.testing.assert_array_equal(a_wrong, 384 + t.element_offsets(0)[:8, :32])  # rows phased as if at 0
    assert not np.array_equal(a_right, a_wrong)