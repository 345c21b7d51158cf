"""End-to-end smoke: build a kernel, render it, assemble it offline."""

import ptxforge as pf
from ptxforge import f32, u32


def saxpy(target="sm_80"):
    k = pf.KernelBuilder("saxpy", target=target, maxntid=256)
    x = k.param_ptr("x", f32)
    y = k.param_ptr("y", f32)
    n = k.param_value("n", u32)
    a = k.param_value("a", f32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        py = k.add(y, off)
        k.st(py, k.fma(a, k.ld(k.add(x, off), type=f32), k.ld(py, type=f32)))
    return k.module()


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
