"""atom / red on half-precision types (.noftz), as vectors (sm_90) and on 128-bit values: the forms ptxas takes and
refuses, and the interpreter's semantics against numpy (and the H200)."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.bfloat16 import from_bf16, to_bf16
from ptxforge.isa.memory import ATOM_HALF_TYPES, ATOM_VECTORS

from support.reduce_kernels import half_atom_kernel


def _assemble_one(build, target="sm_90"):
    k = pf.KernelBuilder("a", target=target)
    build(k, k.param_ptr("p", pf.b8))
    pf.assemble(k.module())
    return k.module().ptx


@pytest.mark.parametrize("name", ["atom", "red"])
def test_every_vector_and_half_form_assembles(name):
    k = pf.KernelBuilder("forms", target="sm_90")
    p = k.param_ptr("p", pf.b8)
    fn = getattr(k, name)
    for (op, t), lengths in ATOM_VECTORS.items():
        for n in lengths:
            fn(op, p, [k.reg(pf.isa.types.decl_type(t)) for _ in range(n)], type=t)
    for t in ATOM_HALF_TYPES:
        for space in ("global", "shared", "generic"):
            fn("add", p if space != "shared" else k.shared_base(k.shared(f"s_{t.name}", 64, 16)),
               k.reg(pf.isa.types.decl_type(t)), type=t, space=space)
    q = k.reg(pf.b128)
    if name == "atom":
        k.atom("exch", p, q)
        k.atom("cas", p, q, compare=q)
    text = k.module().ptx
    assert f"{name}.global.max.noftz.v8.bf16" in text and f"{name}.global.add.noftz.f16x2" in text
    pf.assemble(k.module())


@pytest.mark.parametrize("build, match", [
    (lambda k, p: k.atom("max", p, k.reg(pf.f16), type="f16"), "only as a vector"),
    (lambda k, p: k.atom("add", p, [k.reg(pf.f32)] * 8), "not .v8"),
    (lambda k, p: k.atom("add", p, [k.reg(pf.f64)] * 2), "no vector form"),
    (lambda k, p: k.atom("add", k.shared_base(k.shared("s", 64, 16)), [k.reg(pf.f32)] * 2, space="shared"),
     "global or generic"),
])
def test_illegal_forms_are_refused_as_ptxas_refuses_them(build, match):
    with pytest.raises(pf.ValidationError, match=match):
        _assemble_one(build)


def test_the_newer_types_need_their_targets():
    with pytest.raises(pf.TargetError, match="sm_90"):
        _assemble_one(lambda k, p: k.atom("add", p, k.reg(pf.bf16), type="bf16"), "sm_80")
    with pytest.raises(pf.TargetError, match="sm_90"):
        _assemble_one(lambda k, p: k.atom("exch", p, k.reg(pf.b128)), "sm_80")
    assert ".version 8.1" in _assemble_one(lambda k, p: k.red("add", p, [k.reg(pf.f32)] * 4))
    assert "atom.global.add.noftz.f16x2" in _assemble_one(lambda k, p: k.atom("add", p, k.reg(pf.f16x2)), "sm_80")


def _rounded(x, t):
    return to_bf16(np.float64(x)) if t.startswith("bf16") else np.array([x], np.float64).astype(np.float16).view(
        np.uint16)[0]


def _value(bits, t):
    return float(from_bf16(np.uint16(bits))) if t.startswith("bf16") else float(np.uint16(bits).view(np.float16))


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_colliding_half_adds_round_once_each_in_thread_order(t):
    rng = np.random.default_rng(3)
    n = 64
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3, n)
    vals = np.array([_rounded(v, t) for v in x], np.uint16)
    mem = np.array([_rounded(0.1, t)], np.uint16)
    olds = np.zeros(n, np.uint16)
    interp.run(half_atom_kernel(t, "add", n).module(), block=n, args=[mem, vals, olds])
    acc = _rounded(0.1, t)
    for i in range(n):  # the oracle: one rounding per addition, thread 0 first
        assert olds[i] == acc, i
        acc = _rounded(_value(acc, t) + _value(vals[i], t), t)
    assert mem[0] == acc


def test_packed_half_add_is_per_lane_and_vector_elements_are_separate_atomics():
    n = 32
    rng = np.random.default_rng(4)
    lanes = rng.integers(-8, 8, (n, 2)).astype(np.float16)
    vals = lanes.view(np.uint32).ravel()
    mem = np.zeros(1, np.uint32)
    interp.run(half_atom_kernel("f16x2", "add", n).module(), block=n, args=[mem, vals, np.zeros(n, np.uint32)])
    np.testing.assert_array_equal(mem.view(np.float16), lanes.astype(np.float64).sum(axis=0).astype(np.float16))
    f = rng.integers(-100, 100, (n, 4)).astype(np.float32)
    mem4 = np.arange(n * 4, dtype=np.float32)
    olds = np.zeros(n * 4, np.float32)
    interp.run(half_atom_kernel("f32", "add", n, vec=4, collide=False).module(), block=n,
               args=[mem4, f.ravel(), olds])
    np.testing.assert_array_equal(olds, np.arange(n * 4, dtype=np.float32))
    np.testing.assert_array_equal(mem4, np.arange(n * 4, dtype=np.float32) + f.ravel())


def test_half_min_and_max_take_numbers_over_nan_and_order_the_zeros():
    h = np.array([np.nan, 1.0, -0.0, 0.0, 3.0, -2.0, np.nan, 5.0], np.float16)
    other = np.array([2.0, np.nan, 0.0, -0.0, 1.0, 7.0, np.nan, 5.0], np.float16)
    for op, want in (("min", [2.0, 1.0, -0.0, -0.0, 1.0, -2.0, np.nan, 5.0]),
                     ("max", [2.0, 1.0, 0.0, 0.0, 3.0, 7.0, np.nan, 5.0])):
        mem = h.copy().view(np.uint16)
        interp.run(half_atom_kernel("f16", op, 1, vec=8, collide=False).module(), block=1,
                   args=[mem, other.view(np.uint16).copy(), np.zeros(8, np.uint16)])
        got = mem.view(np.float16)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(got)
        np.testing.assert_array_equal(got[ok], np.array(want, np.float16)[ok])
        np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(np.array(want, np.float16)[ok]))


def test_b128_cas_swaps_only_when_all_sixteen_bytes_match():
    k = pf.KernelBuilder("q", target="sm_90", reqntid=2)
    mem, cmp, new, old = (k.param_ptr(x, pf.u64) for x in ("mem", "cmp", "new", "old"))
    off = k.mul(k.tid(), 16, mode="wide")
    c = k.ld(k.add(cmp, off), type=pf.b128)
    v = k.ld(k.add(new, off), type=pf.b128)
    o = k.atom("cas", k.add(mem, off), v, compare=c)
    k.st(k.add(old, off), o, type=pf.b128)
    e = k.atom("exch", k.add(mem, off), c)
    k.st(k.add(new, off), e, type=pf.b128)
    pf.assemble(k.module())
    mem_v = np.array([[1, 2], [3, 4]], np.uint64)
    cmp_v = np.array([[1, 2], [3, 5]], np.uint64)  # thread 1 matches one word of two
    new_v = np.array([[7, 8], [9, 10]], np.uint64)
    old_v = np.zeros((2, 2), np.uint64)
    interp.run(k.module(), block=2, args=[mem_v, cmp_v, new_v, old_v])
    np.testing.assert_array_equal(old_v, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(new_v, [[7, 8], [3, 4]])  # what exch found: the swap, or the untouched value
    np.testing.assert_array_equal(mem_v, cmp_v)


def test_the_forms_parse_back():
    k = pf.KernelBuilder("pb", target="sm_90")
    p = k.param_ptr("p", pf.b8)
    k.atom("min", p, [k.reg(pf.f16x2)] * 2, type="f16x2", sem="relaxed", scope="gpu")
    k.red("add", p, k.reg(pf.bf16), type="bf16", policy=k.createpolicy())
    k.atom("cas", p, k.reg(pf.b128), compare=k.reg(pf.b128))
    assert pf.parse(k.module().ptx).ptx == k.module().ptx
    with pytest.raises(pf.ValidationError, match="noftz"):
        pf.parse(k.module().ptx.replace("min.noftz.v2", "min.v2"))


@pytest.mark.gpu
def test_gpu_half_vector_and_b128_atomics_match_the_interpreter():
    """Values whose sums are exact, so the GPU's order of colliding atomics cannot change the result."""
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(8)
    n = 128
    for t, op, vec, collide in (("f16", "add", 1, True), ("bf16", "add", 1, True), ("f16x2", "add", 1, True),
                                ("bf16x2", "add", 2, False), ("f16", "max", 8, False), ("bf16", "min", 4, False),
                                ("f32", "add", 4, False)):
        tt = pf.isa.types.lookup(t)
        words = n * vec * tt.bits // 16
        bound = 2 if t.startswith("bf16") and collide else 16  # every partial sum exact: |sum| <= 256 for bf16
        small = rng.integers(-bound, bound, words).astype(np.float32)
        vals = (small.astype(np.float16).view(np.uint16) if not t.startswith("bf16") else to_bf16(small)).copy()
        if t == "f32":
            vals = rng.integers(-100, 100, n * vec).astype(np.float32).view(np.uint16)
        mem = np.zeros(len(vals) if not collide else tt.bits // 16, np.uint16)
        k = half_atom_kernel(t, op, n, vec, collide)
        gm, go = DeviceBuffer.from_host(mem), DeviceBuffer.from_host(np.zeros_like(vals))
        pf.load(k.module())[k.name](1, n, gm, DeviceBuffer.from_host(vals), go)
        cm, co = mem.copy(), np.zeros_like(vals)
        interp.run(k.module(), block=n, args=[cm, vals, co])
        assert np.array_equal(gm.to_host(), cm), (t, op, vec)
        if not collide:
            assert np.array_equal(go.to_host(), co), (t, op, vec)
