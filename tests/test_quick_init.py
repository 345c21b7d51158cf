"""The cheaper constructors of the per-instruction value classes keep every behaviour of the dataclass ones."""

import dataclasses
import pickle

import pytest

import ptxforge as pf
from ptxforge.isa import types as T
from ptxforge.isa.instruction import Instruction, as_operand, int_imm, make
from ptxforge.isa.memory import MemInfo
from ptxforge.isa.operands import Addr, Guard, Imm, Reg, Vec
from ptxforge.isa.quick_init import quick_init
from ptxforge.isa.targets import Requirement, V


@pytest.mark.parametrize("cls", [Instruction, Reg, Imm, Vec, Addr, Guard, Requirement, MemInfo])
def test_the_value_classes_stay_frozen_with_their_defaults(cls):
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    sample = {Instruction: ("add", "add.u32"), Reg: ("r1", T.u32), Imm: (3,), Vec: ((),), Addr: (0,),
              Guard: (Reg("p0", T.pred),), Requirement: (), MemInfo: ("global", T.u32, 1)}[cls]
    assert len(sample) == len(required)
    x = cls(*sample)
    for f, v in zip(required, sample):
        assert getattr(x, f.name) is v
    for f in fields[len(required):]:
        assert getattr(x, f.name) == f.default
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(x, fields[0].name, None)
    assert x == cls(*sample) and hash(x) == hash(cls(*sample))
    assert pickle.loads(pickle.dumps(x)) == x


def test_keywords_and_positions_land_in_the_same_fields():
    a = Requirement(90, V("8.0"), True, "wgmma")
    b = Requirement(feature="wgmma", arch_specific=True, min_ptx=V("8.0"), min_sm=90)
    assert a == b and a.min_sm == 90 and a.feature == "wgmma"
    with pytest.raises(TypeError):
        Requirement(90, min_sm=80)
    with pytest.raises(TypeError):
        Reg("r0")  # the type is required


def test_quick_init_refuses_what_it_cannot_reproduce():
    @dataclasses.dataclass
    class Mutable:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Factory:
        x: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class Post:
        x: int

        def __post_init__(self):
            pass

    for cls in (Mutable, Factory, Post):
        with pytest.raises(TypeError):
            quick_init(cls)


@pytest.mark.parametrize("t", [None, T.u32, T.s32, T.b64, T.f32, T.f64, T.pred, T.u16])
@pytest.mark.parametrize("x", [0, 1, -1, 7, 4096, 0xF0F0F0F0, -(2 ** 31), 2 ** 40])
def test_kept_immediates_are_what_as_operand_makes(x, t):
    got = int_imm(x, t)
    assert got == as_operand(x, t) and str(got) == str(as_operand(x, t))
    assert int_imm(x, t) == got  # asked again (from the cache)


def test_a_float_typed_literal_is_spelled_as_a_float():
    k = pf.KernelBuilder("f", target="sm_80")
    f = k.reg(T.f32)
    k.add(f, 1, type=T.f32)
    k.and_(k.reg(T.b32), 1)
    text = k.module().ptx
    assert "0f3F800000" in text and "and.b32" in text


def test_an_error_in_a_builder_method_names_the_callers_line():
    k = pf.KernelBuilder("e", target="sm_80")
    r = k.reg(T.u32)
    with pytest.raises(pf.ValidationError) as e:
        k.and_(r, k.reg(T.u64))  # a 64-bit source of a 32-bit operation
    assert e.value.loc is not None and e.value.loc.filename == __file__
    assert e.value.loc.function == "test_an_error_in_a_builder_method_names_the_callers_line"
    with pytest.raises(pf.ValidationError) as e:
        k.shl(r, 1.5)
    assert e.value.loc.filename == __file__


def test_make_builds_the_same_instruction_as_the_constructor_fields_say():
    d, a = Reg("r1", T.u32), Reg("r2", T.u32)
    ins = make("add", ("add", "u32"), (d, a, Imm(1)), n_dst=1, type=T.u32)
    assert ins.mnemonic == "add.u32" and ins.operands == (d, a, Imm(1)) and ins.n_dst == 1
    assert ins.render().split() == ["add.u32", "%r1,", "%r2,", "1;"]
