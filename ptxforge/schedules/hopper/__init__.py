"""Hopper (sm_90a) GEMM schedules: warp-specialized persistent TMA + wgmma kernels.

    from ptxforge.schedules.hopper import HopperGemm, prepare, run
    g = HopperGemm("s8", block_n=256, stages=4)     # s8 x s8 -> s32; "s4" packed, "bf16"/"f16" -> f32
    g2 = HopperGemm("s8", cluster_m=2, epilogue="tma")  # 2-CTA clusters (B multicast), C by TMA stores
    print(g.listing())
    plan = prepare(g, a_dev, b_dev, c_dev); plan.launch()
"""

from .config import OPERANDS, Bf16Gemm, HopperGemm
from .operands import random_operands, reference
from .plan import Plan, assembled, load_kernel, prepare
from .run import run
from .tuning import CANDIDATES, DEFAULTS, choose_hopper, hopper_reason

__all__ = ["HopperGemm", "Bf16Gemm", "OPERANDS", "Plan", "prepare", "run", "random_operands", "reference", "assembled", "load_kernel",
           "DEFAULTS", "CANDIDATES", "choose_hopper", "hopper_reason"]
