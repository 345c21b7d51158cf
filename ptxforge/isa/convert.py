"""Conversions: cvt (numeric) and cvta (address space); isspacep (which space a generic address is in)."""

from __future__ import annotations

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_pred, check_value, make
from .operands import Reg, Symbol, SymbolOffset
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

CVT_TYPES = (T.u8, T.u16, T.u32, T.u64, T.s8, T.s16, T.s32, T.s64, T.f16, T.bf16, T.f32, T.f64)
INT_ROUND = ("rni", "rzi", "rmi", "rpi")
FLOAT_ROUND = ("rn", "rz", "rm", "rp")


PACKED_ROUND = ("rn", "rz")  # f16x2/bf16x2 from two f32

# bf16 conversions: only f32 <-> bf16 exist on sm_80; the rest (ints, f16, f64, bf16 -> bf16) need sm_90.
_BF16_F32 = Requirement(80, V("7.0"))
_F32_BF16 = Requirement(80, V("7.1"))
_BF16_SM90 = Requirement(90, V("7.8"))


def _range_covers(dt, st) -> bool:
    """Whether every value of integer type st fits integer type dt (then .sat has nothing to clamp)."""
    if dt.kind == st.kind:
        return dt.bits >= st.bits
    return dt.is_signed and dt.bits > st.bits


def cvt(dt, st, d, a, rnd=None, sat=False, ftz=False, b=None):
    """cvt.{rnd}{.ftz}{.sat}.dtype.stype; f16x2/bf16x2 packs two f32 sources (a = high, b = low)."""
    if dt in (T.f16x2, T.bf16x2):
        if st is not T.f32 or b is None:
            raise ValidationError(f"cvt to .{dt.name} packs two .f32 sources: cvt.rn.{dt.name}.f32 d, hi, lo")
        rnd = rnd or "rn"
        if rnd not in PACKED_ROUND:
            raise ValidationError(f"cvt.{dt.name}.f32 rounds with .rn or .rz, not .{rnd}")
        if sat or ftz:
            raise ValidationError(f"cvt.{dt.name}.f32 takes no .sat/.ftz")
        check_dst(d, T.b32, "cvt destination")
        check_value(a, T.f32, "cvt source (high half)")
        check_value(b, T.f32, "cvt source (low half)")
        return make("cvt", ("cvt", rnd, dt.name, "f32"), (d, a, b), n_dst=1,
                    type=dt, info=(dt, st, rnd), req=Requirement(80, V("7.0")), mods=(rnd,))
    for t in (dt, st):
        if t not in CVT_TYPES:
            raise ValidationError(f"cvt does not convert .{t.name}; types: " + ", ".join("." + x.name for x in CVT_TYPES))
    what = f"cvt.{dt.name}.{st.name}"
    if dt.is_int and st.is_float:
        rnd = rnd or "rzi"
        if rnd not in INT_ROUND:
            raise ValidationError(f"float-to-integer {what} needs an integer rounding mode {INT_ROUND}, got .{rnd}")
    elif dt.is_float and st.is_int:
        rnd = rnd or "rn"
        if rnd not in FLOAT_ROUND:
            raise ValidationError(f"integer-to-float {what} needs a float rounding mode {FLOAT_ROUND}, got .{rnd}")
    elif dt.is_float and st.is_float:
        if dt.bits < st.bits or (dt.bits == st.bits and dt is not st):
            rnd = rnd or "rn"
            if rnd not in FLOAT_ROUND:
                raise ValidationError(f"narrowing {what} needs a float rounding mode {FLOAT_ROUND}, got .{rnd}")
        elif dt is st:
            if rnd is not None and rnd not in INT_ROUND:
                raise ValidationError(f"{what} rounds to an integral value ({', '.join(INT_ROUND)}) or not at all, "
                                      f"not .{rnd}")
        elif rnd is not None and not (st is T.bf16 and rnd in FLOAT_ROUND):
            # (ptxas takes a rounding mode on widening conversions from .bf16 only; it changes nothing)
            raise ValidationError(f"widening {what} is exact: it takes no rounding mode, got .{rnd}")
    elif rnd is not None:
        raise ValidationError(f"integer-to-integer {what} takes no rounding mode")
    if ftz and T.f32 not in (dt, st):
        raise ValidationError(f"{what}: .ftz applies only when the source or destination is .f32")
    if sat:
        if T.bf16 in (dt, st):
            raise ValidationError(f"{what} takes no .sat")
        if dt.is_int and st.is_int and _range_covers(dt, st):
            raise ValidationError(f"{what}.sat: every .{st.name} value fits .{dt.name}, so ptxas refuses .sat here")
    if T.bf16 not in (dt, st):
        req = BASE
    elif (dt, st) == (T.bf16, T.f32):
        req = _BF16_F32
    elif (dt, st) == (T.f32, T.bf16):
        req = _BF16_SM90 if ftz else _F32_BF16
    else:
        req = _BF16_SM90
    exact = T.bf16 in (dt, st)  # ptxas 13.0: a cvt to or from .bf16 takes no register wider than its type
    check_dst(d, dt if dt is not T.bf16 else T.b16, "cvt destination", wide_ok=dt.is_int and not exact)
    check_value(a, st if st is not T.bf16 else T.b16, "cvt source", wide_ok=st.is_int and not exact)
    for r, t, role in ((d, dt, "destination"), (a, st, "source")):
        if t is T.bf16 and isinstance(r, Reg) and r.type.kind in ("u", "s"):
            raise ValidationError(f"cvt {role} {r} is .{r.type.name}: a .bf16 value lives in a .b16 register "
                                  "(ptxas refuses integer registers here)")
    mods = tuple(m for m in (rnd, "ftz" if ftz else None, "sat" if sat else None) if m)
    return make("cvt", ("cvt", *mods, dt.name, st.name), (d, a), n_dst=1, type=dt, info=(dt, st, rnd),
                req=req, mods=mods)


#: cvta and isspacep on the kernel parameter window (.param): PTX ISA 7.7 (ptxas 13.0: "Feature 'cvta/isspacep
#: with .param state space' requires PTX ISA .version 7.7 or later").
PARAM_WINDOW = Requirement(80, V("7.7"))

#: The state spaces cvta converts to and from and isspacep tests, with what each needs (ptxas 13.0):
#: .shared::cta and .shared::cluster name the shared window's scope (PTX ISA 7.8; ::cluster sm_90), .param is
#: the kernel parameter window and .param::entry names it so (PTX ISA 8.3).  Plain .shared is .shared::cta.
ADDRESS_SPACES = {"global": BASE, "shared": BASE, "shared::cta": Requirement(80, V("7.8")),
                  "shared::cluster": Requirement(90, V("7.8")), "local": BASE, "const": BASE,
                  "param": PARAM_WINDOW, "param::entry": Requirement(80, V("8.3"))}
#: the spaces of cvta{.to}.space
CVTA_SPACES = tuple(ADDRESS_SPACES)


def cvta(d, a, space, to: bool):
    """Build and check `cvta{.to}.space.size d, a` (pure: no builder).

    Args:
        d: the destination register; its width picks .u64 or .u32 (global addresses are always .u64).
        a: the address converted.
        space: one of `CVTA_SPACES` (global, shared, shared::cta, shared::cluster, local, const, param,
            param::entry).
        to: True for ``cvta.to.space`` (generic -> space), False for ``cvta.space`` (space -> generic).
    """
    if space not in ADDRESS_SPACES:
        raise ValidationError(f"cvta space must be one of {', '.join(CVTA_SPACES)}, got {space!r}")
    if not isinstance(d, Reg):
        raise ValidationError(f"cvta destination must be a register, got {d!r}")
    size = T.u64
    req = ADDRESS_SPACES[space]
    for r, role in ((d, "destination"), (a, "source")):
        if isinstance(r, Reg) and r.type.bits != 64:
            # .u32 cvta is 32-bit addressing: ptxas 13 aborts the whole module (.address_size 64)
            raise ValidationError(f"cvta {role} {r} is .{r.type.name}: generic addresses are 64-bit in an "
                                  ".address_size 64 module, so cvta takes .u64 registers (cvt.u32.u64 the "
                                  "result for a 32-bit window offset)")
    check_dst(d, size, "cvta destination")
    if isinstance(a, (Symbol, SymbolOffset)):  # `cvta.space p, var` / `var+imm`: the variable's generic address
        if to:
            raise ValidationError(f"cvta.to.{space} converts a generic address in a register, not variable "
                                  f"{a.name}; cvta.{a.space} gives a variable's generic address")
        if a.space != space.split("::")[0]:
            raise ValidationError(f"cvta.{space} of {a.name}, a .{a.space} variable: the space must be the "
                                  f"variable's (cvta.{a.space})")
    else:
        check_value(a, size, "cvta source", imm_ok=False)
    return make("cvta", ("cvta", "to" if to else None, space, size.name), (d, a), n_dst=1, type=size,
                req=req, mods=(("to",) if to else ()) + (space,))


#: isspacep: the spaces a generic address can be tested for
ISSPACEP_SPACES = ADDRESS_SPACES


def isspacep(p, a, space):
    """isspacep.space p, a: whether generic address a falls in `space`'s window."""
    if space not in ISSPACEP_SPACES:
        raise ValidationError(f"isspacep tests one of {', '.join('.' + s for s in ISSPACEP_SPACES)}, not {space!r}")
    check_pred(p, "isspacep destination")
    check_value(a, T.u64, "isspacep address", imm_ok=False)
    return make("isspacep", ("isspacep", space), (p, a), n_dst=1, req=ISSPACEP_SPACES[space], mods=(space,))


class ConvertOps:
    """Builder methods for type conversion (`cvt`) and address-space conversion (`cvta`)."""
    def cvt(self, a, to, *, frm=None, rnd=None, sat=False, ftz=False, dst=None, pred=None, b=None):
        """Convert `a` (of type `frm`, default its register type) to type `to`."""
        from .arith import infer_type
        a = self._val(a)
        dt = T.lookup(to)
        st = infer_type(frm, a)
        if st.kind == "b":
            st = st.as_unsigned()  # untyped bits convert as unsigned
        if b is not None:
            b = self._val(b, T.f32)
        a = self._val(a, st)
        d = self._dst(dst, T.decl_type(dt))
        self.emit(cvt(dt, st, d, a, rnd, sat, ftz, b), pred)
        return d

    def isspacep(self, a, space, *, dst=None, pred=None):
        """`isspacep.space p, a`: a predicate, true when generic address `a` is in `space`
        ("global", "shared", "shared::cta", "shared::cluster", "local", "const", "param")."""
        p = self._dst(dst, T.pred)
        self.emit(isspacep(p, self._val(a), space), pred)
        return p

    def cvta(self, a, *, to=None, frm=None, dst=None, pred=None):
        """`cvta.to.<to>` (generic -> space) or `cvta.<frm>` (space -> generic)."""
        if (to is None) == (frm is None):
            raise ValidationError("cvta: give exactly one of to= (generic -> space) or frm= (space -> generic)")
        a = self._val(a)
        width = a.type.bits if hasattr(a, "type") else 64
        d = self._dst(dst, T.u64 if (to == "global" or frm is not None or width == 64) else T.u32)
        self.emit(cvta(d, a, to or frm, to is not None), pred)
        return d
