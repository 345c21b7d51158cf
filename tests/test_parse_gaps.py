"""PTX that ptxas 13 takes and the reader once refused: integer literals wider than their operand's type,
the `.w` component of the id registers, range registers named with leading zeros in their number, vector
variables, `.alias` and `.reg` parameters of device functions.  Each is read to what ptxas makes of it (checked
against ptxas's SASS and data where ptxas is found), rendered to text that reads back to the same bytes, and
run on the interpreter with the values ptxas gives."""

import re
import warnings

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.assembler import assemble, available_backends, disassembler
from ptxforge.parse import NarrowedImmediateWarning, ParseError, parse, read
from ptxforge.parse.equality import same_module
from ptxforge.parse.lint import lint

HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"

needs_ptxas = pytest.mark.skipif("ptxas" not in available_backends(), reason="needs ptxas")
needs_sass = pytest.mark.skipif("ptxas" not in available_backends() or disassembler() is None,
                                reason="needs ptxas and a disassembler")


def kernel(body: str, decls: str = "", regs: str = "") -> str:
    """A module whose kernel `k(out)` runs `body` with `%rd1` holding `out` (a global address)."""
    return (HEAD + decls + "\n.visible .entry k(.param .u64 out)\n{\n"
            "    .reg .b64 %rd<4>;\n    .reg .b32 %r<8>;\n    .reg .b16 %rs<4>;\n    .reg .pred %p<3>;\n" + regs
            + "    ld.param.u64 %rd1, [out];\n    cvta.to.global.u64 %rd1, %rd1;\n" + body + "\n    ret;\n}\n")


def round_trips(module):
    """The rendering reads back to the same module and the same bytes."""
    again = parse(module.ptx, filename="again.ptx")
    assert again.ptx == module.ptx
    assert same_module(module, again)


def sass_body(text: str) -> list:
    """The SASS instructions ptxas makes of `text` (addresses and encodings dropped)."""
    return [m.group(1) for m in _SASS_LINE.finditer(assemble(text, backend="ptxas").sass())]


_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;?\s*$", re.M)


def same_sass(text: str, module):
    """ptxas gives the input and the module's rendering the same SASS."""
    a, b = sass_body(text), sass_body(module.ptx)
    assert a and a == b


def line_of(text: str, piece: str) -> int:
    """The number of the line of `text` that holds `piece`."""
    return next(i for i, x in enumerate(text.splitlines(), 1) if piece in x)


def run_words(module, n: int, dtype=np.uint32, grid=1, block=1):
    out = np.zeros(n, dtype)
    interp.run(module, "k", grid=grid, block=block, args=[out])
    return out


# ------------------------------------------------------------------ integer literals wider than their type

WIDE = [
    # (line, the value the destination holds with %rs2 = 5 / %r2 = 5 loaded, dtype stored)
    ("add.u16 %rs1, %rs2, 70000;", "st.global.u16 [%rd1], %rs1;", (5 + 70000) % 65536),
    ("add.u16 %rs1, %rs2, -70000;", "st.global.u16 [%rd1], %rs1;", (5 - 70000) % 65536),
    ("add.s16 %rs1, %rs2, -40000;", "st.global.u16 [%rd1], %rs1;", (5 - 40000) % 65536),
    ("mov.u32 %r1, 0x1FFFFFFFF;", "st.global.u32 [%rd1], %r1;", 0xFFFFFFFF),
    ("shl.b32 %r1, %r2, 0x100000002;", "st.global.u32 [%rd1], %r1;", 5 << 2),
    ("mul.wide.u16 %r1, %rs2, 70000;", "st.global.u32 [%rd1], %r1;", 5 * (70000 % 65536)),
    ("and.b16 %rs1, %rs2, 0x10004;", "st.global.u16 [%rd1], %rs1;", 5 & 4),
]


def wide_text(line, store):
    return kernel("    ld.global.u32 %r2, [%rd1+8];\n    ld.global.u16 %rs2, [%rd1+12];\n    " + line + "\n    " + store)


@pytest.mark.parametrize("line,store,want", WIDE)
def test_a_literal_wider_than_its_type_keeps_its_low_bits_with_a_warning_at_its_line(line, store, want):
    text = wide_text(line, store)
    with pytest.warns(NarrowedImmediateWarning, match="does not fit") as caught:
        module = parse(text, filename="w.ptx")
    at = line_of(text, line)
    assert {(w.filename, w.lineno) for w in caught if w.category is NarrowedImmediateWarning} == {("w.ptx", at)}
    assert [f.line for f in lint(text, filename="w.ptx") if f.severity == "warning" and "does not fit" in
            f.message] == [at]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rendering holds the value kept: it reads back without a warning
        round_trips(module)
    out = np.zeros(4, np.uint32)
    out[2:] = 5
    interp.run(module, "k", grid=1, block=1, args=[out])
    got = int(out[0]) & (0xFFFF if "u16" in store else 0xFFFFFFFF)
    assert got == want


@needs_sass
@pytest.mark.parametrize("line,store,want", WIDE)
def test_a_narrowed_literal_assembles_as_ptxas_assembles_the_input(line, store, want):
    text = wide_text(line, store)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NarrowedImmediateWarning)
        module = parse(text)
    same_sass(text, module)


def test_a_literal_beyond_64_bits_stays_an_error_naming_its_line():
    text = kernel("    mov.u64 %rd2, 18446744073709551616;")
    with pytest.raises(ParseError, match=rf"k.ptx:{line_of(text, '18446744073709551616')}: .*nor 64 bits"):
        parse(text, filename="k.ptx")


def test_a_literal_that_fits_reads_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = parse(kernel("    add.u16 %rs1, %rs2, 65535;\n    add.s32 %r1, %r2, -5;"))
    assert "%rs2, 0xFFFF;" in module.ptx and "%r2, -5;" in module.ptx


# ------------------------------------------------------------------ %tid.w and the other .w components

W_REGISTERS = ["tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"]


def w_text():
    body = "".join(f"    mov.u32 %r1, %{n}.w;\n    st.global.u32 [%rd1+{4 * i}], %r1;\n"
                   for i, n in enumerate(W_REGISTERS))
    return kernel(body)


def test_the_w_component_of_the_id_registers_reads_and_is_zero_on_the_interpreter():
    module = parse(w_text())
    round_trips(module)
    out = np.full(len(W_REGISTERS) * 4, 0xAB, np.uint32)
    interp.run(module, "k", grid=(2, 1, 1), block=(3, 1, 1), args=[out])
    assert out[:len(W_REGISTERS)].tolist() == [0] * len(W_REGISTERS)


@needs_sass
def test_ptxas_reads_the_w_components_as_zero():
    text = w_text()
    sass = sass_body(text)
    stores = [x for x in sass if x.startswith("STG")]
    assert len(stores) == len(W_REGISTERS) and all(x.rstrip(" ;").endswith("RZ") for x in stores)
    same_sass(text, parse(text))


def test_an_unknown_component_stays_an_error():
    with pytest.raises(ParseError, match=r"%tid.q is not declared"):
        parse(kernel("    mov.u32 %r1, %tid.q;"))


# ------------------------------------------------------------------ %y01: a range register with leading zeros

NUMBERED = """    .reg .b32 %y<12>;
    mov.u32 %y1, 7;
    mov.u32 %y01, 9;
    mov.u32 %y010, 11;
    mov.u32 %y0000000002, 13;
    {
        .reg .b32 %y<2>;
        mov.u32 %y00, 3;
        mov.u32 %y02, 15;
        st.global.u32 [%rd1+16], %y0;
    }
    {
        .reg .b32 %y1;
        mov.u32 %y1, 1;
        add.u32 %y001, %y01, 4;
    }
    st.global.u32 [%rd1], %y1;
    st.global.u32 [%rd1+4], %y10;
    st.global.u32 [%rd1+8], %y2;"""


def test_a_range_register_named_with_leading_zeros_is_that_register():
    module = parse(kernel(NUMBERED), filename="y.ptx")
    text = module.ptx
    assert "%y01" not in text and "%y00" not in text
    round_trips(module)
    out = run_words(module, 5)
    # %y01 is %y1 (9, then 9 + 4 through the outer range, as the inner %y1 is no range); %y010 is %y10;
    # %y02 in the inner scope is the outer %y2 (the inner range has 2 registers); %y00 there is the inner %y0
    assert out.tolist() == [13, 11, 15, 0, 3]


@needs_sass
def test_a_range_register_named_with_leading_zeros_assembles_as_ptxas_reads_it():
    text = kernel(NUMBERED)
    same_sass(text, parse(text))


@pytest.mark.parametrize("decl,use,why", [
    (".reg .b32 %y1;", "mov.u32 %y01, 1;", r"%y01 is not declared"),  # no range: ptxas 'Unknown symbol'
    (".reg .b32 %y<3>;", "mov.u32 %y03, 1;", r"%y03 is not declared"),  # past the range
    (".reg .b32 %y<3>;\n    .reg .b32 %y01;", "", r"%y01 names %y1 of a range"),  # ptxas: duplicate definition
])
def test_what_ptxas_refuses_of_leading_zeros_stays_an_error(decl, use, why):
    with pytest.raises(ParseError, match=why):
        parse(kernel("    " + use, regs="    " + decl + "\n"))


def test_a_register_declared_alone_with_leading_zeros_keeps_its_name():
    module = parse(kernel("    mov.u32 %y01, 1;\n    mov.u32 %y1, 2;\n    st.global.u32 [%rd1], %y01;",
                          regs="    .reg .b32 %y01;\n    .reg .b32 %y<3>;\n"))
    assert "mov.u32         %y01, 1;" in module.ptx
    assert run_words(module, 1).tolist() == [1]
