"""`{ }` blocks in a body are scopes: a `.reg` inside one is a register of its own, hidden from the code after the
`}` and hiding an outer register of the same name; a label placed inside one is visible only inside it; a scope
may not declare one name twice.  Read modules keep meaning the same on the interpreter, after a round trip and
through to-python."""

import os
import subprocess
import sys

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.assembler import assemble, available_backends
from ptxforge.parse import ParseError, parse
from ptxforge.parse.equality import same_module
from ptxforge.parse.to_python import to_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernel(body: str) -> str:
    return (".version 8.0\n.target sm_80\n.address_size 64\n\n.visible .entry k(.param .u64 out)\n{\n"
            "\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .pred %p<2>;\n"
            "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;\n" + body + "\tret;\n}\n")


def line_of(text: str, fragment: str, nth: int = 0) -> int:
    return [i for i, ln in enumerate(text.split("\n"), 1) if fragment in ln][nth]


SHADOW = kernel("\tmov.u32 %r2, 100;\n\t{\n\t.reg .b32 %r2;\n\tmov.u32 %r2, 5;\n\tst.global.u32 [%rd2+4], %r2;\n"
                "\t}\n\tst.global.u32 [%rd2], %r2;\n")
TWO_TYPES = kernel("\t{\n\t.reg .b32 t;\n\tmov.b32 t, 1;\n\tst.global.u32 [%rd2], t;\n\t}\n"
                   "\t{\n\t.reg .b64 t;\n\tmov.b64 t, 2;\n\tst.global.u64 [%rd2+8], t;\n\t}\n")


def round_trips(module):
    again = parse(module.ptx, filename="again.ptx")
    assert same_module(module, again) and again.ptx == module.ptx
    if "ptxas" in available_backends():
        assemble(module, backend="ptxas")


def test_an_inner_register_hides_the_outer_one_of_the_same_name():
    module = parse(SHADOW, filename="shadow.ptx")
    out = np.zeros(2, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    np.testing.assert_array_equal(out, [100, 5])
    round_trips(module)
    outer = [i for i in module.kernels[0].instructions if i.opcode == "st"]
    assert outer[0].operands[1] != outer[1].operands[1]


def test_one_name_of_two_types_in_two_scopes():
    module = parse(TWO_TYPES, filename="types.ptx")
    out = np.zeros(4, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    np.testing.assert_array_equal(out, [1, 0, 2, 0])
    round_trips(module)


def test_a_scope_register_is_declared_only_in_its_scope():
    module = parse(kernel("\t{\n\t.reg .b32 %z;\n\tmov.b32 %z, 3;\n\tst.global.u32 [%rd2], %z;\n\t}\n"))
    k = module.kernels[0]
    assert "z" not in {r.name for r in k.registers}
    text = module.ptx
    assert text.count(".reg .b32 %z;") == 1 and text.index("{\n    .reg .b32 %z;") > 0


def test_scopes_of_the_same_name_and_type_share_one_register():
    module = parse(kernel("\t{\n\t.reg .b32 t;\n\tmov.b32 t, 1;\n\t}\n\t{\n\t.reg .b32 t;\n\tmov.b32 t, 2;\n\t}\n"))
    regs = {i.operands[0] for i in module.kernels[0].instructions if i.opcode == "mov"}
    assert len(regs) == 1


def test_a_function_register_declared_after_a_scope_of_its_name_is_another_register():
    module = parse(kernel("\t{\n\t.reg .b32 t;\n\tmov.b32 t, 1;\n\tst.global.u32 [%rd2+4], t;\n\t}\n"
                          "\t.reg .b32 t;\n\tmov.b32 t, 7;\n\tst.global.u32 [%rd2], t;\n"))
    out = np.zeros(2, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    np.testing.assert_array_equal(out, [7, 1])
    round_trips(module)


def test_a_scope_register_is_not_visible_after_the_scope():
    text = kernel("\t{\n\t.reg .b32 %z;\n\tmov.b32 %z, 1;\n\t}\n\tadd.s32 %r2, %z, 1;\n")
    with pytest.raises(ParseError, match=rf"scope.ptx:{line_of(text, 'add.s32')}: %z is declared in a {{ }} "
                                         rf"scope \(line {line_of(text, '.reg .b32 %z')}\) that has closed"):
        parse(text, filename="scope.ptx")


def test_a_scope_register_named_without_percent_is_not_visible_after_the_scope():
    text = kernel("\t{\n\t.reg .b32 t;\n\tmov.b32 t, 1;\n\t}\n\tmov.b32 %r1, t;\n")
    with pytest.raises(ParseError, match=rf"s.ptx:{line_of(text, 'mov.b32 %r1')}: t is declared in a {{ }} scope"):
        parse(text, filename="s.ptx")


def test_a_label_of_a_scope_is_not_visible_outside_it():
    text = kernel("\t{\n\tL2: add.s32 %r3, %r1, 1;\n\t}\n\tbra.uni L2;\n")
    opens = line_of(text, "L2:") - 1
    with pytest.raises(ParseError, match=rf"l.ptx:{line_of(text, 'bra.uni')}: label L2 is placed inside the "
                                         rf"{{ }} scope that opens at line {opens}"):
        parse(text, filename="l.ptx")


def test_labels_of_outer_scopes_are_visible_inside():
    module = parse(kernel("\t{\n\tbra.uni L1;\n\t}\nL1:\n\t{\n\tbra.uni L1;\n\t}\n"))
    assert sum(i.opcode == "bra" for i in module.kernels[0].instructions) == 2


@pytest.mark.parametrize("body,name,first,again", [
    ("\t.reg .b32 %r1;\n", "%r1", ".reg .b32 %r<4>", ".reg .b32 %r1"),
    ("\t{\n\t.reg .b32 %q;\n\t.reg .b32 %q;\n\t}\n", "%q", ".reg .b32 %q;", "/second"),
    ("\t{\n\t.reg .b32 %q<2>;\n\t.reg .b32 %q1;\n\t}\n", "%q1", ".reg .b32 %q<2>", ".reg .b32 %q1"),
])
def test_a_scope_declares_a_name_once(body, name, first, again):
    text = kernel(body)
    at = line_of(text, first) + 1 if again == "/second" else line_of(text, again)
    with pytest.raises(ParseError, match=rf"d.ptx:{at}: {name} is already declared .b32 in this scope "
                                         rf"\(line {line_of(text, first)}\); a {{ }} block can declare"):
        parse(text, filename="d.ptx")


def test_to_python_rebuilds_scope_registers(tmp_path):
    for text in (SHADOW, TWO_TYPES):
        module = parse(text)
        script = tmp_path / "rebuilt.py"
        script.write_text(to_python(module))
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=ROOT))
        assert p.returncode == 0, p.stderr
        assert p.stdout == module.ptx


def test_a_b128_register_of_a_scope_raises_the_least_version_as_one_of_the_function_does():
    """.reg .b128 needs PTX ISA 8.3 wherever it is declared: a file that says 8.0 is refused at its .version
    line, naming the register, as ptxas refuses it."""
    text = kernel("\t{\n\t.reg .b128 %q;\n\t}\n")
    with pytest.raises(ParseError, match=r"needs at least 8.3:\n\s*\.reg \.b128 %q \(kernel k\) needs PTX ISA 8\.3"):
        parse(text, filename="q.ptx")
    assert parse(text.replace(".version 8.0", ".version 8.3"), filename="q.ptx").kernels[0].name == "k"


TWO_COPIES = kernel("\tmov.u32 %r1, 0;\n"
                    "\t{\n\t.reg .pred P1;\n\tLOOP:\n\tadd.u32 %r1, %r1, 1;\n\tsetp.lt.u32 P1, %r1, 3;\n\t@P1 bra LOOP;\n"
                    "\tbra DONE;\n\tDONE:\n\t}\n"
                    "\t{\n\t.reg .pred P1;\n\tLOOP:\n\tadd.u32 %r1, %r1, 10;\n\tsetp.lt.u32 P1, %r1, 50;\n"
                    "\t@P1 bra LOOP;\n\tbra DONE;\n\tDONE:\n\t}\n"
                    "\tbra DONE;\n\tDONE:\n\tst.global.u32 [%rd2], %r1;\n")


def test_one_label_placed_in_several_scopes_is_a_label_of_each():
    """Inline asm inlined twice places `LOOP:` and `DONE:` in two { } blocks (and here `DONE:` once more at function
    scope), which ptxas takes: each branch goes to the label of the innermost scope around it that places one.
    The labels after the first get names of their own; the interpreter loops 0 -> 3 in the first block and
    3 -> 53 in the second."""
    module = parse(TWO_COPIES, filename="two.ptx")
    out = np.zeros(4, np.uint32)
    interp.run(module, "k", grid=1, block=1, args=[out])
    assert out[0] == 53
    assert [ln.strip() for ln in module.ptx.split("\n") if ln.strip().startswith(("LOOP", "DONE"))] == \
        ["LOOP:", "DONE:", "LOOP$1:", "DONE$1:", "DONE$2:"]
    round_trips(module)
    twice = TWO_COPIES.replace("\tbra DONE;\n\tDONE:\n\tst.global", "\tDONE:\n\tDONE:\n\tst.global")
    with pytest.raises(ParseError, match="two.ptx:32: label DONE is placed twice in k"):
        parse(twice, filename="two.ptx")
