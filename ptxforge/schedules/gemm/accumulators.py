"""The accumulator tile: one thread's s32 registers of a warp tile of mma.sync m16n8 blocks, and
which element of C each register holds.

The register order is the mma.sync C/D fragment (PTX ISA "Matrix Fragments for mma.m16n8k*"),
taken from `ptxforge.isa.fragments` rather than written here: in every m16n8 block, register e
of lane l holds C[row0(l) + dr(e), col0(l) + dc(e)] with (row0, col0) = `acc_lane_origin(l)`
and (dr, dc) = `acc_offset(e)`.
"""

from __future__ import annotations

from ...isa import types as T
from ...isa.fragments import acc_lane_origin, acc_offset
from . import emit as E

_PTXFORGE_INTERNAL = True

#: rows x columns of one accumulator block (the mma.sync m16n8 C tile)
BLOCK_M, BLOCK_N = 16, 8


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
        return acc_offset(e)

    def elements(self):
        """(register, row offset, column offset) of every accumulator: the register holds
        C[row0 + row offset, col0 + column offset], (row0, col0) being `emit_lane_origin`'s."""
        offs = [acc_offset(e) for e in range(4)]
        for i, row in enumerate(self.blocks):
            for j, v in enumerate(row):
                for e, r in enumerate(v):
                    yield r, BLOCK_M * i + offs[e][0], BLOCK_N * j + offs[e][1]

    @staticmethod
    def emit_lane_origin(k, lane):
        """(row, col) u32 registers of this lane's first C element in a block: (lane >> 2, 2 * (lane & 3)),
        emitted by `acc_lane_origin` as shr.u32, and.b32, shl.b32."""
        return acc_lane_origin(lane, ops=k)
