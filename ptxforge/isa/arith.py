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
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

INT = (T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)
FLT = (T.f32, T.f64)
HALF = (T.f16, T.f16x2, T.bf16, T.bf16x2)
ROUND = ("rn", "rz", "rm", "rp")


@dataclass(frozen=True)
class ArithForm:
    """One row of `ARITH`: the legal forms of one arithmetic opcode.

    Attributes:
        opcode: the PTX opcode (``add``, ``mad`` ...).
        types: the PTX types the opcode takes.
        arity: the number of source operands.
        int_modes: the integer modifiers (``.lo``/``.hi``/``.wide`` for mul and mad, ``.sat`` for add and
            sub).
        float_mods: rounding, approximation and flag modifiers the opcode takes on some float type.
        float_round_required: whether PTX requires a rounding (or ``.approx``) modifier on floats; the builder
            then supplies the default.
    """
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


def float_class(t: T.ScalarType) -> str:
    """Modifier rules are shared by a float type and its packed pair (f16/f16x2, bf16/bf16x2)."""
    return t.name[:-2] if t.name.endswith("x2") else t.name


_SAME_ADD = {"f32": (ROUND, ("ftz", "sat")), "f64": (ROUND, ()), "f16": (("rn",), ("ftz", "sat")),
             "bf16": (("rn",), ())}
_SAME_ABS = {"f32": ((), ("ftz",)), "f64": ((), ()), "f16": ((), ("ftz",)), "bf16": ((), ())}
_SAME_MIN = {"f32": ((), ("ftz", "NaN")), "f64": ((), ()), "f16": ((), ("ftz", "NaN")), "bf16": ((), ("NaN",))}
_APPROX_F32 = {"f32": (("approx",), ("ftz",))}

#: Float modifiers by opcode and type class: (rounding/approximation modes, flags).  Narrower
#: than ``ArithForm.float_mods``: f64 has no .ftz/.sat, half types round only to nearest, bf16
#: has no .ftz/.sat (as ptxas 13 enforces).
FLOAT_MODS = {
    "add": _SAME_ADD, "sub": _SAME_ADD, "mul": _SAME_ADD,
    "mad": {"f32": (ROUND, ("ftz", "sat")), "f64": (ROUND, ())},
    "fma": {"f32": (ROUND, ("ftz", "sat")), "f64": (ROUND, ()), "f16": (("rn",), ("ftz", "sat")),
            "bf16": (ROUND, ())},
    "div": {"f32": (ROUND + ("approx", "full"), ("ftz",)), "f64": (ROUND, ())},
    "abs": _SAME_ABS, "neg": _SAME_ABS, "min": _SAME_MIN, "max": _SAME_MIN,
    "rcp": {"f32": (ROUND + ("approx",), ("ftz",)), "f64": (ROUND + ("approx",), ("ftz",))},
    "sqrt": {"f32": (ROUND + ("approx",), ("ftz",)), "f64": (ROUND, ())},
    "rsqrt": {"f32": (("approx",), ("ftz",)), "f64": (("approx",), ("ftz",))},
    "ex2": _APPROX_F32, "lg2": _APPROX_F32, "sin": _APPROX_F32, "cos": _APPROX_F32,
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
    flags = (flags,) if isinstance(flags, str) else tuple(flags)
    if t.is_float:
        modes, allowed_flags = FLOAT_MODS[opcode][float_class(t)]
        if mode is not None and mode not in modes and mode in allowed_flags:
            mode, flags = None, (mode,) + flags  # a lone flag passed as the mode: add(a, b, mode="ftz")
        if mode is None and form.float_round_required:
            mode = _DEFAULT_FLOAT_MODE.get(opcode)
        if mode is not None and mode not in modes:
            raise ValidationError(
                f"{opcode}.{t.name} does not take .{mode}; "
                + (f"modes: {', '.join('.' + x for x in modes)}" if modes else "it takes no rounding mode"))
        for m in flags:
            if m not in allowed_flags:
                raise ValidationError(
                    f"{opcode}.{t.name} does not take .{m}; "
                    + (f"flags: {', '.join('.' + x for x in allowed_flags)}" if allowed_flags else "it takes no flags"))
        if len(set(flags)) != len(flags):
            raise ValidationError(f"{opcode}.{t.name}: repeated modifier in {flags}")
        if opcode == "rcp" and t is T.f64 and mode == "approx" and "ftz" not in flags:
            raise ValidationError("rcp.approx.f64 exists only with .ftz: pass flags=('ftz',) or use .rn")
        flags = tuple(f for f in ("ftz", "sat", "NaN") if f in flags)  # PTX order
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
        check_value(s, src_t, f"{opcode} source {i + 1}", imm_ok=t not in HALF)
    req = BASE
    if t in (T.bf16, T.bf16x2):
        req = Requirement(90 if opcode in ("add", "sub", "mul") else 80,
                          V("7.8") if opcode in ("add", "sub", "mul") else V("7.0"))
    return make(opcode, (opcode, *mods, t.name), (d, *srcs), n_dst=1, mods=tuple(mods), type=t, req=req)


class ArithOps:
    """Builder methods for arithmetic.  Each returns the destination register.

    Sources are registers or Python numbers (immediates); the keywords are the same throughout:

    * `type`: the PTX type suffix (``"s32"``, `f32` ...); by default the type of the first
      register source (untyped bits as unsigned).
    * `mode`: integers ``"lo"`` / ``"hi"`` / ``"wide"`` (mul, mad: ``.wide`` writes a register of
      twice the width) or ``"sat"`` (add, sub on .s32); floats a rounding mode (rn rz rm rp) or
      ``"approx"`` / ``"full"`` where `FLOAT_MODS` allows it. Opcodes that PTX requires to round
      get their default (``rn``, or ``approx`` for the special functions).
    * `flags`: float modifiers beside the mode: ``flags=("ftz", "sat")`` gives ``add.rn.ftz.sat.f32``.
    * `dst`: a register to write instead of a new one; `pred`: a .pred register (``~p`` for
      its negation) guarding the instruction (``@p`` / ``@!p``).
    """

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

    # `flags` adds float modifiers beside the mode: flags=("ftz", "sat") -> add.rn.ftz.sat.f32
    def add(self, a, b, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`add.type d, a, b`: d = a + b; returns d.

        Integers wrap, or saturate with ``mode="sat"`` (``add.sat.s32``, .s32 only); floats take a rounding
        `mode` (rn rz rm rp; rn only for the half types) and the `flags` ftz and sat where the type has them.
        A .u64 pointer register plus a byte offset is an address. `a`, `b`: registers or Python numbers.
        Keywords as for every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("add", (a, b), type, mode, dst, pred, flags)

    def sub(self, a, b, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`sub.type d, a, b`: d = a - b; returns d.

        Modes and flags as for `add` (``.sat`` on .s32, rounding and ftz/sat on floats). Keywords as for every
        `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("sub", (a, b), type, mode, dst, pred, flags)

    def mul(self, a, b, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """Integers: mode 'lo' (default), 'hi' or 'wide'; floats: rounding mode."""
        return self._arith("mul", (a, b), type, mode, dst, pred, flags)

    def mad(self, a, b, c, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """a*b + c.  Integers: mode 'lo' (default), 'hi' or 'wide' (c and d are double width)."""
        return self._arith("mad", (a, b, c), type, mode, dst, pred, flags)

    def fma(self, a, b, c, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`fma.rnd.type d, a, b, c`: d = a * b + c with one rounding; returns d.

        Floats only (.f32 .f64 and the half types); PTX requires a rounding mode, ``rn`` unless `mode` says
        otherwise. Keywords as for every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("fma", (a, b, c), type, mode, dst, pred, flags)

    def div(self, a, b, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`div.type d, a, b`: d = a / b; returns d.

        Integers truncate toward zero; .f32 takes ``mode`` rn rz rm rp (IEEE, default rn), "approx" or "full"
        and the flag ftz; .f64 a rounding mode. Keywords as for every `ArithOps` method (type, mode, flags,
        dst, pred).
        """
        return self._arith("div", (a, b), type, mode, dst, pred, flags)

    def rem(self, a, b, *, type=None, dst=None, pred=None):
        """`rem.type d, a, b`: the integer remainder of a / b (sign of a for .s types); returns d. Keywords as
        for every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("rem", (a, b), type, None, dst, pred)

    def abs(self, a, *, type=None, flags=(), dst=None, pred=None):
        """`abs.type d, a`: |a| for signed integers and floats (flag ftz on .f32/.f16); returns d. Keywords as
        for every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("abs", (a,), type, None, dst, pred, flags)

    def neg(self, a, *, type=None, flags=(), dst=None, pred=None):
        """`neg.type d, a`: -a for signed integers and floats (flag ftz on .f32/.f16); returns d. Keywords as for
        every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("neg", (a,), type, None, dst, pred, flags)

    def min(self, a, b, *, type=None, flags=(), dst=None, pred=None):
        """`min.type d, a, b`: the smaller of a and b; returns d.

        Floats take the flags ftz and NaN (``min.NaN`` returns NaN when either input is NaN). Keywords as for
        every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("min", (a, b), type, None, dst, pred, flags)

    def max(self, a, b, *, type=None, flags=(), dst=None, pred=None):
        """`max.type d, a, b`: the larger of a and b; returns d.

        Floats take the flags ftz and NaN (``max.NaN`` returns NaN when either input is NaN). Keywords as for
        every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("max", (a, b), type, None, dst, pred, flags)

    def rcp(self, a, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`rcp.rnd.type d, a`: d = 1 / a on .f32 or .f64; returns d.

        `mode` rn (default) rz rm rp, or "approx" (``rcp.approx.f64`` needs ``flags=("ftz",)``). Keywords as
        for every `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("rcp", (a,), type, mode, dst, pred, flags)

    def sqrt(self, a, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`sqrt.rnd.type d, a`: the square root on .f32 or .f64; returns d.

        `mode` rn (default) rz rm rp, or "approx" on .f32. Keywords as for every `ArithOps` method (type,
        mode, flags, dst, pred).
        """
        return self._arith("sqrt", (a,), type, mode, dst, pred, flags)

    def rsqrt(self, a, *, type=None, flags=(), dst=None, pred=None):
        """`rsqrt.approx.type d, a`: an approximate 1 / sqrt(a) on .f32 or .f64; returns d. Keywords as for every
        `ArithOps` method (type, mode, flags, dst, pred).
        """
        return self._arith("rsqrt", (a,), type, None, dst, pred, flags)

    def ex2(self, a, *, flags=(), dst=None, pred=None):
        """`ex2.approx.f32 d, a`: an approximate 2 ** a; returns d.

        Args:
            a: an .f32 register or a Python number.
            flags: ``("ftz",)`` flushes subnormals.
            dst: a register to write instead of a new one.
            pred: a .pred register (``~p`` for its negation) guarding the instruction.
        """
        return self._arith("ex2", (a,), T.f32, None, dst, pred, flags)

    def lg2(self, a, *, flags=(), dst=None, pred=None):
        """`lg2.approx.f32 d, a`: an approximate log2(a); returns d. Arguments as for `ex2`."""
        return self._arith("lg2", (a,), T.f32, None, dst, pred, flags)

    def sin(self, a, *, flags=(), dst=None, pred=None):
        """`sin.approx.f32 d, a`: an approximate sine of a (radians); returns d. Arguments as for `ex2`."""
        return self._arith("sin", (a,), T.f32, None, dst, pred, flags)

    def cos(self, a, *, flags=(), dst=None, pred=None):
        """`cos.approx.f32 d, a`: an approximate cosine of a (radians); returns d. Arguments as for `ex2`."""
        return self._arith("cos", (a,), T.f32, None, dst, pred, flags)
