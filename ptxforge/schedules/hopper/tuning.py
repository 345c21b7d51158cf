"""Which Hopper GEMM configuration a problem shape gets (measured on the H200, bench/hopper_gemm_bench.py).

At 8192^3, side by side in one run (bench/results/hopper_gemm_h200.md):
* s8 128x256x128, 4 stages, 2 consumer warpgroups: 1555 TOPS (cuBLAS int8 895, Triton int8 1069);
* bf16 128x256x64, 3 stages: 750 TFLOPS (cuBLAS 681, Triton 575);
* s4 128x256x256, 2 stages (the widened B buffers take the shared memory a third would need),
  A widened in registers, biased u8 x u8 with the row-sum correction: 1260 TOPS (the unbiased
  s8 widening 1075; converter warps 736).
Skinny problems (few C tiles) split K so that tiles x splits about fills the SMs
(`splitk.choose_splits`, per launch).
"""

from __future__ import annotations

from ...errors import ValidationError
from .config import DEFAULTS, HopperGemm

_PTXFORGE_INTERNAL = True

def _variants(base: dict, *extra: dict) -> list:
    """`base` then `base` updated by each of `extra`, in that order."""
    return [dict(base)] + [{**base, **e} for e in extra]


#: operand -> configurations worth measuring side by side (bench/hopper_gemm_bench.py --variants): the
#: default first, then 2-CTA clusters sharing B (cluster_m=2) or A (cluster_n=2) through TMA multicast,
#: and the shared-memory + TMA-store epilogue (for bf16/f16 also with 16-bit C through stmatrix, c16: the
#: output cuBLAS's bf16 matmul gives).  None of them is a default until the H200 says so.
CANDIDATES = {
    "s8": _variants(DEFAULTS["s8"], dict(cluster_m=2), dict(cluster_n=2), dict(epilogue="tma"),
                    dict(cluster_m=2, epilogue="tma")),
    "bf16": _variants(DEFAULTS["bf16"], dict(cluster_m=2), dict(cluster_n=2), dict(epilogue="tma"),
                      dict(cluster_m=2, epilogue="tma"), dict(epilogue="tma", c16=True),
                      dict(cluster_m=2, epilogue="tma", c16=True)),
    "f16": _variants(DEFAULTS["f16"], dict(cluster_m=2), dict(epilogue="tma"), dict(epilogue="tma", c16=True)),
    # the default s4 tile leaves no room for C staging: the TMA-store variant takes a narrower tile
    "s4": _variants(DEFAULTS["s4"], dict(cluster_m=2), dict(cluster_n=2),
                    dict(block_n=128, stages=3, epilogue="tma"), dict(block_n=128, stages=3, epilogue="tma",
                                                                    cluster_m=2)),
}


def choose_hopper(m: int, n: int, k: int, operand: str, **overrides) -> HopperGemm:
    """The HopperGemm for an M x N x K problem of `operand` ('s8', 's4', 'bf16', 'f16'); overrides win.

    Raises ValidationError when the problem does not fit the TMA path (operand rows not a
    multiple of 16 bytes); `hopper_reason` says so in words.
    """
    if operand not in DEFAULTS:
        raise ValidationError(f"the Hopper GEMM takes s8, s4, bf16 or f16 operands, not {operand!r}")
    params = dict(DEFAULTS[operand])
    params.update(overrides)
    g = HopperGemm(operand, **params)
    g.check_problem(m, n, k)
    return g


#: operand -> largest M for which the mma.sync schedule measured faster on the H200 (skinny problems:
#: s4 M=32, N=K=8192 16.1 us with mma.sync (README) against 38.7 us here; M=128 551 against 371 TOPS;
#: s8 M=32 160 against 152 TOPS).  The Hopper path's split-K is not yet at the bandwidth floor.
SKINNY_M = {"s4": 256, "s8": 64}


def hopper_reason(m: int, n: int, k: int, operand: str) -> tuple:
    """(True, why) when the TMA + wgmma path should take the problem, (False, why not) otherwise."""
    if operand not in DEFAULTS:
        return False, (f".{operand} operands have no Hopper path (wgmma takes s8/u8, f16, bf16; s4 is widened "
                       "to s8): the mma.sync schedule runs it")
    if m <= SKINNY_M.get(operand, 0):
        return False, (f"M={m} <= {SKINNY_M[operand]}: for skinny .{operand} problems the mma.sync schedule "
                       "measured faster on the H200 than the TMA + wgmma one (split-K not yet at the byte floor)")
    try:
        HopperGemm(operand, **DEFAULTS[operand]).check_problem(m, n, k)
    except ValidationError as e:
        return False, f"{e.message if hasattr(e, 'message') else e}"
    return True, ("sm_90a: TMA + wgmma, warp-specialized and persistent (wgmma s8 reaches 1940 TOPS on an H200, "
                  "mma.sync about 1300); measured 1.7x cuBLAS int8 at 8192^3 for s8")
