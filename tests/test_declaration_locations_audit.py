"""A PTX line that declares something (the kernel's header, a .param, a .shared array, a kernel directive)
names the Python line that asked for it, as instruction lines name theirs: in `describe_line` and so in an
assembler's error on that line."""

import dataclasses
import os

import pytest

import ptxforge as pf
import ptxforge.builder as builder_module
from ptxforge.assembler import available_backends
from support.located import marked_line

HERE = __file__
BACKENDS = available_backends()


def _line_of(m, text):
    lines = m.ptx.splitlines()
    hits = [i for i, ln in enumerate(lines, 1) if ln.strip().startswith(text)]
    assert len(hits) == 1, (text, m.ptx)
    return hits[0]


def _names(described, marker):
    return f"emitted at {os.path.relpath(HERE)}:{marked_line(HERE, marker)}" in described


def test_declaration_lines_name_the_builder_calls_that_made_them():
    k = pf.KernelBuilder("decl", target="sm_90", maxntid=128)  # <- kernel
    n = k.param_value("n", pf.u32)  # <- param n
    x = k.param_ptr("x", pf.f32)  # <- param x
    s = k.shared("tile", 64)  # <- shared tile
    k.dynamic_shared("dyn")  # <- dynamic dyn
    k.st(pf.Addr(s), n, space="shared")
    k.st(x, k.ld(x, type=pf.f32))
    m = k.module()
    for text, marker in [(".visible .entry decl(", "<- kernel"), (".maxntid 128", "<- kernel"),
                         (".param .u32 n", "<- param n"), (".param .u64 x", "<- param x"),
                         (".shared .align 16 .b8 tile[64];", "<- shared tile"),
                         (".extern .shared .align 16 .b8 dyn[];", "<- dynamic dyn")]:
        described = m.describe_line(_line_of(m, text))
        assert _names(described, marker), (text, described)
    # lines that no Python call made stay without one
    assert "emitted at" not in m.describe_line(_line_of(m, ".version"))
    assert "emitted at" not in m.describe_line(_line_of(m, "{"))


def test_a_functions_header_parameters_and_local_arrays_are_located():
    f = pf.FunctionBuilder("twice", target="sm_80")  # <- function
    x = f.param_value("x", pf.f32)  # <- func param
    f.result("y", pf.f32)
    f.set_result(f.add(x, x))
    k = pf.KernelBuilder("caller", target="sm_80")
    out = k.param_ptr("out", pf.f32)
    stack = k.local_array("stack", pf.u32, 4)  # <- local array
    k.st(stack, 1, space="local", type=pf.u32)
    k.st(out, k.call(f, args=[1.5]))
    m = k.module()
    assert _names(m.describe_line(_line_of(m, ".func (.param .f32 y) twice(")), "<- function")
    assert _names(m.describe_line(_line_of(m, ".param .f32 x")), "<- func param")
    assert _names(m.describe_line(_line_of(m, ".local .u32 stack[4];")), "<- local array")


@pytest.mark.skipif(not BACKENDS, reason="no assembler")
def test_an_assembler_error_on_a_directive_line_names_the_kernels_line():
    k = pf.KernelBuilder("k", target="sm_90", reqnctapercluster=(2, 1, 1))  # <- cluster kernel
    kernel = k.finish()
    # a kernel value edited past the builder's checks (as mutation testing does): ptxas refuses the pair
    bad = dataclasses.replace(kernel, directives=kernel.directives + (("maxclusterrank", 2),))
    with pytest.raises(pf.AssemblyError) as info:
        pf.assemble(pf.Module([bad]), "sm_90")
    msg = str(info.value)
    assert "PTX line" in msg and ".maxclusterrank 2" in msg
    assert _names(msg, "<- cluster kernel"), msg


@pytest.mark.skipif(not BACKENDS, reason="no assembler")
@pytest.mark.parametrize("where", ["param", "shared"])
def test_an_assembler_error_on_a_declaration_line_names_the_line_that_declared_it(where, monkeypatch):
    # a name the builder's identifier rules let through (the rules are switched off here) reaches ptxas
    monkeypatch.setattr(builder_module, "check_identifier", lambda name, what: name)
    k = pf.KernelBuilder("k", target="sm_80")
    if where == "param":
        k.param("$", pf.u32)  # <- bad param
    else:
        k.shared("$", 16)  # <- bad shared
    with pytest.raises(pf.AssemblyError) as info:
        pf.assemble(k.module(), "sm_80")
    assert _names(str(info.value), f"<- bad {where}"), str(info.value)
