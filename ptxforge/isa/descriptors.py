"""wgmma shared-memory matrix descriptors and the canonical swizzled layouts, as PTX facts.

A `wgmma.mma_async` operand in shared memory is named by a 64-bit *matrix descriptor*
(PTX ISA, "Matrix Descriptor Format"):

    bits  0-13  start address >> 4        (shared-window byte address, 16-byte granules)
    bits 16-29  leading dimension byte offset (LBO) >> 4
    bits 32-45  stride dimension byte offset (SBO) >> 4
    bits 49-51  matrix base offset        (pattern phase of the start address, swizzled modes only)
    bits 62-63  swizzle mode: 0 none ("interleave"), 1 128-byte, 2 64-byte, 3 32-byte

The same swizzle is what the tensor-memory-access engine writes with `CU_TENSOR_MAP_SWIZZLE_*`:
inside each repeating pattern of 8 rows x S bytes (S = 32/64/128, pattern 256/512/1024 bytes),
the 16-byte chunk index of a byte is XORed with its row index within the pattern, i.e. bits
[4, 4+b) of the byte address are XORed with bits [7, 7+b), b = log2(S / 16).

`canonical_offset` is the byte offset of element (r, c) of a tile (r along M or N, c along K)
in those layouts; `descriptor_address` is the address a decoded descriptor makes wgmma read for
element (r, c) of its k-slice.  A layout is right when the two agree (ptxforge.hopper.layout).

Base offset (bits 49-51), as measured on the H200 (tests/test_hopper_gpu.py reads tiles placed at
every 128-byte row of their pattern, with the field set and cleared): wgmma takes the swizzle row
of each address it reads from the absolute address, (addr >> 7), minus the base offset, modulo
the pattern (`swizzle_rows`).  TMA swizzles absolute addresses too, so a tile TMA wrote at any
128-byte-aligned shared address is read back with base offset 0; a non-zero base offset shifts
the phase.  (The PTX ISA's "Matrix Descriptor Format" suggests (start >> 7) & 7 for a pattern
that does not start on its boundary; on the H200 that value reads a tile TMA wrote there with
the rows shifted.)  The no-swizzle mode ignores the field.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from .instruction import int_arg
from .types import is_integer

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class Swizzle:
    """One shared-memory swizzle mode: its span in bytes, descriptor code and tensor-map name.

    `nbytes` is the row span S of the swizzle atom (0: no swizzle), `code` the value of
    descriptor bits 62-63, `tensor_map` the `CUtensorMapSwizzle` enumerator name,
    `pattern_bytes` the size of the repeating 8-row pattern (the alignment the tile needs),
    `xor_bits` the number of chunk-index bits that are XORed.
    """

    nbytes: int
    code: int
    tensor_map: str
    pattern_bytes: int
    xor_bits: int


#: bytes -> Swizzle, the single table of the four modes.
SWIZZLES = {
    0: Swizzle(0, 0, "CU_TENSOR_MAP_SWIZZLE_NONE", 128, 0),
    32: Swizzle(32, 3, "CU_TENSOR_MAP_SWIZZLE_32B", 256, 1),
    64: Swizzle(64, 2, "CU_TENSOR_MAP_SWIZZLE_64B", 512, 2),
    128: Swizzle(128, 1, "CU_TENSOR_MAP_SWIZZLE_128B", 1024, 3),
}
_BY_CODE = {s.code: s for s in SWIZZLES.values()}

MAJORS = ("K", "MN")

#: Bytes of K one wgmma reads per operand row: k32 for 8-bit, k16 for 16-bit, k8 for tf32.
WGMMA_K_BYTES = 32


def swizzle_mode(swizzle) -> Swizzle:
    """The Swizzle for a span in bytes (0, 32, 64, 128) or a Swizzle; a clear error otherwise."""
    if isinstance(swizzle, Swizzle):
        return swizzle
    s = SWIZZLES.get(swizzle) if is_integer(swizzle) else None  # (a dict matches 128.0 and False by hash)
    if s is None:
        raise ValidationError(f"swizzle must be one of 0 (none), 32, 64 or 128 bytes, got {swizzle!r}")
    return s


def swizzle_bytes_of_code(code: int) -> int:
    """Span in bytes of descriptor swizzle code `code` (bits 62-63)."""
    if not is_integer(code) or code not in _BY_CODE:
        raise ValidationError(f"descriptor swizzle code must be 0..3, got {code!r}")
    return _BY_CODE[code].nbytes


def apply_swizzle(addr: int, swizzle) -> int:
    """The physical byte address of logical byte `addr` under `swizzle` (XOR of bits [4,4+b) with [7,7+b))."""
    s = swizzle_mode(swizzle)
    if not s.xor_bits:
        return addr
    mask = (1 << s.xor_bits) - 1
    return addr ^ (((addr >> 7) & mask) << 4)


def swizzle_rows(addr, base_offset: int, swizzle):
    """The physical address wgmma reads for logical byte `addr` (int or int array) of an operand whose
    descriptor has base offset `base_offset` (bits 49-51).

    The pattern row of `addr` is its absolute 128-byte row minus the base offset, modulo the
    pattern (8, 4 or 2 rows of 128 bytes for 128-, 64- and 32-byte swizzle); the 16-byte chunk
    index (bits 4..) is XORed with it.  With base offset 0 this is `apply_swizzle(addr)`, the
    layout TMA writes; without swizzle the address is unchanged.
    """
    s = swizzle_mode(swizzle)
    if not s.xor_bits:
        return addr
    mask = (1 << s.xor_bits) - 1
    return addr ^ ((((addr >> 7) - base_offset) & mask) << 4)


@dataclass(frozen=True)
class DescriptorFields:
    """The decoded fields of a wgmma matrix descriptor, in bytes (not the >>4 encodings)."""

    start_addr: int
    leading_byte_offset: int
    stride_byte_offset: int
    swizzle: int  # bytes: 0, 32, 64, 128
    base_offset: int = 0


def _field(name: str, v: int, bits: int) -> int:
    v = int_arg(v, f"descriptor {name}")
    if v < 0:
        raise ValidationError(f"descriptor {name} must be a non-negative int, got {v!r}")
    if v % 16:
        raise ValidationError(f"descriptor {name} {v:#x} must be a multiple of 16 bytes (it is stored >> 4)")
    if (v >> 4) >= (1 << bits):
        raise ValidationError(f"descriptor {name} {v:#x} does not fit: {bits} bits of 16-byte units "
                              f"(< {(1 << bits) * 16} bytes)")
    return v >> 4


def encode_descriptor(start_addr: int, leading_byte_offset: int, stride_byte_offset: int, swizzle,
                      base_offset: int = 0) -> int:
    """The 64-bit wgmma matrix descriptor (PTX "Matrix Descriptor Format") for byte-valued fields.

    start_addr: shared-window byte address (16-byte aligned, < 256 KB); leading/stride byte
    offsets: LBO/SBO in bytes (multiples of 16); swizzle: 0/32/64/128 bytes; base_offset: 0..7.
    """
    s = swizzle_mode(swizzle)
    base_offset = int_arg(base_offset, "descriptor base offset")
    if not 0 <= base_offset <= 7:
        raise ValidationError(f"descriptor base offset is 3 bits (0..7), got {base_offset!r}")
    return (_field("start address", start_addr, 14)
            | _field("leading byte offset", leading_byte_offset, 14) << 16
            | _field("stride byte offset", stride_byte_offset, 14) << 32
            | base_offset << 49
            | s.code << 62)


def decode_descriptor(desc: int) -> DescriptorFields:
    """The fields of a 64-bit wgmma matrix descriptor, in bytes (inverse of encode_descriptor)."""
    desc = int_arg(desc, "a descriptor")
    if not 0 <= desc < (1 << 64):
        raise ValidationError(f"a descriptor is a 64-bit unsigned int, got {desc!r}")
    m14 = (1 << 14) - 1
    return DescriptorFields((desc & m14) << 4, ((desc >> 16) & m14) << 4, ((desc >> 32) & m14) << 4,
                            swizzle_bytes_of_code((desc >> 62) & 3), (desc >> 49) & 7)


def _check_tile(major, dtype_bits, rows, cols, s: Swizzle):
    if major not in MAJORS:
        raise ValidationError(f"major must be 'K' or 'MN', got {major!r}")
    if dtype_bits not in (8, 16, 32):
        raise ValidationError(f"wgmma shared-memory operands have 8-, 16- or 32-bit elements, got {dtype_bits}")
    eb = dtype_bits // 8
    inner, outer = (cols, rows) if major == "K" else (rows, cols)
    span = s.nbytes or 16
    if (inner * eb) % span:
        raise ValidationError(f"the contiguous ({major}) extent {inner} x {eb} B must be a multiple of the "
                              f"{span}-byte {'swizzle span' if s.nbytes else 'core-matrix width'}")
    if outer % 8:
        raise ValidationError(f"the strided extent {outer} must be a multiple of 8 (core matrices have 8 rows)")
    return eb, inner, outer, span


def canonical_offset_linear(major: str, swizzle, dtype_bits: int, rows: int, cols: int, r: int, c: int) -> int:
    """Byte offset of element (r, c) before the swizzle XOR (see canonical_offset)."""
    s = swizzle_mode(swizzle)
    eb, inner, outer, span = _check_tile(major, dtype_bits, rows, cols, s)
    i, o = (c, r) if major == "K" else (r, c)
    ib = i * eb
    # column atoms of `span` contiguous bytes, each holding all `outer` rows, one after the other
    return (ib // span) * (outer * span) + o * span + ib % span


def canonical_offset(major: str, swizzle, dtype_bits: int, rows: int, cols: int, r: int, c: int) -> int:
    """Byte offset of element (r, c) in a canonical wgmma tile (r along M/N, c along K).

    major "K": K contiguous; "MN": M/N contiguous.  The tile is cut into column atoms of S bytes
    of the contiguous dimension (S = swizzle span, 16 without swizzle), each atom holding every row
    at a pitch of S bytes; within each 8-row pattern the 16-byte chunk index is XORed with the row
    index (the layout TMA writes with that swizzle, box inner extent S).  The tile base must be
    aligned to the pattern (1024 bytes for 128-byte swizzle).
    """
    return apply_swizzle(canonical_offset_linear(major, swizzle, dtype_bits, rows, cols, r, c), swizzle)


def canonical_strides(major: str, swizzle, dtype_bits: int, rows: int, cols: int) -> tuple:
    """(LBO, SBO) in bytes of the canonical tile, with the meaning the descriptor gives them.

    K-major, swizzled: SBO = 8 rows x S (the next 8-row group); LBO is unused by the hardware for
    a k-slice inside one atom and set to the atom stride.  K-major, no swizzle: LBO = distance of
    K-adjacent core matrices, SBO = distance of M/N-adjacent ones.  MN-major, swizzled: LBO =
    distance of MN-adjacent atoms, SBO = 8 k-rows.  MN-major, no swizzle: LBO = 8 k-rows (K-adjacent
    cores), SBO = MN-adjacent cores.
    """
    s = swizzle_mode(swizzle)
    eb, inner, outer, span = _check_tile(major, dtype_bits, rows, cols, s)
    atom = outer * span
    if major == "K":
        return (atom, 8 * span) if s.nbytes else (atom, 128)
    return (atom, 8 * span) if s.nbytes else (128, atom)


def descriptor_address_linear(fields: DescriptorFields, major: str, dtype_bits: int, r, c):
    """Shared byte address of element (r, c) of the operand a descriptor names, before the swizzle
    (see descriptor_address)."""
    if major not in MAJORS:
        raise ValidationError(f"major must be 'K' or 'MN', got {major!r}")
    eb = dtype_bits // 8
    S, lbo, sbo = fields.swizzle, fields.leading_byte_offset, fields.stride_byte_offset
    if major == "K":
        kb = c * eb
        if S:
            return fields.start_addr + (r // 8) * sbo + (r % 8) * S + kb
        return fields.start_addr + (r // 8) * sbo + (kb // 16) * lbo + (r % 8) * 16 + kb % 16
    mb = r * eb
    if S:
        return fields.start_addr + (mb // S) * lbo + (c // 8) * sbo + (c % 8) * S + mb % S
    return fields.start_addr + (mb // 16) * sbo + (c // 8) * lbo + (c % 8) * 16 + mb % 16


def descriptor_address(fields: DescriptorFields, major: str, dtype_bits: int, r, c):
    """Shared byte address wgmma reads for element (r, c) of the operand a descriptor names.

    r: row along M/N (0..63 for A, 0..N-1 for B), c: element along K inside this instruction's
    k-slice (0 .. 32 bytes / element size).  Models the canonical layouts of the PTX ISA
    ("Shared Memory Matrix Layout") and the base offset: the swizzle row of each address is its
    absolute 128-byte row minus the base offset (`swizzle_rows`; measured on the H200), so with
    base offset 0 it is the swizzle of the absolute address, what TMA writes.
    """
    a = descriptor_address_linear(fields, major, dtype_bits, r, c)
    return swizzle_rows(a, fields.base_offset, fields.swizzle)
