"""Lean emission for the GEMM kernel's bulk instructions.

Most of the kernel is a few hundred instructions of three or four kinds (accumulator zeroing,
nibble unpacking, mma, the final shift and stores).  These helpers build each instruction with
the ISA family's own constructor, which checks every operand against the legal-form table, and
hand it to `KernelBuilder.emit`, skipping the convenience layer (type inference, operand
coercion, destination allocation by keyword) that the builder's methods add.  Emission of the
reference kernel must stay within its time budget (bench/gemm_bench.py measures it).
"""

from __future__ import annotations

from ...isa import types as T
from ...isa.arith import arith
from ...isa.bits import logic, shift
from ...isa.control import mov
from ...isa.memory import ld, st
from ...isa.operands import Addr, Imm, Vec
from ...isa.tensor import mma, mma_form

# instructions are attributed to the schedule line that called these helpers
_PTXFORGE_INTERNAL = True

_SHIFT = {n: Imm(n, T.u32) for n in range(32)}
_ZERO = Imm(0, T.s32)


def zero(k, regs) -> None:
    """mov.s32 r, 0 for every register."""
    emit = k.emit
    for r in regs:
        emit(mov(T.s32, r, _ZERO))


def and_imm(k, x, mask: int, d=None):
    """d = x & mask (a new register unless d is given; d may be x itself)."""
    d = d if d is not None else k.reg(T.b32)
    k.emit(logic("and", T.b32, d, (x, Imm(mask, T.b32))))
    return d


def shl(k, x, n: int, d=None):
    """d = x << n (shl.b32; a new register unless d is given)."""
    d = d if d is not None else k.reg(T.b32)
    k.emit(shift("shl", T.b32, d, x, _SHIFT[n]))
    return d


def shr_u32(k, x, n: int, d=None):
    """d = x >> n, logical (shr.u32; a new register unless d is given)."""
    d = d if d is not None else k.reg(T.b32)
    k.emit(shift("shr", T.u32, d, x, _SHIFT[n]))
    return d


def shr_s32_in_place(k, regs, n: int) -> None:
    """r = r >> n, arithmetic (shr.s32), for every register."""
    emit = k.emit
    s = _SHIFT[n]
    for r in regs:
        emit(shift("shr", T.s32, r, r, s))


def add_u32(k, a, b, d=None):
    """d = a + b (add.u32 of two registers; a new register unless d is given)."""
    d = d if d is not None else k.reg(T.u32)
    k.emit(arith("add", T.u32, d, (a, b)))
    return d


def ld_shared_b32(k, addr: Addr, d=None):
    """d = the 32-bit word at shared `addr` (ld.shared.b32; a new register unless d is given)."""
    d = d if d is not None else k.reg(T.b32)
    k.emit(ld(T.b32, d, addr, "shared"))
    return d


def mad_u32(k, a, b: int, c, d=None):
    """d = a*b + c (low 32 bits)."""
    d = d if d is not None else k.reg(T.b32)
    k.emit(arith("mad", T.u32, d, (a, Imm(b, T.u32), c), mode="lo"))
    return d


class MmaIssuer:
    """mma.sync D += A*B of one legal form, accumulating in place."""

    def __init__(self, k, shape: str, ab_type: str):
        self.k = k
        self.form = mma_form(shape, ab_type)

    def __call__(self, a, b, acc) -> None:
        self.k.emit(mma(self.form, acc, Vec(tuple(a)), Vec(tuple(b)), acc))


def st_global_b32(k, base, offset: int, values, pred=None) -> None:
    """st.global.b32 (one value) or st.global.v2.b32 (a pair) at [base + offset]."""
    vals = Vec(tuple(values)) if len(values) > 1 else values[0]
    k.emit(st(T.b32, Addr(base, offset), vals, "global", len(values)), pred)
