"""The sparse tensor-core probes of test_interp_sparse.py on a GPU and on the interpreter: mma.sp (every form of
`SPARSE_MMA`, every selector, ordered and plain metadata) and wgmma.mma_async.sp (registers and shared-memory A,
swizzles, a transposed B, a transposed A, negated A and B) give the same D words.  Integer forms are compared bit
for bit; float forms too where the drawn values keep every sum exact in the accumulator (f32), and within the dense
forms' tolerance for f16 accumulators (a tensor core may round partial f16 sums differently)."""

import numpy as np
import pytest
from hypothesis import given, settings

from ptxforge.isa import types as T
from ptxforge.isa.sparse import SPARSE_MMA
from ptxforge.isa.wgmma import wgmma_form
from ptxforge.testing.interp_strategies import seeds

from support.sparse_probes import acc_values, mma_sp_case, wgmma_acc_positions, wgmma_sp_case
from test_interp_gpu import FLOAT_TOL, both
from test_interp_sparse import _wgmma_sp_specs, sparse_mma_forms

pytestmark = pytest.mark.gpu


def _compare_mma_sp(case):
    gpu, cpu = both(case.probe(), "mma_sp_probe", 1, 32, case.args)
    if case.acc is not T.f16:
        np.testing.assert_array_equal(gpu[4], cpu[4])
        np.testing.assert_array_equal(gpu[4], case.want)  # and both are the ISA model's
        return
    rtol, atol = FLOAT_TOL[T.f16]
    np.testing.assert_allclose(acc_values(gpu[4], T.f16), acc_values(cpu[4], T.f16), rtol=rtol, atol=atol)


@settings(max_examples=60, deadline=None)
@given(spec=sparse_mma_forms(), seed=seeds())
def test_mma_sp_forms_gpu_vs_interpreter(spec, seed):
    form, b, acc, sel, ordered, sat = spec
    _compare_mma_sp(mma_sp_case(form, b, acc, sel, ordered, sat, np.random.default_rng(seed)))


def _every_selector():
    out = []
    for key, form in sorted(SPARSE_MMA.items(), key=lambda kv: (kv[0][0], kv[0][1].name)):
        for sel in range(form.max_selector + 1):
            for ordered in (False, True):
                out.append(pytest.param(form, sel, ordered, id=f"{key[0]}.{key[1].name}-sel{sel}-"
                                                               f"{'ordered' if ordered else 'plain'}"))
    return out


@pytest.mark.parametrize("form, sel, ordered", _every_selector())
def test_every_mma_sp_form_selector_and_metadata_order_gpu_vs_interpreter(form, sel, ordered):
    """Garbage in the lanes the selector does not name, indices in either order under plain mma.sp."""
    for acc in form.acc:
        for b in form.b_types:
            _compare_mma_sp(mma_sp_case(form, b, acc, sel, ordered, False, np.random.default_rng(sel * 2 + ordered)))


def _wgmma_values(words, form):
    rows, cols = wgmma_acc_positions(form)
    w = words.reshape(128, form.d_regs)
    el = np.ascontiguousarray(w).view(np.float16) if form.d_type is T.f16 else w.view(np.float32)
    out = np.zeros((64, form.n))
    out[rows, cols] = el.astype(np.float64)
    return out


def _compare_wgmma_sp(case, form):
    name = f"wgmma_sp_probe_{form.a_type.name}_{form.d_type.name}"
    gpu, cpu = both(case.kernel.module(), name, 1, 128, case.args)
    if form.d_type is not T.f16:
        np.testing.assert_array_equal(gpu[6], cpu[6])
        np.testing.assert_array_equal(gpu[6], case.want)
        return
    rtol, atol = FLOAT_TOL[T.f16]
    np.testing.assert_allclose(_wgmma_values(gpu[6], form), _wgmma_values(cpu[6], form), rtol=rtol, atol=atol)


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("form, sel, rs", _wgmma_sp_specs(),
                         ids=lambda x: str(x) if not hasattr(x, "mnemonic") else x.mnemonic(sparse=True))
def test_wgmma_sp_gpu_vs_interpreter(form, sel, rs, swizzle):
    for seed in (1, 2):
        _compare_wgmma_sp(wgmma_sp_case(form, sel, rs, np.random.default_rng(seed), swizzle=swizzle,
                                        satfinite=form.satfinite_ok and seed == 2), form)


@pytest.mark.parametrize("a", ["f16", "bf16"])
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
def test_wgmma_sp_transposed_b_gpu_vs_interpreter(a, rs):
    form = wgmma_form(16, a, a, "f32")
    for sel in (0, 1):
        _compare_wgmma_sp(wgmma_sp_case(form, sel, rs, np.random.default_rng(sel + 5), trans_b=True), form)


_SIXTEEN_BIT = [pytest.param(a, d, id=f"{a}.{d}") for a, d in (("f16", "f32"), ("f16", "f16"), ("bf16", "f32"))]


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("n", [16, 64])
@pytest.mark.parametrize("a, d", _SIXTEEN_BIT)
def test_wgmma_sp_transposed_a_gpu_vs_interpreter(a, d, n, swizzle):
    """imm-trans-a = 1: the stored half of A MN-major in shared memory, every swizzle, both selectors."""
    form = wgmma_form(n, a, a, d)
    for sel in (0, 1):
        _compare_wgmma_sp(wgmma_sp_case(form, sel, False, np.random.default_rng(sel + 7), swizzle=swizzle,
                                        trans_a=True), form)


@pytest.mark.parametrize("scale_a, scale_b", [(-1, 1), (1, -1), (-1, -1)], ids=["negA", "negB", "negAB"])
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
@pytest.mark.parametrize("n", [16, 64])
@pytest.mark.parametrize("a, d", _SIXTEEN_BIT)
def test_wgmma_sp_negated_inputs_gpu_vs_interpreter(a, d, n, rs, scale_a, scale_b):
    """imm-scale-a / imm-scale-b = -1, A from registers or from a 64-byte swizzled tile."""
    form = wgmma_form(n, a, a, d)
    for sel in (0, 1):
        _compare_wgmma_sp(wgmma_sp_case(form, sel, rs, np.random.default_rng(sel + 9), swizzle=64, scale_a=scale_a,
                                        scale_b=scale_b), form)


@pytest.mark.parametrize("a", ["f16", "bf16"])
def test_wgmma_sp_transposed_a_and_b_negated_gpu_vs_interpreter(a):
    """Both operands MN-major and A negated in one wgmma.sp."""
    form = wgmma_form(24, a, a, "f32")
    for sel in (0, 1):
        _compare_wgmma_sp(wgmma_sp_case(form, sel, False, np.random.default_rng(sel + 11), swizzle=128, trans_a=True,
                                        trans_b=True, scale_a=-1), form)
