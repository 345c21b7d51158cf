"""TileCopy on the CPU: validation, launch geometry, assembly for sm_80/sm_90, and bit-exact runs
of the emitted kernels on the interpreter, which reports any access outside the buffers, any
race and any read of a copy not yet waited for, and counts the bytes each kernel reads and
writes: every matrix byte is read once and written once, stride padding never touched."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import ValidationError, interp
from ptxforge.schedules import TileCopy
from ptxforge.schedules.tile_copy import POISON
from ptxforge.testing.copy_strategies import TILE_COPY_DTYPES, tile_copy_schedules
from ptxforge.testing.mutants import drop_bar_sync, drop_mbarrier_wait, loosen_wait_group


def run_counted(tc: TileCopy, src, dst, *, kernel=None, check=True):
    """Run tc's kernel (or a mutant of it) on the interpreter over the whole grid, counting traffic.

    One or two CTAs (sm_count=1) walk all the tiles, so every stage of the ring is reused."""
    return interp.run(kernel if kernel is not None else tc.emit(), tc.kernel_name, grid=tc.grid(sm_count=1),
                      block=tc.threads, args=list(tc.args(src, dst)), shared=tc.shared_bytes, check=check,
                      count_accesses=True)


def as_bytes(a):
    return np.ascontiguousarray(a).view(np.uint8).reshape(a.shape[0], -1)


def assert_each_data_byte_moved_once(tc: TileCopy, report):
    """src: every byte of the matrix's rows read exactly once, the stride padding never; dst: the
    same for writes; neither written / read the other way."""
    src, dst = report.accesses["src"], report.accesses["dst"]
    for counts, stride in ((src.reads, tc.src_shape[1] * tc.itemsize), (dst.writes, tc.dst_shape[1] * tc.itemsize)):
        assert counts.shape == (tc.rows, stride)
        want = np.zeros_like(counts)
        want[:, :tc.row_bytes] = 1
        bad = np.argwhere(counts != want)
        assert not len(bad), (f"byte {tuple(bad[0])} moved {counts[tuple(bad[0])]} times, not {want[tuple(bad[0])]} "
                              f"({len(bad)} such bytes); {tc.describe()}")
    assert not src.writes.any() and not dst.reads.any()


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


# ---------------------------------------------------------------- bit-exact on the interpreter

@settings(max_examples=15)
@given(tile_copy_schedules(targets=("sm_80", "sm_90")), st.integers(0, 2**32 - 1))
def test_tile_copy_is_exact_race_free_and_moves_every_matrix_byte_once(tc, seed):
    # every shared byte is tracked: a missing barrier or wait is a race / early-read finding, not
    # just possibly stale data.  The union of all tiles' copies covers the matrix exactly once, on
    # both sides, and never the padding between rows: what a bit-exact comparison cannot see (a
    # byte copied twice, a read of padding that is thrown away)
    src = tc.random_source(seed)
    dst = tc.poisoned_destination()
    want = as_bytes(tc.reference(src, dst))
    report = run_counted(tc, src, dst)
    assert report.ok, str(report)
    np.testing.assert_array_equal(as_bytes(dst), want, err_msg=tc.describe())
    assert_each_data_byte_moved_once(tc, report)


def ragged(dtype, cols, completion):
    """45 rows, ragged on both edges, 64 threads, 3 stages: the ring is reused several times."""
    stride = {"s4": 200, "s8": 136, "bf16": 144, "f32": 160}[dtype]
    return TileCopy(45, cols, dtype, tile_rows=16, tile_cols={"s4": 128, "s8": 64, "bf16": 32, "f32": 16}[dtype],
                    threads=64, stages=3, layout="swizzle", completion=completion, src_row_stride_bytes=stride,
                    dst_row_stride_bytes=stride, ctas_per_sm=1)


@pytest.mark.parametrize("dtype, cols", [("s4", 333), ("s8", 129), ("bf16", 70), ("f32", 37)])
@pytest.mark.parametrize("completion", ["groups", "mbarrier"])
def test_ragged_shapes_per_dtype_on_the_interpreter(dtype, cols, completion):
    tc = ragged(dtype, cols, completion)
    src = tc.random_source(5)
    dst = tc.poisoned_destination()
    assert tc.n_tiles > 2 * tc.stages
    want = as_bytes(tc.reference(src, dst))
    report = run_counted(tc, src, dst)
    np.testing.assert_array_equal(as_bytes(dst), want)
    assert_each_data_byte_moved_once(tc, report)


# planted bugs: (completion, mutation of the kernel, finding kinds it must produce).  The first two
# leave the copied bytes right in this run, so only the interpreter's race tracking catches them.
PLANTED = {
    "groups: no bar.sync between the wait and the store": ("groups", lambda k: drop_bar_sync(k, nth=0), {"race"}),
    "groups: no bar.sync before a stage is refilled": ("groups", lambda k: drop_bar_sync(k, nth=1), {"race"}),
    "groups: wait_group one group too loose": ("groups", loosen_wait_group, {"async"}),
    "mbarrier: no bar.sync after mbarrier.init": ("mbarrier", drop_bar_sync, {"race"}),
    "mbarrier: producers do not wait for an empty stage": ("mbarrier", lambda k: drop_mbarrier_wait(k, nth=0),
                                                           {"async"}),
    "mbarrier: consumers do not wait for a full stage": ("mbarrier", lambda k: drop_mbarrier_wait(k, nth=1),
                                                         {"async", "race"}),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_synchronization_bugs_are_findings(bug):
    completion, mutate, kinds = PLANTED[bug]
    tc = ragged("s8", 129, completion)
    src = tc.random_source(6)
    bad = mutate(tc.emit().kernel(tc.kernel_name))
    report = run_counted(tc, src, tc.poisoned_destination(), kernel=bad, check=False)
    found = {f.kind for f in report.findings}
    assert kinds <= found, f"{bug}: expected {sorted(kinds)} findings, got:\n{report}"


def test_the_pipeline_overlaps_loads_and_the_store_side_reads_other_warps_bytes():
    tc = TileCopy(64, 64, "s8", tile_rows=8, tile_cols=64, threads=64, stages=3, completion="groups")
    kern = tc.emit().kernel(tc.kernel_name)
    mn = [i.mnemonic for i in kern.instructions]
    assert "cp.async.wait_group" in mn
    waits = [i.info for i in kern.instructions if i.opcode == "cp.async.wait_group"]
    assert waits == [tc.stages - 1]
    assert mn.count("bar.sync") == 2


def test_target_is_a_target_and_bounds_shared_memory():
    tc = TileCopy(rows=64, cols=256, dtype="s8", target="sm_80")
    assert isinstance(tc.target, pf.Target) and tc.target.sm == 80
    big = dict(rows=64, cols=4096, dtype="s8", tile_rows=16, tile_cols=4096, stages=3)
    assert TileCopy(**big, target="sm_90").smem_total > 190 * 1024  # fits the 227 KB of sm_90
    with pytest.raises(ValidationError, match="sm_86 may use at most 101376"):
        TileCopy(**big, target="sm_86")


# ---------------------------------------------------------------- TileCopy.interpret

@pytest.mark.parametrize("dtype, cols", [("s4", 333), ("bf16", 70)])
@pytest.mark.parametrize("ctas", [None, 1])
def test_interpret_copies_like_the_reference(dtype, cols, ctas):
    """interpret(): the kernel on the interpreter, one CTA per tile or one CTA walking every tile through the
    ring: dst as the reference, padding untouched (dst starts poisoned), no findings."""
    tc = ragged(dtype, cols, "mbarrier")
    src = tc.random_source(7)
    dst, report = tc.interpret(src, ctas=ctas)
    assert report.ok, str(report)
    assert report.ctas == (tc.n_tiles if ctas is None else 1)
    np.testing.assert_array_equal(as_bytes(dst), as_bytes(tc.reference(src)))
    given = tc.poisoned_destination()
    out, _ = tc.interpret(src, given)
    assert out is given and np.array_equal(as_bytes(given), as_bytes(tc.reference(src)))


def test_bad_arrays_are_refused_before_any_gpu_is_needed():
    """run() and interpret() check host arrays before loading anything: the same error with or without a GPU."""
    tc = ragged("s8", 129, "groups")
    src = tc.random_source(1)
    for call in (tc.run, tc.interpret):
        with pytest.raises(ValidationError, match="src must be a C-contiguous"):
            call(src[:, :-1].copy())
        with pytest.raises(ValidationError, match="dst must be a C-contiguous"):
            call(src, np.zeros((3, 3), np.int8))
    with pytest.raises(ValidationError, match="numpy array"):
        tc.interpret(src.tolist())
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValidationError, match="ctas"):
            tc.interpret(src, ctas=bad)
