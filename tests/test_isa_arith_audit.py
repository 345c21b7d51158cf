"""Arithmetic forms a user found refused or mis-explained: integer flags that are modes, the saturating
high-half multiply-adds (mad.hi.sat.s32, mad24.hi.sat.s32) and fma.rn.oob{.relu} on the half types.

Each accepted form is assembled by ptxas; the interpreter runs what it can model and refuses the rest.
"""

import re

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp, s32, u32
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__


def test_an_integer_mode_passed_as_a_flag_names_the_mode_spelling():
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=r'max\.relu on integers is a mode, not a flag: write mode="relu"') \
            as info:
        k.max(k.reg(s32), k.reg(s32), flags=("relu",))  # <- relu-flag
    assert_located(info.value, "<- relu-flag", HERE)
    k.max(k.reg(s32), k.reg(s32), mode="relu")  # the spelling the message names is accepted
    with pytest.raises(pf.ValidationError, match=r'add\.sat on integers is a mode, not a flag: write mode="sat"'):
        k.add(k.reg(s32), k.reg(s32), flags=("sat",))
    with pytest.raises(pf.ValidationError, match="takes no flags"):
        k.add(k.reg(u32), k.reg(u32), flags=("ftz",))


# ---------------------------------------------------------------- mad.hi.sat.s32, mad24.hi.sat.s32

NT = 64


def _run(build, a, b, c, target="sm_80"):
    """out[tid] = build(k, a[tid], b[tid], c[tid]) on the interpreter, after ptxas assembled the module; .s32."""
    k = pf.KernelBuilder("p", target=target, reqntid=NT)
    ps = [k.param_ptr(n, pf.b8) for n in ("a", "b", "c", "out")]
    off = k.mul(k.tid(), 4, mode="wide")
    x, y, z = (k.ld(k.add(p, off), type=pf.b32, dst=k.reg(s32)) for p in ps[:3])
    k.st(k.add(ps[3], off), build(k, x, y, z), type=pf.b32)
    mod = k.module()
    pf.assemble(mod)
    out = np.zeros(NT, np.int32)
    interp.run(mod, block=NT, args=[a, b, c, out])
    return [int(v) for v in out]


def _sx(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _clamp(v):
    return max(-2 ** 31, min(2 ** 31 - 1, v))


def _operands():
    rng = np.random.default_rng(7)
    a, b, c = (rng.integers(-2 ** 31, 2 ** 31, NT).astype(np.int32) for _ in range(3))
    big = [2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, 0x7FFFFF, -0x800000]
    a[:6], b[:6] = big, big  # high halves near the limits, so that + c saturates both ways
    c[:6] = [2 ** 31 - 1, 2 ** 31 - 1, -2 ** 31, -2 ** 31, 2 ** 31 - 1, -2 ** 31]
    return a, b, c


@pytest.mark.parametrize("spelling", [dict(mode="hi", flags=("sat",)), dict(mode="hi.sat")])
def test_mad_hi_sat_s32_is_accepted_assembles_and_clamps(spelling):
    a, b, c = _operands()
    got = _run(lambda k, x, y, z: k.mad(x, y, z, **spelling), a, b, c)
    want = [_clamp(((int(x) * int(y)) >> 32) + int(z)) for x, y, z in zip(a, b, c)]
    assert got == want
    assert any(w in (2 ** 31 - 1, -2 ** 31) for w in want)  # the clamp is exercised
    wrapped = _run(lambda k, x, y, z: k.mad(x, y, z, mode="hi"), a, b, c)
    assert wrapped != got  # without .sat the same sums wrap


@pytest.mark.parametrize("spelling", [dict(mode="hi", flags=("sat",)), dict(mode="hi.sat")])
def test_mad24_hi_sat_s32_is_accepted_assembles_and_clamps(spelling):
    a, b, c = _operands()
    got = _run(lambda k, x, y, z: k.mad24(x, y, z, **spelling), a, b, c)
    want = [_clamp(_sx((_sx(int(x), 24) * _sx(int(y), 24)) >> 16, 32) + int(z)) for x, y, z in zip(a, b, c)]
    assert got == want
    assert any(w in (2 ** 31 - 1, -2 ** 31) for w in want)


def test_the_sat_forms_render_as_the_isa_writes_them():
    k = pf.KernelBuilder("t", target="sm_80")
    x, y, z = (k.reg(s32, n) for n in "xyz")
    k.mad(x, y, z, mode="hi", flags=("sat",), dst=x)
    k.mad24(x, y, z, mode="hi.sat", dst=x)
    assert [i.render() for i in k.finish().instructions[:-1]] == [
        "mad.hi.sat.s32  %x, %x, %y, %z;",
        "mad24.hi.sat.s32 %x, %x, %y, %z;",
    ]


@pytest.mark.parametrize("call, match", [
    (lambda k: k.mad(k.reg(s32), k.reg(s32), k.reg(s32), flags=("sat",)),
     r'mad: \.sat exists only as mad\.hi\.sat\.s32 \(mode="hi", flags=\("sat",\)\), not with \.lo on \.s32'),
    (lambda k: k.mad(k.reg(u32), k.reg(u32), k.reg(u32), mode="hi", flags=("sat",)),
     r"mad: \.sat exists only as mad\.hi\.sat\.s32 .*not with \.hi on \.u32"),
    (lambda k: k.mad24(k.reg(s32), k.reg(s32), k.reg(s32), mode="lo.sat"),
     r"mad24: \.sat exists only as mad24\.hi\.sat\.s32"),
    (lambda k: k.mad(k.reg(s32), k.reg(s32), k.reg(pf.s64), mode="wide", flags=("sat",)),
     r"mad: \.sat exists only as mad\.hi\.sat\.s32"),
    (lambda k: k.mad(k.reg(s32), k.reg(s32), k.reg(s32), mode="hi", flags=("relu",)),
     r"mad\.s32 does not take \.relu; integer flags: \.sat"),
    (lambda k: k.mul(k.reg(s32), k.reg(s32), mode="hi", flags=("sat",)), "mul on integers takes no flags"),
])
def test_the_other_saturating_multiply_adds_are_refused_naming_the_legal_one(call, match):
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match=match):
        call(k)


@pytest.mark.parametrize("line", ["mad.lo.sat.s32 %r1, %r2, %r3, %r4;", "mad.hi.sat.u32 %r1, %r2, %r3, %r4;",
                                  "mad.hi.sat.s64 %rd1, %rd2, %rd3, %rd4;", "mad24.lo.sat.s32 %r1, %r2, %r3, %r4;",
                                  "mad24.hi.sat.u32 %r1, %r2, %r3, %r4;"])
def test_ptxas_refuses_the_saturating_forms_the_table_leaves_out(line):
    assert assembler_verdict(raw_kernel(line, "sm_90")) is not None


# ---------------------------------------------------------------- fma.rn.oob{.relu} on the half types

HALVES = (pf.f16, pf.f16x2, pf.bf16, pf.bf16x2)


def test_fma_oob_on_every_half_type_renders_and_assembles_on_sm90():
    k = pf.KernelBuilder("t", target="sm_90")
    want = []
    for t in HALVES:
        a, b, c = (k.reg(t) for _ in range(3))
        for flags, written in ((("oob",), "oob"), (("relu", "oob"), "oob.relu")):
            k.fma(a, b, c, flags=flags)
            want.append(f"fma.rn.{written}.{t.name}")
    assert [i.render().split()[0] for i in k.finish().instructions[:-1]] == want
    version = re.search(r"^\.version (\d+)\.(\d+)", k.module().render().text, re.M)
    assert (int(version[1]), int(version[2])) >= (8, 1)  # the module asks for what .oob needs
    pf.assemble(k.module())


def test_fma_oob_takes_what_ptxas_takes_beside_the_isa_spelling():
    """ptxas 13 also takes .oob with .sat (f16, f16x2) and with bf16's directed rounding modes."""
    k = pf.KernelBuilder("t", target="sm_90")
    for t, mode, flags in ((pf.f16, None, ("oob", "sat")), (pf.f16x2, None, ("sat", "oob")),
                           (pf.bf16, "rz", ("oob",)), (pf.bf16x2, "rp", ("oob", "relu"))):
        k.fma(k.reg(t), k.reg(t), k.reg(t), mode=mode, flags=flags)
    assert [i.render().split()[0] for i in k.finish().instructions[:-1]] == [
        "fma.rn.sat.oob.f16", "fma.rn.sat.oob.f16x2", "fma.rz.oob.bf16", "fma.rp.oob.relu.bf16x2"]
    pf.assemble(k.module())


def test_fma_oob_needs_sm90_and_ptx_8_1():
    from ptxforge.isa.arith import ARITH
    req = ARITH["fma"].flag_req["oob"]
    assert (req.min_sm, str(req.min_ptx)) == (90, "8.1")
    k = pf.KernelBuilder("t", target="sm_89")
    with pytest.raises(pf.TargetError, match="needs sm_90") as info:
        k.fma(k.reg(pf.f16), k.reg(pf.f16), k.reg(pf.f16), flags=("oob",))  # <- oob-sm89
    assert_located(info.value, "<- oob-sm89", HERE)
    line = "fma.rn.oob.f16 %h1, %h2, %h3, %h4;"
    assert "requires .target sm_90" in assembler_verdict(raw_kernel(line, "sm_89", version="8.1"))
    assert "8.1" in assembler_verdict(raw_kernel(line, "sm_90", version="8.0"))
    assert assembler_verdict(raw_kernel(line, "sm_90", version="8.1")) is None


@pytest.mark.parametrize("t, mode, flags, match", [
    (pf.f16, None, ("oob", "ftz"), r"\.ftz and \.oob cannot be combined|\.oob and \.ftz cannot be combined"),
    (pf.f16, None, ("oob", "sat", "relu"), r"\.sat and \.relu cannot be combined"),
    (pf.f16, "rz", ("oob",), r"fma\.f16 does not take \.rz"),
    (pf.bf16, None, ("oob", "sat"), r"fma\.bf16 does not take \.sat"),
    (pf.f32, None, ("oob",), r"fma\.f32 does not take \.oob"),
    (pf.f64, None, ("oob",), r"fma\.f64 does not take \.oob"),
])
def test_fma_oob_outside_the_isa_syntax_is_refused(t, mode, flags, match):
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=match):
        k.fma(k.reg(t), k.reg(t), k.reg(t), mode=mode, flags=flags)


def test_the_interpreter_refuses_fma_oob_instead_of_guessing_the_oob_nan():
    k = pf.KernelBuilder("t", target="sm_90", reqntid=32)
    h = k.reg(pf.f16)
    k.mov(0x3C00, type=pf.b16, dst=h)
    k.fma(h, h, h, flags=("oob",))
    with pytest.raises(interp.InterpUnsupported, match=r"fma\.oob is not modelled"):
        interp.run(k.module(), block=32)
