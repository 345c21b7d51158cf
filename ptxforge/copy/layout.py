"""Shared-memory tile layouts: linear rows, padded rows, and an XOR swizzle of 16-byte chunks.

Shared memory has 32 banks of 4 bytes, so a 128-byte line holds eight 16-byte "bank groups".
ldmatrix (and any 16-byte-per-lane access) reads eight rows of 16 bytes per phase; the phase is
conflict-free only when those eight rows sit in eight different bank groups.  With rows 128
bytes apart they all land in the same group.  Two cures:

* "padded": each row is followed by `pad_bytes` unused bytes, shifting row r by r*pad/16 groups;
* "swizzle": each 16-byte chunk keeps its row but moves to chunk ``c ^ f(row)`` inside its
  128-byte line, where f cycles through all eight groups over any eight consecutive rows.  No
  bytes are wasted.

`offset` (Python) and `emit_offset` (PTX) compute the same function; the tests check both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..isa import types as T
from .. import fold as F

_PTXFORGE_INTERNAL = True

LAYOUT_KINDS = ("linear", "padded", "swizzle")
CHUNK = 16  # bytes: the unit ldmatrix rows, 16-byte cp.async and bank groups share
LINE = 128  # bytes: one pass over all 32 banks


@dataclass(frozen=True)
class SmemLayout:
    """Where byte chunk `chunk` (16 bytes) of tile row `row` lives in shared memory.

    rows, row_bytes: the logical tile (row_bytes of data per row).
    kind: "linear" (rows back to back), "padded" (pad_bytes after each row), "swizzle" (XOR of
    16-byte chunks within each 128-byte line; row_bytes must be 16, 32, 64 or a multiple of 128).
    pad_bytes counts only for "padded" (other kinds store the default, so equal layouts compare equal).
    """

    rows: int
    row_bytes: int
    kind: str = "linear"
    pad_bytes: int = 16

    def __post_init__(self):
        for name in ("rows", "row_bytes", "pad_bytes"):  # numpy integers are stored as int; bools are no sizes
            v = getattr(self, name)
            if T.is_integer(v):
                object.__setattr__(self, name, int(v))
        if not T.is_integer(self.rows) or self.rows < 1:
            raise ValidationError(f"a shared tile needs a positive int of rows, got rows={self.rows!r}")
        if not T.is_integer(self.row_bytes) or self.row_bytes < 1:
            raise ValidationError(f"row_bytes must be a positive int, got {self.row_bytes!r}")
        if self.kind not in LAYOUT_KINDS:
            raise ValidationError(f"layout kind must be one of {LAYOUT_KINDS}, got {self.kind!r}")
        if self.kind != "padded":  # no padding: layouts that place every byte alike compare equal
            object.__setattr__(self, "pad_bytes", CHUNK)
        if self.kind == "padded":
            if not T.is_integer(self.pad_bytes) or self.pad_bytes <= 0 or self.pad_bytes % CHUNK:
                raise ValidationError(f"padded rows need pad_bytes a positive multiple of {CHUNK} (keeps every "
                                      f"16-byte chunk aligned for cp.async and ldmatrix), got {self.pad_bytes!r}")
            if self.row_bytes % CHUNK:
                raise ValidationError(f"padded layout: row_bytes {self.row_bytes} is not a multiple of {CHUNK}")
        if self.kind == "swizzle":
            n = self.row_bytes // CHUNK
            if self.row_bytes % CHUNK or not (n in (1, 2, 4) or n % 8 == 0):
                raise ValidationError(
                    f"swizzled layout: rows of {self.row_bytes} bytes cannot be swizzled within 128-byte lines; "
                    "row_bytes must be 16, 32, 64 or a multiple of 128 (use kind='padded' otherwise)")

    # ------------------------------------------------------------ geometry
    @property
    def chunks_per_row(self) -> int:
        """16-byte chunks per row (the unit the XOR swizzle permutes), rounded up."""
        return -(-self.row_bytes // CHUNK)

    @property
    def row_stride(self) -> int:
        """Bytes from the start of one row to the next."""
        return self.row_bytes + (self.pad_bytes if self.kind == "padded" else 0)

    @property
    def nbytes(self) -> int:
        """Shared bytes the tile occupies, padding included."""
        return self.rows * self.row_stride

    @property
    def base_align(self) -> int:
        """Alignment the tile's base needs: 16 for correctness, 128 for the swizzle to avoid conflicts."""
        return LINE if self.kind == "swizzle" else CHUNK

    @property
    def _swizzle_params(self):
        """(shift, mask): chunk ^= (row >> shift) & mask."""
        m = min(self.row_bytes // CHUNK, 8)
        return F.log2(8 // m), m - 1

    # ------------------------------------------------------------ Python
    def _check(self, row, chunk):
        if not 0 <= row < self.rows or not 0 <= chunk < self.chunks_per_row:
            raise ValidationError(f"({row}, chunk {chunk}) is outside a tile of {self.rows} rows x "
                                  f"{self.chunks_per_row} chunks")

    def offset(self, row: int, chunk: int) -> int:
        """Byte offset of 16-byte chunk `chunk` of row `row`."""
        self._check(row, chunk)
        if self.kind == "swizzle":
            shift, mask = self._swizzle_params
            return row * self.row_bytes + (chunk ^ ((row >> shift) & mask)) * CHUNK
        return row * self.row_stride + chunk * CHUNK

    def byte_offset(self, row: int, col_byte: int) -> int:
        """Byte offset of byte `col_byte` of row `row` (chunks move whole; bytes keep their place in them)."""
        if not 0 <= col_byte < self.row_bytes:
            raise ValidationError(f"byte {col_byte} of row {row} is outside rows of {self.row_bytes} bytes")
        return self.offset(row, col_byte // CHUNK) + col_byte % CHUNK

    def byte_offsets(self, rows, col_bytes):
        """`byte_offset` over whole numpy arrays of rows and column bytes at once (no bounds check)."""
        import numpy as np
        rows = np.asarray(rows, dtype=np.int64)
        col_bytes = np.asarray(col_bytes, dtype=np.int64)
        if self.kind != "swizzle":
            return rows * self.row_stride + col_bytes
        shift, mask = self._swizzle_params
        chunk = (col_bytes // CHUNK) ^ ((rows >> shift) & mask)
        return rows * self.row_bytes + chunk * CHUNK + col_bytes % CHUNK

    # ------------------------------------------------------------ PTX
    def emit_offset(self, k, row, chunk):
        """The same offset in PTX; `row`/`chunk` are u32 registers or ints.  Returns a u32 register
        (or an int when both are ints)."""
        return self.emit_byte_offset(k, row, F.mul(k, F.as_u32(k, chunk), CHUNK))

    def emit_byte_offset(self, k, row, col_byte):
        """Offset of byte `col_byte` (u32 register or int) of row `row`; the swizzle acts on bits 4..6."""
        row, col_byte = F.as_u32(k, row), F.as_u32(k, col_byte)
        if not F.is_reg(row) and not F.is_reg(col_byte):
            return self.byte_offset(row, col_byte)
        if self.kind != "swizzle":
            return F.mad(k, row, self.row_stride, col_byte)
        shift, mask = self._swizzle_params
        if mask == 0:
            return F.mad(k, row, self.row_bytes, col_byte)
        if F.is_reg(row):
            # ((row >> shift) & mask) << 4, as one shift and one mask (shift <= 2 < 4)
            sel = k.and_(k.shl(row, 4 - shift), mask << 4)
            moved = k.xor(sel, col_byte) if F.is_reg(col_byte) else k.xor(sel, col_byte, type=T.b32)
        else:
            sel = ((row >> shift) & mask) << 4
            moved = k.xor(col_byte, sel) if sel else col_byte
        return F.mad(k, row, self.row_bytes, moved)

    def describe(self) -> str:
        """One line for listings and reports: kind, rows x row bytes, padding and total bytes."""
        extra = f", {self.pad_bytes} B padding" if self.kind == "padded" else ""
        return f"{self.kind} {self.rows}x{self.row_bytes} B{extra} ({self.nbytes} B)"
