"""add / min / max on the packed 16-bit integer pairs .u16x2 / .s16x2 (sm_90): the forms ptxas takes, the
interpreter lane by lane against Python integers, and the H200."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.testing.interp_strategies import packed_words

FORMS = [("add", "u16x2", None), ("add", "s16x2", None), ("min", "u16x2", None), ("min", "s16x2", None),
         ("max", "u16x2", None), ("max", "s16x2", None), ("min", "s16x2", "relu"), ("max", "s16x2", "relu")]


def oracle(op, t, mode, x, y):
    out = 0
    for lane in range(2):
        a, b = (x >> 16 * lane) & 0xFFFF, (y >> 16 * lane) & 0xFFFF
        if t == "s16x2":
            a, b = (v - 0x10000 if v >= 0x8000 else v for v in (a, b))
        r = a + b if op == "add" else min(a, b) if op == "min" else max(a, b)
        if mode == "relu":
            r = max(r, 0)
        out |= (r & 0xFFFF) << 16 * lane
    return out


def _kernel(nt=32):
    k = pf.KernelBuilder("p", target="sm_90", reqntid=nt)
    pa, pb, po = (k.param_ptr(n, pf.b32) for n in ("a", "b", "o"))
    off = k.mul(k.tid(), 4, mode="wide")
    a, b = (k.ld(k.add(p, off), type=pf.b32) for p in (pa, pb))
    for i, (op, t, mode) in enumerate(FORMS):
        k.st(k.add(po, k.mul(k.tid(), 4 * len(FORMS), mode="wide")), getattr(k, op)(a, b, type=t, mode=mode),
             type=pf.b32, offset=4 * i)
    return k


def _run(a, b):
    out = np.zeros((len(a), len(FORMS)), np.uint32)
    interp.run(_kernel(len(a)).module(), block=len(a), args=[a, b, out])
    return out


def test_the_forms_render_assemble_and_parse_back():
    m = _kernel().module()
    for op, t, mode in FORMS:
        assert f"{op}.{mode + '.' if mode else ''}{t}" in m.ptx
    pf.assemble(m)
    assert pf.parse(m.ptx).ptx == m.ptx


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_every_form_matches_python_integers_lane_by_lane(data):
    a = data.draw(packed_words(2, 1, 32))
    b = data.draw(packed_words(2, len(a), len(a)))
    out = _run(a, b)
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        assert out[i].tolist() == [oracle(op, t, mode, x, y) for op, t, mode in FORMS], (hex(x), hex(y))


@pytest.mark.parametrize("call, match", [
    (lambda k, r: k.add(r, 5, type="u16x2"), "immediate"),
    (lambda k, r: k.sub(r, r, type="u16x2"), "does not take .u16x2"),
    (lambda k, r: k.add(r, r, type="s16x2", mode="sat"), "sat"),
    (lambda k, r: k.min(r, r, type="u16x2", mode="relu"), "relu"),
    (lambda k, r: k.add(k.reg(pf.u32), r, type="u16x2"), r"\(\.b32\)"),
])
def test_what_ptxas_refuses_is_refused(call, match):
    k = pf.KernelBuilder("bad", target="sm_90")
    with pytest.raises(pf.ValidationError, match=match):
        call(k, k.reg(pf.b32))


def test_they_need_sm90():
    k = pf.KernelBuilder("old", target="sm_80")
    with pytest.raises(pf.TargetError, match="sm_90"):
        k.add(k.reg(pf.b32), k.reg(pf.b32), type="u16x2")


@pytest.mark.gpu
def test_gpu_packed_int16_matches_the_interpreter():
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(2)
    a, b = (rng.integers(0, 2 ** 32, 256, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    a[:4] = [0x7FFF8000, 0xFFFF0000, 0x80008000, 0]
    out = DeviceBuffer.from_host(np.zeros((256, len(FORMS)), np.uint32))
    k = _kernel(256)
    pf.load(k.module())[k.name](1, 256, DeviceBuffer.from_host(a), DeviceBuffer.from_host(b), out)
    np.testing.assert_array_equal(out.to_host(), _run(a, b))
