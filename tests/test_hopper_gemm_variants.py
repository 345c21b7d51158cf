"""The Hopper GEMM's optional parts: 2-CTA clusters with TMA multicast (cluster_m / cluster_n), the
shared-memory + TMA-store epilogue (epilogue='tma') and its 16-bit C through stmatrix (c16).

CPU: every variant the tuning candidates name assembles for sm_90a with 0 spills and shows the
multicast loads / TMA stores in its SASS; small variants run on the interpreter at ragged shapes
(a cluster partner past the edge, a persistent loop over several units, split K) and match numpy
exactly, with no race, proxy, accumulator or barrier finding (s8, bf16 and f16 on small halves, whose
sums are exact).  GPU: each variant on ragged and Hypothesis-drawn shapes, C poisoned first.
"""

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ptxforge as pf
from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import CANDIDATES, HopperGemm, assembled, random_operands, reference
from ptxforge.schedules.hopper.defaults import SKINNY_S4, SKINNY_S4_32
from support.hopper_gemm import c_values, draw_problem, run_on_interpreter
from ptxforge import interp
from ptxforge.testing.hopper_shapes import hopper_gemm_shapes
from ptxforge.testing.hopper_strategies import hopper_gemm_configs

needs_ptxas = pytest.mark.skipif(not pf.assembler.find_tool("ptxas"), reason="ptxas not installed")

#: the new variants among the tuning candidates (the defaults are tested in test_hopper_gemm.py), and the
#: skinny swap_ab path with pairs of CTAs along the weight rows sharing the activation tile
VARIANTS = [(op, kw) for op, cands in CANDIDATES.items() for kw in cands[1:]] + [
    ("s4", dict(block_n=32, consumers=1, stages=4, block_k_bytes=256, swap_ab=True, cluster_m=2))]
MMA = {"s8": "IGMMA", "s4": "IGMMA", "bf16": "HGMMA", "f16": "HGMMA"}


def _id(v):
    return HopperGemm(v[0], **v[1]).kernel_name


@needs_ptxas
@pytest.mark.parametrize("variant", VARIANTS, ids=_id)
def test_variant_assembles_without_spills_with_multicast_and_tma_stores(variant):
    cfg = HopperGemm(variant[0], **variant[1])
    r = assembled(cfg)
    res = r.resources(cfg.kernel_name)
    assert res.spills == 0 and res.stack == 0
    assert "C7504" not in r.log and "C7508" not in r.log and "C7513" not in r.log
    text = cfg.listing()
    assert (".reqnctapercluster 2, 1, 1" in text) == (cfg.cluster_size == 2)
    try:
        ops = r.sass_opcodes(cfg.kernel_name)
    except pf.errors.ToolchainMissing:
        pytest.skip("no disassembler")
    assert any(o.startswith(MMA[cfg.operand] + ".64x" + str(cfg.block_n)) for o in ops), sorted(ops)
    assert any(o.startswith("UTMALDG.2D.MULTICAST") for o in ops) == (cfg.cluster_size == 2)
    assert any(o.startswith("UTMASTG.3D") for o in ops) == (cfg.epilogue == "tma")
    assert any(o.startswith("STSM") for o in ops) == cfg.c16
    assert not any(o.startswith(("LDL", "STL", "CALL")) for o in ops)


def test_variant_options_are_checked():
    for kw, msg in [(dict(cluster_m=2, cluster_n=2), "cluster_m x cluster_n"), (dict(cluster_m=3), "cluster_m"),
                    (dict(epilogue="stmatrix"), "epilogue"), (dict(epilogue="tma", block_n=208), "multiple of 32"),
                    (dict(operand="s4", block_k_bytes=256, stages=2, epilogue="tma"), "C staging"),
                    (dict(operand="bf16", c16=True), "c16"), (dict(operand="s8", epilogue="tma", c16=True), "c16")]:
        with pytest.raises(ValidationError, match=msg):
            HopperGemm(**kw)
    g = HopperGemm("s8", epilogue="tma")
    g.check_problem(7, 12, 16)
    with pytest.raises(ValidationError, match="N % 4"):
        g.check_problem(7, 10, 16)
    c = HopperGemm("s8", cluster_m=2)
    assert c.cluster == (2, 1, 1) and c.load_boxes == ((128, 128), (128, 128)) and c.multicast == (False, True)
    assert HopperGemm("s8", cluster_n=2).load_boxes == ((128, 64), (128, 256))
    assert c.cluster_tiles(3 * 128, 2 * 256) == 2 * 2  # pairs along M, rounded up
    assert HopperGemm("s8").cluster_tiles(3 * 128, 2 * 256) == 3 * 2
    assert "multicast" in c.describe() and "TMA stores" in g.describe()
    h = HopperGemm("bf16", epilogue="tma", c16=True)
    assert h.c_type == "bf16" and h.c_bytes == 2 and h.store_box == (64, 64) and "stmatrix" in h.describe()
    h.check_problem(7, 8, 64)
    with pytest.raises(ValidationError, match="N % 8"):
        h.check_problem(7, 12, 64)


INTERP = [  # (operand, options), small tiles so the interpreter is quick
    ("s8", dict(cluster_m=2)), ("s8", dict(cluster_n=2)), ("s8", dict(epilogue="tma")),
    ("s8", dict(cluster_m=2, epilogue="tma")), ("s8", dict(cluster_n=2, wg_m=128, consumers=1, epilogue="tma")),
    ("bf16", dict(cluster_m=2)), ("bf16", dict(epilogue="tma")), ("f16", dict(cluster_n=2, epilogue="tma")),
    ("bf16", dict(epilogue="tma", c16=True)), ("f16", dict(cluster_m=2, epilogue="tma", c16=True)),
    ("bf16", dict(cluster_n=2, wg_m=128, consumers=1, epilogue="tma", c16=True)),
]
SHAPES = [  # (m, n, k, splits, clusters): ragged; odd tile rows (a partner past the edge); persistent loops
    (130, 100, 160, 1, None), (300, 140, 272, 1, 1), (200, 132, 400, 2, 1)]
#: the persistent-loop shapes run in the interpreter's other thread order (each warpgroup as far ahead of
#: the lower ones as its barriers let it), the others in lockstep
ORDER = {None: "lowest-pc", 1: "last-warpgroup-first"}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])) + f"_s{s[3]}")
@pytest.mark.parametrize("variant", INTERP, ids=lambda v: _id((v[0], dict(block_n=64, stages=2, **v[1]))))
def test_variant_on_the_interpreter_is_exact_and_clean(variant, shape):
    op, kw = variant
    cfg = HopperGemm(op, block_n=64, stages=2, **kw)
    m, n, k, splits, clusters = shape
    if cfg.c16:
        splits, n = 1, n + (-n) % 8  # one rounding of the whole sum; 16-byte rows of 16-bit C
    got, want, r = run_on_interpreter(cfg, m, n, k, splits=splits, clusters=clusters, seed=m + n,
                                      order=ORDER[clusters])
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw", [dict(biased=True, cluster_m=2), dict(biased=True, epilogue="tma"),
                                dict(a_registers=False, cluster_n=2), dict(biased=True, cluster_n=2, epilogue="tma")],
                         ids=["biased-cl2x1", "biased-tma", "smemA-cl1x2", "biased-cl1x2-tma"])
def test_s4_variants_on_the_interpreter_are_exact(kw):
    """s4: exact; race checks off (the s4 consumers' reads of the packed stage, handed back by lane 0 of
    each warp, are reported as a race with the next TMA load also without these options)."""
    cfg = HopperGemm("s4", block_n=64, block_k_bytes=256, stages=2, **kw)
    got, want, r = run_on_interpreter(cfg, 300, 132, 512, splits=1, clusters=1, seed=3, races=False)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


def test_swapped_operands_with_a_cluster_on_the_interpreter():
    """swap_ab (the kernel computes B . A^T) with pairs along the kernel's M, the weight rows: the
    activation tile is the multicast one.  The kernel's M and N are the problem's N and M."""
    cfg = HopperGemm("s4", block_n=32, consumers=1, stages=2, block_k_bytes=256, swap_ab=True, cluster_m=2)
    m, n, k = 20, 200, 512  # kernel: 200 x 20, tile rows 64: 4 tiles, 2 pairs, one cluster looping over both
    got, want, r = run_on_interpreter(cfg, m, n, k, clusters=1, seed=5, races=False)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValidationError, match="swap_ab"):
        HopperGemm("s8", swap_ab=True, epilogue="tma")


def test_a_cluster_without_the_partners_arrivals_is_caught():
    """The empty barriers must count both CTAs' consumers: with only this CTA's, the interpreter sees
    a multicast overwrite a stage the partner's wgmmas still read (the test above can fail)."""
    from ptxforge.hopper import pipeline
    from ptxforge.schedules.hopper import emit
    cfg = HopperGemm("s8", block_n=64, stages=2, cluster_m=2, raster_group=3)  # a configuration of its own
    real = pipeline.ClusterRing.__init__

    def fewer(self, k, stages, base, peers, **kw):
        kw["consumer_arrivals"] //= 2
        real(self, k, stages, base, peers, **kw)
    emit.module_for.cache_clear()
    try:
        pipeline.ClusterRing.__init__ = fewer
        got, want, r = run_on_interpreter(cfg, 300, 140, 1024, clusters=1)
    finally:
        pipeline.ClusterRing.__init__ = real
        emit.module_for.cache_clear()
    assert not r.ok or not np.array_equal(got, want)


# ---------------------------------------------------------------- GPU

def _check_gpu(cfg, m, n, k, seed, splits=None):
    from ptxforge.schedules.hopper import run
    rng = np.random.default_rng(seed)
    if cfg.operand == "f16":  # float16 arrays (random_operands speaks bf16 bit patterns)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((n, k)).astype(np.float16)
    else:
        a, b = random_operands(cfg, m, n, k, rng)
    got = c_values(cfg, run(cfg, a, b, k=k, splits=splits))  # C is poisoned (0xFF bytes) before the launch
    if cfg.operand == "f16":
        want = a.astype(np.float64) @ b.astype(np.float64).T
    else:
        want = reference(cfg, a, b)
    if cfg.operand in ("bf16", "f16"):
        if cfg.operand == "f16":
            af, bf = a.astype(np.float64), b.astype(np.float64)
        else:
            af = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            bf = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        bound = k * 2.0 ** -21 * (np.abs(af) @ np.abs(bf).T) + 1e-30  # f32 accumulation of exact products
        if cfg.c16:  # and one rounding to the 16-bit C: half an ulp, 2^-8 (bf16) or 2^-11 (f16) relative
            bound = bound * 1.01 + (2.0 ** -8 if cfg.operand == "bf16" else 2.0 ** -11) * np.abs(want)
        assert np.all(np.isfinite(got)) and np.all(np.abs(got - want) <= bound), (m, n, k)
    else:
        assert np.array_equal(got.astype(np.int64), want), (m, n, k)


GPU_SHAPES = [(200, 328, 256), (96, 132, 64), (257, 512, 1024), (600, 260, 2048), (40, 300, 1792)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("variant", VARIANTS, ids=_id)
def test_gpu_variant_matches_numpy(variant, shape):
    cfg = HopperGemm(variant[0], **variant[1])
    m, n, k = shape
    if cfg.c16:
        n += (-n) % 8  # 16-byte rows of 16-bit C
    _check_gpu(cfg, m, n, k, seed=sum(shape))


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS, ids=_id)
def test_gpu_variant_split_k_matches_numpy(variant):
    """K split in 3, the partial sums added in the kernel (16-bit C rounded from their whole sum) and, but for
    16-bit C, which refuses it, in a second launch (the TMA-store epilogue then writes the workspace through
    its 3-D map)."""
    cfg = HopperGemm(variant[0], **variant[1])
    _check_gpu(cfg, 40, 304 if cfg.c16 else 300, 1792, seed=11, splits=3)
    second = dataclasses.replace(cfg, split_reduce="launch")
    if cfg.c16:
        with pytest.raises(ValidationError, match="cannot be split"):
            _check_gpu(second, 40, 304, 1792, seed=11, splits=3)
        return
    _check_gpu(second, 40, 300, 1792, seed=11, splits=3)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS, ids=_id)
def test_gpu_variant_on_drawn_shapes(variant):
    cfg = HopperGemm(variant[0], **variant[1])

    @settings(max_examples=8, deadline=None)
    @given(hopper_gemm_shapes(cfg))
    def check(shape):
        _check_gpu(cfg, *shape, seed=hash(shape) % 2 ** 32)
    check()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(kw=hopper_gemm_configs(), order=st.sampled_from(interp.ORDERS), data=st.data())
def test_drawn_configurations_of_every_operand_are_exact_and_clean_on_the_interpreter(kw, order, data):
    """Tile shapes, consumers, stages, clusters and epilogues drawn for s8, s4, bf16 and f16: what the
    constructor accepts runs exactly (numpy's C for these small exact operands) and without findings at a
    drawn ragged shape, K split or not, in either of the interpreter's thread orders."""
    try:
        cfg = HopperGemm(**kw)
    except ValidationError:
        assume(False)
    m, n, k, splits, clusters = draw_problem(cfg, data)
    got, want, r = run_on_interpreter(cfg, m, n, k, splits=splits, clusters=clusters, seed=m + n + k, order=order)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,kw,shape", [("s8", {}, (70, 101, 256)), ("s4", dict(SKINNY_S4), (100, 131, 1024)),
                                         ("s4", dict(SKINNY_S4), (100, 130, 1024))])
def test_the_c_stores_follow_the_parity_of_n(op, kw, shape):
    """A kernel carries only the C stores its N needs: pairs for even rows, single values (odd_n) for odd
    ones; `for_c_columns` (what a plan calls) picks the variant, which is exact on the interpreter."""
    cfg = HopperGemm(op, **kw)
    m, n, k = shape
    picked = cfg.for_c_columns(n)
    assert picked.odd_n == bool(n % 2) and (picked is cfg) == (not n % 2)
    text = picked.listing()
    assert ("st.global.v2" in text) == (not n % 2) and ("_on" in picked.kernel_name) == bool(n % 2)
    got, want, r = run_on_interpreter(cfg, m, n, k, clusters=1, seed=n)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)
    swapped = HopperGemm("s4", **SKINNY_S4_32)  # transposed 4-byte stores take any N
    assert swapped.for_c_columns(n) is swapped
    with pytest.raises(ValidationError, match="odd_n"):
        HopperGemm("s4", **SKINNY_S4_32, odd_n=True)
