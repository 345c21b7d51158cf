"""Data movement: cp.async in elements, shared-memory layouts, tile-copy planning and emission.

    from ptxforge.copy import cp_async_bytes, cp_async_elems, SmemLayout, plan_tile_copy, emit_tile_copy

* `cp_async_bytes` / `cp_async_elems`: element counts (packed s4/u4 included) -> legal
  4/8/16-byte cp.async, zero-fill tails in elements.
* `SmemLayout`: linear, padded or XOR-swizzled tiles, the same offset function in Python and PTX.
* `plan_tile_copy` / `emit_tile_copy`: the widest legal copy per thread, ragged edges zero-filled.
* `plan_tile_store` / `emit_tile_store`: shared -> global with vector stores, clipped to the matrix.
* `emit_copy_commit` / `emit_copy_wait`: completion by commit/wait groups or by an mbarrier.
"""

from .completion import (COMPLETIONS, emit_copy_commit, emit_copy_wait, emit_mbarrier_init,
                         mbarrier_arrival_count)
from .elems import (ALIASES, CP_ASYNC_WIDTHS, as_elem_type, bits_to_bytes, cp_async_bytes, cp_async_elems,
                    emit_elems_to_bytes, legal_counts)
from .emit import emit_tile_copy, emit_tile_store
from .layout import CHUNK, LAYOUT_KINDS, LINE, SmemLayout
from .plan import METHODS, TileCopyPlan, plan_tile_copy, plan_tile_store

__all__ = [
    "COMPLETIONS", "emit_copy_commit", "emit_copy_wait", "emit_mbarrier_init", "mbarrier_arrival_count",
    "ALIASES", "CP_ASYNC_WIDTHS", "as_elem_type", "bits_to_bytes", "cp_async_bytes", "cp_async_elems",
    "emit_elems_to_bytes", "legal_counts", "emit_tile_copy", "emit_tile_store", "CHUNK", "LAYOUT_KINDS", "LINE",
    "SmemLayout", "METHODS", "TileCopyPlan", "plan_tile_copy", "plan_tile_store",
]
