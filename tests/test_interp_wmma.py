"""wmma.load / wmma.mma / wmma.store on the interpreter: every shape and type against numpy (inputs chosen so
every form's result is exact), both memory layouts, strides past the leading dimension, an operation on
every element of a fragment, the ISA's alignment and warp rules as findings; and on the H200."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.interp.exec_wmma import FragmentGeometry
from ptxforge.isa import types as T
from ptxforge.isa.wmma import WMMA_FORMS

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")


def _mnk(shape):
    return tuple(int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())


def _cases():
    """(shape, ab type, a layout, b layout, c type, d type, bitop)."""
    out = []
    for (shape, t), f in sorted(WMMA_FORMS.items(), key=lambda kv: (kv[0][0], kv[0][1].name)):
        for al, bl in f.layouts:
            for c_t in f.acc:
                for d_t in f.acc:
                    if t is not T.f16 and c_t is not d_t:
                        continue
                    for bitop in (f.bitops or {None: None}):
                        out.append((shape, t.name, al, bl, c_t.name, d_t.name, bitop))
    return out


CASES = _cases()
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "s32": np.int32}


def _draw(rng, t, shape):
    """Element values of type `t` (small integers, so every product and sum below is exact)."""
    if t in ("s8", "s4"):
        return rng.integers(-8 if t == "s4" else -128, 8 if t == "s4" else 128, shape)
    if t in ("u8", "u4"):
        return rng.integers(0, 16 if t == "u4" else 256, shape)
    if t == "b1":
        return rng.integers(0, 2, shape)
    return rng.integers(-4, 5, shape)


def _encode(values, t):
    """A matrix's element values -> bytes in memory order (row-major over `values` as given)."""
    flat = np.asarray(values).ravel()
    if t in ("s4", "u4"):
        n = flat.astype(np.int64) & 15
        return (n[0::2] | (n[1::2] << 4)).astype(np.uint8)
    if t == "b1":
        return np.packbits(flat.astype(np.uint8), bitorder="little")
    if t == "bf16":
        return (flat.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    if t == "tf32":
        return flat.astype(np.float32).view(np.uint8)
    if t in ("s8", "u8"):
        return flat.astype(np.int64).astype(np.uint8)
    return flat.astype(NP[t]).view(np.uint8)


def _store(matrix, t, layout, stride):
    """`matrix` laid out row- or column-major with `stride` elements between rows (columns), as bytes."""
    lead = matrix if layout == "row" else matrix.T
    padded = np.zeros((lead.shape[0], stride), dtype=np.int64 if t not in ("f16", "f32", "f64", "bf16", "tf32")
                      else np.float64)
    padded[:, :lead.shape[1]] = lead
    return _encode(padded, t)


def _ebits(t):
    return {"b1": 1, "s4": 4, "u4": 4}.get(t, T.lookup(t).bits)


def _kernel(case, strides, target="sm_80", nt=32):
    shape, t, al, bl, c_t, d_t, bitop = case
    k = pf.KernelBuilder("w", target=target, reqntid=nt)
    pa, pb, pc, pd = (k.param_ptr(n, pf.b8) for n in "abcd")
    a = k.wmma_load("a", pa, shape=shape, type=t, layout=al, stride=strides[0], space="global")
    b = k.wmma_load("b", pb, shape=shape, type=t, layout=bl, stride=strides[1], space="global")
    c = k.wmma_load("c", pc, shape=shape, type=c_t, layout="row", stride=strides[2], space="global")
    d = k.wmma_mma(a, b, c, shape=shape, type=t, acc=d_t, c_type=c_t, a_layout=al, b_layout=bl, bitop=bitop)
    k.wmma_store(pd, d, shape=shape, type=d_t, layout="col", stride=strides[3], space="global")
    return k


def _problem(case, rng, pad):
    """Operands in memory and the expected D (column-major, stride strides[3]) for one case."""
    shape, t, al, bl, c_t, d_t, bitop = case
    M, N, K = _mnk(shape)
    A, B = _draw(rng, t, (M, K)), _draw(rng, t, (K, N))
    C = _draw(rng, "s8" if c_t == "s32" else "f", (M, N))

    def stride(rows, cols, layout, bits):
        lead = cols if layout == "row" else rows
        unit = max(1, 256 // bits) if pad else 0  # pad by 32 bytes: keeps every fragment's alignment
        return lead + unit
    sa, sb = stride(M, K, al, _ebits(t)), stride(K, N, bl, _ebits(t))
    sc, sd = stride(M, N, "row", _ebits(c_t)), stride(M, N, "col", _ebits(d_t))
    if bitop == "xor.popc":
        prod = (A[:, :, None] ^ B[None, :, :]).sum(axis=1)
    else:
        prod = A.astype(np.int64) @ B.astype(np.int64)
    D = prod + C
    if d_t == "s32":
        D = ((D + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int64)
    mem = [_store(A, t, al, sa), _store(B, t, bl, sb), _store(C, c_t, "row", sc),
           np.zeros(N * sd * _ebits(d_t) // 8, np.uint8)]
    want = _store(D, d_t, "col", sd)
    return mem, want, (sa, sb, sc, sd)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(x for x in c if x))
def test_every_wmma_form_multiplies_exactly(case):
    rng = np.random.default_rng(CASES.index(case))
    for pad in (False, True):
        mem, want, strides = _problem(case, rng, pad)
        k = _kernel(case, strides if pad else (None,) * 4)
        interp.run(k.module(), block=32, args=mem)
        got = mem[3]
        np.testing.assert_array_equal(got, want)


def test_the_kernels_assemble():
    rng = np.random.default_rng(0)
    for target in ("sm_80", "sm_90"):
        mods = [_kernel(case, _problem(case, rng, True)[2], target).module() for case in CASES[::3]]
        for m in mods:
            pf.assemble(m)


def test_an_operation_on_every_element_of_a_fragment_applies_to_the_matrix():
    """C loaded, doubled register by register (the layout-independent use the ISA allows), then D = A B + 2C."""
    k = pf.KernelBuilder("scale", target="sm_80", reqntid=32)
    pa, pb, pc, pd = (k.param_ptr(n, pf.b8) for n in "abcd")
    a = k.wmma_load("a", pa, shape="m16n16k16", type="f16", space="global")
    b = k.wmma_load("b", pb, shape="m16n16k16", type="f16", layout="col", space="global")
    c = k.wmma_load("c", pc, shape="m16n16k16", type="f32", space="global")
    c2 = pf.Vec(tuple(k.mul(r, 2.0) for r in c.regs))
    d = k.wmma_mma(a, b, c2, shape="m16n16k16", type="f16", acc="f32")
    k.wmma_store(pd, d, shape="m16n16k16", type="f32", space="global")
    rng = np.random.default_rng(3)
    A, B, C = (rng.integers(-4, 5, (16, 16)) for _ in range(3))
    D = np.zeros((16, 16), np.float32)
    interp.run(k.module(), block=32, args=[A.astype(np.float16), B.T.astype(np.float16).copy(),
                                           C.astype(np.float32), D])
    np.testing.assert_array_equal(D, A @ B + 2 * C)


def test_the_fragment_layout_round_trips_every_geometry():
    for (shape, t), f in WMMA_FORMS.items():
        M, N, K = _mnk(shape)
        for g in (FragmentGeometry(M, K, t, f.a_regs), FragmentGeometry(K, N, t, f.b_regs),
                  *(FragmentGeometry(M, N, acc, n) for acc, n in f.acc.items())):
            bits = np.random.default_rng(1).integers(0, 1 << min(g.ebits, 62), (2, g.rows * g.cols)).astype(
                np.uint64)
            np.testing.assert_array_equal(g.from_registers(g.to_registers(bits)), bits)


def _f16_load(stride=None, shift=0, lanes=32, per_lane_address=False):
    k = pf.KernelBuilder("l", target="sm_80", reqntid=32)
    p = k.param_ptr("p", pf.b8)
    addr = k.add(p, shift) if shift else p
    if per_lane_address:
        addr = k.add(p, k.mul(k.tid(), 32, mode="wide"))
    if lanes < 32:
        with k.if_(k.setp("lt", k.tid(), lanes)):
            k.wmma_load("a", addr, shape="m16n16k16", type="f16", stride=stride, space="global")  # <- partial
    else:
        k.wmma_load("a", addr, shape="m16n16k16", type="f16", stride=stride, space="global")  # <- load
    return k.module()


@pytest.mark.parametrize("kw, kind, text", [
    (dict(shift=16), "misaligned", "32-byte aligned"),
    (dict(stride=24), "misaligned", "not a multiple of 32 bytes"),
    (dict(stride=8), "oob", "less than the leading dimension"),
    (dict(lanes=16), "collective", "part of a warp"),
    (dict(per_lane_address=True), "collective", "different addresses"),
])
def test_wmma_rules_are_findings(kw, kind, text):
    buf = np.zeros(64 * 1024, np.uint8)
    r = interp.run(_f16_load(**kw), block=32, args=[buf], check=False)
    f = r.by_kind(kind)
    assert f and text in f[0].message, [x.message for x in r.findings]


def test_a_load_past_the_buffer_is_out_of_bounds():
    r = interp.run(_f16_load(), block=32, args=[np.zeros(16 * 32 - 2, np.uint8)], check=False)
    assert r.by_kind("oob")


@pytest.mark.gpu
def test_gpu_every_wmma_form_matches_the_interpreter():
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(17)
    for case in CASES:
        for pad in (False, True):
            mem, want, strides = _problem(case, rng, pad)
            k = _kernel(case, strides if pad else (None,) * 4, target="sm_90")
            bufs = [DeviceBuffer.from_host(x) for x in mem]
            pf.load(k.module())[k.name](1, 32, *bufs)
            assert np.array_equal(bufs[3].to_host(), want), case


def test_wmma_ptx_text_parsed_back_runs_the_same():
    """PTX text (here the builder's own, as nvcc's would come) parsed and run: the space and the types come
    from the text."""
    case = ("m16n16k16", "s8", "row", "col", "s32", "s32", None)
    rng = np.random.default_rng(5)
    mem, want, strides = _problem(case, rng, True)
    parsed = pf.parse(_kernel(case, strides).module().ptx)
    interp.run(parsed, block=32, args=mem)
    np.testing.assert_array_equal(mem[3], want)


@pytest.mark.gpu
def test_gpu_the_wmma_example_is_exact_on_the_gpu(capsys):
    from support.examples import load_example
    assert load_example("wmma_gemm").main([]) == 0
    assert "GPU: C (64 x 96) == 0.5 * A @ B exactly" in capsys.readouterr().out
