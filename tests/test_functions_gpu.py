"""Device functions, calls, module .const/.global variables, .local arrays and brx.idx on a real
GPU, each compared with numpy and with the CPU interpreter's result for the same module."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge import interp

from support.examples import load_example

pytestmark = pytest.mark.gpu


def test_the_device_functions_example_on_the_gpu():
    ex = load_example("device_functions")
    module = ex.build()
    n = 10_007
    x = np.linspace(-3, 3, n).astype(np.float32)
    y = np.full_like(x, np.nan)
    fn = pf.load(module)[ex.KERNEL]
    fn((n + 127) // 128, 128, pf.In(x), pf.InOut(y), n)
    np.testing.assert_allclose(y, ex.reference(x), rtol=1e-5, atol=1e-6)
    cpu = np.full_like(x, np.nan)
    interp.run(module, ex.KERNEL, grid=(n + 127) // 128, block=128, args=[x, cpu, n])
    np.testing.assert_array_equal(y, cpu)


def test_indirect_calls_brx_idx_and_a_global_counter_on_the_gpu():
    def unary(name, op):
        f = pf.FunctionBuilder(name)
        v = f.param_value("x", f32)
        f.result("y", f32)
        f.set_result(op(f, v))
        return f

    sq = unary("sq", lambda f, v: f.mul(v, v))
    ng = unary("ng", lambda f, v: f.neg(v))
    counter = pf.variable("counter", u32, init=1000)
    k = pf.KernelBuilder("k", maxntid=256)
    out = k.param_ptr("out", f32)
    ticket = k.param_ptr("ticket", u32)
    i = k.global_index()
    fp = k.selp(k.address_of(ng), k.address_of(sq), k.setp("ne", k.and_(i, 1), 0))
    y = k.call(fp, args=[k.cvt(i, f32, rnd="rn")], prototype=sq)
    r = k.reg(f32, "r")
    cases = [k.label("case") for _ in range(3)]
    end = k.label("end")
    k.brx_idx(k.rem(i, 3), cases)
    for j, case in enumerate(cases):
        k.place(case)
        k.add(y, float(j), dst=r)
        k.bra(end)
    k.place(end)
    off = k.mul(i, 4, mode="wide")
    k.st(k.add(out, off), r)
    k.st(k.add(ticket, off), k.atom("add", counter, 1, type=u32))
    module = k.module()
    n = 512
    got = np.full(n, np.nan, np.float32)
    tickets = np.zeros(n, np.uint32)
    pf.load(module)["k"](2, 256, pf.InOut(got), pf.InOut(tickets))
    t = np.arange(n, dtype=np.float32)
    want = np.where(np.arange(n) % 2 == 1, -t, t * t) + np.arange(n) % 3
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert sorted(tickets.tolist()) == list(range(1000, 1000 + n))
