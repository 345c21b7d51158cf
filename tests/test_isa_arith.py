"""Integer and floating-point arithmetic."""

import struct

import pytest

import ptxforge as pf
from ptxforge import bf16, bf16x2, f16, f16x2, f32, f64, s16, s32, s64, u16, u32, u64
from ptxforge.isa.arith import ARITH, FLOAT_MODS
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__


def build(fn, target="sm_80"):
    """Render what fn(k, regs) emits; regs are named registers a, b, c of several types."""
    k = pf.KernelBuilder("t", target=target)
    fn(k)
    return k, [i.render() for i in k.finish().instructions[:-1]]


def regs(k, t, *names):
    return [k.reg(t, n) for n in names]


def test_integer_forms():
    def body(k):
        a, b = regs(k, s32, "a", "b")
        x, y = regs(k, u32, "x", "y")
        w = k.reg(u64, "w")
        k.add(a, b, dst=a)
        k.add(a, -1, dst=a)
        k.add(a, b, mode="sat", dst=a)
        k.sub(x, 0xFFFFFFFF, dst=x)
        k.mul(x, y, dst=x)
        k.mul(x, 7, mode="hi", dst=y)
        k.mul(a, -7, mode="wide", dst=k.reg(s64, "wide"))
        k.mad(x, y, x, dst=x)
        k.mad(x, y, w, mode="wide", dst=w)
        k.div(x, 3, dst=x)
        k.rem(a, b, dst=a)
        k.abs(a, dst=b)
        k.neg(a, dst=b)
        k.min(x, y, dst=x)
        k.max(k.reg(u16, "h"), 5, dst=k.reg(u16, "hm"))
    k, body = build(body)
    assert body == [
        "add.s32         %a, %a, %b;",
        "add.s32         %a, %a, -1;",
        "add.sat.s32     %a, %a, %b;",
        "sub.u32         %x, %x, 0xFFFFFFFF;",
        "mul.lo.u32      %x, %x, %y;",
        "mul.hi.u32      %y, %x, 7;",
        "mul.wide.s32    %wide, %a, -7;",
        "mad.lo.u32      %x, %x, %y, %x;",
        "mad.wide.u32    %w, %x, %y, %w;",
        "div.u32         %x, %x, 3;",
        "rem.s32         %a, %a, %b;",
        "abs.s32         %b, %a;",
        "neg.s32         %b, %a;",
        "min.u32         %x, %x, %y;",
        "max.u16         %hm, %h, 5;",
    ]
    pf.assemble(k.module())


def test_mul24_and_sad_render_and_assemble():
    def body(k):
        a, b = regs(k, s32, "a", "b")
        x, y = regs(k, u32, "x", "y")
        w = k.reg(u64, "w")
        h = k.reg(s16, "h")
        k.mul24(a, b, dst=a)
        k.mul24(a, -7, mode="hi", dst=b)
        k.mul24(x, y, mode="lo", dst=x)
        k.mul24(x, 0xFFFFFF, mode="hi", dst=y)
        k.sad(a, b, a, dst=a)
        k.sad(x, 3, y, dst=x)
        k.sad(w, w, w, dst=w)
        k.sad(h, h, h, dst=h)
    k, body = build(body)
    assert body == [
        "mul24.lo.s32    %a, %a, %b;",
        "mul24.hi.s32    %b, %a, -7;",
        "mul24.lo.u32    %x, %x, %y;",
        "mul24.hi.u32    %y, %x, 0xFFFFFF;",
        "sad.s32         %a, %a, %b, %a;",
        "sad.u32         %x, %x, 3, %y;",
        "sad.u64         %w, %w, %w, %w;",
        "sad.s16         %h, %h, %h, %h;",
    ]
    pf.assemble(k.module())


@pytest.mark.parametrize("call, match", [
    (lambda k: k.mul24(k.reg(u64), k.reg(u64)), "mul24 does not take .u64"),
    (lambda k: k.mul24(k.reg(u32), k.reg(u32), mode="wide"), "takes .lo or .hi, got .wide"),
    (lambda k: k.sad(k.reg(f32), k.reg(f32), k.reg(f32)), "sad does not take .f32"),
    (lambda k: k.sad(k.reg(u32), k.reg(u32), k.reg(u32), mode="lo"), "sad.u32 does not take .lo"),
    (lambda k: k.sad(k.reg(u32), k.reg(u32)), "sad takes 3 source operand"),
])
def test_mul24_and_sad_refusals(call, match):
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match=match):
        call(k)


@pytest.mark.parametrize("line", ["mul24.u32 %r1, %r2, %r3;", "mul24.wide.u32 %rd1, %r2, %r3;",
                                  "mul24.lo.u64 %rd1, %rd2, %rd3;", "sad.lo.u32 %r1, %r2, %r3, %r4;",
                                  "sad.f32 %f1, %f2, %f3, %f4;"])
def test_ptxas_refuses_the_mul24_and_sad_forms_the_table_leaves_out(line):
    assert assembler_verdict(raw_kernel(line, "sm_90")) is not None


def test_generated_methods_are_documented_builder_methods():
    import inspect
    for op in ("mul24", "sad"):
        method = getattr(pf.KernelBuilder, op)
        assert ARITH[op].doc and inspect.cleandoc(ARITH[op].doc) in method.__doc__
        params = list(inspect.signature(method).parameters)
        assert params[:ARITH[op].arity + 2] == ["self", "a", "b", "c"][:ARITH[op].arity + 1] + ["type"]
        assert ("mode" in params) == (op == "mul24") and "flags" not in params  # integer-only rows


def test_wide_results_get_a_double_width_register():
    k = pf.KernelBuilder("t", target="sm_80")
    d = k.mul(k.reg(u32), 4, mode="wide")
    assert d.type is u64
    d16 = k.mul(k.reg(s16), k.reg(s16), mode="wide")
    assert d16.type is s32


def test_float_forms_and_exact_immediates():
    def body(k):
        f, g, h = regs(k, f32, "f", "g", "h")
        d = k.reg(f64, "d")
        k.add(f, 1.5, dst=f)
        k.add(f, 2, dst=f)                       # an integer literal read as .f32 is spelled 0f...
        k.add(d, 0.1, dst=d)
        k.fma(f, g, h, dst=h)                    # fma needs a rounding mode: .rn by default
        k.mad(f, g, h, mode="rz", dst=h)
        k.mul(f, g, mode="rn", flags=("ftz", "sat"), dst=f)
        k.div(f, g, dst=f)
        k.div(f, g, mode="approx", dst=f)
        k.div(f, g, mode="full", flags="ftz", dst=f)
        k.rcp(d, mode="approx", flags=("ftz",), dst=d)
        k.sqrt(f, dst=f)
        k.rsqrt(f, dst=f)
        k.ex2(f, dst=f)
        k.lg2(f, flags=("ftz",), dst=f)
        k.sin(f, dst=f)
        k.cos(f, dst=f)
        k.min(f, g, flags=("NaN",), dst=f)
        k.abs(f, flags=("ftz",), dst=f)
        k.neg(d, dst=d)
        k.add(f, g, mode="ftz", dst=f)           # a lone flag may be passed as the mode
    k, body = build(body)
    assert body == [
        "add.f32         %f, %f, 0f3FC00000;",
        "add.f32         %f, %f, 0f40000000;",
        "add.f64         %d, %d, 0d3FB999999999999A;",
        "fma.rn.f32      %h, %f, %g, %h;",
        "mad.rz.f32      %h, %f, %g, %h;",
        "mul.rn.ftz.sat.f32 %f, %f, %g;",
        "div.rn.f32      %f, %f, %g;",
        "div.approx.f32  %f, %f, %g;",
        "div.full.ftz.f32 %f, %f, %g;",
        "rcp.approx.ftz.f64 %d, %d;",
        "sqrt.rn.f32     %f, %f;",
        "rsqrt.approx.f32 %f, %f;",
        "ex2.approx.f32  %f, %f;",
        "lg2.approx.ftz.f32 %f, %f;",
        "sin.approx.f32  %f, %f;",
        "cos.approx.f32  %f, %f;",
        "min.NaN.f32     %f, %f, %g;",
        "abs.ftz.f32     %f, %f;",
        "neg.f64         %d, %d;",
        "add.ftz.f32     %f, %f, %g;",
    ]
    pf.assemble(k.module())


def test_float_immediates_are_the_exact_bit_patterns():
    k = pf.KernelBuilder("t", target="sm_80")
    f = k.reg(f32, "f")
    k.add(f, 0.1, dst=f)
    text = k.finish().instructions[0].render()
    assert text.endswith("0f%08X;" % struct.unpack("<I", struct.pack("<f", 0.1))[0])


def test_half_precision_forms():
    def body(k):
        h, i = regs(k, f16, "h", "i")
        hh = k.reg(f16x2, "hh")
        bh, bi = regs(k, bf16, "bh", "bi")
        bx = k.reg(bf16x2, "bx")
        k.add(h, i, dst=h)
        k.fma(h, i, h, dst=h)                    # .rn is required for fma.f16
        k.mul(hh, hh, mode="rn", flags=("sat",), dst=hh)
        k.fma(bh, bi, bh, dst=bh)
        k.min(bx, bx, flags=("NaN",), dst=bx)
        k.neg(bh, dst=bi)
    k, body = build(body, "sm_80")
    assert body == [
        "add.f16         %h, %h, %i;",
        "fma.rn.f16      %h, %h, %i, %h;",
        "mul.rn.sat.f16x2 %hh, %hh, %hh;",
        "fma.rn.bf16     %bh, %bh, %bi, %bh;",
        "min.NaN.bf16x2  %bx, %bx, %bx;",
        "neg.bf16        %bi, %bh;",
    ]
    pf.assemble(k.module())


def test_bf16_add_needs_sm90_as_ptxas_says():
    k = pf.KernelBuilder("t", target="sm_80")
    a, b = regs(k, bf16, "a", "b")
    with pytest.raises(pf.TargetError) as info:
        k.add(a, b)  # <- bf16-add-sm80
    assert_located(info.value, "<- bf16-add-sm80", HERE)
    line = "add.bf16 %h1, %h2, %h3;"
    assert "requires .target sm_90" in assembler_verdict(raw_kernel(line, "sm_80"))
    assert assembler_verdict(raw_kernel(line, "sm_90")) is None
    k90 = pf.KernelBuilder("t", target="sm_90")
    k90.add(*regs(k90, bf16, "a", "b"))
    m = k90.module()
    assert str(m.version) == "7.8"
    pf.assemble(m)


@pytest.mark.parametrize("call, match", [
    (lambda k: k.rem(k.reg(f32), k.reg(f32)), "rem does not take .f32"),
    (lambda k: k.abs(k.reg(u32)), "abs does not take .u32"),
    (lambda k: k.add(k.reg(u32), k.reg(u32), mode="sat"), "only for .s32"),
    (lambda k: k.add(k.reg(f64), k.reg(f64), flags=("ftz",)), "add.f64 does not take .ftz"),
    (lambda k: k.fma(k.reg(f64), k.reg(f64), k.reg(f64), flags=("sat",)), "does not take .sat"),
    (lambda k: k.sqrt(k.reg(f64), mode="approx"), "sqrt.f64 does not take .approx"),
    (lambda k: k.rcp(k.reg(f64), mode="approx"), "exists only with .ftz"),
    (lambda k: k.add(k.reg(f16), k.reg(f16), mode="rz"), "add.f16 does not take .rz"),
    (lambda k: k.add(k.reg(f16), 1.0), "immediate"),
    (lambda k: k.mul(k.reg(u64), k.reg(u64), mode="wide"), "16- or 32-bit sources"),
    (lambda k: k.mul(k.reg(u32), 3, mode="ftz"), "takes .lo, .hi or .wide"),
    (lambda k: k.add(k.reg(u32), k.reg(u64)), "cannot be used as .u32"),
    (lambda k: k.add(k.reg(u16), 70000), "does not fit .u16"),
    (lambda k: k.add(1, 2), "pass type="),
    (lambda k: k.add(k.reg(f32), k.reg(f32), dst=k.reg(f64)), "destination"),
])
def test_refusals(call, match):
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=match):
        call(k)


@pytest.mark.parametrize("line", [
    "add.sat.u32 %r1, %r2, %r3;",
    "add.ftz.f64 %fd1, %fd2, %fd3;",
    "sqrt.approx.f64 %fd1, %fd2;",
    "rcp.approx.f64 %fd1, %fd2;",
    "mul.wide.u64 %rd1, %rd2, %rd3;",
    "add.f16 %h1, %h2, 0f3F800000;",
    "fma.f32 %f1, %f2, %f3, %f4;",
    "rem.f32 %f1, %f2, %f3;",
])
def test_ptxas_refuses_what_the_validator_refuses(line):
    assert assembler_verdict(raw_kernel(line, "sm_90")) is not None


def test_the_float_modifier_table_covers_every_float_type_of_the_form_table():
    from ptxforge.isa.arith import float_class
    for op, form in ARITH.items():
        for t in form.types:
            if t.is_float:
                assert float_class(t) in FLOAT_MODS[op], (op, t)


def test_immediate_sources_are_drawn_and_taken_exactly_where_ptxas_takes_them():
    """`takes_immediates` is the one answer to "may this arithmetic form read an immediate?": every legal
    sm_90 arithmetic form it says yes to assembles with an immediate first source (one module), and for
    every type it says no to the builder refuses one and ptxas refuses the same text; the test strategies
    ask it too (they drew an immediate for max.u16x2 before)."""
    import warnings
    from ptxforge.isa import types as T
    from ptxforge.isa.arith import takes_immediates
    from ptxforge.testing import strategies as pst
    from ptxforge.testing.candidates import legal_candidates
    yes = [c.with_params(imm=(0, 1), guard=None) for c in legal_candidates("sm_90", "arith")
           if takes_immediates(T.lookup(c["type"]))]
    assert len(yes) > 50
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pf.assemble(pst.build_module("sm_90", yes))
    no = {T.lookup(c["type"]): c.op for c in legal_candidates("sm_90", "arith") if not takes_immediates(T.lookup(c["type"]))}
    assert {T.u16x2, T.s16x2, T.f16, T.bf16x2} <= set(no)
    for t, op in no.items():
        k = pf.KernelBuilder("imm", target="sm_90")
        with pytest.raises(pf.ValidationError, match="immediate"):
            getattr(k, op)(1, *[k.reg(T.lookup(f"b{t.bits}"))] * (ARITH[op].arity - 1), type=t)
        reg = {16: "%h1", 32: "%r1"}[t.bits]
        srcs = ", ".join(["1"] + [reg] * (ARITH[op].arity - 1))
        body = f".reg .b16 %h<2>;\n.reg .b32 %r<2>;\n{op}.{t.name} {reg[:2]}0, {srcs};"
        assert assembler_verdict(raw_kernel(body, target="sm_90")) is not None, (op, t)
