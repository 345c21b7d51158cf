"""The tiled integer GEMM, C[M, N] (s32) = A[M, K] . B[N, K]^T, as a folder of parts.

* `schedule`: `GemmSchedule`, `Int4Gemm`, `Int8Gemm`, `GemmReport` (parameters, emission, assembly, run).
* `config`: compute paths, validation.  `tuning`: configuration choice for a problem shape.
* `kernel`: the kernel builder (CTA tile, cp.async pipeline, main loop, epilogue call).
* `copy`: global -> shared staging of one operand.  `addressing`: shared addresses planned in numpy.
* `fragments`: ldmatrix addresses, nibble unpacking, the mma.sync issue of one k-step.
* `epilogue`: accumulators -> C.  `emit`: lean emission of the bulk instructions.  `run`: GPU launch.
"""

from .schedule import GemmReport, GemmSchedule, Int4Gemm, Int8Gemm

__all__ = ["GemmSchedule", "Int4Gemm", "Int8Gemm", "GemmReport"]
