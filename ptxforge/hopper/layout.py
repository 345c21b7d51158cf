"""`SmemTile`: one shared-memory tile layout that drives both the TMA box and the wgmma descriptor.

    t = SmemTile("s8", 128, 128, major="K", swizzle=128)    # 128 rows (M or N) x 128 k values
    t.nbytes, t.alignment              # 16384, 1024
    t.tma_box, t.tma_swizzle           # (128, 128) innermost first, 128
    t.tensor_map(a_dev)                # TensorMap over a row-major (rows, K) GPU array with this box
    t.descriptor(base, k_slice=2)      # 64-bit wgmma descriptor of k-slice 2 (k 64..95)
    t.k_advance_bytes                  # 32: add (>>4: 2) to the descriptor per wgmma k-step
    t.offset(r, c), t.element_offsets()

Rows index M (A tiles) or N (B tiles), columns index K, whatever the major-ness; `major` says which
of the two is contiguous.  A swizzled tile best starts on its swizzle pattern (`alignment`); it
may start on any 128-byte boundary (`min_alignment`): `offset(r, c, base=...)` / `store(...,
base=...)` then give the layout of a swizzle on absolute addresses, and `descriptor(base, k)`
reads it back with base offset 0 (wgmma swizzles absolute rows, as measured on the H200).  TMA
needs a swizzled box 1024-byte aligned: a tile TMA fills starts on a 1024-byte boundary.  Because the box, the swizzle and the descriptor all come from the one
object, a TMA load and a wgmma reading the tile cannot disagree about where element (r, c) is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from ..isa import types as T
from ..isa.descriptors import (WGMMA_K_BYTES, DescriptorFields, apply_swizzle, canonical_offset_linear,
                               canonical_strides, decode_descriptor, encode_descriptor,
                               swizzle_mode)

_PTXFORGE_INTERNAL = True

#: Bytes of the shared window a descriptor reaches: its start address is 14 bits of 16-byte units (PTX ISA).
DESCRIPTOR_WINDOW = 1 << 18
#: Elements a TMA box spans per dimension at most (cuTensorMapEncodeTiled's boxDim).
TMA_BOX_MAX = 256


@dataclass(frozen=True)
class SmemTile:
    """A rows x cols tile (rows along M/N, cols along K) of `dtype` in a canonical wgmma layout.

    dtype: element type (8/16/32-bit; 4-bit data is laid out as 'u8' bytes); major: 'K' (K
    contiguous: A row-major, B as N x K) or 'MN' (a wgmma descriptor only for 16-bit elements, the only
    ones wgmma transposes; other widths MN-major are TMA boxes alone); swizzle: 0/32/64/128 bytes.
    """

    dtype: str
    rows: int
    cols: int
    major: str = "K"
    swizzle: int = 128

    def __post_init__(self):
        t = T.lookup(self.dtype)
        if t.lanes > 1:
            scalar = t.name[:-2]
            raise ValidationError(f"SmemTile holds scalar elements (what wgmma and TMA read), got .{t.name}: make "
                                  f"the tile of .{scalar} (each pair is two elements)")
        if t.bits not in (8, 16, 32) or t.is_pred:
            raise ValidationError(f"SmemTile holds 8-, 16- or 32-bit elements, got .{t.name} "
                                  "(lay 4-bit data out as 'u8' bytes)")
        object.__setattr__(self, "dtype", t.name)
        if not T.is_integer(self.swizzle):
            raise ValidationError(f"swizzle must be one of 0 (none), 32, 64 or 128 bytes, got {self.swizzle!r}")
        object.__setattr__(self, "swizzle", swizzle_mode(int(self.swizzle)).nbytes)
        for name in ("rows", "cols"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValidationError(f"SmemTile {name} must be an int, got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.rows <= 0 or self.cols <= 0:
            raise ValidationError(f"SmemTile needs positive rows and cols, got {self.rows} x {self.cols}")
        canonical_strides(self.major, self.swizzle, t.bits, self.rows, self.cols)  # checks the shape

    # ------------------------------------------------------------ sizes
    @property
    def element_bits(self) -> int:
        """Bits per element."""
        return T.lookup(self.dtype).bits

    @property
    def span(self) -> int:
        """Bytes of the contiguous dimension per column atom: the swizzle span, 16 without swizzle."""
        return self.swizzle or 16

    @property
    def nbytes(self) -> int:
        """Shared-memory bytes of the tile."""
        return self.rows * self.cols * self.element_bits // 8

    @property
    def alignment(self) -> int:
        """Alignment a swizzled tile best starts on: the swizzle pattern (1024 for 128-byte swizzle,
        128 without), where its layout is the same as at address 0."""
        return swizzle_mode(self.swizzle).pattern_bytes

    @property
    def min_alignment(self) -> int:
        """Alignment the tile base must have at least: 128 bytes (a TMA destination's)."""
        return 128

    @property
    def contiguous_extent(self) -> int:
        """Elements of the contiguous dimension (cols for K-major, rows for MN-major)."""
        return self.cols if self.major == "K" else self.rows

    @property
    def strided_extent(self) -> int:
        """Elements of the other dimension."""
        return self.rows if self.major == "K" else self.cols

    # ------------------------------------------------------------ TMA side
    def _check_tma_box(self) -> None:
        """Refuse the TMA side of a tile whose strided extent no box spans (boxes are 1..256 a side)."""
        if self.strided_extent > TMA_BOX_MAX:
            raise ValidationError(f"{self}: one column atom holds {self.strided_extent} strided rows, more than the "
                                  f"{TMA_BOX_MAX} a TMA box spans; fill it from tiles of at most {TMA_BOX_MAX} "
                                  f"{'rows' if self.major == 'K' else 'columns'} (the wgmma side is unaffected)")

    @property
    def tma_box(self) -> tuple:
        """Box of one TMA copy, innermost first: one column atom (span bytes) x all strided rows (at most 256)."""
        self._check_tma_box()
        return (self.span * 8 // self.element_bits, self.strided_extent)

    @property
    def tma_copies(self) -> int:
        """TMA copies that fill the tile: one per column atom."""
        self._check_tma_box()
        return self.contiguous_extent * self.element_bits // 8 // self.span

    @property
    def tma_swizzle(self) -> int:
        """The tensor map swizzle (bytes) matching this layout."""
        return self.swizzle

    def tma_copy_offset(self, i: int) -> tuple:
        """(shared byte offset, element offset along the contiguous global dimension) of copy i."""
        if not T.is_integer(i) or not 0 <= i < self.tma_copies:
            raise ValidationError(f"copy {i} is outside 0..{self.tma_copies - 1}")
        return i * self.strided_extent * self.span, i * self.tma_box[0]

    def tensor_map(self, array_or_ptr, *, global_dims=None, global_strides=None, dtype=None, **kw):
        """A TensorMap over a GPU array (or raw pointer with global_dims/strides) with this tile's box.

        The global tensor is 2-D with the contiguous dimension innermost (K for a K-major tile).
        4-bit data: make the tile 'u8' over the packed bytes.
        """
        from ..runtime.tensormap import TensorMap
        dtype = dtype or self.dtype
        if T.is_integer(array_or_ptr):
            if global_dims is None:
                raise ValidationError("a raw pointer needs global_dims (innermost first)")
            return TensorMap(dtype, int(array_or_ptr), tuple(global_dims), self.tma_box, global_strides,
                             swizzle=self.swizzle, **kw)
        return TensorMap.from_array(array_or_ptr, self.tma_box, dtype=dtype, swizzle=self.swizzle, **kw)

    # ------------------------------------------------------------ wgmma side
    @property
    def k_elems(self) -> int:
        """K elements one wgmma instruction reads (32 bytes' worth: k32 for 8-bit, k16 for 16-bit)."""
        return WGMMA_K_BYTES * 8 // self.element_bits

    @property
    def k_slices(self) -> int:
        """wgmma k-steps that cover the tile's K."""
        if self.cols % self.k_elems:
            raise ValidationError(f"{self.cols} columns are not a whole number of {self.k_elems}-element k-steps")
        return self.cols // self.k_elems

    def slice_start(self, k_slice: int) -> int:
        """Byte offset (before swizzle: what the descriptor's start address adds) of k-slice k_slice."""
        if not T.is_integer(k_slice):
            raise ValidationError(f"k_slice must be an int (a wgmma k-step index), got {k_slice!r}")
        k_slice = int(k_slice)
        if not 0 <= k_slice < self.k_slices:
            raise ValidationError(f"k-slice {k_slice} is outside 0..{self.k_slices - 1}")
        return canonical_offset_linear(self.major, self.swizzle, self.element_bits, self.rows, self.cols, 0,
                                       k_slice * self.k_elems)

    @property
    def k_advance_bytes(self) -> int:
        """Bytes added to the descriptor start per wgmma k-step, when that is one constant."""
        starts = [self.slice_start(s) for s in range(self.k_slices)]
        steps = {b - a for a, b in zip(starts, starts[1:])}
        if len(steps) > 1:
            raise ValidationError(f"{self}: k-slices do not advance by one constant ({sorted(steps)}); "
                                  "use descriptor(base, k_slice) per slice")
        return steps.pop() if steps else 0

    def descriptor_fields(self, base_addr: int, k_slice: int = 0) -> DescriptorFields:
        """The descriptor fields (bytes) for k-slice `k_slice` of a tile at shared address base_addr.

        base_addr must be 128-byte aligned.  The base offset stays 0 at any such base: wgmma takes
        the swizzle row from the absolute address (measured on the H200; see
        `isa.descriptors`).  The whole tile must lie below 256 KB, the window the descriptor reaches."""
        base_addr = self._check_base(base_addr, f" ({self.alignment}-byte aligned keeps the base offset 0)")
        if base_addr + self.nbytes > DESCRIPTOR_WINDOW:
            raise ValidationError(f"{self} at shared address {base_addr:#x} ends at {base_addr + self.nbytes:#x}, "
                                  f"past the 256 KB ({DESCRIPTOR_WINDOW:#x}) a wgmma descriptor reaches (and the "
                                  "shared memory of any SM): place it at most "
                                  f"{max(DESCRIPTOR_WINDOW - self.nbytes, 0):#x}")
        lbo, sbo = self._descriptor_strides()
        return DescriptorFields(base_addr + self.slice_start(k_slice), lbo, sbo, self.swizzle, 0)

    def descriptor(self, base_addr: int, k_slice: int = 0) -> int:
        """The 64-bit wgmma matrix descriptor for k-slice `k_slice` of the tile at base_addr."""
        f = self.descriptor_fields(base_addr, k_slice)
        return encode_descriptor(f.start_addr, f.leading_byte_offset, f.stride_byte_offset, f.swizzle,
                                 f.base_offset)

    def descriptor_template(self) -> int:
        """The descriptor with start address 0: OR (addr >> 4) into bits 0-13 at run time."""
        return encode_descriptor(0, *self._descriptor_strides(), self.swizzle)

    def _descriptor_strides(self) -> tuple:
        """(LBO, SBO) of a tile some wgmma reads, each within the descriptor's 14-bit fields (< 256 KB)."""
        self._check_wgmma_readable()
        lbo, sbo = canonical_strides(self.major, self.swizzle, self.element_bits, self.rows, self.cols)
        if max(lbo, sbo) >= DESCRIPTOR_WINDOW:
            raise ValidationError(f"{self}: its column atoms lie {max(lbo, sbo)} bytes apart, more than the 14-bit "
                                  "leading/stride byte offsets of a wgmma descriptor hold (< 256 KB): a "
                                  f"{self.rows} x {self.cols} tile of .{self.dtype} ({self.nbytes} bytes) is larger "
                                  "than any shared memory; use a smaller tile")
        return lbo, sbo

    def _check_wgmma_readable(self) -> None:
        """Refuse a descriptor no wgmma can take: only 16-bit operands (.f16/.bf16) transpose (imm-trans), so
        a tile of other widths is read K-major only (an MN-major one may still be a TMA box)."""
        if self.major == "MN" and self.element_bits != 16:
            raise ValidationError(f"no wgmma reads an MN-major tile of .{self.dtype}: only .f16/.bf16 operands "
                                  "transpose (imm-trans-a/b); lay the tile out K-major (major='K')")

    # ------------------------------------------------------------ numpy model
    def _check_base(self, base, hint: str = "") -> int:
        """`base` as an int: a shared address (a Python or numpy integer, no bool) on a 128-byte boundary."""
        if not T.is_integer(base) or base < 0:
            raise ValidationError(f"tile base must be a shared address (a non-negative int), got {base!r}")
        if base % self.min_alignment:
            raise ValidationError(f"tile base {int(base):#x} must be a {self.min_alignment}-byte aligned shared "
                                  f"address{hint}")
        return int(base)

    def offset(self, r: int, c: int, base: int = 0) -> int:
        """Byte offset of element (r, c) (r along M/N, c along K) from the tile base, for a tile whose
        base is shared address `base` (the swizzle acts on the absolute address; any base on the
        pattern boundary gives the same offsets as 0)."""
        if not (T.is_integer(r) and T.is_integer(c) and 0 <= r < self.rows and 0 <= c < self.cols):
            raise ValidationError(f"element ({r!r}, {c!r}) is not one of the {self.rows} x {self.cols} tile: r in "
                                  f"0..{self.rows - 1}, c in 0..{self.cols - 1}, ints")
        r, c = int(r), int(c)
        base = self._check_base(base)
        lin = canonical_offset_linear(self.major, self.swizzle, self.element_bits, self.rows, self.cols, r, c)
        return apply_swizzle(base + lin, self.swizzle) - base

    def element_offsets(self, base: int = 0) -> np.ndarray:
        """int64 array [rows, cols] of the byte offset of every element (vectorized `offset`)."""
        base = self._check_base(base)
        eb = self.element_bits // 8
        r = np.arange(self.rows, dtype=np.int64)[:, None]
        c = np.arange(self.cols, dtype=np.int64)[None, :]
        i, o = (c, r) if self.major == "K" else (r, c)
        ib = i * eb
        lin = (ib // self.span) * (self.strided_extent * self.span) + o * self.span + ib % self.span
        lin = apply_swizzle(lin + base, self.swizzle) - base
        return np.broadcast_to(lin, (self.rows, self.cols)).copy()

    def store(self, tile: np.ndarray, base: int = 0) -> np.ndarray:
        """The tile's shared-memory bytes (uint8, nbytes) holding the [rows, cols] array `tile`, for a
        tile at shared address `base` (see `offset`)."""
        t = np.ascontiguousarray(tile)
        eb = self.element_bits // 8
        if t.shape != (self.rows, self.cols) or t.dtype.itemsize != eb:
            raise ValidationError(f"store takes a {self.rows} x {self.cols} array of {eb}-byte elements")
        out = np.zeros(self.nbytes, np.uint8)
        offs = self.element_offsets(base)
        raw = t.view(np.uint8).reshape(self.rows, self.cols, eb)
        for b in range(eb):
            out[offs + b] = raw[:, :, b]
        return out

    def decode(self, desc: int) -> DescriptorFields:
        """Decoded fields of a descriptor (for checks)."""
        return decode_descriptor(desc)
