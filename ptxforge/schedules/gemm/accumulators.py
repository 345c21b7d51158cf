"""The accumulator tile: one thread's s32 registers of a warp tile of mma.sync m16n8 blocks, and
which element of C each register holds.

The register order is the mma.sync C/D fragment (PTX ISA "Matrix Fragments for mma.m16n8k*"),
read from the fragment table rather than written here: in every m16n8 block, register e of
lane l holds C[row0(l) + dr(e), col0(l) + dc(e)], with a lane origin (row0, col0) and
lane-independent offsets (dr, dc) derived from that table.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...isa import types as T
from ...isa.tensor import mma_form
from . import emit as E

_PTXFORGE_INTERNAL = True

#: rows x columns of one accumulator block (the mma.sync m16n8 C tile)
BLOCK_M, BLOCK_N = 16, 8


@lru_cache(maxsize=None)
def _c_fragment():
    """(lane origin rows, lane origin cols, per-register (dr, dc)) of the s32 m16n8 C fragment."""
    from ...interp.layouts import mma_fragment
    f = mma_fragment(mma_form("m16n8k32", "s8"), "c")
    rows, cols = f.rows[:, :, 0], f.cols[:, :, 0]  # (lane, register)
    dr, dc = rows - rows[:, :1], cols - cols[:, :1]
    if not ((dr == dr[:1]).all() and (dc == dc[:1]).all()):
        raise AssertionError("the C fragment's register offsets depend on the lane")
    lane = np.arange(32)
    if not ((rows[:, 0] == lane >> 2).all() and (cols[:, 0] == (lane & 3) << 1).all()):
        raise AssertionError("the C fragment's lane origin is not (lane >> 2, 2 * (lane & 3))")
    return tuple((int(r), int(c)) for r, c in zip(dr[0], dc[0]))


class AccumulatorTile:
    """A thread's accumulators of a warp tile of m_blocks x n_blocks mma.sync m16n8 blocks.

    `tile[i][j]` is the Vec of 4 s32 registers of m16 block i, n8 block j, in C-fragment order:
    it is the `acc` the k-step (`compute_kstep`) accumulates into and the epilogue stores.
    `elements()` says which C element each register holds, relative to the thread's origin
    (`emit_lane_origin`), so an epilogue never writes the fragment layout by hand.
    """

    def __init__(self, blocks):
        self.blocks = blocks

    @classmethod
    def zeros(cls, k, m_blocks: int, n_blocks: int, *, name: str = "acc") -> "AccumulatorTile":
        """Allocate the registers (named acc{i}_{j}_{e}) and set them to 0 (mov.s32 r, 0 each)."""
        blocks = [[k.regs(T.s32, 4, name=f"{name}{i}_{j}_") for j in range(n_blocks)] for i in range(m_blocks)]
        tile = cls(blocks)
        E.zero(k, tile.registers())
        return tile

    def __getitem__(self, i):
        return self.blocks[i]

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def m_blocks(self) -> int:
        """m16 blocks along M."""
        return len(self.blocks)

    @property
    def n_blocks(self) -> int:
        """n8 blocks along N."""
        return len(self.blocks[0])

    def registers(self) -> list:
        """Every accumulator register, block by block (i, then j), in fragment order."""
        return [r for row in self.blocks for v in row for r in v]

    @staticmethod
    def element_offset(e: int) -> tuple:
        """(rows, cols) from the thread's origin to the C element that register e of a block holds."""
        return _c_fragment()[e]

    def elements(self):
        """(register, row offset, column offset) of every accumulator: the register holds
        C[row0 + row offset, col0 + column offset], (row0, col0) being `emit_lane_origin`'s."""
        offs = _c_fragment()
        for i, row in enumerate(self.blocks):
            for j, v in enumerate(row):
                for e, r in enumerate(v):
                    yield r, BLOCK_M * i + offs[e][0], BLOCK_N * j + offs[e][1]

    @staticmethod
    def emit_lane_origin(k, lane):
        """(row, col) u32 registers of this lane's first C element in a block: (lane >> 2, 2 * (lane & 3))
        (shr.u32, and.b32, shl.b32)."""
        # the fragment table's lane origin is checked against these two lines by `_c_fragment`
        # (when offsets are first asked for), so emitting the default kernel never loads it
        return k.shr(lane, 2), k.shl(k.and_(lane, 3), 1)
