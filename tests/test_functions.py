"""Device functions, calls, module variables, .local arrays and pragmas from the builder:
each form assembled by ptxas (sm_80 and sm_90a), run on the interpreter against numpy, read
back by the parser to an equal module, rebuilt by to-python, and every mistake refused at the
user's line."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import f32, f64, s32, u32, u64
from ptxforge import interp
from ptxforge.isa.calls import FuncRef, call as call_instruction
from ptxforge.parse.equality import first_difference
from ptxforge.parse.to_python import to_python

from support.examples import load_example
from support.located import assert_located

HERE = __file__
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _assembles(module):
    for arch in ("sm_80", "sm_90a"):
        pf.assemble(module, arch, backend="ptxas")


def _round_trips(module, tmp_path=None):
    again = pf.parse(module.ptx)
    assert first_difference(module, again) is None
    assert again.ptx == module.ptx
    if tmp_path is not None:
        path = tmp_path / "rebuilt.py"
        path.write_text(to_python(again))
        p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT))
        assert p.returncode == 0, p.stderr
        assert p.stdout == module.ptx


def _poly():
    """y = x*x*a + b, as a device function of two parameters."""
    f = pf.FunctionBuilder("poly")
    x = f.param_value("x", f32)
    a = f.param_value("a", f32)
    f.result("y", f32)
    f.set_result(f.fma(f.mul(x, x), a, 2.0))
    return f


def _map_kernel(func, name="apply", target="sm_80"):
    k = pf.KernelBuilder(name, target=target)
    src = k.param_ptr("src", f32)
    dst = k.param_ptr("dst", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        y = k.call(func, args=[k.ld(k.add(src, off), type=f32), 3.0])
        k.st(k.add(dst, off), y)
    return k


# ---------------------------------------------------------------- calls

def test_a_call_writes_the_whole_param_scope_and_assembles(tmp_path):
    k = _map_kernel(_poly())
    m = k.module()
    assert [x.name for x in m.kernels] == ["poly", "apply"]  # the callee first
    text = m.ptx
    assert ".func (.param .f32 y) poly(" in text
    for line in (".param .f32 call0_a0;", ".param .f32 call0_r0;", "st.param.f32    [call0_a1], 0f40400000;",
                 "call            (call0_r0), poly, (call0_a0, call0_a1);", "ld.param.f32"):
        assert line in text, line
    assert text.index("{\n    .param .f32 call0_a0;") < text.index("call            (call0_r0)")
    _assembles(m)
    _round_trips(m, tmp_path)


def test_a_kernel_calling_a_device_function_runs_on_the_interpreter():
    m = _map_kernel(_poly()).module()
    src = np.linspace(-2, 2, 100).astype(np.float32)
    dst = np.full(100, np.nan, np.float32)
    interp.run(m, "apply", grid=2, block=64, args=[src, dst, 100])
    np.testing.assert_allclose(dst, src * src * 3 + 2, rtol=1e-6)


def test_functions_calling_functions_and_a_guarded_call():
    dm = pf.FunctionBuilder("digit")  # the last decimal digit
    a = dm.param_value("a", u32)
    dm.result("r", u32)
    dm.set_result(dm.rem(a, 10))
    dv = pf.FunctionBuilder("tenth")
    b = dv.param_value("b", u32)
    dv.result("q", u32)
    dv.set_result(dv.div(b, 10))
    outer = pf.FunctionBuilder("digits", visible=True)
    v = outer.param_value("v", u32)
    outer.result("s", u32)
    r = outer.call(dm, args=[v])
    q = outer.call(dv, args=[v])
    r2 = outer.call(dm, args=[q])
    q2 = outer.call(dv, args=[q])
    outer.set_result(outer.add(r, outer.add(r2, q2)))
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    i = k.global_index()
    res = k.reg(u32, "res")
    k.mov(7, dst=res)
    odd = k.setp("ne", k.and_(i, 1), 0)
    k.call(outer, args=[k.mul(i, 37)], returns=[res], pred=odd)  # even threads keep 7
    k.st(k.add(out, k.mul(i, 4, mode="wide")), res)
    m = k.module()
    assert [x.name for x in m.kernels] == ["digit", "tenth", "digits", "k"]
    assert re.search(r"@%p\d+ call ", m.ptx) and re.search(r"@%p\d+ mov.u32 +%res, ", m.ptx)
    assert ".visible .func (.param .u32 s) digits(" in m.ptx
    _assembles(m)
    _round_trips(m)
    got = np.zeros(64, np.uint32)
    interp.run(m, grid=1, block=64, args=[got])
    v = np.arange(64) * 37
    want = np.where(np.arange(64) % 2 == 1, v % 10 + (v // 10) % 10 + v // 100, 7)
    np.testing.assert_array_equal(got, want)


def test_a_function_with_no_parameters_and_an_early_ret():
    f = pf.FunctionBuilder("clamp_tid")
    f.result("t", u32)
    t = f.tid()
    big = f.setp("gt", t, 5)
    f.set_result(5, pred=big)
    f.ret(pred=big)
    f.set_result(t)
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    t = k.call(f)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), t)
    m = k.module()
    _assembles(m)
    got = np.zeros(32, np.uint32)
    interp.run(m, block=32, args=[got])
    np.testing.assert_array_equal(got, np.minimum(np.arange(32), 5))


def test_a_finding_inside_a_device_function_names_the_functions_line():
    f = pf.FunctionBuilder("poke")
    p = f.param_value("p", u64)
    f.st(f.add(p, 4096), 1, type=u32)  # <- oob-in-function
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    k.call(f, args=[out])
    with pytest.raises(interp.InterpError) as e:
        interp.run(k.module(), block=1, args=[np.zeros(4, np.uint32)])
    assert_located(e.value, "<- oob-in-function", HERE)


def test_recursion_assembles_and_the_interpreter_refuses_it_at_the_call():
    f = pf.FunctionBuilder("down")
    n = f.param_value("n", u32)
    f.result("r", u32)
    f.set_result(0)
    with f.if_(f.setp("ne", n, 0)):
        f.call(f, args=[f.sub(n, 1)])  # <- recursive-call
    k = pf.KernelBuilder("k")
    k.call(f, args=[3])
    m = k.module()
    assert [x.name for x in m.kernels] == ["down", "k"]
    _assembles(m)
    with pytest.raises(interp.InterpUnsupported) as e:
        interp.run(m, block=1)
    assert "recursive" in str(e.value)
    assert_located(e.value, "<- recursive-call", HERE)


def test_a_prototype_is_declared_by_the_module_it_is_called_from():
    proto = pf.Prototype("ext_scale", returns=(pf.Param("r", f32),), params=(pf.Param("x", f32),))
    k = pf.KernelBuilder("k")
    k.call(proto, args=[1.0])
    m = k.module()
    assert ".extern .func (.param .f32 r) ext_scale(.param .f32 x);" in m.ptx
    assert first_difference(m, pf.parse(m.ptx)) is None


# ---------------------------------------------------------------- call mistakes

def test_call_mistakes_name_the_users_line():
    f = _poly()
    k = pf.KernelBuilder("k")
    x = k.reg(f32, "x")
    i = k.reg(u32, "i")
    with pytest.raises(pf.ValidationError, match="takes 2 argument") as e:
        k.call(f, args=[x])  # <- too-few
    assert_located(e.value, "<- too-few", HERE)
    with pytest.raises(pf.ValidationError, match=r"argument 1 \(a\) is .f32; %i is .u32") as e:
        k.call(f, args=[x, i])  # <- wrong-type
    assert_located(e.value, "<- wrong-type", HERE)
    with pytest.raises(pf.ValidationError, match="returns 1 value") as e:
        k.call(f, args=[x, x], returns=[x, x])  # <- two-returns
    assert_located(e.value, "<- two-returns", HERE)
    with pytest.raises(pf.ValidationError, match="cannot receive") as e:
        k.call(f, args=[x, x], returns=[i])  # <- int-return
    assert_located(e.value, "<- int-return", HERE)
    other = pf.KernelBuilder("other")
    with pytest.raises(pf.ValidationError, match="is a kernel") as e:
        k.call(other)  # <- call-kernel
    assert_located(e.value, "<- call-kernel", HERE)
    with pytest.raises(pf.ValidationError, match="needs a device function") as e:
        k.call("poly", args=[x, x])  # <- call-name
    assert_located(e.value, "<- call-name", HERE)


def test_calling_an_undefined_function_is_refused_at_the_call():
    k = pf.KernelBuilder("k")
    k.emit(call_instruction(FuncRef("nowhere")))  # <- undefined-call
    with pytest.raises(pf.ValidationError, match="calls nowhere, which the module neither defines") as e:
        k.module()
    assert_located(e.value, "<- undefined-call", HERE)


def test_results_and_param_stores_name_the_users_line():
    k = pf.KernelBuilder("k")
    p = k.param("n", u32)
    with pytest.raises(pf.ValidationError, match="read-only|may be stored") as e:
        k.st(p.symbol, 1, type=u32, space="param")  # <- st-kernel-param
    assert_located(e.value, "<- st-kernel-param", HERE)
    with pytest.raises(pf.ValidationError, match="kernels have no return values") as e:
        k.result("r", u32)  # <- kernel-result
    assert_located(e.value, "<- kernel-result", HERE)
    f = pf.FunctionBuilder("f")
    with pytest.raises(pf.ValidationError, match="declares no return value") as e:
        f.set_result(1)  # <- no-result
    assert_located(e.value, "<- no-result", HERE)
    f.result("r", f32)
    with pytest.raises(pf.ValidationError, match="return value r is .f32") as e:
        f.set_result(f.reg(u32))  # <- result-type
    assert_located(e.value, "<- result-type", HERE)
    with pytest.raises(pf.ValidationError, match="at most one .param return value") as e:
        f.result("r2", f32)  # <- second-result
    assert_located(e.value, "<- second-result", HERE)
    with f.call_scope():
        a0 = f.call_param("a0", u32)
        with pytest.raises(pf.ValidationError, match="cannot be guarded") as e:
            f.st(a0, 1, type=u32, space="param", pred=f.setp("eq", f.tid(), 0))  # <- guarded-st-param
        assert_located(e.value, "<- guarded-st-param", HERE)


# ---------------------------------------------------------------- variables

def test_a_const_table_and_a_global_variable_read_by_a_kernel(tmp_path):
    table = np.array([0.5, -1.25, 3.0, 8.0, 1e-3], np.float32)
    tab = pf.variable("coeffs", f32, space="const", count=8, init=table, align=16)
    bias = pf.variable("bias", s32, init=-7, visible=True)
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", f32)
    iout = k.param_ptr("iout", s32)
    i = k.tid()
    j = k.and_(i, 7)
    base = k.address_of(tab, generic=True)  # mov.u64 + cvta.const.u64
    g = k.ld(k.add(base, k.mul(j, 4, mode="wide")), type=f32, space="generic")
    c = k.ld(tab, type=f32, space="const", offset=8)  # ld.const [coeffs+8]
    off = k.mul(i, 4, mode="wide")
    k.st(k.add(out, off), k.add(g, c))
    k.st(k.add(iout, off), k.add(k.ld(bias, type=s32), k.cvt(i, s32)))
    m = k.module()
    text = m.ptx
    assert (".const .align 16 .f32 coeffs[8] = {0f3F000000, 0fBFA00000, 0f40400000, 0f41000000, 0f3A83126F};"
            in text)
    assert ".visible .global .s32 bias = -7;" in text
    assert "ld.const.f32" in text and "cvta.const.u64" in text and "ld.global.s32" in text
    _assembles(m)
    _round_trips(m, tmp_path)
    got = np.zeros(16, np.float32)
    igot = np.zeros(16, np.int32)
    interp.run(m, block=16, args=[got, igot])
    full = np.zeros(8, np.float32)
    full[:5] = table
    np.testing.assert_array_equal(got, full[np.arange(16) % 8] + table[2])
    np.testing.assert_array_equal(igot, np.arange(16) - 7)


def test_global_variables_are_writable_and_shared_by_the_kernels_of_a_launch():
    counter = pf.variable("counter", u32, init=100)
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    old = k.atom("add", counter, 1, type=u32)  # atom.global.add.u32 %r, [counter], 1
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), old)
    m = k.module()
    _assembles(m)
    got = np.zeros(32, np.uint32)
    rep = interp.run(m, block=32, args=[got])
    assert sorted(got.tolist()) == list(range(100, 132))
    assert rep.variables["counter"].view(np.uint32)[0] == 132  # what the host reads back
    rep = interp.run(m, block=4, args=[got])  # every launch starts from the initializer
    assert rep.variables["counter"].view(np.uint32)[0] == 104


def test_variable_mistakes_name_the_users_line():
    with pytest.raises(pf.ValidationError, match="does not fit .u8") as e:
        pf.variable("v", pf.u8, count=2, init=[1, 256])  # <- init-range
    assert_located(e.value, "<- init-range", HERE)
    with pytest.raises(pf.ValidationError, match="has 3 values") as e:
        pf.variable("v", u32, count=2, init=[1, 2, 3])  # <- init-count
    assert_located(e.value, "<- init-count", HERE)
    with pytest.raises(pf.ValidationError, match="cannot have an initializer"):
        pf.variable("v", u32, space="local", init=1)
    tab = pf.variable("tab", f32, space="const", count=4)
    k = pf.KernelBuilder("k")
    with pytest.raises(pf.ValidationError, match="tab lives in .const, not .global") as e:
        k.ld(tab, type=f32)  # <- const-as-global
    assert_located(e.value, "<- const-as-global", HERE)
    a = k.address_of(tab)
    with pytest.raises(pf.ValidationError, match=".const-window address") as e:
        k.ld(a, type=f32, space="generic")  # <- const-window-generic
    assert_located(e.value, "<- const-window-generic", HERE)
    other = pf.KernelBuilder("other")
    arr = other.local_array("stack", u32, 4)
    with pytest.raises(pf.ValidationError, match="belongs to another kernel") as e:
        k.ld(arr, type=u32, space="local")  # <- foreign-local
    assert_located(e.value, "<- foreign-local", HERE)
    k2 = pf.KernelBuilder("k2")
    k2.ld(pf.variable("tab", f32, space="const", count=8), type=f32, space="const")
    k3 = pf.KernelBuilder("k3")
    k3.ld(tab, type=f32, space="const")
    with pytest.raises(pf.ValidationError, match="two different module-scope declarations are called tab"):
        pf.Module([k2, k3])


# ---------------------------------------------------------------- .local arrays

def test_a_local_array_per_thread_reverses_four_values(tmp_path):
    k = pf.KernelBuilder("k")
    src = k.param_ptr("src", u32)
    dst = k.param_ptr("dst", u32)
    stack = k.local_array("stack", u32, 4, align=16)
    base = k.mul(k.tid(), 16, mode="wide")
    for j in range(4):
        k.st(stack, k.ld(k.add(src, base), type=u32, offset=4 * j), space="local", offset=4 * j)
    for j in range(4):
        k.st(k.add(dst, base), k.ld(stack, type=u32, space="local", offset=12 - 4 * j), offset=4 * j)
    m = k.module()
    assert ".local .align 16 .u32 stack[4];" in m.ptx
    _assembles(m)
    _round_trips(m, tmp_path)
    a = np.arange(128, dtype=np.uint32)
    b = np.zeros(128, np.uint32)
    interp.run(m, block=32, args=[a, b])
    np.testing.assert_array_equal(b.reshape(32, 4), a.reshape(32, 4)[:, ::-1])


def test_a_local_overrun_is_a_finding_at_the_users_line():
    k = pf.KernelBuilder("k")
    stack = k.local_array("stack", f64, 2)
    k.st(stack, 1.0, type=f64, space="local", offset=16)  # <- local-overrun
    with pytest.raises(interp.InterpError, match="out-of-bounds .local") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- local-overrun", HERE)


def test_a_local_array_through_a_generic_address():
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    stack = k.local_array("stack", u32, 2)
    p = k.address_of(stack, generic=True)
    k.st(p, k.tid(), space="generic", offset=4)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.ld(stack, type=u32, space="local", offset=4))
    m = k.module()
    _assembles(m)
    got = np.zeros(8, np.uint32)
    interp.run(m, block=8, args=[got])
    np.testing.assert_array_equal(got, np.arange(8))


# ---------------------------------------------------------------- pragmas

def test_pragmas_in_the_body_and_at_module_scope(tmp_path):
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    acc = k.reg(u32, "acc")
    k.mov(0, dst=acc)
    with k.for_range(0, 8) as i:
        k.add(acc, i, dst=acc)
        k.pragma("nounroll")
    k.st(out, acc)
    m = pf.Module([k], declarations=[pf.pragma("nounroll")])
    assert m.ptx.count('.pragma "nounroll";') == 2
    _assembles(m)
    _round_trips(m, tmp_path)
    got = np.zeros(1, np.uint32)
    interp.run(m, block=1, args=[got])
    assert got[0] == sum(range(8))
    with pytest.raises(pf.ValidationError, match="without quotes") as e:
        k.pragma('no"unroll')  # <- bad-pragma
    assert_located(e.value, "<- bad-pragma", HERE)


# ---------------------------------------------------------------- the example

def test_the_device_functions_example_assembles_and_runs_on_the_interpreter(tmp_path):
    ex = load_example("device_functions")
    m = ex.build()
    _assembles(m)
    _round_trips(m, tmp_path)
    x = np.linspace(-3, 3, 300).astype(np.float32)
    y = np.full_like(x, np.nan)
    interp.run(m, ex.KERNEL, grid=(len(x) + 127) // 128, block=128, args=[x, y, len(x)])
    np.testing.assert_allclose(y, ex.reference(x), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- brx.idx

def _switch_kernel():
    k = pf.KernelBuilder("switch")
    out = k.param_ptr("out", u32)
    t = k.tid()
    r = k.reg(u32, "res")
    cases = [k.label("case") for _ in range(3)]
    end = k.label("end")
    k.brx_idx(k.rem(t, 4), cases)  # <- brx-past-the-list
    for j, case in enumerate(cases):
        k.place(case)
        k.mov(10 * j + 1, dst=r)
        k.bra(end)
    k.place(end)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), r)
    return k


def test_brx_idx_through_a_branchtargets_list(tmp_path):
    k = _switch_kernel()
    m = k.module()
    assert "brx0_targets: .branchtargets $L_case_0, $L_case_1, $L_case_2;" in m.ptx
    assert "brx.idx         %r0, brx0_targets;" in m.ptx
    _assembles(m)
    _round_trips(m, tmp_path)
    got = np.zeros(24, np.uint32)
    with pytest.raises(interp.InterpUnsupported, match="past the 3 targets") as e:  # tid % 4 == 3
        interp.run(m, block=24, args=[got])
    assert_located(e.value, "<- brx-past-the-list", HERE)
    got = np.zeros(3, np.uint32)
    interp.run(m, block=3, args=[got])
    np.testing.assert_array_equal(got, [1, 11, 21])


def test_brx_idx_read_from_ptx_runs_on_the_interpreter():
    text = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 sel)
{
    .reg .u32 %r<4>;
    .reg .u64 %rd<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [sel];
    mov.u32 %r2, 5;
    ts: .branchtargets L0, L1;
    brx.idx.uni %r1, ts;
L0:
    add.u32 %r2, %r2, 100;
L1:
    st.global.u32 [%rd1], %r2;
    ret;
}
"""
    m = pf.parse(text)
    _assembles(m)
    for sel, want in ((0, 105), (1, 5)):
        got = np.zeros(1, np.uint32)
        interp.run(m, block=1, args=[got, sel])
        assert got[0] == want


def test_brx_idx_mistakes_name_the_users_line():
    k = pf.KernelBuilder("k")
    x = k.reg(f32, "x")
    lab = k.label("a")
    with pytest.raises(pf.ValidationError, match="takes a .u32 register") as e:
        k.brx_idx(x, [lab])  # <- float-index
    assert_located(e.value, "<- float-index", HERE)
    with pytest.raises(pf.ValidationError, match="at least one label") as e:
        k.brx_idx(0, [])  # <- no-targets
    assert_located(e.value, "<- no-targets", HERE)
    k.brx_idx(0, [lab])
    with pytest.raises(pf.ValidationError, match="never placed"):
        k.finish()


# ---------------------------------------------------------------- indirect calls

def _unary(name, op):
    f = pf.FunctionBuilder(name)
    x = f.param_value("x", f32)
    f.result("y", f32)
    f.set_result(op(f, x))
    return f


def test_an_indirect_call_through_a_callprototype(tmp_path):
    sq = _unary("sq", lambda f, x: f.mul(x, x))
    ng = _unary("ng", lambda f, x: f.neg(x))
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", f32)
    t = k.tid()
    fp = k.selp(k.address_of(ng), k.address_of(sq), k.setp("ne", k.and_(t, 1), 0))  # mov.u64 %rd, ng
    y = k.call(fp, args=[k.cvt(t, f32, rnd="rn")], prototype=sq)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), y)
    m = k.module()
    assert sorted(x.name for x in m.functions) == ["ng", "sq"]
    assert "proto0: .callprototype (.param .f32 _) _ (.param .f32 _);" in m.ptx
    assert re.search(r"call +\(call0_r0\), %\w+, \(call0_a0\), proto0;", m.ptx)
    _assembles(m)
    _round_trips(m, tmp_path)
    got = np.zeros(8, np.float32)
    interp.run(m, block=8, args=[got])
    t = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(got, np.where(np.arange(8) % 2 == 1, -t, t * t))


def test_an_indirect_call_to_no_function_stops_at_the_call():
    sq = _unary("sq", lambda f, x: f.mul(x, x))
    k = pf.KernelBuilder("k")
    fp = k.reg(u64, "fp")
    k.mov(1234, dst=fp)
    k.address_of(sq)
    k.call(fp, args=[1.0], prototype=sq)  # <- bad-indirect
    with pytest.raises(interp.InterpUnsupported, match="no address of a device function") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- bad-indirect", HERE)


def test_indirect_call_mistakes_name_the_users_line():
    sq = _unary("sq", lambda f, x: f.mul(x, x))
    k = pf.KernelBuilder("k")
    r32 = k.reg(u32, "r32")
    with pytest.raises(pf.ValidationError, match="64-bit register") as e:
        k.call(r32, args=[1.0], prototype=sq)  # <- narrow-pointer
    assert_located(e.value, "<- narrow-pointer", HERE)
    fp = k.reg(u64, "fp")
    with pytest.raises(pf.ValidationError, match="needs prototype=") as e:
        k.call(fp, args=[1.0])  # <- no-prototype
    assert_located(e.value, "<- no-prototype", HERE)
    with pytest.raises(pf.ValidationError, match="takes 1 argument") as e:
        k.call(fp, args=[1.0, 2.0], prototype=sq)  # <- indirect-count
    assert_located(e.value, "<- indirect-count", HERE)


def test_a_device_function_with_its_own_local_array():
    f = pf.FunctionBuilder("rev_sum")  # stores x, 2x, 3x in its stack and weighs them back reversed
    x = f.param_value("x", u32)
    f.result("s", u32)
    stack = f.local_array("stack", u32, 3)
    for j in range(3):
        f.st(stack, f.mul(x, j + 1), space="local", offset=4 * j)
    s = f.reg(u32, "s")
    f.mov(0, dst=s)
    for j in range(3):
        f.mad(f.ld(stack, type=u32, space="local", offset=8 - 4 * j), j + 1, s, mode="lo", dst=s)
    f.set_result(s)
    k = pf.KernelBuilder("k")
    out = k.param_ptr("out", u32)
    mine = k.local_array("stack", u32, 1)  # the same name in the kernel: a variable of its own
    k.st(mine, 5, type=u32, space="local")
    t = k.tid()
    y = k.call(f, args=[t])
    k.st(k.add(out, k.mul(t, 4, mode="wide")), k.add(y, k.ld(mine, type=u32, space="local")))
    m = k.module()
    _assembles(m)
    _round_trips(m)
    got = np.zeros(16, np.uint32)
    interp.run(m, block=16, args=[got])
    t = np.arange(16)
    np.testing.assert_array_equal(got, 3 * t * 1 + 2 * t * 2 + 1 * t * 3 + 5)


# ---------------------------------------------------------------- aggregates by value (.param byte arrays)

_AGGREGATE_PTX = """.version 8.0
.target sm_80
.address_size 64

.func (.param .align 16 .b8 ret[16]) swap_pairs(
    .param .align 16 .b8 v[16],
    .param .align 4 .b8 pad[8]
)
{
    .reg .f32 %f<5>;
    .reg .b32 %r<2>;
    ld.param.v4.f32 {%f1, %f2, %f3, %f4}, [v];
    ld.param.b32 %r1, [pad+OFFSET];
    st.param.v2.f32 [ret+0], {%f2, %f1};
    st.param.f32 [ret+8], %f4;
    st.param.f32 [ret+12], %f3;
    ret;
}

.visible .entry swap(.param .u64 in_ptr, .param .u64 out_ptr)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    .reg .f32 %f<9>;
    ld.param.u64 %rd1, [in_ptr];
    ld.param.u64 %rd2, [out_ptr];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd1, %rd1, %rd3;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];
    {
    .param .align 16 .b8 param0[16];
    st.param.v4.f32 [param0+0], {%f1, %f2, %f3, %f4};
    .param .align 4 .b8 param1[8];
    st.param.b32 [param1+4], %r1;
    .param .align 16 .b8 retval0[16];
    call.uni (retval0), swap_pairs, (param0, param1);
    ld.param.v4.f32 {%f5, %f6, %f7, %f8}, [retval0+0];
    }
    st.global.v4.f32 [%rd2], {%f5, %f6, %f7, %f8};
    ret;
}
"""


def test_aggregates_passed_and_returned_by_value_run_on_the_interpreter():
    """.param byte arrays (a float4 argument, an 8-byte block, a float4 result) live in per-thread local memory:
    vector and offset accesses at any width, as nvcc writes for structures passed by value."""
    module = pf.parse(_AGGREGATE_PTX.replace("OFFSET", "4"))
    pf.assemble(module)
    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    y = np.full_like(x, np.nan)
    interp.run(module, "swap", block=32, args=[x, y])
    np.testing.assert_array_equal(y, x[:, [1, 0, 3, 2]])


def test_a_read_past_a_param_byte_array_is_out_of_bounds_at_its_ptx_line():
    text = _AGGREGATE_PTX.replace("OFFSET", "8")
    module = pf.parse(text, filename="aggregate.ptx")
    with pytest.raises(interp.InterpError, match="out-of-bounds .local") as e:
        interp.run(module, "swap", block=32, args=[np.zeros((32, 4), np.float32), np.zeros((32, 4), np.float32)])
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "[pad+8]" in t)
    assert f"aggregate.ptx:{line}" in str(e.value)
