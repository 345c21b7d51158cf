"""Floating-point accuracy of wgmma: the interpreter against the exact result (fractions) over
Hypothesis-drawn operands of every float type, within `exec_wgmma.wgmma_error_bound`; on the device,
the H200's result within the device bound of the interpreter's.

    PTXFORGE_REQUIRE_GPU=1 python -m pytest -q tests/test_interp_wgmma_accuracy.py -m gpu
"""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import Phase, given, settings, strategies as st

from ptxforge import interp
from ptxforge.interp.exec_wgmma import decode, wgmma_error_bound
from ptxforge.isa import types as T
from ptxforge.isa.wgmma import WGMMA_FORMS, accumulator_layout
from ptxforge.testing.interp_strategies import seeds
from ptxforge.testing.wgmma_probe import wgmma_case

FLOAT_COMBOS = sorted({(f.a_type.name, f.b_type.name, f.d_type.name) for f in WGMMA_FORMS if not f.is_integer})


def _form(combo, n=16):
    return next(f for f in WGMMA_FORMS if (f.a_type.name, f.b_type.name, f.d_type.name) == combo and f.n == n)


def _values(case, words):
    """The 64 x N accumulator values a probe's output words hold (float64)."""
    f = case.form
    rows, cols = accumulator_layout(f)
    w = np.asarray(words, np.uint32).reshape(128, f.d_regs)
    D = np.zeros((64, f.n))
    if f.d_type is T.f16:
        D[rows, cols] = w.view(np.uint16).reshape(128, -1, 2).view(np.float16)
    else:
        D[rows[..., 0], cols[..., 0]] = w.view(np.float32)
    return D


def _exact(case):
    """(exact D as Fractions in a 64 x N object array, S = sum |a b| + |C| in float64)."""
    f = case.form
    A, B = decode(case.A, f.a_type), decode(case.B, f.b_type)
    C = _values(case, case.args[5]) if case.scale_d else np.zeros((64, f.n))
    exact = np.empty((64, f.n), dtype=object)
    for i in range(64):
        a = [Fraction(x) for x in A[i]]
        for j in range(f.n):
            exact[i, j] = sum((x * Fraction(y) for x, y in zip(a, B[j])), Fraction(C[i, j])) * case.sign
    S = np.abs(A) @ np.abs(B).T + np.abs(C)
    return exact, S


def _case(combo, seed, rs, scale_d, k_slices):
    form = _form(combo)
    return wgmma_case(form, np.random.default_rng(seed), rs=rs, swizzle_a=0 if rs else 32, swizzle_b=32,
                      scale_d=scale_d, k_slices=k_slices, wide=True)


@settings(max_examples=40, deadline=None)
@given(combo=st.sampled_from(FLOAT_COMBOS), seed=seeds(), rs=st.booleans(), scale_d=st.sampled_from((0, 1)),
       k_slices=st.integers(1, 4))
def test_the_interpreter_stays_within_its_documented_bound(combo, seed, rs, scale_d, k_slices):
    case = _case(combo, seed, rs, scale_d, k_slices)
    interp.run(case.kernel, block=128, args=case.args)
    got = _values(case, case.out)
    exact, S = _exact(case)
    rel, absolute = wgmma_error_bound(case.form, k_slices)
    err = np.abs(np.array([[float(Fraction(g) - e) for g, e in zip(gr, er)] for gr, er in zip(got, exact)]))
    assert (err <= rel * S + absolute).all(), float((err / (rel * S + absolute)).max())


def test_the_bound_is_not_loose_enough_to_hide_a_rounding_in_the_wrong_type():
    """An f32-accumulating result rounded through f16 breaks the f32 bound: the check can fail."""
    case = _case(("f16", "f16", "f32"), 3, False, 1, 2)
    interp.run(case.kernel, block=128, args=case.args)
    exact, S = _exact(case)
    coarse = _values(case, case.out).astype(np.float16).astype(np.float64)
    rel, absolute = wgmma_error_bound(case.form, 2)
    err = np.abs(np.array([[float(Fraction(g) - e) for g, e in zip(gr, er)] for gr, er in zip(coarse, exact)]))
    assert not (err <= rel * S + absolute).all()


@pytest.mark.gpu
@settings(max_examples=30, deadline=None, phases=(Phase.explicit, Phase.generate))
@given(combo=st.sampled_from(FLOAT_COMBOS), seed=seeds(), rs=st.booleans(), scale_d=st.sampled_from((0, 1)),
       k_slices=st.integers(1, 4))
def test_the_gpu_stays_within_the_device_bound_of_the_interpreter(combo, seed, rs, scale_d, k_slices):
    import ptxforge as pf
    case = _case(combo, seed, rs, scale_d, k_slices)
    gpu = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    m = case.kernel.module()
    pf.load(m)[m.kernels[0].name](1, 128, *gpu)
    interp.run(m, block=128, args=cpu)
    g, c = _values(case, gpu[6]), _values(case, cpu[6])
    _, S = _exact(case)
    rel, absolute = wgmma_error_bound(case.form, k_slices, device=True)
    ratio = np.abs(g - c) / (rel * S + absolute)
    print(f"{combo} k_slices={k_slices}: max |gpu - interp| / device bound = {ratio.max():.3g}")
    assert (ratio <= 1).all(), f"{combo}: |gpu - interp| reaches {ratio.max():.3g} x the documented device bound"
