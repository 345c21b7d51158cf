"""Tile copies on a GPU, bit-exact against numpy: drawn shapes, strides, types, layouts and
completions; destinations poisoned before every run; sources of random non-zero bytes."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ptxforge import runtime as rt
from ptxforge.copy import SmemLayout, plan_tile_copy
from support.probe import PROBE_FILL, expected_shared, probe_kernel, probe_out_bytes
from ptxforge.schedules import TileCopy
from ptxforge.schedules.tile_copy import POISON
from ptxforge.testing.copy_strategies import TILE_COPY_DTYPES, copy_situations, tile_copy_requests, tile_copy_schedules

pytestmark = pytest.mark.gpu


def as_bytes(a):
    return np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], -1)


def assert_bit_exact(tc, got, src, dst_before):
    want = tc.reference(src, dst_before)
    g, w = as_bytes(got), as_bytes(want)
    if not np.array_equal(g, w):
        bad = np.argwhere(g != w)
        r, c = bad[0]
        raise AssertionError(f"{len(bad)} bytes differ, first at row {r}, byte {c}: got {g[r, c]:#x}, want "
                             f"{w[r, c]:#x} (poison {POISON:#x})\n{tc.describe()}")


@given(tile_copy_schedules(max_tiles=600, targets=("sm_80", "sm_90"), tile_rows=(1, 3, 8, 16, 32),
                           tile_row_bytes=(16, 32, 64, 128, 256), threads=(32, 64, 128, 256), ctas_per_sm=(1, 2, 4)),
       st.integers(0, 2**32 - 1))
def test_tile_copy_is_bit_exact_over_drawn_shapes(tc, seed):
    src = tc.random_source(seed)
    dst = tc.poisoned_destination()
    got = tc.run(src, dst.copy())
    assert_bit_exact(tc, got, src, dst)


@pytest.mark.parametrize("dtype", TILE_COPY_DTYPES)
@pytest.mark.parametrize("completion", ["groups", "mbarrier"])
@pytest.mark.parametrize("aligned", [True, False])
def test_large_ragged_matrices_in_device_memory(dtype, completion, aligned):
    # 16-byte-aligned strides take the 16-byte path; the others the planner's fallbacks
    cols = {"s4": 6001, "s8": 3001, "bf16": 1501, "f32": 751}[dtype]
    row_bytes = -(-cols * {"s4": 4, "s8": 8, "bf16": 16, "f32": 32}[dtype] // 8)
    itemsize = {"s4": 1, "s8": 1, "bf16": 2, "f32": 4}[dtype]
    stride = -(-row_bytes // 16) * 16 + 16 if aligned else row_bytes + (itemsize if dtype == "s4" else 0)
    stride = -(-stride // itemsize) * itemsize
    tc = TileCopy(1037, cols, dtype, completion=completion, src_row_stride_bytes=stride,
                  dst_row_stride_bytes=stride + (16 if aligned else itemsize), layout="swizzle" if aligned else "linear")
    src = tc.random_source(11)
    before = tc.poisoned_destination()
    d_src = rt.DeviceBuffer.from_host(src)
    d_dst = rt.DeviceBuffer.from_host(before)
    tc.run(d_src, d_dst)
    got = d_dst.to_host()
    assert_bit_exact(tc, got, src, before)
    if aligned:
        assert tc.copy_plan.width_bytes == 16 and tc.store_plan.width_bytes == 16


def test_run_without_a_destination_returns_a_poisoned_then_filled_buffer():
    tc = TileCopy(300, 1000, "bf16", stages=3)
    src = tc.random_source(3)
    got = tc.run(rt.DeviceBuffer.from_host(src)).to_host()
    assert_bit_exact(tc, got, src, tc.poisoned_destination())
    got = tc.run(src)
    assert_bit_exact(tc, got, src, tc.poisoned_destination())


def _run_probe(plan, where, src, *, completion="groups", target="sm_90", bounded=True):
    m = probe_kernel(plan, completion=completion, target=target, bounded=bounded)
    fn = rt.load(m)["copy_probe"]
    out = np.empty(probe_out_bytes(plan), np.uint8)
    fn((1, 1, 1), (plan.threads, 1, 1), rt.In(src), rt.Out(out), where["stride"], where["rows"], where["cols"],
       where["row0"], where["col0"])
    return out


@given(tile_copy_requests(max_rows=24, max_row_bytes=256), st.data())
def test_one_tile_copy_zero_fills_ragged_edges_and_lays_bytes_out_as_modelled(req, data):
    plan = plan_tile_copy(**req)
    where = data.draw(copy_situations(plan))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    src = rng.integers(1, 256, size=(where["rows"], where["stride"]), dtype=np.uint8)
    completion = data.draw(st.sampled_from(["groups", "mbarrier"]))
    got = _run_probe(plan, where, src, completion=completion, target=data.draw(st.sampled_from(["sm_80", "sm_90"])))
    want = expected_shared(plan, src, **{k: where[k] for k in ("row0", "col0", "rows", "cols")})
    np.testing.assert_array_equal(got, want, err_msg=f"{plan.describe()}\n{where}")
    assert PROBE_FILL != 0


def test_int4_operand_tile_into_a_swizzled_layout():
    # the GEMM's case: 64 rows x 128 int4 (64 bytes) per row, 128 threads, 16-byte cp.async.cg
    plan = plan_tile_copy(64, 128, "s4", 128, layout=SmemLayout(64, 64, "swizzle"))
    assert (plan.width_bytes, plan.cache) == (16, ".cg")
    where = dict(rows=100, cols=301, stride=160, row0=64, col0=256)
    src = np.random.default_rng(4).integers(1, 256, size=(100, 160), dtype=np.uint8)
    got = _run_probe(plan, where, src)
    np.testing.assert_array_equal(got, expected_shared(plan, src, row0=64, col0=256, rows=100, cols=301))
