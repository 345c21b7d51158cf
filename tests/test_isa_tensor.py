"""Tensor-core instructions: mma.sync (integer down to 4 bits, f16/bf16) and wgmma (sm_90a)."""

import warnings

import pytest

import ptxforge as pf
from ptxforge import b32, b64, f32, pred, s32
from ptxforge.isa.tensor import MMA_FORMS, EmulatedInstructionWarning, mma_form
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__


def frags(k, shape, a_type, b_type=None, acc=None):
    f = mma_form(shape, a_type, b_type, acc)
    return k.regs(f.frag_type, f.a_regs, "a"), k.regs(f.frag_type, f.b_regs, "b"), k.regs(f.acc_reg_type, f.c_regs, "c")


def last(k):
    return k.finish().instructions[-2].render()


# ---------------------------------------------------------------- rendering

@pytest.mark.parametrize("shape, a_type, b_type, text", [
    ("m16n8k32", "s8", "s8",
     "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, "
     "{%c0, %c1, %c2, %c3};"),
    ("m16n8k64", "s4", "s4",
     "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, "
     "{%c0, %c1, %c2, %c3};"),
    ("m16n8k32", "u4", "s4",
     "mma.sync.aligned.m16n8k32.row.col.s32.u4.s4.s32 {%c0, %c1, %c2, %c3}, {%a0, %a1}, {%b0}, "
     "{%c0, %c1, %c2, %c3};"),
    ("m8n8k32", "s4", "s4", "mma.sync.aligned.m8n8k32.row.col.s32.s4.s4.s32 {%c0, %c1}, {%a0}, {%b0}, {%c0, %c1};"),
    ("m8n8k16", "u8", "u8", "mma.sync.aligned.m8n8k16.row.col.s32.u8.u8.s32 {%c0, %c1}, {%a0}, {%b0}, {%c0, %c1};"),
    ("m16n8k16", "s8", "u8",
     "mma.sync.aligned.m16n8k16.row.col.s32.s8.u8.s32 {%c0, %c1, %c2, %c3}, {%a0, %a1}, {%b0}, "
     "{%c0, %c1, %c2, %c3};"),
    ("m16n8k16", "f16", "f16",
     "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, "
     "{%c0, %c1, %c2, %c3};"),
    ("m16n8k16", "bf16", "bf16",
     "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%c0, %c1, %c2, %c3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, "
     "{%c0, %c1, %c2, %c3};"),
])
def test_mma_renders_ptx_syntax_accumulating_in_place(shape, a_type, b_type, text):
    k = pf.KernelBuilder("t", target="sm_80")
    a, b, c = frags(k, shape, a_type, b_type)
    d = k.mma(a, b, c, shape=shape, a_type=a_type, b_type=b_type, dst=c)
    assert d is c
    assert last(k) == text


def test_mma_f16_accumulator_uses_two_packed_registers():
    k = pf.KernelBuilder("t", target="sm_80")
    a, b, c = frags(k, "m16n8k16", "f16", acc="f16")
    k.mma(a, b, c, shape="m16n8k16", a_type="f16", acc="f16", dst=c)
    assert last(k) == ("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%c0, %c1}, {%a0, %a1, %a2, %a3}, "
                       "{%b0, %b1}, {%c0, %c1};")


def test_satfinite_follows_the_layout():
    k = pf.KernelBuilder("t", target="sm_80")
    a, b, c = frags(k, "m16n8k32", "s8", "u8")
    k.mma(a, b, c, shape="m16n8k32", a_type="s8", b_type="u8", satfinite=True, dst=c)
    assert last(k).startswith("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32 ")


def test_zero_accumulator_is_materialized_in_fresh_registers():
    k = pf.KernelBuilder("t", target="sm_80")
    a, b, _ = frags(k, "m16n8k16", "f16")
    d = k.mma(a, b, 0, shape="m16n8k16", a_type="f16")
    body = [i.render() for i in k.finish().instructions]
    assert body[:4] == [f"mov.f32         %{r.name}, 0f00000000;" for r in d]
    assert body[4].endswith(f"{d}, {{%a0, %a1, %a2, %a3}}, {{%b0, %b1}}, {d};")

    k = pf.KernelBuilder("t", target="sm_80")
    a, b, _ = frags(k, "m16n8k32", "s8")
    d = k.mma(a, b, 0, shape="m16n8k32", a_type="s8")
    assert [i.render() for i in k.finish().instructions][:4] == [f"mov.s32         %{r.name}, 0;" for r in d]


@pytest.mark.parametrize("sm", sorted({f.req.min_sm for f in MMA_FORMS}))
def test_every_form_of_the_table_assembles_for_its_least_target(sm):
    """Every form, on the least target it names (sm_80; fp8 on sm_89; the sm_90 double shapes)."""
    k = pf.KernelBuilder("all_mma", target=f"sm_{sm}")
    for f in MMA_FORMS:
        if f.req.min_sm != sm:
            continue
        a, b = k.regs(f.frag_type, f.a_regs), k.regs(f.frag_type, f.b_regs)
        k.mma(a, b, 0, shape=f.shape, a_type=f.a_type, b_type=f.b_type, acc=f.c_type, bitop=f.bitop)
    r = pf.assemble(k.module())
    assert r.resources("all_mma").registers > 0


@pytest.mark.parametrize("form", MMA_FORMS, ids=lambda f: f"{f.shape}.{f.a_type.name}.{f.b_type.name}.{f.c_type.name}"
                         + (f".{f.bitop}" if f.bitop else ""))
def test_fragment_register_counts_follow_from_the_shape(form):
    # every lane of the warp holds an equal share of A (m x k), B (k x n) and C, D (m x n) of each of the
    # warp's products (four for m8n8k4 .f16, one per quad pair; one otherwise)
    lanes = 32
    products = 4 if form.quad_pairs else 1
    reg_bits = 64 if form.a_type.name == "f64" else 32
    assert form.a_regs * lanes * reg_bits == products * form.m * form.k * form.a_type.bits
    assert form.b_regs * lanes * reg_bits == products * form.k * form.n * form.b_type.bits
    for t, n in ((form.c_type, form.c_regs), (form.d_type, form.d_regs)):
        bits = 16 if t.name == "f16" else t.bits
        assert n * lanes * (64 if t.name == "f64" else 32) == products * form.m * form.n * bits


# ---------------------------------------------------------------- validation, located at the user's line

def test_a_fragment_of_three_registers_for_m16n8k64_is_refused():
    k = pf.KernelBuilder("t", target="sm_80")
    a3, b, c = k.regs(b32, 3), k.regs(b32, 2), k.regs(s32, 4)
    with pytest.raises(pf.ValidationError) as info:
        k.mma(a3, b, c, shape="m16n8k64", a_type="s4")  # <- a-of-3
    assert "m16n8k64 A fragment (.s4): needs 4 registers of .b32, got 3" in str(info.value)
    assert_located(info.value, "<- a-of-3", HERE)


def test_ptxas_also_refuses_an_a_fragment_of_three_registers():
    bad = ("mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6}, {%r8,%r9}, "
           "{%r0,%r1,%r2,%r3};")
    assert "vector size" in assembler_verdict(raw_kernel(bad))
    assert assembler_verdict(raw_kernel(bad.replace("%r6}", "%r6,%r7}"))) is None


def test_fragment_registers_of_the_wrong_width_are_refused():
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError) as info:
        k.mma(k.regs(b64, 4), k.regs(b32, 2), 0, shape="m16n8k32", a_type="s8")  # <- b64-fragment
    assert "cannot be used as .b32" in str(info.value)
    assert_located(info.value, "<- b64-fragment", HERE)
    with pytest.raises(pf.ValidationError):
        k.mma(k.regs(b32, 4), k.regs(b32, 2), k.regs(f32, 4), shape="m16n8k32", a_type="s8")


@pytest.mark.parametrize("shape, a, b", [("m16n8k32", "s4", "s8"), ("m16n8k64", "u8", "u4"),
                                          ("m16n8k16", "s8", "f16")])
def test_mixed_operand_widths_are_refused(shape, a, b):
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match="not a legal form"):
        k.mma(k.regs(b32, 4), k.regs(b32, 2), 0, shape=shape, a_type=a, b_type=b)


def test_ptxas_also_refuses_mixed_widths_and_satfinite_floats():
    mixed = ("mma.sync.aligned.m16n8k32.row.col.s32.s8.s4.s32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, "
             "{%r0,%r1,%r2,%r3};")
    assert "Unexpected instruction types" in assembler_verdict(raw_kernel(mixed))
    sat = ("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r4,%r5,%r6,%r7}, "
           "{%r8,%r9}, {%f0,%f1,%f2,%f3};")
    assert assembler_verdict(raw_kernel(sat)) is not None
    k = pf.KernelBuilder("t", target="sm_80")
    a, b, c = frags(k, "m16n8k16", "f16")
    with pytest.raises(pf.ValidationError, match="satfinite"):
        k.mma(a, b, c, shape="m16n8k16", a_type="f16", satfinite=True)


def test_unknown_shape_lists_the_shapes_of_the_type():
    with pytest.raises(pf.ValidationError) as info:
        mma_form("m16n8k16", "s4")
    assert "m16n8k16 takes" in str(info.value) or "shapes for .s4" in str(info.value)
    with pytest.raises(pf.ValidationError, match="shapes for .s4: m8n8k32, m16n8k32, m16n8k64"):
        mma_form("m32n8k16", "s4")


# ---------------------------------------------------------------- s4/u4 on sm_90+: emulated

def test_s4_mma_on_sm90_warns_at_the_users_line():
    k = pf.KernelBuilder("t", target="sm_90")
    a, b, c = frags(k, "m16n8k64", "s4")
    with pytest.warns(EmulatedInstructionWarning) as rec:
        k.mma(a, b, c, shape="m16n8k64", a_type="s4", dst=c)  # <- s4-on-sm90
    w = rec[0]
    assert "no 4-bit tensor path on sm_90" in str(w.message) and "25x slower" in str(w.message)
    from support.located import marked_line
    assert (w.filename, w.lineno) == (HERE, marked_line(HERE, "<- s4-on-sm90"))


@pytest.mark.parametrize("target, a_type, warns", [
    ("sm_80", "s4", False), ("sm_86", "u4", False), ("sm_89", "s4", False),
    ("sm_90", "u4", True), ("sm_90a", "s4", True), ("sm_90", "s8", False),
])
def test_s4_warning_only_where_there_is_no_4bit_tensor_path(target, a_type, warns):
    k = pf.KernelBuilder("t", target=target)
    a, b, c = frags(k, "m16n8k32", a_type)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        k.mma(a, b, c, shape="m16n8k32", a_type=a_type)
    got = [w for w in rec if issubclass(w.category, EmulatedInstructionWarning)]
    assert bool(got) == warns


# ---------------------------------------------------------------- wgmma (sm_90a)

def _wgmma_kernel(target):
    k = pf.KernelBuilder("wg", target=target, reqntid=128)
    d = k.regs(s32, 32, "d")
    desc_a, desc_b, scale = k.reg(b64, "da"), k.reg(b64, "db"), k.reg(pred, "sd")
    k.wgmma_fence()  # <- wgmma-fence
    k.wgmma(desc_a, desc_b, d, n=64, a_type="s8", scale_d=scale)
    k.wgmma_commit()
    k.wgmma_wait(0)
    return k


def test_wgmma_renders_and_assembles_for_sm90a():
    k = _wgmma_kernel("sm_90a")
    body = [i.render() for i in k.finish().instructions]
    assert body[0] == "wgmma.fence.sync.aligned;"
    assert body[1] == ("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {"
                       + ", ".join(f"%d{i}" for i in range(32)) + "}, %da, %db, %sd;")
    assert body[2:4] == ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;"]
    m = k.module()
    assert str(m.version) == "8.0"
    pf.assemble(m)


def test_wgmma_class_features_are_refused_on_plain_sm90():
    with pytest.raises(pf.TargetError) as info:
        _wgmma_kernel("sm_90")
    assert "arch-specific feature: it needs .target sm_90a" in str(info.value)
    assert_located(info.value, "<- wgmma-fence", HERE)
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.TargetError):
        k.setmaxnreg("dec", 40)
    verdict = assembler_verdict(raw_kernel("wgmma.fence.sync.aligned;", "sm_90"))
    assert verdict is not None and "sm_90" in verdict


def test_mixed_sign_wgmma_raises_the_version_to_8_4():
    k = pf.KernelBuilder("wg", target="sm_90a", reqntid=128)
    k.wgmma(k.reg(b64), k.reg(b64), k.regs(s32, 32), n=64, a_type="s8", b_type="u8", scale_d=k.reg(pred))
    m = k.module()
    assert str(m.version) == "8.4"
    pf.assemble(m)


@pytest.mark.parametrize("n, a_type", [(40, "s8"), (72, "u8"), (64, "s4"), (8, "u4")])
def test_wgmma_illegal_shapes_and_types(n, a_type):
    k = pf.KernelBuilder("wg", target="sm_90a")
    with pytest.raises(pf.ValidationError):
        k.wgmma(k.reg(b64), k.reg(b64), k.regs(s32, max(n // 2, 1)), n=n, a_type=a_type, scale_d=k.reg(pred))


def test_setmaxnreg_forms():
    k = pf.KernelBuilder("t", target="sm_90a", maxntid=384, minnctapersm=1)
    k.setmaxnreg("dec", 40)
    k.setmaxnreg("inc", 232)
    body = [i.render() for i in k.finish().instructions]
    assert body[:2] == ["setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg.inc.sync.aligned.u32 232;"]
    pf.assemble(k.module())
    for bad in (20, 44, 264):
        with pytest.raises(pf.ValidationError, match="multiple of 8 in 24..256"):
            k2 = pf.KernelBuilder("t", target="sm_90a")
            k2.setmaxnreg("inc", bad)
        assert assembler_verdict(raw_kernel(f"setmaxnreg.inc.sync.aligned.u32 {bad};", "sm_90a")) is not None


def test_setmaxnreg_without_an_entry_cap_warns_at_the_line_that_asked():
    """ptxas drops setmaxnreg in a kernel without .maxnreg or .maxntid + .minnctapersm (C7508): the builder
    says so at the caller's line, and not when the kernel has a cap."""
    k = pf.KernelBuilder("t", target="sm_90a", maxntid=384)  # .maxntid alone gives ptxas no cap
    with pytest.warns(pf.IgnoredInstructionWarning, match="ptxas ignores it") as got:
        k.setmaxnreg("inc", 232)
    assert got[0].filename == __file__
    if pf.assembler.find_tool("ptxas"):
        assert "C7508" in pf.assemble(k.module(), "sm_90a", backend="ptxas").log
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", pf.IgnoredInstructionWarning)
        for kw in (dict(maxntid=384, minnctapersm=1), dict(maxnreg=128), dict(reqntid=256, minnctapersm=1)):
            pf.KernelBuilder("t", target="sm_90a", **kw).setmaxnreg("dec", 40)
