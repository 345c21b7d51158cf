"""Tensor maps edited on the device (`tensormap.replace`, `tensormap.cp_fenceproxy`): the table against ptxas, the
refusals, and a TMA load through an edited map against the same load through a map the host encoded with the
new fields, on the interpreter and on a GPU."""

import dataclasses

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.isa import types as T
from ptxforge.isa.operands import Reg
from ptxforge.isa.tensormap import TENSORMAP_FIELDS, tensormap_cp_fenceproxy, tensormap_replace

from support.ptx_text import assembler_verdict, raw_kernel

REG = {"b32": "%r2", "b64": "%rd2"}


def _line(field, space, value, ordinal=None):
    addr = "%r0" if space == "shared::cta" else "%rd0"
    sp = f".{space}" if space else ""
    ordv = f"{ordinal}, " if ordinal is not None else ""
    t = TENSORMAP_FIELDS[field].type.name if field in TENSORMAP_FIELDS else "b32"
    return f"tensormap.replace.tile.{field}{sp}.b1024.{t} [{addr}], {ordv}{value};"


@pytest.mark.parametrize("field", sorted(TENSORMAP_FIELDS))
def test_the_table_is_what_ptxas_accepts(field):
    """For each field and state space: a register value, the immediates at and past the table's range, and the
    ordinal at and past 4 -- the table's verdict is the assembler's."""
    f = TENSORMAP_FIELDS[field]
    disagree = []
    for space in ("global", "shared::cta", None):
        trials = []
        if f.values is None:
            trials.append((REG[f.type.name], None, True))
        else:
            trials += [(REG[f.type.name], None, False), (f.values[-1], None, True)]
            trials.append((f.values[-1] + 1, None, "skip-newer-ptx"))
        if f.ordinal:
            trials = [(v, o, ok) for v, _, ok in trials for o in (4,)] + [(REG[f.type.name], 5, False)]
        for value, ordinal, want in trials:
            if want == "skip-newer-ptx":
                continue  # a value sm_100 or a newer PTX ISA added: ptxas names the version it needs
            ours = True
            try:
                tensormap_replace(Reg("a", T.u32 if space == "shared::cta" else T.u64), field,
                                  value if isinstance(value, int) else Reg("v", f.type), ordinal, space)
            except ValidationError:
                ours = False
            body = _line(field, space, value, ordinal)
            theirs = assembler_verdict(raw_kernel(body, "sm_90a", "8.3")) is None  # (it declares %r2, %rd2)
            if ours != theirs or ours != want:
                disagree.append((space, value, ordinal, ours, theirs))
    assert not disagree, disagree


def test_refusals_say_what_would_be_legal():
    a = Reg("a", T.u64)
    with pytest.raises(ValidationError, match="needs sm_100a"):
        tensormap_replace(a, "swizzle_atomicity", 0)
    with pytest.raises(ValidationError, match=r"\.swizzle_mode takes an immediate 0\.\.3 \(ptxas refuses a register\)"):
        tensormap_replace(a, "swizzle_mode", Reg("v", T.b32))
    with pytest.raises(ValidationError, match=r"names a dimension: an immediate ordinal 0\.\.4, got None"):
        tensormap_replace(a, "box_dim", 8)
    with pytest.raises(ValidationError, match="takes no dimension ordinal"):
        tensormap_replace(a, "rank", 1, ordinal=0)
    with pytest.raises(ValidationError, match=r"\.global_address value"):
        tensormap_replace(a, "global_address", Reg("v", T.b32))
    with pytest.raises(ValidationError, match="releases at cta, cluster, gpu, sys"):
        tensormap_cp_fenceproxy(a, Reg("s", T.u32), "grid")
    k = pf.KernelBuilder("plain", target="sm_90")
    with pytest.raises(pf.TargetError):
        k.tensormap_replace(k.param_ptr("m", T.u64), "rank", 1)
    assert assembler_verdict(raw_kernel(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd0], [%r0], 128;",
        "sm_90", "8.3")) is None


ROWS, COLS = 40, 96  # u32: rows of 384 bytes


def edit_kernel(edits, box_bytes, acquire="after"):
    """One warp: copy the map parameter to shared memory, apply `edits` ((field, value, ordinal), values moved
    into registers where the field takes one), copy it to global memory (cp_fenceproxy), acquire it (`acquire`:
    "after" the copy, "before" it, or None), load the box at (x, y) through it and dump the `box_bytes` bytes
    that landed."""
    k = pf.KernelBuilder("tm_edit", target="sm_90a", reqntid=32)
    tm = k.param_tensormap("tm")
    gmap = k.param_ptr("gmap", T.b32)
    addr = k.param_value("addr", T.u64)
    out = k.param_ptr("out", T.b32)
    x, y = k.param_value("x", pf.s32), k.param_value("y", pf.s32)
    smap = k.shared("smap", 128, align=128)
    tile = k.shared("tile", max(box_bytes, 128), align=1024)
    bar = k.shared("bar", 8, align=8)
    tid = k.tid()
    lead = k.setp("eq", tid, 0)
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    with k.if_(k.setp("lt", tid, 8)):
        w = k.ld(k.add(tm, k.mul(tid, 16, mode="wide"), type=T.u64), type=T.b32, vec=4, space="generic")
        k.st(k.add(k.shared_base(smap), k.mul(tid, 16)), list(w), type=T.b32, space="shared")
    k.bar_sync(0)
    with k.if_(lead):
        for field, value, ordinal in edits:
            if field == "global_address":
                value = addr
            elif TENSORMAP_FIELDS[field].values is None:
                value = k.mov(value, type=TENSORMAP_FIELDS[field].type)
            k.tensormap_replace(smap, field, value, ordinal=ordinal, space="shared::cta")
    k.bar_sync(0)
    if acquire == "before":
        k.fence("fence.proxy.tensormap::generic.acquire.gpu", addr=gmap)
    k.tensormap_cp_fenceproxy(gmap, smap, scope="gpu")
    if acquire == "after":
        k.fence("fence.proxy.tensormap::generic.acquire.gpu", addr=gmap)
    with k.if_(lead):
        k.mbarrier_arrive(bar, expect_tx=box_bytes)
        k.tensor_load(tile, gmap, (x, y), bar)
    k.mbarrier_wait(bar, 0)
    for j in range(box_bytes // (32 * 4)):
        o = k.shl(k.add(tid, 32 * j), 2)
        k.st(k.add(out, k.cvt(o, "u64")), k.ld(k.add(k.shared_base(tile), o), type=T.b32, space="shared"), type=T.b32)
    return k.module()


#: (edits, the map the host would encode for the result, the box's corner): every field the interpreter models
CASES = {
    "address": ([("global_address", None, None)], dict(second=True), (8, 4)),
    "box and extent": ([("box_dim", 16, 0), ("box_dim", 4, 1), ("global_dim", 30, 1)], dict(box=(16, 4), dims=(COLS, 30)),
                       (88, 28)),
    "stride": ([("global_stride", 2 * COLS * 4, 0), ("global_dim", ROWS // 2, 1)],
               dict(strides=(2 * COLS * 4,), dims=(COLS, ROWS // 2)), (0, 3)),
    "element stride": ([("element_stride", 2, 1)], dict(estrides=(1, 2)), (32, 10)),
    "swizzle": ([("swizzle_mode", 3, None)], dict(swizzle=128), (0, 0)),
    "type and fill": ([("elemtype", 7, None), ("fill_mode", 1, None)], dict(dtype="f32", fill="nan"), (80, 36)),
}


def _maps(a, b, spec, host_tensor_map):
    """(the map the kernel edits, the map the host encodes with the new fields) over arrays a and b."""
    box = (32, 8)
    edited = dict(box=spec.get("box", box), swizzle=spec.get("swizzle", 0), oob_fill=spec.get("fill", "zero"),
                  element_strides=spec.get("estrides", (1, 1)))
    src = b if spec.get("second") else a
    m = host_tensor_map(src, edited["box"], swizzle=edited["swizzle"], oob_fill=edited["oob_fill"],
                        element_strides=edited["element_strides"], dtype=spec.get("dtype"))
    if "dims" in spec or "strides" in spec:
        tm = m.tmap
        tm = dataclasses.replace(tm, global_dims=spec.get("dims", tm.global_dims),
                                 global_strides=spec.get("strides", tm.global_strides))
        m = dataclasses.replace(m, tmap=tm) if hasattr(m, "tmap") else tm
    return host_tensor_map(a, box), m


def box_bytes_of(spec):
    box = spec.get("box", (32, 8))
    es = spec.get("estrides", (1, 1))
    return 4 * (-(-box[0] // es[0])) * (-(-box[1] // es[1]))


def run_interp(name):
    edits, spec, (x, y) = CASES[name]
    rng = np.random.default_rng(len(name))
    a = rng.integers(0, 1 << 30, (ROWS, COLS), dtype=np.uint32)
    b = a + np.uint32(1 << 31)
    mine, host = _maps(a, b, spec, interp.host_tensor_map)
    nb = box_bytes_of(spec)
    got, want = np.zeros(nb // 4, np.uint32), np.zeros(nb // 4, np.uint32)
    for out, m, e in ((got, mine, edits), (want, host, [])):
        interp.run(edit_kernel(e, nb), block=32,
                   args=[m, np.zeros(32, np.uint32), b if spec.get("second") else a, out, x, y])
    return got, want


@pytest.mark.parametrize("name", CASES)
def test_a_load_through_an_edited_map_is_the_load_through_the_map_the_host_encodes(name):
    got, want = run_interp(name)
    np.testing.assert_array_equal(got, want)
    assert got.any()


@pytest.mark.parametrize("acquire", [None, "before"])
def test_a_load_through_a_map_written_without_the_acquire_after_it_is_reported(acquire):
    """TMA reads maps through the tensormap proxy: the copying thread needs fence.proxy.tensormap::generic.acquire
    after cp_fenceproxy wrote the map (the values come out right here either way)."""
    a = np.arange(ROWS * COLS, dtype=np.uint32).reshape(ROWS, COLS)
    out = np.zeros(256, np.uint32)
    r = interp.run(edit_kernel([("box_dim", 8, 1)], 1024, acquire=acquire), block=32, check=False,
                   args=[interp.host_tensor_map(a, (32, 4)), np.zeros(32, np.uint32), a, out, 0, 0])
    found = r.by_kind("proxy")
    assert found and "fence.proxy.tensormap::generic.acquire" in found[0].message, str(r)
    assert found[0].instruction.opcode == "cp.async.bulk.tensor" and found[0].other.opcode == "tensormap.cp_fenceproxy"
    np.testing.assert_array_equal(out.reshape(8, 32), a[:8, :32])


def test_lowering_the_rank_keeps_the_inner_dimensions():
    from ptxforge.interp.exec_tensormap import edited
    tm = interp.host_tensor_map(np.zeros((4, ROWS, COLS), np.uint32), (32, 8, 2)).tmap
    low = edited(tm, "rank", None, 1)
    assert (low.global_dims, low.box, low.global_strides) == ((COLS, ROWS), (32, 8), (COLS * 4,))
    assert edited(tm, "elemtype", None, 7).dtype == "f32" and edited(tm, "swizzle_mode", None, 3).swizzle == 128


def test_what_the_interpreter_refuses_or_stops():
    a = np.zeros((ROWS, COLS), np.uint32)
    args = [interp.host_tensor_map(a, (32, 8)), np.zeros(32, np.uint32), a, np.zeros(256, np.uint32), 0, 0]
    with pytest.raises(interp.InterpError, match="driver would refuse: .*box"):
        interp.run(edit_kernel([("box_dim", 300, 0)], 1024), block=32, args=args)
    with pytest.raises(interp.InterpUnsupported, match="only lowering the rank"):
        interp.run(edit_kernel([("rank", 3, None)], 1024), block=32, args=args)
    with pytest.raises(interp.InterpUnsupported, match="tf32"):
        interp.run(edit_kernel([("elemtype", 11, None)], 1024), block=32, args=args)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_gpu_an_edited_map_loads_what_the_host_encoded_map_loads(name):
    """On the GPU: the load through the edited map equals the load through the host-encoded one, and both equal
    the interpreter's."""
    from ptxforge.runtime import DeviceBuffer, TensorMap
    edits, spec, (x, y) = CASES[name]
    rng = np.random.default_rng(len(name))
    a = rng.integers(0, 1 << 30, (ROWS, COLS), dtype=np.uint32)
    b = a + np.uint32(1 << 31)
    da, db = DeviceBuffer.from_host(a), DeviceBuffer.from_host(b)

    def device_map(h, over):
        tm = h.tmap
        return TensorMap(tm.dtype, over.ptr, tm.global_dims, tm.box, tm.global_strides, tm.element_strides,
                         tm.interleave, tm.swizzle, tm.l2_promotion, tm.oob_fill)
    mine, host = _maps(a, b, spec, interp.host_tensor_map)
    nb = box_bytes_of(spec)
    got, want = np.zeros(nb // 4, np.uint32), np.zeros(nb // 4, np.uint32)
    for out, m, e, over in ((got, mine, edits, da), (want, host, [], db if spec.get("second") else da)):
        pf.load(edit_kernel(e, nb))["tm_edit"](1, 32, device_map(m, over), DeviceBuffer.empty((32,), np.uint32),
                                               db.ptr if spec.get("second") else da.ptr, pf.Out(out), x, y)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, run_interp(name)[0])


def test_the_grouped_example_on_the_interpreter():
    from support.examples import load_example
    ex = load_example("tensormap_edit")
    for count, seed in ((6, 0), (3, 5)):
        got, want = ex.run_cpu(count, seed)
        np.testing.assert_array_equal(got, want)
    pf.assemble(ex.build(), "sm_90a", backend="ptxas")


@pytest.mark.gpu
def test_gpu_the_grouped_example():
    from support.examples import load_example
    ex = load_example("tensormap_edit")
    for count, seed in ((6, 0), (40, 3)):
        got, want = ex.run_gpu(count, seed)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, ex.run_cpu(count, seed)[0])
