"""TileCopy on the CPU: validation, launch geometry, assembly for sm_80/sm_90, and bit-exact runs
of the emitted kernels on the copy simulator (which refuses any access outside the buffers)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import ValidationError, interp
from ptxforge.copy.simulator import CtaSimulator, GlobalMemory
from ptxforge.schedules import TileCopy
from ptxforge.schedules.tile_copy import POISON
from ptxforge.testing.copy_strategies import TILE_COPY_DTYPES, tile_copy_schedules


def simulate(tc: TileCopy, src, dst, *, sm_count=1):
    """Run tc's kernel on the simulator over the whole grid; returns dst's bytes after the run.

    One or two CTAs (sm_count=1) walk all the tiles, so every stage of the ring is reused."""
    m = tc.emit()
    kern = m.kernel(tc.kernel_name)
    mem = GlobalMemory()
    a, b = mem.upload(src), mem.upload(dst)
    sim = CtaSimulator(kern, mem, dynamic_shared=tc.shared_bytes)
    names = [p.name for p in kern.params]
    sim.launch(tc.grid(sm_count=sm_count)[0], tc.threads, dict(zip(names, tc.args(a, b))))
    return np.frombuffer(mem.download(b, dst.nbytes), np.uint8).reshape(dst.shape[0], -1)


def as_bytes(a):
    return np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], -1)


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, match", [
    (dict(rows=4, cols=7, dtype="int4"), "start inside a byte"),
    (dict(rows=4, cols=8, dtype="int5"), "dtype must be one of"),
    (dict(rows=4, cols=8, dtype="s8", threads=100), "multiple of 32"),
    (dict(rows=4, cols=8, dtype="s8", threads=96, completion="mbarrier"), "multiple of 64"),
    (dict(rows=4, cols=8, dtype="s8", completion="tma"), "completion"),
    (dict(rows=4, cols=8, dtype="s8", layout="zigzag"), "layout"),
    (dict(rows=4, cols=8, dtype="s8", src_row_stride_bytes=7), "at least"),
    (dict(rows=4, cols=8, dtype="f32", src_row_stride_bytes=34), "element size"),
    (dict(rows=4, cols=8, dtype="s8", tile_rows=256, tile_cols=1024, stages=2, threads=256), "shared memory"),
    (dict(rows=4, cols=8, dtype="s4", tile_cols=33), "whole bytes"),
    (dict(rows=0, cols=8, dtype="s8"), "positive"),
    (dict(rows=4, cols=8, dtype="s8", stages=17), "at most 16"),
])
def test_bad_parameters_are_refused_with_a_reason(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        TileCopy(**kwargs)


def test_unknown_targets_are_refused():
    with pytest.raises(pf.TargetError):
        TileCopy(4, 8, "s8", target="sm_75")


def test_odd_int4_rows_need_a_whole_byte_stride_and_then_copy_the_half_byte():
    tc = TileCopy(5, 7, "int4", src_row_stride_bytes=4, dst_row_stride_bytes=5)
    assert tc.row_bytes == 4 and tc.src_shape == (5, 4) and tc.dst_shape == (5, 5)
    src = tc.random_source(0)
    ref = tc.reference(src)
    assert (ref[:, :4] == src).all() and (ref[:, 4] == POISON).all()


def test_defaults_and_geometry():
    tc = TileCopy(8192, 8192, "bf16")
    assert tc.tile_cols == 128 and tc.tile_row_bytes == 256
    assert tc.block == (128, 1, 1)
    assert tc.completion == "mbarrier"
    assert tc.grid(sm_count=132) == (132 * 2, 1, 1)
    assert TileCopy(40, 40, "s8").grid(sm_count=132) == (2, 1, 1)
    assert tc.grid((10, 10)) == (1, 1, 1)
    assert tc.shared_bytes == 0 and tc.smem_total == 3 * 8192 + 3 * 2 * 8  # stages + a full/empty mbarrier pair each
    big = TileCopy(8192, 8192, "s8", tile_rows=64, stages=6)
    assert big.uses_dynamic_shared and big.shared_bytes == 6 * 16384 + 6 * 2 * 8
    assert tc.bytes_moved == 2 * 8192 * 8192 * 2
    assert TileCopy(64, 64, "f32").copy_plan.width_bytes == 16


def test_reference_copies_data_bytes_and_leaves_the_rest():
    tc = TileCopy(3, 5, "f32", src_row_stride_bytes=24, dst_row_stride_bytes=28)
    src = tc.random_source(1)
    dst = tc.poisoned_destination()
    out = tc.reference(src, dst)
    assert out.shape == (3, 7) and out.dtype == np.float32
    ob, sb = as_bytes(out), as_bytes(src)
    assert (ob[:, :20] == sb[:, :20]).all() and (ob[:, 20:] == POISON).all()
    assert (sb != 0).all()
    with pytest.raises(ValidationError, match="C-contiguous"):
        tc.reference(src[:, :5])


# ---------------------------------------------------------------- assembly

@pytest.mark.parametrize("dtype", TILE_COPY_DTYPES)
@pytest.mark.parametrize("completion", ["groups", "mbarrier"])
def test_every_dtype_assembles_without_spills_for_sm80_and_sm90(dtype, completion):
    for target in ("sm_80", "sm_90"):
        tc = TileCopy(4096, 4096, dtype, completion=completion, target=target)
        r = pf.assemble(tc.emit())
        res = r.resources(tc.kernel_name)
        assert res.spills == 0 and res.registers <= 64
        assert tc.copy_plan.width_bytes == 16 and tc.store_plan.width_bytes == 16


def test_large_configurations_use_dynamic_shared_memory_and_assemble():
    tc = TileCopy(4096, 4096, "s8", tile_rows=64, tile_cols=512, stages=4, layout="swizzle", completion="mbarrier")
    assert tc.uses_dynamic_shared
    m = tc.emit()
    assert ".extern .shared" in str(m)
    assert pf.assemble(m).resources(tc.kernel_name).spills == 0


def test_emission_is_deterministic_and_shape_independent():
    a = TileCopy(1000, 3008, "s8")
    b = TileCopy(77, 4096, "s8")
    assert str(a.emit()) == str(b.emit())
    assert a.kernel_name == b.kernel_name


# ---------------------------------------------------------------- bit-exact on the simulator

@settings(max_examples=12)
@given(tile_copy_schedules(targets=("sm_80", "sm_90")), st.integers(0, 2**32 - 1))
def test_tile_copy_is_bit_exact_on_the_simulator(tc, seed):
    src = tc.random_source(seed)
    dst = tc.poisoned_destination()
    got = simulate(tc, src, dst)
    np.testing.assert_array_equal(got, as_bytes(tc.reference(src, dst)), err_msg=tc.describe())


@settings(max_examples=15)
@given(tile_copy_schedules(targets=("sm_80", "sm_90")), st.integers(0, 2**32 - 1))
def test_tile_copy_is_exact_and_race_free_on_the_interpreter(tc, seed):
    # an independent executor that also tracks every shared byte: a missing barrier or wait is a
    # race / early-read finding there, not just possibly stale data
    src = tc.random_source(seed)
    dst = tc.poisoned_destination()
    want = as_bytes(tc.reference(src, dst))
    report = interp.run(tc.emit(), tc.kernel_name, grid=tc.grid(sm_count=1), block=tc.threads,
                        args=list(tc.args(src, dst)), shared=tc.shared_bytes)
    assert report.ok, str(report)
    np.testing.assert_array_equal(as_bytes(dst), want, err_msg=tc.describe())


@pytest.mark.parametrize("dtype, cols", [("s4", 333), ("s8", 129), ("bf16", 70), ("f32", 37)])
@pytest.mark.parametrize("completion", ["groups", "mbarrier"])
def test_ragged_shapes_per_dtype_on_the_simulator(dtype, cols, completion):
    stride = {"s4": 200, "s8": 136, "bf16": 144, "f32": 160}[dtype]
    tc = TileCopy(45, cols, dtype, tile_rows=16, tile_cols={"s4": 128, "s8": 64, "bf16": 32, "f32": 16}[dtype],
                  threads=64, stages=3, layout="swizzle", completion=completion, src_row_stride_bytes=stride,
                  dst_row_stride_bytes=stride, ctas_per_sm=1)
    src = tc.random_source(5)
    dst = tc.poisoned_destination()
    assert tc.n_tiles > 2 * tc.stages
    np.testing.assert_array_equal(simulate(tc, src, dst), as_bytes(tc.reference(src, dst)))


def test_the_pipeline_overlaps_loads_and_the_store_side_reads_other_warps_bytes():
    tc = TileCopy(64, 64, "s8", tile_rows=8, tile_cols=64, threads=64, stages=3, completion="groups")
    kern = tc.emit().kernel(tc.kernel_name)
    mn = [i.mnemonic for i in kern.instructions]
    assert "cp.async.wait_group" in mn
    waits = [i.info for i in kern.instructions if i.opcode == "cp.async.wait_group"]
    assert waits == [tc.stages - 1]
    assert mn.count("bar.sync") == 2
