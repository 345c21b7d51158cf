"""One ragged problem per Hopper GEMM operand, for compute-sanitizer (memcheck) on the H200.

    compute-sanitizer --tool memcheck python scripts/hopper_memcheck.py
"""

import numpy as np

from ptxforge.schedules.hopper import HopperGemm, reference, run

rng = np.random.default_rng(1)
for op, kw in (("s8", {}), ("s4", dict(block_n=256, block_k_bytes=256, stages=2, biased=True)), ("bf16", {})):
    cfg = HopperGemm(op, **kw)
    m, n, k = 70, 200, 512
    if op == "s8":
        a, b = rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (n, k), dtype=np.int8)
    elif op == "s4":
        a, b = rng.integers(0, 256, (m, k // 2), dtype=np.uint8), rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    else:
        a = (rng.standard_normal((m, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        b = (rng.standard_normal((n, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    for splits in (1, 2):
        got = run(cfg, a, b, k=k, splits=splits)
        ok = np.array_equal(got.astype(np.int64), reference(cfg, a, b)) if op != "bf16" else \
            np.allclose(got, reference(cfg, a, b), rtol=1e-3, atol=1e-2)
        print(op, "splits", splits, "OK" if ok else "MISMATCH")
