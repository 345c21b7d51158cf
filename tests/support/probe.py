"""A probe kernel for one planned tile copy, and the numpy model of what it must produce.

`probe_kernel` copies one tile of a matrix into shared memory with `emit_tile_copy`, waits, and
writes the raw shared bytes (layout, padding and all) to an output buffer.  `expected_shared`
says what those bytes must be: the tile's bytes inside the matrix at their layout offsets,
zeros for the parts of the tile outside it, and untouched padding.  Run the probe on the
interpreter (CPU: `ptxforge.interp.run`, which also counts the source bytes it reads) or on a
GPU to check a plan, a layout and the ragged-edge zero fill at once.
"""

from __future__ import annotations

import numpy as np

from ptxforge.builder import KernelBuilder
from ptxforge.isa import types as T
from ptxforge.copy.completion import emit_copy_commit, emit_copy_wait, emit_mbarrier_init
from ptxforge.copy.emit import emit_tile_copy
from ptxforge.copy.plan import TileCopyPlan

_PTXFORGE_INTERNAL = True

#: Byte the probe writes over shared memory first, so that bytes the copy never wrote show.
PROBE_FILL = 0x5A
#: The probe kernel's parameters, in order.
PARAMS = ("src", "out", "stride", "rows", "cols", "row0", "col0")


def probe_kernel(plan: TileCopyPlan, *, target="sm_90", bounded=True, static_stride=None, completion="groups",
                 name="copy_probe"):
    """A one-CTA kernel (plan.threads threads): fill shared memory with PROBE_FILL, copy one tile,
    wait, dump shared memory to `out`.

    Parameters: src (matrix element (0, 0)), out (plan.smem_layout.nbytes bytes), stride (bytes),
    rows, cols (elements: the matrix), row0, col0 (elements: the tile origin).  `bounded=False`
    copies without ragged-edge handling (the tile must lie inside); `static_stride` bakes the
    stride in as an int instead of reading the parameter.
    """
    layout = plan.smem_layout
    nbytes = -(-layout.nbytes // 16) * 16
    k = KernelBuilder(name, target=target, maxntid=plan.threads)
    src = k.param_ptr("src")
    out = k.param_ptr("out")
    stride = k.param_value("stride", T.u32)
    rows = k.param_value("rows", T.u32)
    cols = k.param_value("cols", T.u32)
    row0 = k.param_value("row0", T.u32)
    col0 = k.param_value("col0", T.u32)
    tile = k.shared("tile", nbytes, layout.base_align)
    mbar = k.shared("mbar", 8, 8) if completion == "mbarrier" else None
    tid = k.tid()
    base = k.shared_base(tile)
    fill = PROBE_FILL * 0x01010101
    # a small tile has fewer words than threads: the trip count differs per thread (no bra.uni)
    with k.for_range(tid, nbytes // 4, plan.threads, name="w", uniform=False) as w:
        k.st(k.mad(w, 4, base), fill, type=T.b32, space="shared")
    if mbar is not None:
        emit_mbarrier_init(k, mbar, plan.threads, tid=tid)
    k.bar_sync(0)
    emit_tile_copy(k, plan, src=src, src_row_stride=stride if static_stride is None else static_stride,
                   row0=row0, col0=col0, rows_total=rows if bounded else None, cols_total=cols if bounded else None,
                   dst=base, tid=tid)
    if completion == "groups":
        emit_copy_commit(k, "groups")
        emit_copy_wait(k, "groups", pending=0)
    else:
        emit_copy_commit(k, "mbarrier", mbar=mbar, method=plan.method)
        emit_copy_wait(k, "mbarrier", mbar=mbar, phase=0)
    k.bar_sync(0)
    with k.for_range(tid, nbytes // 4, plan.threads, name="o", uniform=False) as o:
        off = k.shl(o, 2)
        v = k.ld(k.add(base, off), type=T.b32, space="shared")
        k.st(k.add(out, k.cvt(off, T.u64)), v, type=T.b32)
    return k.module()


def probe_out_bytes(plan: TileCopyPlan) -> int:
    return -(-plan.smem_layout.nbytes // 16) * 16


def expected_shared(plan: TileCopyPlan, src_bytes: np.ndarray, *, row0, col0, rows, cols) -> np.ndarray:
    """The probe's output: `src_bytes` is the matrix as a 2-D uint8 array (rows x stride bytes)."""
    layout = plan.smem_layout
    out = np.full(probe_out_bytes(plan), PROBE_FILL, dtype=np.uint8)
    bits = plan.elem_type.bits
    row_len = -(-cols * bits // 8)
    c0 = col0 * bits // 8
    for r in range(plan.rows):
        for b in range(plan.row_bytes):
            gr, gb = row0 + r, c0 + b
            inside = gr < rows and gb < row_len
            out[layout.byte_offset(r, b)] = src_bytes[gr, gb] if inside else 0
    return out
