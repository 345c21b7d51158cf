"""Programmatic dependent launch (`pdl`) of the GEMM schedules.

On the CPU: the kernels wait (`griddepcontrol.wait`) before their first global access, with only L2
prefetches ahead of the wait, and let the next kernel start only after it; they stay exact on the
interpreter (ragged shapes, split K, the prefetch clipped to the rows); validation names what is
legal; for_shape picks pdl where it was measured to pay.  On the GPU: plans launched back to back
over changing weights stay exact (each launch may start while the one ahead finishes), also when
captured into a CUDA graph, and `launch_dependent` runs a hand-written kernel."""

import dataclasses

import numpy as np
import pytest

from ptxforge.errors import ValidationError
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.defaults import (SKINNY_S4, SKINNY_S4_32, SKINNY_S4_64, SKINNY_S8, SKINNY_S8_32,
                                              SKINNY_S8_64)
from support.examples import load_example
from support.gemm_interp import run_split
from support.hopper_gemm import run_on_interpreter

POISON = -0x5A5A5A5A


def _touches_global(ins) -> bool:
    """A load, store, atomic or copy that may reach global memory (generic addresses count)."""
    m = ins.mnemonic
    if m.startswith("cp.async.bulk.prefetch"):
        return False  # an L2 hint: no data reaches the kernel through it
    if ins.opcode.startswith("cp"):
        return ".global" in m or "bulk.tensor" in m
    if ins.opcode in ("ld", "st", "ldu", "atom", "red"):
        return not {"param", "shared", "local", "const", "shared::cta", "shared::cluster"} & set(ins.mods)
    return False


def _check_entry(kernel, *, prefetches: bool):
    ins = list(kernel.instructions)
    names = [i.mnemonic for i in ins]
    assert names.count("griddepcontrol.wait") == 1, names
    w = names.index("griddepcontrol.wait")
    assert names[w + 1] == "griddepcontrol.launch_dependents"
    early = [i.mnemonic for i in ins[:w] if _touches_global(i)]
    assert not early, f"global accesses before the wait: {early}"
    assert any(n.startswith("cp.async.bulk.prefetch") for n in names[:w]) == prefetches
    assert not any(n.startswith("cp.async.bulk.prefetch") for n in names[w:])


SKINNY32 = Int4Gemm.for_shape(32, 8192, 8192, "sm_90", hopper=False)


@pytest.mark.parametrize("kw", [dict(pdl=True), dict(pdl=True, pdl_prefetch=512),
                                dict(pdl=True, pdl_prefetch=64, splits=3)])
def test_gemm_kernel_waits_before_any_global_access(kw):
    g = dataclasses.replace(SKINNY32, **kw)
    _check_entry(g.module.kernels[0], prefetches=bool(g.pdl_prefetch))
    assert g.kernel_name.endswith(f"_dl{g.pdl_prefetch or ''}")
    r = g.assemble()
    assert r.resources.spills == 0


@pytest.mark.parametrize("g, shape", [
    (dataclasses.replace(SKINNY32, pdl=True, pdl_prefetch=1024), (20, 70, 1030)),
    # the prefetch window of each K split, and a row shorter than the prefetch
    (Int4Gemm(block_m=32, block_n=32, block_k=64, warps_m=1, warps_n=2, stages=3, raster_group=1, splits=3,
              pdl=True, pdl_prefetch=48), (33, 24, 642)),
    (Int8Gemm(block_m=32, block_n=64, block_k=64, warps_m=1, warps_n=2, stages=3, pdl=True, pdl_prefetch=16),
     (5, 130, 200)),
], ids=["skinny-1024", "splitk-48", "int8-16"])
def test_pdl_gemm_is_exact_on_the_interpreter(g, shape):
    run_split(g, *shape, seed=sum(shape))


@pytest.mark.parametrize("kw", [dict(SKINNY_S4_32), dict(SKINNY_S4), dict(SKINNY_S4, early_prefetch=0),
                                dict(operand="s8", pdl=True, stages=2),
                                dict(operand="s8", pdl=True, cluster_m=2, stages=2)],
                         ids=["s4-32", "s4-128", "s4-128-no-early-prefetch", "s8", "s8-cluster"])
def test_hopper_kernel_waits_after_its_prologue(kw):
    kw = dict(kw)
    cfg = HopperGemm(kw.pop("operand", "s4"), **kw)
    assert cfg.pdl and "dl" in cfg.kernel_name.split("_")
    # the skinny defaults ask the L2 for their first weight boxes before the wait (early_prefetch), and only then
    _check_entry(cfg.module.kernels[0], prefetches=bool(cfg.early_prefetch))


@pytest.mark.parametrize("kw, shape", [
    (dict(SKINNY_S4_32), (20, 150, 1280)), (dict(SKINNY_S4_32), (1, 16, 64)), (dict(SKINNY_S4_64), (40, 7, 1024)),
    (dict(SKINNY_S4_64), (64, 130, 2560)),
    # the widening for_shape switches to at K >= 131072 (the scaled one would overflow), on the swapped tiles
    (dict(SKINNY_S4_32, scaled=False, biased=True), (17, 70, 1536)),
    (dict(SKINNY_S4_64, scaled=False, biased=True), (50, 40, 768)),
    (dict(operand="s8", block_n=64, stages=2, pdl=True), (70, 100, 384)),
    # the s8 skinny defaults at ragged shapes (swapped tiles; 128 x 64 with 8 stages walking more k-stages than that)
    (dict(SKINNY_S8_32, operand="s8"), (20, 150, 1280)), (dict(SKINNY_S8_64, operand="s8"), (1, 16, 64)),
    (dict(SKINNY_S8_64, operand="s8"), (50, 70, 640)), (dict(SKINNY_S8, operand="s8"), (100, 130, 1408))],
    ids=["s4-32", "s4-32-tiny", "s4-64-narrow", "s4-64", "s4-32-biased", "s4-64-biased", "s8", "s8-32", "s8-64-tiny",
         "s8-64", "s8-128"])
def test_pdl_hopper_gemm_is_exact_on_the_interpreter(kw, shape):
    kw = dict(kw)
    cfg = HopperGemm(kw.pop("operand", "s4"), **kw)
    got, want, r = run_on_interpreter(cfg, *shape, seed=3)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw, msg", [
    (dict(pdl=True, target="sm_80"), "sm_90 or newer"),
    (dict(pdl=False, pdl_prefetch=256), "needs pdl=True"),
    (dict(pdl=True, pdl_prefetch=40), "multiple of 16"),
    (dict(pdl=True, pdl_prefetch=-16), "multiple of 16"),
    (dict(pdl=1), "True or False"),
])
def test_pdl_options_are_checked(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        dataclasses.replace(SKINNY32, **kw)


def test_hopper_pdl_option_is_checked():
    with pytest.raises(ValidationError, match="True or False"):
        HopperGemm("s8", pdl="yes")


def test_for_shape_takes_pdl_where_it_was_measured_to_pay():
    from ptxforge.schedules.gemm.tuning import PDL_MAX_M
    assert Int4Gemm.for_shape(32, 8192, 8192, "sm_90a").pdl  # the M <= 32 Hopper default
    assert Int4Gemm.for_shape(64, 8192, 8192, "sm_90a").pdl
    assert Int4Gemm.for_shape(128, 8192, 8192, "sm_90a").pdl
    assert Int4Gemm.for_shape(PDL_MAX_M, 8192, 8192, "sm_90", hopper=False).pdl
    assert not Int4Gemm.for_shape(PDL_MAX_M + 1, 8192, 8192, "sm_90", hopper=False).pdl
    assert not Int4Gemm.for_shape(16, 4096, 4096, "sm_80").pdl  # griddepcontrol is sm_90+
    assert Int8Gemm.for_shape(8192, 8192, 8192, "sm_90a").pdl  # the large Hopper defaults: s8 gained 3 %
    assert not Int4Gemm.for_shape(8192, 8192, 8192, "sm_90a", hopper=False).pdl


# ---------------------------------------------------------------- on the GPU

def _plans_back_to_back(g, m, n, k, torch, graph=False):
    rng = np.random.default_rng(7)
    a = rng.integers(0, 256, (m, k // 2)).astype(np.uint8)  # packed s4, as every schedule here takes
    ws = [rng.integers(0, 256, (n, k // 2)).astype(np.uint8) for _ in range(3)]
    ta = torch.from_numpy(np.ascontiguousarray(a)).cuda()
    tws = [torch.from_numpy(w).cuda() for w in ws]
    tc = torch.full((m, n), POISON, dtype=torch.int32, device="cuda")
    want = [Int4Gemm(target="sm_90").reference(a, w) for w in ws]
    s = torch.cuda.Stream()
    plan = g.plan(m, n, k, stream=s)
    with torch.cuda.stream(s):
        if graph:
            for w in tws:
                plan(ta, w, tc)  # the tensor maps of every buffer encoded before capture
            s.synchronize()
            tc.fill_(POISON)
            cg = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cg, stream=s):
                for i in range(30):
                    plan(ta, tws[i % 3], tc)
            cg.replay()
        else:
            for i in range(30):
                plan(ta, tws[i % 3], tc)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(tc.cpu().numpy().astype(np.int64), want[29 % 3])
    for i in (0, 1):  # the documented call, twice on torch tensors: careful, then through the kept plan
        tc.fill_(POISON)
        g.run(ta, tws[i], tc)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(tc.cpu().numpy().astype(np.int64), want[i])


PDL_GPU = [(Int4Gemm.for_shape(32, 8192, 8192, "sm_90", hopper=False), (32, 8192, 8192)),
           (dataclasses.replace(SKINNY32, pdl=True, pdl_prefetch=512), (30, 5000, 4096 + 64)),
           (HopperGemm("s4", **SKINNY_S4_32), (32, 8192, 8192)),
           (HopperGemm("s4", **SKINNY_S4), (100, 4000, 8192 - 512))]


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True], ids=["stream", "graph"])
@pytest.mark.parametrize("g, shape", PDL_GPU, ids=[g.kernel_name for g, _ in PDL_GPU])
def test_gpu_pdl_plans_back_to_back_over_changing_weights(g, shape, graph):
    torch = pytest.importorskip("torch")
    assert g.pdl
    _plans_back_to_back(g, *shape, torch, graph=graph)


def test_dependent_launch_example_chain_on_the_interpreter():
    ex = load_example("dependent_launch")
    x0 = np.random.default_rng(1).integers(0, 1 << 20, 1000).astype(np.uint32)
    np.testing.assert_array_equal(ex.interpret(ex.build(), 1000, 3, x0.copy()), ex.chain(3, x0))
    assert not np.array_equal(ex.chain(3, x0), ex.chain(2, x0))


@pytest.mark.gpu
def test_gpu_launch_dependent_chain_of_a_hundred_launches():
    """examples/dependent_launch.py: each launch reads what the one before it wrote, checked against numpy."""
    assert load_example("dependent_launch").main(["--n", "300007", "--steps", "50"]) == 0
