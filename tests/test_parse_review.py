"""PTX as nvcc's headers, hand-written kernels and managed variables write it, read the way ptxas reads it:
directive words written with no space between them, an `.attribute` before the state space, `|` pairs and `!`
negations of registers named without `%`; scoped `.reg` lists through to-python, and to-python's refusals at
the line they are about."""

import os
import subprocess
import sys

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.assembler import assemble, available_backends
from ptxforge.errors import ValidationError
from ptxforge.parse import ParseError, parse
from ptxforge.parse.equality import same_module
from ptxforge.parse.to_python import to_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n\n"


def line_of(text: str, fragment: str) -> int:
    return next(i for i, ln in enumerate(text.split("\n"), 1) if fragment in ln)


def round_trips(module):
    again = parse(module.ptx, filename="again.ptx")
    assert again.ptx == module.ptx and same_module(module, again)


def script_output(module) -> str:
    p = subprocess.run([sys.executable, "-c", to_python(module)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    return p.stdout


def same_sass(a: str, b: str):
    if "ptxas" not in available_backends():
        return
    x, y = assemble(a, backend="ptxas"), assemble(b, backend="ptxas")
    assert x.sass_opcodes() == y.sass_opcodes()


# hexp() of cuda_fp16.h, as nvcc inlines it (less its exact-result fix-ups): `.reg.b32` with no space
HALF_EXP = HEAD + """.visible .entry half_exp(.param .u64 out)
{
	.reg .b16 %rs<3>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u16 %rs1, [%rd2];
	// begin inline asm
	{.reg.b32         f, C, nZ;
 .reg.b16         h,r;
  mov.b16         h,%rs1;
  cvt.f32.f16     f,h;
  mov.b32         C, 0x3fb8aa3bU;
  mov.b32         nZ, 0x80000000U;
  fma.rn.f32      f,f,C,nZ;
  ex2.approx.ftz.f32  f,f;
  cvt.rn.f16.f32      r,f;
  mov.b16         %rs2,r;
}
	// end inline asm
	st.global.u16 [%rd2+2], %rs2;
	ret;
}
"""


def test_glued_reg_directive_of_cuda_fp16_inline_asm_is_read():
    """cuda_fp16.h's inline asm writes `{.reg.b32 f, C, nZ;` (hexp, hexp2, hlog ...), which ptxas reads as `.reg
    .b32`: the reader refused it as "not a directive ptxforge reads", so no nvcc file using those reached it."""
    module = parse(HALF_EXP, filename="h.ptx")
    data = np.array([1.0, 0.0], np.float16)
    interp.run(module, "half_exp", grid=1, block=1, args=[data])
    assert abs(float(data[1]) - np.e) < 0.01
    round_trips(module)
    same_sass(HALF_EXP, module.ptx)


GLUED = HEAD + """.visible.global.align 4 .u32 g[2] = {5, 7};
.visible.entry k(.param.u64.ptr.global.align 8 out)
{
.reg.b32 %r<3>;
.reg.b64 %rd<3>;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd2, %rd1;
ld.global.u32 %r1, [g+4];
{
.reg.b32 t;
add.u32 t, %r1, 1;
st.global.u32 [%rd2], t;
}
ret;
}
"""


def test_glued_directive_words_at_module_scope_and_in_a_header():
    """`.visible.global`, `.visible.entry`, `.param.u64.ptr.global` are the tokens ptxas reads with spaces between
    them; the reader named `.visible.global` "not a module-scope directive" and took `.visible.entry` for none."""
    module = parse(GLUED, filename="g.ptx")
    assert [k.name for k in module.entries] == ["k"]
    out = np.zeros(1, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert out[0] == 8
    round_trips(module)
    same_sass(GLUED, module.ptx)


def test_glued_words_leave_numbers_and_vector_components_alone():
    text = HEAD + ".global .f32 gf[2] = {1.5, 2.25};\n.visible .entry k()\n{\n\tret;\n}\n"
    module = parse(text)
    assert module.declarations[0].init == "{1.5, 2.25}"


MANAGED = HEAD + """.visible .global .attribute(.managed) .align 4 .u32 mv = 3;
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [mv];
	st.global.u32 [%rd2], %r1;
	ret;
}
"""


def test_a_managed_variable_reads_back_from_its_own_rendering():
    """nvcc writes a `__managed__` variable `.visible .global .attribute(.managed) ...`; ptxforge renders it
    `.visible .attribute(.managed) .global ...`, which ptxas takes too, but the reader refused its own rendering
    (`'.visible' is not a module-scope directive`)."""
    module = parse(MANAGED, filename="m.ptx")
    again = parse(module.ptx, filename="again.ptx")
    assert again.ptx == module.ptx and same_module(module, again)
    assert parse(MANAGED.replace(".global .attribute(.managed)", ".attribute(.managed) .global")).ptx == module.ptx
    same_sass(MANAGED, module.ptx)


PAIRS = HEAD + """.visible .entry k(.param .u64 out)
{
	.reg .pred p, q, s;
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, 3;
	setp.eq.u32 p|q, %r1, 4;
	setp.eq.and.u32 s, %r1, 3, !q;
	selp.b32 %r2, 10, 20, q;
	selp.b32 %r3, 1, 2, s;
	st.global.u32 [%rd2], %r2;
	st.global.u32 [%rd2+4], %r3;
	ret;
}
"""


def test_pairs_and_negations_of_registers_named_without_percent():
    """`setp ... p|q` and a `!q` operand name registers declared without `%` as ptxas takes them; the reader read
    the name after `|` or `!` without its first character ("% is not declared")."""
    module = parse(PAIRS, filename="p.ptx")
    out = np.zeros(2, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert list(out) == [10, 2]  # 3 == 4 is false: q true; 3 == 3 and not q: false
    round_trips(module)
    same_sass(PAIRS, module.ptx)
    wrong = PAIRS.replace("p|q", "p|z")
    with pytest.raises(ParseError, match=rf"p.ptx:{line_of(wrong, 'p|z')}: z is not declared"):
        parse(wrong, filename="p.ptx")


def test_to_python_rebuilds_a_scope_that_declares_a_list_of_registers():
    """nvcc's half inline asm declares `{.reg .f16 low, high; ...}`; to-python refused any scoped `.reg` of more
    than one register, so every nvcc file with half arithmetic, naming the line before the declaration."""
    text = HEAD + """.visible .entry k(.param .u64 out)
{
	.reg .b16 %rs<2>;
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [%rd2];
	{.reg .f16 low,high;
 mov.b32 {low,high}, %r1;
 mov.b16 %rs1, high;}
	st.global.u16 [%rd2+4], %rs1;
	ret;
}
"""
    module = parse(text, filename="l.ptx")
    assert script_output(module) == module.ptx
    data = np.array([0x11112222, 0], np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[data])
    assert data[1] & 0xFFFF == 0x1111
    round_trips(module)
    same_sass(text, module.ptx)


def test_to_python_refuses_a_structure_call_argument_at_its_line():
    """A call passing or returning a structure declares `.param .align 8 .b8 retval0[16];` in its scope, which no
    builder call writes: the refusal named the instruction before it and gave no reason."""
    text = HEAD + """.extern .func (.param .align 8 .b8 r[16]) pair(.param .b64 a);
.visible .entry k(.param .u64 out)
{
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	{
	.param .b64 param0;
	st.param.b64 [param0], %rd1;
	.param .align 8 .b8 retval0[16];
	call.uni (retval0), pair, (param0);
	ld.param.b64 %rd2, [retval0];
	}
	st.global.u64 [%rd1], %rd2;
	ret;
}
"""
    module = parse(text, filename="s.ptx")
    with pytest.raises(ValidationError) as e:
        to_python(module)
    at = line_of(text, ".param .align 8 .b8 retval0[16]")
    assert e.value.loc is not None and e.value.loc.lineno == at
    assert "call_param() declares a scalar" in e.value.message
