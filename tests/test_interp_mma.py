"""Every mma.sync form and every ldmatrix / stmatrix form, on the interpreter, against numpy models.

mma: a one-warp kernel loads each lane's A, B and C fragment registers from global memory,
issues the mma and stores D; the model decodes the same words into matrices with the
documented fragment layouts (ptxforge.isa.fragments, itself checked against the PTX ISA
formulas in test_interp_layouts.py), multiplies with numpy and encodes D.

ldmatrix / stmatrix: the row addresses are a random permutation of 16-byte shared rows; the
model follows the PTX ISA text directly (matrix j row r from lane 8j+r; lane l holds row l/4,
elements 2(l%4) and 2(l%4)+1, or the transpose).
"""

import numpy as np
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import b32, u32
from ptxforge import interp
from ptxforge.isa.fragments import mma_fragment, pack_fragment, unpack_fragment
from ptxforge.isa import types as T
from ptxforge.testing.interp_strategies import ldmatrix_forms, mma_forms, poison, seeds, stmatrix_forms

from support.interp_probes import accumulator_words, decode_values, encode_values, ldmatrix_probe, mma_probe, random_words


def mma_model(form, aw, bw, cw, satfinite):
    """D words from A, B, C words, by the documented layouts."""
    fa, fb, fc = (mma_fragment(form, x) for x in "abc")
    if form.a_type.is_int or form.bitop:
        A = unpack_fragment(fa, aw, signed=form.a_type.kind == "s")
        B = unpack_fragment(fb, bw, signed=form.b_type.kind == "s")
        C = unpack_fragment(fc, cw, signed=True)
        if form.bitop == "xor":
            P = (A[:, :, None] ^ B[None, :, :]).sum(axis=1)
        elif form.bitop == "and":
            P = (A[:, :, None] & B[None, :, :]).sum(axis=1)
        else:
            P = A @ B
        D = P + C
        D = np.clip(D, -2 ** 31, 2 ** 31 - 1) if satfinite else ((D + 2 ** 31) % 2 ** 32) - 2 ** 31
        return pack_fragment(fc, D), None
    fd = mma_fragment(form, "d")
    A = decode_values(unpack_fragment(fa, aw), form.a_type)
    B = decode_values(unpack_fragment(fb, bw), form.b_type)
    C = decode_values(unpack_fragment(fc, cw), form.c_type)
    n = fa.blocks  # m8n8k4 .f16: four products, stacked by rows
    D = (A.reshape(n, form.m, form.k) @ B.reshape(n, form.k, form.n)).reshape(C.shape) + C
    return pack_fragment(fd, encode_values(D, form.d_type)), D


@given(form=mma_forms(), sat=st.booleans(), seed=seeds())
def test_every_mma_form_matches_the_layout_model(form, sat, seed):
    satfinite = sat and form.satfinite
    rng = np.random.default_rng(seed)
    fa, fb, fc = (mma_fragment(form, x) for x in "abc")
    aw = random_words(rng, form, fa, form.a_type)
    bw = random_words(rng, form, fb, form.b_type)
    cw = accumulator_words(rng, form, fc)
    frag_dt = np.uint64 if form.a_type is T.f64 else np.uint32
    acc_dt = np.uint64 if form.d_type is T.f64 else np.uint32
    a, b, c = aw.astype(frag_dt), bw.astype(frag_dt), cw.astype(np.uint64 if form.c_type is T.f64 else np.uint32)
    d = poison(np.empty((32, form.d_regs), dtype=acc_dt))
    interp.run(mma_probe(form, satfinite), block=32, args=[a, b, c, d])
    want, Dfloat = mma_model(form, aw, bw, cw, satfinite)
    if Dfloat is None:
        np.testing.assert_array_equal(d, want.astype(acc_dt))
    else:
        got = decode_values(unpack_fragment(mma_fragment(form, "d"), d.astype(np.uint64)), form.d_type)
        tol = 2e-3 if form.d_type is T.f16 else 1e-6
        np.testing.assert_allclose(got, Dfloat, rtol=tol, atol=tol * 8)


def test_satfinite_clamps_and_plain_wraps():
    """A known answer without the layout tables: every A, B element 7 (s4), C at the int32 limit."""
    form = next(f for f in pf.isa.tensor.MMA_FORMS if f.shape == "m16n8k64" and f.a_type is T.s4 and f.b_type is T.s4)
    a = np.full((32, 4), 0x77777777, dtype=np.uint32)
    b = np.full((32, 2), 0x77777777, dtype=np.uint32)
    c = np.full((32, 4), 2 ** 31 - 100, dtype=np.uint32)
    for sat, want in ((True, 2 ** 31 - 1), (False, (2 ** 31 - 100 + 64 * 49) - 2 ** 32)):
        d = poison(np.empty((32, 4), np.uint32))
        interp.run(mma_probe(form, sat), block=32, args=[a, b, c, d])
        assert (d.view(np.int32) == want).all()


# ---------------------------------------------------------------- ldmatrix / stmatrix

def ldmatrix_model(rows, slots, num, trans):
    """rows: (nslots, 8) uint16; returns (32, num) uint32 per the PTX ISA text."""
    out = np.zeros((32, num), dtype=np.uint32)
    for j in range(num):
        mat = rows[slots[8 * j:8 * j + 8]]  # matrix j: row r from lane 8j + r
        for lane in range(32):
            if not trans:
                lo, hi = mat[lane // 4, 2 * (lane % 4)], mat[lane // 4, 2 * (lane % 4) + 1]
            else:
                lo, hi = mat[2 * (lane % 4), lane // 4], mat[2 * (lane % 4) + 1, lane // 4]
            out[lane, j] = int(lo) | (int(hi) << 16)
    return out


@given(form=ldmatrix_forms(), seed=seeds())
def test_every_ldmatrix_form(form, seed):
    rng = np.random.default_rng(seed)
    nslots = 48
    rows = rng.integers(0, 2 ** 16, size=(nslots, 8), dtype=np.uint16)
    slots = rng.permutation(nslots)[:32].astype(np.uint32)
    out = poison(np.empty((32, form.num), np.uint32))
    interp.run(ldmatrix_probe(form, nslots), block=32, args=[rows, slots, out])
    np.testing.assert_array_equal(out, ldmatrix_model(rows, slots, form.num, form.trans))


def stmatrix_probe(form, nslots):
    k = pf.KernelBuilder("stmatrix_probe", target="sm_90", reqntid=32)
    vals, slots, out = k.param_ptr("vals", pf.b8), k.param_ptr("slots", u32), k.param_ptr("out", pf.b8)
    tile = k.shared("tile", nslots * 16, align=16)
    lane = k.laneid()
    base = k.shared_base(tile)
    zero = k.mov(0, type=b32)
    with k.for_range(lane, nslots, 32, uniform=False) as i:
        k.st(k.add(base, k.shl(i, 4)), [zero] * 4, type=b32, space="shared")
    k.bar_sync(0)
    regs = k.ld(k.add(vals, k.mul(lane, 4 * form.num, mode="wide")), type=b32, vec=form.num)
    slot = k.ld(k.add(slots, k.mul(lane, 4, mode="wide")), type=u32)
    k.stmatrix(k.add(base, k.shl(slot, 4)), list(regs) if form.num > 1 else [regs], trans=form.trans)
    k.bar_sync(0)
    with k.for_range(lane, nslots, 32, uniform=False) as i:
        v = k.ld(k.add(base, k.shl(i, 4)), type=b32, space="shared", vec=4)
        k.st(k.add(out, k.mul(i, 16, mode="wide")), list(v), type=b32)
    return k.module()


@given(form=stmatrix_forms(), seed=seeds())
def test_every_stmatrix_form_inverts_ldmatrix(form, seed):
    rng = np.random.default_rng(seed)
    nslots = 40
    words = rng.integers(0, 2 ** 32, size=(32, form.num), dtype=np.uint32)
    slots = rng.permutation(nslots)[:32].astype(np.uint32)
    out = poison(np.empty((nslots, 8), np.uint16))
    interp.run(stmatrix_probe(form, nslots), block=32, args=[words, slots, out])
    used = slots[:8 * form.num]
    # reading the stored rows back with the ldmatrix model gives the words again
    np.testing.assert_array_equal(ldmatrix_model(out, slots, form.num, form.trans), words)
    unused = np.setdiff1d(np.arange(nslots), used)
    assert (out[unused] == 0).all()


def test_m16n16_ldmatrix_is_refused_clearly():
    form = next(f for f in pf.isa.memory.LDMATRIX_FORMS if f.shape == "m16n16")
    k = pf.KernelBuilder("ld16", target="sm_100a", reqntid=32)
    tile = k.shared("tile", 512, align=16)
    k.ldmatrix(k.shared_base(tile), shape="m16n16", num=form.num, trans=True, type="b8")
    try:
        interp.run(k.module(), block=32, args=[])
    except interp.InterpUnsupported as e:
        assert "m16n16" in str(e) and "test_interp_mma.py" in str(e)
    else:
        raise AssertionError("m16n16 ldmatrix must be refused")


def test_m8n8k4_is_four_products_one_per_quad_pair():
    """m8n8k4 .f16: a known answer built without the stacked-fragment tables.  Quad pair q holds
    A = q+1 everywhere and B = identity-like rows; each lane pair's D is that product plus C."""
    for layout in (("row", "col"), ("col", "row"), ("row", "row"), ("col", "col")):
        form = pf.isa.tensor.mma_form("m8n8k4", "f16", acc="f32", layout=layout)
        lane = np.arange(32)
        q = (lane >> 2) & 3
        # every A element of pair q is q+1, every B element 0.5: D = 4 * (q+1) * 0.5 + C = 2(q+1) + 1
        a = np.repeat(((np.float16(1) * (q + 1)).astype(np.float16).view(np.uint16).astype(np.uint32) * 0x10001)
                      [:, None], 2, axis=1).astype(np.uint32)
        b = np.full((32, 2), np.float16(0.5).view(np.uint16).astype(np.uint32) * 0x10001, np.uint32)
        c = np.full((32, 8), np.float32(1.0).view(np.uint32), np.uint32)
        d = poison(np.empty((32, 8), np.uint32))
        interp.run(mma_probe(form, False), block=32, args=[a, b, c, d])
        np.testing.assert_array_equal(d.view(np.float32), np.repeat((2.0 * (q + 1) + 1)[:, None], 8, axis=1))


def test_m8n8k4_fragments_cover_each_stacked_product_once():
    for f in pf.isa.tensor.MMA_FORMS:
        if f.quad_pairs:
            for x in "abcd":
                frag = mma_fragment(f, x)
                assert frag.blocks == 4 and frag.covers_once(), (f, x)
