"""Integer instructions outside the ARITH table: extended-precision carry chains (add.cc, addc,
sub.cc, subc, mad.cc, madc) and the packed dot products dp4a / dp2a.

Legal forms as data: `CARRY_FORMS` (opcode -> whether it reads the carry, whether it always
writes it, and its integer modes) and `DOT_FORMS` (opcode -> its halves modes).  A carry chain
passes the carry flag `CC.CF` from one instruction to the next through the condition-code
register, which PTX does not name as an operand: `add.cc` writes it, `addc` reads it,
`addc.cc` does both.  For subtraction the flag is a borrow (`subc`: d = a - (b + CF)).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_value, make
from .operands import Reg, SpecialReg
from .targets import BASE

_PTXFORGE_INTERNAL = True

CARRY_TYPES = (T.u32, T.s32, T.u64, T.s64)


@dataclass(frozen=True)
class CarryForm:
    """One carry-chain opcode.

    Fields:
        opcode: the PTX opcode (`add`, `addc`, ...).
        arity: the number of sources.
        carry_in: whether it adds the carry flag (addc, subc, madc).
        modes: the product halves it takes (`lo`, `hi`: mad.cc/madc only), written before `.cc`.
    """

    opcode: str
    arity: int
    carry_in: bool
    modes: tuple = ()


#: The carry-chain table.  The `.cc` suffix (writes CC.CF) is obligatory for add/sub/mad
#: (without it they are ordinary ARITH forms) and optional for addc/subc/madc.
CARRY_FORMS = {
    "add": CarryForm("add", 2, False),
    "addc": CarryForm("addc", 2, True),
    "sub": CarryForm("sub", 2, False),
    "subc": CarryForm("subc", 2, True),
    "mad": CarryForm("mad", 3, False, ("lo", "hi")),
    "madc": CarryForm("madc", 3, True, ("lo", "hi")),
}


@dataclass(frozen=True)
class CarryInfo:
    """Semantics of one carry-chain instruction: the operation, the product half, and which
    ends of the chain it touches."""

    op: str  # "add" / "sub" / "mad"
    mode: str | None
    carry_in: bool
    carry_out: bool


def carry(opcode, t, d, srcs, cc=True, mode=None):
    """`add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}`, `mad{.lo,.hi}.cc`, `madc{.lo,.hi}{.cc}` (pure)."""
    form = CARRY_FORMS.get(opcode)
    if form is None:
        raise ValidationError(f"unknown carry-chain opcode {opcode!r}; one of {', '.join(CARRY_FORMS)}")
    if t not in CARRY_TYPES:
        raise ValidationError(f"{opcode} with a carry takes " + ", ".join("." + x.name for x in CARRY_TYPES)
                              + f", not .{t.name}")
    if not form.carry_in and not cc:
        raise ValidationError(f"{opcode} without .cc is the ordinary instruction; use k.{opcode}()")
    if len(srcs) != form.arity:
        raise ValidationError(f"{opcode} takes {form.arity} source operand(s), got {len(srcs)}")
    if form.modes:
        mode = mode or "lo"
        if mode not in form.modes:
            raise ValidationError(f"{opcode} takes .lo or .hi (the half of the product it adds), got .{mode}")
    elif mode is not None:
        raise ValidationError(f"{opcode} takes no mode, got .{mode}")
    check_dst(d, t, f"{opcode} destination")
    for i, s in enumerate(srcs):
        check_value(s, t, f"{opcode} source {i + 1}")
    op = opcode.rstrip("c") if form.carry_in else opcode
    parts = (opcode, mode, "cc" if cc else None, t.name)
    key = f"{op}.carry"
    return make(key, parts, (d, *srcs), n_dst=1, type=t, req=BASE,
                info=CarryInfo(op, mode, form.carry_in, cc), mods=tuple(m for m in (mode, "cc" if cc else None) if m))


# ---------------------------------------------------------------- dp4a / dp2a

#: dp4a: four 8-bit products; dp2a: two 16x8-bit products of a's halves with b's low (.lo) or
#: high (.hi) two bytes.  Source types .u32/.s32 each say how a's and b's parts are extended.
DOT_FORMS = {"dp4a": (None,), "dp2a": ("lo", "hi")}
DOT_TYPES = (T.u32, T.s32)


@dataclass(frozen=True)
class DotInfo:
    """Semantics of one dp4a/dp2a: the opcode, .lo/.hi, and the two source types."""

    op: str
    mode: str | None
    a_type: T.ScalarType
    b_type: T.ScalarType


def dot(opcode, a_type, b_type, d, a, b, c, mode=None):
    """`dp4a.atype.btype d, a, b, c` / `dp2a.{lo,hi}.atype.btype d, a, b, c` (pure)."""
    if opcode not in DOT_FORMS:
        raise ValidationError(f"unknown dot product {opcode!r}; one of {', '.join(DOT_FORMS)}")
    modes = DOT_FORMS[opcode]
    if mode not in modes:
        raise ValidationError(f"{opcode} takes " + ("no mode" if modes == (None,) else ".lo or .hi (which two bytes "
                              "of b it reads)") + f", got {mode!r}")
    for what, x in (("a", a_type), ("b", b_type)):
        if x not in DOT_TYPES:
            raise ValidationError(f"{opcode} source type for {what} is .u32 or .s32, not .{x.name}")
    signed = T.s32 if T.s32 in (a_type, b_type) else T.u32
    check_dst(d, signed, f"{opcode} destination")
    check_value(a, a_type, f"{opcode} source a")
    check_value(b, b_type, f"{opcode} source b")
    check_value(c, signed, f"{opcode} addend c")
    return make(opcode, (opcode, mode, a_type.name, b_type.name), (d, a, b, c), n_dst=1, type=signed,
                info=DotInfo(opcode, mode, a_type, b_type), mods=(mode,) if mode else ())


def _default_dot_type(x) -> T.ScalarType:
    """The source type dp4a/dp2a read `x` as when none is given: .s32 for a signed register, else .u32 (an
    immediate has no register type, so its bytes read unsigned unless a_type/b_type says .s32)."""
    return T.s32 if isinstance(x, (Reg, SpecialReg)) and x.type.kind == "s" else T.u32


class IntegerOps:
    """Builder methods for carry chains and packed dot products.  Each returns the destination."""

    def _carry(self, opcode, srcs, type, cc, mode, dst, pred):
        from .arith import infer_type
        srcs = [self._val(s) for s in srcs]
        t = infer_type(type, *srcs)
        if t.kind == "b" and type is None:
            t = t.as_unsigned()
        srcs = [self._val(s, t) for s in srcs]
        d = self._dst(dst, t)
        self.emit(carry(opcode, t, d, srcs, cc, mode), pred)
        return d

    def add_cc(self, a, b, *, type=None, dst=None, pred=None):
        """`add.cc.type d, a, b`: d = a + b, and the carry out into the condition code (CC.CF).

        Starts a multi-word addition; continue it with `addc` (u32, s32, u64, s64)."""
        return self._carry("add", (a, b), type, True, None, dst, pred)

    def addc(self, a, b, *, cc=False, type=None, dst=None, pred=None):
        """`addc{.cc}.type d, a, b`: d = a + b + CC.CF; cc=True also writes the carry out."""
        return self._carry("addc", (a, b), type, cc, None, dst, pred)

    def sub_cc(self, a, b, *, type=None, dst=None, pred=None):
        """`sub.cc.type d, a, b`: d = a - b, and the borrow out into CC.CF."""
        return self._carry("sub", (a, b), type, True, None, dst, pred)

    def subc(self, a, b, *, cc=False, type=None, dst=None, pred=None):
        """`subc{.cc}.type d, a, b`: d = a - (b + CC.CF); cc=True also writes the borrow out."""
        return self._carry("subc", (a, b), type, cc, None, dst, pred)

    def mad_cc(self, a, b, c, *, mode="lo", type=None, dst=None, pred=None):
        """`mad.{lo,hi}.cc.type d, a, b, c`: d = (a*b).half + c, the carry out into CC.CF."""
        return self._carry("mad", (a, b, c), type, True, mode, dst, pred)

    def madc(self, a, b, c, *, mode="lo", cc=False, type=None, dst=None, pred=None):
        """`madc.{lo,hi}{.cc}.type d, a, b, c`: d = (a*b).half + c + CC.CF; cc=True writes the carry."""
        return self._carry("madc", (a, b, c), type, cc, mode, dst, pred)

    def _dot(self, opcode, a, b, c, a_type, b_type, mode, dst, pred):
        at, bt = (T.lookup(given) if given is not None else _default_dot_type(x)
                  for given, x in ((a_type, a), (b_type, b)))
        out = T.s32 if T.s32 in (at, bt) else T.u32
        d = self._dst(dst, out)
        self.emit(dot(opcode, at, bt, d, self._val(a, at), self._val(b, bt), self._val(c, out), mode), pred)
        return d

    def dp4a(self, a, b, c, *, a_type=None, b_type=None, dst=None, pred=None):
        """`dp4a.atype.btype d, a, b, c`: c plus the four products of a's and b's bytes, each byte
        sign- or zero-extended by its source type (default: .s32 for an .s32 register, else .u32: an
        immediate's bytes read unsigned unless a_type/b_type says .s32).  Any of a, b, c may be an
        immediate.  d is .s32 when either source is signed, else .u32."""
        return self._dot("dp4a", self._val(a), self._val(b), c, a_type, b_type, None, dst, pred)

    def dp2a(self, a, b, c, *, mode="lo", a_type=None, b_type=None, dst=None, pred=None):
        """`dp2a.{lo,hi}.atype.btype d, a, b, c`: c plus the two products of a's 16-bit halves with
        b's bytes 0-1 (.lo) or 2-3 (.hi); extension and d's type as for dp4a."""
        return self._dot("dp2a", self._val(a), self._val(b), c, a_type, b_type, mode, dst, pred)
