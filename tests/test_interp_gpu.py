"""GPU differential: the same drawn kernels on the same data, on the GPU and in the interpreter.
Integer results must be identical; floating-point results agree within the tensor core's
rounding.  Outputs are poisoned before both runs."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa.fragments import mma_fragment, unpack_fragment
from ptxforge.int4 import pack_int4
from ptxforge.isa import types as T
from ptxforge.testing.interp_strategies import ldmatrix_forms, mma_forms, poison, seeds

from support.interp_probes import (accumulator_words, decode_values, ldmatrix_probe, mma_probe, random_words,
                                   shfl_probe, zero_fill_probe)
from support.samples import Int4GemmSample

pytestmark = pytest.mark.gpu


def both(module, kernel, grid, block, args, shared=0):
    """Run on the GPU and in the interpreter, each on its own copy of the arguments."""
    gpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    pf.load(module)[kernel](grid, block, *gpu, shared=shared)
    interp.run(module, kernel, grid=grid, block=block, args=cpu, shared=shared)
    return gpu, cpu


FLOAT_TOL = {T.f16: (5e-3, 5e-2), T.f32: (2e-5, 1e-4), T.f64: (1e-12, 1e-12)}


@given(form=mma_forms(), sat=st.booleans(), seed=seeds())
def test_mma_forms_gpu_vs_interpreter(form, sat, seed):
    _mma_gpu_vs_interpreter(form, sat, seed)


def _m8n8k4_forms():
    from ptxforge.isa.tensor import MMA_FORMS
    return [f for f in MMA_FORMS if f.shape == "m8n8k4" and f.a_type is T.f16]


@pytest.mark.parametrize("form", _m8n8k4_forms(), ids=str)
def test_every_m8n8k4_f16_form_gpu_vs_interpreter(form):
    """The four-products-per-warp m8n8k4 (its stacked fragment layouts), every layout and accumulator."""
    for seed in (1, 2):
        _mma_gpu_vs_interpreter(form, False, seed)


def _mma_gpu_vs_interpreter(form, sat, seed):
    satfinite = sat and form.satfinite
    rng = np.random.default_rng(seed)
    fa, fb, fc = (mma_fragment(form, x) for x in "abc")
    frag_dt = np.uint64 if form.a_type is T.f64 else np.uint32
    acc_dt = np.uint64 if form.d_type is T.f64 else np.uint32
    a = random_words(rng, form, fa, form.a_type).astype(frag_dt)
    b = random_words(rng, form, fb, form.b_type).astype(frag_dt)
    c = accumulator_words(rng, form, fc).astype(acc_dt)
    d = poison(np.empty((32, form.d_regs), acc_dt))
    gpu, cpu = both(mma_probe(form, satfinite), "mma_probe", 1, 32, [a, b, c, d])
    if form.a_type.is_int or form.bitop:
        np.testing.assert_array_equal(gpu[3], cpu[3])
        return
    fd = mma_fragment(form, "d")
    g = decode_values(unpack_fragment(fd, gpu[3].astype(np.uint64)), form.d_type)
    h = decode_values(unpack_fragment(fd, cpu[3].astype(np.uint64)), form.d_type)
    rtol, atol = FLOAT_TOL[form.d_type]
    if form.a_type is T.tf32:
        rtol, atol = 5e-3, 5e-2  # the tensor core may round tf32 operands where the model truncates
    np.testing.assert_allclose(g, h, rtol=rtol, atol=atol)


@given(form=ldmatrix_forms(), seed=seeds())
def test_ldmatrix_gpu_vs_interpreter(form, seed):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2 ** 16, size=(48, 8), dtype=np.uint16)
    slots = rng.permutation(48)[:32].astype(np.uint32)
    out = poison(np.empty((32, form.num), np.uint32))
    gpu, cpu = both(ldmatrix_probe(form, 48), "ldmatrix_probe", 1, 32, [rows, slots, out])
    np.testing.assert_array_equal(gpu[2], cpu[2])


@given(m=st.integers(1, 200), n=st.integers(1, 200), k=st.sampled_from([32, 64, 96, 128, 256, 512]),
       path=st.sampled_from(["s8", "s4"]), seed=seeds())
def test_int4_gemm_gpu_vs_interpreter(m, n, k, path, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 8, (m, k))
    b = rng.integers(-8, 8, (n, k))
    cfg = Int4GemmSample(path=path)
    c = poison(np.empty((m, n), np.int32))
    gpu, cpu = both(cfg.module(), "int4_gemm", cfg.grid(m, n), cfg.threads, [pack_int4(a), pack_int4(b), c, m, n, k])
    np.testing.assert_array_equal(gpu[2], cpu[2])
    np.testing.assert_array_equal(cpu[2], a @ b.T)


@given(mode=st.sampled_from(["up", "down", "bfly", "idx"]), b=st.integers(0, 31),
       width=st.sampled_from([1, 2, 4, 8, 16, 32]), clamp=st.integers(0, 31), seed=seeds())
def test_shfl_gpu_vs_interpreter(mode, b, width, clamp, seed):
    c = ((32 - width) << 8) | clamp
    vals = np.random.default_rng(seed).integers(0, 2 ** 32, 64, dtype=np.uint32)
    out, outp = poison(np.empty(64, np.uint32)), poison(np.empty(64, np.uint32))
    gpu, cpu = both(shfl_probe(mode, b, c, True), "shfl_probe", 1, 64, [vals, out, outp])
    np.testing.assert_array_equal(gpu[1], cpu[1])
    np.testing.assert_array_equal(gpu[2], cpu[2])


@given(size=st.sampled_from([4, 8, 16]), mode=st.sampled_from(["reg", "imm3", "ignore"]), seed=seeds())
def test_cp_async_zero_fill_gpu_vs_interpreter(size, mode, seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, 64 * size, dtype=np.uint8)
    ns = rng.integers(0, size + 1, 64).astype(np.uint32)
    dst = poison(np.empty(64 * size, np.uint8))
    gpu, cpu = both(zero_fill_probe(size, mode), "zfill", 1, 64, [src, dst, ns])
    np.testing.assert_array_equal(gpu[1], cpu[1])


@given(seed=seeds())
def test_mul24_and_sad_gpu_vs_interpreter(seed):
    """mul24 (.lo/.hi x .u32/.s32) and sad (every integer type) on drawn operands, bit for bit."""
    rng = np.random.default_rng(seed)
    for t in (T.u16, T.s16, T.u32, T.s32, T.u64, T.s64):
        dt = np.dtype(f"{'i' if t.kind == 's' else 'u'}{t.bits // 8}")
        ops = [rng.integers(0, 2 ** 63, 64, dtype=np.uint64).astype(dt) for _ in range(3)]
        forms = [("sad", None)] + ([("mul24", "lo"), ("mul24", "hi")] if t.bits == 32 else [])
        for op, mode in forms:
            k = pf.KernelBuilder(f"{op}_{mode}_{t.name}", target="sm_80", reqntid=64)
            ptrs = [k.param_ptr(f"p{i}", t) for i in range(4)]
            off = k.mul(k.tid(), t.bits // 8, mode="wide")
            vals = [k.ld(k.add(p, off), type=t) for p in ptrs[:3]]
            r = k.sad(*vals) if op == "sad" else k.mul24(vals[0], vals[1], mode=mode)
            k.st(k.add(ptrs[3], off), r, type=t)
            out = poison(np.empty(64, dt))
            gpu, cpu = both(k.module(), k.name, 1, 64, [*ops, out])
            np.testing.assert_array_equal(gpu[3], cpu[3], err_msg=k.name)


@given(seeds(), st.sampled_from([128, 256]))
def test_bar_red_gpu_vs_interpreter(seed, threads):
    """bar.red.popc / .and / .or over whole CTAs and over 64-thread groups with a count: the H200's results equal
    the interpreter's and the spec's."""
    from support.bar_red_probes import bar_red_inputs, bar_red_probe, expected_bar_red
    x = bar_red_inputs(3, threads, np.random.default_rng(seed))
    k = bar_red_probe(threads)
    gpu, cpu = both(k.module(), "bar_red_probe", 3, threads, [x, poison(np.zeros((3, threads, 6), np.uint32))])
    np.testing.assert_array_equal(gpu[1], cpu[1])
    np.testing.assert_array_equal(cpu[1], expected_bar_red(x))


def test_the_read_ptx_example_gives_the_same_sums_on_the_gpu(capsys):
    """PTX text read by ptxforge.parse runs through the driver with the interpreter's result."""
    from support.examples import load_example
    assert load_example("read_ptx").main(["--gpu"]) == 0
    assert "GPU: the same block sums" in capsys.readouterr().out
