"""TileCopy's integer parameters take numpy integers (stored as int) and refuse bools and floats."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.schedules.tile_copy import TileCopy

INT_FIELDS = ("rows", "cols", "tile_rows", "tile_cols", "threads", "stages", "ctas_per_sm")
BASE = dict(rows=40, cols=70, dtype="s8", tile_rows=8, tile_cols=32, threads=128, stages=3, ctas_per_sm=2)


@pytest.mark.parametrize("np_int", [np.int64, np.int32, np.uint16, np.intc])
@pytest.mark.parametrize("name", INT_FIELDS + ("src_row_stride_bytes", "dst_row_stride_bytes"))
def test_numpy_integers_are_taken_and_stored_as_int(name, np_int):
    plain = TileCopy(**BASE, src_row_stride_bytes=80, dst_row_stride_bytes=96)
    kw = dict(BASE, src_row_stride_bytes=80, dst_row_stride_bytes=96)
    kw[name] = np_int(kw[name])
    tc = TileCopy(**kw)
    assert type(getattr(tc, name)) is int and getattr(tc, name) == getattr(plain, name)
    assert tc == plain and hash(tc) == hash(plain)
    assert tc.kernel_name == plain.kernel_name


def test_the_users_example():
    tc = TileCopy(np.int64(40), 70, "s8", tile_rows=8, tile_cols=32)
    assert type(tc.rows) is int and tc.rows == 40 and tc.src_shape == (40, 70)


@pytest.mark.parametrize("bad", [True, np.bool_(True), 40.0, np.float64(40), "40", None])
@pytest.mark.parametrize("name", ("rows", "tile_rows", "stages"))
def test_bools_floats_and_other_types_are_refused(name, bad):
    with pytest.raises(pf.ValidationError) as info:
        TileCopy(**dict(BASE, **{name: bad}))
    msg = str(info.value)
    assert f"TileCopy.{name}" in msg and repr(bad) in msg and "integer" in msg


@pytest.mark.parametrize("bad", [True, 80.0, np.float32(80), "80"])
def test_strides_refuse_bools_and_floats(bad):
    with pytest.raises(pf.ValidationError) as info:
        TileCopy(**BASE, src_row_stride_bytes=bad)
    assert "src_row_stride_bytes" in str(info.value) and "integer" in str(info.value)


def test_a_numpy_stride_below_the_row_is_refused_for_its_size_not_its_type():
    with pytest.raises(pf.ValidationError, match="at least the row's 70 bytes, got 64"):
        TileCopy(**BASE, src_row_stride_bytes=np.int64(64))
