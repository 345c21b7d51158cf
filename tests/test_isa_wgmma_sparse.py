"""The sparse warpgroup MMA (`wgmma.mma_async.sp`): which forms, selectors and operands the builder takes is what
ptxas 13.0 takes, and what it refuses says what would be legal."""

import pytest

import ptxforge as pf
from ptxforge.errors import ValidationError
from ptxforge.isa import types as T
from ptxforge.isa.operands import Reg, Vec
from ptxforge.isa.wgmma import WGMMA_FORMS, wgmma_form, wgmma_sp

from support.ptx_text import assembler_verdict

#: one N per type combination (the N rules are the dense form's)
COMBOS = sorted({(f.a_type.name, f.b_type.name, f.d_type.name) for f in WGMMA_FORMS})


def _text(form, sel, rs):
    """A kernel of one sparse wgmma of `form` with selector `sel`, A from registers when `rs`."""
    nd = form.d_regs
    dt = {"f32": ".f32", "f16": ".b32", "s32": ".s32"}[form.d_type.name]
    d = "{" + ", ".join(f"%d{i}" for i in range(nd)) + "}"
    a = "{%a0, %a1, %a2, %a3}" if rs else "%da"
    imms = ""
    if form.has_scale_ab:
        imms += ", 1, 1"
    if form.transposable:
        imms += ", 0" if rs else ", 0, 0"
    return "\n".join([
        ".version 8.4", ".target sm_90a", ".address_size 64", ".visible .entry k()", "{",
        f"  .reg {dt} %d<{nd}>;", "  .reg .b32 %a<4>;", "  .reg .b64 %da, %db;", "  .reg .b32 %meta;",
        f"  wgmma.mma_async.sp.sync.aligned.m64n{form.n}k{2 * form.k}.{form.d_type.name}.{form.a_type.name}."
        f"{form.b_type.name} {d}, {a}, %db, %meta, {sel}, 1{imms};",
        "  ret;", "}", ""])


def _ours(form, sel, rs):
    d = Vec(tuple(Reg(f"d{i}", form.d_reg_type) for i in range(form.d_regs)))
    a = Vec(tuple(Reg(f"a{i}", T.b32) for i in range(4))) if rs else Reg("da", T.b64)
    try:
        wgmma_sp(form, d, a, Reg("db", T.b64), Reg("meta", T.b32), sel, 1)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("combo", COMBOS, ids=[".".join(c) for c in COMBOS])
def test_the_sparse_forms_are_what_ptxas_accepts(combo):
    a, b, d = combo
    form = wgmma_form(8 if a in ("s8", "u8", "b1") else 64, a, b, d, "and" if a == "b1" else None)
    disagree = []
    for rs in (False, True):
        for sel in (0, 1, 2):
            if form.a_type is T.b1:  # no sparse .b1 form: ptxas does not know its shape
                assert not _ours(form, sel, rs)
                continue
            ptxas = assembler_verdict(_text(form, sel, rs), "sm_90a") is None
            if _ours(form, sel, rs) != ptxas:
                disagree.append((rs, sel, ptxas))
    assert not disagree, disagree


def test_refusals_and_the_builder():
    f16, s8 = wgmma_form(64, "f16", acc="f32"), wgmma_form(64, "s8")
    d = Vec(tuple(Reg(f"d{i}", T.f32) for i in range(32)))
    with pytest.raises(ValidationError, match="sparsity selector 0 or 1, got 2"):
        wgmma_sp(f16, d, Reg("a", T.b64), Reg("b", T.b64), Reg("m", T.b32), 2, 1)
    with pytest.raises(ValidationError, match=r"\.s8 A takes the immediate sparsity selector 0, got 1"):
        wgmma_sp(s8, Vec(tuple(Reg(f"d{i}", T.s32) for i in range(32))), Reg("a", T.b64), Reg("b", T.b64),
                 Reg("m", T.b32), 1, 1)
    with pytest.raises(ValidationError, match="metadata is a .b32 register"):
        wgmma_sp(f16, d, Reg("a", T.b64), Reg("b", T.b64), 0x4444, 0, 1)
    with pytest.raises(ValidationError, match="no sparse form"):
        wgmma_sp(wgmma_form(8, "b1", bitop="and"), Vec(tuple(Reg(f"d{i}", T.s32) for i in range(4))),
                 Reg("a", T.b64), Reg("b", T.b64), Reg("m", T.b32), 0, 1)
    k = pf.KernelBuilder("sp", target="sm_90a", reqntid=128)
    acc = [k.reg(T.f32) for _ in range(32)]
    k.wgmma_fence()
    k.wgmma_sp(k.mov(0, type=T.b64), k.mov(0, type=T.b64), acc, k.mov(0x4E4E, type=T.b32), selector=1, n=64,
               a_type="bf16", scale_d=0, trans_b=True)
    k.wgmma_commit()
    k.wgmma_wait(0)
    m = k.module()
    assert "wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.bf16.bf16" in m.ptx and str(m.version) == "8.2"
    assert "HGMMA" in " ".join(pf.assemble(m, "sm_90a", backend="ptxas").sass_opcodes())
    p = pf.KernelBuilder("plain", target="sm_90")
    with pytest.raises(pf.TargetError):
        p.wgmma_sp(p.mov(0, type=T.b64), p.mov(0, type=T.b64), [p.reg(T.f32) for _ in range(32)],
                   p.mov(0, type=T.b32), n=64, a_type="bf16", scale_d=0)
