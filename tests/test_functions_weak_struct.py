"""`.weak` device functions and structures passed and returned by value (`.param .align A .b8 x[N]`): what nvcc
writes for inline and template functions under -G and for C++ structs, built with the builder (FunctionBuilder(weak=
True), result(nbytes=, align=), call() arguments and returns as {offset: value} fields, call_param(nbytes=, align=)),
checked at the user's line, assembled by ptxas, run on the interpreter, and written back by to-python from nvcc's
own output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import f32, f64, s32
from ptxforge import interp
from ptxforge.isa.operands import Addr
from ptxforge.parse.to_python import to_python

from support.located import assert_located

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = __file__

#: struct S { int a; float b; double c; };  (16 bytes, aligned to 8)
S_DTYPE = np.dtype([("a", "<i4"), ("b", "<f4"), ("c", "<f8")])


def _combine():
    """S combine(S x, int k) { return {x.a * k + 1, x.b * 2 + k, x.c - x.a}; } as a builder function."""
    f = pf.FunctionBuilder("combine")
    x = f.param("x", pf.b8, nbytes=16, align=8)
    k = f.param_value("k", s32)
    a = f.load_param(x, type=s32, offset=0)
    b = f.load_param(x, type=f32, offset=4)
    c = f.load_param(x, type=f64, offset=8)
    f.result("r", pf.b8, nbytes=16, align=8)
    f.set_result({0: f.mad(a, k, 1, mode="lo"), 4: f.fma(b, 2.0, f.cvt(k, f32)), 8: f.sub(c, f.cvt(a, f64))})
    return f


def _caller(func, *, through_register=False, returns=None, pred=None):
    """A kernel that loads thread i's S, calls `func(S, i + 2)` (directly, or through its address) and stores the
    returned S (`returns`: the fields' registers or types; `pred`: the call's guard)."""
    k = pf.KernelBuilder("kern", target="sm_80")
    src, dst = k.param_ptr("src", pf.b8), k.param_ptr("dst", pf.b8)
    off = k.mul(k.tid(), 16, mode="wide")
    s, d = k.add(src, off), k.add(dst, off)
    fields = {0: k.ld(s, type=s32), 4: k.ld(s, type=f32, offset=4), 8: k.ld(s, type=f64, offset=8)}
    target = k.address_of(func) if through_register else func
    want = returns(k) if returns is not None else {0: s32, 4: f32, 8: f64}
    got = k.call(target, args=[fields, k.add(k.cvt(k.tid(), s32), 2)], returns=want,
                 prototype=func if through_register else None, pred=pred(k) if pred is not None else None)
    if returns is not None:
        assert got == tuple(want.values())
    a, b, c = got
    k.st(d, a)
    k.st(d, b, offset=4)
    k.st(d, c, offset=8)
    return k


def _inputs(n=4):
    s = np.zeros(n, S_DTYPE)
    s["a"] = np.arange(n) * 3 - 2
    s["b"] = np.arange(n) * 0.5 + 0.25
    s["c"] = np.arange(n) * 1.5 + 10.0
    return s


#: what the C++ gives for _inputs(4), worked out by hand: k = i + 2; (a*k+1, b*2+k, c-a)
EXPECTED = [(-3, 2.5, 12.0), (4, 4.5, 10.5), (17, 6.5, 9.0), (36, 8.5, 7.5)]


def _run_struct_kernel(module, name="kern", extra=()):
    s = _inputs()
    out = np.zeros(64, np.uint8)
    rest = [np.zeros(4, dt) for dt in extra]
    interp.run(module, name, block=4, args=[s.view(np.uint8).copy(), out, *rest])
    return out.view(S_DTYPE), rest


def _rebuild(module, tmp_path) -> str:
    """to-python of `module`, run: the PTX the script prints."""
    path = tmp_path / "rebuilt.py"
    path.write_text(to_python(module))
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    return p.stdout


# ------------------------------------------------------------------ .weak

def test_a_weak_function_renders_weak_assembles_and_runs():
    f = pf.FunctionBuilder("twice", weak=True)
    f.result("r", s32)
    f.set_result(f.add(f.param_value("v", s32), f.param_value("w", s32)))
    k = pf.KernelBuilder("use_twice", target="sm_80")
    out = k.param_ptr("out", s32)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.call(f, args=[k.cvt(k.tid(), s32), 5]))
    m = k.module()
    assert ".weak .func (.param .s32 r) twice(" in m.ptx
    pf.assemble(m, "sm_80", backend="ptxas")
    y = np.zeros(8, np.int32)
    interp.run(m, "use_twice", block=8, args=[y])
    np.testing.assert_array_equal(y, np.arange(8) + 5)
    assert pf.parse(m.ptx).ptx == m.ptx


def test_weak_and_visible_together_are_refused():
    with pytest.raises(pf.ValidationError, match="weak") as e:
        pf.FunctionBuilder("g", visible=True, weak=True)  # <- both
    assert_located(e.value, "<- both", HERE)


# ------------------------------------------------------------------ structures by value

def test_a_structure_passed_and_returned_by_value_renders_as_nvcc_does():
    m = _caller(_combine()).module()
    ptx = m.ptx
    assert ".func (.param .align 8 .b8 r[16]) combine(" in ptx
    assert ".param .align 8 .b8 call0_a0[16];" in ptx and ".param .align 8 .b8 call0_r0[16];" in ptx
    assert "st.param.f32    [call0_a0+4]" in ptx and "ld.param.f64    %fd" in ptx and "[call0_r0+8]" in ptx
    assert "st.param.f64    [r+8]" in ptx and "ld.param.f32    %f" in ptx and "[x+4]" in ptx
    pf.assemble(m, "sm_80", backend="ptxas")
    pf.assemble(m, "sm_90a", backend="ptxas")


def test_a_structure_passed_and_returned_by_value_runs_on_the_interpreter(tmp_path):
    m = _caller(_combine()).module()
    got, _ = _run_struct_kernel(m)
    assert got.tolist() == EXPECTED
    again = pf.parse(m.ptx)
    assert again.ptx == m.ptx
    assert _rebuild(again, tmp_path) == m.ptx


def test_a_guarded_structure_call_keeps_the_given_registers_where_not_called():
    m = _caller(_combine(), returns=lambda k: {0: k.mov(-1, type=s32), 4: k.mov(-1.0, type=f32),
                                               8: k.mov(-1.0, type=f64)},
                pred=lambda k: k.setp("lt", k.tid(), 2)).module()
    pf.assemble(m, "sm_80", backend="ptxas")
    out, _ = _run_struct_kernel(m)
    assert out.tolist() == EXPECTED[:2] + [(-1, -1.0, -1.0)] * 2


def test_an_indirect_call_with_a_structure_declares_the_array_in_its_prototype(tmp_path):
    m = _caller(_combine(), through_register=True).module()
    assert "proto0: .callprototype (.param .align 8 .b8 _[16]) _ (.param .align 8 .b8 _[16], .param .s32 _);" in m.ptx
    pf.assemble(m, "sm_80", backend="ptxas")
    out, _ = _run_struct_kernel(m)
    assert out.tolist() == EXPECTED
    script = to_python(pf.parse(m.ptx))
    assert 'k.call_prototype("proto0", (Param("_", T.b8, nbytes=16, align=8), ), (Param("_", T.b8, nbytes=16, ' \
           'align=8), T.s32, ))' in script
    assert _rebuild(pf.parse(m.ptx), tmp_path) == m.ptx


#: two functions of one .b8 array parameter, 16 and 8 bytes; the kernel calls CALLED through a prototype of the
#: 8-byte one
_PROTOTYPE_PTX = """
.version 7.0
.target sm_80
.address_size 64
.func big(.param .align 8 .b8 a[16])
{
    ret;
}
.func small(.param .align 8 .b8 a[8])
{
    ret;
}
.visible .entry k()
{
    .reg .b64 %rd<2>;
    mov.u64 %rd1, CALLED;
    {
    .param .align 8 .b8 param0[8];
    proto0: .callprototype _ (.param .align 8 .b8 _[8]);
    call %rd1, (param0), proto0;
    }
    ret;
}
"""


def test_an_indirect_call_runs_only_a_function_whose_arrays_have_the_prototypes_sizes():
    """Two functions of one parameter: a 16-byte and an 8-byte array; the prototype names the 8-byte one, so a
    register holding the 16-byte one's address is no function of that signature (the bits of .b8 are equal)."""
    text = _PROTOTYPE_PTX.replace("CALLED", "big")
    m = pf.parse(text)
    with pytest.raises(interp.InterpUnsupported, match=r"holds no address .* \(small\)"):
        interp.run(m, "k", block=1)


@pytest.mark.parametrize("fields, message", [
    ("number", "register or a numpy scalar"),
    ("past", "past the end of the 16-byte"),
    ("misaligned", "not a multiple of 4"),
    ("overlap", "overlaps"),
    ("not_a_dict", "a dict"),
    ("negative", "offset"),
])
def test_wrong_structure_fields_are_refused_at_the_call(fields, message):
    f = _combine()
    k = pf.KernelBuilder("kern", target="sm_80")
    a, b = k.mov(1, type=s32), k.mov(1.0, type=f32)
    bad = {"number": {0: 1, 4: b}, "past": {0: a, 16: b}, "misaligned": {0: a, 6: b},
           "overlap": {0: k.mov(1, type=pf.u64), 4: b}, "not_a_dict": [a, b], "negative": {-4: a}}[fields]
    with pytest.raises(pf.ValidationError, match=message) as e:
        k.call(f, args=[bad, 2])  # <- fields
    assert_located(e.value, "<- fields", HERE)


def test_a_field_wider_than_the_arrays_alignment_is_refused():
    f = pf.FunctionBuilder("g")
    f.param("x", pf.b8, nbytes=16, align=4)
    k = pf.KernelBuilder("kern", target="sm_80")
    with pytest.raises(pf.ValidationError, match="aligned to 4") as e:
        k.call(f, args=[{8: k.mov(1.0, type=f64)}])  # <- wide
    assert_located(e.value, "<- wide", HERE)


def test_structure_returns_need_their_fields_named():
    f = _combine()
    k = pf.KernelBuilder("kern", target="sm_80")
    fields = {0: k.mov(1, type=s32)}
    with pytest.raises(pf.ValidationError, match=r"returns=\{0: pf.s32") as e:
        k.call(f, args=[fields, 2])  # <- no returns
    assert_located(e.value, "<- no returns", HERE)
    with pytest.raises(pf.ValidationError, match="past the end") as e:
        k.call(f, args=[fields, 2], returns={12: f64})  # <- past
    assert_located(e.value, "<- past", HERE)
    with pytest.raises(pf.ValidationError, match=r"e\.g\. \{0: pf\.s32") as e:
        k.call(f, args=[fields, 2], returns=k.reg(s32))  # <- a register for an array
    assert_located(e.value, "<- a register for an array", HERE)
    (a,) = k.call(f, args=[fields, 2], returns=[{0: s32}])  # a list of one return value's fields, as for scalars
    assert a.type is s32


def test_a_structure_argument_for_a_scalar_parameter_and_the_reverse_are_refused():
    f = _combine()
    k = pf.KernelBuilder("kern", target="sm_80")
    with pytest.raises(pf.ValidationError, match="16-byte array") as e:
        k.call(f, args=[k.mov(1, type=s32), 2], returns={0: s32})  # <- scalar for array
    assert_located(e.value, "<- scalar for array", HERE)
    with pytest.raises(pf.ValidationError, match="scalar") as e:
        k.call(f, args=[{0: k.mov(1, type=s32)}, {0: k.mov(2, type=s32)}], returns={0: s32})  # <- array for scalar
    assert_located(e.value, "<- array for scalar", HERE)


def test_set_result_of_an_array_takes_fields_and_checks_them():
    f = pf.FunctionBuilder("g")
    f.result("r", pf.b8, nbytes=8, align=4)
    with pytest.raises(pf.ValidationError, match="past the end of the 8-byte") as e:
        f.set_result({4: f.mov(1, type=pf.u64)})  # <- result past
    assert_located(e.value, "<- result past", HERE)
    with pytest.raises(pf.ValidationError, match="dict") as e:
        f.set_result(f.mov(1, type=s32))  # <- scalar result
    assert_located(e.value, "<- scalar result", HERE)


def test_result_arrays_are_checked():
    f = pf.FunctionBuilder("g")
    with pytest.raises(pf.ValidationError, match="nbytes") as e:
        f.result("r", pf.b8, nbytes=0)  # <- zero bytes
    assert_located(e.value, "<- zero bytes", HERE)
    with pytest.raises(pf.ValidationError, match="align") as e:
        f.result("r", pf.b8, nbytes=16, align=3)  # <- align 3
    assert_located(e.value, "<- align 3", HERE)
    with pytest.raises(pf.ValidationError, match=r"\.b8") as e:
        f.result("r", pf.f32, nbytes=16)  # <- typed array
    assert_located(e.value, "<- typed array", HERE)


def test_load_param_reads_a_field_of_a_parameter_array_and_checks_it():
    f = pf.FunctionBuilder("g")
    x = f.param("x", pf.b8, nbytes=16, align=8)
    with pytest.raises(pf.ValidationError, match="past the end") as e:
        f.load_param(x, type=f32, offset=16)  # <- load past
    assert_located(e.value, "<- load past", HERE)
    with pytest.raises(pf.ValidationError, match="type= and offset=") as e:
        f.load_param(x)  # <- no field
    assert_located(e.value, "<- no field", HERE)


def test_param_accesses_past_a_param_array_are_refused_at_the_line():
    """ptxas takes ld.param/st.param past a .param byte array (and reads garbage): the builder refuses them."""
    k = pf.KernelBuilder("kern", target="sm_80")
    with k.call_scope():
        p = k.call_param("param0", pf.b8, nbytes=16, align=8)
        with pytest.raises(pf.ValidationError, match="param0") as e:
            k.st(Addr(p, 16), k.mov(1, type=s32), space="param")  # <- st past
        assert_located(e.value, "<- st past", HERE)
        with pytest.raises(pf.ValidationError, match="multiple of 8") as e:
            k.st(Addr(p, 4), k.mov(1.0, type=f64), space="param")  # <- st misaligned
        assert_located(e.value, "<- st misaligned", HERE)
        k.st(Addr(p, 8), k.mov(1.0, type=f64), space="param")


def test_call_param_declares_an_array_and_checks_it():
    k = pf.KernelBuilder("kern", target="sm_80")
    with k.call_scope():
        p = k.call_param("param0", pf.b8, nbytes=16, align=8)
        assert (p.nbytes, p.align) == (16, 8)
        with pytest.raises(pf.ValidationError, match="positive") as e:
            k.call_param("param1", pf.b8, nbytes=0)  # <- zero
        assert_located(e.value, "<- zero", HERE)
        proto = k.call_prototype("proto0", (), (pf.Param("_", pf.b8, nbytes=16, align=8), pf.s32))
        assert proto.params[0].nbytes == 16 and proto.params[1].type is s32
        with pytest.raises(pf.ValidationError, match=r"declared \.b8") as e:
            k.call_prototype("proto1", (), (pf.Param("_", pf.f32, nbytes=16),))  # <- typed entry
        assert_located(e.value, "<- typed entry", HERE)
    assert ".param .align 8 .b8 param0[16];" in k.module().ptx


# ------------------------------------------------------------------ nvcc's output through to-python

_CUDA = r"""
struct S { int a; float b; double c; };

__device__ __noinline__ S combine(S x, int k) {
    S r;
    r.a = x.a * k + 1;
    r.b = x.b * 2.0f + (float)k;
    r.c = x.c - (double)x.a;
    return r;
}

template <typename T>
__device__ __noinline__ T twice(T v) { return v + v; }

extern "C" __global__ void kern(const S* in, S* out, int* oi, float* of) {
    int i = threadIdx.x;
    S r = combine(in[i], i + 2);
    out[i] = r;
    oi[i] = twice(r.a);
    of[i] = twice(r.b);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("flags", [(), ("-G",), ("-rdc=true",)], ids=["O3", "G", "rdc"])
def test_nvcc_weak_templates_and_structures_come_back_through_to_python(tmp_path, flags):
    text = _nvcc(tmp_path, _CUDA, flags)
    # (whole-program -O3 makes the templates file-local; -G and -rdc keep them .weak)
    assert (".weak .func" in text) == bool(flags)
    assert ".b8 func_retval0[16]" in text and ".b8 param0[16];" in text
    module = pf.parse(text)
    ptx = _rebuild(module, tmp_path)
    assert ptx == module.ptx
    pf.assemble(ptx, "sm_80", backend="ptxas")
    rebuilt = pf.parse(ptx)
    out, (oi, of) = _run_struct_kernel(rebuilt, extra=(np.int32, np.float32))
    assert out.tolist() == EXPECTED
    assert oi.tolist() == [2 * a for a, _, _ in EXPECTED] and of.tolist() == [2 * b for _, b, _ in EXPECTED]


def test_a_prototype_with_an_array_renders_its_size_and_assembles():
    """`.callprototype _ (.param .align 8 .b8 _[8])` read and written back kept `.b8 _` without `[8]`, which ptxas
    refuses ('Type of argument does not match formal parameter')."""
    text = _PROTOTYPE_PTX.replace("CALLED", "small")
    m = pf.parse(text)
    assert "proto0: .callprototype _ (.param .align 8 .b8 _[8]);" in m.ptx
    pf.assemble(m, "sm_80", backend="ptxas")
    assert pf.parse(m.ptx).ptx == m.ptx


def test_a_label_no_branch_names_after_the_final_ret_adds_no_second_ret():
    """nvcc -G ends every function with `ret; $L__func_end0:` (the label is for the debug sections): finish() added
    a ret after it, so to-python's rebuild of -G output differed from the file."""
    k = pf.KernelBuilder("k", target="sm_80")
    k.ret()
    k.place(k.label("func_end"))
    lines = [x.strip() for x in k.module().ptx.splitlines()]
    assert lines.count("ret;") == 1 and lines[-2].startswith("$L_func_end")


def test_a_label_a_branch_names_at_the_end_still_gets_its_ret():
    from ptxforge.isa.control import bra
    k = pf.KernelBuilder("k", target="sm_80")
    end = k.label("end")
    k.emit(bra(end), pred=k.setp("eq", k.tid(), 0))
    k.ret()
    k.place(end)
    lines = [x.strip() for x in k.module().ptx.splitlines()]
    assert lines.count("ret;") == 2 and lines[-2] == "ret;"


def _nvcc(tmp_path, source: str, flags) -> str:
    """The PTX `nvcc -ptx -arch=sm_80 *flags` writes for CUDA `source`."""
    (tmp_path / "s.cu").write_text(source)
    subprocess.run(["nvcc", "-ptx", "-arch=sm_80", *flags, str(tmp_path / "s.cu"), "-o", str(tmp_path / "s.ptx")],
                   check=True, capture_output=True)
    return (tmp_path / "s.ptx").read_text()


#: an aligned structure with a float4, a char and a short (nvcc: `.param .align 4 .b8 x[32]`, st.param.b8/.b16 and
#: .v4.b8 for the padding), a second structure with a char and a double, and a template instantiated twice
_CUDA_NARROW = r"""
struct __align__(16) V { float4 p; char tag; short s; };
struct P { char c; double d; };

__device__ __noinline__ V bump(V v, P q) {
    V r;
    r.p = make_float4(v.p.x + 1.0f, v.p.y * 2.0f, v.p.z - (float)q.d, v.p.w);
    r.tag = v.tag + q.c;
    r.s = v.s * 3;
    return r;
}

template <int N> __device__ __noinline__ int addn(int x) { return x + N; }

extern "C" __global__ void kv(const V* in, V* out, int* o2) {
    int i = threadIdx.x;
    P q; q.c = (char)i; q.d = 0.5 * i;
    out[i] = bump(in[i], q);
    o2[i] = addn<3>(i) + addn<5>(i);
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("flags", [(), ("-G",), ("-rdc=true",)], ids=["O3", "G", "rdc"])
def test_nvcc_structures_with_narrow_fields_come_back_through_to_python(tmp_path, flags):
    text = _nvcc(tmp_path, _CUDA_NARROW, flags)
    module = pf.parse(text)
    ptx = _rebuild(module, tmp_path)
    assert ptx == module.ptx
    pf.assemble(ptx, "sm_80", backend="ptxas")
    v = np.dtype({"names": ["p", "tag", "s"], "formats": [("<f4", 4), "i1", "<i2"], "offsets": [0, 16, 18],
                  "itemsize": 32})
    x, y, o2 = np.zeros(4, v), np.zeros(4, v), np.zeros(4, np.int32)
    i = np.arange(4)
    x["p"] = np.stack([i, 10 + i, 20 + i, 30 + i], axis=1)
    x["tag"], x["s"] = i + 1, i - 2
    interp.run(pf.parse(ptx), "kv", block=4, args=[x.view(np.uint8).copy(), y.view(np.uint8), o2])
    # by hand: p = (x + 1, y * 2, z - 0.5 i, w), tag = (i + 1) + i, s = (i - 2) * 3; addn<3> + addn<5> = 2 i + 8
    np.testing.assert_array_equal(y["p"], np.stack([i + 1, (10 + i) * 2, 20 + i - 0.5 * i, 30 + i], axis=1))
    assert y["tag"].tolist() == [1, 3, 5, 7] and y["s"].tolist() == [-6, -3, 0, 3] and o2.tolist() == [8, 10, 12, 14]


@pytest.mark.parametrize("decl, problem", [
    (".param .align 8 .b8 param0[8];", "Type"),
    (".param .align 4 .b8 param0[16];", "Alignment"),
    (".param .b64 param0;", "Type"),
])
def test_a_call_whose_array_differs_from_the_parameter_is_refused_at_the_call(decl, problem):
    """ptxas refuses an argument array of another size or alignment, or a scalar for an array; the interpreter ran
    the callee on the caller's smaller array (an out-of-bounds finding inside the callee) or refused the field read
    as 'not modelled'."""
    text = f"""
.version 7.0
.target sm_80
.address_size 64
.func f(.param .align 8 .b8 a[16])
{{
    .reg .f32 %f1;
    ld.param.f32 %f1, [a+8];
    ret;
}}
.visible .entry k()
{{
    {{
    {decl}
    call f, (param0);
    }}
    ret;
}}
"""
    m = pf.parse(text, filename="m.ptx")
    with pytest.raises(interp.InterpUnsupported, match=f"'{problem} of argument does not match formal parameter'") as e:
        interp.run(m, "k", block=1)
    assert "m.ptx:15" in str(e.value)  # the call's line


def test_numpy_scalars_are_stored_at_their_width_and_a_result_may_be_left_unread():
    f = _combine()
    k = pf.KernelBuilder("kern", target="sm_80")
    out = k.param_ptr("out", pf.b8)
    assert k.call(f, args=[{0: np.int32(-2), 4: np.float32(0.25), 8: np.float64(10.0)}, 2], returns={}) == ()
    a, b, c = k.call(f, args=[{0: np.int32(-2), 4: np.float32(0.25), 8: np.float64(10.0)}, 2],
                     returns={0: s32, 4: f32, 8: f64})
    k.st(out, a)
    k.st(out, b, offset=4)
    k.st(out, c, offset=8)
    m = k.module()
    assert "st.param.f64    [call0_a0+8], 0d4024000000000000;" in m.ptx
    pf.assemble(m, "sm_80", backend="ptxas")
    y = np.zeros(1, S_DTYPE)
    interp.run(m, "kern", block=1, args=[y.view(np.uint8)])
    assert y.tolist() == [EXPECTED[0]]


def test_a_half_numpy_scalar_is_stored_as_its_bits():
    """np.float16(1.5) as a field was refused by its st.param (`1.5 does not fit .b16`) after the call scope was
    opened, leaving a `{` with no `}` in the kernel."""
    f = pf.FunctionBuilder("g")
    f.param("x", pf.b8, nbytes=4, align=4)
    k = pf.KernelBuilder("kern", target="sm_80")
    k.call(f, args=[{0: np.float16(1.5), 2: np.float16(-2.0)}])
    m = k.module()
    assert "st.param.b16    [call0_a0], 0x3E00;" in m.ptx and "st.param.b16    [call0_a0+2], 0xC000;" in m.ptx
    pf.assemble(m, "sm_80", backend="ptxas")


def test_the_prototype_line_is_written_in_one_place():
    """CallPrototype.declaration() (the ISA layer's) and the body's CallPrototypeDecl write the same line, array
    sizes included: the ISA layer's dropped `[8]`, which ptxas refuses."""
    from ptxforge.declarations import CallPrototypeDecl
    from ptxforge.isa.calls import CallPrototype
    proto = CallPrototype("proto", (pf.Param("r", pf.b8, nbytes=8, align=8),),
                          (pf.Param("a", pf.b8, nbytes=16, align=8), pf.Param("n", pf.u32)))
    line = proto.declaration()
    assert line == "proto: .callprototype (.param .align 8 .b8 _[8]) _ (.param .align 8 .b8 _[16], .param .u32 _);"
    assert CallPrototypeDecl(proto).ptx_line() == line
