"""fp8 (e4m3/e5m2) mma.sync m16n8k16 with .f16 accumulators: a legal form (PTX ISA 8.7, sm_89) the table
left out.  It renders, assembles on sm_89, is refused below, and the interpreter computes it exactly."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T
from ptxforge.isa.fragments import mma_fragment, pack_fragment, unpack_fragment
from ptxforge.isa.tensor import MMA_FORMS, mma_form
from support.interp_probes import decode_values, encode_values, mma_probe
from support.ptx_text import assembler_verdict, raw_kernel

FP8 = ("e4m3", "e5m2")
PAIRS = [(a, b) for a in FP8 for b in FP8]


@pytest.mark.parametrize("a, b", PAIRS)
def test_fp8_m16n8k16_with_f16_accumulators_renders_and_assembles_on_sm89(a, b):
    f = mma_form("m16n8k16", a, b, "f16")
    assert (f.a_regs, f.b_regs, f.c_regs, f.d_regs) == (2, 1, 2, 2)
    k = pf.KernelBuilder("t", target="sm_89")
    d = k.mma(k.regs(T.b32, 2, "a"), k.regs(T.b32, 1, "b"), k.regs(T.b32, 2, "c"), shape="m16n8k16", a_type=a,
              b_type=b, acc="f16")
    assert len(d) == 2
    assert k.finish().instructions[-2].render().startswith(f"mma.sync.aligned.m16n8k16.row.col.f16.{a}.{b}.f16 ")
    pf.assemble(k.module())


def test_the_form_needs_sm89_and_ptx_8_7_as_ptxas_says():
    f = mma_form("m16n8k16", "e4m3", "e4m3", "f16")
    assert (f.req.min_sm, str(f.req.min_ptx)) == (89, "8.7")
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.TargetError, match="sm_89"):
        k.mma(k.regs(T.b32, 2), k.regs(T.b32, 1), k.regs(T.b32, 2), shape="m16n8k16", a_type="e4m3", acc="f16")
    line = "mma.sync.aligned.m16n8k16.row.col.f16.e4m3.e4m3.f16 {%r2, %r3}, {%r4, %r5}, {%r6}, {%r8, %r9};"
    assert "8.7" in assembler_verdict(raw_kernel(line, "sm_89", version="8.6"))
    assert "sm_89" in assembler_verdict(raw_kernel(line, "sm_80", version="8.7"))
    assert assembler_verdict(raw_kernel(line, "sm_89", version="8.7")) is None


def test_fp8_takes_f16_accumulators_in_both_of_its_shapes():
    fp8 = [f for f in MMA_FORMS if f.a_type.name in FP8]
    assert {(f.shape, f.c_type.name) for f in fp8} == {(s, c) for s in ("m16n8k16", "m16n8k32") for c in ("f16", "f32")}


def _words(rng, frag, t, allowed):
    """Fragment words whose elements are drawn from the codes of `t` that decode to `allowed` values."""
    codes = np.arange(256 if t.bits == 8 else 65536, dtype=np.uint64)
    ok = codes[np.isin(decode_values(codes, t), allowed)]
    per = 32 // t.bits
    elems = rng.choice(ok, size=(32, frag.nregs, per))
    return (elems << (np.arange(per, dtype=np.uint64) * np.uint64(t.bits))).sum(axis=-1).astype(np.uint64)


@pytest.mark.parametrize("a, b", PAIRS)
def test_the_interpreter_computes_the_form_exactly(a, b):
    """Values of few bits (exact products and sums in .f16), so D must equal the layout model bit for bit."""
    form = mma_form("m16n8k16", a, b, "f16")
    rng = np.random.default_rng(len(a) + 7 * len(b))
    fa, fb, fc, fd = (mma_fragment(form, x) for x in "abcd")
    small = np.array([-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    aw, bw = _words(rng, fa, form.a_type, small), _words(rng, fb, form.b_type, small)
    cw = _words(rng, fc, T.f16, np.arange(-8.0, 8.5, 0.5))
    A = decode_values(unpack_fragment(fa, aw), form.a_type)
    B = decode_values(unpack_fragment(fb, bw), form.b_type)
    C = decode_values(unpack_fragment(fc, cw), T.f16)
    want = pack_fragment(fd, encode_values(A @ B + C, T.f16)).astype(np.uint32)
    d = np.zeros((32, form.d_regs), np.uint32)
    mod = mma_probe(form, False)
    pf.assemble(mod)
    interp.run(mod, block=32, args=[aw.astype(np.uint32), bw.astype(np.uint32), cw.astype(np.uint32), d])
    np.testing.assert_array_equal(d, want)
    assert np.abs(A @ B).max() > 0  # the products are not all zero
