"""PTX as nvcc's headers, hand-written kernels and managed variables write it, read the way ptxas reads it:
directive words written with no space between them, an `.attribute` before the state space, `|` pairs and `!`
negations of registers named without `%`; scoped `.reg` lists through to-python, and to-python's refusals at
the line they are about."""

import os
import re
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


def out_kernel(declarations: str, body: str) -> str:
    """A module of kernel k(.param .u64 out): `declarations`, then `body` with the global address of out in %rd2."""
    return (HEAD + ".visible .entry k(.param .u64 out)\n{\n" + declarations + "\t.reg .b64 %rd<3>;\n"
            "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n" + body + "\tret;\n}\n")


def runs_the_same(text: str, filename: str, expected: list, given: list | None = None):
    """The module `text` reads into: kernel k, run on one thread with an array of u32 as its argument (`given`, or
    zeros), leaves `expected` in it; its rendering reads back to the same module and assembles to the same SASS."""
    module = parse(text, filename=filename)
    out = np.array(given, np.uint32) if given is not None else np.zeros(len(expected), np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert list(out) == expected
    round_trips(module)
    same_sass(text, module.ptx)
    return module


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
    module = runs_the_same(GLUED, "g.ptx", [8])
    assert [k.name for k in module.entries] == ["k"]


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
    runs_the_same(PAIRS, "p.ptx", [10, 2])
    wrong = PAIRS.replace("p|q", "p|z")
    with pytest.raises(ParseError, match=rf"p.ptx:{line_of(wrong, 'p|z')}: z is not declared"):
        parse(wrong, filename="p.ptx")


def test_to_python_rebuilds_a_scope_that_declares_a_list_of_registers():
    """nvcc's half inline asm declares `{.reg .f16 low, high; ...}`; to-python refused any scoped `.reg` of more
    than one register, so every nvcc file with half arithmetic, naming the line before the declaration."""
    text = out_kernel("\t.reg .b16 %rs<2>;\n\t.reg .b32 %r<2>;\n",
                      "\tld.global.u32 %r1, [%rd2];\n\t{.reg .f16 low,high;\n mov.b32 {low,high}, %r1;\n"
                      " mov.b16 %rs1, high;}\n\tst.global.u16 [%rd2+4], %rs1;\n")
    module = parse(text, filename="l.ptx")
    assert script_output(module) == module.ptx
    data = np.array([0x11112222, 0], np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[data])
    assert data[1] & 0xFFFF == 0x1111
    round_trips(module)
    same_sass(text, module.ptx)


def test_to_python_refuses_a_typed_array_call_argument_at_its_line():
    """A call scope's typed `.param` array (`.param .b32 retval0[4];`), which no builder call writes: the refusal
    named the instruction before it and gave no reason.  (The `.b8` arrays nvcc writes for structures come back
    as call_param(nbytes=, align=).)"""
    text = HEAD + """.extern .func (.param .b32 r[4]) pair(.param .b64 a);
.visible .entry k(.param .u64 out)
{
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [out];
	{
	.param .b64 param0;
	st.param.b64 [param0], %rd1;
	.param .b32 retval0[4];
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
    at = line_of(text, ".param .b32 retval0[4]")
    assert e.value.loc is not None and e.value.loc.lineno == at
    assert "call_param() declares .param .type name and the byte array" in e.value.message


KERNEL = ".visible .entry k()\n{\n\tret;\n}\n"


@pytest.mark.parametrize("text,at,missing", [
    (".target sm_80\n.address_size 64\n" + KERNEL, 1, ".version"),
    ("// a comment\n.target sm_80\n.version 8.0\n.address_size 64\n" + KERNEL, 2, ".version"),
    (".version 8.0\n.address_size 64\n.target sm_80\n" + KERNEL, 2, ".target"),
    (".version 8.0\n" + KERNEL, 2, ".target"),
])
def test_a_module_opens_with_version_then_target(text, at, missing):
    """ptxas refuses a file that does not open with .version, then .target ("Missing .version directive at start
    of file"); the reader took one with no .version at all and wrote `.version 7.0` into it."""
    with pytest.raises(ParseError, match=rf"v.ptx:{at}: a PTX module opens with .version, then .target: {missing} "
                                         "must come before"):
        parse(text, filename="v.ptx")


def test_a_second_version_is_refused_at_its_line():
    text = HEAD + KERNEL + ".version 8.0\n"
    at = text.count("\n", 0, text.rindex(".version")) + 1
    with pytest.raises(ParseError, match=rf"v.ptx:{at}: a second .version \(the first "
                                         r"is at line 1\)"):
        parse(text, filename="v.ptx")


def test_a_kernel_declaration_is_read_and_kept():
    """ptxas takes a kernel's declaration, `.visible .entry k(...);`, before or without its definition; the reader
    called it "'.visible' is not a module-scope directive"."""
    text = HEAD + ".visible .entry k(.param .u64 p);\n" + KERNEL.replace("k()", "k(.param .u64 p)")
    module = parse(text, filename="e.ptx")
    assert [k.name for k in module.entries] == ["k"]
    assert ".visible .entry k(.param .u64 p);" in module.ptx
    round_trips(module)
    same_sass(text, module.ptx)
    broken = HEAD + ".visible .entry k(.param .u64 p\n{\n\tret;\n}\n"
    with pytest.raises(ParseError, match=r"e.ptx:5: the parameter list's \( is never closed"):
        parse(broken, filename="e.ptx")


@pytest.mark.parametrize("pragma", ['"nounroll', "nounroll", '"a" "b"', "7"])
def test_a_pragma_is_a_list_of_strings(pragma):
    """ptxas refuses `.pragma nounroll;` or an unclosed string (a syntax error); the reader kept them, and wrote
    them into PTX that no assembler takes."""
    in_body = KERNEL.replace("\tret;", f"\t.pragma {pragma};\n\tret;")
    for text in (HEAD + f".pragma {pragma};\n" + KERNEL, HEAD + in_body):
        with pytest.raises(ParseError, match=r"\.pragma takes one or more double-quoted strings"):
            parse(text, filename="p.ptx")
    assert ".pragma \"nounroll\", \"x\";" in parse(HEAD + '.pragma "nounroll", "x";\n' + KERNEL).ptx


def param_offsets(kernel) -> dict:
    """Where each parameter of `kernel` sits in its parameter buffer, as launches and the interpreter place it."""
    from ptxforge.kernel import param_align
    out, off = {}, 0
    for p in kernel.params:
        a = param_align(p)
        off = -(-off // a) * a
        out[p.name] = off
        off += p.size
    return out


def sass_param_offsets(text: str) -> list:
    """The constant-bank offsets (past sm_90's parameter base 0x210) that the SASS of `text` reads."""
    sass = assemble(text, backend="ptxas").sass()
    return sorted({int(x, 16) - 0x210 for x in re.findall(r"c\[0x0\]\[(0x2[1-9a-f][0-9a-f])\]", sass)})


def align_kernel(spelled: str) -> str:
    return (".version 8.0\n.target sm_90\n.address_size 64\n\n"
            f".visible .entry k(.param .u32 n, .param {spelled}, .param .u32 m)\n{{\n"
            "\t.reg .b32 %r<3>;\n\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n\tld.param.u32 %r1, [m];\n"
            "\tcvta.to.global.u64 %rd2, %rd1;\n\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n")


@pytest.mark.parametrize("spelled,p_at,m_at", [
    (".u64 .ptr .align 1 p", 8, 16),      # nvcc 13 for sm_100 and newer: refused ("align=1 would not be honoured")
    (".u64 .ptr .align 16 p", 8, 16),     # a pointer's .align is its pointee's: the interpreter put p at 16
    (".u64 .align 16 p", 8, 16),          # ptxas ignores an .align after the type; the reader moved it before
    (".align 16 .u64 p", 16, 24),
    (".b8 .align 16 p[16]", 4, 20),
    (".b32 .align 16 p[4]", 4, 20),
    (".align 16 .b8 p[16]", 16, 32),
])
def test_parameters_sit_where_ptxas_puts_them(spelled, p_at, m_at):
    """The parameter layout of a read kernel (what launches pack and the interpreter reads) and of its rendering
    are ptxas's: an `.align` after the type is ignored, and a `.ptr`'s is its pointee's."""
    text = align_kernel(spelled)
    module = parse(text, filename="a.ptx")
    assert param_offsets(module.kernels[0]) == {"n": 0, "p": p_at, "m": m_at}
    round_trips(module)
    if "ptxas" in available_backends():
        assert sass_param_offsets(text) == sass_param_offsets(module.ptx)
        assert {p_at, m_at} <= set(sass_param_offsets(module.ptx))
    if spelled.startswith(".u64"):
        out = np.zeros(1, np.uint32)
        interp.run(module, "k", grid=1, block=1, args=[np.uint32(5), out, np.uint32(77)])
        assert out[0] == 77


def test_an_align_after_the_type_is_a_lint_warning():
    from ptxforge.parse.lint import lint
    findings = lint(align_kernel(".u64 .align 16 p"), filename="a.ptx")
    assert any(f.severity == "warning" and "ignores an .align written after the type" in f.message and f.line == 5
               for f in findings), [str(f) for f in findings]


def test_several_variables_in_one_declaration():
    """ptxas takes a list of names in one declaration (`.global .u32 ga, gb;`, `.shared .b8 s1[16], s2[32];`,
    initializers too); the reader refused it as "variable name 'ga,gb' is not a PTX identifier"."""
    text = HEAD + """.global .u32 ga = 3, gb[2] = {4, 5};
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	.shared .align 4 .b8 s1[16], s2[32];
	.local .u32 lx, ly;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	ld.global.u32 %r1, [ga];
	ld.global.u32 %r2, [gb+4];
	st.shared.u32 [s2+28], %r2;
	ld.shared.u32 %r3, [s2+28];
	st.local.u32 [ly], %r3;
	ld.local.u32 %r3, [ly];
	add.u32 %r1, %r1, %r3;
	st.global.u32 [%rd2], %r1;
	ret;
}
"""
    module = runs_the_same(text, "v.ptx", [8])
    assert [v.name for v in module.declarations] == ["ga", "gb"]


def test_to_python_writes_infinities_and_nans_exactly():
    """`mov.f32 %f1, 0fFF800000;` made the script `Imm(-inf, T.f32)`, a NameError when run; a NaN lost its
    payload (`0f7FC00001` became `nan`)."""
    text = out_kernel("\t.reg .f32 %f<4>;\n\t.reg .f64 %fd<2>;\n",
                      "\tmov.f32 %f1, 0fFF800000;\n"
                      "\tmov.f32 %f2, 0f7FC00001;\n"
                      "\tmov.f32 %f3, 0f7F800000;\n"
                      "\tmov.f64 %fd1, 0dFFF8000000000123;\n"
                      "\tst.global.f32 [%rd2], %f1;\n"
                      "\tst.global.f32 [%rd2+4], %f2;\n"
                      "\tst.global.f32 [%rd2+8], %f3;\n"
                      "\tst.global.f64 [%rd2+16], %fd1;\n")
    module = parse(text, filename="f.ptx")
    printed = script_output(module)
    assert printed == module.ptx
    for literal in ("0fFF800000", "0f7FC00001", "0f7F800000", "0dFFF8000000000123"):
        assert literal in printed


def test_a_special_register_that_needs_a_newer_target_is_named():
    """`mov.b32 %r1, %cluster_ctarank;` on sm_80 was refused as "'mov.b32' needs sm_90", which mov does not:
    the special register does."""
    from ptxforge.errors import TargetError
    from ptxforge.parse.lint import lint
    text = HEAD + ".visible .entry k()\n{\n\t.reg .b32 %r<2>;\n\tmov.b32 %r1, %cluster_ctarank;\n\tret;\n}\n"
    at = line_of(text, "cluster_ctarank")
    with pytest.raises(TargetError, match=rf"c.ptx:{at}: %cluster_ctarank \(read by 'mov.b32'\) needs sm_90"):
        parse(text, filename="c.ptx")
    on90 = text.replace("sm_80", "sm_90")
    assert any(f.line == at and "%cluster_ctarank (read by 'mov.b32') needs sm_90" in f.message
               for f in lint(on90, filename="c.ptx", arch="sm_80"))


@pytest.mark.parametrize("kind", [".texref", ".surfref", ".samplerref"])
def test_texture_references_are_refused_as_such(kind):
    """ptxas still takes `.global .texref t;`; the reader called `.texref` an unknown type."""
    with pytest.raises(ParseError, match=rf"t.ptx:5: \{kind} variables \(texture, surface and sampler references, "
                                         "which CUDA 12 removed\\) are not read"):
        parse(HEAD + f".global {kind} t;\n" + KERNEL, filename="t.ptx")


def test_parse_file_names_the_line_of_a_byte_that_is_not_utf8(tmp_path):
    """parse_file read with the locale's encoding and let UnicodeDecodeError out, naming neither the file nor the
    line; a Latin-1 comment is a ParseError at its line, as a non-ASCII character of a str is."""
    from ptxforge.parse import parse_file
    path = tmp_path / "l.ptx"
    path.write_bytes((HEAD + "// caf\xe9\n" + KERNEL).encode("latin-1"))
    with pytest.raises(ParseError, match=rf"{path}:5: byte 0xE9 is not UTF-8 text: PTX is ASCII"):
        parse_file(str(path))
    path.write_text(HEAD + KERNEL)
    assert parse_file(path).entries[0].name == "k"


def test_lint_keeps_the_findings_before_an_error_it_cannot_read_past():
    """An undeclared label stops the reader; lint reported that one error and dropped the errors it had found
    before it (an `add.u33` above), so a file looked one fix away from clean."""
    from ptxforge.parse.lint import lint
    text = HEAD + KERNEL.replace("\tret;", "\t.reg .b32 %r<3>;\n\tadd.u33 %r1, %r1, 1;\n\tbra NOWHERE;\n\tret;")
    findings = lint(text, filename="l.ptx")
    errors = [(f.line, f.message) for f in findings if f.severity == "error"]
    assert [line for line, _ in errors] == [line_of(text, "add.u33"), line_of(text, "NOWHERE")], errors
    assert any(f.severity == "note" and "stops at this error" in f.message for f in findings)


def test_a_call_scope_declares_several_params_in_one_line():
    """`.param .b32 a0, a1;` in a call scope, which ptxas takes, was refused as a parameter named 'a0,a1'."""
    text = HEAD + """.func (.param .b32 r) add2(.param .b32 a, .param .b32 b)
{
	.reg .b32 %t<3>;
	ld.param.b32 %t1, [a];
	ld.param.b32 %t2, [b];
	add.u32 %t1, %t1, %t2;
	st.param.b32 [r], %t1;
	ret;
}
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<2>;
	ld.param.u64 %rd1, [out];
	{
	.param .b32 a0, a1;
	.param .b32 r0;
	st.param.b32 [a0], 3;
	st.param.b32 [a1], 4;
	call.uni (r0), add2, (a0, a1);
	ld.param.b32 %r1, [r0];
	}
	st.global.u32 [%rd1], %r1;
	ret;
}
"""
    module = runs_the_same(text, "c.ptx", [7])
    assert script_output(module) == module.ptx


def test_interp_prints_arrays_after_the_run_but_not_a_structure_passed_by_value(tmp_path):
    """`ptxforge interp` printed the bytes of a by-value structure "after the run" as if the kernel could have
    written them; it prints the pointer arguments' arrays."""
    text = HEAD + """.visible .entry k(.param .align 8 .b8 s[8], .param .u64 out)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;
	ld.param.u32 %r1, [s+4];
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r1;
	ret;
}
"""
    path = tmp_path / "s.ptx"
    path.write_text(text)
    p = subprocess.run([sys.executable, "-m", "ptxforge", "interp", str(path), "--block", "1", "--arg", "u8:8:arange",
                        "--arg", "u32:2"], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    assert re.search(r"out \(u32:2\) after the run: \[117835012 +0\]", p.stdout), p.stdout  # bytes 4..7: 4 5 6 7
    assert "s (u8:8:arange)" not in p.stdout


NVCC_HEADER = HEAD + """.visible .entry k(
	.param .u64 k_param_0,
	{bad}
)
.maxntid 128
{directive}
{{
	ret;
}}
"""


@pytest.mark.parametrize("bad,directive,fragment,message", [
    (".param .u33 k_param_1", "", ".u33", "unknown parameter type .u33"),
    (".param .u32 9b", "", "9b", "parameter name '9b' is not a PTX identifier"),
    (".param .u32 k_param_0", "", ".u32 k_param_0", "'k_param_0' is declared twice in k"),
    (".reg .b32 k_param_1", "", ".reg", "kernel parameter k_param_1 is .reg"),
    (".param .u32 k_param_1", ".maxfoo 3", ".maxfoo", ".maxfoo is not a performance directive"),
    (".param .u32 k_param_1", ".minnctapersm x", ".minnctapersm", ".minnctapersm takes integers"),
])
def test_a_header_refusal_names_the_line_of_the_parameter_or_directive(bad, directive, fragment, message):
    """nvcc writes one parameter a line and each directive on its own; a refusal of one named the header's first
    line (`.visible .entry k(`), not the parameter's or the directive's."""
    text = NVCC_HEADER.format(bad=bad, directive=directive)
    with pytest.raises(ParseError, match=rf"h.ptx:{line_of(text, fragment)}: {re.escape(message)}"):
        parse(text, filename="h.ptx")


@pytest.mark.parametrize("line,shown", [
    ("add.u32 %r1, %r2, 0xZZ;", "cannot read the operand '0xZZ': not a register, a literal"),
    ("add.u32 %r1, %r2, 1+1;", "'1\\+1' is a constant expression: ptxas evaluates it, ptxforge reads literal operands"),
    ("add.u32 %r1, %r2, (1<<3);", "'1<<3' is a constant expression"),
    ("add.u32 %r1, %r2, b4;", "got 'b4' \\('b4' is no declared register or variable, so it reads as a label\\)"),
    ("add.u32 !%p1, %r1, %r2;", "got '!%p1'"),
    ("mul.lo.u32 3, %r1, %r2;", "got '3'"),
])
def test_a_refused_operand_is_named_as_the_line_spells_it(line, shown):
    """The constructors name an operand by its Python form (`got RawOperand(text='0xZZ')`, `got
    PlainLabel(name='b4', owner=0)`, `got Imm(value=3, type=None)`); the reader's refusal names it as written,
    says why a bare name became a label, and that ptxas evaluates constant expressions, which the reader does
    not."""
    text = HEAD + (".visible .entry k()\n{\n\t.reg .b32 %r<3>;\n\t.reg .pred %p1;\n\t" + line + "\n\tret;\n}\n")
    with pytest.raises(ParseError, match=rf"o.ptx:{line_of(text, line)}: .*{shown}") as e:
        parse(text, filename="o.ptx")
    assert "RawOperand" not in str(e.value) and "(name=" not in str(e.value) and "value=" not in str(e.value)


def test_glued_words_leave_strings_alone():
    """A `.pragma` string is kept as written, dots and all."""
    text = HEAD + KERNEL.replace("\tret;", '\t.pragma ".x .y.z";\n\tret;')
    assert '.pragma ".x .y.z";' in parse(text).ptx


def test_an_operand_right_after_the_mnemonic():
    """ptxas reads `ld.global.u32%r1,[%rd1];` (an operand that starts with % [ { or ( needs no space before it);
    the reader refused the line as no instruction."""
    text = out_kernel("\t.reg .b32 %r<3>;\n", "\tld.global.u32%r1,[%rd2];\n\tadd.u32%r2,%r1,5;\n"
                                             "\tst.global.v2.u32[%rd2],{%r2,%r1};\n")
    runs_the_same(text, "w.ptx", [8, 3], given=[3, 0])


def test_spaces_inside_a_register_range():
    """ptxas takes `.reg .b32 %r < 3 >;`; the reader called `%r < 3 >` no PTX identifier."""
    text = out_kernel("\t.reg .b32 %r < 3 >;\n", "\tmov.u32 %r2, 9;\n\tst.global.u32 [%rd2], %r2;\n")
    runs_the_same(text, "r.ptx", [9])


@pytest.mark.parametrize("address,message", [
    ("[%rd2+(4)]", "address \\[%rd2\\+\\(4\\)\\]: the offset '\\(4\\)' after %rd2 is no integer literal"),
    ("[%rd2+4+4]", "address \\[%rd2\\+4\\+4\\]: the offset '4\\+4' after %rd2 is no integer literal"),
    ("[%rd2+]", "address \\[%rd2\\+\\]: no offset follows the '\\+'"),
])
def test_an_address_offset_that_is_no_literal_is_named(address, message):
    """`[%rd1+(4)]`, which ptxas evaluates, was refused as "%rd1+(4) is not declared"."""
    text = out_kernel("\t.reg .b32 %r<2>;\n", f"\tld.global.u32 %r1, {address};\n")
    with pytest.raises(ParseError, match=rf"a.ptx:{line_of(text, address)}: {message}"):
        parse(text, filename="a.ptx")


def test_a_variable_address_with_two_offsets_is_folded():
    """`[g+4+4]` read as an address of `g+4` plus 4, which the interpreter refused ("not modelled"); it is
    `[g+8]`."""
    text = out_kernel("\t.reg .b32 %r<2>;\n", "\tld.global.u32 %r1, [g+4+4];\n\tst.global.u32 [%rd2], %r1;\n")
    text = text.replace(".visible .entry", ".global .align 4 .u32 g[4] = {1, 2, 3, 4};\n.visible .entry", 1)
    module = runs_the_same(text, "g.ptx", [3])
    assert "[g+8]" in module.ptx
