"""The instruction value and the checks every family shares.

An `Instruction` is immutable data: its mnemonic, its operands in PTX order,
how many leading operands it writes, an optional guard, the requirement of its
form (least arch / PTX ISA) and a family-specific `info` record that carries
its semantics (the interpreter and the resource checks read it).  Rendering
is a pure function of these fields.
"""

from __future__ import annotations

import numbers
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SourceLoc, ValidationError, caller_loc
from . import types as T
from .operands import Addr, Guard, Imm, Label, Operand, Reg, SpecialReg, Symbol, SymbolOffset, Vec
from .quick_init import quick_init
from .targets import BASE, Requirement
from .types import ScalarType

_PTXFORGE_INTERNAL = True


@quick_init
@dataclass(frozen=True, slots=True)
class Instruction:
    """One checked PTX instruction, immutable: what a `KernelBuilder` appends and a `Module` renders.

    Attributes:
        opcode: the family key used for dispatch ("add", "mma", "cp.async", "ld" ...).
        mnemonic: the full spelling, e.g. ``mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32``.
        operands: the operands in PTX order, destinations first.
        n_dst: how many leading operands are written.
        guard: the ``@p`` / ``@!p`` guard, or None.
        req: the least target and PTX ISA version the instruction needs (a `Requirement`).
        info: family-specific semantics for the interpreter (a form, a MemInfo ...).
        mods: the modifiers, for semantic dispatch ("lo", "wide", "cg" ...).
        type: the instruction's type, where it has one.
        loc: the Python line that asked for it.
        comment: a comment rendered after it, or None.
    """
    opcode: str  # family dispatch key: "add", "mma", "cp.async", "ld", ...
    mnemonic: str  # full spelling: "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
    operands: tuple = ()
    n_dst: int = 0  # operands[:n_dst] are written
    guard: Guard | None = None
    req: Requirement = BASE
    info: Any = None
    mods: tuple = ()  # modifiers, for semantic dispatch ("lo", "wide", "cg", ...)
    type: ScalarType | None = None  # the instruction type where there is one
    loc: SourceLoc | None = field(default=None, compare=False)
    comment: str | None = field(default=None, compare=False)

    def render(self) -> str:
        """The PTX line: ``{@guard} mnemonic operands;`` with the mnemonic padded to a column."""
        head = self.mnemonic if self.guard is None else f"{self.guard} {self.mnemonic}"
        ops = self.operands
        if not ops:
            return head + ";"
        # a register is most operands: spelled here rather than through its __str__
        return head.ljust(15) + " " + ", ".join(["%" + o.name if type(o) is Reg else str(o) for o in ops]) + ";"

    def __str__(self) -> str:
        return self.render()

    # Direct construction: dataclasses.replace() costs several times more on the emit path.
    def with_guard(self, guard: Guard | None) -> "Instruction":
        """A copy of this instruction under `guard` (a `Guard`, or None for none)."""
        return Instruction(self.opcode, self.mnemonic, self.operands, self.n_dst, guard, self.req, self.info,
                           self.mods, self.type, self.loc, self.comment)

    def with_loc(self, loc: SourceLoc | None) -> "Instruction":
        """A copy of this instruction attributed to the Python line `loc`."""
        return Instruction(self.opcode, self.mnemonic, self.operands, self.n_dst, self.guard, self.req, self.info,
                           self.mods, self.type, loc, self.comment)

    @property
    def dsts(self) -> tuple:
        """The operands the instruction writes (the first `n_dst`)."""
        return self.operands[: self.n_dst]

    @property
    def srcs(self) -> tuple:
        """The operands the instruction reads (all after the destinations)."""
        return self.operands[self.n_dst:]

    def registers(self):
        """Every register this instruction names (operands, address bases, guard)."""
        out = []
        for op in self.operands:
            cls = type(op)
            if cls is Reg:  # the common cases first: this runs for every emitted instruction
                out.append(op)
            elif cls is Vec:
                for r in op.regs:
                    if type(r) is Reg:
                        out.append(r)
                    else:
                        out.extend(_regs_of(r))
            elif cls is Imm or cls is Label:
                continue
            else:
                out.extend(_regs_of(op))
        if self.guard is not None:
            out.append(self.guard.reg)
        return out

    def written_registers(self) -> list:
        """The registers this instruction writes (those its destinations name)."""
        return [r for d in self.dsts for r in _regs_of(d)]


def _regs_of(op):
    if isinstance(op, Reg):
        yield op
    elif isinstance(op, Vec):
        for r in op.regs:
            yield from _regs_of(r)
    elif isinstance(op, Addr):
        if isinstance(op.base, Reg):
            yield op.base
    elif hasattr(op, "reg"):  # NegPred, PairDst
        yield from _regs_of(op.reg)
        if getattr(op, "pred", None) is not None:
            yield op.pred
    elif hasattr(op, "coords"):
        yield from _regs_of(op.tmap)
        for c in op.coords:
            yield from _regs_of(c)


# ---------------------------------------------------------------- shared checks

def describe(op) -> str:
    """An operand as error messages show it: a register with its type (``%r1 (.u32)``), an immediate as
    "immediate N".
    """
    if isinstance(op, Reg):
        return f"{op} (.{op.type.name})"
    if isinstance(op, Imm):
        return f"immediate {op}"
    return str(op)


def check_value(op, t: ScalarType, what: str, *, imm_ok: bool = True, wide_ok: bool = False) -> None:
    """An operand read or written as type `t`: a compatible register or (if allowed) an immediate."""
    if type(op) is Reg and op.type is t:
        return
    if isinstance(op, (Reg, SpecialReg)):
        rt = op.type
        if T.compatible(t, rt):
            return
        # ld/st/cvt may use a register wider than the instruction's integer/bit type
        if wide_ok and not (rt.is_pred or t.is_pred) and rt.bits > t.bits and (
                rt.kind == "b" or not (rt.is_float or t.is_float)):
            return
        raise ValidationError(
            f"{what}: {describe(op)} cannot be used as .{t.name}; "
            f"it needs a {t.bits}-bit register of a compatible type"
            + (f" (.b{t.bits})" if t.is_int and t.lanes > 1 else " (.b/.u/.s)" if t.is_int
               else f" (.{t.name} or .b{t.bits})" if t.is_float else ""))
    if isinstance(op, Imm):
        if not imm_ok:
            raise ValidationError(f"{what}: an immediate ({op}) is not allowed here; use a register")
        if isinstance(op.value, bool) and not t.is_pred:
            raise ValidationError(f"{what}: {op.value} is a bool, and a .{t.name} operand takes a number: write "
                                  f"1 or 0 (True and False are immediates of .pred operands only)")
        if not op.fits(t):
            raise ValidationError(f"{what}: immediate {op.value} does not fit .{t.name}")
        return
    if isinstance(op, (Symbol, SymbolOffset)) and imm_ok and t.bits in (32, 64) and not t.is_float:
        return  # address of a variable (plus an offset) used as a value (mov.u32 %r, tile)
    if isinstance(op, Vec):
        raise ValidationError(f"{what}: {not_a_scalar(op)}")
    raise ValidationError(f"{what}: expected a .{t.name} register{' or immediate' if imm_ok else ''}, "
                          f"got {op!r}")


def not_a_scalar(v: Vec) -> str:
    """Why a brace list (a vector load's result) cannot stand where one value belongs, and what can."""
    return (f"{v} is a vector of {len(v)} registers (what a vector ld returns), not one value: use one of "
            f"its elements, v[0] .. v[{len(v) - 1}]")


def check_sources(opcode: str, srcs, t: ScalarType, *, imm_ok: bool = True) -> None:
    """`check_value` of each source of `opcode` read as `t`, named "opcode source i" in a message; the name
    is spelled only for an operand that is not simply a register of type `t` (this runs for most
    instructions)."""
    for i, s in enumerate(srcs):
        if type(s) is not Reg or s.type is not t:
            check_value(s, t, f"{opcode} source {i + 1}", imm_ok=imm_ok)


def check_dst(op, t: ScalarType, what: str, *, wide_ok: bool = False) -> None:
    """Raise a ValidationError unless `op` is a register that can be written as type `t`; `what` names it in the
    message.
    """
    if not isinstance(op, Reg):
        raise ValidationError(f"{what}: the destination must be a register, got {op!r}")
    check_value(op, t, what, imm_ok=False, wide_ok=wide_ok)


def check_pred(op, what: str) -> None:
    """Raise a ValidationError unless `op` is a .pred register; `what` names it in the message."""
    if not isinstance(op, Reg) or not op.type.is_pred:
        raise ValidationError(f"{what}: expected a .pred register, got {describe(op) if op is not None else None}")


def check_vec(op, n: int, t: ScalarType, what: str, *, imm_ok: bool = False, wide_ok: bool = False) -> Vec:
    """A brace list of exactly n registers, each compatible with t."""
    regs = op.regs if isinstance(op, Vec) else tuple(op) if isinstance(op, (list, tuple)) else (op,)
    if len(regs) != n:
        raise ValidationError(f"{what}: needs {n} register{'s' if n != 1 else ''} of .{t.name}, "
                              f"got {len(regs)}")
    for i, r in enumerate(regs):
        if type(r) is not Reg or r.type is not t:  # (a wgmma names up to 128 registers: the name only if needed)
            check_value(r, t, f"{what}[{i}]", imm_ok=imm_ok, wide_ok=wide_ok)
    return op if isinstance(op, Vec) else Vec(tuple(regs))


def check_addr(op, space: str, what: str) -> Addr:
    """A memory operand for `space`; global addresses need a 64-bit register base."""
    if isinstance(op, (Reg, Symbol)):
        op = Addr(op)
    if not isinstance(op, Addr):
        raise ValidationError(f"{what}: expected an address [reg+offset] or a variable, got {op!r}")
    base = op.base
    if isinstance(base, Reg):
        if base.type.is_pred or base.type.is_float or base.type.bits not in (32, 64):
            raise ValidationError(f"{what}: address base {describe(base)} must be a 32- or 64-bit integer register")
        if space in ("global", "generic", "") and base.type.bits != 64:
            raise ValidationError(
                f"{what}: {'generic' if space in ('generic', '') else space} addresses are 64-bit; "
                f"{describe(base)} is {base.type.bits}-bit (a 32-bit register works only for .shared/.param/.local)")
    elif isinstance(base, Symbol):
        if space not in ("", "generic") and base.space != space and not (
                base.space == "shared" and space.startswith("shared")):
            raise ValidationError(f"{what}: variable {base.name} lives in .{base.space}, not .{space}")
    return op


def imm(value, t: ScalarType | None = None) -> Imm:
    """`value` as an `Imm` of type `t` (an Imm is returned as it is)."""
    return value if isinstance(value, Imm) else Imm(value, t)


def int_arg(x, what: str, reg: str | None = None):
    """An integer argument of a constructor or builder method (a count, size, mask, id, rank, field ...): `x` as
    a Python int when it is a Python or numpy integer (`T.is_integer`).  `reg` names the register `x` may be
    instead (".u32"), or is None where only an int is legal; where it is given, anything not a number (a
    register, an operand) comes back as None for the caller to check as a register.  A bool (Python's or
    numpy's), a float or another number is refused naming `what` and what is legal: True is no count, and
    2.0 no size."""
    if type(x) is int:  # the common case, kept cheap: emitting a GEMM kernel asks this thousands of times
        return x
    if isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_)):
        return int(x)
    if reg is not None and not isinstance(x, (numbers.Number, np.bool_)):
        return None
    legal = "an int" if reg is None else f"an int or a {reg} register"
    raise ValidationError(f"{what} takes {legal}, not {x!r} ({type(x).__name__})")


def int_or_val(val, x, what: str, reg: str = ".u32", t: ScalarType | None = None):
    """A builder method's integer-or-register argument as its constructor takes it: an integer as an int
    (`int_arg`), None as None, anything else through the builder's `val` (its `_val`, with type `t` where
    given)."""
    if type(x) is int or x is None:
        return x
    n = int_arg(x, what, reg)
    if n is not None:
        return n
    return val(x) if t is None else val(x, t)


def as_operand(x, t: ScalarType | None = None):
    """Python ints/floats become immediates; operands pass through."""
    if isinstance(x, Imm) and x.type is None and t is not None and t.is_float:
        # an untyped literal read by a float instruction must be spelled as a float (0f.../0d...)
        return Imm(x.value, t)
    if isinstance(x, (Operand, Guard)):
        return x
    if isinstance(x, (bool, np.bool_)):  # Python's or numpy's: kept a bool, for check_value to refuse where not .pred
        return Imm(bool(x), t)
    if not isinstance(x, (int, float)):
        if isinstance(x, numbers.Integral):  # numpy integer scalars are integers
            x = int(x)
        elif isinstance(x, numbers.Real):  # numpy float scalars
            x = float(x)
    if isinstance(x, (int, float)):
        imm = Imm(x, t if t is not None and (t.is_float or isinstance(x, int)) else None)
        if isinstance(x, float) and imm.type is not None and not imm.fits(imm.type):
            raise ValidationError(f"the float immediate {x!r} is outside the range of .{imm.type.name}")
        return imm
    raise ValidationError(f"cannot use {x!r} ({type(x).__name__}) as a PTX operand")


_INT_IMMS: dict = {}


def int_imm(x: int, t: ScalarType | None = None) -> Imm:
    """`as_operand(x, t)` for a Python int (not a bool), kept: a kernel reads the same few constants over
    and over, and an immediate is immutable, so one object per (value, type) serves them all."""
    key = (x, t)
    found = _INT_IMMS.get(key)
    if found is None:
        found = as_operand(x, t)
        if len(_INT_IMMS) < 8192:  # distinct constants are few; the bound only guards odd callers
            _INT_IMMS[key] = found
    return found


_MNEMONICS: dict = {}

#: distinct forms a family keeps (`checked_form`); the bound only guards odd callers
_FORMS_KEPT = 4096


def checked_form(forms: dict, key: tuple, check):
    """What `check(*key)` makes of an instruction form, kept in the family's `forms` dict: a kernel asks for a
    few forms (type, modes, modifiers ...) many times, and a check that reads only the key needs to run once
    per form, while the operands are checked on every call.  A form that fails raises every time; a key
    that does not hash is checked without being kept."""
    try:
        got = forms.get(key)
    except TypeError:
        return check(*key)
    if got is None:
        got = check(*key)
        if len(forms) < _FORMS_KEPT:
            forms[key] = got
    return got
_LOCATING = threading.local()  # .off: make() records no Python line (the caller sets the location)


@contextmanager
def unlocated():
    """Instructions made inside this block carry no Python source line: for callers that set the
    location themselves (the PTX reader gives each instruction its file:line)."""
    prev = getattr(_LOCATING, "off", False)
    _LOCATING.off = True
    try:
        yield
    finally:
        _LOCATING.off = prev


def make(opcode: str, parts, operands=(), *, n_dst=0, req=BASE, info=None, mods=(), type=None,
         guard=None) -> Instruction:
    """Build an Instruction whose mnemonic is the dot-joined parts (empty parts skipped).

    The instruction records the Python line that asked for it here, once, so that emitting it
    needs no second copy.
    """
    if parts.__class__ is not tuple:  # (`type` is a parameter here)
        parts = tuple(parts)
    mnemonic = _MNEMONICS.get(parts)
    if mnemonic is None:
        mnemonic = ".".join([p.lstrip(".") for p in parts if p])
        if len(_MNEMONICS) < 65536:  # distinct forms are few; the bound only guards odd callers
            _MNEMONICS[parts] = mnemonic
    return Instruction(opcode, mnemonic, tuple(operands), n_dst, guard, req, info, tuple(mods), type,
                       None if getattr(_LOCATING, "off", False) else caller_loc())
