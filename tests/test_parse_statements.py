"""Statement-level reading rules, each as ptxas has it: hex float literals with exact digit counts and no
sign, no integer literal as a float operand, `call f, ()`, a guard written `@ %p`, ASCII text only, no '-' in
an address, no empty statement or ';' after a line directive, and a warning for an unknown `.version`."""

import pytest

from ptxforge.parse import ParseError, parse
from ptxforge.parse.lint import lint


def kernel(body: str, version: str = "8.0") -> str:
    return (f".version {version}\n.target sm_80\n.address_size 64\n\n.visible .entry k(.param .u64 out)\n{{\n"
            "\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .pred %p<2>;\n\t.reg .f32 %f<4>;\n"
            "\t.reg .f64 %fd<2>;\n\tld.param.u64 %rd1, [out];\n" + body + "\tret;\n}\n")


BODY_LINE = 13  # the line of the first body line given to kernel()


@pytest.mark.parametrize("line,says", [
    ("mov.f32 %f1, 0f13F800000;", "0f13F800000: a 0f literal has exactly 8 hex digits \\(9 given\\)"),
    ("mov.f32 %f1, 0f3F8;", "0f3F8: a 0f literal has exactly 8 hex digits \\(3 given\\)"),
    ("mov.f64 %fd1, 0d13FF0000000000000;", "0d13FF0000000000000: a 0d literal has exactly 16 hex digits \\(17 given\\)"),
    ("mov.f32 %f1, -0f3F800000;", "-0f3F800000: a hex float literal takes no sign; write the negated bits "
                                  "\\(0fBF800000\\)"),
])
def test_malformed_hex_floats_are_refused(line, says):
    with pytest.raises(ParseError, match=f"h.ptx:{BODY_LINE}: {says}"):
        parse(kernel(f"\t{line}\n"), filename="h.ptx")


def test_hex_floats_read_their_bits():
    module = parse(kernel("\tmov.f32 %f1, 0fBF800000;\n\tmov.f64 %fd1, 0d3FF0000000000000;\n"))
    values = [i.operands[1].value for i in module.kernels[0].instructions if i.opcode == "mov"]
    assert values == [-1.0, 1.0]


@pytest.mark.parametrize("line,t,legal", [
    ("mov.f32 %f1, 3;", "f32", "3.0 or 0f40400000"),
    ("add.f32 %f1, %f2, 3;", "f32", "3.0 or 0f40400000"),
    ("fma.rn.f32 %f1, %f2, 2, %f3;", "f32", "2.0 or 0f40000000"),
    ("setp.lt.f32 %p1, %f2, 0;", "f32", "0.0 or 0f00000000"),
    ("mov.f64 %fd1, 3;", "f64", "3.0 or 0d4008000000000000"),
    ("st.global.f32 [%rd1], 1;", "f32", "1.0 or 0f3F800000"),
    ("slct.s32.f32 %r1, %r2, %r3, 1;", "f32", "1.0 or 0f3F800000"),
])
def test_an_integer_literal_is_no_float_operand(line, t, legal):
    with pytest.raises(ParseError, match=f"f.ptx:{BODY_LINE}: the integer literal .* is a .{t} operand here: a "
                                         f".{t} operand takes a float literal \\({legal}\\)"):
        parse(kernel(f"\t{line}\n"), filename="f.ptx")


@pytest.mark.parametrize("line", ["cvt.rn.f32.s32 %f1, 3;", "slct.f32.s32 %f1, %f2, %f3, 1;", "mov.b32 %f1, 3;",
                                  "mov.f32 %f1, 3.0;"])
def test_integer_literals_where_ptxas_takes_them(line):
    assert parse(kernel(f"\t{line}\n")).kernels[0].instructions[1].render()


def test_lint_names_an_integer_literal_as_a_float_operand():
    findings = lint(kernel("\tmov.f32 %f1, 3;\n"), filename="f.ptx")
    assert any(f.severity == "error" and f.line == BODY_LINE and "takes a float literal" in f.message
               for f in findings)


def test_a_call_with_an_empty_argument_list():
    text = (".version 8.0\n.target sm_80\n.address_size 64\n.func f()\n{\n\tret;\n}\n"
            ".visible .entry k()\n{\n\tcall.uni f, ();\n\tret;\n}\n")
    module = parse(text)
    assert "call.uni        f;" in module.ptx
    assert parse(module.ptx).ptx == module.ptx


@pytest.mark.parametrize("guard,negated", [("@ %p1", False), ("@ !%p1", True), ("@!%p1", True), ("@%p1", False)])
def test_a_guard_may_have_a_space_after_the_at(guard, negated):
    module = parse(kernel(f"\tsetp.eq.u32 %p1, %r1, 0;\n\t{guard} add.s32 %r2, %r1, 1;\n"))
    ins = module.kernels[0].instructions[2]
    assert ins.guard is not None and ins.guard.negate == negated and ins.opcode == "add"


@pytest.mark.parametrize("text,line,code", [
    ("\t// a note: caf\u00e9\n", BODY_LINE, "U\\+00E9"),
    ("\tmov.b32 %r1, \uff13;\n", BODY_LINE, "U\\+FF13"),
    ("\tmov.b32\u00a0%r1, 3;\n", BODY_LINE, "U\\+00A0"),
])
def test_non_ascii_text_is_refused_at_its_line(text, line, code):
    with pytest.raises(ParseError, match=f"u.ptx:{line}: non-ASCII character {code} .*: PTX is ASCII"):
        parse(kernel(text), filename="u.ptx")


def test_an_address_minus_an_offset_is_refused_with_the_legal_spelling():
    with pytest.raises(ParseError, match=rf"a.ptx:{BODY_LINE}: address \[%rd1-4\]: PTX has no '-' in an address; a "
                                         r"negative offset is written \[%rd1\+-4\]"):
        parse(kernel("\tld.global.u32 %r1, [%rd1-4];\n"), filename="a.ptx")
    assert "[%rd1+-4]" in parse(kernel("\tld.global.u32 %r1, [%rd1+-4];\n")).ptx


@pytest.mark.parametrize("body", ["\t;\n", "\tadd.s32 %r3, %r1, 1;;\n", "L1: ;\n"])
def test_an_empty_statement_is_refused(body):
    with pytest.raises(ParseError, match=f"e.ptx:{BODY_LINE}: an empty statement"):
        parse(kernel(body), filename="e.ptx")


def test_a_line_directive_takes_no_semicolon():
    with pytest.raises(ParseError, match=f"l.ptx:{BODY_LINE}: .loc is a line directive: it ends at the end of its "
                                         "line, with no ';'"):
        parse(kernel("\t.loc 1 2 3;\n"), filename="l.ptx")
    with pytest.raises(ParseError, match="l.ptx:2: .target is a line directive"):
        parse(kernel("").replace(".target sm_80", ".target sm_80;"), filename="l.ptx")


def test_an_unknown_version_is_a_lint_warning_at_its_line():
    findings = lint(kernel("", version="9.9"), filename="v.ptx")
    assert [(f.line, f.severity) for f in findings if "no released PTX ISA version" in f.message] == [(1, "warning")]
    assert not [f for f in lint(kernel(""), filename="v.ptx") if "released" in f.message]
