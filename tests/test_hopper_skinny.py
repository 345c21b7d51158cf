"""The register-sourced s4 Hopper GEMM as skinny problems run it: A widened in registers and pipelined
against the tensor cores, the scaled widening (16 v, C = acc >> 8), converter warps with deeper
buffer rings, and `interleave_k` (two consumer warpgroups on alternate k-stages whose sums meet
in shared memory).  On the interpreter, exact against numpy and free of race, proxy, accumulator
and barrier findings, at ragged shapes and with persistent loops over units of odd stage counts;
assembled for sm_90a without spills and with the wgmmas kept asynchronous."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import DEFAULTS, HopperGemm, random_operands, reference, run
from ptxforge.schedules.hopper.defaults import SKINNY_S4, SKINNY_S4_32, SKINNY_S4_64, SKINNY_S4_256
from ptxforge.schedules.hopper.convert import SCALED_K_LIMIT, widen_numpy, widen_word_scaled
from ptxforge.testing.hopper_strategies import hopper_gemm_configs
from support.hopper_gemm import draw_problem, run_on_interpreter

SKINNY = [  # (options, (m, n, k, splits, clusters)): clusters=1 walks several units of 5 or 3 stages
    (dict(block_n=64, consumers=1, scaled=True, converter=True, convert_buffers=3), (40, 130, 1280, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True), (120, 70, 768, 1, None)),
    (dict(block_n=64, consumers=2, interleave_k=True, scaled=True), (50, 130, 1280, 1, 1)),
    (dict(block_n=64, consumers=2, interleave_k=True, scaled=True), (17, 136, 256, 1, None)),
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True), (20, 150, 768, 1, 1)),
    (dict(block_n=64, consumers=2, interleave_k=True, scaled=True, converter=True, convert_buffers=4),
     (64, 100, 1280, 2, 1)),
    (dict(block_n=64, wg_m=128, consumers=2, interleave_k=True, biased=True), (100, 70, 1024, 1, 1)),
    (dict(block_n=32, consumers=1, swap_ab=True, converter=True), (24, 90, 512, 1, None)),
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, block_k_bytes=512),
     (20, 130, 2560, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=2), (100, 70, 1536, 1, None)),
    (dict(block_n=64, consumers=1, converter=True, biased=True, block_k_bytes=512, stages=2), (64, 64, 1024, 1, 1)),
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, rotate_k=True), (20, 200, 1280, 2, 2)),
    (dict(block_n=256, consumers=2, scaled=True, stages=2), (130, 260, 512, 1, None)),  # the large-problem default
    (dict(block_n=64, consumers=2, scaled=True, rotate_k=True), (120, 200, 1536, 1, 2)),
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=2, a_group=8), (100, 70, 1536, 1, 1)),
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, a_group=2), (20, 150, 768, 1, 1)),
    # three widened B buffers: the consumers skip the barrier that guards a buffer's reuse
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=2, convert_buffers=3), (100, 70, 2560, 1, 1)),
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, convert_buffers=3),
     (20, 150, 1792, 1, 1)),
    # one widened B buffer: each stage waits for the last one's wgmmas before widening (with interleave_k the
    # second consumer's sums pass through it)
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, convert_buffers=1),
     (20, 150, 1792, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=2, convert_buffers=1), (100, 70, 2560, 1, 1)),
    (dict(block_n=64, consumers=2, interleave_k=True, scaled=True, convert_buffers=1), (50, 130, 1280, 1, 1)),
    # the next stage's B widened between this stage's groups (units of one stage, of several, K split)
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=3, a_group=2, widen_ahead=True),
     (100, 70, 2560, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True, stages=3, widen_ahead=True), (120, 200, 1536, 2, 2)),
    (dict(block_n=128, consumers=2, scaled=True, stages=3, widen_ahead=True), (130, 150, 512, 1, None)),
    (dict(block_n=64, consumers=1, biased=True, stages=3, widen_ahead=True), (40, 130, 768, 1, 1)),
    (dict(block_n=64, wg_m=128, consumers=2, scaled=True, stages=2, widen_ahead=True), (200, 100, 1280, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True, stages=3, widen_ahead=True, rotate_k=True), (120, 200, 1536, 1, 2)),
    # L2 prefetches of the weights ahead of the ring (a hint: the same results, the prefetch loop's bounds
    # walked with units of fewer stages than the distance, and with more)
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, l2_prefetch=6), (20, 150, 1280, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=2, l2_prefetch=2), (100, 70, 2560, 1, 1)),
    # two consumers on the halves of every stage (each its own B half and barrier; the sums meet at the end),
    # between the stages and widened ahead, over K splits and one CTA walking every unit
    (dict(block_n=32, consumers=2, split_stage=True, scaled=True, swap_ab=True, block_k_bytes=512, stages=6),
     (20, 150, 2592, 2, 1)),
    (dict(block_n=64, consumers=2, split_stage=True, widen_ahead=True, scaled=True, swap_ab=True,
          block_k_bytes=512, stages=4), (50, 150, 1568, 1, 1)),
    (dict(block_n=64, consumers=2, split_stage=True, widen_ahead=True, biased=True, block_k_bytes=512, a_group=2,
          stages=3), (70, 100, 2048, 2, None)),
    # odd k-steps into a second accumulator set; the weights' first stages asked of the L2 before the wait
    (dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, block_k_bytes=512, acc_sets=2,
          early_prefetch=2, pdl=True), (20, 150, 1568, 1, 1)),
    (dict(block_n=64, consumers=2, scaled=True, block_k_bytes=512, stages=3, widen_ahead=True, acc_sets=2,
          early_prefetch=8, pdl=True), (100, 70, 1536, 2, None)),
    # three consumers on every third stage: units of 5 stages (each consumer a different count), units of
    # one stage (two consumers add nothing), K split, one CTA walking every unit; swapped and not
    (dict(block_n=32, consumers=3, consumer_regs=152, interleave_k=True, scaled=True, swap_ab=True, block_k_bytes=512,
          stages=6, convert_buffers=1, a_group=8, early_prefetch=2, pdl=True), (20, 150, 5120, 1, 1)),
    (dict(block_n=32, consumers=3, consumer_regs=152, interleave_k=True, scaled=True, swap_ab=True, block_k_bytes=512,
          stages=3, convert_buffers=2), (20, 300, 1024, 2, 1)),
    (dict(block_n=64, consumers=3, consumer_regs=152, interleave_k=True, biased=True, stages=6, convert_buffers=1),
     (70, 100, 1792, 2, None)),
    # four consumers (640 threads, 104 registers each), 256-value stages in a ring of 12
    (dict(block_n=32, consumers=4, consumer_regs=104, interleave_k=True, scaled=True, swap_ab=True, stages=12,
          convert_buffers=1), (20, 150, 5120, 1, 1)),
    # two m64 blocks per consumer: the sums outgrow a widened B buffer and pass through space of their own
    # (groups of 2 k-steps: with 4, 64 + 64 registers leave too few of the 152)
    (dict(block_n=64, wg_m=128, consumers=3, consumer_regs=152, interleave_k=True, scaled=True, stages=3,
          convert_buffers=1, a_group=2), (150, 70, 1280, 1, 1)),
]


def _id(v):
    kw, shape = v
    return "-".join(f"{k}{'' if val is True else val}" for k, val in kw.items()) + "_" + "x".join(map(str, shape[:3]))


@pytest.mark.parametrize("order", interp.ORDERS)
@pytest.mark.parametrize("variant", SKINNY, ids=_id)
def test_pipelined_s4_kernel_is_exact_and_clean_on_the_interpreter(variant, order):
    """In both of the interpreter's thread orders: lowest pc first (the warpgroups in lockstep) and the
    last warpgroup first (each consumer as far ahead of the others as its barriers let it, where a
    barrier missing between the consumers shows as a race or a rewrite of bytes a wgmma still holds)."""
    kw, (m, n, k, splits, clusters) = variant
    # interleave_k takes even rings (its two consumers alternate stages)
    cfg = HopperGemm("s4", **{"block_k_bytes": 256, "stages": 4 if kw.get("interleave_k") else 3, **kw})
    got, want, r = run_on_interpreter(cfg, m, n, k, splits=splits, clusters=clusters, seed=m + n + k, order=order)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


def test_scaled_widening_is_sixteen_times_the_value_with_no_carry():
    """Every byte of every packed word: (w << 4) & 0xF0.. and w & 0xF0.. are 16 v as signed bytes."""
    words = np.arange(1 << 16, dtype=np.uint32) * 0x10001  # every 16-bit pattern, repeated in both halves
    lo = ((words << 4) & 0xF0F0F0F0).view(np.int8).reshape(-1, 4)
    hi = (words & 0xF0F0F0F0).view(np.int8).reshape(-1, 4)
    vals = widen_numpy(words.view(np.uint8).reshape(-1, 4)).reshape(-1, 8)  # v0..v7, even k in the low nibble
    assert np.array_equal(lo.astype(np.int16), 16 * vals[:, 0::2].astype(np.int16))
    assert np.array_equal(hi.astype(np.int16), 16 * vals[:, 1::2].astype(np.int16))
    assert widen_word_scaled.__doc__ and SCALED_K_LIMIT * 64 * 256 == 2 ** 31  # the bound the docstring states


def test_scaled_k_limit_and_option_checks_name_the_legal_choice():
    g = HopperGemm("s4", block_k_bytes=256, block_n=64, stages=2, scaled=True)
    g.check_problem(32, 64, SCALED_K_LIMIT - 32)
    with pytest.raises(ValidationError, match="K < 131072"):
        g.check_problem(32, 64, SCALED_K_LIMIT)
    for kw, msg in [(dict(operand="s8", scaled=True), "operand='s4'"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, stages=2, scaled=True, biased=True), "choose one"),
                    (dict(operand="s8", convert_buffers=3), "register-sourced s4"),
                    (dict(operand="s4", block_k_bytes=256, converter=True, convert_buffers=5), "1..4"),
                    (dict(operand="s4", block_k_bytes=256, converter=True, convert_buffers=1), r"another \(2..4\)"),
                    (dict(operand="s4", block_k_bytes=256, l2_prefetch=-1), "0..32"),
                    (dict(operand="s4", block_k_bytes=256, block_n=32, consumers=2), "multiple of 64"),
                    (dict(operand="s4", block_k_bytes=256, block_n=96, consumers=2), "block_n=96"),
                    (dict(operand="s4", block_k_bytes=256, l2_prefetch=2, rotate_k=True), "choose one"),
                    (dict(operand="s8", interleave_k=True), "consumers=2"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, interleave_k=True, converter=True),
                     "convert_buffers=4"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, interleave_k=True, converter=True,
                          convert_buffers=3), "convert_buffers=4"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, interleave_k=True, stages=3),
                     "multiple of 2 stages"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, interleave_k=True, consumers=3,
                          consumer_regs=152, stages=4), "multiple of 3 stages"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, consumers=3, consumer_regs=152),
                     "consumers=3 is for interleave_k"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, interleave_k=True, consumers=3, stages=6),
                     r"register split 40/232 x 3: .* wait forever"),
                    (dict(operand="s4", block_k_bytes=256, block_n=32, swap_ab=True, interleave_k=True, consumers=4,
                          consumer_regs=112, stages=4, convert_buffers=1), "at most 104 per consumer"),
                    (dict(operand="s4", block_k_bytes=256, block_n=128, interleave_k=True, consumers=3,
                          consumer_regs=152, stages=3, convert_buffers=1, acc_sets=2, a_group=2),
                     "128 accumulator and 16 A-fragment registers .* at most 96 fit"),
                    (dict(operand="s8", block_n=256, consumer_regs=168), "128 accumulator registers .* at most 112"),
                    (dict(operand="s4", block_k_bytes=256, consumers=5), "3 or 4 with interleave_k"),
                    (dict(operand="s4", block_k_bytes=256, consumers=1, interleave_k=True), "consumers=2"),
                    (dict(operand="s4", block_k_bytes=256, interleave_k=True, epilogue="tma", block_n=128),
                     "through registers"),
                    (dict(operand="s4", block_k_bytes=256, a_group=8), "block_k_bytes a multiple of 512"),
                    (dict(operand="s4", block_k_bytes=256, a_group=3), "2, 4 or 8"),
                    (dict(operand="s8", a_group=2), "operand='s4'"),
                    (dict(operand="s4", block_k_bytes=256, block_n=64, split_stage=True), "multiple of 512"),
                    (dict(operand="s4", block_k_bytes=512, block_n=64, split_stage=True, a_group=8),
                     "of 1024 with a_group=8"),
                    (dict(operand="s4", block_k_bytes=512, block_n=64, split_stage=True, interleave_k=True),
                     "not interleave_k"),
                    (dict(operand="s4", block_k_bytes=512, block_n=64, split_stage=True, consumers=1), "consumers=2"),
                    (dict(operand="s4", block_k_bytes=512, block_n=64, split_stage=True, epilogue="tma"),
                     "through registers"),
                    (dict(operand="s8", acc_sets=2), "register-sourced"),
                    (dict(operand="s4", block_k_bytes=256, acc_sets=3), "1 or 2"),
                    (dict(operand="s4", block_k_bytes=256, block_n=256, acc_sets=2), "at most 160"),
                    (dict(operand="s8", early_prefetch=2), "pdl=True"),
                    (dict(operand="s8", early_prefetch=65, pdl=True), "0..64"),
                    (dict(operand="s8", early_prefetch=2, pdl=True, cluster_m=2), "not with rotate_k or clusters")]:
        with pytest.raises(ValidationError, match=msg):
            HopperGemm(**kw)
    il = HopperGemm("s4", block_k_bytes=256, block_n=64, interleave_k=True, scaled=True)
    # the second consumer's sums (128 threads x 32 words) pass through its widened B buffers, or with the
    # converter (whose buffers are shared) through shared memory set aside for them
    assert il.block_m == 64 and il.reduce_in_buffers and il.reduce_bytes == 0 and "_ik" in il.kernel_name
    cv = HopperGemm("s4", block_k_bytes=256, block_n=64, interleave_k=True, scaled=True, converter=True,
                    convert_buffers=4)
    assert not cv.reduce_in_buffers and cv.reduce_bytes == 128 * 32 * 4
    assert il.smem_bytes == cv.smem_bytes - cv.reduce_bytes - cv.convert_bytes + il.convert_bytes - 16 * 2
    ss = HopperGemm("s4", block_k_bytes=512, block_n=64, split_stage=True, scaled=True)
    # one set of buffers (each consumer widens its half into it): the sums need shared memory of their own
    assert ss.block_m == 64 and ss.widen_threads == 128 and not ss.reduce_in_buffers
    assert ss.reduce_bytes == 128 * 32 * 4 and ss.convert_bytes == 2 * 64 * 512 and "_ss" in ss.kernel_name


@pytest.mark.parametrize("kw", [dict(block_n=64, consumers=2, interleave_k=True, scaled=True, stages=8),
                                dict(block_n=32, consumers=2, interleave_k=True, scaled=True, swap_ab=True, stages=8),
                                dict(block_n=64, consumers=2, scaled=True, stages=6),
                                dict(block_n=256, consumers=2, scaled=True, stages=2),
                                dict(block_n=64, consumers=2, scaled=True, stages=3, block_k_bytes=512, a_group=8),
                                dict(block_n=64, consumers=2, scaled=True, stages=3, block_k_bytes=512, a_group=2,
                                     widen_ahead=True),
                                dict(SKINNY_S4_64),
                                dict(SKINNY_S4_32, acc_sets=2, consumers=2, consumer_regs=232, convert_buffers=2)],
                         ids=["il-64", "il-swap-32", "2c-64", "2c-256", "2c-64-group8", "2c-64-ahead", "split-stage-64",
                              "il-swap-32-two-sets"])
def test_pipelined_kernels_assemble_without_spills_and_keep_wgmma_asynchronous(kw):
    """ptxas keeps one group in flight while the other half of A is widened: no C7513 serialization, and
    the SASS waits with `WARPGROUP.DEPBAR.LE gsb0, 0x1` inside the k-loop (only the unit's end waits for 0)."""
    r = HopperGemm("s4", **{"block_k_bytes": 256, **kw}).assemble()
    assert r.resources().spills == 0, r.log
    assert "C7513" not in r.log and "C7508" not in r.log, r.log
    sass = r.sass()
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass)
    assert waits.count("0x1") >= 3 and waits.count("0x0") <= 2, waits
    assert "IGMMA" in sass


def test_three_consumer_default_assembles_without_spills_and_keeps_wgmma_asynchronous():
    """SKINNY_S4_32: 512 threads, 152 registers per consumer thread after setmaxnreg, no spill, the groups
    asynchronous (with one widened B buffer per consumer, a stage's widening waits for the consumer's last
    wgmmas of three stages before: one wait_group 0 in the loop, the other at the end of a unit)."""
    cfg = HopperGemm("s4", **SKINNY_S4_32)
    assert cfg.consumers == 3 and cfg.threads == 512 and cfg.block_m == 64 and "c3" in cfg.kernel_name
    r = cfg.assemble()
    assert r.resources().spills == 0, r.log
    assert "C7513" not in r.log and "C7508" not in r.log, r.log
    sass = r.sass()
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass)
    assert waits.count("0x1") >= 2 and waits.count("0x0") <= 2, waits
    assert "IGMMA" in sass and "USETMAXREG" in sass


GPU = [  # what for_shape picks, and the variants the skinny sweep measured (bench/skinny_hopper_bench.py)
    dict(SKINNY_S4), dict(SKINNY_S4_256), dict(DEFAULTS["s4"]),
    dict(SKINNY_S4_32, consumers=2, consumer_regs=232, convert_buffers=2),  # the M <= 32 default before
    dict(block_n=32, consumers=2, interleave_k=True, stages=4, block_k_bytes=512, swap_ab=True, rotate_k=True,
         l2_promotion=256, scaled=True),
    dict(SKINNY_S4_32), dict(SKINNY_S4_64), dict(SKINNY_S4_32, l2_prefetch=8, early_prefetch=0),
    dict(SKINNY_S4, l2_prefetch=4), dict(SKINNY_S4_32, acc_sets=2, early_prefetch=16),
    dict(SKINNY_S4_64, widen_ahead=False, a_group=2, early_prefetch=0),
    dict(SKINNY_S4, widen_ahead=False, a_group=2), dict(DEFAULTS["s4"], widen_ahead=False),  # B widened between stages
    dict(block_n=64, wg_m=128, consumers=2, interleave_k=True, stages=4, block_k_bytes=256, scaled=True),
    dict(block_n=64, consumers=2, interleave_k=True, stages=4, block_k_bytes=256, converter=True,
         convert_buffers=4, scaled=True),
]


def _gpu_id(kw):
    return "-".join(f"{k}{'' if v is True else v}" for k, v in kw.items() if k not in ("scaled",))


@pytest.mark.gpu
@pytest.mark.parametrize("kw", GPU, ids=_gpu_id)
def test_gpu_pipelined_s4_matches_numpy_on_ragged_shapes(kw):
    """Fresh random operands per shape, C poisoned (0xFF bytes) before the launch, exact equality."""
    cfg = HopperGemm("s4", **kw)
    rng = np.random.default_rng(len(GPU) + hash(cfg.kernel_name) % 1000)
    for m, n, k in [(32, 1000, 2560), (100, 8192 - 64, 4096 + 512), (7, 300, 768), (129, 200, 8192)]:
        a, b = random_operands(cfg, m, n, k, rng)
        got = run(cfg, a, b, k=k)
        np.testing.assert_array_equal(got.astype(np.int64), reference(cfg, a, b), err_msg=f"{m}x{n}x{k}")


@pytest.mark.gpu
@pytest.mark.parametrize("kw", GPU[3:5], ids=_gpu_id)
def test_gpu_interleaved_kernel_survives_many_launches_over_changing_weights(kw):
    """Back-to-back launches of a prepared plan over three weight sets (a new tensor map each), the
    last result exact: the sweep once saw a launch failure in this family of kernels."""
    from ptxforge.runtime import DeviceBuffer, synchronize
    cfg = HopperGemm("s4", **kw)
    m, n, k = 32, 8192, 8192
    rng = np.random.default_rng(11)
    a, _ = random_operands(cfg, m, n, k, rng)
    ws = [random_operands(cfg, 1, n, k, rng)[1] for _ in range(3)]
    da = DeviceBuffer.from_host(a)
    dws = [DeviceBuffer.from_host(w) for w in ws]
    dc = DeviceBuffer.empty((m, n), np.int32)
    plan = cfg.plan(m, n, k)
    for i in range(90):
        plan(da, dws[i % 3], dc)
    synchronize()
    np.testing.assert_array_equal(dc.to_host().astype(np.int64), reference(cfg, a, ws[89 % 3]))


@pytest.mark.parametrize("kw, shape", [(dict(wg_m=128, consumers=1), (100, 77, 128)),
                                       (dict(consumers=2), (130, 99, 256)),
                                       (dict(consumers=2), (70, 64, 128))],
                         ids=["two-m64-odd-n", "two-consumers-odd-n", "even-n"])
def test_register_epilogue_masks_rows_and_columns_for_odd_and_even_n(kw, shape):
    """The register epilogue: pair stores for even N, single values for odd N, rows past M skipped,
    over a persistent loop (one CTA) so every tile passes through it; C poisoned, exact."""
    cfg = HopperGemm("s8", block_n=64, stages=2, **kw)
    m, n, k = shape
    got, want, r = run_on_interpreter(cfg, m, n, k, clusters=1, seed=m * n)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("consumers, stages, findings", [(2, 3, True), (2, 4, False), (3, 4, True), (3, 6, False)])
def test_interpreter_reports_the_odd_ring_that_validation_refuses(consumers, stages, findings):
    """Two consumers taking turns on an odd ring (three on a ring not a multiple of 3) pass parity waits two
    phases apart: the H200 showed it as 'unspecified launch failure'; the interpreter reports each such wait
    (a barrier finding) even though its lockstep schedule never lets a consumer get far enough ahead to read
    early.  (The ring is forced past the validation that refuses it.)"""
    two = dict(consumers=2, consumer_regs=232, convert_buffers=2)
    three = dict(consumers=3, consumer_regs=152, convert_buffers=1)
    # (the kernel of a launch without a K split: `for_launch` would validate the forced ring again)
    cfg = HopperGemm("s4", **{**SKINNY_S4_32, **(two if consumers == 2 else three)}, split_reduce="launch")
    assert cfg.consumers == consumers
    object.__setattr__(cfg, "stages", stages)
    got, want, r = run_on_interpreter(cfg, 20, 150, 5120, clusters=1, seed=1)
    np.testing.assert_array_equal(got, want)
    skips = [f for f in r.findings if f.kind == "barrier" and "parity wait passed on phase" in f.message]
    assert bool(skips) == findings, str(r)
    assert r.ok != findings



@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(kw=hopper_gemm_configs(operands=("s4",), s4_options=True), order=st.sampled_from(interp.ORDERS),
       data=st.data())
def test_drawn_s4_configurations_are_exact_and_clean_on_the_interpreter(kw, order, data):
    """Any s4 configuration the constructor accepts (widenings, converter warps, one to four widened B buffers,
    alternate k-stages, stages split between the consumers, two accumulator sets, swapped operands, group
    sizes, B widened ahead, rotated stages, L2 prefetch ahead of the ring and before the wait, pdl,
    clusters, TMA stores), at a drawn ragged shape, K split or not, one CTA walking every unit or one per
    unit, in either thread order: exact and without findings."""
    try:
        cfg = HopperGemm(**kw)
    except ValidationError:
        assume(False)
    m, n, k, splits, clusters = draw_problem(cfg, data)
    got, want, r = run_on_interpreter(cfg, m, n, k, splits=splits, clusters=clusters, seed=m * n + k, order=order)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(kw=hopper_gemm_configs(operands=("s4",), s4_options=True))
def test_drawn_s4_configurations_assemble_without_spills_or_serialized_wgmmas(kw):
    """What the constructor accepts, ptxas takes for sm_90a with no spill, setmaxnreg honoured and no wgmma
    serialized (no C7513: ptxas says it when it must wait for a wgmma whose registers are rewritten)."""
    try:
        cfg = HopperGemm(**kw)
    except ValidationError:
        assume(False)
    r = cfg.assemble()
    assert r.resources(cfg.kernel_name).spills == 0, r.log
    assert "C7504" not in r.log and "C7508" not in r.log and "C7513" not in r.log, r.log


def test_the_breakdown_bench_times_consumers_without_copies_and_leaves_the_kernel_alone():
    """bench/skinny_breakdown.py's timing-only variant has no TMA copy and its full barriers are plain
    arrivals; the kernel it came from, emitted after it, still loads every stage (the patch is undone)."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "skinny_breakdown.py")
    spec = importlib.util.spec_from_file_location("skinny_breakdown", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for label, op, kw, m, mode in mod.ROWS:  # every row is a configuration the constructor accepts
        HopperGemm(op, **kw).check_problem(m, mod.N, mod.K)
    cfg = HopperGemm("s4", **SKINNY_S4_32)
    variant = mod.consumers_only(cfg)
    assert variant != cfg and variant.kernel_name != cfg.kernel_name
    text = variant.listing()
    assert "cp.async.bulk.tensor" not in text and "expect_tx" not in text
    real = HopperGemm("s4", **SKINNY_S4_32).listing()
    assert real.count("cp.async.bulk.tensor") >= 2 and "expect_tx" in real


def test_the_timeline_bench_instruments_the_kernel_and_still_assembles_without_spills():
    """bench/cta_timeline.py writes three %globaltimer stamps per CTA into the PTX text of the kernel for_shape
    picks (entry, after griddepcontrol.wait, before every ret); the result assembles with no spill and the
    kernel's own instructions are all still there, in order."""
    import importlib.util
    import os
    import ptxforge as pf
    path = os.path.join(os.path.dirname(__file__), os.pardir, "bench", "cta_timeline.py")
    spec = importlib.util.spec_from_file_location("cta_timeline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    g = pf.Int4Gemm.for_shape(32, 8192, 8192, target="sm_90a")
    cfg = g.for_launch(32, 1, 32 * 8192)
    plain = str(cfg.module)
    text = mod.instrumented(plain, 0x7F00_0000_0000)
    assert text.count("%globaltimer") == 2 + plain.count("ret;") and "[%tlA+8]" in text and "[%tlA+16]" in text
    kept = [line for line in text.splitlines() if "%tl" not in line and not line.lstrip().startswith(".reg .u64 %tl")]
    assert [line for line in kept if line.strip()] == [line for line in plain.splitlines() if line.strip()]
    r = pf.assemble(text, "sm_90a")
    assert r.resources(cfg.kernel_name).spills == 0, r.log
