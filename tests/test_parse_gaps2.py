"""PTX where the reader or its rendering once disagreed with ptxas 13: a function-pointer table initialized
with functions defined before it (rendered before them, which ptxas refuses).  Each case is held to what
ptxas does with the same text where ptxas is found."""

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.assembler import assemble
from ptxforge.errors import AssemblyError
from ptxforge.parse import parse

from test_parse_gaps import HEAD, needs_ptxas, needs_sass, round_trips, sass_body


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
