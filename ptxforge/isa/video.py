"""Video instructions: the scalar byte/half/word forms (vadd vsub vabsdiff vmin vmax vshl vshr vmad
vset) and the two- and four-way SIMD forms (vadd2 ... vset2, vadd4 ... vset4), on whole 32-bit
words (no sub-word selectors).

Legal forms as data: `VIDEO` maps each opcode to a `VideoForm` row: scalar or SIMD lanes, whether
it takes a destination type, .sat, a secondary operation (`.add`/`.min`/`.max`, or a SIMD `.add`
accumulate), a shift mode, a comparison, a scale.  On sm_80/sm_90 the assembler emulates them with
ordinary integer instructions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_value, make
from .operands import Imm
from .targets import BASE

_PTXFORGE_INTERNAL = True

VIDEO_TYPES = (T.u32, T.s32)
SCALAR_OP2 = ("add", "min", "max")
VSET_CMP = ("eq", "ne", "lt", "le", "gt", "ge")
SHIFT_MODES = ("clamp", "wrap")
VMAD_SCALES = ("shr7", "shr15")


@dataclass(frozen=True)
class VideoForm:
    """One video opcode.

    Fields:
        opcode: `vadd`, `vset2`, ...
        lanes: 1 (scalar), 2 or 4 (SIMD over half-words / bytes).
        op: the per-element operation (`add`, `sub`, `absdiff`, `min`, `max`, `avrg`, `shl`, `shr`,
            `mad`, `set`).
        dtype: whether the form names a destination type (vset does not: its result is 0 or 1).
        sat: whether it takes .sat.
        shift: whether it needs a shift mode (.clamp/.wrap; vshl/vshr, whose b is .u32).
        scale: whether it takes .shr7/.shr15 (vmad).
    """

    opcode: str
    lanes: int
    op: str
    dtype: bool = True
    sat: bool = True
    shift: bool = False
    scale: bool = False

    @property
    def simd(self) -> bool:
        """Two- or four-way SIMD (always has a c operand: merge source or accumulator)."""
        return self.lanes > 1


def _table():
    out = {}
    for op in ("add", "sub", "absdiff", "min", "max"):
        out["v" + op] = VideoForm("v" + op, 1, op)
    out["vshl"] = VideoForm("vshl", 1, "shl", shift=True)
    out["vshr"] = VideoForm("vshr", 1, "shr", shift=True)
    out["vmad"] = VideoForm("vmad", 1, "mad", scale=True)
    out["vset"] = VideoForm("vset", 1, "set", dtype=False, sat=False)
    for n in (2, 4):
        for op in ("add", "sub", "avrg", "absdiff", "min", "max"):
            out[f"v{op}{n}"] = VideoForm(f"v{op}{n}", n, op)
        out[f"vset{n}"] = VideoForm(f"vset{n}", n, "set", dtype=False, sat=False)
    return out


#: The video legal-form table: opcode -> VideoForm (23 rows).
VIDEO = _table()


@dataclass(frozen=True)
class VideoInfo:
    """What one video instruction computes: its row and the modifiers chosen."""

    form: VideoForm
    dtype: T.ScalarType
    atype: T.ScalarType
    btype: T.ScalarType
    sat: bool = False
    op2: str | None = None  # scalar secondary op, or "add" (SIMD accumulate)
    mode: str | None = None  # shift mode
    cmp: str | None = None
    scale: str | None = None


def video(opcode, d, a, b, c=None, *, dtype=T.u32, atype=T.u32, btype=T.u32, sat=False, op2=None, mode=None,
          cmp=None, scale=None):
    """Build and check one video instruction (pure).  Spellings:
    `vop.dtype.atype.btype{.sat}{.op2} d, a, b{, c}`, `vshl/vshr...{.sat}.mode`, `vmad...{.sat}{.scale}
    d, a, b, c`, `vset.atype.btype.cmp{.op2} d, a, b{, c}`, `vop2/vop4.dtype.atype.btype{.sat|.add} d, a,
    b, c`, `vset2/vset4.atype.btype.cmp{.add} d, a, b, c`."""
    form = VIDEO.get(opcode)
    if form is None:
        raise ValidationError(f"unknown video instruction {opcode!r}")
    for what, t in (("d", dtype), ("a", atype), ("b", btype)):
        if t not in VIDEO_TYPES:
            raise ValidationError(f"{opcode}: the {what} type is .u32 or .s32, not .{t.name}")
    if form.shift and btype is not T.u32:
        raise ValidationError(f"{opcode}: the shift amount b is .u32")
    if sat and not form.sat:
        raise ValidationError(f"{opcode} takes no .sat")
    if form.shift:
        if mode not in SHIFT_MODES:
            raise ValidationError(f"{opcode} needs a shift mode 'clamp' or 'wrap', got {mode!r}")
    elif mode is not None:
        raise ValidationError(f"{opcode} takes no shift mode")
    if form.op == "set":
        if cmp not in VSET_CMP:
            raise ValidationError(f"{opcode} compares with one of {', '.join(VSET_CMP)}, got {cmp!r}")
    elif cmp is not None:
        raise ValidationError(f"{opcode} takes no comparison")
    if scale is not None and (not form.scale or scale not in VMAD_SCALES):
        raise ValidationError(f"{opcode} takes no scale {scale!r}" if not form.scale else
                              f"vmad scales with .shr7 or .shr15, not {scale!r}")
    if form.simd:
        if op2 not in (None, "add"):
            raise ValidationError(f"{opcode}'s secondary operation is .add (accumulate into c), not .{op2}")
        if op2 == "add" and sat:
            raise ValidationError(f"{opcode}: .sat cannot be combined with the .add accumulate")
        if c is None:
            raise ValidationError(f"{opcode} takes c: the word merged into unselected lanes, or the accumulator")
    elif form.op == "mad":
        if op2 is not None:
            raise ValidationError("vmad takes no secondary operation")
        if c is None:
            raise ValidationError("vmad takes c: d = a*b + c")
    else:
        if op2 is not None and op2 not in SCALAR_OP2:
            raise ValidationError(f"{opcode}'s secondary operation is one of {', '.join(SCALAR_OP2)}, not .{op2}")
        if (op2 is None) != (c is None):
            raise ValidationError(f"{opcode}: a secondary operation and c go together")
    out_t = dtype if form.dtype else T.u32
    check_dst(d, out_t, f"{opcode} destination")
    for what, x, t in (("a", a, atype), ("b", b, btype)):
        check_value(x, t, f"{opcode} source {what}", imm_ok=not form.simd)
    srcs = [a, b]
    if c is not None:
        check_value(c, out_t if form.op != "mad" else (T.u32 if atype is btype is T.u32 else T.s32),
                    f"{opcode} source c", imm_ok=not form.simd)
        srcs.append(c)
    types = (dtype.name, atype.name, btype.name) if form.dtype else (atype.name, btype.name)
    parts = (opcode, *types, cmp, "sat" if sat else None, mode, scale, op2)
    return make(opcode, parts, (d, *srcs), n_dst=1, type=out_t, req=BASE,
                info=VideoInfo(form, out_t if form.dtype else T.u32, atype, btype, sat, op2, mode, cmp, scale))


class VideoOps:
    """Builder methods for the video instructions: `k.video(opcode, a, b, c, ...)`."""

    def video(self, opcode, a, b, c=None, *, dtype="u32", atype=None, btype=None, sat=False, op2=None, mode=None,
              cmp=None, scale=None, dst=None, pred=None):
        """Emit video instruction `opcode` (`vadd`, `vmin4`, `vset2`, ... : `ptxforge.isa.video.VIDEO`)
        on whole words: d = (a op b), optionally saturated (`sat`), combined with c by `op2`
        ("add"/"min"/"max"; SIMD forms: "add" accumulates the lanes into c, otherwise c fills the
        unselected lanes); `mode` ("clamp"/"wrap") for vshl/vshr, `cmp` for vset*, `scale` for vmad.
        `atype`/`btype` default to each register's .u32/.s32 type.  Returns d."""
        def kind(x, given):
            if given is not None:
                return T.lookup(given)
            t = getattr(self._val(x), "type", None)
            return t if t in VIDEO_TYPES else T.u32
        at, bt = kind(a, atype), kind(b, btype)
        if opcode in ("vshl", "vshr") and btype is None:
            bt = T.u32
        form = VIDEO.get(opcode)
        dt = T.lookup(dtype)
        d = self._dst(dst, dt if form is None or form.dtype else T.u32)
        cv = None
        if c is not None:
            ct = (T.u32 if at is bt is T.u32 else T.s32) if form is not None and form.op == "mad" else (
                dt if form is None or form.dtype else T.u32)
            cv = self._val(c, ct) if not isinstance(c, Imm) else c
        self.emit(video(opcode, d, self._val(a, at), self._val(b, bt), cv, dtype=dt, atype=at, btype=bt, sat=sat,
                        op2=op2, mode=mode, cmp=cmp, scale=scale), pred)
        return d
