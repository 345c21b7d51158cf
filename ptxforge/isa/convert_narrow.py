"""cvt to and from the narrow formats: fp8 pairs (e4m3x2, e5m2x2) from two f32 or an f16x2 and
back to f16x2, tf32 from f32, the .relu / .satfinite forms of f16, bf16, f16x2 and bf16x2 from
f32, and cvt.pack (two s32 saturated to 16, 8 or 4 bits and packed, above c's low bits).

Legal forms as data: `NARROW_CVT` maps (destination, source) to a `NarrowCvt` row: the rounding
modes, whether .relu and .satfinite are allowed or required, the sources, register widths and the
requirement (per rounding mode, and for .satfinite).  An fp8 pair lives in a .b16 register (the
first source in the high byte), a tf32 value in a .b32.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_value, make
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

FP8_PAIRS = ("e4m3x2", "e5m2x2")
_PLAIN = ("f16", "bf16", "f16x2", "bf16x2")  # from .f32 without .relu/.satfinite: the ordinary cvt
_FP8 = Requirement(89, V("8.1"), ptx_from=((90, V("7.8")),))  # sm_89 needs PTX 8.1, sm_90 takes 7.8
_SATFINITE_81 = Requirement(80, V("8.1"))


@dataclass(frozen=True)
class NarrowCvt:
    """One narrow-format conversion.

    Fields:
        to, frm: destination and source format names.
        rounds: rounding mode -> its requirement.
        relu: the rounding modes .relu goes with.
        satfinite: "required", "optional" (with its requirement in satfinite_req) or "no"; for
            tf32 by rounding mode (`satfinite_modes`).
        nsrc: the number of sources (2 for pairs packed from two f32).
        src_type, dst_type: the register types of sources and destination.
    """

    to: str
    frm: str
    rounds: dict
    relu: tuple
    satfinite: str
    nsrc: int
    src_type: T.ScalarType
    dst_type: T.ScalarType
    satfinite_req: Requirement = BASE
    satfinite_modes: tuple = field(default=())


def _table():
    out = {}
    for p in FP8_PAIRS:
        out[(p, "f32")] = NarrowCvt(p, "f32", {"rn": _FP8}, ("rn",), "required", 2, T.f32, T.b16)
        out[(p, "f16x2")] = NarrowCvt(p, "f16x2", {"rn": _FP8}, ("rn",), "required", 1, T.b32, T.b16)
        out[("f16x2", p)] = NarrowCvt("f16x2", p, {"rn": _FP8}, ("rn",), "no", 1, T.b16, T.b32)
    r80 = Requirement(80, V("7.0"))
    for to in ("f16x2", "bf16x2"):
        out[(to, "f32")] = NarrowCvt(to, "f32", {"rn": r80, "rz": r80}, ("rn", "rz"), "optional", 2, T.f32, T.b32,
                                     _SATFINITE_81)
    for to in ("f16", "bf16"):
        out[(to, "f32")] = NarrowCvt(to, "f32", {"rn": r80, "rz": r80}, ("rn", "rz"), "optional", 1, T.f32, T.b16,
                                     _SATFINITE_81)
    out[("tf32", "f32")] = NarrowCvt("tf32", "f32", {"rna": r80, "rn": Requirement(90, V("7.8")),
                                                    "rz": Requirement(90, V("7.8"))},
                                     ("rn", "rz"), "optional", 1, T.f32, T.b32, _SATFINITE_81, ("rna",))
    return out


#: The narrow-conversion table: (destination, source) -> NarrowCvt.
NARROW_CVT = _table()


@dataclass(frozen=True)
class NarrowInfo:
    """What one narrow conversion does: its row and the modifiers chosen."""

    form: NarrowCvt
    rnd: str
    relu: bool
    satfinite: bool


def cvt_narrow(to, frm, d, srcs, rnd="rn", relu=False, satfinite=None):
    """cvt.rnd{.relu}{.satfinite}.to.frm d, a{, b} for the narrow formats (pure)."""
    form = NARROW_CVT.get((to, frm))
    if form is None:
        legal = ", ".join(f"{t}<-{f}" for t, f in NARROW_CVT)
        raise ValidationError(f"no narrow cvt from .{frm} to .{to}; legal: {legal}")
    what = f"cvt.{to}.{frm}"
    if rnd not in form.rounds:
        raise ValidationError(f"{what} rounds with {', '.join('.' + r for r in form.rounds)}, not .{rnd}")
    if satfinite is None:
        satfinite = form.satfinite == "required"
    if form.satfinite == "required" and not satfinite:
        raise ValidationError(f"{what} needs .satfinite (out-of-range values clamp to the largest finite one)")
    if satfinite and (form.satfinite == "no" or (form.satfinite_modes and rnd not in form.satfinite_modes)):
        raise ValidationError(f"{what}.{rnd} takes no .satfinite")
    if relu and rnd not in form.relu:
        raise ValidationError(f"{what}.{rnd} takes no .relu" + (f" (only with {', '.join('.' + r for r in form.relu)})"
                                                                if form.relu else ""))
    if len(srcs) != form.nsrc:
        raise ValidationError(f"{what} takes {form.nsrc} source(s), got {len(srcs)}")
    if not relu and not satfinite and to in _PLAIN and frm == "f32":
        # without .relu/.satfinite these are the ordinary cvt forms: one instruction, one value
        from .convert import cvt
        return cvt(T.lookup(to), T.f32, d, srcs[0], rnd, b=srcs[1] if len(srcs) == 2 else None)
    check_dst(d, form.dst_type, f"{what} destination")
    for i, s in enumerate(srcs):
        check_value(s, form.src_type, f"{what} source {i + 1}", imm_ok=False)
    req = form.rounds[rnd]
    if satfinite and form.satfinite == "optional":
        req = req.merge(form.satfinite_req)
    fp8 = to in FP8_PAIRS
    mods = (rnd, "satfinite" if satfinite and fp8 else None, "relu" if relu else None,
            "satfinite" if satfinite and not fp8 else None)
    return make("cvt.narrow", ("cvt", *mods, to, frm), (d, *srcs), n_dst=1, req=req,
                info=NarrowInfo(form, rnd, relu, bool(satfinite)), mods=tuple(m for m in mods if m))


#: cvt.pack: destination type -> whether it takes the c operand whose low bits fill the rest of d.
CVT_PACK = {T.u16: False, T.s16: False, T.u8: True, T.s8: True, T.u4: True, T.s4: True}
REQ_CVT_PACK = Requirement(80, V("6.5"))


def cvt_pack(t, d, a, b, c=None):
    """cvt.pack.sat.t.s32{.b32} d, a, b{, c}: d = (c << 2n) | (sat_t(a) << n) | sat_t(b), n = t's width
    (16-bit forms take no c and leave nothing above)."""
    if t not in CVT_PACK:
        raise ValidationError(f"cvt.pack packs into {', '.join('.' + x.name for x in CVT_PACK)}, not .{t.name}")
    if CVT_PACK[t] != (c is not None):
        raise ValidationError(f"cvt.pack.sat.{t.name} " + ("needs c (the bits above the packed pair)" if CVT_PACK[t]
                                                            else "takes no c"))
    check_dst(d, T.b32, "cvt.pack destination")
    check_value(a, T.s32, "cvt.pack source a")
    check_value(b, T.s32, "cvt.pack source b")
    ops = (d, a, b)
    if c is not None:
        check_value(c, T.b32, "cvt.pack source c")
        ops += (c,)
    return make("cvt.pack", ("cvt", "pack", "sat", t.name, "s32", "b32" if c is not None else None), ops, n_dst=1,
                req=REQ_CVT_PACK, type=t)


class NarrowConvertOps:
    """The builder method for the narrow-format conversions."""

    def cvt_narrow(self, a, b=None, *, to, frm="f32", rnd=None, relu=False, satfinite=None, dst=None, pred=None):
        """`cvt.rnd{.relu}{.satfinite}.to.frm d, a{, b}`: to an fp8 pair (`to="e4m3x2"`/`"e5m2x2"`, from
        two f32, a into the high byte, or from one f16x2; .satfinite is implied), from an fp8 pair to
        f16x2, f32 to tf32 (rnd "rna", or "rn"/"rz" on sm_90), or f32 to f16/bf16 (pairs: f16x2/bf16x2,
        a the high half) with `relu` (negative results become 0) or `satfinite`.  `rnd` defaults to
        "rna" for tf32 and "rn" otherwise.  Returns d (.b16 for fp8 pairs and halves, else .b32)."""
        form = NARROW_CVT.get((to, frm))
        d = self._dst(dst, form.dst_type if form is not None else T.b32)
        srcs = [self._val(x, form.src_type if form is not None else T.f32) for x in ((a,) if b is None else (a, b))]
        if rnd is None:
            rnd = "rna" if to == "tf32" else "rn"
        self.emit(cvt_narrow(to, frm, d, srcs, rnd, relu, satfinite), pred)
        return d

    def cvt_pack(self, a, b, c=None, *, to, dst=None, pred=None):
        """`cvt.pack.sat.to.s32{.b32} d, a, b{, c}`: saturate the .s32 values a and b to `to` (u16, s16;
        u8, s8, u4, s4 with c) and pack them, a above b, with c's low bits above both.  Returns d (.b32)."""
        t = T.lookup(to)
        d = self._dst(dst, T.b32)
        cv = self._val(c, T.b32) if c is not None else None
        self.emit(cvt_pack(t, d, self._val(a, T.s32), self._val(b, T.s32), cv), pred)
        return d
