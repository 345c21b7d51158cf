"""The interpreter's fragment layout tables against the formulas as the PTX ISA writes them, one
family at a time (g = lane >> 2, t = lane % 4, i = element index across the fragment's
registers, low element first).  These formulas are typed in from the ISA's "Matrix Fragments
for mma.mMnNkK" sections, independently of the general rule ptxforge/isa/fragments.py implements.
"""

import pytest

from ptxforge.isa.fragments import matrix_layout, mma_fragment
from ptxforge.isa import types as T
from ptxforge.isa.tensor import MMA_FORMS


def _a_doc(form, g, t, i):
    s, a = form.shape, form.a_type
    if a in (T.s4, T.u4):
        if s == "m8n8k32":
            return g, 8 * t + i
        if s == "m16n8k32":
            return (g if i < 8 else g + 8), 8 * t + (i & 7)
        return (g if i < 8 or 16 <= i < 24 else g + 8), 8 * t + (i & 7) + (32 if i >= 16 else 0)
    if a in (T.s8, T.u8, T.e4m3, T.e5m2):  # the fp8 tables are the 8-bit integer ones
        if s == "m8n8k16":
            return g, 4 * t + i
        if s == "m16n8k16":
            return (g if i < 4 else g + 8), 4 * t + (i & 3)
        return (g if i < 4 or 8 <= i < 12 else g + 8), 4 * t + (i & 3) + (16 if i >= 8 else 0)
    if a is T.b1:
        if s == "m8n8k128":
            return g, 32 * t + i
        if s == "m16n8k128":
            return (g if i < 32 else g + 8), 32 * t + (i & 31)
        return (g if i < 32 or 64 <= i < 96 else g + 8), 32 * t + (i & 31) + (128 if i >= 64 else 0)
    if a in (T.f16, T.bf16):
        if s == "m16n8k8":
            return (g if i < 2 else g + 8), 2 * t + (i & 1)
        return (g if i in (0, 1, 4, 5) else g + 8), 2 * t + (i & 1) + (8 if i >= 4 else 0)
    if a is T.tf32:
        if s == "m16n8k4":
            return (g if i == 0 else g + 8), t
        return (g if i in (0, 2) else g + 8), (t if i < 2 else t + 4)
    if a is T.f64:
        if s == "m8n8k4":
            return g, t
        # m16n8k4/k8/k16 (sm_90): a_i at row g (even i) or g+8 (odd i), column t + 4*(i // 2)
        return (g if i % 2 == 0 else g + 8), t + 4 * (i // 2)
    raise AssertionError(form)


def _b_doc(form, g, t, i):
    b = form.b_type
    if b in (T.s4, T.u4):
        return (8 * t + (i & 7) + (32 if i >= 8 else 0)), g
    if b in (T.s8, T.u8, T.e4m3, T.e5m2):
        return (4 * t + (i & 3) + (16 if i >= 4 else 0)), g
    if b is T.b1:
        return (32 * t + (i & 31) + (128 if i >= 32 else 0)), g
    if b in (T.f16, T.bf16):
        return (2 * t + (i & 1) + (8 if i >= 2 else 0)), g
    if b is T.tf32:
        return (t if i == 0 else t + 4), g
    if b is T.f64:
        return t + 4 * i, g  # b_i at row t + 4i (m8n8k4 and m16n8k4 have one register)
    raise AssertionError(form)


def _c_doc(form, g, t, i):
    return (g if i < 2 else g + 8), 2 * t + (i & 1)


def _table(frag):
    per = frag.nregs * frag.per_reg
    rows = frag.rows.reshape(32, per)
    cols = frag.cols.reshape(32, per)
    return rows, cols


@pytest.mark.parametrize("form", [f for f in MMA_FORMS if not f.quad_pairs], ids=str)
def test_fragment_tables_match_the_isa_formulas(form):
    for operand, doc in (("a", _a_doc), ("b", _b_doc), ("c", _c_doc)):
        frag = mma_fragment(form, operand)
        rows, cols = _table(frag)
        for lane in range(32):
            g, t = lane >> 2, lane & 3
            for i in range(rows.shape[1]):
                assert (rows[lane, i], cols[lane, i]) == doc(form, g, t, i), (operand, lane, i)
        assert frag.covers_once(), operand


def _m8n8k4_doc(form, operand, lane, i):
    """The ISA's m8n8k4 .f16 formulas (per product: rows and columns inside one 8x8x4 product), with
    the row block of the lane's product added (quad pair q = lane % 16 // 4: A and C/D rows 8q, B 4q)."""
    hi = lane >= 16
    q = (lane % 16) // 4
    a_lay, b_lay = form.layout
    if operand == "a":
        if a_lay == "row":
            r, c = (lane % 4 if not hi else lane % 4 + 4), i
        else:
            r, c = (i % 4 if not hi else i % 4 + 4), lane % 4
        return r + 8 * q, c
    if operand == "b":
        if b_lay == "row":
            r, c = lane % 4, (i % 4 if not hi else i % 4 + 4)
        else:
            r, c = i % 4, (lane % 4 if not hi else lane % 4 + 4)
        return r + 4 * q, c
    acc = form.c_type if operand == "c" else form.d_type
    if acc is T.f16:
        r, c = (lane % 4 if not hi else lane % 4 + 4), i
    else:
        x = lane % 2 + (i & 0x2)
        r, c = (x if not hi else x + 4), (i & 0x4) + (lane & 0x2) + (i & 0x1)
    return r + 8 * q, c


@pytest.mark.parametrize("form", [f for f in MMA_FORMS if f.quad_pairs], ids=str)
def test_m8n8k4_tables_match_the_isa_formulas(form):
    for operand in "abcd":
        frag = mma_fragment(form, operand)
        rows, cols = _table(frag)
        for lane in range(32):
            for i in range(rows.shape[1]):
                assert (rows[lane, i], cols[lane, i]) == _m8n8k4_doc(form, operand, lane, i), (operand, lane, i)
        assert frag.covers_once(), operand


def test_known_entries_from_the_notes():
    """Spot values of the PTX ISA's m16n8k64.s4 fragment tables (also checked on an H200)."""
    form = next(f for f in MMA_FORMS if f.shape == "m16n8k64" and f.a_type is T.s4 and f.b_type is T.s4)
    a = mma_fragment(form, "a")
    lane = 4 * 5 + 3  # g = 5, t = 3
    assert (a.rows[lane, 1, 0], a.cols[lane, 1, 0]) == (13, 24)  # a1 = (g+8, 8t)
    assert (a.rows[lane, 2, 7], a.cols[lane, 2, 7]) == (5, 32 + 24 + 7)  # a2 = (g, 32+8t+7)
    b = mma_fragment(form, "b")
    assert (b.rows[lane, 1, 0], b.cols[lane, 1, 0]) == (32 + 24, 5)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_matrix_layout(num, trans):
    lay = matrix_layout(num, trans)
    for lane in range(32):
        for j in range(num):
            want = [(lane // 4, 2 * (lane % 4) + h) for h in (0, 1)]
            if trans:
                want = [(c, r) for r, c in want]
            got = [(lay.rows[lane, j, h], lay.cols[lane, j, h]) for h in (0, 1)]
            assert got == want
    assert lay.address_lane(3, 5) == 29
