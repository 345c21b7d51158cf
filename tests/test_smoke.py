"""End-to-end smoke: build a kernel, render it, assemble it offline."""

import ptxforge as pf
from ptxforge.testing.kernels import saxpy


def test_saxpy_renders_deterministically():
    assert str(saxpy()) == str(saxpy())
    assert ".version 7.0" in str(saxpy())


def test_saxpy_assembles_for_each_target():
    for arch in ("sm_80", "sm_86", "sm_89", "sm_90"):
        r = pf.assemble(saxpy(arch))
        res = r.resources("saxpy")
        assert 0 < res.registers < 32
        assert res.spills == 0
        assert len(r.cubin) > 1000
