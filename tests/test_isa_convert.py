"""cvt (numeric conversions) and cvta (address-space conversions)."""

import pytest

import ptxforge as pf
from ptxforge import b8, bf16, bf16x2, f16, f16x2, f32, f64, s8, s32, u8, u16, u32, u64
from ptxforge.assembler import available_backends
from support.ptx_text import assembler_verdict, raw_kernel


def rendered(k):
    return [i.render() for i in k.finish().instructions[:-1]]


def test_numeric_conversions_take_the_right_rounding_by_default():
    k = pf.KernelBuilder("t", target="sm_80")
    x, f, d = k.reg(u32, "x"), k.reg(f32, "f"), k.reg(f64, "d")
    k.cvt(x, f32, dst=f)                               # int -> float: .rn
    k.cvt(f, s32, dst=k.reg(s32, "i"))                 # float -> int: .rzi
    k.cvt(f, s32, rnd="rni", sat=True, dst=k.reg(s32, "j"))
    k.cvt(x, u64, dst=k.reg(u64, "w"))                 # widening int: exact
    k.cvt(k.reg(u64, "big"), u32, dst=x)
    k.cvt(k.reg(s32, "v"), s8, sat=True, dst=k.reg(s8, "c"))
    k.cvt(f, f16, dst=k.reg(f16, "h"))                 # narrowing float: .rn
    k.cvt(k.reg(f16, "g"), f32, dst=f)                 # widening float: exact
    k.cvt(d, f32, rnd="rz", dst=f)
    k.cvt(f, f32, rnd="rni", dst=f)                    # round to an integral value
    k.cvt(f, f16, ftz=True, dst=k.reg(f16, "half"))
    k.cvt(f, bf16, dst=k.reg(bf16, "bh"))
    k.cvt(f, f16x2, b=k.reg(f32, "lo"), dst=k.reg(f16x2, "pair"))
    k.cvt(f, bf16x2, b=k.reg(f32, "lo2"), rnd="rz", dst=k.reg(pf.b32, "bpair"))
    assert rendered(k) == [
        "cvt.rn.f32.u32  %f, %x;",
        "cvt.rzi.s32.f32 %i, %f;",
        "cvt.rni.sat.s32.f32 %j, %f;",
        "cvt.u64.u32     %w, %x;",
        "cvt.u32.u64     %x, %big;",
        "cvt.sat.s8.s32  %c, %v;",
        "cvt.rn.f16.f32  %h, %f;",
        "cvt.f32.f16     %f, %g;",
        "cvt.rz.f32.f64  %f, %d;",
        "cvt.rni.f32.f32 %f, %f;",
        "cvt.rn.ftz.f16.f32 %half, %f;",
        "cvt.rn.bf16.f32 %bh, %f;",
        "cvt.rn.f16x2.f32 %pair, %f, %lo;",
        "cvt.rz.bf16x2.f32 %bpair, %f, %lo2;",
    ]
    pf.assemble(k.module())


@pytest.mark.parametrize("frm, to, kwargs, match, line", [
    (u16, u32, {"sat": True}, "every .u16 value fits .u32", "cvt.sat.u32.u16 %r1, %h1;"),
    (u8, s32, {"sat": True}, "fits", "cvt.sat.s32.u8 %r1, %r2;"),
    (f32, f64, {"rnd": "rni"}, "takes no rounding mode", "cvt.rni.f64.f32 %fd1, %f1;"),
    (f32, f32, {"rnd": "rn"}, "integral value", "cvt.rn.f32.f32 %f1, %f2;"),
    (f64, s32, {"ftz": True}, ".ftz applies only", "cvt.rzi.ftz.s32.f64 %r1, %fd1;"),
    (f32, bf16, {"sat": True}, "takes no .sat", "cvt.rn.sat.bf16.f32 %h1, %f1;"),
])
def test_refusals_agree_with_ptxas(frm, to, kwargs, match, line):
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=match):
        k.cvt(k.reg(frm if frm.bits >= 16 else u16), to, frm=frm, **kwargs)
    assert assembler_verdict(raw_kernel(line, "sm_90")) is not None


def test_packed_halves_round_only_to_nearest_or_zero():
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match=".rn or .rz"):
        k.cvt(k.reg(f32), f16x2, b=k.reg(f32), rnd="rm")
    assert assembler_verdict(raw_kernel("cvt.rm.f16x2.f32 %r1, %f1, %f2;")) is not None
    with pytest.raises(pf.ValidationError, match="packs two .f32"):
        k.cvt(k.reg(f32), f16x2)


def test_bf16_conversions_beyond_f32_need_sm90():
    for frm, to in ((bf16, s32), (s32, bf16), (bf16, f16), (f64, bf16)):
        k = pf.KernelBuilder("t", target="sm_80")
        with pytest.raises(pf.TargetError):
            k.cvt(k.reg(frm), to, frm=frm)
        k90 = pf.KernelBuilder("t", target="sm_90")
        k90.cvt(k90.reg(frm), to, frm=frm)
        pf.assemble(k90.module())
    assert "requires .target sm_90" in assembler_verdict(raw_kernel("cvt.rzi.s32.bf16 %r1, %h1;", "sm_80"))
    # bf16 -> f32 exists on sm_80 but needs PTX 7.1
    k = pf.KernelBuilder("t", target="sm_80")
    k.cvt(k.reg(bf16), f32)
    m = k.module()
    assert str(m.version) == "7.1"
    pf.assemble(m)
    assert "7.1" in assembler_verdict(raw_kernel("cvt.f32.bf16 %f1, %h1;", "sm_80", version="7.0"))


def test_types_cvt_does_not_convert():
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match="does not convert .b8"):
        k.cvt(k.reg(u32), b8)


def test_cvta_forms():
    k = pf.KernelBuilder("t", target="sm_80")
    p, q = k.reg(u64, "p"), k.reg(u64, "q")
    k.cvta(p, to="global", dst=p)
    k.cvta(p, to="shared", dst=q)
    k.cvta(q, frm="shared", dst=p)
    k.cvta(p, to="local", dst=q)
    with pytest.raises(pf.ValidationError, match="cvta takes .u64 registers"):
        k.cvta(p, to="shared", dst=k.reg(u32, "s32"))  # 64-bit generic -> 32-bit window: not one cvta
    assert assembler_verdict(raw_kernel("cvta.to.shared.u32 %r2, %rd0;")) is not None
    assert rendered(k)[:4] == [
        "cvta.to.global.u64 %p, %p;",
        "cvta.to.shared.u64 %q, %p;",
        "cvta.shared.u64 %p, %q;",
        "cvta.to.local.u64 %q, %p;",
    ]
    with pytest.raises(pf.ValidationError, match="exactly one of to="):
        k.cvta(p)
    with pytest.raises(pf.ValidationError, match="space must be one of"):
        k.cvta(p, to="texture")


@pytest.mark.parametrize("space,target,version", [("shared::cta", "sm_80", "7.8"), ("shared::cluster", "sm_90", "7.8"),
                                                   ("param::entry", "sm_80", "8.3")])
def test_cvta_on_a_scoped_space_raises_the_module_to_what_it_needs(space, target, version):
    """cvta.shared::cta / ::cluster (PTX ISA 7.8; ::cluster on sm_90 only) and cvta.param::entry (8.3), both
    ways: the module's version follows, ptxas takes it, and a target without the space is refused by name."""
    k = pf.KernelBuilder("scoped", target=target)
    g = k.param_value("g", u64)
    back = k.cvta(k.cvta(g, to=space), frm=space)
    k.st(k.param_ptr("out", u64), back, type=u64)
    assert [x.split()[0] for x in rendered(k) if space in x] == [f"cvta.to.{space}.u64", f"cvta.{space}.u64"]
    m = k.module()
    assert str(m.version) == max(version, str(pf.isa.Target.parse(target).min_ptx), key=float)
    pf.assemble(m)
    if space == "shared::cluster":
        old = pf.KernelBuilder("scoped", target="sm_80")
        with pytest.raises(pf.errors.TargetError, match="needs sm_90 or newer; the kernel targets sm_80"):
            old.cvta(old.param_value("g", u64), to=space)


def test_cvta_param_needs_ptx_7_7():
    k = pf.KernelBuilder("t", target="sm_80")
    tmap = k.param("tmap", b8, nbytes=128, align=64)
    addr = k.param_address(tmap)
    assert rendered(k) == [f"mov.u64         %{addr.name}, tmap;", f"cvta.param.u64  %{addr.name}, %{addr.name};"]
    m = k.module()
    assert str(m.version) == "7.7"
    assert ".param .align 64 .b8 tmap[128]" in str(m)
    pf.assemble(m)


def test_fp8_conversions_need_ptx_81_on_sm89_and_78_on_sm90():
    """ptxas 13: cvt to/from fp8 pairs takes .version 7.8 on sm_90 (which had them first) but 8.1 on sm_89;
    the module's least version follows the target."""
    import ptxforge as pf
    from ptxforge.isa import types as T
    from ptxforge.isa.targets import V
    for target, want in (("sm_89", V("8.1")), ("sm_90", V("7.8")), ("sm_90a", V("8.0"))):
        k = pf.KernelBuilder("fp8", target=target)
        k.cvt_narrow(k.reg(T.f32), k.reg(T.f32), to="e4m3x2", frm="f32", rnd="rn")
        assert k.module().version == max(want, pf.isa.Target.parse(target).min_ptx), target


#: cvt forms with registers of another width than their type, each with a bf16 side or (for contrast) an f16 one.
_BF16_WIDTHS = ["cvt.rni.s8.bf16 %h2, %h1;", "cvt.rni.s8.bf16 %r2, %h1;", "cvt.rni.s16.bf16 %r2, %h1;",
                "cvt.rni.s32.bf16 %rd1, %h1;", "cvt.rn.bf16.s8 %h2, %r1;", "cvt.rn.bf16.s16 %h2, %r1;",
                "cvt.rni.s8.bf16 %b2, %h1;", "cvt.rn.bf16.s8 %h2, %b1;", "cvt.rni.s8.f16 %r2, %h1;",
                "cvt.rn.f16.s16 %h2, %r1;", "cvt.rni.s16.f16 %r2, %h1;"]


@pytest.mark.skipif(not available_backends(), reason="needs ptxas or nvJitLink")
@pytest.mark.parametrize("line", _BF16_WIDTHS)
def test_cvt_register_widths_agree_with_ptxas_on_a_bf16_side(line):
    """ptxas 13.0 takes a wider integer register for cvt's integer side, except when the other side is .bf16
    (cvt.rni.s8.bf16 into a .b16 or .b32 register: "Arguments mismatch"); ptxforge took them all."""
    text = raw_kernel(line, target="sm_90", decls="    .reg .b8 %b<4>;")
    refused_by_ptxas = assembler_verdict(text) is not None
    try:
        pf.parse(text)
        refused = False
    except pf.ValidationError:
        refused = True
    assert refused == refused_by_ptxas, (line, assembler_verdict(text))
