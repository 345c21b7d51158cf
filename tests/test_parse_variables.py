"""Module variables read from PTX: their initializers mean on the interpreter what they mean to ptxas (octal
integers, addresses of variables and functions), initializers ptxas refuses are refused at their line, and a
module declares a name once."""

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.parse import ParseError, parse

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def copy_kernel(decls: str, body: str) -> str:
    return (HEAD + decls + "\n.visible .entry k(.param .u64 out)\n{\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n"
            "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n" + body + "\tret;\n}\n")


def test_octal_initializers_are_octal():
    text = copy_kernel(".global .align 4 .u32 g[4] = {017, 010, 0x10, 1U};",
                       "".join(f"\tld.global.u32 %r1, [g+{4 * i}];\n\tst.global.u32 [%rd2+{4 * i}], %r1;\n"
                               for i in range(4)))
    out = np.zeros(4, np.uint32)
    interp.run(parse(text), "k", grid=1, block=1, args=[out])
    np.testing.assert_array_equal(out, [15, 8, 16, 1])


def test_an_address_initializer_holds_the_address():
    text = copy_kernel(".global .align 4 .u32 g[4] = {1, 2, 3, 4};\n.global .align 8 .u64 p = generic(g)+8;\n"
                       ".global .align 8 .u64 q[2] = {g, 0};",
                       "\tld.global.u64 %rd3, [p];\n\tld.u32 %r1, [%rd3];\n\tst.global.u32 [%rd2], %r1;\n"
                       "\tld.global.u64 %rd4, [q];\n\tld.u32 %r2, [%rd4+4];\n\tst.global.u32 [%rd2+4], %r2;\n")
    out = np.zeros(2, np.uint32)
    interp.run(parse(text), "k", grid=1, block=1, args=[out])
    np.testing.assert_array_equal(out, [3, 2])


def test_a_function_pointer_table_holds_the_functions_addresses():
    text = (HEAD + ".func f1()\n{\n\tret;\n}\n.func f2()\n{\n\tret;\n}\n"
            ".global .align 8 .u64 ft[2] = {f1, f2};\n"
            ".visible .entry k(.param .u64 out)\n{\n\t.reg .b64 %rd<8>;\n"
            "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
            "\tld.global.u64 %rd3, [ft+8];\n\tmov.u64 %rd4, f2;\n\tst.global.u64 [%rd2], %rd3;\n"
            "\tst.global.u64 [%rd2+8], %rd4;\n\tret;\n}\n")
    out = np.zeros(2, np.uint64)
    interp.run(parse(text), "k", grid=1, block=1, args=[out])
    assert out[0] == out[1] != 0


def test_an_address_not_modelled_is_refused_at_the_declaration_line():
    from ptxforge.declarations import initial_bytes
    module = parse(copy_kernel(".global .align 4 .u32 g;\n.global .align 8 .u64 p = generic(g);", ""),
                   filename="v.ptx")
    p = next(d for d in module.declarations if getattr(d, "name", "") == "p")
    with pytest.raises(ValidationError, match="initializer of p: the address generic\\(g\\) of g is not modelled") as e:
        initial_bytes(p)
    assert (e.value.loc.filename, e.value.loc.lineno) == ("v.ptx", 5)


@pytest.mark.parametrize("decl,says", [
    (".global .u32 b[2] = {1, 2, 3};", "3 values for 2 elements"),
    (".global .u32 b[2][2] = {{1, 2, 3}, {3}};", "3 values for 2 elements"),
    (".global .u32 b[2][2] = {1, 2, 3, 4};", "4 values for 2 elements"),
    (".global .f32 b[2] = {1.0, 2};", "'2' is not a float literal: a .f32 initializer takes float literals"),
    (".global .f64 b = 1;", "'1' is not a float literal: a .f64 initializer"),
    (".global .u32 b = 1.5;", "'1.5' is a float literal: a .u32 initializer takes integers"),
    (".global .f16 b = 0x3C00;", "a .f16 variable takes no initializer .*declare .b16 and give the bits"),
    (".global .u32 b = {1};", "a scalar takes one value, not a { } list"),
    (".global .u32 b[2] = 1;", "an array takes a { } list, not the single value 1"),
    (".global .u64 b = generic(h);", "generic\\(h\\): h names no .global/.const variable or device function"),
    (".shared .u32 s;\n.global .u64 b = generic(s);", "generic\\(s\\): s is a .shared variable"),
])
def test_initializers_ptxas_refuses_are_refused_at_their_line(decl, says):
    text = copy_kernel(decl, "")
    line = 4 + decl.count("\n")
    with pytest.raises(ParseError, match=f"i.ptx:{line}: initializer of b: {says}"):
        parse(text, filename="i.ptx")


@pytest.mark.parametrize("decl", [".global .u32 b[2][2] = {{1, 2}, {3, 4}};", ".global .u32 b[] = {1, 2, 3};",
                                  ".global .b8 b[2] = {1.0, 2};", ".global .u32 b[2] = {};",
                                  ".global .f32 b = 0d3FF0000000000000;", ".global .u32 b = 1 + 2;"])
def test_initializers_ptxas_takes_are_read(decl):
    module = parse(copy_kernel(decl, ""))
    again = parse(module.ptx)
    assert again.ptx == module.ptx


def test_a_module_variable_declared_twice_is_refused_at_the_second():
    text = copy_kernel(".global .u32 g;\n.global .u32 g;", "")
    with pytest.raises(ParseError, match="d.ptx:5: variable g is already declared at line 4: a module declares a "
                                         "name once"):
        parse(text, filename="d.ptx")


def test_an_extern_declaration_and_the_definition_are_one_variable():
    module = parse(copy_kernel(".global .u32 g;\n.extern .global .u32 g;", "\tld.global.u32 %r1, [g];\n"))
    assert module.kernels[0].name == "k"
