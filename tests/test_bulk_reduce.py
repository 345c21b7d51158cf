"""Bulk reductions (`cp.reduce.async.bulk`, its tensor form): the ISA table against ptxas, the refusals, the
builder's PTX, and the interpreter's semantics against numpy (and on a GPU against the interpreter)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.isa import types as T
from ptxforge.isa.bulk_reduce import BULK_REDUCE_TYPES, TENSOR_REDUCE_OPS, bulk_reduce, bulk_tensor_reduce
from ptxforge.isa.operands import Reg
from ptxforge.testing.interp_strategies import bulk_reduce_forms, check_against_reference, seeds

from support.ptx_text import assembler_verdict, raw_kernel
from support.reduce_kernels import one_d_kernel

TYPES = ("b32", "b64", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")
NUMPY = {"b32": np.uint32, "u32": np.uint32, "s32": np.int32, "b64": np.uint64, "u64": np.uint64, "s64": np.int64,
         "f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64}


def _spelling(where, op, t):
    if where == "global":
        noftz = ".noftz" if op == "add" and t in ("f16", "bf16") else ""
        return f"cp.reduce.async.bulk.global.shared::cta.bulk_group.{op}{noftz}.{t} [%rd0], [%r0], 64;"
    return f"cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.{op}.{t} [%r0], [%r0], 64, [%r1];"


@pytest.mark.parametrize("where", ["global", "shared::cluster"])
def test_the_table_is_what_ptxas_accepts(where):
    """Every reduction x element type: the table's verdict is the assembler's, both ways."""
    disagree = []
    for op in BULK_REDUCE_TYPES["global"]:
        for t in TYPES:
            table = t in BULK_REDUCE_TYPES[where][op]
            ptxas = assembler_verdict(raw_kernel(_spelling(where, op, t), "sm_90")) is None
            if table != ptxas:
                disagree.append((op, t, table, ptxas))
    assert not disagree, disagree


def test_refusals_say_what_would_be_legal():
    g, s, m = Reg("g", T.u64), Reg("s", T.u32), Reg("m", T.u32)
    with pytest.raises(ValidationError, match=r"\.add takes \.u32, \.s32, \.u64, \.f32, \.f64, \.f16, \.bf16, not \.s64"):
        bulk_reduce(g, s, 64, "add", "s64")
    with pytest.raises(ValidationError, match=r"shared::cluster memory: \.min takes \.u32, \.s32, not \.u64 \(that type is "
                                              r"for reductions into global memory\)"):
        bulk_reduce(s, s, 64, "min", "u64", mbar=m)
    with pytest.raises(ValidationError, match="positive multiple of 16"):
        bulk_reduce(g, s, 24, "add", "u32")
    with pytest.raises(ValidationError, match="reduces with and, or, xor, add, inc, dec, min, max, not 'mul'"):
        bulk_reduce(g, s, 64, "mul", "u32")
    with pytest.raises(ValidationError, match="takes no cache policy"):
        bulk_reduce(s, s, 64, "add", "u32", mbar=m, policy=Reg("p", T.b64))
    with pytest.raises(ValidationError, match=r"\.im2col_no_offs takes 3 to 5 coordinates, got 2"):
        bulk_tensor_reduce(Reg("t", T.u64), (Reg("x", T.s32),) * 2, s, "add", mode="im2col_no_offs")
    with pytest.raises(ValidationError, match="not 'mul'"):
        bulk_tensor_reduce(Reg("t", T.u64), (Reg("x", T.s32),), s, "mul")
    k = pf.KernelBuilder("old", target="sm_80")
    with pytest.raises(pf.TargetError):
        k.bulk_reduce(k.param_ptr("g", T.u32), k.shared("b", 64, align=16), 64, "add", "u32")


def test_every_tensor_reduction_and_mode_assembles():
    k = pf.KernelBuilder("tred", target="sm_90a", reqntid=32)
    tm = k.param_tensormap("tm")
    buf = k.shared("buf", 1024, align=128)
    for op in TENSOR_REDUCE_OPS:
        k.tensor_reduce(tm, [0, 1], buf, op)
        k.tensor_reduce(tm, [0, 1, 2], buf, op, mode="im2col_no_offs", policy=k.createpolicy())
    k.bulk_commit()
    k.bulk_wait(0, read=True)
    ptx = k.module().ptx
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.xor.tile.bulk_group [%tm, {0, 1}], [buf];" in ptx
    assert ".im2col_no_offs.bulk_group.L2::cache_hint" in ptx
    pf.assemble(k.module(), "sm_90a")


# ---------------------------------------------------------------- the interpreter

def operands(tname, n, rng):
    """(destination, source) arrays of `tname` elements (bf16 as uint16 bits of small halves: exact sums)."""
    if tname in ("f16", "f32", "f64"):
        return tuple((rng.integers(-64, 64, n) * 0.25).astype(NUMPY[tname]) for _ in range(2))
    if tname == "bf16":
        return tuple(((rng.integers(-64, 64, n) * 0.25).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                     for _ in range(2))
    info = np.iinfo(NUMPY[tname])
    hi = 40 if tname in ("u32",) else info.max
    return tuple(rng.integers(info.min if info.min < 0 else 0, hi, n, dtype=NUMPY[tname], endpoint=True)
                 for _ in range(2))


def expected(op, tname, g, s):
    """What each element of g becomes (numpy; the 16-bit floats through float64)."""
    if tname == "bf16":
        a, b = ((x.astype(np.uint32) << 16).view(np.float32).astype(np.float64) for x in (g, s))
        r = {"add": a + b, "min": np.minimum(a, b), "max": np.maximum(a, b)}[op]
        return (r.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # exact for the drawn values
    if op == "add":
        return (g + s).astype(g.dtype)
    if op == "inc":
        return np.where(g >= s, 0, g + 1).astype(g.dtype)
    if op == "dec":
        return np.where((g == 0) | (g > s), s, g - 1).astype(g.dtype)
    return {"min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
            "xor": np.bitwise_xor}[op](g, s).astype(g.dtype)


FORMS = [(op, t) for op, ts in BULK_REDUCE_TYPES["global"].items() for t in ts]


@pytest.mark.parametrize("op, tname", FORMS, ids=[f"{o}.{t}" for o, t in FORMS])
def test_one_dimensional_reductions_into_global_memory_match_numpy(op, tname):
    rng = np.random.default_rng(len(op) * 31 + len(tname))
    n = 96 if T.lookup(tname).bits == 32 else 64
    g, s = operands(tname, n, rng)
    want = expected(op, tname, g, s)
    with np.errstate(over="ignore"):
        r = interp.run(one_d_kernel(op, tname, n), block=32, args=[g, s], check=False)
    assert r.ok, str(r)
    np.testing.assert_array_equal(g, want)


def test_sixteen_bit_float_additions_round_once_to_nearest_even():
    """1 + 2^-8 is a tie at bf16's precision (ulp 2^-7 at 1): even keeps 1; 1 + 3 * 2^-8 rounds up to 1 + 2^-6;
    2^-130 + 2^-130 stays a subnormal (.noftz); f16 (ulp 2^-10 at 1) the same one level down; 65504 + 32
    overflows f16 to inf."""
    def bf(x):
        return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    g = np.resize(bf([1.0, 1.0, -1.0, 2.0 ** -130]), 32)
    s = np.resize(bf([2.0 ** -8, 3 * 2.0 ** -8, -(2.0 ** -8), 2.0 ** -130]), 32)
    interp.run(one_d_kernel("add", "bf16", 32), block=32, args=[g, s])
    assert list(g[:4]) == list(bf([1.0, 1.0 + 2.0 ** -6, -1.0, 2.0 ** -129]))
    h = np.resize(np.array([1.0, 1.0, 65504.0, 0.5], np.float16), 32)
    interp.run(one_d_kernel("add", "f16", 32), block=32,
               args=[h, np.resize(np.array([2.0 ** -11, 3 * 2.0 ** -11, 32.0, 0.25], np.float16), 32)])
    assert list(h[:4]) == [1.0, 1.0 + 2.0 ** -9, np.inf, 0.75]


def test_the_source_is_held_until_wait_read_and_needs_a_proxy_fence():
    g, s = np.zeros(32, np.uint32), np.arange(32, dtype=np.uint32)
    r = interp.run(one_d_kernel("add", "u32", 32, early_write=True), block=32, args=[g, s], check=False)
    assert r.by_kind("async") and "still reading" in str(r), str(r)
    r = interp.run(one_d_kernel("add", "u32", 32, fence=False), block=32, args=[g, s], check=False)
    assert r.by_kind("proxy") and r.by_kind("proxy")[0].instruction.opcode == "cp.reduce.async.bulk", str(r)


def tensor_kernel(op, box):
    """Each CTA fills a box with (cta + 1) * (i + 1) and reduces it into the tensor at (x0 + 8 * cta, y0)."""
    n = box[0] * box[1]
    k = pf.KernelBuilder("reduce_box", target="sm_90a", reqntid=128)
    tm = k.param_tensormap("tm")
    x0, y0 = k.param_value("x0", pf.s32), k.param_value("y0", pf.s32)
    tile = k.shared("tile", 4 * n, align=128)
    tid, cta = k.tid(), k.ctaid()
    for j in range(0, n, 128):
        i = k.add(tid, j, type=T.u32)
        with k.if_(k.setp("lt", i, n, type=T.u32)):
            k.st(k.mad(i, 4, k.shared_base(tile), type=T.u32), k.mul(k.add(cta, 1, type=T.u32),
                                                                     k.add(i, 1, type=T.u32), type=T.u32),
                 type=T.u32, space="shared")
    k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 0, type=T.u32)):
        k.tensor_reduce(tm, [k.add(x0, k.mul(cta, 8, type=T.s32), type=T.s32), y0], tile, op)
        k.bulk_commit()
        k.bulk_wait(0, read=True)
    return k.module()


def expected_box(dst, op, box, x0, y0, ctas):
    out = dst.copy()
    for c in range(ctas):
        vals = ((c + 1) * (np.arange(box[0] * box[1]) + 1)).astype(dst.dtype).reshape(box[1], box[0])
        for r in range(box[1]):
            for q in range(box[0]):
                y, x = y0 + r, x0 + 8 * c + q
                if 0 <= y < dst.shape[0] and 0 <= x < dst.shape[1]:
                    out[y, x] = expected(op, "u32" if dst.dtype == np.uint32 else "s32",
                                         out[y:y + 1, x], vals[r:r + 1, q])[0]
    return out


@pytest.mark.parametrize("op", ["add", "max", "xor"])
@pytest.mark.parametrize("x0, y0", [(0, 0), (-4, 3), (20, 10)])
def test_tensor_reductions_combine_the_in_bounds_part_of_overlapping_boxes(op, x0, y0):
    """Two CTAs reduce 16 x 4 boxes that overlap by half into a 12 x 32 int32 tensor; ragged edges clip."""
    box = (16, 4)
    rng = np.random.default_rng(abs(x0) * 7 + y0)
    dst = rng.integers(0, 1000, (12, 32)).astype(np.int32)
    want = expected_box(dst, op, box, x0, y0, 2)
    r = interp.run(tensor_kernel(op, box), grid=2, block=128, check=False,
                   args=[interp.host_tensor_map(dst, box), x0, y0])
    assert r.ok, str(r)
    np.testing.assert_array_equal(dst, want)


def cluster_kernel(remote=True):
    """A cluster of two: CTA 1 reduces (add, u32) its 32 words into CTA 0's `acc` through mapa, completing on CTA 0's
    mbarrier; CTA 0 waits and writes `acc` out."""
    k = pf.KernelBuilder("reduce_cluster", target="sm_90a", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", T.u32)
    acc, part = k.shared("acc", 128, align=128), k.shared("part", 128, align=128)
    bar = k.shared("bar", 8, align=8)
    tid, rank = k.tid(), k.cluster_ctarank()
    lead = k.setp("eq", tid, 0, type=T.u32)
    k.st(k.mad(tid, 4, k.shared_base(acc), type=T.u32), k.add(tid, 100, type=T.u32), type=T.u32, space="shared")
    k.st(k.mad(tid, 4, k.shared_base(part), type=T.u32), k.mul(tid, 3, type=T.u32), type=T.u32, space="shared")
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    k.fence("fence.proxy.async.shared::cta")
    k.cluster_sync()
    with k.if_(k.setp("eq", rank, 0, type=T.u32)):
        k.mbarrier_arrive(bar, expect_tx=128, pred=lead)
        k.mbarrier_wait(bar, 0)
        k.st(k.mad(tid, 4, out, type=T.u32, mode="wide"),
             k.ld(k.mad(tid, 4, k.shared_base(acc), type=T.u32), type=T.u32, space="shared"), type=T.u32)
    if remote:
        with k.if_(k.setp("ne", rank, 0, type=T.u32)):
            with k.if_(lead):
                k.bulk_reduce(k.mapa(k.shared_base(acc), 0), part, 128, "add", "u32",
                              mbar=k.mapa(k.shared_base(bar), 0))
    k.cluster_sync()
    return k.module()


def test_a_reduction_into_the_partner_ctas_shared_memory_lands_on_its_mbarrier():
    out = np.zeros(32, np.uint32)
    r = interp.run(cluster_kernel(), grid=2, block=32, args=[out], check=False)
    assert r.ok, str(r)
    np.testing.assert_array_equal(out, np.arange(32) + 100 + 3 * np.arange(32))
    pf.assemble(cluster_kernel(), "sm_90a")
    with pytest.raises(interp.InterpError, match="deadlock"):
        interp.run(cluster_kernel(remote=False), grid=2, block=32, args=[out])


@pytest.mark.gpu
def test_gpu_bulk_reductions_match_numpy():
    """The same kernels on the GPU: every 1-D reduction into global memory, the tensor form at a ragged corner
    and the cluster form, against numpy (and so against the interpreter, which the tests above hold to it)."""
    from ptxforge.runtime import DeviceBuffer, TensorMap
    rng = np.random.default_rng(5)
    for op, tname in FORMS:
        n = 96 if T.lookup(tname).bits == 32 else 64
        g, s = operands(tname, n, rng)
        want = expected(op, tname, g, s)
        dg = DeviceBuffer.from_host(g)
        pf.load(one_d_kernel(op, tname, n))["reduce_1d"](1, 32, dg, DeviceBuffer.from_host(s))
        np.testing.assert_array_equal(dg.to_host(), want, err_msg=f"{op}.{tname}")
    for op in ("add", "max", "xor"):
        dst = rng.integers(0, 1000, (12, 32)).astype(np.int32)
        want = expected_box(dst, op, (16, 4), 20, 10, 2)
        dd = DeviceBuffer.from_host(dst)
        pf.load(tensor_kernel(op, (16, 4)))["reduce_box"](2, 128, TensorMap.from_array(dd, (16, 4)), 20, 10)
        np.testing.assert_array_equal(dd.to_host(), want, err_msg=op)
    out = np.zeros(32, np.uint32)
    pf.load(cluster_kernel())["reduce_cluster"](2, 32, pf.Out(out))
    np.testing.assert_array_equal(out, np.arange(32) + 100 + 3 * np.arange(32))


def test_the_example_sums_slices_on_the_interpreter():
    from support.examples import load_example
    ex = load_example("tma_reduce")
    for slices, rows, cols in ((4, 40, 72), (3, 9, 40)):  # ragged both ways; one partial box row
        got, want = ex.run_cpu(slices, rows, cols, seed=slices)
        np.testing.assert_array_equal(got, want)
    pf.assemble(ex.build(), "sm_90a", backend="ptxas")


@pytest.mark.gpu
def test_gpu_the_example_sums_slices():
    from support.examples import load_example
    ex = load_example("tma_reduce")
    for slices, rows, cols in ((4, 1000, 1000), (7, 129, 4100)):
        got, want = ex.run_gpu(slices, rows, cols, seed=slices)
        np.testing.assert_array_equal(got, want)


@settings(max_examples=40, deadline=None)
@given(form=bulk_reduce_forms(), passes=st.integers(1, 4), seed=seeds())
def test_property_every_reduction_form_and_size_matches_numpy(form, passes, seed):
    """A drawn reduction and element type over 32 to 128 elements (one to four passes of the warp), drawn values
    (the 16-bit floats' exact): the interpreter, every check on, against the numpy model."""
    op, tname = form
    n = 32 * passes
    g, s = operands(tname, n, np.random.default_rng(seed))
    with np.errstate(over="ignore"):
        want = expected(op, tname, g, s)
    check_against_reference(one_d_kernel(op, tname, n), grid=1, block=32, args=[g, s], expected={0: want})


@settings(max_examples=25, deadline=None)
@given(op=st.sampled_from(TENSOR_REDUCE_OPS), x0=st.integers(-20, 40), y0=st.integers(-6, 14), seed=seeds())
def test_property_tensor_reductions_clip_and_combine_like_numpy(op, x0, y0, seed):
    """Two CTAs reduce overlapping 16 x 4 boxes into a ragged 12 x 32 int32 tensor anywhere around it."""
    # (inc / dec take u32 elements; the others s32, whose and/or/xor are the .b32 forms)
    dst = np.random.default_rng(seed).integers(0, 1000, (12, 32)).astype(np.uint32 if op in ("inc", "dec") else
                                                                           np.int32)
    want = expected_box(dst, op, (16, 4), x0, y0, 2)
    interp.run(tensor_kernel(op, (16, 4)), grid=2, block=128, args=[interp.host_tensor_map(dst, (16, 4)), x0, y0])
    np.testing.assert_array_equal(dst, want)


def zero_then_reduce_kernel(*, fence=True, ctas=1, chain=True):
    """The words of `g` zeroed with st.global, then reduced into (add, u32) with a bulk reduction: by the same CTA
    after a barrier (ctas=1; `fence`: the storing threads' fence.proxy.async.global before it), or with two CTAs
    where CTA 0 zeroes and CTA 1 reduces after counting in second (`chain`: the count acq_rel at gpu scope, else
    relaxed)."""
    k = pf.KernelBuilder("zero_then_reduce", target="sm_90a", reqntid=32)
    g, src, counter = k.param_ptr("g", T.u32), k.param_ptr("src", T.u32), k.param_ptr("counter", T.u32)
    buf = k.shared("buf", 128, align=128)
    flag = k.shared("flag", 4, align=4)
    tid, cta = k.tid(), k.ctaid()
    lead = k.setp("eq", tid, 0, type=T.u32)
    k.st(k.mad(tid, 4, k.shared_base(buf), type=T.u32), k.ld(k.mad(tid, 4, src, type=T.u32, mode="wide"), type=T.u32),
         type=T.u32, space="shared")
    k.fence("fence.proxy.async.shared::cta")
    with k.if_(k.setp("eq", cta, 0, type=T.u32)):
        k.st(k.mad(tid, 4, g, type=T.u32, mode="wide"), 0, type=T.u32)
        if fence:
            k.fence("fence.proxy.async.global")
    k.bar_sync(0)
    if ctas == 1:
        with k.if_(lead):
            k.bulk_reduce(g, buf, 128, "add", "u32")
            k.bulk_commit()
            k.bulk_wait(0, read=True)
        return k.module()
    with k.if_(lead):
        old = k.atom("add", counter, 1, type=T.u32, sem="acq_rel" if chain else None, scope="gpu" if chain else None)
        k.st(k.shared_base(flag), old, type=T.u32, space="shared")
    k.bar_sync(0)
    second = k.setp("eq", k.ld(k.shared_base(flag), type=T.u32, space="shared"), 1, type=T.u32)
    with k.if_(second):
        with k.if_(lead):
            k.bulk_reduce(g, buf, 128, "add", "u32")
            k.bulk_commit()
            k.bulk_wait(0, read=True)
    return k.module()


@pytest.mark.parametrize("kw, kind", [
    (dict(fence=True), None), (dict(fence=False), "proxy"),
    (dict(ctas=2), None), (dict(ctas=2, chain=False), "order"),
])
def test_a_reduction_into_plain_stores_needs_the_proxy_fence_and_the_chain(kw, kind):
    """Zeroing an output with st.global and reducing into it: the reduction reads the zeros through the async
    proxy (fence.proxy.async.global after the stores), and from another CTA only after a release/acquire chain;
    the values come out right in the interpreter's order either way."""
    g, src = np.full(32, 99, np.uint32), np.arange(32, dtype=np.uint32) + 1
    r = interp.run(zero_then_reduce_kernel(**kw), grid=kw.get("ctas", 1), block=32, check=False,
                   args=[g, src, np.zeros(1, np.uint32)])
    np.testing.assert_array_equal(g, src)
    kinds = {f.kind for f in r.findings}
    assert kinds == ({kind} if kind else set()), str(r)
    if kind:
        assert r.findings[0].instruction.opcode == "cp.reduce.async.bulk" and r.findings[0].other.opcode == "st"
