"""Properties of the instruction tables, checked against the real assembler.

* every legal instruction the strategies draw (from the tables the validator reads), wrapped
  in a minimal kernel, assembles for its target;
* every illegal combination they draw is refused by the builder with a PtxforgeError, before
  any assembler runs;
* emission is deterministic: the same specs give the same PTX bytes.
"""

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxforge as pf
from ptxforge.testing import strategies as pst

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")


def _assemble(target, specs):
    module = pst.build_module(target, specs)
    try:
        return pf.assemble(module)
    except pf.AssemblyError as e:  # show the PTX with the message, for the shrunk example
        raise AssertionError(f"{specs!r} for {target} was rejected:\n{e}\n{module.listing(sources=False)}") from e


@pytest.mark.parametrize("family", pst.FAMILIES)
@given(data=st.data())
def test_legal_instructions_assemble(family, data):
    target = data.draw(pst.targets(), label="target")
    specs = data.draw(st.lists(pst.instruction_specs(target, (family,)), min_size=1, max_size=8), label="specs")
    _assemble(target, specs)


@given(pst.kernels(max_size=10))
def test_mixed_kernels_assemble(drawn):
    target, specs = drawn
    _assemble(target, specs)


@given(pst.illegal_specs())
def test_illegal_combinations_are_refused_before_the_assembler(drawn):
    target, spec = drawn
    sc = pst.Scratch(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(pf.PtxforgeError) as info:
            pst.emit_spec(sc, spec)
    err = info.value
    assert isinstance(err, (pf.ValidationError, pf.TargetError)), type(err)
    assert err.loc is not None, f"{spec!r}: the error names no source line"
    assert str(err.loc.lineno) in str(err)


@given(pst.kernels(max_size=10))
def test_emission_is_deterministic(drawn):
    target, specs = drawn
    first = str(pst.build_module(target, specs))
    second = str(pst.build_module(target, specs))
    assert first == second
    assert first.encode() == second.encode()


@settings(max_examples=10)
@given(pst.kernels(max_size=4))
def test_assembly_is_deterministic(drawn):
    target, specs = drawn
    module = pst.build_module(target, specs)
    assert pf.assemble(module).cubin == pf.assemble(module).cubin


@pytest.mark.parametrize("target", pst.TARGETS)
def test_every_family_has_legal_candidates_for_each_target(target):
    for family in pst.FAMILIES:
        assert pst.legal_candidates(target, family), (target, family)


def test_the_strategies_reach_every_table_form():
    """The validator must not silently drop table forms from the legal pool."""
    from ptxforge.isa.async_copy import CP_ASYNC_SIZES
    from ptxforge.isa.memory import LDMATRIX_FORMS, STMATRIX_FORMS
    from ptxforge.isa.tensor import MMA_FORMS

    mma = {(s["shape"], s["a_type"], s["b_type"], s["acc"], s.get("bitop"))
           for s in pst.legal_candidates("sm_80", "tensor") if s.op == "mma"}
    assert mma == {(f.shape, f.a_type.name, f.b_type.name, f.c_type.name, f.bitop) for f in MMA_FORMS}
    ldm = {(s["num"], s["trans"]) for s in pst.legal_candidates("sm_80", "memory") if s.op == "ldmatrix"}
    assert ldm == {(f.num, f.trans) for f in LDMATRIX_FORMS if f.shape == "m8n8"}
    stm = {(s["num"], s["trans"]) for s in pst.legal_candidates("sm_90", "memory") if s.op == "stmatrix"}
    assert stm == {(f.num, f.trans) for f in STMATRIX_FORMS}
    assert not [s for s in pst.legal_candidates("sm_80", "memory") if s.op == "stmatrix"]
    cp = {(s["cache"], s["size"]) for s in pst.legal_candidates("sm_80", "async_copy") if s.op == "cp_async"}
    assert cp == {(c, n) for c, sizes in CP_ASYNC_SIZES.items() for n in sizes}
    wg = [s for s in pst.legal_candidates("sm_90a", "tensor") if s.op == "wgmma"]
    assert wg and not [s for s in pst.legal_candidates("sm_90", "tensor") if s.op == "wgmma"]


def test_too_new_pools_hold_the_sm90_features():
    ops = {s.op for s in pst.too_new_candidates("sm_80")}
    assert {"stmatrix", "mbarrier_try_wait", "bulk_copy", "tensor_load", "elect", "wgmma"} <= ops
    assert {s.op for s in pst.too_new_candidates("sm_90")} == {"wgmma", "setmaxnreg"}
