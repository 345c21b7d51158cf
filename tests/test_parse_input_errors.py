"""What the PTX reader and lint say about input they cannot take: something that is not PTX text."""

import pytest

import ptxforge
from ptxforge.parse import ParseError, parse
from ptxforge.parse.lint import lint

HEAD = "// a header comment\n// and another\n.version 8.0\n.target sm_80\n.address_size 64\n"


def kernel(body: str, head: str = HEAD) -> str:
    return (head + "\n.visible .entry k(.param .u64 p)\n{\n    .reg .pred %p<4>;\n    .reg .b32 %r<8>;\n"
            "    .reg .b64 %rd<4>;\n" + body + "    ret;\n}\n")


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
