"""Schedules: frozen dataclasses of parameters that emit a kernel, describe its launch and model
its result in numpy.

* `TileCopy` (tile_copy.py, its kernel tile_copy_emit.py): a matrix streamed global -> shared -> global
  through a cp.async pipeline; the data-movement skeleton of tiled kernels.
* `Int4Gemm`, `Int8Gemm` (gemm/): the tiled integer GEMM on mma.sync, C = A . B^T, with packed
  4-bit or 8-bit operands and a compute path chosen per target (sm_80 to sm_90).
* `HopperGemm`, `Bf16Gemm` (hopper/): the sm_90a GEMMs, TMA loads into an mbarrier ring feeding
  wgmma; `Int4Gemm.for_shape` / `Int8Gemm.for_shape` return one on an H100/H200.

Every schedule has `run` (on the GPU) and `interpret` (on the CPU interpreter, no GPU needed,
returning the result and the interpreter's report); the GEMMs also have `plan` (a launch prepared
once, for loops and CUDA graphs).
"""

from .tile_copy import TileCopy

__all__ = ["TileCopy", "Int4Gemm", "Int8Gemm", "GemmSchedule", "HopperGemm", "Bf16Gemm"]

_LAZY = {"Int4Gemm": ".gemm", "Int8Gemm": ".gemm", "GemmSchedule": ".gemm", "HopperGemm": ".hopper",
         "Bf16Gemm": ".hopper"}


def __getattr__(name):
    # the GEMM schedules load on first use only
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
