"""Packing 4-bit integers in numpy: nibble order, round trips, errors, the reference product."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ptxforge.errors import ValidationError
from ptxforge.int4 import (exact_matmul_nt, pack_int4, pack_uint4, random_int4, random_uint4, reference_gemm,
                           reference_gemm_int8, reference_gemm_u4, unpack_int4, unpack_uint4, wrap_int32)
from ptxforge.testing.gemm_strategies import int4_matrices


def test_even_index_goes_to_the_low_nibble():
    # values 1, 2 / -1, -8: byte = low | high << 4 in two's complement nibbles
    assert pack_int4(np.array([1, 2], np.int8)).tolist() == [0x21]
    assert pack_int4(np.array([-1, -8], np.int8)).tolist() == [0x8F]
    assert pack_uint4(np.array([15, 3], np.int8)).tolist() == [0x3F]


def test_unpack_sign_extends():
    assert unpack_int4(np.array([0x8F, 0x70], np.uint8)).tolist() == [-1, -8, 0, 7]
    assert unpack_uint4(np.array([0x8F, 0x70], np.uint8)).tolist() == [15, 8, 0, 7]


@given(int4_matrices())
def test_round_trip(v):
    assert np.array_equal(unpack_int4(pack_int4(v), v.shape[1]), v)


@given(st.integers(1, 5), st.integers(1, 12).map(lambda x: 2 * x), st.integers(0, 1))
def test_round_trip_other_axis(rows, k, signed):
    rng = np.random.default_rng(rows * 100 + k)
    v = random_int4((k, rows), rng, signed=bool(signed))
    p = pack_int4(v, axis=0, signed=bool(signed))
    assert p.shape == (k // 2, rows) and p.dtype == np.uint8
    assert np.array_equal(unpack_int4(p, k, axis=0, signed=bool(signed)), v)


def test_unpack_to_fewer_values():
    v = np.array([[1, -2, 3, -4]], np.int8)
    assert unpack_int4(pack_int4(v), 3).tolist() == [[1, -2, 3]]


@pytest.mark.parametrize("bad, msg", [
    (np.array([1.0, 2.0]), "integer array"),
    (np.array([1, 2, 3], np.int8), "even length"),
    (np.array([8, 0], np.int16), r"\[-8, 7\]"),
    (np.array([-9, 0], np.int16), r"\[-8, 7\]"),
])
def test_pack_errors(bad, msg):
    with pytest.raises(ValidationError, match=msg):
        pack_int4(bad)


def test_pack_unsigned_range():
    with pytest.raises(ValidationError, match=r"\[0, 15\]"):
        pack_uint4(np.array([16, 0]))
    with pytest.raises(ValidationError, match=r"\[0, 15\]"):
        pack_uint4(np.array([-1, 0]))


def test_unpack_errors():
    with pytest.raises(ValidationError, match="uint8"):
        unpack_int4(np.array([1, 2], np.int32))
    with pytest.raises(ValidationError, match="do not fit"):
        unpack_int4(np.array([1, 2], np.uint8), 5)


def test_random_values_cover_the_range():
    rng = np.random.default_rng(1)
    v = random_int4((64, 64), rng)
    assert v.min() == -8 and v.max() == 7 and v.dtype == np.int8
    u = random_uint4((64, 64), rng)
    assert u.min() == 0 and u.max() == 15
    e = random_int4((8, 8), rng, extremes=True)
    assert set(np.unique(e).tolist()) == {-8, 7}


@given(int4_matrices(max_rows=9, max_k=40), st.integers(1, 9), st.integers(0, 2 ** 31))
def test_reference_is_the_integer_product(a, n, seed):
    b = random_int4((n, a.shape[1]), np.random.default_rng(seed))
    want = [[sum(int(x) * int(y) for x, y in zip(ra, rb)) for rb in b] for ra in a]
    got = reference_gemm(pack_int4(a), pack_int4(b), a.shape[1])
    assert got.dtype == np.int64 and got.tolist() == want


def test_reference_unsigned_and_int8():
    rng = np.random.default_rng(2)
    a, b = random_uint4((5, 18), rng), random_uint4((3, 18), rng)
    assert np.array_equal(reference_gemm_u4(pack_uint4(a), pack_uint4(b)), a.astype(np.int64) @ b.T.astype(np.int64))
    a8 = rng.integers(-128, 128, (4, 33), dtype=np.int8)
    b8 = rng.integers(-128, 128, (6, 33), dtype=np.int8)
    assert np.array_equal(reference_gemm_int8(a8, b8), a8.astype(np.int64) @ b8.T.astype(np.int64))


def test_reference_checks_shapes():
    with pytest.raises(ValidationError, match="same K"):
        reference_gemm(np.zeros((2, 3), np.uint8), np.zeros((2, 4), np.uint8))
    with pytest.raises(ValidationError, match="2-D"):
        reference_gemm(np.zeros(3, np.uint8), np.zeros((2, 3), np.uint8))


def test_exact_matmul_extremes():
    # every product is (-8)*(-8): the float64 path must still be exact
    a = np.full((2, 4096), -8, np.int8)
    assert exact_matmul_nt(a, a).tolist() == [[64 * 4096] * 2] * 2


def test_wrap_int32():
    assert wrap_int32(np.array([2 ** 31, -1, 5])).tolist() == [-2 ** 31, -1, 5]
