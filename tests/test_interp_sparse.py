"""The sparse tensor-core instructions on the interpreter: mma.sp / mma.sp::ordered_metadata (every form of
`SPARSE_MMA`) and wgmma.mma_async.sp, against numpy models that decompress A with the metadata as the PTX ISA
describes it (tests/support/sparse_probes.py), and the findings for metadata the ISA leaves undefined.

Each model run draws where every chunk's kept elements go, so ignoring the metadata fails; the lanes the
selector does not name hold garbage metadata, so reading another selector's lanes fails too.  A transposed A
(imm-trans-a) and negated inputs (imm-scale-a / imm-scale-b = -1) are checked to fail when the interpreter
ignores them.  Every kernel built here also goes through ptxas.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxforge import interp
from ptxforge.assembler import assemble, available_backends
from ptxforge.interp import exec_wgmma
from ptxforge.isa import types as T
from ptxforge.isa.sparse import SPARSE_MMA
from ptxforge.isa.wgmma import wgmma_form
from ptxforge.testing.interp_strategies import seeds

from support.sparse_probes import mma_sp_case, result_words, wgmma_sp_case

HAVE_PTXAS = "ptxas" in available_backends()
_ASSEMBLED = set()


def assembles(module, arch):
    """ptxas takes the kernel (once per distinct text); skipped without ptxas."""
    if not HAVE_PTXAS:
        pytest.skip("no ptxas")
    text = module.ptx
    if text not in _ASSEMBLED:
        assemble(text, arch, backend="ptxas")
        _ASSEMBLED.add(text)


@st.composite
def sparse_mma_forms(draw):
    """(form, B type, accumulator, selector, ordered, satfinite) over the whole mma.sp table."""
    form = draw(st.sampled_from(sorted(SPARSE_MMA.values(), key=lambda f: (f.shape, f.a_type.name))))
    b = draw(st.sampled_from(form.b_types))
    acc = draw(st.sampled_from(form.acc))
    sel = draw(st.integers(0, form.max_selector))
    return form, b, acc, sel, draw(st.booleans()), form.is_integer and draw(st.booleans())


def _run_mma_sp(case, **kw):
    interp.run(case.probe(), "mma_sp_probe", block=32, args=case.args, **kw)
    return case.args[4]


@settings(max_examples=80, deadline=None)
@given(spec=sparse_mma_forms(), seed=seeds())
def test_every_mma_sp_form_matches_the_decompressing_model(spec, seed):
    form, b, acc, sel, ordered, sat = spec
    case = mma_sp_case(form, b, acc, sel, ordered, sat, np.random.default_rng(seed))
    np.testing.assert_array_equal(_run_mma_sp(case), case.want)
    assembles(case.probe(), "sm_90")


def _moved(e, frm, to, per):
    """Metadata words with lanes 4g + to*per .. + per - 1 holding what lanes 4g + frm*per .. hold in `e`, and the
    lanes they came from holding the others' words (so each selector's lanes keep valid but different data)."""
    out = e.copy()
    for g in range(8):
        for j in range(per):
            a, b = 4 * g + frm * per + j, 4 * g + to * per + j
            out[a], out[b] = e[b], e[a]
    return out


@pytest.mark.parametrize("key", sorted(SPARSE_MMA, key=lambda k: (k[0], k[1].name)),
                         ids=lambda k: f"{k[0]}.{k[1].name}")
def test_the_selector_names_the_lanes_whose_metadata_is_read(key):
    """For every selector s: the metadata moved to the lanes of s, and the instruction's selector s, give the same
    D; the same words read with another selector (whose lanes then hold garbage) do not."""
    form = SPARSE_MMA[key]
    per = 4 // (form.max_selector + 1)
    rng = np.random.default_rng(7)
    case = mma_sp_case(form, form.b_types[0], form.acc[0], 0, True, False, rng)
    np.testing.assert_array_equal(_run_mma_sp(case), case.want)
    assembles(case.probe(), "sm_90")
    lenient = set(interp.DEFAULT_CHECKS) - {"sparse"}
    for sel in range(1, form.max_selector + 1):
        moved = mma_sp_case(form, form.b_types[0], form.acc[0], sel, True, False, np.random.default_rng(7))
        moved.args[3] = _moved(case.args[3], 0, sel, per)
        np.testing.assert_array_equal(_run_mma_sp(moved), case.want)
        assembles(moved.probe(), "sm_90")
        case.args[4] = np.zeros_like(case.args[4])
        stale = mma_sp_case(form, form.b_types[0], form.acc[0], 0, True, False, np.random.default_rng(7))
        stale.args[3] = moved.args[3]  # selector 0 now reads the lanes that hold garbage
        assert not np.array_equal(_run_mma_sp(stale, checks=lenient), case.want)
    if form.max_selector == 0:  # one selector: every lane of the group is read; garbage in any one changes D
        broken = mma_sp_case(form, form.b_types[0], form.acc[0], 0, True, False, np.random.default_rng(7))
        broken.args[3] = broken.args[3] ^ np.uint32(0x00C000C0) * (np.arange(32) % 4 == 3)
        assert not np.array_equal(_run_mma_sp(broken, checks=lenient), case.want)


def test_unordered_indices_place_each_kept_element_where_its_index_says():
    """Plain mma.sp takes indices in either order (only equal ones are undefined): 0b0001 puts the first kept
    element in column 1 and the second in column 0."""
    form = SPARSE_MMA[("m16n8k16", T.f16)]
    case = mma_sp_case(form, T.f16, T.f32, 0, True, False, np.random.default_rng(3))
    case.ordered = False  # drawn ascending, issued as plain mma.sp
    swapped = case.args[3].copy()
    for lane in range(0, 32, 4):  # selector 0: lane 4g holds all 8 nibbles of rows g, g + 8
        w = int(swapped[lane])
        nibs = [(w >> (4 * i)) & 15 for i in range(8)]
        swapped[lane] = sum((((n & 3) << 2) | (n >> 2)) << (4 * i) for i, n in enumerate(nibs))
    case.args[3] = swapped
    full = case.sparse.full.copy()
    for r in range(16):  # each chunk's two kept values trade columns
        cols = np.flatnonzero(case.sparse.full[r])
        full[r, cols[0::2]], full[r, cols[1::2]] = case.sparse.full[r, cols[1::2]], case.sparse.full[r, cols[0::2]]
    np.testing.assert_array_equal(_run_mma_sp(case), result_words(full @ case.B + case.C, T.f32, False))


@pytest.mark.parametrize("what, shape, a_type, ordered, nibble", [
    ("equal indices", "m16n8k32", T.f16, False, 0b0101),
    ("equal indices", "m16n8k32", T.s8, True, 0b1111),
    ("ordered descending", "m16n8k16", T.bf16, True, 0b0001),
    ("tf32 pattern", "m16n8k8", T.tf32, False, 0b1000),
    ("tf32 pattern", "m16n8k16", T.tf32, True, 0b1101),
    ("equal pair indices", "m16n8k128", T.u4, False, 0b1010),
])
def test_undefined_metadata_is_a_finding(what, shape, a_type, ordered, nibble):
    form = SPARSE_MMA[(shape, a_type)]
    case = mma_sp_case(form, form.b_types[0], form.acc[0], 0, ordered, False, np.random.default_rng(11))
    e = case.args[3].copy()
    e[4 * 5 + 0] = (int(e[20]) & ~(0xF << 4)) | (nibble << 4)  # lane 20 (group 5, selected): chunk 1 of row 5
    case.args[3] = e
    with pytest.raises(interp.InterpError, match=r"\[sparse\].*undefined") as info:
        _run_mma_sp(case)
    f = info.value.findings[0]
    assert f.kind == "sparse" and f.instruction.opcode == "mma.sp"
    assert [t.tid[0] for t in f.threads] == [20]
    # the same pattern without the bad nibble is clean
    ok = mma_sp_case(form, form.b_types[0], form.acc[0], 0, ordered, False, np.random.default_rng(11))
    np.testing.assert_array_equal(_run_mma_sp(ok), ok.want)


def test_satfinite_clamps_and_plain_mma_sp_wraps():
    form = SPARSE_MMA[("m16n8k64", T.s8)]
    for sat in (False, True):
        rng = np.random.default_rng(21)
        case = mma_sp_case(form, T.s8, T.s32, 0, False, sat, rng)
        assert (np.abs(case.sparse.full @ case.B + case.C) >= 2 ** 31).any()  # the draw overflows somewhere
        np.testing.assert_array_equal(_run_mma_sp(case), case.want)


# ---------------------------------------------------------------- wgmma.mma_async.sp

def _wgmma_sp_specs():
    out = []
    for a, b, d, n in (("f16", "f16", "f32", 16), ("f16", "f16", "f16", 24), ("bf16", "bf16", "f32", 8),
                       ("tf32", "tf32", "f32", 16), ("e4m3", "e5m2", "f32", 16), ("e5m2", "e5m2", "f16", 8),
                       ("s8", "s8", "s32", 16), ("u8", "s8", "s32", 24)):
        form = wgmma_form(n, a, b, d)
        for sel in form.sparse_selectors:
            for rs in (False, True):
                out.append((form, sel, rs))
    return out


@pytest.mark.parametrize("form, sel, rs", _wgmma_sp_specs(),
                         ids=lambda x: str(x) if not hasattr(x, "mnemonic") else x.mnemonic(sparse=True))
def test_wgmma_sp_matches_the_decompressing_model(form, sel, rs):
    for seed in (0, 1, 2):  # no swizzle; 32 bytes (B's 64 bytes of K span two atoms); 128 bytes
        case = wgmma_sp_case(form, sel, rs, np.random.default_rng(seed), swizzle=(0, 32, 128)[seed])
        interp.run(case.kernel, block=128, args=case.args)
        np.testing.assert_array_equal(case.out, case.want)
        assembles(case.kernel.module(), "sm_90a")


@settings(max_examples=30, deadline=None)
@given(spec=st.sampled_from(_wgmma_sp_specs()), seed=seeds(), swizzle=st.sampled_from([0, 32, 64, 128]),
       satfinite=st.booleans(), trans_b=st.booleans())
def test_wgmma_sp_drawn(spec, seed, swizzle, satfinite, trans_b):
    form, sel, rs = spec
    sat = satfinite and form.satfinite_ok
    tb = trans_b and form.transposable
    case = wgmma_sp_case(form, sel, rs, np.random.default_rng(seed), swizzle=swizzle, satfinite=sat, trans_b=tb)
    interp.run(case.kernel, block=128, args=case.args)
    np.testing.assert_array_equal(case.out, case.want)
    assembles(case.kernel.module(), "sm_90a")


def test_wgmma_sp_undefined_metadata_is_a_finding():
    form = wgmma_form(16, "s8", "s8", "s32")
    case = wgmma_sp_case(form, 0, True, np.random.default_rng(4), bad_lane=32 + 6)
    with pytest.raises(interp.InterpError, match=r"\[sparse\].*equal") as info:
        interp.run(case.kernel, block=128, args=case.args)
    assert info.value.findings[0].instruction.opcode == "wgmma.sp"
    assert [t.tid[0] for t in info.value.findings[0].threads] == [38]



# ---------------------------------------------------------------- wgmma.mma_async.sp: transposed A, negated inputs

def _k_major_a(monkeypatch):
    """Make the interpreter read a sparse wgmma's shared A K-major whatever imm-trans-a says (A is the operand of 32
    bytes of K a row; a sparse B reads 64)."""
    read = exec_wgmma.read_descriptor_operand

    def k_major(S, op, desc, rows, elem_bits, mn_major, thr0, kbytes=32):
        return read(S, op, desc, rows, elem_bits, mn_major and kbytes != 32, thr0, kbytes)
    monkeypatch.setattr(exec_wgmma, "read_descriptor_operand", k_major)


def _unscaled(monkeypatch, which):
    """Make the interpreter multiply as if imm-scale-`which` ('a' or 'b') were 1."""
    acc = exec_wgmma.accumulate

    def unscaled(info, *a, **kw):
        return acc(dataclasses.replace(info, **{f"scale_{which}": 1}), *a, **kw)
    monkeypatch.setattr(exec_wgmma, "accumulate", unscaled)


_LENIENT_OOB = set(interp.DEFAULT_CHECKS) - {"oob"}  # a wrong reading of a descriptor may leave the tile


def _trans_a_forms():
    return [pytest.param(wgmma_form(n, a, a, d), id=f"{a}.{d}.n{n}")
            for a, d, n in (("f16", "f32", 16), ("f16", "f16", 64), ("bf16", "f32", 8), ("bf16", "f32", 256))]


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("form", _trans_a_forms())
def test_wgmma_sp_transposed_a_matches_the_decompressing_model(form, swizzle, monkeypatch):
    """imm-trans-a = 1: the stored half of A (64 x K/2) sits MN-major in shared memory as its descriptor says (M
    contiguous, every swizzle); the interpreter's D is the model's, for both selectors.  Read K-major instead (the
    transpose ignored), the same launch gives another D."""
    for sel in form.sparse_selectors:
        case = wgmma_sp_case(form, sel, False, np.random.default_rng(10 + sel), swizzle=swizzle, trans_a=True)
        interp.run(case.kernel, block=128, args=case.args)
        np.testing.assert_array_equal(case.out, case.want)
        assembles(case.kernel.module(), "sm_90a")
    with monkeypatch.context() as mp:
        _k_major_a(mp)
        ignored = wgmma_sp_case(form, 0, False, np.random.default_rng(10), swizzle=swizzle, trans_a=True)
        interp.run(ignored.kernel, block=128, args=ignored.args, checks=_LENIENT_OOB)
        assert not np.array_equal(ignored.out, ignored.want)


def test_wgmma_sp_transposed_a_with_transposed_b():
    """Both operands MN-major in one wgmma.sp."""
    for a in ("f16", "bf16"):
        form = wgmma_form(24, a, a, "f32")
        case = wgmma_sp_case(form, 1, False, np.random.default_rng(3), swizzle=128, trans_a=True, trans_b=True)
        interp.run(case.kernel, block=128, args=case.args)
        np.testing.assert_array_equal(case.out, case.want)
        assembles(case.kernel.module(), "sm_90a")


_SCALES = [(-1, 1), (1, -1), (-1, -1)]


def _float_sp_specs():
    return [pytest.param(form, sel, rs, id=f"{form.mnemonic(sparse=True)}-sel{sel}-{'RS' if rs else 'SS'}")
            for form, sel, rs in _wgmma_sp_specs() if not form.is_integer]


@pytest.mark.parametrize("scale_a, scale_b", _SCALES)
@pytest.mark.parametrize("form, sel, rs", _float_sp_specs())
def test_wgmma_sp_negated_inputs_match_the_decompressing_model(form, sel, rs, scale_a, scale_b, monkeypatch):
    """imm-scale-a / imm-scale-b = -1 negate A / B (every float form, A from registers or shared memory): D =
    scale_a scale_b A.B + C.  The model with the scales ignored is another D, and so is the interpreter's when it
    ignores either scale that is -1."""
    case = wgmma_sp_case(form, sel, rs, np.random.default_rng(20 + sel), swizzle=64, scale_a=scale_a,
                         scale_b=scale_b)
    interp.run(case.kernel, block=128, args=case.args)
    np.testing.assert_array_equal(case.out, case.want)
    assembles(case.kernel.module(), "sm_90a")
    if scale_a * scale_b == -1:
        assert not np.array_equal(case.reference(sign=1), case.want)
    for which, scale in (("a", scale_a), ("b", scale_b)):
        if scale == 1:
            continue
        with monkeypatch.context() as mp:
            _unscaled(mp, which)
            again = wgmma_sp_case(form, sel, rs, np.random.default_rng(20 + sel), swizzle=64, scale_a=scale_a,
                                  scale_b=scale_b)
            interp.run(again.kernel, block=128, args=again.args)
            assert not np.array_equal(again.out, again.want)
            np.testing.assert_array_equal(again.out, again.reference(sign=-scale_a * scale_b))


@settings(max_examples=25, deadline=None)
@given(form=st.sampled_from([wgmma_form(n, a, a, d) for a, d in (("f16", "f32"), ("f16", "f16"), ("bf16", "f32"))
                             for n in (8, 32, 128)]),
       sel=st.integers(0, 1), seed=seeds(), swizzle=st.sampled_from([0, 32, 64, 128]),
       scales=st.sampled_from([(1, 1)] + _SCALES), trans_b=st.booleans())
def test_wgmma_sp_transposed_a_drawn(form, sel, seed, swizzle, scales, trans_b):
    """Transposed A with any swizzle, N, selector, scales and B major-ness."""
    case = wgmma_sp_case(form, sel, False, np.random.default_rng(seed), swizzle=swizzle, trans_a=True,
                         trans_b=trans_b, scale_a=scales[0], scale_b=scales[1])
    interp.run(case.kernel, block=128, args=case.args)
    np.testing.assert_array_equal(case.out, case.want)
    assembles(case.kernel.module(), "sm_90a")
