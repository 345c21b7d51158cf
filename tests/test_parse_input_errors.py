"""What the PTX reader and lint say about input they cannot take: something that is not PTX text, two
instructions with no ';' between them (named at the line that lacks it), and a .version too old for the target
(named at the .version line)."""

import pytest

import ptxforge
from ptxforge.parse import ParseError, parse
from ptxforge.parse.lint import lint

HEAD = "// a header comment\n// and another\n.version 8.0\n.target sm_80\n.address_size 64\n"


def kernel(body: str, head: str = HEAD) -> str:
    return (head + "\n.visible .entry k(.param .u64 p)\n{\n    .reg .pred %p<4>;\n    .reg .b32 %r<8>;\n"
            "    .reg .b64 %rd<4>;\n" + body + "    ret;\n}\n")


def line_of(text: str, fragment: str, nth: int = 0) -> int:
    return [i for i, ln in enumerate(text.split("\n"), 1) if fragment in ln][nth]


# ---------------------------------------------------------------- not PTX text

@pytest.mark.parametrize("given,named", [(None, "got None"), (3, "got int"), (["add"], "got list")])
def test_parse_refuses_what_is_not_text_naming_it(given, named):
    with pytest.raises(ParseError, match=f"ptxforge.parse takes PTX text as a str, {named}"):
        ptxforge.parse(given)


@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_parse_refuses_bytes_and_says_to_decode_them(kind):
    data = kind(kernel("").encode())
    with pytest.raises(ParseError, match=rf"got {kind.__name__}: decode it first, e.g. data.decode\('utf-8'\)"):
        parse(data)
    assert parse(bytes(data).decode("utf-8")).instruction_count() > 0


def test_lint_refuses_what_is_not_text():
    with pytest.raises(ParseError, match="lint takes PTX text as a str, got bytes: decode it first"):
        lint(kernel("").encode())


# ---------------------------------------------------------------- a missing ';'

LACKING = {  # body, the fragment of the line that lacks the ';', the word that starts the next statement
    "before a mnemonic": ("    mov.u64 %rd1, %rd2\n    add.u64 %rd0, %rd1, %rd2;\n", "mov.u64", "add.u64"),
    "before the same mnemonic": ("    add.u64 %rd0, %rd1, %rd2\n    add.u64 %rd3, %rd1, %rd2;\n", "%rd0", "add.u64"),
    "before a guard": ("    setp.eq.u32 %p1, %r1, 0\n    @%p1 bra DONE;\nDONE:\n", "setp", "@%p1"),
    "after no operands": ("    exit\n    add.u64 %rd0, %rd1, %rd2;\n", "exit", "add.u64"),
    "across comments and blank lines": ("    mov.u64 %rd1, %rd2  // copy\n    // a note\n\n    ret;\n", "copy", "ret"),
    "before a directive": ("    mov.u64 %rd1, %rd2\n    .reg .b32 %q<2>;\n", "mov.u64", ".reg"),
}


@pytest.mark.parametrize("case", LACKING, ids=list(LACKING))
def test_a_missing_semicolon_is_named_at_the_line_that_lacks_it(case):
    body, lacking, word = LACKING[case]
    text = kernel(body)
    line = line_of(text, lacking)
    with pytest.raises(ParseError) as info:
        parse(text, filename="k.ptx")
    assert str(info.value).startswith(f"k.ptx:{line}: missing ';' at the end of this line: '{word}' on line "), \
        str(info.value)
    assert info.value.loc.lineno == line
    errors = [f for f in lint(text, filename="k.ptx") if f.severity == "error"]
    assert [(f.line, f.message.split(":")[0]) for f in errors] == [(line, "missing ';' at the end of this line")]


def test_a_missing_semicolon_inside_a_line_is_named_before_the_next_mnemonic():
    text = kernel("    mov.u64 %rd1, %rd2 add.u64 %rd0, %rd1, %rd2;\n")
    with pytest.raises(ParseError, match=f"k.ptx:{line_of(text, 'mov.u64')}: missing ';' before 'add.u64', which "
                                         "starts the next instruction"):
        parse(text, filename="k.ptx")


def test_an_operand_error_of_a_statement_over_several_lines_is_not_taken_for_a_missing_semicolon():
    text = kernel("    add.u64 %rd0,\n        %rd1, %zz;\n")
    with pytest.raises(ParseError, match=f"k.ptx:{line_of(text, 'add.u64')}: %zz is not declared"):
        parse(text, filename="k.ptx")


# ---------------------------------------------------------------- .version older than the target needs

@pytest.mark.parametrize("arch,why", [("sm_90", "for --arch sm_90"), ("sm_90a", "for --arch sm_90a")])
def test_a_version_too_old_for_arch_is_an_error_at_the_version_line(arch, why):
    text = kernel("    add.u64 %rd0, %rd1, %rd2;\n", HEAD.replace(".version 8.0", ".version 7.0"))
    errors = [f for f in lint(text, filename="k.ptx", arch=arch) if f.severity == "error"]
    assert len(errors) == 1, errors
    assert errors[0].line == line_of(text, ".version") != line_of(text, "add.u64")
    assert errors[0].message.startswith(".version 7.0 is older than the ") and why in errors[0].message
