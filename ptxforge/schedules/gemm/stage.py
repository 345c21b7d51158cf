"""The shared memory of one GEMM pipeline: where each operand tile of each stage lives."""

from __future__ import annotations

from dataclasses import dataclass

from ...copy.layout import SmemLayout


@dataclass(frozen=True)
class StageLayout:
    """Shared memory of a cp.async pipeline of `stages` stages, each holding one k-tile of A then
    one k-tile of B.

    a, b: the `SmemLayout` of the A tile (block_m rows) and of the B tile (block_n rows); both
    rows hold the same k-tile bytes.  The region offsets (`a_offset`, `b_offset`) are owned here,
    so the staging copies and the ldmatrix loads of an operand read the same one.  Stage i
    starts at byte `stage_offset(i)` of the kernel's dynamic shared memory.
    """

    a: SmemLayout
    b: SmemLayout
    stages: int

    @classmethod
    def of(cls, schedule) -> "StageLayout":
        """The stage layout of a `GemmSchedule` (its tile layouts and pipeline depth)."""
        la, lb = schedule.layouts
        return cls(la, lb, schedule.stages)

    @property
    def a_offset(self) -> int:
        """Byte offset of the A tile inside a stage (0)."""
        return 0

    @property
    def b_offset(self) -> int:
        """Byte offset of the B tile inside a stage: right after the A tile."""
        return self.a.nbytes

    @property
    def stage_bytes(self) -> int:
        """Bytes of one stage (A tile + B tile)."""
        return self.a.nbytes + self.b.nbytes

    @property
    def total_bytes(self) -> int:
        """Dynamic shared memory of all stages."""
        return self.stages * self.stage_bytes

    @property
    def row_bytes(self) -> int:
        """Bytes of one tile row of one k-tile (the same for A and B)."""
        return self.a.row_bytes

    def stage_offset(self, i: int) -> int:
        """Byte offset of stage i."""
        return i * self.stage_bytes
