"""An explicit .version below what the module needs is refused wherever it is given (the Module, render,
listing, describe_line, assemble), naming what needs more: the target, or the instruction and its line."""

import os

import pytest

import ptxforge as pf
from ptxforge.assembler import available_backends
from ptxforge.isa.targets import Target
from support.located import marked_line

HERE = __file__
BACKENDS = available_backends()


def _elect():
    k = pf.KernelBuilder("k", target="sm_90")
    k.elect_sync()  # <- elect
    return k.module()


def _where(marker):
    return f"{os.path.relpath(HERE)}:{marked_line(HERE, marker)}"


ASKS = {
    "render": lambda m, v: m.render(v),
    "render_kw": lambda m, v: m.render(version=v),
    "listing": lambda m, v: m.listing(version=v),
    "describe_line": lambda m, v: m.describe_line(1, version=v),
    "module": lambda m, v: pf.Module(m.kernels, version=v),
}


@pytest.mark.parametrize("ask", sorted(ASKS))
def test_a_version_below_an_instructions_names_it_and_its_line(ask):
    m = _elect()
    need = str(m.least_version())
    with pytest.raises(pf.TargetError) as info:
        ASKS[ask](m, "7.8")
    msg = str(info.value)
    assert "7.8" in msg and f"needs at least {need}" in msg
    assert "elect.sync" in msg and _where("<- elect") in msg, msg
    assert ".target sm_90" not in msg  # 7.8 is enough for the target itself


@pytest.mark.parametrize("ask", sorted(ASKS))
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_version_below_the_targets_names_the_target(ask, target):
    m = pf.KernelBuilder("k", target=target).module()
    low = "6.0"
    with pytest.raises(pf.TargetError) as info:
        ASKS[ask](m, low)
    msg = str(info.value)
    assert f".target {target} needs PTX ISA {Target.parse(target).min_ptx}" in msg, msg


def test_both_the_target_and_an_instruction_are_named_when_both_need_more():
    with pytest.raises(pf.TargetError) as info:
        _elect().listing(version="7.0")
    msg = str(info.value)
    assert ".target sm_90" in msg and "elect.sync" in msg


def test_versions_at_or_above_the_least_still_render():
    m = _elect()
    need = m.least_version()
    assert f".version {need}\n" in m.render(need).text
    assert ".version 9.0\n" in m.listing(version="9.0", numbers=False, sources=False)


@pytest.mark.skipif(not BACKENDS, reason="no assembler")
def test_assemble_refuses_a_version_below_the_modules_before_the_assembler_runs():
    with pytest.raises(pf.TargetError) as info:
        pf.assemble(_elect(), "sm_90", version="7.0")  # <- assemble low
    msg = str(info.value)
    assert "elect.sync" in msg and ".target sm_90" in msg
    assert info.value.loc is not None and info.value.loc.lineno == marked_line(HERE, "<- assemble low")
    pf.assemble(_elect(), "sm_90", version=str(_elect().least_version()))
