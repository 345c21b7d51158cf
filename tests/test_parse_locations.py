"""Where the reader's and its users' messages point, and forms nvcc writes that read as their plain
equivalents: line maps past multi-line `.section` blocks, a function defined twice, to-python's refusal of an
array return value, vote without .sync, .maxntid with .reqntid, and `{%r}` surface operands."""

import pytest

from ptxforge.errors import ValidationError
from ptxforge.parse import ParseError, parse
from ptxforge.parse.to_python import to_python

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"
SECTION = "\t.section\t.debug_str\n\t{\n$L__info_string0:\n.b8 95,90,0\n\t}\n"
KERNEL = (".visible .entry k(.param .u64 out)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n"
          "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, 7;\n"
          "\tst.global.u32 [%rd2], %r1;\n\tret;\n}\n")


def test_line_maps_count_the_lines_of_a_section_block():
    module = parse(HEAD + SECTION + KERNEL, filename="s.ptx")
    rendered = module.render()
    lines = rendered.text.split("\n")
    n = next(i for i, ln in enumerate(lines, 1) if "mov.u32" in ln)
    ins = rendered.instruction_at(n)
    assert ins is not None and ins.opcode == "mov" and ins.loc.lineno == HEAD.count("\n") + SECTION.count("\n") + 7
    assert "s.ptx:" in module.describe_line(n)
    for i, ln in enumerate(lines, 1):
        hit = rendered.instruction_at(i)
        assert hit is None or hit.render().split()[0] in ln


@pytest.mark.parametrize("first,second,kind", [
    (KERNEL, KERNEL, "kernel k"),
    (".func f()\n{\n\tret;\n}\n", ".func f()\n{\n\tret;\n}\n" + KERNEL, "function f"),
])
def test_a_function_defined_twice_is_named_at_the_second_definition(first, second, kind):
    text = HEAD + first + "\n" + second
    again = HEAD.count("\n") + first.count("\n") + 2
    with pytest.raises(ParseError, match=f"d.ptx:{again}: {kind} is already defined at line 4: a module defines a "
                                         "name once"):
        parse(text, filename="d.ptx")


def test_to_python_refuses_a_typed_array_return_value_at_the_function_line():
    text = (HEAD + ".func (.param .b32 rv[2]) f(.param .b32 a)\n{\n\t.reg .b32 %r<2>;\n"
            "\tld.param.b32 %r1, [a];\n\tst.param.b32 [rv], %r1;\n\tst.param.b32 [rv+4], %r1;\n\tret;\n}\n" + KERNEL)
    module = parse(text, filename="r.ptx")
    with pytest.raises(ValidationError, match=r"to-python: f returns \.param \.b32 rv\[2\], a typed array .*: "
                                              r"FunctionBuilder.result\(\) declares \.param \.type name, or a byte "
                                              r"array") as e:
        to_python(module)
    assert (e.value.loc.filename, e.value.loc.lineno) == ("r.ptx", 4)


def test_vote_without_sync_says_to_write_vote_sync():
    text = HEAD + KERNEL.replace("\tmov.u32 %r1, 7;\n", "\t.reg .pred %p1;\n\tvote.ballot.b32 %r3, %p1;\n")
    with pytest.raises(ParseError, match=r"v.ptx:11: 'vote.ballot.b32': vote without .sync is not supported on "
                                         r"sm_70 and later; write vote.sync.ballot.b32 d, p, membermask"):
        parse(text, filename="v.ptx")


def test_a_directive_conflict_is_named_at_the_directive_line():
    text = HEAD + ".visible .entry k()\n.maxntid 128\n.reqntid 128\n{\n\tret;\n}\n"
    with pytest.raises(ParseError, match="m.ptx:6: k: .maxntid and .reqntid cannot both be given"):
        parse(text, filename="m.ptx")


@pytest.mark.parametrize("line,rendered", [
    ("sust.b.2d.b32.trap [%rd1, {%r1, %r1}], {%r2};", "sust.b.2d.b32.trap [%rd1, {%r1, %r1}], %r2;"),
    ("suld.b.2d.b32.clamp {%r2}, [%rd1, {%r1, %r1}];", "suld.b.2d.b32.clamp %r2, [%rd1, {%r1, %r1}];"),
])
def test_a_one_register_brace_list_is_the_scalar_surface_form(line, rendered):
    text = HEAD + KERNEL.replace("\tmov.u32 %r1, 7;\n", f"\tmov.u32 %r1, 0;\n\t{line}\n")
    module = parse(text)
    assert rendered in [i.render() for i in module.kernels[0].instructions]
    assert parse(module.ptx).ptx == module.ptx


def test_a_brace_list_of_two_for_the_scalar_surface_form_is_spelled_as_ptx():
    text = HEAD + KERNEL.replace("\tmov.u32 %r1, 7;\n", "\tsust.b.2d.b32.trap [%rd1, {%r1, %r1}], {%r2, %r3};\n")
    with pytest.raises(ParseError, match=r"sust value: \{%r2, %r3\} holds 2 registers; the scalar form takes one "
                                         r"\(.v2 takes 2\)"):
        parse(text)
