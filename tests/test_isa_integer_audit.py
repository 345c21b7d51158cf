"""dp4a / dp2a with immediate sources: PTX takes an immediate for a, b or c (ptxas 13 assembles each), so
ptxforge accepts them, the interpreter runs them, and what no .u32/.s32 can hold is refused by name."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import f32, interp, s32, u32
from ptxforge.isa import types as T
from support.located import assert_located

HERE = __file__
NT = 64


def _run(build, a, target="sm_80"):
    """out[tid] = build(k, a[tid]) on the interpreter (after ptxas has assembled the module); a and out .b32."""
    k = pf.KernelBuilder("p", target=target, reqntid=NT)
    pa, po = k.param_ptr("a", pf.b8), k.param_ptr("out", pf.b8)
    off = k.mul(k.tid(), 4, mode="wide")
    x = k.ld(k.add(pa, off), type=pf.b32, dst=k.reg(s32))
    k.st(k.add(po, off), build(k, x), type=pf.b32)
    mod = k.module()
    pf.assemble(mod)
    out = np.zeros(NT, np.uint32)
    interp.run(mod, block=NT, args=[a, out])
    return out


def _sx(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _part(v, width, i, signed):
    p = (v >> (width * i)) & ((1 << width) - 1)
    return _sx(p, width) if signed else p


def _dp4a(a, b, c, at, bt):
    return (c + sum(_part(a, 8, j, at == "s32") * _part(b, 8, j, bt == "s32") for j in range(4))) & 0xFFFFFFFF


def _dp2a(a, b, c, at, bt, hi):
    return (c + sum(_part(a, 16, j, at == "s32") * _part(b, 8, j + 2 * hi, bt == "s32") for j in range(2))) \
        & 0xFFFFFFFF


@pytest.mark.parametrize("b_imm, c_imm, b_type", [(0x01010101, 0, None), (0x80FF7F02, -5, "s32"),
                                                   (0xFEDCBA98, 123456, None), (-1, 7, "s32")])
def test_dp4a_and_dp2a_with_immediate_b_and_c_run_as_the_isa_says(b_imm, c_imm, b_type):
    rng = np.random.default_rng(abs(b_imm) % 1000)
    a = rng.integers(0, 2 ** 32, NT, dtype=np.uint64).astype(np.uint32)
    a[:4] = [0, 0xFFFFFFFF, 0x80808080, 0x7F7F7F7F]
    # a is an .s32 register: it reads .s32 by default; an immediate b reads .u32 unless b_type says .s32
    bt = b_type or "u32"
    got = _run(lambda k, x: k.dp4a(x, b_imm, c_imm, b_type=b_type), a)
    assert [int(g) for g in got] == [_dp4a(int(v), b_imm, _sx(c_imm, 32), "s32", bt) for v in a]
    for hi in (0, 1):
        got = _run(lambda k, x: k.dp2a(x, b_imm, c_imm, b_type=b_type, mode="hi" if hi else "lo"), a)
        assert [int(g) for g in got] == [_dp2a(int(v), b_imm, _sx(c_imm, 32), "s32", bt, hi) for v in a]


def test_dp4a_with_an_immediate_a_runs():
    a = np.arange(NT, dtype=np.uint32) * np.uint32(0x01020304)
    got = _run(lambda k, x: k.dp4a(0x04030201, x, x), a)
    assert [int(g) for g in got] == [_dp4a(0x04030201, int(v), _sx(int(v), 32), "u32", "s32") for v in a]


def test_the_immediate_forms_render_as_ptx_writes_them():
    k = pf.KernelBuilder("t", target="sm_80")
    a, c = k.reg(s32, "a"), k.reg(s32, "c")
    k.dp4a(a, 0x01010101, c, dst=k.reg(s32, "d"))
    k.dp2a(k.reg(u32, "x"), 3, 4, mode="hi", dst=k.reg(u32, "e"))
    assert [i.render() for i in k.finish().instructions[:-1]] == [
        "dp4a.s32.u32    %d, %a, 0x1010101, %c;",
        "dp2a.hi.u32.u32 %e, %x, 3, 4;",
    ]


@pytest.mark.parametrize("b, match", [(1.5, r"dp4a source b: immediate 1\.5 does not fit \.u32"),
                                      (1 << 32, r"dp4a source b: immediate 4294967296 does not fit \.u32")])
def test_an_immediate_no_32_bit_integer_holds_is_refused_by_name(b, match):
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match=match) as info:
        k.dp4a(k.reg(s32), b, k.reg(s32))  # <- dp4a-imm
    assert_located(info.value, "<- dp4a-imm", HERE)


def test_a_float_register_is_still_refused():
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match="dp4a source b: %.* cannot be used as .u32"):
        k.dp4a(k.reg(s32), k.reg(f32), 0)
    assert T.u32 is k.dp4a(k.reg(u32), 1, 2).type
