"""Sparse warp-level matrix multiply: mma.sp (2:4 structured sparsity in A), sm_80.

Legal forms as data: `SPARSE_MMA` maps (shape, A type) to a `SparseMmaForm` row: the B types it
pairs with, registers per thread of A (half the dense fragment), B and C/D, the accumulator
types and the largest sparsity selector.  Each mma.sp also reads a .b32 metadata register `e`
(which two of every four A elements are stored) and the selector `f` (which threads supply it).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_value, check_vec, make
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

    def c_regs(self, acc) -> int:
        """Registers of a C/D fragment: two .b32 for f16 accumulators, four otherwise."""
        return 2 if acc is T.f16 else 4


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


def _acc_reg(acc):
    return {T.f32: T.f32, T.f16: T.b32, T.s32: T.s32}[acc]


def mma_sp(d, a, b, c, e, selector, shape, a_type, b_type=None, acc=None, ordered=False):
    """mma.sp{::ordered_metadata}.sync.aligned.shape.row.col.dtype.atype.btype.ctype d, a, b, c, e, f."""
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
    if not isinstance(selector, int) or isinstance(selector, bool) or not 0 <= selector <= form.max_selector:
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
    req = REQ_SP.merge(REQ_ORDERED) if ordered else REQ_SP
    parts = ("mma", "sp::ordered_metadata" if ordered else "sp", "sync", "aligned", shape, "row", "col", acc.name,
             a_type.name, b_type.name, acc.name)
    return make("mma.sp", parts, (dv, av, bv, cv, e, Imm(selector)), n_dst=1, req=req, type=a_type,
                info=SparseMmaInfo(form, b_type, acc, selector, ordered))


class SparseMmaOps:
    """The builder method for mma.sp."""

    def mma_sp(self, a, b, c, e, *, shape, a_type, b_type=None, acc=None, selector=0, ordered=False, dst=None,
               pred=None):
        """`mma.sp.sync.aligned.shape.row.col.dtype.atype.btype.ctype d, a, b, c, e, selector`: d = A*B + C
        with A 2:4-sparse (`a` holds its stored half, `e` the .b32 metadata); `ordered=True` writes
        `mma.sp::ordered_metadata` (PTX 8.5).  Returns d (a new fragment unless dst= is given)."""
        at = T.lookup(a_type)
        form = SPARSE_MMA.get((shape, at))
        acc_t = T.lookup(acc) if acc is not None else (form.acc[0] if form else T.f32)
        n = form.c_regs(acc_t) if form else 4
        d = Vec(tuple(self._val(r) for r in dst)) if dst is not None else Vec(
            tuple(self.reg(_acc_reg(acc_t) if acc_t in (T.f32, T.f16, T.s32) else T.b32) for _ in range(n)))
        vec = lambda x: Vec(tuple(self._val(r) for r in (x.regs if isinstance(x, Vec) else x)))  # noqa: E731
        self.emit(mma_sp(d, vec(a), vec(b), vec(c), self._val(e), selector, shape, at,
                         T.lookup(b_type) if b_type is not None else None, acc_t, ordered), pred)
        return d
