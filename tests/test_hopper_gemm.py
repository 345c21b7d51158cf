"""Hopper GEMM schedules: every configuration assembles for sm_90a with 0 spills and real wgmma/TMA SASS.

GPU: exact equality with numpy on ragged shapes (bench/hopper_gemm_bench.py --check does the same
with more configurations).
"""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm, assembled, reference
from ptxforge.schedules.hopper.convert import widen_numpy
from ptxforge.testing import gpu_skip_reason

CONFIGS = [HopperGemm("s8"), HopperGemm("s8", block_n=128, wg_m=128), HopperGemm("s8", consumers=1, stages=5),
           HopperGemm("bf16"), HopperGemm("f16", block_n=128, wg_m=128),
           HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3)]
MMA = {"s8": "IGMMA", "s4": "IGMMA", "bf16": "HGMMA", "f16": "HGMMA"}

needs_ptxas = pytest.mark.skipif(not pf.assembler.find_tool("ptxas"), reason="ptxas not installed")


@needs_ptxas
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.kernel_name)
def test_assembles_without_spills_with_wgmma_and_tma(cfg):
    r = assembled(cfg)
    res = r.resources(cfg.kernel_name)
    assert res.spills == 0 and res.stack == 0
    assert "C7504" not in r.log and "C7508" not in r.log  # setmaxnreg honoured
    try:
        ops = r.sass_opcodes(cfg.kernel_name)
    except pf.errors.ToolchainMissing:
        pytest.skip("no disassembler")
    assert any(o.startswith(MMA[cfg.operand] + ".64x" + str(cfg.block_n)) for o in ops), sorted(ops)
    assert any(o.startswith("UTMALDG.2D") for o in ops)
    assert any(o.startswith("USETMAXREG") for o in ops)
    assert not any(o.startswith(("LDL", "STL", "CALL")) for o in ops)  # no local memory, no emulation call


def test_emission_is_fast_enough():
    import time
    cfg = HopperGemm("s8", block_n=192 - 64, stages=3, raster_group=4)
    t = time.perf_counter()
    from ptxforge.schedules.hopper.emit import emit_kernel
    emit_kernel(cfg).module().render()
    assert time.perf_counter() - t < 0.5


@pytest.mark.parametrize("kw,msg", [(dict(wg_m=32), "wg_m"), (dict(block_n=264), "block_n"),
                                    (dict(stages=6), "shared memory"), (dict(wg_m=128, block_n=256), "accumulator"),
                                    (dict(operand="s4", block_k_bytes=128), "256"), (dict(operand="u2"), "operand")])
def test_rejects_illegal_configs(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        HopperGemm(**kw)


def test_problem_checks():
    HopperGemm("s8").check_problem(7, 9, 16)
    with pytest.raises(ValidationError, match="16 bytes"):
        HopperGemm("s8").check_problem(7, 9, 24)
    with pytest.raises(ValidationError, match="16 bytes"):
        HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3).check_problem(7, 9, 48)


def test_widen_numpy_matches_nibble_definition():
    rng = np.random.default_rng(0)
    p = rng.integers(0, 256, (3, 16), dtype=np.uint8)
    w = widen_numpy(p)
    lo = p & 15
    assert np.array_equal(w[:, 0::2], np.where(lo > 7, lo.astype(int) - 16, lo))
    hi = p >> 4
    assert np.array_equal(w[:, 1::2], np.where(hi > 7, hi.astype(int) - 16, hi))


def test_widen_word_sequence_on_all_nibbles():
    """The 9-operation s4x8 -> 2 x s8x4 sequence, evaluated with numpy integer ops, is exact."""
    w = np.array([0x76543210, 0xFEDCBA98, 0x8F7F0F80], dtype=np.uint64)
    lo = (w & 0x0F0F0F0F) ^ 0x08080808
    hi = ((w >> 4) & 0x0F0F0F0F) ^ 0x08080808

    def prmt(a, b, sel):
        src = [(int(a) >> (8 * i)) & 255 for i in range(4)] + [(int(b) >> (8 * i)) & 255 for i in range(4)]
        return sum(src[(sel >> (4 * i)) & 7] << (8 * i) for i in range(4))
    for i, x in enumerate(w):
        outs = []
        for sel in (0x5140, 0x7362):
            v = prmt(lo[i], hi[i], sel)
            outs.append(((v + 0x78787878) & 0xFFFFFFFF) ^ 0x80808080)
        got = np.array(outs, dtype=np.uint32).view(np.int8)
        want = widen_numpy(np.array([int(x)], dtype=np.uint32).view(np.uint8)[None, :])[0]
        assert np.array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(gpu_skip_reason() is not None, reason=str(gpu_skip_reason()))
@pytest.mark.parametrize("op,kw", [("s8", {}), ("bf16", {}), ("s4", dict(block_n=128, block_k_bytes=256, stages=3))])
@pytest.mark.parametrize("shape", [(200, 328, 256), (96, 131, 64), (257, 511, 1024)])
def test_gpu_matches_numpy(op, kw, shape):
    from ptxforge.schedules.hopper import run
    cfg = HopperGemm(op, **kw)
    m, n, k = shape
    rng = np.random.default_rng(sum(shape))
    if op == "s8":
        a, b = rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (n, k), dtype=np.int8)
    elif op == "s4":
        a, b = rng.integers(0, 256, (m, k // 2), dtype=np.uint8), rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    else:
        a = (rng.standard_normal((m, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        b = (rng.standard_normal((n, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    got = run(cfg, a, b, k=k)  # C is poisoned (0xFF bytes) before the launch
    want = reference(cfg, a, b)
    if op == "bf16":
        af = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        bf = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        assert np.all(np.abs(got - want) <= k * 2.0 ** -21 * (np.abs(af) @ np.abs(bf).T) + 1e-30)
    else:
        assert np.array_equal(got.astype(np.int64), want)
