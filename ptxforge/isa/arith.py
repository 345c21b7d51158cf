"""Integer and floating-point arithmetic: add sub mul mad fma div rem abs neg min max, and the
float-only rcp sqrt rsqrt ex2 lg2 sin cos.

Legal forms as data: ``ARITH`` maps each opcode to the types it takes and the
modifiers each kind of type allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_value, make
from .operands import Reg, SpecialReg
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

INT = (T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)
FLT = (T.f32, T.f64)
HALF = (T.f16, T.f16x2, T.bf16, T.bf16x2)
ROUND = ("rn", "rz", "rm", "rp")


@dataclass(frozen=True)
class ArithForm:
    opcode: str
    types: tuple
    arity: int  # number of source operands
    int_modes: tuple = ()  # "lo"/"hi"/"wide" for mul/mad, "sat" for add/sub
    float_mods: tuple = ()  # rounding / approx / ftz flags allowed for floats
    float_round_required: bool = False


#: The legal-form table of this family.
ARITH = {
    "add": ArithForm("add", INT + FLT + HALF, 2, ("sat",), ROUND + ("ftz", "sat")),
    "sub": ArithForm("sub", INT + FLT + HALF, 2, ("sat",), ROUND + ("ftz", "sat")),
    "mul": ArithForm("mul", INT + FLT + HALF, 2, ("lo", "hi", "wide"), ROUND + ("ftz", "sat")),
    "mad": ArithForm("mad", INT + FLT, 3, ("lo", "hi", "wide"), ROUND + ("ftz", "sat"), True),
    "fma": ArithForm("fma", FLT + HALF, 3, (), ROUND + ("ftz", "sat"), True),
    "div": ArithForm("div", INT + FLT, 2, (), ROUND + ("approx", "full", "ftz"), True),
    "rem": ArithForm("rem", INT, 2),
    "abs": ArithForm("abs", (T.s16, T.s32, T.s64) + FLT + HALF, 1, (), ("ftz",)),
    "neg": ArithForm("neg", (T.s16, T.s32, T.s64) + FLT + HALF, 1, (), ("ftz",)),
    "min": ArithForm("min", INT + FLT + HALF, 2, (), ("ftz", "NaN")),
    "max": ArithForm("max", INT + FLT + HALF, 2, (), ("ftz", "NaN")),
    "rcp": ArithForm("rcp", FLT, 1, (), ROUND + ("approx", "ftz"), True),
    "sqrt": ArithForm("sqrt", FLT, 1, (), ROUND + ("approx", "ftz"), True),
    "rsqrt": ArithForm("rsqrt", FLT, 1, (), ("approx", "ftz"), True),
    "ex2": ArithForm("ex2", (T.f32,), 1, (), ("approx", "ftz"), True),
    "lg2": ArithForm("lg2", (T.f32,), 1, (), ("approx", "ftz"), True),
    "sin": ArithForm("sin", (T.f32,), 1, (), ("approx", "ftz"), True),
    "cos": ArithForm("cos", (T.f32,), 1, (), ("approx", "ftz"), True),
}

_DEFAULT_FLOAT_MODE = {"mad": "rn", "fma": "rn", "div": "rn", "rcp": "rn", "sqrt": "rn",
                       "rsqrt": "approx", "ex2": "approx", "lg2": "approx", "sin": "approx",
                       "cos": "approx"}


def infer_type(t, *ops):
    """The explicit type, else the type of the first register operand."""
    if t is not None:
        return T.lookup(t)
    for op in ops:
        if isinstance(op, (Reg, SpecialReg)):
            return op.type
    raise ValidationError("cannot tell the operation's type from immediates alone; pass type=")


def arith(opcode: str, t: T.ScalarType, d, srcs, mode=None, flags=()):
    """Build and check one arithmetic instruction (pure: no builder)."""
    form = ARITH[opcode]
    if t not in form.types:
        raise ValidationError(f"{opcode} does not take .{t.name}; legal types: "
                              + ", ".join("." + x.name for x in form.types))
    if len(srcs) != form.arity:
        raise ValidationError(f"{opcode} takes {form.arity} source operand(s), got {len(srcs)}")
    mods = []
    flags = tuple(flags)
    if t.is_float:
        if mode is None:
            mode = _DEFAULT_FLOAT_MODE.get(opcode) if (form.float_round_required and t in FLT) else None
        for m in ((mode,) if mode else ()) + flags:
            if m not in form.float_mods:
                raise ValidationError(f"{opcode}.{t.name} does not take .{m}; allowed: "
                                      + ", ".join("." + x for x in form.float_mods))
        if opcode == "div" and t is T.f64 and mode in ("approx", "full"):
            raise ValidationError("div.f64 takes a rounding mode (.rn/.rz/.rm/.rp), not .approx/.full")
        mods = [m for m in ((mode,) if mode else ()) + flags]
    else:
        if opcode in ("mul", "mad"):
            mode = mode or "lo"
            if mode not in form.int_modes:
                raise ValidationError(f"{opcode} on integers takes .lo, .hi or .wide, got .{mode}")
            if mode == "wide" and t.bits == 64:
                raise ValidationError(f"{opcode}.wide doubles the width: it takes 16- or 32-bit sources, not .{t.name}")
            mods = [mode]
        elif mode is not None:
            if mode not in form.int_modes:
                raise ValidationError(f"{opcode}.{t.name} does not take .{mode}")
            if mode == "sat" and t is not T.s32:
                raise ValidationError(f"{opcode}.sat exists only for .s32, not .{t.name}")
            mods = [mode]
        if flags:
            raise ValidationError(f"{opcode} on integers takes no flags, got {flags}")
    wide = "wide" in mods
    dt = T.lookup(f"{t.kind}{t.bits * 2}") if wide else t
    check_dst(d, dt, f"{opcode} destination")
    for i, s in enumerate(srcs):
        src_t = dt if (opcode == "mad" and wide and i == 2) else t
        check_value(s, src_t, f"{opcode} source {i + 1}")
    req = Requirement()
    if t in (T.bf16, T.bf16x2):
        req = Requirement(90 if opcode in ("add", "sub", "mul") else 80,
                          V("7.8") if opcode in ("add", "sub", "mul") else V("7.0"))
    return make(opcode, (opcode, *mods, t.name), (d, *srcs), n_dst=1, mods=tuple(mods), type=t, req=req)


class ArithOps:
    """Builder methods for arithmetic.  Each returns the destination register."""

    def _arith(self, opcode, srcs, type, mode, dst, pred, flags=()):
        srcs = [self._val(s) for s in srcs]
        t = infer_type(type, *srcs)
        if t.kind == "b" and type is None:
            t = t.as_unsigned()  # untyped bits do arithmetic as unsigned
        srcs = [self._val(s, t) if not isinstance(s, (Reg, SpecialReg)) else s for s in srcs]
        wide = mode == "wide"
        if wide and t.kind in ("u", "s", "b") and t.bits <= 32:
            dt = T.lookup(f"{'s' if t.kind == 's' else 'u'}{t.bits * 2}")
        else:
            dt = t
        d = self._dst(dst, dt)
        self.emit(arith(opcode, t, d, srcs, mode, flags), pred)
        return d

    def add(self, a, b, *, type=None, mode=None, dst=None, pred=None):
        return self._arith("add", (a, b), type, mode, dst, pred)

    def sub(self, a, b, *, type=None, mode=None, dst=None, pred=None):
        return self._arith("sub", (a, b), type, mode, dst, pred)

    def mul(self, a, b, *, type=None, mode=None, dst=None, pred=None):
        """Integers: mode 'lo' (default), 'hi' or 'wide'; floats: rounding mode."""
        return self._arith("mul", (a, b), type, mode, dst, pred)

    def mad(self, a, b, c, *, type=None, mode=None, dst=None, pred=None):
        """a*b + c.  Integers: mode 'lo' (default), 'hi' or 'wide' (c and d are double width)."""
        return self._arith("mad", (a, b, c), type, mode, dst, pred)

    def fma(self, a, b, c, *, type=None, mode=None, dst=None, pred=None):
        return self._arith("fma", (a, b, c), type, mode, dst, pred)

    def div(self, a, b, *, type=None, mode=None, dst=None, pred=None):
        return self._arith("div", (a, b), type, mode, dst, pred)

    def rem(self, a, b, *, type=None, dst=None, pred=None):
        return self._arith("rem", (a, b), type, None, dst, pred)

    def abs(self, a, *, type=None, dst=None, pred=None):
        return self._arith("abs", (a,), type, None, dst, pred)

    def neg(self, a, *, type=None, dst=None, pred=None):
        return self._arith("neg", (a,), type, None, dst, pred)

    def min(self, a, b, *, type=None, dst=None, pred=None):
        return self._arith("min", (a, b), type, None, dst, pred)

    def max(self, a, b, *, type=None, dst=None, pred=None):
        return self._arith("max", (a, b), type, None, dst, pred)

    def rcp(self, a, *, type=None, mode=None, dst=None, pred=None):
        return self._arith("rcp", (a,), type, mode, dst, pred)

    def sqrt(self, a, *, type=None, mode=None, dst=None, pred=None):
        return self._arith("sqrt", (a,), type, mode, dst, pred)

    def rsqrt(self, a, *, type=None, dst=None, pred=None):
        return self._arith("rsqrt", (a,), type, None, dst, pred)

    def ex2(self, a, *, dst=None, pred=None):
        return self._arith("ex2", (a,), T.f32, None, dst, pred)

    def lg2(self, a, *, dst=None, pred=None):
        return self._arith("lg2", (a,), T.f32, None, dst, pred)
