"""Names that ptxas cannot parse are refused when the kernel is built, with the rule and a legal spelling;
names it parses are kept (each rule checked against the assembler where one is available)."""

import pytest

import ptxforge as pf
from ptxforge.assembler import available_backends
from ptxforge.kernel import identifier_problem, legal_spelling

BACKENDS = available_backends()

#: (name, a word of the rule the error must name)
ILLEGAL = [("_", "sink"), ("$", "after it"), ("WARP_SZ", "warp-size"), ("1a", "digit"), ("a-b", "'-'"),
           ("", "empty"), ("%r", "register")]
#: legal, though some look special: opcodes, directive words, near-misses of the reserved names
LEGAL = ["_a", "$a", "__", "$$", "_1", "$1", "a$", "warp_sz", "WARP_SZ2", "tid", "add", "shared", "param",
         "entry", "u32", "ret"]


def _kernel_with(where, name):
    if where == "kernel":
        return pf.KernelBuilder(name, target="sm_80")
    k = pf.KernelBuilder("k", target="sm_80")
    if where == "param":
        k.param_value(name, pf.u32)
    elif where == "shared":
        k.shared(name, 16)
    elif where == "dynamic_shared":
        k.dynamic_shared(name)
    return k


@pytest.mark.parametrize("where", ["kernel", "param", "shared", "dynamic_shared"])
@pytest.mark.parametrize("name,rule", ILLEGAL)
def test_illegal_names_are_refused_with_the_rule_and_a_legal_spelling(where, name, rule):
    with pytest.raises(pf.ValidationError) as info:
        _kernel_with(where, name)
    msg = str(info.value)
    assert "is not a PTX identifier" in msg and rule in msg, msg
    spelling = legal_spelling(name)
    assert f"a legal spelling is {spelling!r}" in msg
    assert identifier_problem(spelling) is None  # the suggestion is itself legal
    _kernel_with(where, spelling)  # and the builder takes it


@pytest.mark.parametrize("name,rule", ILLEGAL)
def test_module_variable_names_follow_the_same_rules(name, rule):
    with pytest.raises(pf.ValidationError, match=rule.replace("$", r"\$")):
        pf.variable(name, pf.u32)


def test_function_names_follow_the_same_rules():
    with pytest.raises(pf.ValidationError, match="sink"):
        pf.FunctionBuilder("_", target="sm_80")


@pytest.mark.parametrize("name", LEGAL)
def test_legal_names_are_kept(name):
    assert identifier_problem(name) is None and legal_spelling(name) == name


def _module(kname="k", pname="p", sname="s"):
    k = pf.KernelBuilder(kname, target="sm_80")
    v = k.param_value(pname, pf.u32)
    s = k.shared(sname, 16)
    k.st(pf.Addr(s), v, space="shared")
    return k.module()


@pytest.mark.skipif(not BACKENDS, reason="no assembler")
@pytest.mark.parametrize("name", LEGAL)
def test_every_name_the_builder_takes_assembles(name):
    for kw in ("kname", "pname", "sname"):
        pf.assemble(_module(**{kw: name}), "sm_80")


@pytest.mark.skipif(not BACKENDS, reason="no assembler")
@pytest.mark.parametrize("name", [n for n, _ in ILLEGAL if n and n[0] != "%" and "-" not in n])
def test_every_name_the_builder_refuses_fails_to_assemble(name):
    # the same module text with the refused name written in, as the builder would have written it
    ptx = _module(sname="zz_name").ptx.replace("zz_name", name)
    with pytest.raises(pf.AssemblyError):
        pf.assemble(ptx, "sm_80")
