"""PTX that ptxas 13 takes and the reader once refused: integer literals wider than their operand's type,
the `.w` component of the id registers, range registers named with leading zeros in their number, vector
variables, `.alias` and `.reg` parameters of device functions.  Each is read to what ptxas makes of it (checked
against ptxas's SASS and data where ptxas is found), rendered to text that reads back to the same bytes, and
run on the interpreter with the values ptxas gives."""

import re
import struct
import warnings

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.assembler import assemble, available_backends, disassembler
from ptxforge.errors import ValidationError
from ptxforge.errors import TargetError
from ptxforge.parse import IgnoredBodyWarning, NarrowedImmediateWarning, ParseError, parse
from ptxforge.parse.equality import same_module
from ptxforge.parse.lint import lint
from ptxforge.parse.to_python import to_python

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


def test_only_a_literal_that_does_not_fit_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = parse(kernel("    add.u16 %rs1, %rs2, 65535;\n    add.s32 %r1, %r2, -5;\n    add.u16 %rs1, %rs2, 65536;"))
    assert "%rs2, 0xFFFF;" in module.ptx and "%r2, -5;" in module.ptx and "%rs2, 0;" in module.ptx
    assert [str(w.message).split(":")[0] for w in caught] == ["the literal 65536 does not fit .u16"]


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


def test_the_w_component_reads_where_an_unknown_one_stays_an_error():
    assert "%tid.w" in parse(kernel("    mov.u32 %r1, %tid.w;")).ptx
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


def test_leading_zeros_name_the_range_register_of_each_of_two_sibling_scopes():
    body = ("    {\n        .reg .b32 %y<2>;\n        mov.u32 %y01, 1;\n        st.global.u32 [%rd1], %y1;\n    }\n"
            "    {\n        .reg .b32 %y<2>;\n        mov.u32 %y01, 2;\n        st.global.u32 [%rd1+4], %y1;\n    }")
    module = parse(kernel(body))
    round_trips(module)
    assert run_words(module, 2).tolist() == [1, 2]


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
    assert "%y1, 1;" in parse(kernel("    mov.u32 %y01, 1;", regs="    .reg .b32 %y<3>;\n")).ptx  # (what it reads)
    with pytest.raises(ParseError, match=why):
        parse(kernel("    " + use, regs="    " + decl + "\n"))


def test_a_register_declared_alone_with_leading_zeros_keeps_its_name_beside_a_range():
    module = parse(kernel("    mov.u32 %y01, 1;\n    mov.u32 %y1, 2;\n    mov.u32 %y002, 3;\n"
                          "    st.global.u32 [%rd1], %y01;\n    st.global.u32 [%rd1+4], %y2;",
                          regs="    .reg .b32 %y01;\n    .reg .b32 %y<3>;\n"))
    assert "mov.u32         %y01, 1;" in module.ptx and "mov.u32         %y2, 3;" in module.ptx
    assert run_words(module, 2).tolist() == [1, 3]


# ------------------------------------------------------------------ vector variables

VECTORS = """.global .b8 pad0 = 1;
.global .v4 .f32 g = {1.0, 2.0, 3.0, 4.0};
.global .b8 pad1 = 2;
.global .v2 .u16 h[3] = {{5, 6}, {7, 0x10008}};
.const .v2 .b32 c[2] = {{1,2},{3,4}};
.const .v2 .b32 c2[2][2] = {{{1, 2}, {3, 4}}, {{5, 6}}};
.global .v2 .u64 table = {g, h+4};
.global .align 4 .v4 .u32 q = {-1, 0x7fffffff, 017, 0b101};
.global .v2 .f64 d = {1.5, 0d4000000000000000};
.global .v4 .b8 bytes = {1, 2, 3, 255};
"""

VECTOR_BODY = """    .shared .align 16 .v2 .u32 s[8];
    .shared .v2 .u16 s2;
    .local .v4 .f32 l;
    .reg .f32 %f<5>;
    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [g];
    st.local.v4.f32 [l], {%f4, %f3, %f2, %f1};
    ld.local.f32 %f1, [l+4];
    st.global.f32 [%rd1], %f1;
    ld.const.v2.u32 {%r1, %r2}, [c+8];
    st.shared.v2.u32 [s+8], {%r1, %r2};
    ld.shared.u32 %r3, [s+12];
    st.global.u32 [%rd1+4], %r3;
    ld.global.u16 %rs1, [h+6];
    st.global.u16 [%rd1+8], %rs1;
    ld.global.u64 %rd2, [table+8];
    mov.u64 %rd3, h;
    sub.s64 %rd2, %rd2, %rd3;
    st.global.u64 [%rd1+16], %rd2;
    ld.const.u32 %r1, [c2+16];
    st.global.u32 [%rd1+24], %r1;
    mov.u32 %r1, s2;
    mov.u32 %r2, s;
    sub.u32 %r1, %r1, %r2;
    st.global.u32 [%rd1+28], %r1;"""


def vector_text():
    return kernel(VECTOR_BODY, decls=VECTORS)


def test_vector_variables_read_with_their_size_alignment_and_initial_bytes():
    module = parse(vector_text(), filename="v.ptx")
    var = {d.name: d for d in module.declarations if hasattr(d, "vector")}
    assert {n: (v.vector, v.nbytes, v.symbol.align) for n, v in var.items() if v.vector != 1} == {
        "g": (4, 16, 16), "h": (2, 12, 4), "c": (2, 16, 8), "c2": (2, 32, 8), "table": (2, 16, 16),
        "q": (4, 16, 4), "d": (2, 16, 16), "bytes": (4, 4, 4)}
    from ptxforge.declarations import initial_bytes
    assert initial_bytes(var["g"]) == struct.pack("<4f", 1, 2, 3, 4)
    assert initial_bytes(var["h"]) == struct.pack("<6H", 5, 6, 7, 8, 0, 0)
    assert initial_bytes(var["c2"]) == struct.pack("<8I", 1, 2, 3, 4, 5, 6, 0, 0)
    assert initial_bytes(var["q"]) == struct.pack("<4I", 0xFFFFFFFF, 0x7FFFFFFF, 15, 5)
    assert initial_bytes(var["d"]) == struct.pack("<2d", 1.5, 2.0)
    k = module.kernel("k")
    assert [(s.name, s.nbytes, s.align) for s in k.shared] == [("s", 64, 16), ("s2", 4, 4)]
    assert [(v.name, v.nbytes, v.symbol.align) for v in k.variables] == [("l", 16, 16)]
    round_trips(module)


def test_vector_variables_run_on_the_interpreter_with_their_initial_values():
    module = parse(vector_text())
    out = np.zeros(8, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    f = out.view(np.float32)
    assert f[0] == 3.0  # g reversed into l: l[1] is g[2]
    assert out[1] == 4  # c[1] through shared memory
    assert out[2] & 0xFFFF == 8  # h[1].y: 0x10008 keeps its low 16 bits
    assert int(out[4]) | int(out[5]) << 32 == 4  # table[1] holds h+4
    assert out[6] == 5  # c2[1][0].x
    assert out[7] >= 64 and out[7] % 4 == 0  # s2 lies past the 64 bytes of s, aligned to its 4


@pytest.mark.parametrize("decl,why", [
    (".global .v4 .f32 g = {1.0, 2.0};", r"a .v4 value is a \{ \} list of 4 values"),
    (".global .v4 .f32 g = 1.0;", r"a .v4 value is a \{ \} list of 4 values"),
    (".global .v2 .f32 g[2] = {1.0, 2.0, 3.0, 4.0};", r"4 values for 2 elements"),
    (".global .v2 .f32 g[2] = {{1.0}, {3.0, 4.0}};", r"a .v2 value is a \{ \} list of 2 values"),
    (".global .v3 .f32 g;", r"a vector variable is .v2 or .v4"),
    (".global .v4 .f64 g;", r"256 bits: a vector has at most 128"),
    (".global .v2 .pred g;", r"a .pred variable is a scalar register"),
    (".global .v4 .align 16 .f32 g;", r"followed by the element type"),
    (".global .v2 .v2 .u32 g;", r"followed by the element type"),
    (".global .v2 .f32 g = {0f3F800000, 1};", r"'1' is not a float literal"),
])
def test_vector_declarations_ptxas_refuses_are_errors_at_their_line(decl, why):
    text = kernel("", decls=decl + "\n")
    with pytest.raises(ParseError, match=rf"v.ptx:4: .*{why}"):
        parse(text, filename="v.ptx")
    if "ptxas" in available_backends():  # and ptxas refuses each
        with pytest.raises(Exception):
            assemble(text, backend="ptxas")


def _elf_symbols(cubin: bytes) -> dict:
    """name -> the bytes a cubin's data symbol holds (initialized sections only)."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    out = {}
    for sec in sections:
        if sec[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sec[6]]
        for j in range(sec[5] // sec[9]):
            name_at, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", cubin, sec[4] + j * sec[9])
            if info & 0xF != 1 or shndx >= len(sections) or sections[shndx][1] != 1:  # data objects in PROGBITS
                continue
            end = cubin.index(b"\0", strtab[4] + name_at)
            name = cubin[strtab[4] + name_at:end].decode()
            start = sections[shndx][4] + value
            out[name] = cubin[start:start + size]
    return out


@needs_ptxas
def test_vector_variables_hold_the_bytes_ptxas_gives_them():
    from ptxforge.declarations import initial_bytes
    text = vector_text()
    module = parse(text)
    given = _elf_symbols(assemble(text, backend="ptxas").cubin)
    rendered = _elf_symbols(assemble(module.ptx, backend="ptxas").cubin)
    # (table holds addresses: relocations the loader fills in)
    names = [d.name for d in module.declarations if getattr(d, "vector", 1) != 1 and d.name != "table"]
    assert names and all(given[n] == rendered[n] for n in names)
    assert {n: initial_bytes(d) for d in module.declarations if (n := d.name) in names} == {n: given[n] for n in names}


@needs_sass
def test_vector_variables_assemble_as_the_input():
    text = vector_text()
    same_sass(text, parse(text))


def _rebuilt(module):
    """The module the `to_python` script of `module` builds."""
    space: dict = {}
    exec(compile(to_python(module), "<to-python>", "exec"), space)
    return space["build"]()


def test_to_python_restates_module_vector_variables_and_refuses_a_local_vector_by_name():
    module = parse(kernel("    ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [g];\n    st.global.f32 [%rd1], %f4;",
                          decls=VECTORS, regs="    .reg .f32 %f<5>;\n"))
    assert _rebuilt(module).ptx == module.ptx
    with pytest.raises(ValidationError, match=r"\.local \.v4 \.f32 l; in k has no builder call(.|\n)*at v.ptx:\d+"):
        to_python(parse(vector_text(), filename="v.ptx"))


# ------------------------------------------------------------------ .alias

F_DEF = """.visible .func (.param .b32 r) f(.param .b32 a)
{
    .reg .b32 %t;
    ld.param.b32 %t, [a];
    add.s32 %t, %t, 1;
    st.param.b32 [r], %t;
    ret;
}
"""
G_PROTO = ".visible .func (.param .b32 r) g(.param .b32 b);\n"
ALIASES = F_DEF + G_PROTO + ".alias g, f;\n.func (.param .b32 r) h(.param .b32 c);\n.alias h, g;\n"
CALLS = """    ld.global.u32 %r1, [%rd1];
    {
        .param .b32 x;
        .param .b32 y;
        st.param.b32 [x], %r1;
        call (y), g, (x);
        ld.param.b32 %r2, [y];
    }
    {
        .param .b32 x;
        .param .b32 y;
        st.param.b32 [x], %r2;
        call (y), h, (x);
        ld.param.b32 %r3, [y];
    }
    st.global.u32 [%rd1+4], %r3;"""


def test_an_alias_reads_renders_and_calls_its_function_on_the_interpreter():
    text = kernel(CALLS, decls=ALIASES)
    module = parse(text, filename="a.ptx")
    aliases = [d for d in module.declarations if type(d).__name__ == "Alias"]
    assert [(a.name, a.target, a.loc.lineno) for a in aliases] == [
        ("g", "f", line_of(text, ".alias g, f;")), ("h", "g", line_of(text, ".alias h, g;"))]
    text = module.ptx
    # the rendering declares f before the .alias that names it (its definition follows the declarations)
    assert text.index(".visible .func (.param .b32 r) f(.param .b32 a);") < text.index(".alias g, f;")
    round_trips(module)
    out = np.array([40, 0], np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert out.tolist() == [40, 42]


def test_an_alias_and_its_function_have_one_address_on_the_interpreter():
    body = ("    mov.u64 %rd2, g;\n    mov.u64 %rd3, f;\n    setp.eq.u64 %p1, %rd2, %rd3;\n"
            "    selp.u32 %r1, 1, 0, %p1;\n    st.global.u32 [%rd1], %r1;\n    ld.global.u64 %rd2, [tbl];\n"
            "    setp.eq.u64 %p1, %rd2, %rd3;\n    selp.u32 %r1, 1, 0, %p1;\n    st.global.u32 [%rd1+4], %r1;")
    module = parse(kernel(body, decls=ALIASES + ".global .u64 tbl = h;\n"))
    assert run_words(module, 2).tolist() == [1, 1]


@needs_sass
def test_an_alias_assembles_as_the_input():
    text = kernel(CALLS, decls=ALIASES)
    same_sass(text, parse(text))


@pytest.mark.parametrize("decls,why", [
    (F_DEF + ".alias g, f;\n", r"g is not declared before the .alias"),
    (G_PROTO + ".alias g, f;\n" + F_DEF, r"f is not declared before the .alias"),
    (F_DEF.replace(".visible", ".weak") + G_PROTO + ".alias g, f;\n", r"f is .weak"),
    (".extern .func (.param .b32 r) f(.param .b32 a);\n" + G_PROTO + ".alias g, f;\n", r"f is .extern"),
    (F_DEF + F_DEF.replace(" f(", " g(") + ".alias g, f;\n", r"g is defined at line \d+: an alias is a prototype"),
    (F_DEF + G_PROTO + ".alias g, f;\n.alias g, f;\n", r"g is already an alias of f"),
    (F_DEF + ".global .b32 g;\n.alias g, f;\n", r"g is a variable"),
    (F_DEF + G_PROTO.replace(".param .b32 b", ".param .u32 b") + ".alias g, f;\n", r"the prototype of g .* differ"),
    (F_DEF + G_PROTO.replace(";", " .noreturn;") + ".alias g, f;\n", r"the prototype of g .* differ"),
    (F_DEF + ".visible .func g(.param .b32 b);\n.alias g, f;\n", r"the prototype of g .* differ"),
    (F_DEF + G_PROTO + ".alias g;\n", r".alias takes two function names"),
    (F_DEF + G_PROTO + ".alias g, k;\n", r"k is not declared before the .alias"),
    (".visible .func (.param .b32 r) f(.param .b32 a);\n" + G_PROTO + ".alias g, f;\n",
     r"f, which g aliases, is never defined"),
])
def test_what_ptxas_refuses_of_an_alias_is_an_error_at_its_line(decls, why):
    text = kernel("", decls=decls)
    with pytest.raises(ParseError, match=why):
        parse(text, filename="a.ptx")
    if "ptxas" in available_backends():
        with pytest.raises(Exception):
            assemble(text, backend="ptxas")


def test_an_alias_needs_ptx_isa_6_3():
    text = (HEAD.replace(".version 8.0", ".version 6.2") + ".visible .func (.param .b32 r) f(.param .b32 a);\n"
            + G_PROTO + ".alias g, f;\n" + F_DEF)
    with pytest.raises(TargetError, match=rf"a.ptx:{line_of(text, '.alias')}: '.alias' needs PTX ISA 6.3"):
        parse(text, filename="a.ptx")


def test_a_body_defined_for_an_alias_is_left_out_with_a_warning_as_ptxas_ignores_it():
    body = F_DEF.replace(" f(", " g(").replace("add.s32 %t, %t, 1;", "mul.lo.s32 %t, %t, 3;")
    text = kernel(CALLS.replace("call (y), h,", "call (y), g,"), decls=F_DEF + G_PROTO + ".alias g, f;\n" + body)
    with pytest.warns(IgnoredBodyWarning, match="ptxas ignores this body") as caught:
        module = parse(text, filename="a.ptx")
    assert [w.lineno for w in caught if w.category is IgnoredBodyWarning] == [line_of(text, " g(.param .b32 a)")]
    assert "mul.lo" not in module.ptx
    out = np.array([40, 0], np.uint32)
    with pytest.warns(IgnoredBodyWarning):
        interp.run(parse(text), "k", grid=1, block=1, args=[out])
    assert out.tolist() == [40, 42]  # f twice, as ptxas assembles it
    if "ptxas" in available_backends() and disassembler() is not None:
        with pytest.warns(IgnoredBodyWarning):
            same_sass(text, parse(text))


def test_to_python_refuses_an_alias_by_name():
    with pytest.raises(ValidationError, match=r"\.alias g, f; has no builder call"):
        to_python(parse(kernel(CALLS, decls=ALIASES)))


# ------------------------------------------------------------------ .reg parameters

REG_FUNCS = """.func (.reg .b32 r) f(.reg .b32 a, .param .b32 b)
{
    .reg .b32 %t;
    ld.param.b32 %t, [b];
    add.s32 r, a, %t;
    ret;
}
.func (.reg .b32 %q, .reg .b64 %w) g(.reg .u32 %a, .reg .f32 %x)
{
    .reg .pred %p;
    setp.gt.f32 %p, %x, 0f00000000;
    mul.wide.u32 %w, %a, 3;
    mov.b32 %q, %x;
    @%p ret;
    mov.u32 %q, 0;
    ret;
}
"""
REG_CALLS = """    ld.global.u32 %r1, [%rd1];
    {
        .param .b32 x;
        st.param.b32 [x], 100;
        call (%r2), f, (%r1, x);
    }
    {
        .param .b32 x;
        st.param.b32 [x], %r2;
        call.uni (%r3), f, (7, x);
    }
    mov.b32 %f1, 0f3FC00000;
    call (%r4, %rd2), g, (%r3, %f1);
    neg.f32 %f1, %f1;
    setp.ne.u32 %p1, %r1, 5;
    @%p1 call (%r5, %rd3), g, (%r3, %f1);
    @!%p1 call (%r5, %rd3), g, (0xFFFFFFFF, %f1);
    st.global.u32 [%rd1+4], %r2;
    st.global.u32 [%rd1+8], %r3;
    st.global.u32 [%rd1+12], %r4;
    st.global.u64 [%rd1+16], %rd2;
    st.global.u32 [%rd1+24], %r5;
    st.global.u64 [%rd1+32], %rd3;"""


def reg_text():
    return kernel(REG_CALLS, decls=REG_FUNCS, regs="    .reg .f32 %f<3>;\n")


def test_reg_parameters_read_render_and_run_with_the_values_of_the_reg_form():
    module = parse(reg_text(), filename="r.ptx")
    f = next(k for k in module.kernels if k.name == "f")
    assert [p.render() for p in f.params] == [".reg .b32 %a", ".param .b32 b"]
    assert [p.render() for p in f.returns] == [".reg .b32 %r"]
    assert {r.name for r in f.registers} == {"t"}  # the header declares a and r
    text = module.ptx
    assert ".func (.reg .b32 %r) f(" in text and "call            (%r4, %rd2), g, (%r3, %f1);" in text
    round_trips(module)
    out = np.zeros(10, np.uint32)
    out[0] = 5
    interp.run(module, "k", grid=1, block=1, args=[out])
    # f: a + b; g: (bits of x if x > 0 else 0, a * 3 wide); with %r1 = 5 the guarded call passes 0xFFFFFFFF
    assert out[1:4].tolist() == [105, 112, 0x3FC00000]
    assert int(out[4]) | int(out[5]) << 32 == 112 * 3
    assert out[6] == 0 and int(out[8]) | int(out[9]) << 32 == 0xFFFFFFFF * 3


@needs_sass
def test_reg_parameters_assemble_as_the_input():
    text = reg_text()
    same_sass(text, parse(text))


@pytest.mark.parametrize("decls,body,why", [
    (".func f(.reg .pred a) { ret; }\n", "    call f, (%p1);", r"ptxas passes no .pred parameter"),
    (".func f(.reg .b32 a, .reg .b32 a) { ret; }\n", "", r"declared twice in the header of f"),
    (".func f(.reg .b32 a) { .reg .b32 a; ret; }\n", "", r"a is already declared"),
    (".func f(.reg .b32 a) { ret; }\n", "    call f, (%rd1);", r"call argument %rd1 \(.b64\) does not match"),
])
def test_what_ptxas_refuses_of_reg_parameters_is_an_error(decls, body, why):
    text = kernel(body, decls=decls)
    with pytest.raises(ParseError, match=why):
        parse(text)
    if "ptxas" in available_backends():
        with pytest.raises(Exception):
            assemble(text, backend="ptxas")


def test_an_immediate_argument_wider_than_its_reg_parameter_keeps_its_low_bits_with_a_warning():
    text = kernel("    call (%rs1), f, (70000);\n    st.global.u16 [%rd1], %rs1;",
                  decls=".func (.reg .b16 r) f(.reg .b16 a) { mov.b16 r, a; ret; }\n")
    with pytest.warns(NarrowedImmediateWarning, match="70000 does not fit .b16") as caught:
        module = parse(text, filename="r.ptx")
    assert [w.lineno for w in caught] == [line_of(text, "70000")]
    assert "call            (%rs1), f, (0x1170);" in module.ptx
    out = np.zeros(1, np.uint16)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert out.tolist() == [70000 % 65536]
    if "ptxas" in available_backends() and disassembler() is not None:
        same_sass(text, module)


def test_a_vector_reg_parameter_is_refused_by_name():
    with pytest.raises(ParseError, match=r"a .reg parameter is `.reg .type name` \(a scalar"):
        parse(kernel("", decls=".func f(.reg .v2 .b32 a) { ret; }\n"))


def test_a_kernel_takes_no_reg_parameter():
    with pytest.raises(ParseError, match=r"kernel parameter a is .reg"):
        parse(HEAD + ".visible .entry k(.reg .b32 a) { ret; }\n")


def test_an_indirect_call_through_a_reg_prototype_runs_the_function():
    body = """    ld.global.u32 %r1, [%rd1];
    mov.u64 %rd2, f;
    {
        proto: .callprototype (.reg .b32 _) _ (.reg .b32 _);
        call (%r2), %rd2, (%r1), proto;
    }
    st.global.u32 [%rd1+4], %r2;"""
    text = kernel(body, decls=".func (.reg .b32 r) f(.reg .b32 a) { add.s32 r, a, 1; ret; }\n")
    module = parse(text)
    round_trips(module)
    out = np.array([41, 0], np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert out.tolist() == [41, 42]
    if "ptxas" in available_backends() and disassembler() is not None:
        same_sass(text, module)


def test_to_python_refuses_a_reg_parameter_by_name():
    with pytest.raises(ValidationError, match=r"f has the .reg parameter .reg .b32 %a, which has no builder call"):
        to_python(parse(reg_text()))


# ------------------------------------------------------------------ SymbolOffset in the property tests' strategies

@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_strategies_draw_symbol_offsets_and_they_read_back(target):
    from hypothesis import given, settings
    from ptxforge.isa.operands import SymbolOffset
    from ptxforge.testing import strategies as pst
    rows = [s for s in pst.legal_candidates(target, "control") if s.op == "sym_offset"]
    module = pst.build_module(target, [s.with_params(offset=o) for s in rows for o in (0, -16, 4095)])
    found = [op for k in module.kernels for i in k.instructions for op in i.operands if isinstance(op, SymbolOffset)]
    assert {op.offset for op in found} == {0, -16, 4095} and len(found) == 3 * len(rows)
    round_trips(module)

    @settings(max_examples=25, deadline=None)
    @given(pst.instruction_specs(target, ("control",), ops=("sym_offset",)))
    def drawn(s):
        m = pst.build_module(target, [s])
        assert any(isinstance(op, SymbolOffset) for k in m.kernels for i in k.instructions for op in i.operands)
        round_trips(m)
    drawn()
