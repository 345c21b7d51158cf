"""One ragged problem per Hopper GEMM operand, for compute-sanitizer (memcheck) on the H200.

    compute-sanitizer --tool memcheck python scripts/hopper_memcheck.py [s8|s4|bf16]

Each configuration runs once whole and once with K split in two (C rows of 201: odd), checked against numpy;
the large-problem s8 and bf16 configurations as `for_shape` gives them at small K (C written through shared
memory by TMA stores, `epilogue='tma'`) run on C rows of 200 (whole 16 bytes, as that store needs).  `tma` in
place of an operand runs only those.
"""

import sys

import numpy as np

from ptxforge.schedules.hopper import HopperGemm, random_operands, reference, run
from ptxforge.schedules.hopper.defaults import shape_params
from ptxforge.schedules.hopper.defaults import (SKINNY_BF16_128, SKINNY_BF16_256, SKINNY_S4, SKINNY_S4_32, SKINNY_S4_64,
                                             SKINNY_S4_256, SKINNY_S8, SKINNY_S8_32, SKINNY_S8_64, SKINNY_S8_256)

rng = np.random.default_rng(1)
S4 = (dict(block_n=256, block_k_bytes=256, stages=2, biased=True), dict(block_n=256, block_k_bytes=256, stages=2,
                                                                      scaled=True),
      SKINNY_S4, SKINNY_S4_32, SKINNY_S4_64,  # the skinny defaults (M <= 128, M <= 32, M <= 64: stages split)
      dict(SKINNY_S4_64, widen_ahead=False, acc_sets=2),  # stages split, B widened between them; two sets
      dict(SKINNY_S4, widen_ahead=False, convert_buffers=3, stages=2),  # three widened B buffers: one barrier per stage
      dict(SKINNY_S4, widen_ahead=False, convert_buffers=1, stages=4, l2_prefetch=2),  # one B buffer; L2 prefetches
      SKINNY_S4_256,  # the next stage's B widened between this stage's wgmma groups, as in SKINNY_S4 and the default
      dict(SKINNY_S4, widen_ahead=False, a_group=2),  # B widened between the stages
      dict(block_n=64, consumers=2, interleave_k=True, stages=4, converter=True, convert_buffers=4, scaled=True,
           block_k_bytes=256))
S8 = ({}, SKINNY_S8_32, SKINNY_S8_64, SKINNY_S8, SKINNY_S8_256)  # the large tile; the skinny defaults
ONLY = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None  # e.g. "s8": one operand
BF16 = ({}, SKINNY_S8_32, SKINNY_BF16_128, SKINNY_BF16_256)  # the large tile; the skinny ones (M <= 32, 128, 256)
TMA_STORE = [(op, shape_params(op, 8192, 8192, 512)) for op in ("s8", "bf16")]  # what for_shape gives at K <= 2048
assert all(kw.get("epilogue") == "tma" for _, kw in TMA_STORE)
for op, kw in [("s8", kw) for kw in S8] + [("s4", kw) for kw in S4] + [("bf16", kw) for kw in BF16] + TMA_STORE:
    tma = kw.get("epilogue") == "tma"
    if ONLY and op != ONLY and not (ONLY == "tma" and tma):
        continue
    cfg = HopperGemm(op, **kw)
    # odd C rows: the 4-byte-store kernels (odd_n) on the unswapped tiles; rows of whole 16 bytes for the TMA store
    m, n, k = 71, 200 if tma else 201, 512
    a, b = random_operands(cfg, m, n, k, rng)
    for splits in (1, 2):
        got = run(cfg, a, b, k=k, splits=splits)
        ok = np.array_equal(got.astype(np.int64), reference(cfg, a, b)) if op != "bf16" else \
            np.allclose(got, reference(cfg, a, b), rtol=1e-3, atol=1e-2)
        print(op, "epilogue='tma'" if tma else "", "splits", splits, "OK" if ok else "MISMATCH")
