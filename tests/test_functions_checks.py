"""Device functions, calls and module variables: what ptxas refuses is refused at the user's line (8- and
16-bit integer parameters, .bf16 variables, half initializers, kernel names that hide module names, .noreturn
with a result, a call written before the callee's signature was complete), what PTX allows is accepted
(half-float numbers as arguments and results, the f32 initializer 3.4028235e38, .b128 numbers on the
interpreter), bf16 parameters stay bf16, and builder-made names never meet the user's.  Every emitted module
is assembled by ptxas and, where it runs, run on the interpreter; expected values come from numpy or the
IEEE formats."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp

from support.located import assert_located


def _assembles(m, arch="sm_90"):
    pf.assemble(m, arch, backend="ptxas")


def _bf16_bits(x: float) -> int:
    """bf16 bits of a float exactly representable in bf16: the top half of its f32 pattern."""
    return int(np.array([x], np.float32).view(np.uint32)[0] >> 16)


# ---------------------------------------------------------------- bf16 parameters and results (a bf16 register)

def test_bf16_param_and_result_are_bf16_registers():
    f = pf.FunctionBuilder("widen", target="sm_90")
    x = f.param_value("x", pf.bf16)
    assert x.type is pf.bf16
    f.result("y", pf.f32)
    f.set_result(f.cvt(x, pf.f32))
    g = pf.FunctionBuilder("one", target="sm_90")
    g.result("y", pf.bf16)
    g.set_result(1.25)
    k = pf.KernelBuilder("k", target="sm_90")
    out = k.param_ptr("out", pf.f32)
    b = k.call(g)
    assert b.type is pf.bf16
    k.st(out, k.cvt(b, pf.f32))
    k.st(out, k.call(f, args=[b]), offset=4)
    m = k.module()
    assert ".param .b16 y" in m.ptx and "cvt.f32.bf16" in m.ptx
    _assembles(m)
    buf = np.zeros(2, np.float32)
    interp.run(m, "k", block=1, args=[buf])
    assert buf.tolist() == [1.25, 1.25]


def test_bf16x2_param_value_keeps_its_type():
    f = pf.FunctionBuilder("g", target="sm_90")
    assert f.param_value("x", pf.bf16x2).type is pf.bf16x2


# ---------------------------------------------------------------- half numbers as arguments and results

def test_half_numbers_as_arguments_and_results():
    f = pf.FunctionBuilder("h", target="sm_90")
    a = f.param_value("a", pf.f16)
    f.result("r", pf.f16)
    f.set_result(1.5)
    g = pf.FunctionBuilder("b", target="sm_90")
    g.param_value("a", pf.bf16)
    g.result("r", pf.bf16)
    g.set_result(-1.5)
    e = pf.FunctionBuilder("echo", target="sm_90")
    e.result("r", pf.f16)
    e.set_result(e.param_value("a", pf.f16))
    k = pf.KernelBuilder("k", target="sm_90")
    out = k.param_ptr("out", pf.u16)
    k.st(out, k.call(f, args=[0.5]), type=pf.b16)
    k.st(out, k.call(g, args=[2.0]), type=pf.b16, offset=2)
    k.st(out, k.call(e, args=[np.float32(0.5)]), type=pf.b16, offset=4)
    k.st(out, k.call(e, args=[2]), type=pf.b16, offset=6)
    del a
    m = k.module()
    _assembles(m)
    buf = np.zeros(4, np.uint16)
    interp.run(m, "k", block=1, args=[buf])
    want = [np.array([1.5], np.float16).view(np.uint16)[0], _bf16_bits(-1.5),
            np.array([0.5], np.float16).view(np.uint16)[0], np.array([2.0], np.float16).view(np.uint16)[0]]
    assert buf.tolist() == [int(w) for w in want]
    assert [hex(int(w)) for w in want[:2]] == ["0x3e00", "0xbfc0"]
    with pytest.raises(pf.ValidationError, match="beyond the range of .f16") as info:
        k.call(e, args=[1e6])  # <- f16-range
    assert_located(info.value, "<- f16-range", __file__)


# ---------------------------------------------------------------- 8- and 16-bit integer parameters

@pytest.mark.parametrize("t", [pf.u8, pf.s8, pf.u16, pf.s16])
def test_narrow_integer_params_and_results_refused(t):
    f = pf.FunctionBuilder("g", target="sm_90")
    with pytest.raises(pf.ValidationError, match=r"declare \.b\d+ .*\.[us]32") as info:
        f.param_value("x", t)  # <- narrow-param
    assert_located(info.value, "<- narrow-param", __file__)
    with pytest.raises(pf.ValidationError, match="cannot be") as info:
        f.result("y", t)  # <- narrow-result
    assert_located(info.value, "<- narrow-result", __file__)


def test_b16_param_and_narrow_kernel_params_still_work():
    f = pf.FunctionBuilder("g", target="sm_90")
    x = f.param_value("x", pf.b16)
    f.result("y", pf.b16)
    f.set_result(f.xor(x, 0x00FF))
    k = pf.KernelBuilder("k", target="sm_90")
    v = k.param_value("v", pf.u16)  # kernels take 16-bit parameters
    out = k.param_ptr("out", pf.u16)
    k.st(out, k.call(f, args=[v]), type=pf.b16)
    m = k.module()
    _assembles(m)
    buf = np.zeros(1, np.uint16)
    interp.run(m, "k", block=1, args=[0x1234, buf])
    assert buf[0] == 0x1234 ^ 0x00FF


# ---------------------------------------------------------------- variables

@pytest.mark.parametrize("t", [pf.bf16, pf.bf16x2])
def test_bf16_variables_refused(t):
    with pytest.raises(pf.ValidationError, match=r"declare \.b") as info:
        pf.variable("gv", t, count=2)  # <- bf16-var
    assert_located(info.value, "<- bf16-var", __file__)
    k = pf.KernelBuilder("k", target="sm_90")
    with pytest.raises(pf.ValidationError, match=r"declare \.b"):
        k.local_array("la", t, 2)


def test_half_initializers_refused_and_uninitialized_half_arrays_assemble():
    with pytest.raises(pf.ValidationError, match=r"declare \.b32") as info:
        pf.variable("gv", pf.f16x2, count=2, init=[1.0, 2.0])  # <- f16x2-init
    assert_located(info.value, "<- f16x2-init", __file__)
    gv = pf.variable("gv", pf.f16x2, count=2)
    k = pf.KernelBuilder("k", target="sm_90")
    out = k.param_ptr("out", pf.u32)
    k.st(out, k.ld(gv, type=pf.b32))
    _assembles(k.module())


def test_f32_initializer_rounds_before_the_range_check():
    a = pf.variable("a", pf.f32, init=3.4028235e38)
    assert a.init == "0f7F7FFFFF"
    assert pf.variable("b", pf.f32, init=-3.4028235e38).init == "0fFF7FFFFF"
    with pytest.raises(pf.ValidationError, match="outside the range of .f32"):
        pf.variable("c", pf.f32, init=3.4028235677973366e38)  # FLT_MAX + half an ulp rounds to inf
    k = pf.KernelBuilder("k", target="sm_90")
    out = k.param_ptr("out", pf.f32)
    k.st(out, k.ld(a, type=pf.f32))
    m = k.module()
    _assembles(m)
    buf = np.zeros(1, np.float32)
    interp.run(m, "k", block=1, args=[buf])
    assert buf[0] == np.finfo(np.float32).max


@pytest.mark.parametrize("t,value,match", [
    (pf.u32, float("nan"), "not an integer"), (pf.u32, float("inf"), "not an integer"),
    (pf.f64, 2**1100, "outside the range of .f64"), (pf.u32, 2**40, r"does not fit .u32 \(0\.\.4294967295\)"),
])
def test_initializers_beyond_the_type_refused_at_line(t, value, match):
    with pytest.raises(pf.ValidationError, match=match) as info:
        pf.variable("a", t, init=value)  # <- bad-init
    assert_located(info.value, "<- bad-init", __file__)


# ---------------------------------------------------------------- names that hide module names

def test_local_array_named_like_a_used_module_variable():
    tab = pf.variable("tab", pf.u32, init=5)
    k = pf.KernelBuilder("k", target="sm_80")
    out = k.param_ptr("out", pf.u32)
    k.local_array("tab", pf.u32, 1)
    with pytest.raises(pf.ValidationError, match="hides the module variable") as info:
        k.ld(tab, type=pf.u32)  # <- use-after-local
    assert_located(info.value, "<- use-after-local", __file__)
    k2 = pf.KernelBuilder("k2", target="sm_80")
    k2.st(k2.param_ptr("out", pf.u32), k2.ld(tab, type=pf.u32))
    with pytest.raises(pf.ValidationError, match="would\\s+hide it") as info:
        k2.local_array("tab", pf.u32, 1)  # <- local-after-use
    assert_located(info.value, "<- local-after-use", __file__)
    del out


def _g():
    f = pf.FunctionBuilder("g", target="sm_80")
    f.result("y", pf.u32)
    f.set_result(42)
    return f


def test_kernel_name_that_hides_the_callee():
    k = pf.KernelBuilder("k", target="sm_80")
    k.param_value("g", pf.u32)
    with pytest.raises(pf.ValidationError, match="hides the device function") as info:
        k.call(_g())  # <- call-hidden
    assert_located(info.value, "<- call-hidden", __file__)
    k2 = pf.KernelBuilder("k2", target="sm_80")
    out = k2.param_ptr("out", pf.u32)
    k2.st(out, k2.call(_g()))
    with pytest.raises(pf.ValidationError, match="would hide it") as info:
        k2.param_value("g", pf.u32)  # <- param-after-call
    assert_located(info.value, "<- param-after-call", __file__)


# ---------------------------------------------------------------- .noreturn and late signatures

def test_noreturn_with_result_refused():
    f = pf.FunctionBuilder("die", target="sm_80", noreturn=True)
    with pytest.raises(pf.ValidationError, match="noreturn") as info:
        f.result("r", pf.u32)  # <- noreturn-result
    assert_located(info.value, "<- noreturn-result", __file__)


def test_call_written_before_the_signature_is_complete():
    f = pf.FunctionBuilder("g", target="sm_80")
    k = pf.KernelBuilder("k", target="sm_80")
    k.call(f)  # <- early-call
    x = f.param_value("x", pf.u32)
    f.result("y", pf.u32)
    f.set_result(x)
    with pytest.raises(pf.ValidationError, match="Call has wrong number") as info:
        k.module()
    assert_located(info.value, "<- early-call", __file__)


def test_interpreter_refuses_a_call_with_the_wrong_parameter_count():
    f = pf.FunctionBuilder("g", target="sm_80")
    k = pf.KernelBuilder("k", target="sm_80")
    out = k.param_ptr("out", pf.u32)
    k.call(f)
    x = f.param_value("x", pf.u32)
    f.result("y", pf.u32)
    f.set_result(x)
    pf.KernelBuilder.finish(f)  # finished past FunctionBuilder's check, so the module holds the mismatched call
    k.st(out, 1, type=pf.u32)
    m = k.module()
    with pytest.raises(interp.InterpUnsupported, match=r"g takes 1 parameter\(s\)"):
        interp.run(m, "k", block=1, args=[np.zeros(1, np.uint32)])


# ---------------------------------------------------------------- .b128 numbers on the interpreter

def test_b128_number_as_argument_and_result():
    f = pf.FunctionBuilder("fid", target="sm_90")
    x = f.param_value("x", pf.b128)
    f.result("y", pf.b128)
    f.set_result(x)
    c = pf.FunctionBuilder("const", target="sm_90")
    c.result("y", pf.b128)
    c.set_result(-2)
    k = pf.KernelBuilder("k", target="sm_90")
    out = k.param_ptr("out", pf.u8)
    k.st(out, k.call(f, args=[2**100 + 5]))
    k.st(out, k.call(c), offset=16)
    m = k.module()
    _assembles(m)
    buf = np.zeros(32, np.uint8)
    interp.run(m, "k", block=1, args=[buf])
    assert bytes(buf[:16]) == (2**100 + 5).to_bytes(16, "little")
    assert bytes(buf[16:]) == (2**128 - 2).to_bytes(16, "little")


# ---------------------------------------------------------------- builder-made names

def test_user_names_like_builder_names():
    k = pf.KernelBuilder("k", target="sm_80")
    a = k.param_value("call0_a0", pf.u32)
    k.local_array("printf_args0", pf.u32, 1)
    k.local_array("brx0_targets", pf.u32, 1)
    out = k.param_ptr("out", pf.u32)
    g = pf.FunctionBuilder("inc", target="sm_80")
    g.result("y", pf.u32)
    g.set_result(g.add(g.param_value("x", pf.u32), 1))
    k.st(out, k.call(g, args=[a]))
    k.printf("%u\n", a)
    m = k.module()
    _assembles(m, "sm_80")
    buf = np.zeros(1, np.uint32)
    report = interp.run(m, "k", block=1, args=[6, buf])
    assert buf[0] == 7 and report.printed == ["6\n"]
    k2 = pf.KernelBuilder("k2", target="sm_80")
    k2.call(g, args=[1])
    with pytest.raises(pf.ValidationError, match="the builder gave") as info:
        k2.param_value("call0_a0", pf.u32)  # <- after-builder-name
    assert_located(info.value, "<- after-builder-name", __file__)


# ---------------------------------------------------------------- pragmas and call.uni

def test_pragma_text_checked():
    k = pf.KernelBuilder("k", target="sm_80")
    with pytest.raises(pf.ValidationError, match="not one ptxas knows") as info:
        k.pragma("foo")  # <- bad-pragma
    assert_located(info.value, "<- bad-pragma", __file__)
    with pytest.raises(pf.ValidationError, match="only inside a function"):
        pf.pragma("used_bytes_mask 0xf")
    with pytest.raises(pf.ValidationError, match="write it as"):
        k.pragma("used_bytes_mask")
    out = k.param_ptr("out", pf.u32)
    with k.for_range(0, 4) as i:
        k.pragma("nounroll")
        k.pragma("used_bytes_mask 0xf")
        k.st(out, k.ld(out, type=pf.u32))
        del i
    m = pf.Module([k.finish()], declarations=[pf.pragma("nounroll")], version="8.3")
    _assembles(m, "sm_80")


@pytest.mark.parametrize("word,version", [("used_bytes_mask 0xff", "8.3"), ("enable_smem_spilling", "8.7"),
                                          ("frequency 10", "9.0")])
def test_a_pragma_newer_than_the_base_isa_raises_the_least_version(word, version):
    """ptxas refuses each of these below its PTX ISA; the module's own .version follows, and an explicit one below
    it names the pragma and the line that placed it."""
    k = pf.KernelBuilder("k", target="sm_80")
    k.pragma(word)  # <- newer-pragma
    m = k.module()
    assert str(m.least_version()) == version
    pf.assemble(m, backend="ptxas")  # (refused at the version below)
    with pytest.raises(pf.TargetError, match=rf'\.pragma "{word.split()[0]}" \(kernel k\) needs PTX ISA {version}, '
                                             r"emitted at .*<- newer-pragma"):
        pf.Module(m.kernels, version="8.2").render()


def test_divergent_guard_of_call_uni_is_reported():
    g = _g()
    k = pf.KernelBuilder("k", target="sm_80")
    out = k.param_ptr("out", pf.u32)
    t = k.tid()
    r = k.mov(0, type=pf.u32)
    k.call(g, returns=r, uni=True, pred=k.setp("lt", t, 5))  # <- divergent-call-uni
    k.st(k.add(out, k.mul(t, 4, mode="wide")), r)
    m = k.module()
    _assembles(m, "sm_80")
    with pytest.raises(interp.InterpError, match="call.uni is divergent") as info:
        interp.run(m, "k", block=8, args=[np.zeros(8, np.uint32)])
    assert "test_functions_checks.py" in str(info.value)
    k2 = pf.KernelBuilder("k2", target="sm_80")
    out2 = k2.param_ptr("out", pf.u32)
    r2 = k2.mov(0, type=pf.u32)
    k2.call(g, returns=r2, uni=True, pred=k2.setp("lt", k2.ctaid(), 5))  # uniform across the warp
    k2.st(out2, r2)
    buf = np.zeros(1, np.uint32)
    interp.run(k2.module(), "k2", block=8, args=[buf])
    assert buf[0] == 42
