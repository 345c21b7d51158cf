"""Copy planner and TileCopy under the inputs a demanding user passes.

Each test states a promise of `ptxforge.copy` or `TileCopy` that a case at the edge of what they
accept once broke: kernels the planner accepts assemble without spills, shared tiles declared
with too little alignment are refused, integer parameters from numpy are taken as integers.
"""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import ValidationError
from ptxforge.copy import (SmemLayout, emit_copy_commit, emit_copy_wait, emit_tile_copy, emit_tile_store,
                           plan_tile_copy, plan_tile_store)
from ptxforge.isa import types as T
from ptxforge.schedules import TileCopy


def _load_kernel(plan, *, static_stride=None):
    """One bounded global -> shared tile copy with every bound a kernel parameter."""
    k = pf.KernelBuilder("load", target="sm_90", maxntid=plan.threads)
    src = k.param_ptr("src")
    stride, rows, cols, row0, col0 = (k.param_value(n, T.u32) for n in ("stride", "rows", "cols", "row0", "col0"))
    tile = k.shared("tile", -(-plan.smem_layout.nbytes // 16) * 16, plan.smem_layout.base_align)
    emit_tile_copy(k, plan, src=src, src_row_stride=stride if static_stride is None else static_stride, row0=row0,
                   col0=col0, rows_total=rows, cols_total=cols, dst=tile, tid=k.tid())
    emit_copy_commit(k, "groups")
    emit_copy_wait(k, "groups")
    return k.module()


_MIX = 0x9E3779B1  # the store kernels fill shared word i with i * _MIX + 1


def _store_kernel(plan):
    """One bounded shared -> global tile store with every bound a kernel parameter; the shared tile
    first holds `_shared_words(plan)`."""
    k = pf.KernelBuilder("store", target="sm_90", maxntid=plan.threads)
    dst = k.param_ptr("dst")
    stride, rows, cols, row0, col0 = (k.param_value(n, T.u32) for n in ("stride", "rows", "cols", "row0", "col0"))
    nwords = _shared_words(plan).size
    tile = k.shared_base(k.shared("tile", 4 * nwords, 128))
    tid = k.tid()
    with k.for_range(tid, nwords, plan.threads, uniform=False) as i:
        k.st(k.mad(i, 4, tile), k.mad(i, _MIX, 1), type=T.b32, space="shared")
    k.bar_sync(0)
    emit_tile_store(k, plan, src=tile, dst=dst, dst_row_stride=stride, row0=row0, col0=col0, rows_total=rows,
                    cols_total=cols, tid=tid)
    return k.module()


def _shared_words(plan):
    """The words `_store_kernel` writes to shared memory before the store."""
    n = -(-plan.smem_layout.nbytes // 16) * 4
    return (np.arange(n, dtype=np.uint64) * _MIX + 1).astype(np.uint32)


# ---------------------------------------------------------------- no spills for what the planner accepts

@pytest.mark.parametrize("case", [
    # one thread, a packed row of 23 bytes: 115 one-byte loads, each with its own bounds
    ("load", dict(rows=5, cols=46, elem_type="s4", threads=1, src_align_bytes=1)),
    # 128 four-byte stores per thread, each row end clipped byte by byte
    ("store", dict(rows=128, cols=128, elem_type="s8", threads=32, dst_align_bytes=4)),
    # the planner's limit: 256 copies per thread
    ("load", dict(rows=64, cols=128, elem_type="s8", threads=32, src_align_bytes=1)),
    ("store", dict(rows=64, cols=128, elem_type="s8", threads=32, dst_align_bytes=1)),
])
def test_every_plan_within_the_planners_limit_assembles_without_spills(case):
    direction, req = case
    if direction == "load":
        plan = plan_tile_copy(**req)
        m, name = _load_kernel(plan), "load"
    else:
        plan = plan_tile_store(**req)
        m, name = _store_kernel(plan), "store"
    res = pf.assemble(m).resources(name)
    assert res.spills == 0, f"{plan.describe()}: {res}"


def test_a_tile_copy_at_the_planners_limit_assembles_without_spills():
    # 4095-byte rows: 1-byte copies, 256 per producer and per consumer thread
    tc = TileCopy(100, 4095, "s8", tile_rows=32, tile_cols=256, threads=64, completion="mbarrier")
    assert tc.copy_plan.copies_per_thread == tc.store_plan.copies_per_thread == 256
    res = pf.assemble(tc.emit()).resources(tc.kernel_name)
    assert res.spills == 0, str(res)


def _run_load(plan, where, seed):
    """(shared bytes the probe dumps, what they must be, the report) for one bounded tile copy."""
    import sys
    from ptxforge import interp
    from ptxforge.testing.interp_strategies import poison
    from support.probe import PARAMS, expected_shared, probe_kernel, probe_out_bytes
    src = np.random.default_rng(seed).integers(1, 256, size=(where["rows"], where["stride"]), dtype=np.uint8)
    out = poison(np.empty(probe_out_bytes(plan), np.uint8))
    report = interp.run(probe_kernel(plan), block=plan.threads, args=[src, out] + [where[p] for p in PARAMS[2:]],
                        count_accesses=True)
    want = expected_shared(plan, src, **{n: where[n] for n in ("row0", "col0", "rows", "cols")})
    return src, out, want, report


@pytest.mark.parametrize("method, req, where", [
    # 115 one-byte copies per thread, the tile hanging over the matrix's right and bottom edges
    ("ld/st", dict(rows=5, cols=46, elem_type="s4", threads=1, src_align_bytes=1),
     dict(rows=8, cols=61, stride=34, row0=5, col0=46)),
    # 2-byte copies, 7 threads, 80 copies each, the last round partial; odd-length rows clip a copy's last byte
    ("ld/st", dict(rows=20, cols=56, elem_type="s8", threads=7, src_align_bytes=2, layout=SmemLayout(20, 56, "linear")),
     dict(rows=23, cols=63, stride=66, row0=20, col0=0)),
    # 192 four-byte cp.asyncs for one thread, hanging over both edges
    ("cp.async", dict(rows=8, cols=96, elem_type="s8", threads=1, src_align_bytes=4),
     dict(rows=11, cols=150, stride=152, row0=8, col0=96)),
    # 128 sixteen-byte cp.asyncs into a swizzled tile, zero-filled below the matrix
    ("cp.async", dict(rows=8, cols=64, elem_type="f32", threads=1, layout=SmemLayout(8, 256, "swizzle")),
     dict(rows=5, cols=64, stride=256, row0=0, col0=0)),
])
def test_many_copies_per_thread_move_exactly_the_tile(method, req, where):
    plan = plan_tile_copy(**req)
    assert plan.method == method and plan.copies_per_thread > 64
    src, out, want, report = _run_load(plan, where, 5)
    np.testing.assert_array_equal(out, want)
    bits = plan.elem_type.bits
    inside = np.zeros(src.shape, bool)
    inside[where["row0"]:where["row0"] + plan.rows,
           where["col0"] * bits // 8:min(where["col0"] * bits // 8 + plan.row_bytes, -(-where["cols"] * bits // 8))] = True
    reads = report.accesses["src"].reads
    assert (reads[inside] == 1).all() and not reads[~inside].any()


@pytest.mark.parametrize("req, where", [
    (dict(rows=128, cols=128, elem_type="s8", threads=32, dst_align_bytes=4),
     dict(rows=140, cols=201, stride=204, row0=128, col0=128)),
    (dict(rows=9, cols=77, elem_type="s8", threads=7, dst_align_bytes=1),
     dict(rows=15, cols=80, stride=81, row0=9, col0=0)),
])
def test_many_stores_per_thread_write_exactly_the_bytes_inside_the_matrix(req, where):
    from ptxforge import interp
    plan = plan_tile_store(**req)
    assert plan.copies_per_thread > 64
    layout = plan.smem_layout
    tile = _shared_words(plan).view(np.uint8)
    got = np.full((where["rows"], where["stride"]), 0xA5, np.uint8)
    want, inside = got.copy(), np.zeros(got.shape, bool)
    report = interp.run(_store_kernel(plan), block=plan.threads,
                        args=[got] + [where[n] for n in ("stride", "rows", "cols", "row0", "col0")], count_accesses=True)
    for r in range(plan.rows):
        for cb in range(plan.row_bytes):
            gr, gb = where["row0"] + r, where["col0"] + cb
            if gr < where["rows"] and gb < where["cols"]:
                want[gr, gb] = tile[layout.byte_offset(r, cb)]
                inside[gr, gb] = True
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(report.accesses["dst"].writes, inside)  # each byte inside once, nothing else


# ---------------------------------------------------------------- what is refused, and how

@pytest.mark.parametrize("direction", ["load", "store"])
def test_a_shared_tile_declared_less_aligned_than_the_copies_is_refused(direction):
    # 16-byte copies into (or out of) a variable declared 4-byte aligned would fault on a GPU
    plan = (plan_tile_copy if direction == "load" else plan_tile_store)(4, 64, "s8", 32)
    k = pf.KernelBuilder("misaligned", target="sm_90", maxntid=32)
    g = k.param_ptr("g")
    tile = k.shared("tile", 256, 4)
    common = dict(row0=0, col0=0, rows_total=None, cols_total=None, tid=k.tid())
    with pytest.raises(ValidationError, match=r"4-byte aligned.*align=16"):
        if direction == "load":
            emit_tile_copy(k, plan, src=g, src_row_stride=64, dst=tile, **common)
        else:
            emit_tile_store(k, plan, src=tile, dst=g, dst_row_stride=64, **common)
    # declared as the copies need, the same call is accepted
    ok = k.shared("tile16", 256, 16)
    if direction == "load":
        emit_tile_copy(k, plan, src=g, src_row_stride=64, dst=ok, **common)
    else:
        emit_tile_store(k, plan, src=ok, dst=g, dst_row_stride=64, **common)


def test_numpy_integers_are_integers_to_the_planner_and_the_layouts():
    # sizes computed with numpy (a.shape, np.int64 arithmetic) are as good as Python ints, as TileCopy takes them
    i = np.int64
    layout = SmemLayout(i(8), i(64), "swizzle")
    assert layout == SmemLayout(8, 64, "swizzle") and type(layout.rows) is int
    assert SmemLayout(8, 64, "padded", pad_bytes=np.int32(32)).row_stride == 96
    plan = plan_tile_copy(i(8), i(64), "s8", np.int32(32), src_row_stride_bytes=i(136), src_align_bytes=i(16),
                          layout=layout)
    assert plan == plan_tile_copy(8, 64, "s8", 32, src_row_stride_bytes=136, src_align_bytes=16, layout=layout)
    assert plan_tile_store(i(8), i(64), "s8", i(32), dst_row_stride_bytes=i(72)).width_bytes == 8


@pytest.mark.parametrize("make, match", [
    (lambda: SmemLayout(True, 64), "rows"),
    (lambda: SmemLayout(8, 64.0), "row_bytes"),
    (lambda: plan_tile_copy(8, 64, "s8", True), "threads"),
    (lambda: plan_tile_copy(8, 64, "s8", 32, src_align_bytes=16.0), "alignment"),
])
def test_bools_and_floats_are_not_sizes(make, match):
    with pytest.raises(ValidationError, match=match):
        make()


@pytest.mark.parametrize("completion, threads", [("mbarrier", 64), ("groups", 32)])
def test_a_tile_copy_of_looped_one_byte_copies_is_exact_on_the_interpreter(completion, threads):
    # 301-byte rows allow only 1-byte copies: 128 a thread each way, through the pipeline's two stages
    tc = TileCopy(20, 301, "s8", tile_rows=16, tile_cols=256, threads=threads, completion=completion, stages=2)
    assert tc.copy_plan.copies_per_thread == tc.store_plan.copies_per_thread == 128
    src = tc.random_source(3)
    dst, report = tc.interpret(src, ctas=2)
    assert report.ok, str(report)
    np.testing.assert_array_equal(dst, tc.reference(src))


def test_tile_copy_names_its_own_layout_parameter_when_the_tile_cannot_be_swizzled():
    with pytest.raises(ValidationError, match=r"layout='swizzle'.*48.*tile_cols.*layout='padded'") as e:
        TileCopy(8, 48, "s8", tile_cols=48, layout="swizzle")
    assert "kind=" not in str(e.value)


def test_negative_counts_and_boolean_group_counts_are_refused():
    from ptxforge.copy import bits_to_bytes
    with pytest.raises(ValidationError, match="count"):
        bits_to_bytes("s4", -2)
    with pytest.raises(ValidationError, match="count"):
        bits_to_bytes("f32", -1)
    assert bits_to_bytes("s4", 0) == 0 and bits_to_bytes("s4", 6) == 3
    k = pf.KernelBuilder("wait", target="sm_90", maxntid=32)
    with pytest.raises(ValidationError, match="pending"):
        emit_copy_wait(k, "groups", pending=True)
    emit_copy_wait(k, "groups", pending=1)


@pytest.mark.parametrize("bad", [dict(col0=-64), dict(row0=-1), dict(rows_total=-3), dict(cols_total=-1),
                                 dict(src_row_stride=-128), dict(row0=2.0)])
def test_negative_or_non_integer_origins_bounds_and_strides_are_refused(bad):
    # a negative column would address bytes before the matrix; the emitted code would read them
    plan = plan_tile_copy(4, 64, "s8", 32)
    k = pf.KernelBuilder("neg", target="sm_90", maxntid=32)
    args = dict(src=k.param_ptr("src"), src_row_stride=128, row0=0, col0=0, rows_total=None, cols_total=None,
                dst=k.shared("tile", 256, 16), tid=k.tid())
    args.update(bad)
    (name,) = bad
    with pytest.raises(ValidationError, match=name):
        emit_tile_copy(k, plan, **args)


def test_the_tiles_of_a_cta_are_counted_without_wrapping_near_two_to_the_32():
    # TileCopy takes up to 2**32 - 1 tiles; a CTA's share must not wrap when n_tiles + ctas passes 2**32
    from ptxforge import interp
    from ptxforge.schedules.tile_copy_emit import cta_tile_count
    cases = [(2**32 - 1, 0, 264), (2**32 - 1, 263, 264), (2**32 - 2, 5, 7), (10, 3, 4), (10, 10, 4), (3, 7, 8),
             (1, 0, 1), (2**32 - 1, 0, 1)]
    k = pf.KernelBuilder("share", target="sm_90", maxntid=1)
    out = k.param_ptr("out")
    for i, _ in enumerate(cases):
        n, cta, ncta = (k.param_value(f"{name}{i}", T.u32) for name in ("n", "cta", "ncta"))
        k.st(k.add(out, 4 * i), cta_tile_count(k, n, cta, ncta), type=T.u32)
    got = np.zeros(len(cases), np.uint32)
    interp.run(k.module(), block=1, args=[got] + [v for case in cases for v in case])
    want = [max(0, -(-(n - cta) // ncta)) for n, cta, ncta in cases]
    assert got.tolist() == want


def test_rows_whose_last_tile_passes_two_to_the_32_bytes_are_refused():
    # the last tile of a (2**32 - 4)-byte row starts 16 bytes before 2**32: its byte columns would wrap to 0
    # and count as inside the row (a 12-column f32 tile is 48 bytes, 2**32 % 48 == 16)
    with pytest.raises(ValidationError, match=r"2\*\*32"):
        TileCopy(1, 2**30 - 1, "f32", tile_rows=1, tile_cols=12, threads=64)
    assert TileCopy(1, 2**30 - 16, "f32", tile_rows=1, tile_cols=12, threads=64).row_bytes == 2**32 - 64


def test_python_models_refuse_what_lies_outside_the_tile():
    layout = SmemLayout(2, 20)
    assert layout.byte_offset(0, 19) == 19 and layout.byte_offset(1, 0) == 20
    with pytest.raises(ValidationError, match="outside"):
        layout.byte_offset(0, 25)  # past the row's 20 bytes: it was row 1's byte 5
    plan = plan_tile_copy(4, 64, "s8", 32)
    assert plan.copies(15) == [(3, 48)] and plan.copies(31) == []
    for tid in (32, -1):
        with pytest.raises(ValidationError, match="0..31"):
            plan.copies(tid)


def test_layouts_that_place_bytes_alike_compare_equal():
    # pad_bytes means nothing to a linear or swizzled tile: emitting with either spelling is the same layout
    assert SmemLayout(4, 64, "linear", pad_bytes=0) == SmemLayout(4, 64)
    plan = plan_tile_copy(4, 64, "s8", 32)
    k = pf.KernelBuilder("same", target="sm_90", maxntid=32)
    emit_tile_copy(k, plan, src=k.param_ptr("src"), src_row_stride=64, row0=0, col0=0, rows_total=None,
                   cols_total=None, dst=k.shared("tile", 256, 16), tid=k.tid(),
                   layout=SmemLayout(4, 64, "linear", pad_bytes=0))



def test_a_row_stride_past_32_bits_is_refused_as_an_int_and_taken_in_a_u64_register():
    plan = plan_tile_copy(4, 64, "s8", 32)
    k = pf.KernelBuilder("wide", target="sm_90", maxntid=32)
    args = dict(src=k.param_ptr("src"), row0=k.param_value("row0", T.u32), col0=0, rows_total=None, cols_total=None,
                dst=k.shared("tile", 256, 16), tid=k.tid())
    with pytest.raises(ValidationError, match="src_row_stride.*u64 register"):
        emit_tile_copy(k, plan, src_row_stride=2**32 + 16, **args)
    emit_tile_copy(k, plan, src_row_stride=k.param_value("stride", T.u64), **args)
    assert pf.assemble(k.module()).resources("wide").spills == 0



@pytest.mark.parametrize("tid, copies", [(0, 1), (11, 1), (12, 0), (31, 0)])
def test_a_thread_index_known_when_the_kernel_is_written_emits_that_threads_copies(tid, copies):
    # 12 copies for 32 threads: threads 12..31 have none in the only round
    plan = plan_tile_copy(4, 24, "s8", 32, src_align_bytes=8)
    assert [len(plan.copies(t)) for t in (0, 11, 12, 31)] == [1, 1, 0, 0]
    k = pf.KernelBuilder("known", target="sm_90", maxntid=32)
    emit_tile_copy(k, plan, src=k.param_ptr("src"), src_row_stride=24, row0=0, col0=0, rows_total=None,
                   cols_total=None, dst=k.shared("tile", 96, 16), tid=tid)
    assert len([i for i in k.finish().instructions if i.opcode == "cp.async"]) == copies


def test_a_known_thread_index_outside_the_plan_is_refused():
    plan = plan_tile_copy(4, 24, "s8", 32, src_align_bytes=8)
    k = pf.KernelBuilder("known", target="sm_90", maxntid=64)
    with pytest.raises(ValidationError, match=r"tid 32.*0\.\.31"):
        emit_tile_copy(k, plan, src=k.param_ptr("src"), src_row_stride=24, row0=0, col0=0, rows_total=None,
                       cols_total=None, dst=k.shared("tile", 96, 16), tid=32)


def test_the_examples_no_cap_runs_one_cta_per_tile_on_the_interpreter(capsys):
    # `--ctas 0` is documented as "no cap": the grid TileCopy.interpret would use, one CTA per tile
    from support.examples import load_example
    example = load_example("tile_copy")
    argv = ["--interpret", "--ctas", "0", "--rows", "40", "--cols", "300", "--dtype", "s8", "--tile-rows", "8"]
    assert example.main(argv) == 0
    n_tiles = example.make(example.parse(argv)).n_tiles
    assert n_tiles > 8
    assert f"interpreter: {n_tiles} CTAs" in capsys.readouterr().out


def test_a_boolean_is_not_an_alignment_or_a_thread_count():
    from ptxforge.copy import cp_async_elems, mbarrier_arrival_count
    k = pf.KernelBuilder("flags", target="sm_90", maxntid=32)
    src, tile = k.param_ptr("src"), k.shared_base(k.shared("tile", 16, 16))
    with pytest.raises(ValidationError, match="alignment must be a positive number of bytes"):
        cp_async_elems(k, tile, src, "s8", 16, src_align=True)
    with pytest.raises(ValidationError, match="arriving thread"):
        mbarrier_arrival_count(True)
