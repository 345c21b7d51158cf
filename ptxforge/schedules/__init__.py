"""Schedules: frozen dataclasses of parameters that emit a kernel, describe its launch and model
its result in numpy.

* `TileCopy` (tile_copy.py): a matrix streamed global -> shared -> global through a cp.async
  pipeline; the data-movement skeleton of tiled kernels.
* `Int4Gemm`, `Int8Gemm` (gemm.py): the tiled integer GEMM, C = A . B^T, with packed 4-bit or
  8-bit operands and a compute path chosen per target.
"""

from .tile_copy import TileCopy

__all__ = ["TileCopy", "Int4Gemm", "Int8Gemm", "GemmSchedule"]

_LAZY = {"Int4Gemm": ".gemm", "Int8Gemm": ".gemm", "GemmSchedule": ".gemm"}


def __getattr__(name):
    # the GEMM schedules load on first use only
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
