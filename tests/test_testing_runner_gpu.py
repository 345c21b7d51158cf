"""The property-test runner on the GPU backend (run under PTXFORGE_REQUIRE_GPU=1 on the device):
correct kernels and schedules pass on the interpreter and the GPU with bit-identical integer
outputs; a planted bug is found by the GPU backend alone and shrunk; the REQUIRE switch puts
the GPU into "auto"."""

import numpy as np
import pytest
from hypothesis import settings

from ptxforge import KernelBuilder, f32, u32
from ptxforge.schedules import Int4Gemm, Int8Gemm, TileCopy
from ptxforge.testing import Array, ProblemSpace, PropertyFailure, Size, cdiv, check
from ptxforge.testing import REQUIRE_GPU_ENV
from ptxforge.testing.kernels import transpose
from ptxforge.testing.mutants import off_by_one_guard

pytestmark = pytest.mark.gpu
BOTH = ("interp", "gpu")
SEEDED = settings(derandomize=True, database=None, deadline=None)


def transpose_space():
    return ProblemSpace(
        sizes=[Size("rows", 0, 100, tile=32), Size("cols", 1, 100, tile=32)],
        arrays=[Array("src", ("rows", "cols"), np.float32), Array("dst", ("cols", "rows"), np.float32, role="out")],
        grid=lambda p: (cdiv(p.cols, 32), cdiv(p.rows, 32)), block=(32, 8), reference=lambda src: src.T)


def test_a_correct_kernel_passes_on_both_backends():
    report = check(transpose(), transpose_space(), backends=BOTH, max_examples=30)
    assert report.runs == {"interp": 30, "gpu": 30}


@pytest.mark.parametrize("schedule", [
    Int4Gemm(block_m=32, block_n=32, block_k=64, warps_m=1, warps_n=1, stages=2),
    Int8Gemm(block_m=64, block_n=32, block_k=64, warps_m=2, warps_n=1, stages=3),
    TileCopy(40, 70, "s8", tile_rows=8, tile_cols=32, threads=64, stages=2, completion="groups"),
    TileCopy(40, 70, "s4", tile_rows=4, tile_cols=64, threads=64, stages=3, completion="mbarrier"),
], ids=["int4gemm", "int8gemm", "tilecopy-groups", "tilecopy-mbarrier"])
def test_schedules_agree_bit_for_bit_on_both_backends(schedule):
    report = check(schedule, backends=BOTH, max_examples=15)
    assert report.runs == {"interp": 15, "gpu": 15}


def doubles():
    """out[i] = 2 x[i] for i <= n - 1, written with a `le` guard so its off-by-one mutant skips the last."""
    k = KernelBuilder("doubles", target="sm_80", maxntid=128)
    x, out = k.param_ptr("x", f32), k.param_ptr("out", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("le", i, k.sub(n, 1))):
        off = k.mul(i, 4, mode="wide")
        v = k.ld(k.add(x, off), type=f32)
        k.st(k.add(out, off), k.add(v, v))
    return k.module()


def test_the_gpu_backend_alone_finds_and_shrinks_a_planted_bug():
    sp = ProblemSpace(sizes=[Size("n", 1, 1000, tile=128)],
                      arrays=[Array("x", ("n",), np.float32), Array("out", ("n",), np.float32, role="out")],
                      grid=lambda p: cdiv(p.n, 128), block=128, reference=lambda x: 2 * x)
    check(doubles(), sp, backends=("gpu",), max_examples=20)
    with pytest.raises(PropertyFailure) as info:
        check(doubles(), sp, backends=("gpu",), transform=off_by_one_guard, max_examples=20, settings=SEEDED)
    assert info.value.problem.sizes["n"] == 1
    assert "[gpu] output out differs" in str(info.value) and "poison: never written" in str(info.value)


def test_the_require_switch_puts_the_gpu_into_auto(monkeypatch):
    monkeypatch.setenv(REQUIRE_GPU_ENV, "1")
    assert check(transpose(), transpose_space(), max_examples=5).runs == {"interp": 5, "gpu": 5}


def test_a_problem_with_out_of_bounds_accesses_is_kept_off_the_gpu():
    with pytest.raises(PropertyFailure) as info:
        check(transpose(), transpose_space(), backends=BOTH, transform=lambda k: off_by_one_guard(k, nth=0),
              max_examples=20, settings=SEEDED)
    assert "out-of-bounds" in str(info.value) and "gpu" in info.value.outcome.skipped
    assert check(transpose(), transpose_space(), backends=BOTH, max_examples=3).runs["gpu"] == 3  # still healthy


@pytest.mark.parametrize("operand", ["s8", "s4", "bf16"])
def test_the_hopper_gemm_checks_itself_on_the_gpu(operand):
    from ptxforge.schedules.hopper import Bf16Gemm, HopperGemm
    g = {"s8": HopperGemm("s8", block_n=128), "s4": HopperGemm("s4", block_n=128, block_k_bytes=256),
         "bf16": Bf16Gemm()}[operand]
    report = check(g, max_examples=10)  # auto: the interpreter (through the space's host tensor maps) and the GPU
    assert report.runs == {"interp": 10, "gpu": 10} and not {"interp", "gpu"} & set(report.skipped)
