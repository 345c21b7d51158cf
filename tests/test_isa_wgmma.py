"""wgmma.mma_async: every form of WGMMA_FORMS assembles with ptxas 13.0, the refusals match ptxas's,
and the register layouts cover their matrices exactly once."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import b32, b64, f32, pred, s32
from ptxforge.isa import types as T
from ptxforge.isa.wgmma import (WGMMA_FORMS, WGMMA_N_FLOAT, WGMMA_N_INT, a_fragment_layout, accumulator_layout,
                                accumulator_offset, a_fragment_offset, wgmma_form)
from support.ptx_text import assembler_verdict

COMBOS = sorted({(f.a_type.name, f.b_type.name, f.d_type.name) for f in WGMMA_FORMS})


def _kernel(forms, a_regs, **imms):
    k = pf.KernelBuilder("wg", target="sm_90a", reqntid=128)
    da, db, p = k.reg(b64, "da"), k.reg(b64, "db"), k.reg(pred, "p")
    a = k.regs(b32, 4, "a") if a_regs else da
    k.wgmma_fence()
    for f in forms:
        d = k.regs(f.d_reg_type, f.d_regs, f"d{f.n}")
        k.wgmma(a, db, d, n=f.n, a_type=f.a_type, b_type=f.b_type, acc=f.d_type, scale_d=p,
                bitop=f.bitop, **imms)
    k.wgmma_commit()
    k.wgmma_wait(0)
    return k


def test_the_table_has_every_type_combination_and_n():
    assert len(COMBOS) == 4 + 8 + 4 + 1  # f16 (2 accs), bf16, tf32; fp8 4 x 2 accs; s8/u8 4; b1
    for a, b, d in COMBOS:
        ns = sorted(f.n for f in WGMMA_FORMS if (f.a_type.name, f.b_type.name, f.d_type.name) == (a, b, d))
        assert tuple(ns) == (WGMMA_N_INT if a in ("s8", "u8", "b1") else WGMMA_N_FLOAT)
    f = wgmma_form(64, "f16", acc="f16")
    assert (f.d_regs, f.k, f.shape) == (16, 16, "m64n64k16")
    assert wgmma_form(256, "e4m3", "e5m2").k == 32 and wgmma_form(8, "tf32").k == 8
    assert wgmma_form(64, "b1", bitop="and").shape == "m64n64k256"


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: ".".join(c))
@pytest.mark.parametrize("a_regs", [False, True], ids=["SS", "RS"])
def test_every_form_assembles(combo, a_regs):
    forms = [f for f in WGMMA_FORMS if (f.a_type.name, f.b_type.name, f.d_type.name) == combo]
    m = _kernel(forms, a_regs).module()
    expected = "8.4" if combo[0] != combo[1] and combo[0] in ("s8", "u8") else "8.0"
    assert str(m.version) == expected
    pf.assemble(m, backend="ptxas")


def test_immediates_render_and_assemble():
    f16 = [wgmma_form(64, "bf16")]
    ss = _kernel(f16, False, scale_a=-1, scale_b=1, trans_a=True, trans_b=1).finish()
    line = [i.render() for i in ss.instructions if i.opcode == "wgmma"][0]
    assert line.endswith("%da, %db, %p, -1, 1, 1, 1;")
    rs = _kernel(f16, True, scale_b=-1, trans_b=True).finish()
    line = [i.render() for i in rs.instructions if i.opcode == "wgmma"][0]
    assert line.endswith("{%a0, %a1, %a2, %a3}, %db, %p, 1, -1, 1;")
    tf = _kernel([wgmma_form(32, "tf32")], False, scale_a=-1).finish()
    assert [i.render() for i in tf.instructions if i.opcode == "wgmma"][0].endswith("%p, -1, 1;")
    for k in (ss, rs, tf):
        pf.assemble(pf.Module([k]))


def test_immediate_scale_d_and_satfinite():
    k = pf.KernelBuilder("wg", target="sm_90a", reqntid=128)
    db = k.reg(b64, "db")
    d = k.regs(s32, 32, "d")
    k.wgmma(db, db, d, n=64, a_type="s8", scale_d=0, satfinite=True)
    k.wgmma(db, db, d, n=64, a_type="u8", scale_d=True)
    lines = [i.render() for i in k.finish().instructions]
    assert lines[0].startswith("wgmma.mma_async.sync.aligned.m64n64k32.satfinite.s32.s8.s8 ")
    assert lines[0].endswith("%db, %db, 0;") and lines[1].endswith("%db, %db, 1;")
    pf.assemble(k.module())


REFUSED = [  # (what ptxforge refuses, the corrected spelling ptxas refuses too)
    (dict(n=64, a_type="f16", acc="f16", d_regs=32), "m64n64k16.f16.f16.f16 {D}, %rd1, %rd2, %p1, 1, 1, 0, 0"),
    (dict(n=64, a_type="e4m3", acc="f16", d_regs=32), "m64n64k32.f16.e4m3.e4m3 {D}, %rd1, %rd2, %p1, 1, 1"),
    (dict(n=40, a_type="s8", d_regs=20), "m64n40k32.s32.s8.s8 {D}, %rd1, %rd2, %p1"),
    (dict(n=40, a_type="b1", bitop="and", d_regs=20), "m64n40k256.s32.b1.b1.and.popc {D}, %rd1, %rd2, %p1"),
    (dict(n=64, a_type="b1", bitop="xor", d_regs=32), "m64n64k256.s32.b1.b1.xor.popc {D}, %rd1, %rd2, %p1"),
    (dict(n=64, a_type="tf32", trans_b=True, d_regs=32), "m64n64k8.f32.tf32.tf32 {D}, %rd1, %rd2, %p1, 1, 1, 0, 1"),
    (dict(n=64, a_type="bf16", scale_a=2, d_regs=32), "m64n64k16.f32.bf16.bf16 {D}, %rd1, %rd2, %p1, 2, 1, 0, 0"),
    (dict(n=64, a_type="f16", trans_a=2, d_regs=32), "m64n64k16.f32.f16.f16 {D}, %rd1, %rd2, %p1, 1, 1, 2, 0"),
    (dict(n=64, a_type="s4", d_regs=32), "m64n64k64.s32.s4.s4 {D}, %rd1, %rd2, %p1"),
]


def _raw(line, nd):
    regs = ", ".join(f"%dd{i}" for i in range(nd))
    return (".version 8.4\n.target sm_90a\n.address_size 64\n.visible .entry raw()\n{\n"
            f"    .reg .b32 %dd<{nd}>;\n    .reg .b64 %rd<4>;\n    .reg .pred %p<2>;\n"
            f"    wgmma.mma_async.sync.aligned.{line.replace('{D}', '{' + regs + '}')};\n    ret;\n}}\n")


@pytest.mark.parametrize("kw, line", REFUSED, ids=[r[1].split(" ")[0] for r in REFUSED])
def test_refusals_agree_with_ptxas(kw, line):
    kw = dict(kw)
    nd = kw.pop("d_regs")
    k = pf.KernelBuilder("wg", target="sm_90a")
    d_t = f32 if kw.get("acc", "f32") == "f32" and kw["a_type"] not in ("s8", "b1", "s4") else b32
    with pytest.raises(pf.ValidationError):
        k.wgmma(k.reg(b64), k.reg(b64), k.regs(d_t, nd), scale_d=k.reg(pred), **kw)
    assert assembler_verdict(_raw(line, nd)) is not None


def test_wrong_register_count_names_the_rule():
    k = pf.KernelBuilder("wg", target="sm_90a")
    with pytest.raises(pf.ValidationError, match="16 registers: N/4"):
        k.wgmma(k.reg(b64), k.reg(b64), k.regs(b32, 32), n=64, a_type="f16", acc="f16", scale_d=1)
    with pytest.raises(pf.ValidationError, match="A from registers has no transpose"):
        k.wgmma(k.regs(b32, 4), k.reg(b64), k.regs(f32, 32), n=64, a_type="f16", trans_a=True, scale_d=1)


@pytest.mark.parametrize("form", [wgmma_form(8, "s8"), wgmma_form(256, "f16", acc="f16"), wgmma_form(24, "tf32"),
                                  wgmma_form(136, "e5m2", acc="f32"), wgmma_form(64, "b1", bitop="and")],
                         ids=str)
def test_layouts_cover_their_matrices_once(form):
    rows, cols = accumulator_layout(form)
    counts = np.zeros((64, form.n), dtype=int)
    np.add.at(counts, (rows.ravel(), cols.ravel()), 1)
    assert (counts == 1).all()
    ar, ac = a_fragment_layout(form)
    counts = np.zeros((64, form.k), dtype=int)
    np.add.at(counts, (ar.ravel(), ac.ravel()), 1)
    assert (counts == 1).all()
    # the per-register offsets from the thread's origin say the same as the tables
    per = 32 // form.elem_bits
    for tid in (0, 37, 127):
        w, lane = tid // 32, tid % 32
        r0, c0 = 16 * w + lane // 4, 2 * (lane % 4)
        for e in range(form.d_regs * form.per_d_reg):
            dr, dc = accumulator_offset(form, e)
            assert (rows[tid].ravel()[e], cols[tid].ravel()[e]) == (r0 + dr, c0 + dc)
        for r in range(4):
            for j in range(per):
                dr, dc = a_fragment_offset(form, r, j)
                assert (ar[tid, r, j], ac[tid, r, j]) == (r0 + dr, per * (lane % 4) + dc)


def test_accumulator_layout_is_the_mma_m16n8_c_layout_per_warp():
    from ptxforge.isa.tensor import mma_form
    try:
        from ptxforge.isa.fragments import mma_fragment
    except ImportError:
        from ptxforge.interp import mma_fragment
    c = mma_fragment(mma_form("m16n8k32", "s8"), "c")
    rows, cols = accumulator_layout(wgmma_form(64, "s8"))
    for j in range(8):  # n-block j holds registers 4j..4j+3
        for w in range(4):
            assert (rows[32 * w:32 * w + 32, 4 * j:4 * j + 4, 0] == c.rows[:, :, 0] + 16 * w).all()
            assert (cols[32 * w:32 * w + 32, 4 * j:4 * j + 4, 0] == c.cols[:, :, 0] + 8 * j).all()


def test_accumulator_origin_helper_assembles():
    k = pf.KernelBuilder("wg", target="sm_90a", reqntid=128)
    row0, col0 = k.wgmma_accumulator_origin()
    assert row0.type is T.u32 and col0.type is T.u32
    pf.assemble(k.module())


@pytest.mark.parametrize("form", [wgmma_form(64, "s8"), wgmma_form(24, "f16", acc="f16"), wgmma_form(8, "tf32")],
                         ids=str)
def test_store_accumulators_puts_each_register_where_the_layout_says(form):
    from ptxforge import interp
    k = pf.KernelBuilder("st_acc", target="sm_90a", reqntid=128)
    out = k.param_ptr("out", pf.u32)
    tid = k.tid()
    d = k.regs(b32, form.d_regs, "d")
    for i in range(form.d_regs):  # register i of thread t holds 1000 * t + i
        k.mad(tid, 1000, i, mode="lo", dst=d[i])
    eb = 2 if form.d_type.name == "f16" else 4
    k.wgmma_store_accumulators(d, form, out, form.n * eb)
    got = np.zeros(64 * form.n * eb // 4, np.uint32)
    interp.run(k, block=128, args=[got])
    rows, cols = accumulator_layout(form)
    if eb == 2:
        halves = got.view(np.uint16).reshape(64, form.n)
        for t in (0, 5, 77, 127):
            for i in range(form.d_regs):
                v = 1000 * t + i
                assert halves[rows[t, i, 0], cols[t, i, 0]] == v & 0xFFFF
                assert halves[rows[t, i, 1], cols[t, i, 1]] == v >> 16
    else:
        mat = got.reshape(64, form.n)
        want = np.zeros_like(mat)
        want[rows[..., 0], cols[..., 0]] = 1000 * np.arange(128)[:, None] + np.arange(form.d_regs)[None, :]
        np.testing.assert_array_equal(mat, want)
    pf.assemble(k.module(), backend="ptxas")
