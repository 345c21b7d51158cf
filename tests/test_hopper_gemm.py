"""Hopper GEMM schedules: every configuration assembles for sm_90a with 0 spills and real wgmma/TMA SASS.

GPU: exact equality with numpy on ragged shapes (bench/hopper_gemm_bench.py --check does the same
with more configurations).
"""

import numpy as np
import pytest
from hypothesis import given, settings

import ptxforge as pf
from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm, assembled, random_operands, reference
from ptxforge.schedules.hopper.defaults import SKINNY
from ptxforge.schedules.hopper.convert import widen_numpy
from ptxforge.testing.hopper_strategies import hopper_gemm_configs

CONFIGS = [HopperGemm("s8"), HopperGemm("s8", block_n=128, wg_m=128), HopperGemm("s8", consumers=1, stages=5),
           HopperGemm("bf16"), HopperGemm("f16", block_n=128, wg_m=128),
           HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3),
           HopperGemm("s4", block_n=256, block_k_bytes=256, stages=2),
           HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3, a_registers=False),
           HopperGemm("s4", block_n=256, block_k_bytes=256, stages=2, converter=True, producer_regs=56,
                      consumer_regs=224),
           HopperGemm("s4", block_n=256, block_k_bytes=256, stages=2, biased=True)]
# every skinny configuration for_shape picks (defaults.SKINNY), each once
CONFIGS += list({g.kernel_name: g for g in (HopperGemm(op, **kw) for op, entries in SKINNY.items()
                                            for _, kw in entries)}.values())
MMA = {"s8": "IGMMA", "s4": "IGMMA", "bf16": "HGMMA", "f16": "HGMMA"}  # IGMMA.64xN...: s8.s8 or u8.u8

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


def test_a_bare_s4_config_names_the_measured_ones():
    """HopperGemm('s4') with the class defaults (sized for s8) is refused; the error names the configurations
    that work, and both do."""
    with pytest.raises(ValidationError, match=r"DEFAULTS\['s4'\].*Int4Gemm\.for_shape") as info:
        HopperGemm("s4")
    assert "got 128" in str(info.value)
    from ptxforge.schedules.hopper import defaults
    assert HopperGemm("s4", **defaults.DEFAULTS["s4"]).operand == "s4"
    picked = pf.Int4Gemm.for_shape(256, 256, 512, target="sm_90a")
    assert isinstance(picked, HopperGemm) and picked.operand == "s4"


def test_problem_checks():
    HopperGemm("s8").check_problem(7, 9, 16)
    with pytest.raises(ValidationError, match="16 bytes"):
        HopperGemm("s8").check_problem(7, 9, 24)
    with pytest.raises(ValidationError, match="16 bytes"):
        HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3).check_problem(7, 9, 48)
    for bad in ((4.5, 4, 64), (True, 4, 64), ("4", 4, 64), (4, 0, 64)):  # refused by name, never a TypeError
        with pytest.raises(ValidationError, match=r"(M|N) must be an int >= 1, got"):
            HopperGemm("s8").check_problem(*bad)
    HopperGemm("s8").check_problem(np.int64(4), 4, np.int32(64))
    from ptxforge.schedules.hopper import Bf16Gemm
    with pytest.raises(ValidationError, match="for_shape: M must be an int >= 1, got 8.0"):
        Bf16Gemm.for_shape(8.0, 8, 64)


@pytest.mark.parametrize("kw", [dict(stages="x"), dict(swap_ab="yes"), dict(epilogue=3), dict(block_n=128.0),
                                dict(a_group=True)])
def test_config_fields_of_the_wrong_type_are_refused_by_name(kw):
    """A field of the wrong type is refused with its name and the type it takes (it was a TypeError from a
    comparison deep in the checks, or, for a float or a string that compares, a configuration nobody meant)."""
    (name, _), = kw.items()
    with pytest.raises(ValidationError, match=f"HopperGemm {name} must be (an int|True or False|a str), got"):
        HopperGemm("s8", **kw)
    assert type(HopperGemm("s8", block_n=np.int64(128)).block_n) is int  # a numpy integer is kept as an int


def test_widen_numpy_matches_nibble_definition():
    rng = np.random.default_rng(0)
    p = rng.integers(0, 256, (3, 16), dtype=np.uint8)
    w = widen_numpy(p)
    lo = p & 15
    assert np.array_equal(w[:, 0::2], np.where(lo > 7, lo.astype(int) - 16, lo))
    hi = p >> 4
    assert np.array_equal(w[:, 1::2], np.where(hi > 7, hi.astype(int) - 16, hi))


def test_sign_extension_identity_has_no_carry():
    """((v ^ 8) + 120) ^ 128 is v sign-extended, and never carries out of a byte, for every nibble."""
    for v in range(16):
        x = ((v ^ 8) + 0x78)
        assert x < 256 and np.int8(np.uint8(x ^ 0x80)) == (v - 16 if v > 7 else v)


@pytest.mark.gpu
@pytest.mark.parametrize("op,kw", [("s8", {}), ("bf16", {}), ("s4", dict(block_n=128, block_k_bytes=256, stages=3)),
                                   ("s4", dict(block_n=256, block_k_bytes=256, stages=2)),
                                   ("s4", dict(block_n=128, block_k_bytes=256, stages=3, a_registers=False)),
                                   ("s4", dict(block_n=256, block_k_bytes=256, stages=2, converter=True,
                                               producer_regs=56, consumer_regs=224)),
                                   ("s4", dict(block_n=256, block_k_bytes=256, stages=2, biased=True))])
@pytest.mark.parametrize("shape", [(200, 328, 256), (96, 131, 64), (257, 511, 1024)])
def test_gpu_matches_numpy(op, kw, shape):
    from ptxforge.schedules.hopper import run
    cfg = HopperGemm(op, **kw)
    m, n, k = shape
    rng = np.random.default_rng(sum(shape))
    a, b = random_operands(cfg, m, n, k, rng)
    got = run(cfg, a, b, k=k)  # C is poisoned (0xFF bytes) before the launch
    want = reference(cfg, a, b)
    if op == "bf16":
        af = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        bf = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        assert np.all(np.abs(got - want) <= k * 2.0 ** -21 * (np.abs(af) @ np.abs(bf).T) + 1e-30)
    else:
        assert np.array_equal(got.astype(np.int64), want)


def _widen_kernel(cfg, with_a_frags, widen="signext"):
    """A CPU-interpretable kernel: packed stage (global) -> shared -> emit_s4_widen -> global (+ A fragments)."""
    from ptxforge.builder import KernelBuilder
    from ptxforge.isa import types as T
    from ptxforge.isa.operands import Addr
    from ptxforge.schedules.hopper.convert import AFragments, emit_s4_widen
    nthr = 128 * cfg.consumers
    (pa, pb), (ta, tb) = cfg.packed_tiles, cfg.tiles
    k = KernelBuilder("widen", target="sm_90", maxntid=nthr)
    src_g = k.param_ptr("src", T.u32)
    dst_g = k.param_ptr("dst", T.u32)
    frag_g = k.param_ptr("frag", T.u32)
    smem = k.dynamic_shared("smem", align=1024)
    base = k.shared_base(smem)
    tid = k.tid()
    stage = pa.nbytes + pb.nbytes
    wide = ta.nbytes + tb.nbytes
    with k.for_range(tid, stage // 4, nthr, uniform=False) as i:
        off = k.mul(i, 4, type=T.u32)
        v = k.ld(k.mad(i, 4, src_g, mode="wide", type=T.u32), type=T.u32)
        k.st(Addr(k.add(base, off, type=T.u32)), v, type=T.u32, space="shared")
    k.bar_sync(0)
    dst = k.add(base, stage, type=T.u32)
    emit_s4_widen(k, cfg, base, dst, tid, [(pa, ta, 0, 0), (pb, tb, pa.nbytes, ta.nbytes)], widen=widen)
    if with_a_frags:
        lane = k.and_(tid, 31, type=T.b32)
        w = k.and_(k.shr(tid, 5, type=T.u32), 3, type=T.b32)
        cidx = k.shr(tid, 7, type=T.u32)
        fr = AFragments(k, cfg, cidx, w, k.shr(lane, 2, type=T.u32), k.and_(lane, 3, type=T.b32), widen=widen)
        regs = fr.load(base, 0)
        out = k.mad(tid, 4 * 4 * len(regs), frag_g, mode="wide", type=T.u32)
        for s, frag in enumerate(regs):
            k.st(Addr(out, 16 * s), frag, type=T.u32, vec=4)
    k.bar_sync(0)
    with k.for_range(tid, wide // 4, nthr, uniform=False) as i:
        v = k.ld(Addr(k.add(dst, k.mul(i, 4, type=T.u32), type=T.u32)), type=T.u32, space="shared")
        k.st(k.mad(i, 4, dst_g, mode="wide", type=T.u32), v, type=T.u32)
    return k, stage, wide


@pytest.mark.parametrize("widen", ["signext", "biased", "scaled"])
def test_widen_step_and_a_fragments_on_the_interpreter(widen):
    """The emitted s4 -> s8 step writes exactly the slot-ordered widened tiles; A fragments hold the right values.

    signext: the values v; biased: v + 8 (u8); scaled: 16 v (s8).
    """
    from ptxforge import interp
    from ptxforge.schedules.hopper.convert import slot_order_numpy
    cfg = HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3, a_registers=False)
    (pa, pb), (ta, tb) = cfg.packed_tiles, cfg.tiles
    kern, stage, wide = _widen_kernel(cfg, with_a_frags=True, widen=widen)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (pa.rows, 128), dtype=np.uint8)
    b = rng.integers(0, 256, (pb.rows, 128), dtype=np.uint8)
    src = np.concatenate([pa.store(a), pb.store(b)]).view(np.uint32)
    dst = np.zeros(wide // 4, np.uint32)
    nthr = 128 * cfg.consumers
    frag = np.zeros(nthr * 8 * 4, np.uint32)
    interp.run(kern.module(), grid=1, block=nthr, args=[src, dst, frag], shared=stage + wide + 1024)
    scale, bias = {"signext": (1, 0), "biased": (1, 8), "scaled": (16, 0)}[widen]
    wa = (slot_order_numpy(widen_numpy(a)).astype(np.int16) * scale + bias).astype(np.int8)
    wb = (slot_order_numpy(widen_numpy(b)).astype(np.int16) * scale + bias).astype(np.int8)
    want = np.concatenate([ta.store(wa), tb.store(wb)])
    assert np.array_equal(dst.view(np.uint8), want)
    f = frag.view(np.int8).reshape(nthr, 8, 4, 4)  # thread, k-step, register, byte
    for tid in range(nthr):
        c, w, lane = tid // 128, tid // 32 % 4, tid % 32
        g, t = lane // 4, lane % 4
        r = c * cfg.wg_m + 16 * w + g
        for s in range(8):
            ks = wa[:, 32 * s:32 * s + 32]
            assert np.array_equal(f[tid, s, 0], ks[r, 4 * t:4 * t + 4])
            assert np.array_equal(f[tid, s, 1], ks[r + 8, 4 * t:4 * t + 4])
            assert np.array_equal(f[tid, s, 2], ks[r, 16 + 4 * t:20 + 4 * t])
            assert np.array_equal(f[tid, s, 3], ks[r + 8, 16 + 4 * t:20 + 4 * t])


def test_row_sums_kernel_on_the_interpreter():
    """biased_row_sums: out[r] = sum of (v + 8) over the row's packed nibbles, A's rows and B's in one
    launch; rows past `rows` untouched."""
    from ptxforge import interp
    from ptxforge.schedules.hopper.convert import sums_module
    rng = np.random.default_rng(5)
    rows_a, rows_b, row_bytes = 13, 21, 48
    pa = rng.integers(0, 256, (rows_a, row_bytes), dtype=np.uint8)
    pb = rng.integers(0, 256, (rows_b, row_bytes), dtype=np.uint8)
    out_a, out_b = np.full(16, -7, np.int32), np.full(24, -7, np.int32)
    interp.run(sums_module(), grid=2 + 3, block=256, args=[pa, out_a, rows_a, pb, out_b, rows_b, row_bytes])
    for p, out, rows in ((pa, out_a, rows_a), (pb, out_b, rows_b)):
        want = (widen_numpy(p).astype(np.int64) + 8).sum(axis=1)
        assert np.array_equal(out[:rows], want) and np.all(out[rows:] == -7)


def test_biased_correction_algebra():
    """sum over Kpad of (a+8)(b+8) - 8 A' - 8 B' + 128 K - 64 Kpad == a . b (zero-filled tail: 8 x 8)."""
    rng = np.random.default_rng(2)
    K, Kpad = 96, 256
    a = rng.integers(-8, 8, (5, K))
    b = rng.integers(-8, 8, (7, K))
    ap = np.concatenate([a + 8, np.full((5, Kpad - K), 8)], axis=1)
    bp = np.concatenate([b + 8, np.full((7, Kpad - K), 8)], axis=1)
    s = ap @ bp.T
    got = s - 8 * (a + 8).sum(1)[:, None] - 8 * (b + 8).sum(1)[None, :] + 128 * K - 64 * Kpad
    assert np.array_equal(got, a @ b.T)


def test_splitk_reduce_on_the_interpreter():
    """splitk_reduce adds the S workspace slices in order, for s32 exactly and f32 in that order."""
    from ptxforge import interp
    from ptxforge.schedules.hopper.splitk import reduce_module
    rng = np.random.default_rng(9)
    count, splits = 300, 3
    w = rng.integers(-2 ** 20, 2 ** 20, (splits, count)).astype(np.int32)
    c = np.full(count, 77, np.int32)
    interp.run(reduce_module("s32"), grid=2, block=256, args=[w, c, count, splits])
    assert np.array_equal(c, w.sum(0))
    wf = rng.standard_normal((splits, count)).astype(np.float32)
    cf = np.zeros(count, np.float32)
    interp.run(reduce_module("f32"), grid=2, block=256, args=[wf, cf, count, splits])
    assert np.array_equal(cf, (wf[0] + wf[1]) + wf[2])


def test_choose_splits_fills_the_sms_with_nonempty_splits():
    from ptxforge.schedules.hopper.splitk import choose_splits
    assert choose_splits(2048, 32, 132) == 1  # enough tiles
    s = choose_splits(32, 32, 132)
    assert 1 < s <= 8 and 32 * s <= 132
    for tiles in range(1, 70):
        for ktiles in range(1, 40):
            s = choose_splits(tiles, ktiles, 132)
            kper = -(-ktiles // s)
            assert (s - 1) * kper < ktiles  # the last split has work
    # a short K stays whole: the reduction would cost more than the idle SMs give back; a second launch costs
    # more than the in-kernel reduction, so its tiles must stream more before K is split
    import dataclasses
    from ptxforge.schedules.hopper.splitk import MIN_SPLIT_TILE_BYTES
    for reduce, least in MIN_SPLIT_TILE_BYTES.items():
        assert choose_splits(64, 8, 132, tile_bytes=least - 1, reduce=reduce) == 1
        assert choose_splits(64, 8, 132, tile_bytes=least, reduce=reduce) == 2
    assert MIN_SPLIT_TILE_BYTES["kernel"] < MIN_SPLIT_TILE_BYTES["launch"]
    assert choose_splits(64, 8, 132, tile_bytes=8 * 24576) == 1  # 16 x 4096 x 4096 int4, swapped
    from ptxforge.schedules.hopper.splitk import auto_splits
    g = HopperGemm("s4", **SKINNY["s4"][0][1])  # swapped: 16 rows of A, 4096 weight rows are the kernel's M
    for k, whole_in_kernel, whole_second_launch in ((4096, True, True), (14336, False, True),
                                                    (65536, False, False)):
        assert (auto_splits(g, 16, 4096, k, 132) == 1) == whole_in_kernel
        launch = dataclasses.replace(g, split_reduce="launch")
        assert (auto_splits(launch, 16, 4096, k, 132) == 1) == whole_second_launch


@pytest.mark.gpu
@pytest.mark.parametrize("op,kw", [("s8", {}), ("bf16", {}), ("s4", dict(block_n=256, block_k_bytes=256, stages=2)),
                                   ("s4", dict(block_n=256, block_k_bytes=256, stages=2, biased=True))])
def test_gpu_split_k_matches_numpy(op, kw):
    """Split K in 3 (deterministic workspace reduction) on a ragged skinny shape."""
    from ptxforge.schedules.hopper import run
    cfg = HopperGemm(op, **kw)
    m, n, k = 40, 300, 1792
    rng = np.random.default_rng(11)
    a, b = random_operands(cfg, m, n, k, rng)
    got = run(cfg, a, b, k=k, splits=3)
    want = reference(cfg, a, b)
    if op == "bf16":
        assert np.allclose(got, want, rtol=1e-3, atol=1e-2)
        assert np.array_equal(got, run(cfg, a, b, k=k, splits=3))  # deterministic
    else:
        assert np.array_equal(got.astype(np.int64), want)


@pytest.mark.parametrize("operand", ["bf16", "f16"])
@pytest.mark.parametrize("most, kw", SKINNY["bf16"], ids=lambda x: str(x) if isinstance(x, int) else "")
def test_skinny_float_defaults_on_the_interpreter(operand, most, kw):
    """Each bf16/f16 skinny default (pdl, early k-stages, swapped up to M = 128) at a ragged shape of its M range,
    within float rounding of float64 and free of findings."""
    from support.hopper_gemm import run_on_interpreter
    cfg = HopperGemm(operand, **kw)
    m, n, k = most - 7, 136 if cfg.swap_ab else 200, 320
    got, want, r = run_on_interpreter(cfg, m, n, k, clusters=2, seed=most)
    assert r.ok, str(r)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("most, kw", SKINNY["s8"], ids=lambda x: str(x) if isinstance(x, int) else "")
def test_skinny_int8_defaults_on_the_interpreter(most, kw):
    """Each int8 skinny default (swapped with 256 K-bytes per stage up to M = 32, 128 x 64 and 128 x 128 tiles
    above) at a ragged shape of its M range, K whole and split in two (the sums meeting in the kernel): exact,
    and free of findings (the split's workspace reads ordered by the counter's release and acquire)."""
    from support.hopper_gemm import run_on_interpreter
    cfg = HopperGemm("s8", **kw)
    m, n, k = most - 5, 136 if cfg.swap_ab else 200, 1024
    for splits in (1, 2):
        got, want, r = run_on_interpreter(cfg, m, n, k, splits=splits, clusters=2, seed=most + splits)
        assert r.ok, str(r)
        assert np.array_equal(got, want), f"M={m}, splits={splits}"


def test_f16_operands_and_reference_are_half_floats():
    """random_operands gives f16 operands as the bit patterns of float16 samples, and reference reads uint16 as
    those bit patterns (or takes float16 arrays): the same C either way, the sums of the half values."""
    g = HopperGemm("f16", block_n=128, wg_m=128)
    a, b = random_operands(g, 3, 5, 64, np.random.default_rng(2))
    assert a.dtype == np.uint16 and np.isfinite(a.view(np.float16)).all() and 0 < np.abs(a.view(np.float16)).max() < 8
    want = a.view(np.float16).astype(np.float64) @ b.view(np.float16).astype(np.float64).T
    np.testing.assert_array_equal(reference(g, a, b), want)
    np.testing.assert_array_equal(reference(g, a.view(np.float16), b.view(np.float16)), want)


def test_tuning_and_bf16_class():
    from ptxforge.schedules.hopper import Bf16Gemm, choose_hopper, hopper_reason
    g = choose_hopper(8192, 8192, 8192, "s8")
    assert g.operand == "s8" and g.block_n == 256 and "wgmma" in g.path_reason
    assert hopper_reason(64, 64, 24, "s8")[0] is False
    assert hopper_reason(64, 64, 64, "u4")[0] is False
    b = Bf16Gemm.for_shape(100, 200, 64)
    assert b.operand == "bf16" and b.c_type == "f32" and "HopperGemm" in b.describe()
    # few rows stream the weights from every SM: swapped up to M = 128, 128 x 128 tiles to 256, then the large tile
    assert [(g.swap_ab, g.block_n) for g in (Bf16Gemm.for_shape(m, 8192, 8192) for m in (32, 64, 128, 256, 257))] \
        == [(True, 32), (True, 64), (True, 128), (False, 128), (False, 256)]
    assert Bf16Gemm.for_shape(64, 8192, 8192, "f16").operand == "f16"
    assert "1.05x cuBLAS bf16" in hopper_reason(32, 8192, 8192, "bf16")[1]
    assert choose_hopper(32, 8192, 8192, "bf16").kernel_name == Bf16Gemm.for_shape(32, 8192, 8192).kernel_name
    # an override a skinny configuration does not take (the TMA-store epilogue stores C as computed, not
    # transposed; clusters and early prefetches do not mix) gets the large-problem configuration with it
    t = Bf16Gemm.for_shape(32, 8192, 8192, epilogue="tma", c16=True)
    assert (t.swap_ab, t.block_n, t.epilogue, t.c16) == (False, 256, "tma", True)
    assert choose_hopper(200, 8192, 8192, "bf16", cluster_m=2).cluster_m == 2
    assert choose_hopper(32, 8192, 8192, "s8", epilogue="tma").block_n == 256
    assert choose_hopper(32, 8192, 8192, "s8", stages=6).swap_ab  # one the skinny one takes: still skinny
    with pytest.raises(ValidationError, match="stages"):
        choose_hopper(32, 8192, 8192, "s8", stages=0)  # taken by neither: refused
    with pytest.raises(ValidationError):
        Bf16Gemm("s8")


def test_small_k_large_problems_store_c_through_tma():
    """The large-problem s8/bf16/f16 configurations write C through shared memory and TMA stores where K is
    small enough for C's writes to weigh (TMA_STORE_MAX_K) and C's rows are whole 16 bytes; beyond that K, for
    rows that are not, for s4 and for decode-sized M the registers epilogue stays; an override the TMA store
    does not take gets the registers epilogue instead of a refusal, and an explicit epilogue wins."""
    from ptxforge.schedules.gemm import Int8Gemm
    from ptxforge.schedules.hopper import Bf16Gemm, choose_hopper, hopper_reason
    from ptxforge.schedules.hopper.defaults import DEFAULTS, TMA_STORE_MAX_K
    top = TMA_STORE_MAX_K
    for op in ("s8", "bf16", "f16"):
        small = choose_hopper(8192, 8192, top, op)
        assert small.epilogue == "tma" and not small.c16 and "TMA stores" in small.describe()
        assert {f: getattr(small, f) for f in DEFAULTS[op]} == DEFAULTS[op]  # the large-problem tile otherwise
        assert choose_hopper(8192, 8192, top + 64, op).epilogue == "registers"
        assert "TMA stores" in hopper_reason(8192, 8192, top, op)[1]
        assert "TMA stores" not in hopper_reason(8192, 8192, top + 64, op)[1]
        assert choose_hopper(4096, 8190, 256, op).epilogue == "registers"  # 8190 x 4-byte rows: not whole 16 B
        assert choose_hopper(256, 8192, 256, op).epilogue == "registers"  # decode-sized: the skinny tiles
    assert choose_hopper(8192, 8192, 256, "s4").epilogue == "registers"  # no room for C's staging
    assert Int8Gemm.for_shape(4096, 4096, 512, "sm_90a").epilogue == "tma"
    assert Bf16Gemm.for_shape(4096, 4096, 512, epilogue="registers").epilogue == "registers"
    swapped = choose_hopper(4096, 4096, 512, "s8", swap_ab=True)  # the TMA store takes C as computed
    assert swapped.swap_ab and swapped.epilogue == "registers"
    assert choose_hopper(4096, 4096, 512, "bf16", c16=True).epilogue == "tma"  # c16 needs it: kept
    with pytest.raises(ValidationError, match="shared memory"):
        choose_hopper(4096, 4096, 512, "s8", stages=6)  # too deep with either epilogue: the registers one speaks


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["s8", "bf16"])
def test_gpu_small_k_tma_store_and_a_sliced_c_agree(op):
    """The small-K default (C through TMA stores) and a C 8 bytes past 16-byte alignment (a slice, stored by the
    registers kernel) give the same C bit for bit, exact (s8) or within the float bound (bf16), through run()
    (careful, then kept), a plan with a K split, and a plan replayed from a CUDA graph; nothing is written
    outside C."""
    torch = pytest.importorskip("torch")
    from ptxforge.schedules.hopper import choose_hopper
    m, n, k = 520, 392, 512
    g = choose_hopper(m, n, k, op)
    assert g.epilogue == "tma"
    rng = np.random.default_rng(11)
    a, b = random_operands(g, m, n, k, rng)
    ta, tb = (torch.from_numpy(x.view(np.int16) if x.dtype == np.uint16 else x).cuda() for x in (a, b))
    dt = torch.int32 if g.c_type == "s32" else torch.float32
    want = reference(g, a, b)
    outs = []
    for call in range(4):
        whole = torch.full((m * n + 4,), -7, dtype=dt, device="cuda")
        c = whole[2:2 + m * n].view(m, n) if call % 2 else whole[4:].view(m, n)  # 8 bytes past, or 16
        assert (c.data_ptr() % 16 == 8) == bool(call % 2)
        if call < 2:
            g.run(ta, tb, c)
        else:
            g.plan(m, n, k, splits=2)(ta, tb, c)
        torch.cuda.synchronize()
        edge = whole.cpu().numpy()
        assert (edge[:2] == -7).all() and (edge[2 + m * n:] == -7).all() if call % 2 else (edge[:4] == -7).all()
        got = c.cpu().numpy()
        if g.c_type == "s32":
            assert np.array_equal(got.astype(np.int64), want), f"call {call}"
        else:
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2)
        outs.append(got)
    assert np.array_equal(outs[0].view(np.int32), outs[1].view(np.int32))
    assert np.array_equal(outs[2].view(np.int32), outs[3].view(np.int32))
    # a sliced C in a CUDA graph: one call before the capture makes the registers plan, replays reuse it
    s = torch.cuda.Stream()
    plan = g.plan(m, n, k, stream=s)
    c = torch.full((m * n + 2,), -7, dtype=dt, device="cuda")[2:].view(m, n)
    made = []
    for replayed in _graph_replays(torch, plan, ta, tb, c, s):
        assert np.array_equal(replayed.view(np.int32), outs[1].view(np.int32))
        made.append(plan._registers)
    assert made[0] is not None and made[1] is made[0]


def test_int_gemm_for_shape_picks_hopper_on_sm90a():
    from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
    from ptxforge.schedules.hopper import hopper_reason
    g = Int8Gemm.for_shape(8192, 8192, 8192, "sm_90a")
    assert isinstance(g, HopperGemm) and g.operand == "s8" and "wgmma" in g.path_reason
    g4 = Int4Gemm.for_shape(1024, 8192, 8192, "sm_90a")
    assert isinstance(g4, HopperGemm) and g4.operand == "s4" and g4.scaled and not g4.biased
    long_k = Int4Gemm.for_shape(1024, 8192, 131072, "sm_90a")  # 256 C would overflow: the biased widening
    assert isinstance(long_k, HopperGemm) and long_k.biased and not long_k.scaled
    decode = Int4Gemm.for_shape(128, 8192, 8192, "sm_90a")  # 128 x 64 tiles fill the SMs without split-K
    assert isinstance(decode, HopperGemm) and (decode.block_m, decode.block_n) == (128, 64)
    assert "decode" in hopper_reason(128, 8192, 8192, "s4")[1]
    mid = Int4Gemm.for_shape(200, 8192, 8192, "sm_90a")
    assert isinstance(mid, HopperGemm) and (mid.block_m, mid.block_n) == (128, 128)
    decode32 = Int4Gemm.for_shape(32, 8192, 8192, "sm_90a")  # swapped operands, alternate k-stages, pdl
    assert isinstance(decode32, HopperGemm) and decode32.swap_ab and decode32.interleave_k and decode32.pdl
    assert "swapped" in hopper_reason(32, 8192, 8192, "s4")[1]
    decode8 = Int8Gemm.for_shape(32, 8192, 8192, "sm_90a")  # s8 too: swapped, one launch, pdl
    assert isinstance(decode8, HopperGemm) and decode8.swap_ab and decode8.pdl and decode8.consumers == 1
    assert "swapped" in hopper_reason(32, 8192, 8192, "s8")[1]
    mid8 = Int8Gemm.for_shape(128, 8192, 8192, "sm_90a")
    assert (mid8.block_m, mid8.block_n, mid8.stages) == (128, 64, 8)
    assert not isinstance(Int8Gemm.for_shape(64, 64, 64, "sm_90"), HopperGemm)  # sm_90: mma.sync
    assert not isinstance(Int8Gemm.for_shape(64, 64, 24, "sm_90a"), HopperGemm)  # rows not 16-byte multiples
    assert not isinstance(Int4Gemm.for_shape(64, 64, 64, "sm_90a", operand="u4"), HopperGemm)
    assert not isinstance(Int8Gemm.for_shape(64, 64, 64, "sm_90a", hopper=False), HopperGemm)
    assert isinstance(Int8Gemm.for_shape(64, 64, 64, "sm_90", hopper=True), HopperGemm)
    with pytest.raises(ValidationError, match="cannot take") as refused:
        Int8Gemm.for_shape(64, 64, 24, "sm_90", hopper=True)
    assert str(refused.value).count("\n  at ") == 1, str(refused.value)  # one position, the caller's
    for other in ("sm_80", "sm_89"):  # no wgmma there: asked for, the path is refused, not built for sm_90a
        with pytest.raises(ValidationError, match=f"sm_90a .H100/H200. only, not {other}"):
            Int4Gemm.for_shape(64, 64, 256, other, hopper=True)


@pytest.mark.gpu
def test_gpu_for_shape_hopper_path_runs_exactly():
    """The schedule Int4Gemm.for_shape gives on sm_90a runs Int4Gemm's operand format exactly."""
    from ptxforge.int4 import pack_int4
    from ptxforge.schedules.gemm import Int4Gemm
    rng = np.random.default_rng(4)
    m, n, k = 296, 520, 1024
    a, b = rng.integers(-8, 8, (m, k)), rng.integers(-8, 8, (n, k))
    g = Int4Gemm.for_shape(m, n, k, "sm_90a")
    assert isinstance(g, HopperGemm)
    got = g.run(pack_int4(a), pack_int4(b), k=k)
    assert np.array_equal(got.astype(np.int64), a @ b.T)


@needs_ptxas
@settings(max_examples=10, deadline=None)
@given(hopper_gemm_configs())
def test_drawn_configurations_are_refused_with_a_reason_or_assemble_cleanly(kw):
    try:
        cfg = HopperGemm(**kw)
    except ValidationError as e:
        assert str(e)  # a refusal says why
        return
    r = assembled(cfg)
    assert r.resources(cfg.kernel_name).spills == 0
    assert "C7504" not in r.log and "C7508" not in r.log and "C7513" not in r.log


@pytest.mark.gpu
@pytest.mark.parametrize("op,kw", [("s8", {}), ("bf16", dict(block_n=128)), ("s4", SKINNY["s4"][0][1]),
                                   ("bf16", SKINNY["bf16"][0][1])])
def test_gpu_split_reductions_agree_call_after_call_and_in_a_graph(op, kw):
    """The in-kernel reduction (split_reduce='kernel') gives C bit for bit as the second launch does (f32 too:
    both add the splits in order 0, 1, 2), on every call of one plan over fresh operands (each tile's counter is
    back at 0 after a launch), and replayed from a CUDA graph; C poisoned before each call."""
    torch = pytest.importorskip("torch")
    import dataclasses
    cfg = HopperGemm(op, **kw)
    m, n, k = 40, 300, 3 * 1536
    s = torch.cuda.Stream()
    fused, second = cfg.plan(m, n, k, splits=3, stream=s), dataclasses.replace(cfg, split_reduce="launch").plan(
        m, n, k, splits=3, stream=s)
    assert fused.splits == second.splits == 3 and fused.kernel_cfg.reduces_in_kernel and fused._reduce is None
    assert not second.kernel_cfg.reduces_in_kernel and second._reduce is not None
    dt = torch.int32 if cfg.c_type == "s32" else torch.float32
    rng = np.random.default_rng(5)
    for call in range(3):
        a, b = random_operands(cfg, m, n, k, rng)
        ta, tb = (torch.from_numpy(x.view(np.int16) if x.dtype == np.uint16 else x).cuda() for x in (a, b))
        got = []
        for p in (fused, second):
            c = torch.full((m, n), -7, dtype=dt, device="cuda")
            with torch.cuda.stream(s):
                p(ta, tb, c)
            s.synchronize()
            got.append(c.cpu().numpy())
        assert np.array_equal(got[0].view(np.int32), got[1].view(np.int32)), f"call {call}"
        want = reference(cfg, a, b)
        if cfg.c_type == "s32":
            assert np.array_equal(got[0].astype(np.int64), want)
        else:
            np.testing.assert_allclose(got[0], want, rtol=1e-3, atol=1e-2)
    c = torch.full((m, n), -7, dtype=dt, device="cuda")
    for replayed in _graph_replays(torch, fused, ta, tb, c, s):
        assert np.array_equal(replayed.view(np.int32), got[0].view(np.int32))


@pytest.mark.gpu
def test_gpu_a_first_call_inside_a_graph_capture_says_what_to_do():
    """The first run() of a problem kind makes its plan, and a K split allocates the plan's workspace, which the
    driver refuses while a stream captures a graph in global mode: the error (ours, under torch's own at the
    capture's end) says to make that call before capturing, and the process goes on.  Made before, the call is
    captured and replays exactly; in relaxed mode the first call itself may be captured."""
    torch = pytest.importorskip("torch")
    from ptxforge.errors import DriverError
    cfg = HopperGemm("s4", **SKINNY["s4"][0][1])
    m, n, k = 32, 1024, 8192
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(8))
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    want = reference(cfg, a, b)
    s = torch.cuda.Stream()
    c = torch.full((m, n), -7, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    current = torch.cuda.current_stream()
    with pytest.raises(Exception) as e:
        with torch.cuda.graph(torch.cuda.CUDAGraph(), stream=s, capture_error_mode="global"):
            cfg.run(ta, tb, c, stream=s)
    # torch's graph context leaves its capture stream current when ending the capture raises: give the caller's
    # stream back, or every later torch op of the process runs on `s`, unordered with launches on the legacy stream
    torch.cuda.set_stream(current)
    chain, x = [], e.value
    while x is not None:
        chain.append(x)
        x = x.__context__
    ours = [x for x in chain if isinstance(x, DriverError)]
    assert ours and "before capturing" in str(ours[0]) and ours[0].code == 900, [str(x) for x in chain]
    torch.cuda.synchronize()
    s = torch.cuda.Stream()  # (a stream of its own for what follows the refused capture)
    relaxed = HopperGemm("s4", **dict(SKINNY["s4"][0][1], a_group=4))  # a kind no call has made a plan for
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s, capture_error_mode="relaxed"):
        relaxed.run(ta, tb, c, stream=s)
    graph.replay()
    torch.cuda.synchronize()
    assert np.array_equal(c.cpu().numpy().astype(np.int64), want)
    plan = cfg.plan(m, n, k, stream=s)
    for got in _graph_replays(torch, plan, ta, tb, c, s):
        assert np.array_equal(got.astype(np.int64), want)


def _graph_replays(torch, plan, ta, tb, c, stream, replays=2):
    """C (numpy) after each replay of a CUDA graph that holds one `plan(ta, tb, c)` on `stream`: one call before
    the capture (it encodes the buffers' tensor maps and makes anything the plan makes at a first launch), C
    poisoned with -7 before each replay."""
    with torch.cuda.stream(stream):
        plan(ta, tb, c)
    stream.synchronize()
    c.fill_(-7)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        plan(ta, tb, c)
    for _ in range(replays):
        graph.replay()
        torch.cuda.synchronize()
        yield c.cpu().numpy()
        c.fill_(-7)


@pytest.mark.gpu
def test_gpu_c16_split_in_the_kernel_rounds_the_whole_sum():
    """16-bit C with K split: the in-kernel reduction adds the f32 partial sums before the epilogue rounds them,
    so C is the f32 C of the same split rounded to nearest-even (the second launch refuses it)."""
    torch = pytest.importorskip("torch")
    import dataclasses
    from support.hopper_gemm import round_to_c16
    cfg = HopperGemm("bf16", block_n=128, epilogue="tma", c16=True)
    m, n, k = 72, 320, 3 * 1024
    a, b = random_operands(cfg, m, n, k, np.random.default_rng(9))
    ta, tb = (torch.from_numpy(x.view(np.int16)).cuda() for x in (a, b))
    c16 = torch.full((m, n), -1, dtype=torch.int16, device="cuda")
    cfg.plan(m, n, k, splits=3)(ta, tb, c16)
    f32 = dataclasses.replace(cfg, c16=False)
    c32 = torch.full((m, n), -7, dtype=torch.float32, device="cuda")
    f32.plan(m, n, k, splits=3)(ta, tb, c32)
    torch.cuda.synchronize()
    want = round_to_c16(cfg, c32.cpu().numpy().astype(np.float64)).astype(np.float32)
    got = (c16.cpu().numpy().view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(got, want)
    with pytest.raises(ValidationError, match="split_reduce='kernel'"):
        dataclasses.replace(cfg, split_reduce="launch").plan(m, n, k, splits=3)


@pytest.mark.parametrize("g", CONFIGS + [HopperGemm("s8", epilogue="tma", block_n=128, stages=3),
                                         HopperGemm("s8", odd_n=True)], ids=lambda g: g.kernel_name)
def test_c_store_bytes_is_the_widest_store_into_c(g):
    """The alignment a plan asks of C's address is the widest store the kernel (without a K split, so every
    global store goes to C) makes: read from its PTX, a tensor store standing for C's 16-byte map."""
    import re
    launched = g.for_launch(63 if g.odd_n else 64, 1)
    assert launched.c_store_bytes == g.c_store_bytes
    ptx = str(launched.module)
    widths = [{"v2": 2, "v4": 4}.get(vec, 1) * int(bits) // 8
              for vec, bits in re.findall(r"\bst\.global(?:\.L2::\w+)?\.?(v[24])?\.[bsuf](\d+)", ptx)]
    widest = 16 if re.search(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx) else max(widths)
    assert g.c_store_bytes == widest, (g.c_store_bytes, sorted(set(widths)))


def test_a_plan_names_the_address_its_stores_cannot_use():
    """HopperPlan.misaligned: A and B at 16 bytes (tensor maps), C at what the kernel stores into it."""
    from ptxforge.schedules.hopper.plan import HopperPlan
    p = object.__new__(HopperPlan)
    p._c_map, p._c_align = False, 8
    assert p.misaligned(0x1000, 0x2000, 0x3008) is None
    assert p.misaligned(0x1008, 0x2000, 0x3000) == "A at 0x1008 is not 16-byte aligned, as its tensor map needs"
    assert "B at 0x2004" in p.misaligned(0x1000, 0x2004, 0x3000)
    assert p.misaligned(0x1000, 0x2000, 0x3004) == ("C at 0x3004 is not 8-byte aligned, as the kernel's 8-byte "
                                                    "stores into it need")
    p._c_map, p._c_align = True, 16
    assert p.misaligned(0x1000, 0x2000, 0x3008) == "C at 0x3008 is not 16-byte aligned, as its tensor map needs"


def test_reference_is_what_interpret_computes_for_every_operand_type():
    """HopperGemm.reference (what for_shape's caller compares with, on either schedule family): exact for s4
    (packed uint8) and s8 (uint8 bytes read as their s8 values, as the kernel reads them), the float64 product
    for bf16 within f32 accumulation; operands checked as interpret checks them."""
    from ptxforge.int4 import pack_int4
    from ptxforge.schedules.hopper import Bf16Gemm
    from ptxforge.bfloat16 import to_bf16
    rng = np.random.default_rng(11)
    a, b = rng.integers(-8, 8, (40, 256)).astype(np.int8), rng.integers(-8, 8, (72, 256)).astype(np.int8)
    exact = a.astype(np.int64) @ b.T.astype(np.int64)
    s4 = pf.Int4Gemm.for_shape(40, 72, 256, target="sm_90a")
    got, r = s4.interpret(pack_int4(a), pack_int4(b))
    assert np.array_equal(s4.reference(pack_int4(a), pack_int4(b)), exact) and np.array_equal(got, exact)
    s8 = pf.Int8Gemm.for_shape(40, 72, 256, target="sm_90a")
    a8 = rng.integers(-128, 128, (40, 256)).astype(np.int8)
    want8 = a8.astype(np.int64) @ b.T.astype(np.int64)
    assert np.array_equal(s8.reference(a8.view(np.uint8), b), want8)
    assert np.array_equal(s8.interpret(a8.view(np.uint8), b)[0], want8)
    bf = Bf16Gemm.for_shape(40, 72, 64)
    fa, fb = to_bf16(rng.standard_normal((40, 64))), to_bf16(rng.standard_normal((72, 64)))
    ref = bf.reference(fa, fb)
    assert ref.dtype == np.float64 and np.allclose(bf.interpret(fa, fb)[0], ref, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValidationError, match="A holds int8"):
        s4.reference(a, b)
