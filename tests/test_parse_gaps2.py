"""PTX where the reader or its rendering once disagreed with ptxas 13: a function-pointer table initialized
with functions defined before it (rendered before them, which ptxas refuses), register ranges whose name ends
in a digit (whose registers no operand can name in ptxas), and vector `.reg` parameters of device functions
(which ptxas passes only in vector registers, and the reader refuses by name).  Each case is held to what
ptxas does with the same text where ptxas is found."""

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.assembler import assemble, available_backends, disassembler
from ptxforge.errors import AssemblyError
from ptxforge.parse import ParseError, parse

from test_parse_gaps import HEAD, line_of, needs_ptxas, needs_sass, round_trips, sass_body


def ptxas_takes(text: str) -> bool:
    """Whether ptxas assembles `text`."""
    try:
        assemble(text, backend="ptxas")
    except AssemblyError:
        return False
    return True


# ------------------------------------------------------------------ function-pointer tables

FUNCS = """{link}.func (.param .b32 r) f(.param .b32 a)
{{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    add.s32 %r2, %r1, 1;
    st.param.b32 [r], %r2;
    ret;
}}

.func (.param .b32 r) g(.param .b32 a)
{{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [a];
    mul.lo.s32 %r2, %r1, 3;
    st.param.b32 [r], %r2;
    ret;
}}

.func h(.param .b32 a) .noreturn
{{
    trap;
}}
"""

TABLES = """.global .align 8 .u64 tbl[2] = {{f, g}};
.const .align 8 .u64 ctbl[3] = {{0, g, f}};
.global .align 8 .u64 fatal = h;
"""

CALLER = """
.visible .entry k(.param .u64 out, .param .u32 which)
{
    .reg .b32 %r<5>;
    .reg .pred %p<2>;
    .reg .b64 %rd<9>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [which];
    mul.wide.u32 %rd2, %r1, 8;
    mov.u64 %rd3, tbl;
    add.s64 %rd4, %rd3, %rd2;
    ld.global.u64 %rd5, [%rd4];
    mov.u64 %rd6, ctbl;
    add.s64 %rd6, %rd6, 8;
    add.s64 %rd6, %rd6, %rd2;
    ld.const.u64 %rd7, [%rd6];
{calls}    st.global.u32 [%rd1], %r2;
    st.global.u32 [%rd1+4], %r3;
    ld.global.u64 %rd8, [fatal];
    mov.u64 %rd5, h;
    setp.eq.u64 %p1, %rd8, %rd5;
    selp.u32 %r4, 1, 0, %p1;
    st.global.u32 [%rd1+8], %r4;
    ret;
}
"""




def indirect_call(arg: int, pointer: str, proto: str, result: str) -> str:
    """A call scope calling the function at address `pointer` with `arg`, its value into `result`."""
    return (f"    {{\n    .param .b32 p0;\n    .param .b32 r0;\n    st.param.b32 [p0], {arg};\n"
            f"    {proto}: .callprototype (.param .b32 _) _ (.param .b32 _);\n    call (r0), {pointer}, (p0), {proto};\n"
            f"    ld.param.b32 {result}, [r0];\n    }}\n")


CALLER = CALLER.replace("{calls}", indirect_call(5, "%rd5", "proto", "%r2") + indirect_call(7, "%rd7", "proto2", "%r3"))


def table_text(link: str = "", tables: str = TABLES) -> str:
    """Functions f, g, h defined first, then tables of their addresses, then a kernel calling through them."""
    return HEAD + "\n" + FUNCS.format(link=link) + "\n" + tables.format() + CALLER


@pytest.mark.parametrize("link", ["", ".visible ", ".weak "])
def test_a_table_of_functions_defined_before_it_renders_their_prototypes_first(link):
    module = parse(table_text(link), filename="t.ptx")
    lines = module.ptx.splitlines()
    for name, proto, user in (("f", f"{link}.func (.param .b32 r) f(.param .b32 a);", ".u64 tbl[2]"),
                              ("g", ".func (.param .b32 r) g(.param .b32 a);", ".u64 tbl[2]"),
                              ("h", ".func h(.param .b32 a) .noreturn;", ".u64 fatal")):
        assert lines.count(proto) == 1, name  # one prototype, however many tables name it
        assert lines.index(proto) < next(i for i, x in enumerate(lines) if user in x), name
    round_trips(module)


def test_a_table_of_functions_defined_before_it_runs_on_the_interpreter():
    module = parse(table_text(), filename="t.ptx")
    for which, want in ((0, [6, 21, 1]), (1, [15, 8, 1])):
        out = np.zeros(3, np.uint32)
        interp.run(module, "k", grid=1, block=1, args=[out, np.uint32(which)])
        assert out.tolist() == want


@needs_sass
@pytest.mark.parametrize("link", ["", ".visible "])
def test_a_table_of_functions_defined_before_it_assembles_as_the_input(link):
    text = table_text(link)
    module = parse(text)
    a, b = sass_body(text), sass_body(module.ptx)
    assert a and a == b


def test_a_function_declared_before_its_table_gets_no_second_prototype():
    # nvcc's form: prototypes, the tables, then the definitions
    protos = (".func (.param .b32 r) f(.param .b32 a);\n.func (.param .b32 r) g(.param .b32 a);\n"
              ".func h(.param .b32 a) .noreturn;\n")
    text = HEAD + protos + TABLES.format() + "\n" + FUNCS.format(link="") + CALLER
    module = parse(text)
    assert module.ptx.count(".func (.param .b32 r) f(.param .b32 a);") == 1
    round_trips(module)


def test_an_alias_target_named_by_a_table_is_declared_once():
    text = (".version 8.0\n.target sm_90\n.address_size 64\n" + FUNCS.format(link="")
            + ".func (.param .b32 r) f2(.param .b32 a);\n.alias f2, f;\n"
            + ".global .align 8 .u64 tbl[2] = {f, f2};\n.const .align 8 .u64 ctbl[3] = {0, g, f};\n"
            + ".global .align 8 .u64 fatal = h;\n"
            + CALLER)
    module = parse(text)
    assert module.ptx.count(".func (.param .b32 r) f(.param .b32 a);") == 1
    round_trips(module)
    out = np.zeros(3, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out, np.uint32(1)])
    assert out.tolist() == [6, 8, 1]


@needs_ptxas
def test_ptxas_refuses_a_table_before_the_functions_it_names_with_no_prototype():
    # what the rendering must avoid: the table's symbols are declared before it
    text = HEAD + TABLES.format() + FUNCS.format(link="")
    assert not ptxas_takes(text)
    assert ptxas_takes(HEAD + FUNCS.format(link="") + TABLES.format())


# ------------------------------------------------------------------ ranges whose name ends in a digit

def reg_kernel(regs: str, body: str) -> str:
    """A kernel k(out) declaring `regs` and running `body` with %rd1 = out (a global address)."""
    return (HEAD + "\n.visible .entry k(.param .u64 out)\n{\n    .reg .b64 %rd<3>;\n" + regs
            + "    ld.param.u64 %rd1, [out];\n    cvta.to.global.u64 %rd1, %rd1;\n" + body + "    ret;\n}\n")


# (registers declared, body, whether ptxas 13 takes it)
RANGE_CASES = [
    # a range whose name ends in a digit declares registers no operand names: ptxas reads the digits ending
    # %y10 as the number of a range %y<N> ('Unknown symbol')
    ("    .reg .b32 %y1<3>;\n", "    mov.u32 %y10, 1;\n", False),
    ("    .reg .b32 %y1<3>;\n", "    mov.u32 %y12, 1;\n", False),
    ("    .reg .b32 %y1<3>;\n", "    mov.u32 %y1, 1;\n", False),
    ("    .reg .b32 %y1<3>;\n", "", True),  # the declaration alone is legal
    ("    .reg .b32 %y1<3>;\n    .reg .b32 %y10;\n", "    mov.u32 %y10, 1;\n    st.global.u32 [%rd1], %y10;\n",
     True),
    ("    .reg .b32 %y1<3>;\n    .reg .b32 %y1<3>;\n", "", False),  # 'Duplicate definition of variable %y1<'
    ("    .reg .b32 %y1<3>, %y1<5>;\n", "", False),
    ("    .reg .b32 %y1_<3>;\n", "    mov.u32 %y1_2, 1;\n    st.global.u32 [%rd1], %y1_2;\n", True),
    # %r<10> and %r1<3>: %r1 is %r<10>'s, %r12 is nobody's
    ("    .reg .b32 %r<10>;\n    .reg .b32 %r1<3>;\n", "    mov.u32 %r1, 1;\n    st.global.u32 [%rd1], %r1;\n", True),
    ("    .reg .b32 %r<10>;\n    .reg .b32 %r1<3>;\n", "    mov.u32 %r12, 1;\n", False),
    ("    .reg .b32 %r1<3>;\n    .reg .b32 %r<20>;\n",
     "    mov.u32 %r12, 1;\n    st.global.u32 [%rd1], %r12;\n", True),
    # a plain register beside a range: a number the range covers is a duplicate, another is not
    ("    .reg .b32 %r<3>;\n    .reg .b32 %r1;\n", "", False),
    ("    .reg .b32 %r1;\n    .reg .b32 %r<3>;\n", "", False),
    ("    .reg .b32 %r<3>;\n    .reg .b32 %r3;\n", "    mov.u32 %r3, 1;\n    st.global.u32 [%rd1], %r3;\n", True),
    ("    .reg .b32 %r<3>;\n    .reg .b32 %r<5>;\n", "", False),
    ("    .reg .b32 %r<0>;\n    .reg .b32 %r<0>;\n", "", False),
    # a { } scope may declare the same range again, and it hides the outer one
    ("    .reg .b32 %y1<3>;\n", "    {\n    .reg .b32 %y1<3>;\n    }\n", True),
    ("    .reg .b32 %r<3>;\n", "    {\n    .reg .b32 %r<5>;\n    mov.u32 %r4, 1;\n    st.global.u32 [%rd1], %r4;\n"
                             "    }\n", True),
    ("    .reg .b32 %r<3>;\n", "    {\n    .reg .b32 %y1<5>;\n    mov.u32 %y14, 1;\n    }\n", False),
]


def _reader_takes(text: str) -> bool:
    try:
        parse(text)
    except ParseError:
        return False
    return True


@pytest.mark.parametrize("regs,body,ok", RANGE_CASES)
def test_the_reader_takes_the_range_registers_ptxas_takes(regs, body, ok):
    assert _reader_takes(reg_kernel(regs, body)) is ok


@needs_ptxas
@pytest.mark.parametrize("regs,body,ok", RANGE_CASES)
def test_ptxas_takes_the_range_registers_the_table_says(regs, body, ok):
    assert ptxas_takes(reg_kernel(regs, body)) is ok


@pytest.mark.parametrize("use", ["%y10", "%y11", "%y12"])
def test_a_use_of_a_range_named_with_a_final_digit_is_refused_at_its_line_saying_why(use):
    text = reg_kernel("    .reg .b32 %y1<3>;\n", f"    mov.u32 {use}, 1;\n")
    with pytest.raises(ParseError) as e:
        parse(text, filename="y.ptx")
    message = str(e.value)
    assert f"y.ptx:{line_of(text, 'mov.u32')}:" in message
    assert "%y1<3>" in message and f"line {line_of(text, '%y1<3>')}" in message
    assert "ends in a digit" in message and "%y1_<3>" in message  # what is legal instead


def test_a_number_beyond_the_range_it_reads_as_names_that_range():
    text = reg_kernel("    .reg .b32 %r<10>;\n    .reg .b32 %r1<3>;\n", "    mov.u32 %r12, 1;\n")
    with pytest.raises(ParseError, match=r"%r12 .*%r<10> .*%r0 to %r9.*%r1<3>"):
        parse(text)


def test_a_range_named_with_a_final_digit_leaves_a_plain_register_of_its_spellings_free():
    text = reg_kernel("    .reg .b32 %y1<3>;\n    .reg .b32 %y10;\n    .reg .b32 %r1<3>;\n    .reg .b32 %r<20>;\n",
                      "    mov.u32 %y10, 7;\n    mov.u32 %r12, 9;\n    st.global.u32 [%rd1], %y10;\n"
                      "    st.global.u32 [%rd1+4], %r12;\n")
    module = parse(text)
    round_trips(module)
    out = np.zeros(2, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert out.tolist() == [7, 9]
    if "ptxas" in available_backends() and disassembler() is not None:
        assert sass_body(text) == sass_body(module.ptx)


def test_a_scoped_range_named_with_a_final_digit_renders_and_reads_back():
    text = reg_kernel("    .reg .b32 %r<3>;\n", "    {\n    .reg .b32 %y1<3>;\n    mov.u32 %r1, 1;\n"
                                                 "    st.global.u32 [%rd1], %r1;\n    }\n")
    module = parse(text)
    round_trips(module)
    if "ptxas" in available_backends():
        assert ptxas_takes(module.ptx)


def test_a_range_declared_twice_is_refused_at_the_second():
    text = reg_kernel("    .reg .b32 %y1<3>;\n    .reg .b32 %y1<5>;\n", "")
    with pytest.raises(ParseError, match=rf":{line_of(text, '%y1<5>')}: range %y1<5> .*already declared .*line "
                                         rf"{line_of(text, '%y1<3>')}"):
        parse(text)


# ------------------------------------------------------------------ vector .reg parameters

VECTOR_FUNC = """.func (.reg .v2 .b32 r) f(.reg .v4 .f32 a)
{
    .reg .f32 %t<3>;
    add.f32 %t1, a.x, a.y;
    add.f32 %t2, a.z, a.w;
    cvt.rzi.u32.f32 r.x, %t1;
    cvt.rzi.u32.f32 r.y, %t2;
    ret;
}
"""

VECTOR_CALLER = """
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<5>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.f32 %f1, 0f3F800000;
    mov.f32 %f2, 0f40000000;
    mov.f32 %f3, 0f40400000;
    mov.f32 %f4, 0f40800000;
    {
    .reg .v4 .f32 %va;
    .reg .v2 .b32 %vr;
    mov.v4.f32 %va, {%f1, %f2, %f3, %f4};
    call (%vr), f, (%va);
    mov.v2.b32 {%r3, %r4}, %vr;
    }
    st.global.u32 [%rd1], %r3;
    st.global.u32 [%rd1+4], %r4;
    ret;
}
"""


def test_a_vector_reg_parameter_is_refused_at_the_header_saying_what_and_why():
    text = HEAD + VECTOR_FUNC + VECTOR_CALLER
    with pytest.raises(ParseError) as e:
        parse(text, filename="v.ptx")
    message = str(e.value)
    assert message.startswith("v.ptx:4:")
    assert ".reg .v2 .b32 r" in message  # the first one the header declares
    assert "vector register" in message and "r.x" in message  # what ptxas makes of it, and what is missing
    assert ".param .align 8 .b8 r[8]" in message  # what to declare instead


def test_a_vector_reg_parameter_of_a_prototype_is_refused_so_too():
    with pytest.raises(ParseError, match=r"v.ptx:4: .*\.reg \.v4 \.f32 a.*vector register"):
        parse(HEAD + ".extern .func f(.reg .v4 .f32 a);\n" + VECTOR_CALLER.replace("call (%vr), f, (%va);", ""),
              filename="v.ptx")


@needs_ptxas
def test_ptxas_passes_a_vector_reg_parameter_only_in_a_vector_register():
    text = HEAD + VECTOR_FUNC + VECTOR_CALLER
    assert ptxas_takes(text)
    # a { } list of scalar registers is no argument for it, nor is a scalar register
    assert not ptxas_takes(text.replace("call (%vr), f, (%va);", "call ({%r1, %r2}), f, ({%f1, %f2, %f3, %f4});"))
    assert not ptxas_takes(text.replace("call (%vr), f, (%va);", "call (%r1), f, (%f1);"))


def test_a_register_range_too_large_to_make_is_an_error_at_its_line_not_a_hang():
    """`.reg .b32 %r<999999999>;` (ptxas takes it: it makes only the registers used) made a billion registers as the
    line was read, minutes and gigabytes; a range beyond the reader's limit is refused at its line, naming the
    limit, and one at the limit reads."""
    from ptxforge.parse.reader import MAX_RANGE
    body = "{{\n    .reg .b32 %r<{}>;\n    mov.u32 %r5, 1;\n    ret;\n}}\n"
    with pytest.raises(ParseError, match=rf"^<ptx>:6: %r<999999999>: .* up to {MAX_RANGE} registers"):
        parse(HEAD + ".visible .entry k()\n" + body.format(999999999))
    assert "mov.u32" in parse(HEAD + ".visible .entry k()\n" + body.format(MAX_RANGE)).ptx


def test_lint_counts_an_instruction_too_new_for_the_files_target_in_the_least_target():
    """A wgmma line in an sm_80 file is an error and kept opaque; the note of the least target the module needs
    named sm_80 (the opaque line's requirement was not counted): it names sm_90a and the line that needs it."""
    from ptxforge.parse.lint import lint
    text = HEAD.replace("sm_90", "sm_80") + ".visible .entry k()\n{\n    wgmma.fence.sync.aligned;\n    ret;\n}\n"
    found = lint(text)
    errors = [f for f in found if f.severity == "error"]
    assert [f.line for f in errors] == [6] and "needs .target sm_90a" in errors[0].message
    least = [f for f in found if "least target" in f.message]
    assert len(least) == 1 and least[0].line == 6, least
    assert "the least target the module needs is sm_90a (for 'wgmma.fence.sync.aligned'); the file targets sm_80" \
        in least[0].message
