"""KernelBuilder: registers, parameters, shared memory, directives, guards, ownership and source lines."""

import os
import warnings

import pytest

import ptxforge as pf
from ptxforge import Addr, b8, b32, f32, pred, s4, u32, u64
from ptxforge.isa.arith import arith
from support.located import assert_located, marked_line

HERE = __file__


# ---------------------------------------------------------------- registers

def test_register_names():
    k = pf.KernelBuilder("t")
    assert [str(k.reg(t)) for t in (u32, u32, u64, f32, pred, pf.f16, pf.f64)] == \
        ["%r0", "%r1", "%rd0", "%f0", "%p0", "%h0", "%fd0"]
    assert str(k.reg(u32, "acc")) == "%acc"
    assert str(k.reg(u32, "acc")) == "%acc_1"           # names are made unique
    assert str(k.reg(u32, "r5")) == "%r5_1"             # never shadow an automatic name
    assert str(k.reg(u32, "tid")) == "%tid"
    v = k.regs(b32, 3, "frag")
    assert str(v) == "{%frag0, %frag1, %frag2}" and len(v) == 3


def test_packed_types_have_no_registers():
    k = pf.KernelBuilder("t")
    with pytest.raises(pf.ValidationError, match="packed type"):
        k.reg(s4)
    with pytest.raises(pf.ValidationError, match="unknown PTX type"):
        k.reg("u24")
    with pytest.raises(pf.ValidationError, match="not a PTX identifier"):
        k.reg(u32, "9lives")


def test_only_registers_that_are_used_are_declared():
    k = pf.KernelBuilder("t")
    k.reg(u32, "unused")
    x = k.reg(u32, "x")
    k.add(x, 1, dst=x)
    text = str(k.module())
    assert "%unused" not in text and ".reg .u32 %x;" in text


# ---------------------------------------------------------------- parameters

def test_parameters_render_and_load():
    k = pf.KernelBuilder("params", target="sm_80")
    x = k.param_ptr("x", f32)
    n = k.param_value("n", u32)
    blob = k.param("tmap", b8, nbytes=128, align=128)
    k.add(x, k.cvt(n, u64), dst=x)
    k.param_address(blob)
    text = str(k.module())
    assert (".visible .entry params(\n    .param .u64 x,\n    .param .u32 n,\n"
            "    .param .align 128 .b8 tmap[128]\n)") in text
    body = [i.render() for i in k.finish().instructions]
    assert body[:3] == ["ld.param.u64    %x, [x];", "cvta.to.global.u64 %x, %x;", "ld.param.u32    %n, [n];"]
    assert k.finish().param("x").is_pointer and k.finish().param("tmap").size == 128
    pf.assemble(k.module())


def test_parameter_mistakes():
    k = pf.KernelBuilder("t")
    k.param("x", u32)
    with pytest.raises(pf.ValidationError, match="already declared"):
        k.param("x", u32)
    with pytest.raises(pf.ValidationError, match="not allowed"):
        k.param("p", pred)
    blob = k.param("blob", b8, nbytes=64)
    with pytest.raises(pf.ValidationError, match="param_address"):
        k.load_param(blob)
    with pytest.raises(pf.ValidationError, match="has no parameter 'y'"):
        k.load_param("y")


# ---------------------------------------------------------------- shared memory

def test_static_and_dynamic_shared_memory():
    k1 = pf.KernelBuilder("one", target="sm_80")
    a = k1.shared("tile", 4096, align=128)
    k1.dynamic_shared("dyn", align=16)
    base = k1.shared_base(a, offset=64)
    k1.st(base, 0, type=u32, space="shared")
    k1.mov(k1.dynamic_shared("dyn2", align=1024))
    k2 = pf.KernelBuilder("two", target="sm_80")
    k2.mov(k2.dynamic_shared("dyn", align=256))
    m = pf.Module([k1, k2])
    text = str(m)
    # dynamic arrays live at module scope, once, with the largest alignment asked for
    assert ".extern .shared .align 256 .b8 dyn[];" in text
    assert ".extern .shared .align 1024 .b8 dyn2[];" in text
    assert sum(line.startswith(".extern .shared") for line in text.splitlines()) == 2
    assert "    .shared .align 128 .b8 tile[4096];" in text
    assert [i.render() for i in k1.finish().instructions[:2]] == ["mov.u32         %tile_base, tile;",
                                                                 "add.u32         %tile_base, %tile_base, 64;"]
    assert k1.finish().static_shared_bytes == 4096
    pf.assemble(m)


def test_static_shared_memory_is_capped_at_48kb():
    k = pf.KernelBuilder("t")
    k.shared("a", 40000)
    with pytest.raises(pf.ValidationError, match="at most 49152"):
        k.shared("b", 10000)
    with pytest.raises(pf.ValidationError, match="power of two"):
        k.shared("c", 16, align=24)


# ---------------------------------------------------------------- directives

def test_directives_render():
    k = pf.KernelBuilder("t", maxntid=(128, 2), minnctapersm=2, maxnreg=64)
    text = str(k.module())
    assert ".maxntid 128, 2, 1\n.minnctapersm 2\n.maxnreg 64\n{" in text
    assert ".reqntid 32, 1, 1\n" in str(pf.KernelBuilder("u", reqntid=32).module())


def test_maxntid_with_reqntid_is_refused_at_the_users_line():
    with pytest.raises(pf.ValidationError) as info:
        pf.KernelBuilder("t", maxntid=256, reqntid=256)  # <- both-ntid
    assert ".maxntid and .reqntid cannot both be given" in str(info.value)
    assert_located(info.value, "<- both-ntid", HERE)


def test_ptxas_also_refuses_maxntid_with_reqntid():
    from support.ptx_text import assembler_verdict
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n"
           ".visible .entry t()\n.maxntid 256, 1, 1\n.reqntid 256, 1, 1\n{\n ret;\n}\n")
    assert assembler_verdict(ptx) is not None
    assert assembler_verdict(ptx.replace(".reqntid 256, 1, 1\n", "")) is None


def test_directive_checks():
    with pytest.raises(pf.ValidationError, match="at most 1024"):
        pf.KernelBuilder("t", maxntid=(64, 32))
    with pytest.raises(pf.ValidationError, match="16..255"):
        pf.KernelBuilder("t", maxnreg=300)
    with pytest.warns(UserWarning, match="ignored by ptxas"):
        pf.KernelBuilder("t", minnctapersm=2)
    with pytest.raises(pf.ValidationError, match="not a PTX identifier"):
        pf.KernelBuilder("2fast")
    with pytest.raises(pf.TargetError, match="supported targets"):
        pf.KernelBuilder("t", target="sm_70")


# ---------------------------------------------------------------- ownership, guards, locations

def test_a_register_of_another_kernel_is_refused_at_the_users_line():
    k1, k2 = pf.KernelBuilder("one"), pf.KernelBuilder("two")
    theirs = k1.reg(u32, "theirs")
    with pytest.raises(pf.ValidationError) as info:
        k2.add(theirs, 1)  # <- foreign-register
    assert "register %theirs belongs to kernel 'one', not to 'two'" in str(info.value)
    assert_located(info.value, "<- foreign-register", HERE)
    p = k1.reg(pred)
    with pytest.raises(pf.ValidationError, match="belongs to kernel 'one'"):
        k2.add(k2.reg(u32), 1, pred=p)
    with pytest.raises(pf.ValidationError, match="belongs to kernel 'one'"):
        k2.ld(Addr(k1.reg(u64), 8), type=f32)
    with pytest.raises(pf.ValidationError, match="belongs to kernel 'one'"):
        k2.emit(arith("add", u32, theirs, [theirs, theirs]))


def test_guards():
    k = pf.KernelBuilder("t")
    x, p = k.reg(u32, "x"), k.reg(pred, "p")
    k.add(x, 1, dst=x, pred=p)
    k.add(x, 1, dst=x, pred=~p)
    k.add(x, 1, dst=x, pred=~~p)
    assert [i.render() for i in k.finish().instructions[:3]] == [
        "@%p add.u32     %x, %x, 1;", "@!%p add.u32    %x, %x, 1;", "@%p add.u32     %x, %x, 1;"]
    k2 = pf.KernelBuilder("t2")
    with pytest.raises(pf.ValidationError, match="guard must be a .pred"):
        k2.add(k2.reg(u32), 1, pred=k2.reg(u32))
    with pytest.raises(pf.ValidationError, match="negates a guard"):
        ~k2.reg(u32)


def test_every_instruction_records_the_python_line_that_asked_for_it():
    k = pf.KernelBuilder("t")
    x = k.reg(u32, "x")
    k.add(x, 1, dst=x)  # <- recorded-line
    ins = k.finish().instructions[0]
    assert os.path.samefile(ins.loc.filename, HERE)
    assert ins.loc.lineno == marked_line(HERE, "<- recorded-line")
    assert ins.loc.code == "k.add(x, 1, dst=x)  # <- recorded-line"


def test_emitting_a_prebuilt_instruction_and_finishing():
    k = pf.KernelBuilder("t")
    x = k.reg(u32, "x")
    ins = arith("add", u32, x, [x, pf.Imm(2)])
    k.emit(ins, pred=k.reg(pred, "p"))
    kernel = k.finish()
    assert kernel is k.finish()                         # finishing twice gives the same kernel
    assert kernel.instructions[0].render() == "@%p add.u32     %x, %x, 2;"
    assert kernel.instructions[-1].render() == "ret;"
    with pytest.raises(pf.ValidationError, match="is finished"):
        k.emit(ins)
    with pytest.raises(pf.ValidationError, match="already has guard"):
        k2 = pf.KernelBuilder("t2")
        y = k2.reg(u32)
        k2.emit(arith("add", u32, y, [y, y]).with_guard(pf.isa.Guard(k2.reg(pred))), pred=k2.reg(pred))


def test_instructions_are_immutable_values():
    k = pf.KernelBuilder("t")
    x = k.reg(u32, "x")
    a = arith("add", u32, x, [x, x])
    b = arith("add", u32, x, [x, x])
    assert a == b and hash(a) == hash(b)
    with pytest.raises(Exception):
        a.mnemonic = "sub.u32"
    assert a.with_loc(None) == a and a.dsts == (x,) and a.srcs == (x, x)


def test_comments_sections_and_notes():
    k = pf.KernelBuilder("t")
    k.note("path", "s8 mma.sync")
    with k.section("stage 1"):
        k.comment("two\nlines")
        k.mov(1, type=u32)
    text = str(k.module())
    assert "// t: path = s8 mma.sync\n.visible .entry t()" in text
    assert "    // ---- stage 1\n    // two\n    // lines\n    mov.u32" in text


def test_builder_warnings_name_the_user_line():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        pf.KernelBuilder("t", minnctapersm=4)  # <- minnctapersm-warning
    assert rec and rec[0].lineno == marked_line(HERE, "<- minnctapersm-warning")


def test_register_mistakes_name_the_users_line():
    k = pf.KernelBuilder("t")
    with pytest.raises(pf.ValidationError) as info:
        k.reg("u24")  # <- unknown-type
    assert_located(info.value, "<- unknown-type", HERE)
    with pytest.raises(pf.ValidationError) as info:
        k.reg(s4)  # <- packed-register
    assert_located(info.value, "<- packed-register", HERE)
