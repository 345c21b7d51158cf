"""tile_copy_schedules with custom tile widths, tile heights and dtypes draws only schedules that construct:
layouts the drawn width allows, dtypes whose elements fill it, stages whose shared memory fits."""

import pytest
from hypothesis import HealthCheck, find, given, settings, strategies as st
from hypothesis.errors import InvalidArgument

from ptxforge.schedules.tile_copy import TileCopy
from ptxforge.testing.copy_strategies import tile_copy_schedules

CUSTOM_WIDTHS = [(4, 8, 48), (2, 6, 24), (48,), (80, 96, 112), (4, 16, 4096), (1, 3)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_draw_over_custom_widths_constructs(data):
    widths = data.draw(st.sampled_from(CUSTOM_WIDTHS))
    tc = data.draw(tile_copy_schedules(tile_row_bytes=widths, tile_rows=(1, 3, 8, 32), stages=(1, 2, 4, 8),
                                       targets=("sm_80", "sm_90")))
    assert isinstance(tc, TileCopy)
    assert tc.tile_row_bytes in widths
    assert tc.smem_total <= tc.target.limits.shared_per_cta


@settings(max_examples=100, deadline=None)
@given(tile_copy_schedules(tile_row_bytes=(4, 8, 48)))
def test_the_users_widths(tc):
    assert tc.tile_row_bytes in (4, 8, 48)
    if tc.layout != "linear":
        assert tc.tile_row_bytes == 48 and tc.layout == "padded"


@pytest.mark.parametrize("width,kind", [(48, "padded"), (32, "swizzle"), (384, "swizzle"), (8, "linear")])
def test_layouts_the_width_allows_are_still_drawn(width, kind):
    tc = find(tile_copy_schedules(tile_row_bytes=(width,)), lambda t: t.layout == kind,
              settings=settings(max_examples=500, database=None))
    assert tc.tile_row_bytes == width


def test_widths_no_dtype_can_fill_are_an_invalid_argument():
    with pytest.raises(InvalidArgument, match="no tile_row_bytes .* whole f32 elements"):
        find(tile_copy_schedules(tile_row_bytes=(2, 6), dtypes=("f32",)), lambda t: True,
             settings=settings(database=None))


@pytest.mark.parametrize("kw", [dict(threads=(48,)), dict(stages=(0, 2)), dict(stages=(17,)), dict(tile_rows=(0,)),
                                dict(threads=()), dict(max_tiles=0)])
def test_options_no_tile_copy_can_take_are_an_invalid_argument(kw):
    with pytest.raises(InvalidArgument, match="tile_copy_schedules"):
        find(tile_copy_schedules(**kw), lambda t: True, settings=settings(database=None))


def test_tiles_too_large_for_any_option_are_an_invalid_argument():
    with pytest.raises(InvalidArgument, match="shared memory"):
        find(tile_copy_schedules(tile_rows=(4096,), tile_row_bytes=(4096,)), lambda t: True,
             settings=settings(database=None))
