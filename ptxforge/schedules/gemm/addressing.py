"""Shared-memory addresses with as few registers as possible: plan in numpy, emit the bases.

Every shared access of the GEMM (each cp.async chunk a thread writes, each ldmatrix a warp
issues) sits at ``layout(row0(tid) + r, byte0(tid) + c)``: a per-thread part known only at run
time plus constants.  With a swizzled layout the offset is not linear in (r, c), yet many
accesses still differ from another by the same constant in every thread (16 rows down keeps
the XOR pattern, for instance).  `plan_family` evaluates the offsets of all threads in numpy,
groups accesses whose difference is constant, and `AddressFamily.emit_bases` computes one
register per group: every other access is that register plus an immediate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...copy.layout import SmemLayout



def layout_offsets(layout: SmemLayout, rows: np.ndarray, col_bytes: np.ndarray) -> np.ndarray:
    """SmemLayout.byte_offset for whole arrays of (row, byte) at once."""
    return layout.byte_offsets(rows, col_bytes)


@dataclass(frozen=True)
class Access:
    """One shared access: base register `base` plus the immediate `imm` bytes."""
    base: int  # index of the base register
    imm: int  # constant byte offset from it


@dataclass(frozen=True)
class AddressFamily:
    """Accesses `consts[j] = (r, c)` at layout(row0 + r, byte0 + c) + region offset."""

    layout: SmemLayout
    region: int  # byte offset of the tile inside the stage
    consts: tuple  # ((r, c), ...) per access
    accesses: tuple  # Access per access
    base_consts: tuple  # (r, c) whose offset each base register holds

    def emit_bases(self, k, row0, byte0, smem_base, name: str = "sa"):
        """u32 registers holding smem_base + region + layout(row0 + r, byte0 + c), one per base."""
        from ... import fold as F
        from ...isa import types as T
        base = k.add(smem_base, self.region) if self.region else smem_base
        out = []
        for i, (r, c) in enumerate(self.base_consts):
            off = self.layout.emit_byte_offset(k, F.add(k, row0, r), F.add(k, byte0, c))
            out.append(k.add(base, off, dst=k.reg(T.u32, f"{name}{i}")))
        return out

def plan_family(layout: SmemLayout, rows0: np.ndarray, bytes0: np.ndarray, consts, region: int = 0
                ) -> AddressFamily:
    """Group accesses whose offsets differ by one constant across all threads.

    rows0/bytes0: the run-time part for every thread (arrays indexed by thread); consts: the
    (r, c) of each access.  The first access of each group becomes a base register.
    """
    rows0 = np.asarray(rows0, dtype=np.int64)
    bytes0 = np.asarray(bytes0, dtype=np.int64)
    bases: list = []  # (consts, offsets)
    accesses = []
    for r, c in consts:
        off = layout_offsets(layout, rows0 + r, bytes0 + c)
        hit = None
        for bi, (_, boff) in enumerate(bases):
            d = off - boff
            if (d == d[0]).all():
                hit = Access(bi, int(d[0]))
                break
        if hit is None:
            bases.append(((r, c), off))
            hit = Access(len(bases) - 1, 0)
        accesses.append(hit)
    return AddressFamily(layout, region, tuple(consts), tuple(accesses), tuple(bc for bc, _ in bases))
