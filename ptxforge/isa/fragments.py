"""Fragment layouts: which matrix element each lane's register holds, for every `mma.sync` form in
`ptxforge.isa.tensor.MMA_FORMS` and every m8n8 `ldmatrix`/`stmatrix` form, and which address each
lane gives `ldmatrix`.

Source: the PTX ISA sections "Matrix Fragments for mma.mMnNkK" and "Warp-level matrix load
instruction: ldmatrix" (groupID g = lane >> 2, threadID_in_group t = lane % 4).  The interpreter
executes mma and ldmatrix through these tables, and `tests/test_interp_gpu.py` checks them
bit-exactly against a GPU.

All register-operand mma forms follow one pattern once a register is seen as a row of packed
elements (`per_reg` elements of `elem_bits` bits, element j at bits [j*elem_bits, (j+1)*elem_bits)):

* A (M x K): register r, element j -> row g + 8*(r % 2) when the fragment has an even number of
  registers (m16 shapes), else row g; column per_reg*t + j + 4*per_reg*(r // 2).
* B (K x N): register r, element j -> row per_reg*t + j + 4*per_reg*r, column g.
* C / D (M x N): element e (register r = e // per_reg for packed f16 pairs, else e = r)
  -> row g + 8*(e // 2), column 2t + e % 2.

m8n8k4 with .f16 operands is the exception: the warp computes four independent 8x8x4 products,
product q by quad pair q (lanes 4q..4q+3, the "low" half, and 16+4q..16+4q+3, the "high" half).
Within a pair, thread u = lane % 4 + 4*(lane >= 16) and h = (lane >= 16); element e of the
fragment (e = 2*register + half for packed .f16):

* A row-major: (u, e); column-major: (e + 4h, lane % 4).
* B row-major: (lane % 4, e + 4h); column-major: (e, u).
* C / D .f16: (u, e); .f32: (lane % 2 + (e & 2) + 4h, (e & 1) + (lane & 2) + (e & 4)).

Its fragments stack the four products' matrices by rows, product q in row block q: A is 32 x 4,
B 16 x 8, C and D 32 x 8 (`Fragment.blocks` is 4), and the interpreter multiplies block by block.

For example m16n8k64.s4 (8 nibbles a register) gives a1 = (g+8, k 8t..8t+7) and
a2 = (g, k 32+8t..), and m16n8k8.tf32 gives a2 = (g, t+4) — the documented tables.
The m16n8k256.b1 A table in the PTX ISA text reads "col = 32t + i for i < 64", which would
overlap the i >= 64 half; the byte-for-byte analogy with every other shape (and its own
m16n8k128 table) gives 32t + (i & 31), used here.

Two kinds of reader use this module: numpy models (`mma_fragment`, `matrix_layout`, the packers),
and code that emits PTX.  The lane maps (`lane_group`, `acc_lane_origin`, `ldmatrix_tile_origin`)
are written once over a small set of operations (`>>`, `&`, `<<`, `+`) and take an `ops`
argument: `INT_OPS` (the default) evaluates them on Python ints or numpy arrays; a
`KernelBuilder` passed as `ops` emits them as `shr`/`and`/`shl`/`add` instructions on a lane
register, so a kernel and its model read the same formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import types as T
from .tensor import MmaForm

_PTXFORGE_INTERNAL = True

WARP = 32


@dataclass(frozen=True)
class Fragment:
    """Where each element of one operand lives: lane x register x element -> (row, col)."""

    operand: str  # "a", "b", "c"
    shape: tuple  # (rows, cols) of the operand matrix
    nregs: int
    per_reg: int  # elements in one register
    elem_bits: int
    rows: np.ndarray  # (32, nregs, per_reg) int
    cols: np.ndarray  # (32, nregs, per_reg) int
    blocks: int = 1  # independent products stacked by rows (4 for m8n8k4 .f16)

    def covers_once(self) -> bool:
        """Each matrix element is held by exactly one (lane, register, element)."""
        counts = np.zeros(self.shape, dtype=np.int64)
        np.add.at(counts, (self.rows.ravel(), self.cols.ravel()), 1)
        return bool((counts == 1).all())


def _elem_bits(t: T.ScalarType) -> int:
    return 32 if t is T.tf32 else t.bits


def _operand_regs(form: MmaForm, operand: str) -> int:
    return {"a": form.a_regs, "b": form.b_regs, "c": form.c_regs, "d": form.d_regs}[operand]


def _quad_pair_fragment(form: MmaForm, operand: str) -> Fragment:
    """m8n8k4 .f16: four products, one per quad pair, stacked by rows (see the module docstring)."""
    lane = np.arange(WARP)[:, None, None]
    q, h, low = (lane >> 2) & 3, lane >> 4, lane & 3
    u = low + 4 * h
    acc = form.c_type if operand == "c" else form.d_type
    per_reg = 1 if operand in "cd" and acc is T.f32 else 2
    nregs = _operand_regs(form, operand)
    e = np.arange(nregs)[None, :, None] * per_reg + np.arange(per_reg)[None, None, :]
    a_lay, b_lay = form.layout
    if operand == "a":
        rows, cols = (u + 0 * e, e + 0 * lane) if a_lay == "row" else (e + 4 * h, low + 0 * e)
        rows, shape = rows + 8 * q, (32, 4)
    elif operand == "b":
        rows, cols = (low + 0 * e, e + 4 * h) if b_lay == "row" else (e + 0 * lane, u + 0 * e)
        rows, shape = rows + 4 * q, (16, 8)
    else:
        if acc is T.f16:
            rows, cols = u + 0 * e, e + 0 * lane
        else:
            rows, cols = (lane & 1) + (e & 2) + 4 * h, (e & 1) + (lane & 2) + (e & 4)
        rows, shape = rows + 8 * q, (32, 8)
    rows = np.broadcast_to(rows, (WARP, nregs, per_reg)).astype(np.intp)
    cols = np.broadcast_to(cols, (WARP, nregs, per_reg)).astype(np.intp)
    return Fragment(operand, shape, nregs, per_reg, 16 if per_reg == 2 else 32, rows, cols, blocks=4)


@lru_cache(maxsize=None)
def mma_fragment(form: MmaForm, operand: str) -> Fragment:
    """The layout of operand 'a', 'b', 'c' or 'd' of an mma.sync form (C and D share one unless
    their types differ, as in m8n8k4 .f32 from .f16)."""
    if form.quad_pairs:
        return _quad_pair_fragment(form, operand)
    if operand == "d":
        operand = "c"
    lane = np.arange(WARP)
    g = (lane >> 2)[:, None, None]
    t = (lane & 3)[:, None, None]
    nregs = _operand_regs(form, operand)
    if operand == "c":
        packed_half = form.d_type is T.f16  # two f16 accumulators per .b32 register
        per_reg = 2 if packed_half else 1
        ebits = 16 if packed_half else form.d_type.bits
        r = np.arange(nregs)[None, :, None]
        j = np.arange(per_reg)[None, None, :]
        e = r * per_reg + j
        rows = g + 8 * (e // 2)
        cols = 2 * t + e % 2
        shape = (form.m, form.n)
    else:
        et = form.a_type if operand == "a" else form.b_type
        ebits = _elem_bits(et)
        reg_bits = 64 if et is T.f64 else 32
        per_reg = reg_bits // ebits
        r = np.arange(nregs)[None, :, None]
        j = np.arange(per_reg)[None, None, :]
        if operand == "a":
            rows = g + 8 * (r % 2) if form.m == 16 else g + 0 * r
            cols = per_reg * t + j + 4 * per_reg * (r // 2 if form.m == 16 else r)
            shape = (form.m, form.k)
        else:
            rows = per_reg * t + j + 4 * per_reg * r
            cols = g + 0 * j
            shape = (form.k, form.n)
    rows = np.broadcast_to(rows, (WARP, nregs, per_reg)).astype(np.intp)
    cols = np.broadcast_to(cols, (WARP, nregs, per_reg)).astype(np.intp)
    return Fragment(operand, shape, nregs, per_reg, ebits, rows, cols)


@lru_cache(maxsize=None)
def sparse_mma_fragment(form, b_type, acc, operand: str) -> Fragment:
    """The layout of operand 'a', 'b', 'c' or 'd' of an mma.sp form (`ptxforge.isa.sparse.SparseMmaForm` with
    its B and accumulator types).  A is the compressed 16 x K/2 matrix the A operand holds (which columns of
    the real A its elements are the metadata says: `isa.sparse.expanded_columns`); it is laid out as the A
    of the dense m16n8k(K/2) form of its type (PTX ISA "Matrix fragments for multiply-accumulate operation
    with sparse matrix A": row g or g + 8, a register's elements in order from threadID_in_group's first
    chunk).  B (K x N), C and D follow the dense pattern of the module docstring at the full K."""
    k = form.k
    dense = MmaForm(f"m16n8k{k // 2 if operand == 'a' else k}", form.a_type, b_type, acc, acc, form.a_regs,
                    form.b_regs, form.c_regs(acc), form.req)
    return mma_fragment(dense, operand)


# ---------------------------------------------------------------- packing helpers (numpy models)

def _unsigned(values, bits):
    v = np.asarray(values)
    if bits == 64:
        return v.view(np.uint64) if v.dtype.kind in "iu" and v.dtype.itemsize == 8 else v.astype(np.uint64)
    return v.astype(np.int64) & ((1 << bits) - 1)


def pack_fragment(frag: Fragment, matrix: np.ndarray) -> np.ndarray:
    """Matrix element values (ints of the element width, or raw bit patterns) -> register words.

    Returns uint64 words of shape (32, nregs); use the low 32 bits for .b32 registers.
    """
    vals = _unsigned(np.asarray(matrix)[frag.rows, frag.cols], frag.elem_bits).astype(np.uint64)
    shifts = (np.arange(frag.per_reg, dtype=np.uint64) * np.uint64(frag.elem_bits))[None, None, :]
    return np.bitwise_or.reduce(vals << shifts, axis=2)


def unpack_fragment(frag: Fragment, words: np.ndarray, signed: bool = False) -> np.ndarray:
    """Register words (32, nregs) -> the operand matrix of raw element values."""
    w = np.asarray(words).astype(np.uint64)[:, :, None]
    shifts = (np.arange(frag.per_reg, dtype=np.uint64) * np.uint64(frag.elem_bits))[None, None, :]
    mask = np.uint64((1 << frag.elem_bits) - 1) if frag.elem_bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    vals = ((w >> shifts) & mask).astype(np.int64) if frag.elem_bits < 64 else (w >> shifts)
    if signed and frag.elem_bits < 64:
        half = 1 << (frag.elem_bits - 1)
        vals = np.where(vals >= half, vals - (1 << frag.elem_bits), vals)
    out = np.zeros(frag.shape, dtype=vals.dtype)
    out[frag.rows, frag.cols] = vals
    return out


# ---------------------------------------------------------------- ldmatrix / stmatrix (m8n8, b16)

@dataclass(frozen=True)
class MatrixLayout:
    """m8n8 x num b16 matrices: address lanes and the (matrix, row, col) of each destination half."""

    num: int
    trans: bool
    # (32, num, 2): for lane l, register j, half h (0 = low 16 bits) -> row / col inside matrix j
    rows: np.ndarray
    cols: np.ndarray

    @property
    def address_lanes(self) -> int:
        """How many lanes supply a row address: 8 per matrix."""
        return 8 * self.num

    @staticmethod
    def address_lane(matrix: int, row: int) -> int:
        """Matrix j row r starts at the address held by lane 8*j + r."""
        return 8 * matrix + row


@lru_cache(maxsize=None)
def matrix_layout(num: int, trans: bool) -> MatrixLayout:
    """The register layout of `ldmatrix`/`stmatrix` .m8n8.x{num}[.trans].b16: which row and column of
    each 8x8 matrix every lane's register halves hold (lane l: row l // 4, columns 2(l % 4) and
    2(l % 4) + 1; transposed with .trans)."""
    lane = np.arange(WARP)[:, None, None]
    h = np.arange(2)[None, None, :]
    j = np.arange(num)[None, :, None]
    quad, pos = lane >> 2, lane & 3
    if not trans:
        rows = quad + 0 * h + 0 * j  # lane l holds row l/4, elements 2(l%4) and 2(l%4)+1
        cols = 2 * pos + h + 0 * j
    else:
        rows = 2 * pos + h + 0 * j  # transposed: column l/4, rows 2(l%4) and 2(l%4)+1
        cols = quad + 0 * h + 0 * j
    shape = (WARP, num, 2)
    return MatrixLayout(num, trans, np.broadcast_to(rows, shape).astype(np.intp),
                        np.broadcast_to(cols, shape).astype(np.intp))


# ---------------------------------------------------------------- lane maps, for models and emitters

class IntOps:
    """The operations lane maps are written in, on Python ints or numpy integer arrays.

    A `KernelBuilder` has the same four methods (emitting `shr`, `and`, `shl`, `add`), so a lane
    map given `ops=kernel_builder` and a lane register emits its PTX instead.
    """

    @staticmethod
    def shr(x, n):
        """x >> n."""
        return x >> n

    @staticmethod
    def and_(x, m):
        """x & m."""
        return x & m

    @staticmethod
    def shl(x, n):
        """x << n."""
        return x << n

    @staticmethod
    def add(x, y):
        """x + y."""
        return x + y


#: Lane maps evaluated on ints / numpy arrays (the default `ops`).
INT_OPS = IntOps()

#: Bytes of one ldmatrix / stmatrix row: eight b16 elements, one 16-byte chunk of a tile row.
MATRIX_ROW_BYTES = 16


def lane_group(lane, ops=INT_OPS):
    """(groupID, threadID_in_group) of a lane: (lane >> 2, lane & 3), the g and t of the PTX ISA
    fragment tables."""
    return ops.shr(lane, 2), ops.and_(lane, 3)


def acc_offset(e: int) -> tuple:
    """(row, col) of accumulator element e relative to its lane's origin: (8*(e // 2), e % 2).

    Element e is register e of the C/D fragment, or half e % 2 of register e // 2 for packed f16
    accumulators; together with `acc_lane_origin` it gives row g + 8*(e//2), column 2t + e%2.
    """
    e = int(e)
    if e < 0:
        raise ValueError(f"accumulator element index must be >= 0, got {e}")
    return 8 * (e // 2), e % 2


def acc_lane_origin(lane, ops=INT_OPS):
    """(row, col) of a lane's first accumulator element in an mma C/D tile: (g, 2t).

    With a KernelBuilder as `ops` this emits `shr.u32 g, lane, 2; and.b32 t, lane, 3;
    shl.b32 col, t, 1` and returns the registers (g, col).
    """
    g, t = lane_group(lane, ops)
    return g, ops.shl(t, 1)


def acc_coords(form: MmaForm, lane, e: int) -> tuple:
    """(row, col) in the M x N tile of accumulator element e of `lane` for an mma.sync form.

    `lane` is an int or a numpy array of lanes; e counts the form's accumulator elements
    (`form.c_regs` of them, twice that for packed f16 accumulators).
    """
    count = form.d_regs * (2 if form.d_type is T.f16 else 1)
    if not 0 <= int(e) < count:
        raise ValueError(f"{form.mnemonic()} has accumulator elements 0..{count - 1}; got {e}")
    if form.quad_pairs:  # (row, col) in the stacked 32 x 8 D of the four products (row block q)
        f = mma_fragment(form, "d")
        return f.rows.reshape(WARP, -1)[lane, int(e)], f.cols.reshape(WARP, -1)[lane, int(e)]
    row0, col0 = acc_lane_origin(lane)
    dr, dc = acc_offset(e)
    return row0 + dr, col0 + dc


def ldmatrix_lane_origin(num: int, lane) -> tuple:
    """(matrix, row) whose start address lane `lane` supplies to `ldmatrix`/`stmatrix` .x`num`.

    Lane l gives the address of row l % 8 of matrix l // 8; only lanes 0 .. 8*num-1 supply one
    (for the others the returned matrix index is >= num and their address is not read).
    """
    _check_num(num)
    return lane >> 3, lane & 7


def ldmatrix_tile_origin(num: int, lane, *, row_blocks: int, rows_first: bool = True, in_bytes: bool = False,
                         ops=INT_OPS):
    """(tile row, 16-byte chunk) that lane `lane` addresses when one `ldmatrix.x{num}` reads a tile
    of 8*row_blocks rows split into 16-byte chunks.

    The num matrices cover the tile's 8-row blocks and chunks in one of two orders:
    rows_first (the m16 A fragment: matrices 0, 1 are rows 0-7 and 8-15 of chunk 0, registers
    a0, a1): matrix j is block j % row_blocks, chunk j // row_blocks; chunks first (two n8 B
    fragments from one x4: matrices 0, 1 are chunks 0, 1 of rows 0-7, registers b0, b1):
    matrix j is block j // chunks, chunk j % chunks, with chunks = num // row_blocks.
    Lane l then addresses row l % 8 of its matrix l // 8 (`ldmatrix_lane_origin`).

    in_bytes=True gives the chunk as its byte offset in the row (16 * chunk), computed directly.
    Returns ints/arrays, or registers when `ops` is a KernelBuilder; a chunk that is always 0
    is returned as the int 0 (nothing emitted).  Lanes past 8*num get an in-range address.
    """
    _check_num(num)
    if row_blocks not in (1, 2, 4) or num % row_blocks:
        raise ValueError(f"row_blocks must be 1, 2 or 4 and divide num={num}; got {row_blocks}")
    chunks = num // row_blocks
    rb_bits, ch_bits = row_blocks.bit_length() - 1, chunks.bit_length() - 1
    wraps = 8 * num < 32  # lanes past 8*num would otherwise index past the tile
    chunk_mask = (chunks - 1) << (4 if in_bytes else 0)
    if rows_first or chunks == 1 or row_blocks == 1:
        # matrix j = block j % row_blocks, chunk j // row_blocks  ->  row = lane % (8*row_blocks)
        row = ops.and_(lane, 8 * row_blocks - 1)
        if chunks == 1:
            return row, 0
        shift = 3 + rb_bits  # chunk = lane >> shift
        if not in_bytes:
            chunk = ops.shr(lane, shift)
            return row, (ops.and_(chunk, chunk_mask) if wraps else chunk)
        if not wraps:
            return row, ops.shl(ops.shr(lane, shift), 4)
        moved = ops.shr(lane, shift - 4) if shift >= 4 else ops.shl(lane, 4 - shift)
        return row, ops.and_(moved, chunk_mask)
    # chunks first: matrix j = block j // chunks, chunk j % chunks
    low = ops.and_(lane, 7)
    block = ops.shr(lane, 3 + ch_bits)
    if wraps:
        block = ops.and_(block, row_blocks - 1)
    row = ops.add(low, ops.shl(block, 3))
    # chunk = (lane >> 3) % chunks; as bytes (chunk << 4) that is (lane << 1) & mask
    return row, (ops.and_(ops.shl(lane, 1), chunk_mask) if in_bytes else ops.and_(ops.shr(lane, 3), chunk_mask))


def _check_num(num):
    if num not in (1, 2, 4):
        raise ValueError(f"ldmatrix/stmatrix load 1, 2 or 4 matrices (.x1, .x2, .x4); got {num}")
