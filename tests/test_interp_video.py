"""The SIMD video instructions (vadd2 ... vset2, vadd4 ... vset4) on the interpreter, against an oracle
written from the PTX ISA's pseudocode one lane at a time in Python integers, and against the H200."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa.video import VIDEO, VSET_CMP
from ptxforge.testing.interp_strategies import packed_words

NT = 32
SIMD = sorted(k for k, f in VIDEO.items() if f.simd)
TYPES = ("u32", "s32")


def _forms():
    """(opcode, dtype, atype, btype, sat, add, cmp) for every SIMD form the builder emits."""
    out = []
    for opc in SIMD:
        f = VIDEO[opc]
        for at in TYPES:
            for bt in TYPES:
                if f.op == "set":
                    out += [(opc, "u32", at, bt, False, add, c) for c in VSET_CMP for add in (False, True)]
                else:
                    out += [(opc, dt, at, bt, sat, add, None) for dt in TYPES for sat, add in
                            ((False, False), (True, False), (False, True))]
    return out


FORMS = _forms()


def oracle(form, x: int, y: int, z: int) -> int:
    """d of one SIMD video instruction on Python integers, lane by lane, as the ISA's pseudocode reads."""
    opc, dt, at, bt, sat, add, cmp = form
    n = VIDEO[opc].lanes
    w = 32 // n

    def lane(v, i, t):
        u = (v >> (i * w)) & ((1 << w) - 1)
        return u - (1 << w) if t == "s32" and u >> (w - 1) else u

    d = z if add else 0
    for i in range(n):
        a, b = lane(x, i, at), lane(y, i, bt)
        op = VIDEO[opc].op
        if op == "add":
            t = a + b
        elif op == "sub":
            t = a - b
        elif op == "avrg":
            t = (a + b + 1) // 2 if a + b >= 0 else (a + b) // 2
        elif op == "absdiff":
            t = abs(a - b)
        elif op == "min":
            t = min(a, b)
        elif op == "max":
            t = max(a, b)
        else:
            t = int({"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp])
        if sat:
            lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if dt == "s32" else (0, (1 << w) - 1)
            t = min(max(t, lo), hi)
        if add:
            d += t
        else:
            d |= (t % (1 << w)) << (i * w)
    return d % (1 << 32)


def _kernel(form, nt=NT):
    opc, dt, at, bt, sat, add, cmp = form
    k = pf.KernelBuilder("v", target="sm_90", reqntid=nt)
    pa, pb, pc, pd = (k.param_ptr(n, pf.u32) for n in "abcd")
    off = k.mul(k.tid(), 4, mode="wide")
    a, b, c = (k.ld(k.add(p, off), type=pf.u32) for p in (pa, pb, pc))
    d = k.video(opc, a, b, c, dtype=dt, atype=at, btype=bt, sat=sat, op2="add" if add else None, cmp=cmp)
    k.st(k.add(pd, off), d, type=pf.u32)
    return k


def _interp(form, a, b, c):
    k = _kernel(form, len(a))
    d = np.zeros(len(a), np.uint32)
    interp.run(k.module(), block=len(a), args=[a, b, c, d])
    return d


def _words(rng, lanes, n=NT):
    w = 32 // lanes
    edges = np.array([0, 1, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1], np.uint64)
    lane = np.where(rng.random((n, lanes)) < 0.5, edges[rng.integers(0, len(edges), (n, lanes))],
                    rng.integers(0, 1 << w, (n, lanes)).astype(np.uint64))
    return (lane << (np.arange(lanes, dtype=np.uint64) * np.uint64(w))).sum(axis=1).astype(np.uint32)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: ".".join(str(x) for x in f if x not in (None, False)))
def test_every_simd_form_matches_the_oracle(form):
    rng = np.random.default_rng(FORMS.index(form))
    lanes = VIDEO[form[0]].lanes
    a, b, c = (_words(rng, lanes) for _ in range(3))
    got = _interp(form, a, b, c)
    want = [oracle(form, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]
    assert [int(v) for v in got] == want


def test_the_kernels_assemble():
    for form in FORMS[::7]:
        pf.assemble(_kernel(form).module())


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(FORMS), st.data())
def test_drawn_words_match_the_oracle(form, data):
    lanes = VIDEO[form[0]].lanes
    a = data.draw(packed_words(lanes, 1, 16))
    b, c = (data.draw(packed_words(lanes, len(a), len(a))) for _ in range(2))
    got = _interp(form, a, b, c)
    assert [int(v) for v in got] == [oracle(form, int(x), int(y), int(z)) for x, y, z in zip(a, b, c)]


def test_lanes_saturate_and_accumulate_where_the_spec_says():
    """Hand-worked cases: each lane saturates on its own, .add sums signed lanes into a full word."""
    cases = [  # (form, a, b, c, d)
        (("vadd2", "s32", "s32", "s32", True, False, None), 0x7FFF_8000, 0x0001_FFFF, 0, 0x7FFF_8000),
        (("vadd2", "u32", "u32", "u32", False, False, None), 0xFFFF_0001, 0x0001_FFFF, 0, 0x0000_0000),
        (("vsub4", "u32", "u32", "u32", True, False, None), 0x01_02_03_04, 0x02_02_02_02, 0, 0x00_00_01_02),
        (("vabsdiff4", "u32", "u32", "u32", False, True, None), 0x10_00_FF_05, 0x00_10_00_07, 100, 100 + 16 + 16 + 255 + 2),
        (("vsub2", "s32", "s32", "s32", False, True, None), 0x0000_0000, 0x0001_0001, 5, 3),
        (("vavrg2", "s32", "s32", "s32", False, False, None), 0xFFFF_0001, 0xFFFE_0002, 0, 0xFFFE_0002),
        (("vset4", "u32", "s32", "s32", False, False, "lt"), 0x80_7F_00_01, 0x00_00_00_00, 0, 0x01_00_00_00),
        (("vset2", "u32", "u32", "u32", False, True, "ne"), 0x0001_0002, 0x0001_0003, 0xFFFF_FFFF, 0),
    ]
    for form, a, b, c, d in cases:
        assert oracle(form, a, b, c) == d, form
        got = _interp(form, *(np.full(1, v, np.uint32) for v in (a, b, c)))
        assert int(got[0]) == d, form


@pytest.mark.gpu
def test_gpu_simd_video_matches_the_interpreter():
    """Every SIMD form on the H200 (where ptxas expands them into integer code) bit for bit against the
    interpreter, on words with edge-valued lanes."""
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(5)
    for form in FORMS:
        lanes = VIDEO[form[0]].lanes
        a, b, c = (_words(rng, lanes, 256) for _ in range(3))
        k = _kernel(form, 256)
        out = DeviceBuffer.from_host(np.zeros(256, np.uint32))
        pf.load(k.module())[k.name](1, 256, *(DeviceBuffer.from_host(x) for x in (a, b, c)), out)
        assert np.array_equal(out.to_host(), _interp(form, a, b, c)), form
