"""The type rules in isa/types.py that other layers use: declared register types and `.wide` results."""

import pytest

import ptxforge as pf
from ptxforge.isa import types as T


@pytest.mark.parametrize("t", [T.u8, T.u16, T.u32, T.s8, T.s16, T.s32, T.b16, T.b32])
def test_wide_type_is_what_the_builder_gives_mul_wide(t):
    k = pf.KernelBuilder("w", target="sm_80")
    if t.bits == 8:  # mul has no 8-bit form; wide_type still answers for the type rule
        assert T.wide_type(t).bits == 16 and T.wide_type(t).kind == ("s" if t.kind == "s" else "u")
        return
    d = k.mul(k.reg(t), k.reg(t), mode="wide")
    assert d.type is T.wide_type(t)
    pf.assemble(k.module())  # the register type is one ptxas accepts for the instruction


@pytest.mark.parametrize("t", [T.u64, T.s64, T.f32, T.f16x2, T.s4])
def test_wide_type_refuses_what_has_no_wide_form(t):
    with pytest.raises(pf.ValidationError, match="no wide type"):
        T.wide_type(t)


def test_decl_type_puts_bf16_in_bit_registers_and_leaves_the_rest():
    assert T.decl_type(T.bf16) is T.b16 and T.decl_type(T.bf16x2) is T.b32
    assert T.decl_type(T.u16x2) is T.b32 and T.decl_type(T.s16x2) is T.b32  # ptxas: "only as an instruction type"
    others = [t for t in T.ALL if t not in (T.bf16, T.bf16x2, T.u16x2, T.s16x2)]
    assert all(T.decl_type(t) is t for t in others)
    # a register that holds bf16 values is declared .b16 in the module, which ptxas accepts
    k = pf.KernelBuilder("d", target="sm_90")
    v = k.reg(T.bf16)
    k.ld(k.param_ptr("x", T.bf16), type=T.bf16, dst=v)
    text = k.module().ptx
    assert f".reg .b16 %{v.name};" in text and ".reg .bf16" not in text
    pf.assemble(k.module())
