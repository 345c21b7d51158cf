"""Sparse warp-level matrix multiply: mma.sp (2:4 structured sparsity in A), sm_80.

Legal forms as data: `SPARSE_MMA` maps (shape, A type) to a `SparseMmaForm` row: the B types it
pairs with, registers per thread of A (half the dense fragment), B and C/D, the accumulator
types and the largest sparsity selector.  Each mma.sp also reads a .b32 metadata register `e`
(which two of every four A elements are stored) and the selector `f` (which threads supply it).

The sparse storage (PTX ISA "Sparse matrix storage", "Matrix fragments for multiply-accumulate
operation with sparse matrix A", and their wgmma.mma_async.sp counterparts), as one rule over
*units*: 16 bits for .f16/.bf16/.tf32 A, 8 bits for 8-bit and 4-bit A.  A row of the M x K matrix
A is cut into chunks of four units; each chunk keeps two units (stored in order in the A
operand) and one metadata nibble names where they go: bits 0-1 the position of the first kept
unit in the chunk, bits 2-3 the second's.  So .f16/.bf16/.s8/.u8/.e4m3/.e5m2 are 2:4 element
sparse, .tf32 1:2 (a kept element is two units: only 0b0100 and 0b1110 mean something) and
.s4/.u4 4:8 in pairs (a unit is two nibbles).  Two equal indices (0b0000, 0b0101, 0b1010, 0b1111)
are undefined; ``mma.sp::ordered_metadata`` also needs the first index below the second.

The metadata of the 16 rows one warp covers: the threads of a group of four (rows g and g+8,
g = lane / 4) hold it, T = `metadata_threads` of them (the rest of the group is ignored); the
selector picks which: threads 4g + selector * T .. 4g + selector * T + T - 1, thread j of them
holding nibbles 0-7 (chunk i at bits 4i .. 4i+3 of its part):

* 16-bit units: chunks 4j .. 4j+3 of row g in bits 0-15 and the same chunks of row g + 8 in
  bits 16-31;
* 8-bit units: chunks 8(j // 2) .. 8(j // 2) + 7 of row g (j even) or of row g + 8 (j odd).

The ISA's metadata figures are pictures; both cases were measured on an H100 (every nibble of
every lane traced to the A element it places, for m16n8k32 .f16, m16n8k32 / m16n8k64 .s8,
m16n8k64 .e4m3 and m16n8k64 / m16n8k128 .s4), and tests/test_interp_sparse_gpu.py holds the
interpreter to the hardware for every form and selector.  In a warpgroup's wgmma.mma_async.sp
warp w does this for rows 16w .. 16w+15.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from . import types as T
from .instruction import check_value, check_vec, int_arg, make
from .operands import Imm, Reg, Vec
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

REQ_SP = Requirement(80, V("7.1"))
REQ_ORDERED = Requirement(80, V("8.5"))


@dataclass(frozen=True)
class SparseMmaForm:
    """One mma.sp shape x A type: B types, fragment registers, accumulators, selector range."""

    shape: str
    a_type: T.ScalarType
    b_types: tuple
    a_regs: int
    b_regs: int
    acc: tuple  # accumulator (= C = D) types
    max_selector: int
    req: Requirement = REQ_SP

    def c_regs(self, acc) -> int:
        """Registers of a C/D fragment: two .b32 for f16 accumulators, four otherwise."""
        return 2 if acc is T.f16 else 4

    @property
    def k(self) -> int:
        """K of the shape: the columns of the whole (uncompressed) A, e.g. 32 for m16n8k32."""
        return int(self.shape[self.shape.index("k") + 1:])

    @property
    def is_integer(self) -> bool:
        """Whether A and B are integers (.s8/.u8/.s4/.u4, accumulating exactly in .s32)."""
        return self.a_type.is_int


#: fp8 A and B (sm_89, PTX ISA 8.4)
REQ_SP_FP8 = Requirement(89, V("8.4"))


def _table():
    rows = [("m16n8k16", T.f16, (T.f16,), 2, 2, (T.f32, T.f16), 3),
            ("m16n8k32", T.f16, (T.f16,), 4, 4, (T.f32, T.f16), 1),
            ("m16n8k16", T.bf16, (T.bf16,), 2, 2, (T.f32,), 3),
            ("m16n8k32", T.bf16, (T.bf16,), 4, 4, (T.f32,), 1),
            ("m16n8k8", T.tf32, (T.tf32,), 2, 2, (T.f32,), 3),
            ("m16n8k16", T.tf32, (T.tf32,), 4, 4, (T.f32,), 1)]
    for t in (T.s8, T.u8):
        rows += [("m16n8k32", t, (T.s8, T.u8), 2, 2, (T.s32,), 1), ("m16n8k64", t, (T.s8, T.u8), 4, 4, (T.s32,), 0)]
    for t in (T.s4, T.u4):
        rows += [("m16n8k64", t, (T.s4, T.u4), 2, 2, (T.s32,), 1), ("m16n8k128", t, (T.s4, T.u4), 4, 4, (T.s32,), 0)]
    for t in (T.e4m3, T.e5m2):
        rows += [("m16n8k64", t, (T.e4m3, T.e5m2), 4, 4, (T.f32,), 0, REQ_SP_FP8)]
    return {(r[0], r[1]): SparseMmaForm(*r) for r in rows}


#: The mma.sp legal-form table: (shape, A type) -> SparseMmaForm.
SPARSE_MMA = _table()


@dataclass(frozen=True)
class SparseMmaInfo:
    """One mma.sp: its row, B and accumulator types, selector and metadata ordering."""

    form: SparseMmaForm
    b_type: T.ScalarType
    acc: T.ScalarType
    selector: int
    ordered: bool
    satfinite: bool = False


def _acc_reg(acc):
    return {T.f32: T.f32, T.f16: T.b32, T.s32: T.s32}[acc]


def mma_sp(d, a, b, c, e, selector, shape, a_type, b_type=None, acc=None, ordered=False, *, satfinite=False):
    """mma.sp{::ordered_metadata}.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype d, a, b, c, e, f
    (.satfinite: integer forms only, clamping the .s32 result instead of wrapping)."""
    form = SPARSE_MMA.get((shape, a_type))
    if form is None:
        legal = ", ".join(f"{s}.{t.name}" for s, t in SPARSE_MMA)
        raise ValidationError(f"mma.sp has no {shape} form for .{a_type.name}; legal: {legal}")
    b_type = b_type or a_type
    if b_type not in form.b_types:
        raise ValidationError(f"mma.sp {shape}.{a_type.name} pairs A with B of "
                              + " or ".join("." + t.name for t in form.b_types) + f", not .{b_type.name}")
    acc = acc or form.acc[0]
    if acc not in form.acc:
        raise ValidationError(f"mma.sp {shape}.{a_type.name} accumulates in "
                              + " or ".join("." + t.name for t in form.acc) + f", not .{acc.name}")
    selector = int_arg(selector, f"mma.sp {shape}.{a_type.name} sparsity selector")
    if not 0 <= selector <= form.max_selector:
        raise ValidationError(f"mma.sp {shape}.{a_type.name} sparsity selector is 0..{form.max_selector}, "
                              f"got {selector!r}")
    frag = T.b32
    dv = check_vec(d, form.c_regs(acc), _acc_reg(acc), "mma.sp d")
    av = check_vec(a, form.a_regs, frag, "mma.sp a")
    bv = check_vec(b, form.b_regs, frag, "mma.sp b")
    cv = check_vec(c, form.c_regs(acc), _acc_reg(acc), "mma.sp c")
    for what, v in (("a", av), ("b", bv)):
        for r in v.regs:
            if isinstance(r, Reg) and r.type.is_float and r.type.lanes == 1:
                raise ValidationError(f"mma.sp {what}: {r} is .{r.type.name}; fragments are .b32 registers")
    check_value(e, T.b32, "mma.sp metadata", imm_ok=False)
    if satfinite and not form.is_integer:
        raise ValidationError(f"mma.sp {shape}.{a_type.name} does not take .satfinite (only integer forms do)")
    req = form.req.merge(REQ_ORDERED) if ordered else form.req
    parts = ("mma", "sp::ordered_metadata" if ordered else "sp", "sync", "aligned", shape, "row", "col",
             "satfinite" if satfinite else "", acc.name, a_type.name, b_type.name, acc.name)
    return make("mma.sp", parts, (dv, av, bv, cv, e, Imm(selector)), n_dst=1, req=req, type=a_type,
                info=SparseMmaInfo(form, b_type, acc, selector, ordered, bool(satfinite)),
                mods=("satfinite",) if satfinite else ())


# ---------------------------------------------------------------- the sparse storage (see the module docstring)

def unit_bits(a_type: T.ScalarType) -> int:
    """Bits of one metadata unit of A: 16 for .f16/.bf16/.tf32, 8 for 8-bit and 4-bit types."""
    return 16 if a_type.bits >= 16 or a_type is T.tf32 else 8


def _stored_bits(a_type: T.ScalarType) -> int:
    return 32 if a_type is T.tf32 else a_type.bits


def chunks_per_row(k: int, a_type: T.ScalarType) -> int:
    """Metadata nibbles per row of a sparse A with K columns (uncompressed): one per chunk of four units."""
    return k * _stored_bits(a_type) // unit_bits(a_type) // 4


def metadata_threads(k: int, a_type: T.ScalarType) -> int:
    """Threads of each group of four that hold the metadata of its two rows: 1, 2 or 4 (the selector ranges
    over 4 / that many values)."""
    return chunks_per_row(k, a_type) // 4


def metadata_layout(k: int, a_type: T.ScalarType, selector: int):
    """(lanes, shifts): int arrays shaped (16 rows, chunks) giving, for each chunk of each of a warp's 16 rows of
    A, the lane whose metadata register holds its nibble and the nibble's bit position there."""
    per = metadata_threads(k, a_type)
    r = np.arange(16)[:, None]
    c = np.arange(chunks_per_row(k, a_type))[None, :]
    if unit_bits(a_type) == 16:  # one thread: four chunks of row g (low half) and of row g + 8 (high half)
        lanes = 4 * (r % 8) + selector * per + c // 4
        shifts = 16 * (r // 8) + 4 * (c % 4)
    else:  # one thread: eight chunks of one row, the pair's first thread row g, its second row g + 8
        lanes = 4 * (r % 8) + selector * per + 2 * (c // 8) + r // 8
        shifts = 4 * (c % 8) + 0 * r
    return np.broadcast_to(lanes, (16, c.size)).copy(), np.broadcast_to(shifts, (16, c.size)).copy()


def nibble_indices(nibbles):
    """(first, second): the positions in its chunk of the two units a metadata nibble keeps."""
    nibbles = np.asarray(nibbles)
    return nibbles & 3, (nibbles >> 2) & 3


def undefined_nibbles(nibbles, a_type: T.ScalarType, ordered: bool):
    """Which metadata nibbles the PTX ISA leaves undefined: two equal indices, for ::ordered_metadata indices
    not ascending, for .tf32 anything but 0b0100 and 0b1110 (a kept element is two adjacent units)."""
    first, second = nibble_indices(nibbles)
    if a_type is T.tf32:
        return ~((first % 2 == 0) & (second == first + 1))
    return (first >= second) if ordered else (first == second)


def expanded_columns(nibbles, k: int, a_type: T.ScalarType):
    """The column of the K-column A that each stored element lands in: nibbles (..., chunks) -> int array
    (..., K / 2) over the compressed row (element p of the A operand's row is column result[..., p])."""
    nibbles = np.asarray(nibbles)
    eb, ub = _stored_bits(a_type), unit_bits(a_type)
    p = np.arange(k // 2)
    unit = p * eb // ub  # the (first) unit element p occupies in the compressed row
    chunk, slot = unit // 2, unit % 2
    first, second = nibble_indices(nibbles[..., chunk])
    where = np.where(slot == 0, first, second)  # the kept unit's position in its chunk
    full_unit = 4 * chunk + where
    if eb >= ub:  # an element of one (or, tf32, two) units
        return full_unit * ub // eb
    per = ub // eb  # elements of one unit (4-bit: two)
    return full_unit * per + p % per


class SparseMmaOps:
    """The builder method for mma.sp."""

    def mma_sp(self, a, b, c, e, *, shape, a_type, b_type=None, acc=None, selector=0, ordered=False, dst=None,
               pred=None, satfinite=False):
        """`mma.sp.sync.aligned.shape.row.col.dtype.atype.btype.ctype d, a, b, c, e, selector`: d = A*B + C
        with A 2:4-sparse (`a` holds its stored half, `e` the .b32 metadata); `ordered=True` writes
        `mma.sp::ordered_metadata` (PTX 8.5); `satfinite=True` clamps integer results.  Returns d (a new
        fragment unless dst= is given)."""
        at = T.lookup(a_type)
        form = SPARSE_MMA.get((shape, at))
        acc_t = T.lookup(acc) if acc is not None else (form.acc[0] if form else T.f32)
        n = form.c_regs(acc_t) if form else 4
        d = Vec(tuple(self._val(r) for r in dst)) if dst is not None else Vec(
            tuple(self.reg(_acc_reg(acc_t) if acc_t in (T.f32, T.f16, T.s32) else T.b32) for _ in range(n)))
        vec = lambda x: Vec(tuple(self._val(r) for r in (x.regs if isinstance(x, Vec) else x)))  # noqa: E731
        self.emit(mma_sp(d, vec(a), vec(b), vec(c), self._val(e), selector, shape, at,
                         T.lookup(b_type) if b_type is not None else None, acc_t, ordered, satfinite=satfinite),
                  pred)
        return d
