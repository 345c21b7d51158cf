"""Integer and floating-point arithmetic: add sub mul mad fma div rem abs neg min max, the
integer-only mul24 mad24 sad, and the float-only rcp sqrt rsqrt ex2 lg2 sin cos tanh copysign.

Legal forms as data: ``ARITH`` maps each opcode to one `ArithForm` row: the types it takes, the
integer modes (which, for which types, which is the default), the float modifiers by type class,
and what a type needs beyond the base target.  The validator here, the builder methods, the
Hypothesis candidates and the interpreter all read the row; an opcode whose row has no
hand-written builder method gets one generated from the row.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_value, checked_form, make, not_a_scalar
from .operands import Reg, SpecialReg, Vec
from .targets import BASE, Requirement, V
from .types import wide_type

_PTXFORGE_INTERNAL = True

@dataclass(frozen=True)
class ArithForm:
    """One arithmetic opcode: everything the validator, the builder, the test strategies and the
    interpreter need to know about its legal forms.

    Fields:
        opcode: the PTX opcode.
        types: the instruction types it takes.
        arity: the number of source operands.
        int_modes: the modes integer forms take (".lo"/".hi"/".wide", ".sat").
        int_mode_default: the mode written when an integer form is given none; when set, every
            integer form writes a mode (`mul.lo.u32`, never `mul.u32`).
        mode_types: for modes that only some integer types take, which ones (".sat": .s32 only;
            ".wide": 16- and 32-bit sources); other modes go with every integer type of the row.
        wide_sources: source positions that are double width under ".wide" (mad's addend).
        float_mods: by float class (`float_class`), the (rounding/approximation modes, flags)
            the float forms take.
        float_default: the mode written when a float form is given none (None: write none).
        float_needs: (float class, mode) -> a flag that mode exists only with (rcp.approx.f64
            needs .ftz).
        type_req: by type, what the form needs beyond the base target (bf16 add/sub/mul need
            sm_90 and PTX ISA 7.8).
        doc: what the instruction computes (the builder method's docstring, for rows whose
            method is generated from the row).
        flag_req: by float flag, what the flag needs beyond the base target (.xorsign.abs on
            min/max: sm_86 and PTX ISA 7.2).
        mode_req: by integer mode, what the mode needs (min/max .relu: sm_90, PTX ISA 8.0).
        exclusive: pairs of float flags that may not be written together (fma .sat and .relu).
        int_flags: by integer flag, the (modes, types) it goes with: `mad.hi.sat.s32` is the only
            saturating mad (flags=("sat",) with mode="hi" on .s32).
    """

    opcode: str
    types: tuple
    arity: int
    int_modes: tuple = ()
    int_mode_default: str | None = None
    mode_types: dict = field(default_factory=dict)
    wide_sources: tuple = ()
    float_mods: dict = field(default_factory=dict)
    float_default: str | None = None
    float_needs: dict = field(default_factory=dict)
    type_req: dict = field(default_factory=dict)
    doc: str = ""
    flag_req: dict = field(default_factory=dict)
    mode_req: dict = field(default_factory=dict)
    exclusive: tuple = ()
    int_flags: dict = field(default_factory=dict)

    def int_modes_for(self, t: T.ScalarType) -> tuple:
        """The integer modes legal with integer type `t`, plus None when a mode may be left out."""
        modes = tuple(m for m in self.int_modes if t in self.mode_types.get(m, (t,)))
        return modes if self.int_mode_default else (None,) + modes

    def result_type(self, t: T.ScalarType, mode) -> T.ScalarType:
        """The destination type for instruction type `t` and `mode`: double width under .wide."""
        if mode == "wide" and "wide" in self.int_modes and t in self.mode_types.get("wide", ()):
            return wide_type(t)
        return t

    def source_type(self, t: T.ScalarType, mode, i: int) -> T.ScalarType:
        """The type of source operand i (0-based) for instruction type `t` and `mode`."""
        return self.result_type(t, mode) if i in self.wide_sources else t

    @property
    def takes_mode(self) -> bool:
        """Whether the builder method has a `mode=` argument: some form has a choice of mode."""
        return bool(self.int_modes) or any(len(modes) > 1 for modes, _ in self.float_mods.values())


INT = (T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)
FLT = (T.f32, T.f64)
HALF = (T.f16, T.f16x2, T.bf16, T.bf16x2)
INT_X2 = (T.u16x2, T.s16x2)  # two 16-bit lanes in a .b32 register: add, min, max (sm_90, PTX ISA 8.0)
ROUND = ("rn", "rz", "rm", "rp")

_NARROW = (T.u16, T.u32, T.s16, T.s32)  # sources .wide doubles
_INT_MUL = dict(int_modes=("lo", "hi", "wide"), int_mode_default="lo", mode_types={"wide": _NARROW})
_INT_SAT = dict(int_modes=("sat",), mode_types={"sat": (T.s32,)})
_HI_SAT = {"sat": (("hi",), (T.s32,))}  # mad.hi.sat.s32, mad24.hi.sat.s32: the high half plus c, clamped
_BF16_SM90 = {t: Requirement(90, V("7.8")) for t in (T.bf16, T.bf16x2)}
_X2_SM90 = {t: Requirement(90, V("8.0")) for t in INT_X2}

# Float modifiers by type class: (rounding/approximation modes, flags).  f64 has no .ftz/.sat,
# half types round only to nearest, bf16 has no .ftz/.sat (as ptxas 13 enforces).
_SAME_ADD = {"f32": (ROUND, ("ftz", "sat")), "f64": (ROUND, ()), "f16": (("rn",), ("ftz", "sat")),
             "bf16": (("rn",), ())}
_SAME_ABS = {"f32": ((), ("ftz",)), "f64": ((), ()), "f16": ((), ("ftz",)), "bf16": ((), ())}
_SAME_MIN = {"f32": ((), ("ftz", "NaN", "xorsign.abs")), "f64": ((), ()), "f16": ((), ("ftz", "NaN", "xorsign.abs")),
             "bf16": ((), ("NaN", "xorsign.abs"))}
_MIN_MAX = dict(float_mods=_SAME_MIN, flag_req={"xorsign.abs": Requirement(86, V("7.2"))}, type_req=_X2_SM90,
                int_modes=("relu",), mode_types={"relu": (T.s32, T.s16x2)}, mode_req={"relu": Requirement(90, V("8.0"))})
_APPROX_F32 = {"f32": (("approx",), ("ftz",))}
_BF16_90 = {t: Requirement(90, V("7.8")) for t in (T.bf16, T.bf16x2)}

#: The legal-form table of this family: opcode -> ArithForm.
ARITH = {
    "add": ArithForm("add", INT + FLT + HALF + INT_X2, 2, **_INT_SAT, float_mods=_SAME_ADD,
                     type_req={**_BF16_SM90, **_X2_SM90}),
    "sub": ArithForm("sub", INT + FLT + HALF, 2, **_INT_SAT, float_mods=_SAME_ADD, type_req=_BF16_SM90),
    "mul": ArithForm("mul", INT + FLT + HALF, 2, **_INT_MUL, float_mods=_SAME_ADD, type_req=_BF16_SM90),
    "mad": ArithForm("mad", INT + FLT, 3, **_INT_MUL, wide_sources=(2,), float_default="rn", int_flags=_HI_SAT,
                     float_mods={"f32": (ROUND, ("ftz", "sat")), "f64": (ROUND, ())}),
    # .oob (sm_90, PTX ISA 8.1): fma.rn.oob{.relu} on the half types, +0 where an input is the OOB NaN a tensor
    # copy fills out-of-bounds elements with; ptxas 13 also takes it with .sat and bf16's other rounding modes
    "fma": ArithForm("fma", FLT + HALF, 3, float_default="rn", exclusive=(("sat", "relu"), ("oob", "ftz")),
                     float_mods={"f32": (ROUND, ("ftz", "sat")), "f64": (ROUND, ()),
                                 "f16": (("rn",), ("ftz", "sat", "relu", "oob")), "bf16": (ROUND, ("relu", "oob"))},
                     flag_req={"oob": Requirement(90, V("8.1"))}),
    "div": ArithForm("div", INT + FLT, 2, float_default="rn",
                     float_mods={"f32": (ROUND + ("approx", "full"), ("ftz",)), "f64": (ROUND, ())}),
    "rem": ArithForm("rem", INT, 2),
    "abs": ArithForm("abs", (T.s16, T.s32, T.s64) + FLT + HALF, 1, float_mods=_SAME_ABS),
    "neg": ArithForm("neg", (T.s16, T.s32, T.s64) + FLT + HALF, 1, float_mods=_SAME_ABS),
    "min": ArithForm("min", INT + FLT + HALF + INT_X2, 2, **_MIN_MAX),
    "max": ArithForm("max", INT + FLT + HALF + INT_X2, 2, **_MIN_MAX),
    "rcp": ArithForm("rcp", FLT, 1, float_default="rn", float_needs={("f64", "approx"): "ftz"},
                     float_mods={"f32": (ROUND + ("approx",), ("ftz",)), "f64": (ROUND + ("approx",), ("ftz",))}),
    "sqrt": ArithForm("sqrt", FLT, 1, float_default="rn",
                      float_mods={"f32": (ROUND + ("approx",), ("ftz",)), "f64": (ROUND, ())}),
    "rsqrt": ArithForm("rsqrt", FLT, 1, float_default="approx",
                       float_mods={"f32": (("approx",), ("ftz",)), "f64": (("approx",), ("ftz",))}),
    "ex2": ArithForm("ex2", (T.f32,) + HALF, 1, float_default="approx", type_req=_BF16_90,
                     float_mods={"f32": (("approx",), ("ftz",)), "f16": (("approx",), ()), "bf16": (("approx",), ("ftz",))},
                     float_needs={("bf16", "approx"): "ftz"}),
    "lg2": ArithForm("lg2", (T.f32,), 1, float_default="approx", float_mods=_APPROX_F32),
    "sin": ArithForm("sin", (T.f32,), 1, float_default="approx", float_mods=_APPROX_F32),
    "cos": ArithForm("cos", (T.f32,), 1, float_default="approx", float_mods=_APPROX_F32),
    "mul24": ArithForm("mul24", (T.u32, T.s32), 2, int_modes=("lo", "hi"), int_mode_default="lo", doc="""\
        `mul24.{lo,hi}.{u32,s32} d, a, b`: the 48-bit product of the low 24 bits of a and b (sign-
        extended for .s32); .lo (default) returns its bits 31..0, .hi its bits 47..16."""),
    "mad24": ArithForm("mad24", (T.u32, T.s32), 3, int_modes=("lo", "hi"), int_mode_default="lo", int_flags=_HI_SAT,
                       doc="""\
        `mad24.{lo,hi}{.sat}.{u32,s32} d, a, b, c`: the 48-bit product of the low 24 bits of a and b (sign-
        extended for .s32), bits 31..0 (.lo, default) or 47..16 (.hi) of it, plus c (wrapping; with
        mode="hi", flags=("sat",) on .s32 clamped to the .s32 range: mad24.hi.sat.s32)."""),
    "tanh": ArithForm("tanh", (T.f32,) + HALF, 1, float_default="approx", type_req=_BF16_90,
                      float_mods={"f32": (("approx",), ()), "f16": (("approx",), ()), "bf16": (("approx",), ())},
                      doc="""\
        `tanh.approx.type d, a`: the hyperbolic tangent of a (f32, f16, f16x2; bf16 and bf16x2 on
        sm_90), approximate (the f32 form's maximum relative error is about 2^-11)."""),
    "copysign": ArithForm("copysign", FLT, 2, float_mods={"f32": ((), ()), "f64": ((), ())}, doc="""\
        `copysign.type d, a, b`: the magnitude of b with the sign of a (f32, f64)."""),
    "sad": ArithForm("sad", INT, 3, doc="""\
        `sad.type d, a, b, c`: sum of absolute difference, d = c + |a - b| (wrapping to the type's
        width)."""),
}

#: Float modifiers by opcode and float class: each ARITH row's `float_mods`, keyed by opcode.
FLOAT_MODS = {op: form.float_mods for op, form in ARITH.items() if form.float_mods}


def float_class(t: T.ScalarType) -> str:
    """Modifier rules are shared by a float type and its packed pair (f16/f16x2, bf16/bf16x2)."""
    return t.name[:-2] if t.name.endswith("x2") else t.name


def infer_type(t, *ops):
    """The explicit type, else the type of the first register operand."""
    if t is not None:
        return T.lookup(t)
    for op in ops:
        if isinstance(op, (Reg, SpecialReg)):
            return op.type
    vec = next((op for op in ops if isinstance(op, Vec)), None)
    if vec is not None:
        raise ValidationError(not_a_scalar(vec))
    raise ValidationError("cannot tell the operation's type from immediates alone; pass type=")


def _either(modes) -> str:
    names = ["." + m for m in modes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


_FLAG_ORDER = ("ftz", "sat", "oob", "relu", "NaN", "xorsign.abs")


def _float_mods(form: ArithForm, opcode, t, mode, flags) -> list:
    modes, allowed_flags = form.float_mods[float_class(t)]
    if mode is not None and mode not in modes and mode in allowed_flags:
        mode, flags = None, (mode,) + flags  # a lone flag passed as the mode: add(a, b, mode="ftz")
    if mode is None:
        mode = form.float_default
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
    need = form.float_needs.get((float_class(t), mode))
    if need is not None and need not in flags:
        raise ValidationError(f"{opcode}.{mode}.{t.name} exists only with .{need}: pass flags=('{need}',) "
                              f"or use .{form.float_default}")
    for x, y in form.exclusive:
        if x in flags and y in flags:
            raise ValidationError(f"{opcode}.{t.name}: .{x} and .{y} cannot be combined; pick one")
    flags = tuple(f for f in _FLAG_ORDER if f in flags)  # PTX order
    return [m for m in ((mode,) if mode else ()) + flags]


def _int_mods(form: ArithForm, opcode, t, mode, flags) -> list:
    if isinstance(mode, str) and "." in mode:  # the PTX spelling of a mode and its flags: mode="hi.sat"
        mode, *more = mode.split(".")
        flags = tuple(more) + flags
    if mode is None:
        mode = form.int_mode_default
    if mode is not None:
        if mode not in form.int_modes:
            if form.int_mode_default:
                raise ValidationError(f"{opcode} on integers takes {_either(form.int_modes)}, got .{mode}")
            raise ValidationError(f"{opcode}.{t.name} does not take .{mode}")
        legal = form.mode_types.get(mode)
        if legal is not None and t not in legal:
            if mode == "wide":
                raise ValidationError(f"{opcode}.wide doubles the width: it takes 16- or 32-bit sources, "
                                      f"not .{t.name}")
            raise ValidationError(f"{opcode}.{mode} exists only for {', '.join('.' + x.name for x in legal)}, "
                                  f"not .{t.name}")
    for f in flags:
        rule = form.int_flags.get(f)
        if rule is None and f in form.int_modes:  # an integer mode passed as a flag: max(a, b, flags=("relu",))
            raise ValidationError(f"{opcode}.{f} on integers is a mode, not a flag: write mode=\"{f}\" "
                                  f"(flags= holds float modifiers)")
        if rule is None:
            raise ValidationError(f"{opcode} on integers takes no flags, got {flags}" if not form.int_flags else
                                  f"{opcode}.{t.name} does not take .{f}; integer flags: "
                                  + ", ".join("." + x for x in form.int_flags))
        modes, types = rule
        if mode not in modes or t not in types:
            forms = " or ".join(f"{opcode}.{m}.{f}.{x.name}" for m in modes for x in types)
            raise ValidationError(f"{opcode}: .{f} exists only as {forms} (mode=\"{modes[0]}\", "
                                  f"flags=(\"{f}\",)), not with .{mode} on .{t.name}")
    if len(set(flags)) != len(flags):
        raise ValidationError(f"{opcode}.{t.name}: repeated modifier in {flags}")
    return ([mode] if mode is not None else []) + list(flags)


def arith(opcode: str, t: T.ScalarType, d, srcs, mode=None, flags=()):
    """Build and check one arithmetic instruction (pure: no builder)."""
    flags = (flags,) if isinstance(flags, str) else tuple(flags)
    rt, sources, imm_ok, parts, mods, req = checked_form(_FORMS, (opcode, t, mode, flags), _arith_form)
    if len(srcs) != len(sources):
        raise ValidationError(f"{opcode} takes {len(sources)} source operand(s), got {len(srcs)}")
    if type(d) is not Reg or d.type is not rt:
        check_dst(d, rt, f"{opcode} destination")
    for i, s in enumerate(srcs):
        st = sources[i]
        if type(s) is not Reg or s.type is not st:
            check_value(s, st, f"{opcode} source {i + 1}", imm_ok=imm_ok)
    return make(opcode, parts, (d, *srcs), n_dst=1, mods=mods, type=t, req=req)


#: arithmetic forms checked before (`checked_form`): (opcode, type, mode, flags) -> (result type, source types,
#: whether sources may be immediates, mnemonic parts, modifiers, requirement)
_FORMS: dict = {}


def _arith_form(opcode, t, mode, flags) -> tuple:
    form = ARITH[opcode]
    if t not in form.types:
        raise ValidationError(f"{opcode} does not take .{t.name}; legal types: "
                              + ", ".join("." + x.name for x in form.types))
    mods = _float_mods(form, opcode, t, mode, flags) if t.is_float else _int_mods(form, opcode, t, mode, flags)
    written = mods[0] if mods and not t.is_float else None
    req = form.type_req.get(t, BASE)
    for m in mods:
        extra = form.flag_req.get(m) if t.is_float else form.mode_req.get(m)
        if extra is not None:
            req = req.merge(extra)
    sources = tuple(form.source_type(t, written, i) for i in range(form.arity))
    return (form.result_type(t, written), sources, takes_immediates(t), (opcode, *mods, t.name), tuple(mods), req)


def takes_immediates(t: T.ScalarType) -> bool:
    """Whether an arithmetic form of type `t` takes immediate sources: not the 16-bit float and two-lane
    integer types, whose values live in .b16 / .b32 registers (ptxas 13.0: "Arguments mismatch")."""
    return t not in HALF and t not in INT_X2


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
        d = self._dst(dst, ARITH[opcode].result_type(t, mode))
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
        """a*b + c.  Integers: mode 'lo' (default), 'hi' or 'wide' (c and d are double width); on .s32,
        mode='hi' with flags=('sat',) clamps the sum to the .s32 range (`mad.hi.sat.s32`)."""
        return self._arith("mad", (a, b, c), type, mode, dst, pred, flags)

    def fma(self, a, b, c, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`fma.rnd.type d, a, b, c`: d = a * b + c with one rounding; returns d.

        Floats only (.f32 .f64 and the half types); PTX requires a rounding mode, ``rn`` unless `mode` says
        otherwise. On the half types (sm_90) ``flags=("oob",)`` (alone, or with ``"relu"`` or ``"sat"``)
        gives ``fma.rn.oob{.relu}``: +0 where an input is the NaN a tensor copy fills out-of-bounds
        elements with. Keywords as for every `ArithOps` method (type, mode, flags, dst, pred).
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

    def min(self, a, b, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`min` of two values.  Floats take flags ("ftz", "NaN", "xorsign.abs": the smaller
        magnitude with the sign a XOR b, sm_86); `.s32` takes mode="relu" (clamped at 0, sm_90)."""
        return self._arith("min", (a, b), type, mode, dst, pred, flags)

    def max(self, a, b, *, type=None, mode=None, flags=(), dst=None, pred=None):
        """`max` of two values; flags and modes as for `min`."""
        return self._arith("max", (a, b), type, mode, dst, pred, flags)

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

    def ex2(self, a, *, type=None, flags=(), dst=None, pred=None):
        """`ex2.approx{.ftz}.type d, a`: 2**a.  f32 (default), f16, f16x2; bf16/bf16x2 (sm_90) need
        flags=("ftz",)."""
        return self._arith("ex2", (a,), type if type is not None else self._infer_or(a, T.f32), None, dst, pred,
                           flags)

    def _infer_or(self, a, default):
        """The type of register `a`, or `default` for immediates and other operands."""
        return a.type if isinstance(a, Reg) and a.type.is_float else default

    def lg2(self, a, *, flags=(), dst=None, pred=None):
        """`lg2.approx.f32 d, a`: an approximate log2(a); returns d. Arguments as for `ex2`."""
        return self._arith("lg2", (a,), T.f32, None, dst, pred, flags)

    def sin(self, a, *, flags=(), dst=None, pred=None):
        """`sin.approx.f32 d, a`: an approximate sine of a (radians); returns d. Arguments as for `ex2`."""
        return self._arith("sin", (a,), T.f32, None, dst, pred, flags)

    def cos(self, a, *, flags=(), dst=None, pred=None):
        """`cos.approx.f32 d, a`: an approximate cosine of a (radians); returns d. Arguments as for `ex2`."""
        return self._arith("cos", (a,), T.f32, None, dst, pred, flags)


def _row_method(form: ArithForm):
    """A builder method for an ARITH row that has no hand-written one: sources, then type=, mode=
    (where the row has a choice), flags= (where it has float forms), dst=, pred=."""
    def method(self, *srcs, type=None, mode=None, flags=(), dst=None, pred=None):
        if len(srcs) != form.arity:
            raise ValidationError(f"{form.opcode} takes {form.arity} source operand(s), got {len(srcs)}")
        return self._arith(form.opcode, srcs, type, mode, dst, pred, flags)

    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    params += [P(n, P.POSITIONAL_OR_KEYWORD) for n in "abc"[:form.arity]]
    params += [P("type", P.KEYWORD_ONLY, default=None)]
    if form.takes_mode:
        params.append(P("mode", P.KEYWORD_ONLY, default=None))
    if form.float_mods or form.int_flags:
        params.append(P("flags", P.KEYWORD_ONLY, default=()))
    params += [P("dst", P.KEYWORD_ONLY, default=None), P("pred", P.KEYWORD_ONLY, default=None)]
    method.__signature__ = inspect.Signature(params)
    method.__name__ = form.opcode
    method.__qualname__ = f"ArithOps.{form.opcode}"
    modes = f" Integer modes: {_either(form.int_modes)} (default .{form.int_mode_default})." \
        if form.int_mode_default else ""
    method.__doc__ = (inspect.cleandoc(form.doc or f"`{form.opcode}`.") + modes
                      + "\n\nReturns the destination register (a new one unless dst= is given).")
    return method


for _op, _form in ARITH.items():
    if _op not in ArithOps.__dict__:
        setattr(ArithOps, _op, _row_method(_form))
