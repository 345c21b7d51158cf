"""Data movement building blocks: element counts -> cp.async bytes, layouts, copy plans, emission.

Everything here runs on the CPU: plans are checked against an independent model of which bytes
each thread moves, emitted kernels are assembled (nvJitLink/ptxas) and executed on the
interpreter, which reports any access outside the buffers, any race and any read of a copy not
yet waited for, and counts every byte each kernel reads and writes: a copy must read the tile's
bytes inside the matrix exactly once and nothing else.
"""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import ValidationError, interp
from ptxforge.copy import (SmemLayout, as_elem_type, cp_async_bytes, cp_async_elems, emit_copy_commit, emit_copy_wait,
                           emit_tile_copy, emit_tile_store, legal_counts, plan_tile_copy, plan_tile_store)
from support.probe import PARAMS, expected_shared, probe_kernel, probe_out_bytes
from ptxforge.isa import types as T
from ptxforge.isa.async_copy import CpAsyncInfo
from ptxforge.testing.copy_strategies import (COPY_ELEM_TYPES, copy_situations, illegal_cp_async, legal_cp_async,
                                              smem_layouts, tile_copy_requests, zero_fill_tails)
from ptxforge.testing.interp_strategies import poison
from ptxforge.testing.mutants import drop_bar_sync, drop_mbarrier_wait, loosen_wait_group


def cp_asyncs(kernel):
    return [i for i in kernel.instructions if i.opcode == "cp.async"]


def run_probe(plan, src, where, *, module=None, check=True, **probe_options):
    """The probe's output bytes and the interpreter's report (with traffic counts)."""
    m = module if module is not None else probe_kernel(plan, **probe_options)
    out = poison(np.empty(probe_out_bytes(plan), np.uint8))
    report = interp.run(m, block=plan.threads, args=[src, out] + [where[p] for p in PARAMS[2:]], check=check,
                        count_accesses=True)
    return out, report


def tile_inside(plan, shape, *, row0, col0, rows, cols):
    """Mask over a matrix's bytes (`shape`: rows x stride): the tile's bytes that hold matrix data."""
    bits = plan.elem_type.bits
    row_len, c0 = -(-cols * bits // 8), col0 * bits // 8
    mask = np.zeros(shape, bool)
    mask[row0:min(row0 + plan.rows, rows), c0:min(c0 + plan.row_bytes, row_len)] = True
    return mask


def assert_reads_the_tile_once(report, plan, src, where):
    """Every tile byte inside the matrix read exactly once; padding, other rows, other columns never."""
    want = tile_inside(plan, src.shape, **{k: where[k] for k in ("row0", "col0", "rows", "cols")})
    reads = report.accesses["src"].reads
    outside = reads[~want]
    assert not outside.any(), f"read outside the tile's matrix data: byte ranges {report.accesses['src'].read_ranges()}"
    assert (reads[want] == 1).all(), f"tile bytes read {sorted(set(reads[want].tolist()))} times, not once each"
    assert not report.accesses["src"].writes.any()


# ---------------------------------------------------------------- element counts -> bytes

def test_legal_counts_table_matches_the_ptx_notes():
    # ptx-notes §2.5: int4 8/16/32, int8 4/8/16, f16/bf16 2/4/8, f32 1/2/4, f64 -/1/2
    assert legal_counts("s4") == {4: 8, 8: 16, 16: 32}
    assert legal_counts("int8") == {4: 4, 8: 8, 16: 16}
    assert legal_counts("bf16") == {4: 2, 8: 4, 16: 8}
    assert legal_counts("f32") == {4: 1, 8: 2, 16: 4}
    assert legal_counts("f64") == {8: 1, 16: 2}


@given(legal_cp_async())
def test_legal_counts_give_4_8_or_16_bytes(req):
    t, count, w = req
    assert cp_async_bytes(t, count) == w == count * t.bits // 8
    assert w in (4, 8, 16)


@given(illegal_cp_async())
def test_illegal_counts_are_refused_with_the_legal_ones_named(req):
    t, count = req
    with pytest.raises(ValidationError) as e:
        cp_async_bytes(t, count)
    legal = legal_counts(t)
    for n in legal.values():
        assert f"{n} (" in str(e.value)


def test_eight_int4_values_are_four_bytes_not_eight():
    # the silent over-copy of ptx-notes §2.5: "8" for 8 int4 values would copy 16 of them
    assert cp_async_bytes("int4", 8) == 4
    with pytest.raises(ValidationError, match="whole number of bytes"):
        cp_async_bytes("s4", 7)


def _kernel(target="sm_90"):
    k = pf.KernelBuilder("cp", target=target, maxntid=32)
    src = k.param_ptr("src")
    sm = k.shared("buf", 64, 16)
    return k, src, k.shared_base(sm)


@given(zero_fill_tails())
def test_cp_async_elems_converts_the_tail_to_bytes(req):
    t, count, valid, w = req
    k, src, dst = _kernel()
    if (valid * t.bits) % 8:
        with pytest.raises(ValidationError, match="ends inside a byte"):
            cp_async_elems(k, dst, src, t, count, valid=valid)
        assert not cp_asyncs(k.finish())
        return
    assert cp_async_elems(k, dst, src, t, count, valid=valid) == w
    (ins,) = cp_asyncs(k.finish())
    info: CpAsyncInfo = ins.info
    assert info.cp_size == w
    if valid == count:
        assert info.src_size is None
    else:
        assert info.src_size.value == valid * t.bits // 8
    assert info.cache == ("cg" if w == 16 else "ca")


def test_register_tail_is_converted_from_elements_to_bytes():
    k, src, dst = _kernel()
    n = k.param_value("n", pf.u32)
    cp_async_elems(k, dst, src, "s4", 32, valid=n)
    cp_async_elems(k, dst, src, "f32", 4, valid=n)
    cp_async_elems(k, dst, src, "s8", 16, valid=n)
    kern = k.finish()
    by_op = [(i.opcode, i.operands[-1].value if i.opcode in ("shr", "shl") else None) for i in kern.instructions
             if i.opcode in ("shr", "shl", "cp.async")]
    # s4: n/2 bytes (shr 1); f32: 4n bytes (shl 2); s8: n bytes as is
    assert by_op == [("shr", 1), ("cp.async", None), ("shl", 2), ("cp.async", None), ("cp.async", None)]
    sizes = [i.info.src_size for i in cp_asyncs(kern)]
    assert sizes[2] is n


def test_every_legal_copy_assembles_for_sm80_and_sm90():
    for target in ("sm_80", "sm_90"):
        k, src, dst = _kernel(target)
        n = k.param_value("n", pf.u32)
        emitted = 0
        for t in COPY_ELEM_TYPES:
            for w, count in legal_counts(t).items():
                per_byte = max(8 // t.bits, 1)
                for valid in (None, count - per_byte if count > per_byte else 0, n):
                    cp_async_elems(k, dst, src, t, count, valid=valid)
                    emitted += 1
        k.cp_async_commit()
        k.cp_async_wait(0)
        kern = k.finish()
        assert len(cp_asyncs(kern)) == emitted
        assert all(i.info.cp_size <= 16 for i in cp_asyncs(kern))
        res = pf.assemble(k.module()).resources("cp")
        assert res.spills == 0


def test_known_misalignment_and_bad_cache_are_refused_before_assembly():
    k, src, dst = _kernel()
    with pytest.raises(ValidationError, match="8-byte aligned"):
        cp_async_elems(k, dst, src, "bf16", 8, src_align=8)
    with pytest.raises(ValidationError, match="exactly 16"):
        cp_async_elems(k, dst, src, "s8", 8, cache=".cg")
    with pytest.raises(ValidationError, match="valid element count"):
        cp_async_elems(k, dst, src, "s8", 8, valid=9)
    assert not cp_asyncs(k.finish())


def test_element_type_names():
    assert as_elem_type("int4") is T.s4 and as_elem_type(".bf16") is T.bf16 and as_elem_type("float32") is T.f32
    with pytest.raises(ValidationError, match="unknown element type"):
        as_elem_type("int5")
    with pytest.raises(ValidationError):
        as_elem_type("pred")


# ---------------------------------------------------------------- shared layouts

@given(smem_layouts())
def test_layout_is_a_bijection_onto_the_tile_bytes(layout):
    offs = [layout.byte_offset(r, b) for r in range(layout.rows) for b in range(layout.row_bytes)]
    assert len(set(offs)) == len(offs)
    assert min(offs) >= 0 and max(offs) < layout.nbytes
    # a row's bytes stay inside that row's own span (the swizzle moves chunks, never across rows)
    for r in range(layout.rows):
        row = [layout.byte_offset(r, b) for b in range(layout.row_bytes)]
        assert r * layout.row_stride <= min(row) and max(row) < r * layout.row_stride + layout.row_bytes
    if layout.row_bytes % 16 == 0:
        assert all(layout.offset(r, c) % 16 == 0 for r in range(layout.rows) for c in range(layout.chunks_per_row))


def bank_groups(layout, rows, chunk):
    return {(layout.offset(r, chunk) // 16) % 8 for r in rows}


@given(smem_layouts(kinds=("swizzle",), max_rows=64), st.data())
def test_swizzle_is_conflict_free_for_eight_consecutive_rows(layout, data):
    if layout.rows < 8:
        return
    start = data.draw(st.integers(0, layout.rows - 8))
    chunk = data.draw(st.integers(0, layout.chunks_per_row - 1))
    assert len(bank_groups(layout, range(start, start + 8), chunk)) == 8


def test_linear_rows_of_128_bytes_conflict_and_the_cures_do_not():
    rows = range(8)
    assert len(bank_groups(SmemLayout(8, 128, "linear"), rows, 0)) == 1  # 8-way conflict
    assert len(bank_groups(SmemLayout(8, 128, "padded"), rows, 0)) == 8
    assert len(bank_groups(SmemLayout(8, 128, "swizzle"), rows, 0)) == 8
    assert len(bank_groups(SmemLayout(16, 64, "swizzle"), range(4, 12), 3)) == 8


def test_layout_validation():
    with pytest.raises(ValidationError, match="cannot be swizzled"):
        SmemLayout(8, 48, "swizzle")
    with pytest.raises(ValidationError, match="pad_bytes"):
        SmemLayout(8, 64, "padded", pad_bytes=8)
    with pytest.raises(ValidationError, match="kind"):
        SmemLayout(8, 64, "diagonal")


def _offset_kernel(layout, n):
    k = pf.KernelBuilder("offsets", target="sm_90", maxntid=n)
    rows = k.param_ptr("rows")
    chunks = k.param_ptr("chunks")
    out = k.param_ptr("out")
    tid = k.tid()
    off4 = k.mul(tid, 4, mode="wide")
    r = k.ld(k.add(rows, off4), type=pf.u32)
    c = k.ld(k.add(chunks, off4), type=pf.u32)
    k.st(k.add(out, off4), layout.emit_offset(k, r, c), type=pf.u32)
    return k.module()


@settings(max_examples=10)
@given(smem_layouts(), st.data())
def test_ptx_offsets_equal_python_offsets(layout, data):
    n = 32
    rows = np.array(data.draw(st.lists(st.integers(0, layout.rows - 1), min_size=n, max_size=n)), np.uint32)
    chunks = np.array(data.draw(st.lists(st.integers(0, layout.chunks_per_row - 1), min_size=n, max_size=n)),
                      np.uint32)
    m = _offset_kernel(layout, n)
    got = poison(np.empty(n, np.uint32))
    interp.run(m, block=n, args=[rows, chunks, got])
    want = [layout.offset(int(r), int(c)) for r, c in zip(rows, chunks)]
    assert got.tolist() == want
    # integer rows and chunks fold to the same numbers
    k = pf.KernelBuilder("fold", target="sm_90")
    assert layout.emit_offset(k, int(rows[0]), int(chunks[0])) == want[0]


# ---------------------------------------------------------------- plans

def _model_widths(req, row_bytes):
    """Independent statement of which widths the request allows."""
    stride_align = req["src_row_stride_bytes"] & -req["src_row_stride_bytes"] if req["src_row_stride_bytes"] else 1 << 30
    src_align = min(req["src_align_bytes"] & -req["src_align_bytes"], stride_align)
    dst_stride = req["layout"].row_stride
    return [w for w in (16, 8, 4, 2, 1)
            if row_bytes % w == 0 and src_align % w == 0 and dst_stride % w == 0]


@given(tile_copy_requests())
def test_planner_picks_the_widest_legal_width(req):
    plan = plan_tile_copy(**req)
    row_bytes = req["cols"] * req["elem_type"].bits // 8
    legal = _model_widths(req, row_bytes)
    assert plan.width_bytes == legal[0]
    assert plan.width_bytes <= 16
    if plan.width_bytes >= 4:
        assert plan.method == "cp.async" and plan.cache == (".cg" if plan.width_bytes == 16 else ".ca")
    else:
        assert plan.method == "ld/st" and "cp.async needs at least 4 bytes" in plan.reason
    if 4 <= plan.width_bytes < 16:
        assert "not possible because" in plan.reason


@given(tile_copy_requests())
def test_plan_covers_every_tile_byte_exactly_once(req):
    plan = plan_tile_copy(**req)
    seen = np.zeros((plan.rows, plan.row_bytes), np.int32)
    for tid in range(plan.threads):
        cps = plan.copies(tid)
        assert len(cps) <= plan.copies_per_thread
        for row, cb in cps:
            seen[row, cb:cb + plan.width_bytes] += 1
    assert (seen == 1).all()
    assert plan.copies_per_thread == -(-plan.total_copies // plan.threads)


def test_planner_falls_back_and_says_why():
    p = plan_tile_copy(16, 64, "bf16", 128, src_row_stride_bytes=136)
    assert (p.method, p.width_bytes) == ("cp.async", 8) and "136 bytes apart" in p.reason
    p = plan_tile_copy(16, 64, "bf16", 128, src_align_bytes=2)
    assert (p.method, p.width_bytes) == ("ld/st", 2) and "2-byte aligned" in p.reason
    p = plan_tile_copy(16, 6, "s8", 32)
    assert (p.method, p.width_bytes) == ("ld/st", 2) and "6 bytes" in p.reason
    p = plan_tile_copy(16, 128, "s4", 64)
    assert (p.method, p.width_bytes, p.cache) == ("cp.async", 16, ".cg")


def test_planner_refuses_what_it_cannot_plan():
    with pytest.raises(ValidationError, match="whole"):
        plan_tile_copy(8, 33, "s4", 32)
    with pytest.raises(ValidationError, match="layout is"):
        plan_tile_copy(8, 64, "s8", 32, layout=SmemLayout(8, 32))
    with pytest.raises(ValidationError, match="copies per thread"):
        plan_tile_copy(1024, 1024, "s8", 32, src_align_bytes=1)
    with pytest.raises(ValidationError, match="threads"):
        plan_tile_copy(8, 64, "s8", 0)


# ---------------------------------------------------------------- emission

def _copy_only_kernel(plan, *, bounded, target="sm_90"):
    """A kernel holding nothing but one tile copy and its wait."""
    k = pf.KernelBuilder("copy_only", target=target, maxntid=plan.threads)
    src = k.param_ptr("src")
    stride, rows, cols, row0, col0 = (k.param_value(n, pf.u32) for n in ("stride", "rows", "cols", "row0", "col0"))
    tile = k.shared("tile", -(-plan.smem_layout.nbytes // 16) * 16, plan.smem_layout.base_align)
    emit_tile_copy(k, plan, src=src, src_row_stride=stride, row0=row0, col0=col0,
                   rows_total=rows if bounded else None, cols_total=cols if bounded else None, dst=tile, tid=k.tid())
    emit_copy_commit(k, "groups")
    emit_copy_wait(k, "groups")
    return k.module()


@settings(max_examples=15)
@given(tile_copy_requests(max_rows=16, max_row_bytes=128))
def test_every_accepted_plan_assembles_and_moves_exactly_the_tile(req):
    plan = plan_tile_copy(**req)
    for bounded in (False, True):
        m = _copy_only_kernel(plan, bounded=bounded)
        kern = m.kernels[0]
        if plan.method == "cp.async":
            copies = cp_asyncs(kern)
            assert len(copies) == plan.copies_per_thread
            assert {c.info.cp_size for c in copies} == {plan.width_bytes}
            assert all((c.info.src_size is not None) == bounded for c in copies)
        else:
            loads = [i for i in kern.instructions if i.opcode == "ld" and i.info.space == "global"]
            stores = [i for i in kern.instructions if i.opcode == "st" and i.info.space == "shared"]
            assert {i.info.nbytes for i in stores} == {plan.width_bytes}
            assert len(stores) == plan.copies_per_thread
            assert len(loads) >= plan.copies_per_thread
        # only the last round may leave threads without a copy: only its copies carry a guard
        partial = plan.total_copies % plan.threads != 0
        moving = copies if plan.method == "cp.async" else stores
        assert [c.guard is not None for c in moving[:-1]] == [False] * (len(moving) - 1)
        assert (moving[-1].guard is not None) == partial
        res = pf.assemble(m).resources("copy_only")
        assert res.spills == 0


@settings(max_examples=25)
@given(tile_copy_requests(max_rows=12, max_row_bytes=96, thread_counts=(32, 64, 96)), st.data())
def test_tile_copy_matches_the_model_and_reads_each_tile_byte_of_the_matrix_once(req, data):
    plan = plan_tile_copy(**req)
    where = data.draw(copy_situations(plan))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    src = rng.integers(1, 256, size=(where["rows"], where["stride"]), dtype=np.uint8)
    static = where["stride"] if data.draw(st.booleans()) else None
    got, report = run_probe(plan, src, where, bounded=True, static_stride=static)
    want = expected_shared(plan, src, **{k: where[k] for k in ("row0", "col0", "rows", "cols")})
    np.testing.assert_array_equal(got, want)
    assert_reads_the_tile_once(report, plan, src, where)


@settings(max_examples=10)
@given(tile_copy_requests(max_rows=12, max_row_bytes=96, thread_counts=(32, 64)), st.data())
def test_unbounded_copy_of_an_inner_tile_matches_the_model(req, data):
    plan = plan_tile_copy(**req)
    w = plan.width_bytes
    stride = -(-(3 * plan.row_bytes + data.draw(st.integers(0, 40))) // w) * w
    rows = 3 * plan.rows
    src = np.random.default_rng(1).integers(1, 256, size=(rows, stride), dtype=np.uint8)
    where = dict(rows=rows, cols=3 * plan.cols, stride=stride, row0=plan.rows, col0=plan.cols)
    got, report = run_probe(plan, src, where, bounded=False)
    np.testing.assert_array_equal(got, expected_shared(plan, src, **{k: where[k] for k in
                                                                      ("row0", "col0", "rows", "cols")}))
    assert_reads_the_tile_once(report, plan, src, where)


def test_mbarrier_completion_probe_matches_the_model():
    plan = plan_tile_copy(8, 64, "s4", 32, layout=SmemLayout(8, 32, "swizzle"))
    src = np.random.default_rng(2).integers(1, 256, size=(5, 32), dtype=np.uint8)
    where = dict(rows=5, cols=57, stride=32, row0=0, col0=0)
    m = probe_kernel(plan, completion="mbarrier")
    assert any(i.opcode == "cp.async.mbarrier.arrive" and i.info for i in m.kernels[0].instructions)
    got, report = run_probe(plan, src, where, module=m)
    np.testing.assert_array_equal(got, expected_shared(plan, src, row0=0, col0=0, rows=5, cols=57))
    assert_reads_the_tile_once(report, plan, src, where)
    pf.assemble(m)
    pf.assemble(probe_kernel(plan, completion="mbarrier", target="sm_80"))


def test_the_interpreter_catches_a_missing_wait_and_an_overrun():
    plan = plan_tile_copy(4, 64, "s8", 32)
    src = np.random.default_rng(3).integers(1, 256, size=(4, 64), dtype=np.uint8)
    # no wait between the copy and the reads: the reads see bytes not yet landed
    k = pf.KernelBuilder("nowait", target="sm_90", maxntid=32)
    s, o = k.param_ptr("src"), k.param_ptr("out")
    tile = k.shared_base(k.shared("tile", plan.tile_bytes, 16))
    tid = k.tid()
    emit_tile_copy(k, plan, src=s, src_row_stride=64, row0=0, col0=0, rows_total=None, cols_total=None,
                   dst=tile, tid=tid)
    k.bar_sync(0)
    off = k.mul(tid, 8)
    k.st(k.add(o, k.cvt(off, pf.u64)), k.ld(k.add(tile, off), type=pf.b64, space="shared"), type=pf.b64)
    out = poison(np.empty(256, np.uint8))
    report = interp.run(k.module(), block=32, args=[src, out], check=False)
    assert {f.kind for f in report.findings} == {"async"}
    assert {f.instruction.opcode for f in report.findings} == {"ld"}
    assert not np.array_equal(out, src.reshape(-1))
    # the same copy told the matrix has 9 rows reads past the 4-row allocation
    where = dict(stride=64 * 9, rows=9, cols=64, row0=0, col0=0)
    with pytest.raises(interp.InterpError) as e:
        run_probe(plan, src, where, bounded=False)
    (f,) = e.value.findings
    assert f.kind == "oob" and f.instruction.opcode == "cp.async" and "cp.async source read" in f.message


# planted bugs in the probe: (completion, mutation, the finding kinds it must produce)
PROBE_BUGS = {
    "no barrier after the fill": ("groups", lambda k: drop_bar_sync(k, nth=0), {"race"}),
    "no barrier after the wait": ("groups", lambda k: drop_bar_sync(k, nth=1), {"race"}),
    "wait_group 1 instead of 0": ("groups", loosen_wait_group, {"async"}),
    "no mbarrier wait": ("mbarrier", drop_mbarrier_wait, {"async"}),
}


@pytest.mark.parametrize("bug", sorted(PROBE_BUGS))
def test_planted_synchronization_bugs_in_the_probe_are_findings(bug):
    completion, mutate, kinds = PROBE_BUGS[bug]
    plan = plan_tile_copy(8, 64, "s8", 64, layout=SmemLayout(8, 64, "swizzle"))
    src = np.random.default_rng(4).integers(1, 256, size=(8, 64), dtype=np.uint8)
    where = dict(rows=8, cols=64, stride=64, row0=0, col0=0)
    m = probe_kernel(plan, completion=completion)
    assert run_probe(plan, src, where, module=m)[1].ok
    _, report = run_probe(plan, src, where, module=mutate(m.kernels[0]), check=False)
    assert kinds <= {f.kind for f in report.findings}, str(report)


def test_a_planted_bug_that_matches_nothing_is_refused():
    kern = probe_kernel(plan_tile_copy(8, 64, "s8", 64)).kernels[0]  # groups: no mbarrier anywhere
    with pytest.raises(ValidationError, match="no mbarrier"):
        drop_mbarrier_wait(kern)
    with pytest.raises(ValidationError, match="nth=2"):
        drop_bar_sync(kern, nth=2)
    assert len(drop_bar_sync(kern).instructions) == len(kern.instructions) - 2


def test_emit_checks_what_it_can_know():
    plan = plan_tile_copy(8, 64, "s8", 32)
    k = pf.KernelBuilder("bad", target="sm_90", maxntid=32)
    s = k.param_ptr("src")
    tile = k.shared_base(k.shared("tile", 512, 16))
    tid = k.tid()
    args = dict(src=s, row0=0, rows_total=None, cols_total=None, dst=tile, tid=tid)
    with pytest.raises(ValidationError, match="row stride"):
        emit_tile_copy(k, plan, src_row_stride=100, col0=0, **args)
    with pytest.raises(ValidationError, match="tile origin"):
        emit_tile_copy(k, plan, src_row_stride=128, col0=8, **args)
    with pytest.raises(ValidationError, match="differs"):
        emit_tile_copy(k, plan_tile_copy(8, 64, "s8", 32, layout=SmemLayout(8, 64, "swizzle")), src_row_stride=128,
                       col0=0, layout=SmemLayout(8, 64, "padded"), **args)
    with pytest.raises(ValidationError, match="u64 register"):
        emit_tile_copy(k, plan, src_row_stride=128, col0=0, **{**args, "src": tile})
    with pytest.raises(ValidationError, match="shared -> global"):
        emit_tile_store(k, plan, src=tile, dst=s, dst_row_stride=64, row0=0, col0=0, rows_total=None,
                        cols_total=None, tid=tid)


# ---------------------------------------------------------------- stores

@settings(max_examples=15)
@given(tile_copy_requests(max_rows=8, max_row_bytes=96, thread_counts=(32, 64)), st.data())
def test_tile_store_writes_exactly_the_bytes_inside_the_matrix(req, data):
    plan = plan_tile_store(req["rows"], req["cols"], req["elem_type"], req["threads"],
                           dst_row_stride_bytes=req["src_row_stride_bytes"], dst_align_bytes=req["src_align_bytes"],
                           layout=req["layout"])
    where = data.draw(copy_situations(plan))
    layout = plan.smem_layout
    k = pf.KernelBuilder("store", target="sm_90", maxntid=plan.threads)
    tile_in, dst = k.param_ptr("tile_in"), k.param_ptr("dst")
    stride, rows, cols = (k.param_value(n, pf.u32) for n in ("stride", "rows", "cols"))
    row0, col0 = k.param_value("row0", pf.u32), k.param_value("col0", pf.u32)
    nbytes = -(-layout.nbytes // 16) * 16
    sm = k.shared_base(k.shared("tile", nbytes, 128))
    tid = k.tid()
    with k.for_range(tid, nbytes // 4, plan.threads, uniform=False) as w:
        off = k.shl(w, 2)
        k.st(k.add(sm, off), k.ld(k.add(tile_in, k.cvt(off, pf.u64)), type=pf.b32), type=pf.b32, space="shared")
    k.bar_sync(0)
    emit_tile_store(k, plan, src=sm, dst=dst, dst_row_stride=stride, row0=row0, col0=col0, rows_total=rows,
                    cols_total=cols, tid=tid)
    m = k.module()
    pf.assemble(m)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    tile = rng.integers(1, 256, size=nbytes, dtype=np.uint8)
    out = np.full((where["rows"], where["stride"]), 0xA5, np.uint8)
    got = out.copy()
    scalars = [where[p] for p in ("stride", "rows", "cols", "row0", "col0")]
    report = interp.run(m, block=plan.threads, args=[tile, got, *scalars], count_accesses=True)
    inside = tile_inside(plan, out.shape, **{k: where[k] for k in ("row0", "col0", "rows", "cols")})
    np.testing.assert_array_equal(report.accesses["dst"].writes, inside.astype(np.uint32))  # each byte once
    assert not report.accesses["dst"].reads.any()
    want = out.copy()
    bits = plan.elem_type.bits
    row_len = -(-where["cols"] * bits // 8)
    c0 = where["col0"] * bits // 8
    for r in range(plan.rows):
        for cb in range(plan.row_bytes):
            gr, gb = where["row0"] + r, c0 + cb
            if gr < where["rows"] and gb < row_len:
                want[gr, gb] = tile[layout.byte_offset(r, cb)]
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- completion

def test_completion_helpers_emit_the_right_sequence():
    k = pf.KernelBuilder("done", target="sm_90", maxntid=64)
    mbar = k.shared("mbar", 8, 8)
    emit_copy_commit(k, "groups")
    emit_copy_wait(k, "groups", pending=2)
    emit_copy_commit(k, "mbarrier", mbar=mbar)
    emit_copy_commit(k, "mbarrier", mbar=mbar, method="ld/st")
    emit_copy_wait(k, "mbarrier", mbar=mbar, phase=1)
    ops = [i.mnemonic for i in k.finish().instructions]
    assert ops[:2] == ["cp.async.commit_group", "cp.async.wait_group"]
    assert ops[2] == "cp.async.mbarrier.arrive.noinc.shared.b64"
    assert ops[3].startswith("mbarrier.arrive")
    assert any(o.startswith("mbarrier.try_wait.parity") for o in ops)
    with pytest.raises(ValidationError, match="mbar="):
        emit_copy_commit(k, "mbarrier")
    with pytest.raises(ValidationError, match="one of"):
        emit_copy_wait(k, "fences")
    with pytest.raises(ValidationError, match="no mbarrier"):
        emit_copy_commit(k, "groups", mbar=mbar)
