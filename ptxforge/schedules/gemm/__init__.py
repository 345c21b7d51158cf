"""The tiled integer GEMM, C[M, N] (s32) = A[M, K] . B[N, K]^T, as a folder of parts.

The schedules (what most callers want):

    from ptxforge.schedules.gemm import Int4Gemm
    Int4Gemm.for_shape(4096, 4096, 4096).run(a_packed, b_packed)

The parts a kernel is built from (`kernel.build_kernel` composes them; a custom kernel may too):

* `StageLayout`: the pipeline's shared memory, owning each operand tile's region offset.
* `OperandStaging`: global -> shared copies of both operand tiles, hoisted; `copy_ktile` per k-tile.
* `WarpFragments`: ldmatrix.x4 loads of a warp tile's A and B fragments, addresses hoisted.
* `compute_kstep`: the mma.sync instructions of one k-step (nibble unpacking included).
* `AccumulatorTile`: a thread's s32 accumulators and which C element each register holds.
* `GemmOutput`, `store_c`: what an epilogue receives, and the default epilogue (C in s32).
  `GemmSchedule.emit(epilogue=...)` / `build_kernel(s, epilogue=...)` take another one.

Modules: `schedule` (GemmSchedule, Int4Gemm, Int8Gemm, GemmReport), `config` (compute paths,
validation), `tuning` (configuration choice), `kernel`, `stage`, `copy`, `addressing` (shared
addresses planned in numpy), `fragments`, `accumulators`, `epilogue`, `emit` (lean emission of
the bulk instructions), `run` (GPU launch), `plan` (`GemmPlan`: a launch resolved once, and the
fast path of `GemmSchedule.run`).
"""

from .accumulators import AccumulatorTile
from .copy import OperandStaging
from .epilogue import GemmOutput, store_c
from .fragments import WarpFragments, compute_kstep
from .kernel import build_kernel
from .plan import GemmPlan
from .schedule import GemmReport, GemmSchedule, Int4Gemm, Int8Gemm
from .stage import StageLayout

__all__ = ["GemmSchedule", "Int4Gemm", "Int8Gemm", "GemmReport", "GemmPlan",
           "StageLayout", "OperandStaging", "WarpFragments", "compute_kstep", "AccumulatorTile", "GemmOutput",
           "store_c", "build_kernel"]
