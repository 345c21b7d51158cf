"""Tensor-core instructions: mma.sync (warp level) and wgmma (warpgroup level, sm_90a).

`MMA_FORMS` is the legal-form table: shape x A/B types x accumulator type -> fragment
register counts, least arch and least PTX ISA.  Validation, rendering, the Hypothesis
strategies and the CPU interpreter all read it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from ..errors import SourceLoc, ValidationError, caller_loc
from . import types as T
from .instruction import check_vec, int_arg, make
from .operands import Imm, Vec
from .targets import DeviceLimits, Requirement, V

_PTXFORGE_INTERNAL = True


class EmulatedInstructionWarning(UserWarning):
    """The instruction assembles for the target but runs as a slow software routine there."""


class IgnoredInstructionWarning(UserWarning):
    """The instruction assembles, but ptxas drops it: it has no effect in this kernel."""


@dataclass(frozen=True)
class MmaForm:
    """One legal `mma.sync.aligned.shape.row.col` form: shape, the A/B/C/D types, registers per thread of each
    fragment, the least target and PTX ISA, the .b1 bit operation and whether ``.satfinite`` is allowed. The
    rows are `MMA_FORMS`.
    """
    shape: str
    a_type: T.ScalarType
    b_type: T.ScalarType
    c_type: T.ScalarType  # accumulator input
    d_type: T.ScalarType  # result
    a_regs: int
    b_regs: int
    c_regs: int
    req: Requirement
    bitop: str | None = None  # "xor"/"and" for .b1 forms
    satfinite: bool = False  # whether .satfinite is allowed
    layout: tuple = ("row", "col")  # A's and B's layouts (only m8n8k4 .f16 takes the others)
    d_count: int = 0  # registers of D where they differ from C's (m8n8k4 .f32 D from an .f16 C)

    @property
    def m(self) -> int:
        """M of the shape (rows of A and D), e.g. 16 for m16n8k32."""
        return int(self.shape[1:self.shape.index("n")])

    @property
    def n(self) -> int:
        """N of the shape (columns of B and D), e.g. 8 for m16n8k32."""
        return int(self.shape[self.shape.index("n") + 1:self.shape.index("k")])

    @property
    def k(self) -> int:
        """K of the shape (the reduction length), e.g. 32 for m16n8k32."""
        return int(self.shape[self.shape.index("k") + 1:])

    @property
    def d_regs(self) -> int:
        """Registers per thread of the D fragment (C's count unless D and C differ in type)."""
        return self.d_count or self.c_regs

    @property
    def quad_pairs(self) -> bool:
        """Whether the warp computes four independent products, one per quad pair (m8n8k4 .f16)."""
        return self.shape == "m8n8k4" and self.a_type is T.f16

    @property
    def frag_type(self) -> T.ScalarType:
        """Register type of the A/B fragments."""
        return T.f64 if self.a_type is T.f64 else T.b32

    @property
    def acc_reg_type(self) -> T.ScalarType:
        """Register type of the C/D fragments: .b32 for f16 accumulators (f16x2 pairs), the accumulator type
        otherwise.
        """
        if self.d_type is T.f16:
            return T.b32  # f16x2 pairs
        return self.d_type

    @property
    def c_reg_type(self) -> T.ScalarType:
        """Register type of the C fragment (as `acc_reg_type`, for C's own type)."""
        return T.b32 if self.c_type is T.f16 else self.c_type

    @property
    def is_integer(self) -> bool:
        """Whether the A/B operands are integers (s4 u4 s8 u8), accumulating in .s32."""
        return self.a_type.is_int

    def mnemonic(self, satfinite=False) -> str:
        """The full PTX opcode, e.g. ``mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32``
        (``.satfinite`` after ``.row.col`` when asked; ``.xor.popc`` for .b1)."""
        parts = ["mma", "sync", "aligned", self.shape, *self.layout]
        if satfinite:
            parts.append("satfinite")
        parts += [self.d_type.name, self.a_type.name, self.b_type.name, self.c_type.name]
        if self.bitop:
            parts += [self.bitop, "popc"]
        return ".".join(parts)

    def __str__(self) -> str:
        return self.mnemonic()


def _int_forms():
    out = []
    spec = [  # shape, width class, a_regs, b_regs, c_regs, least sm, least ptx
        ("m8n8k32", (T.s4, T.u4), 1, 1, 2, 75, "6.5"),
        ("m16n8k32", (T.s4, T.u4), 2, 1, 4, 80, "7.0"),
        ("m16n8k64", (T.s4, T.u4), 4, 2, 4, 80, "7.0"),
        ("m8n8k16", (T.s8, T.u8), 1, 1, 2, 75, "6.5"),
        ("m16n8k16", (T.s8, T.u8), 2, 1, 4, 80, "7.0"),
        ("m16n8k32", (T.s8, T.u8), 4, 2, 4, 80, "7.0"),
    ]
    for shape, cls, ar, br, cr, sm, ptx in spec:
        for a in cls:
            for b in cls:
                out.append(MmaForm(shape, a, b, T.s32, T.s32, ar, br, cr,
                                   Requirement(sm, V(ptx)).merge(Requirement(80, V("7.0"))), satfinite=True))
    for shape, ar, br, cr, sm, ptx, ops in (
            ("m8n8k128", 1, 1, 2, 75, "7.0", ("xor", "and")),
            ("m16n8k128", 2, 1, 4, 80, "7.0", ("xor", "and")),
            ("m16n8k256", 4, 2, 4, 80, "7.0", ("xor", "and"))):
        for op in ops:
            req = Requirement(max(sm, 80), V("7.1") if op == "and" else V(ptx))
            out.append(MmaForm(shape, T.b1, T.b1, T.s32, T.s32, ar, br, cr, req, bitop=op))
    return out


def _float_forms():
    out = []
    for ab in (T.f16, T.bf16):
        out.append(MmaForm("m16n8k16", ab, ab, T.f32, T.f32, 4, 2, 4, Requirement(80, V("7.0"))))
        out.append(MmaForm("m16n8k8", ab, ab, T.f32, T.f32, 2, 1, 4, Requirement(80, V("7.0"))))
    out.append(MmaForm("m16n8k16", T.f16, T.f16, T.f16, T.f16, 4, 2, 2, Requirement(80, V("7.0"))))
    out.append(MmaForm("m16n8k8", T.f16, T.f16, T.f16, T.f16, 2, 1, 2, Requirement(80, V("7.0"))))
    out.append(MmaForm("m16n8k8", T.tf32, T.tf32, T.f32, T.f32, 4, 2, 4, Requirement(80, V("7.0"))))
    out.append(MmaForm("m16n8k4", T.tf32, T.tf32, T.f32, T.f32, 2, 1, 4, Requirement(80, V("7.0"))))
    out.append(MmaForm("m8n8k4", T.f64, T.f64, T.f64, T.f64, 1, 1, 2, Requirement(80, V("7.0"))))
    for lay in (("row", "col"), ("col", "row"), ("row", "row"), ("col", "col")):  # four products per warp
        for c, d, cr, dr in ((T.f16, T.f16, 4, 4), (T.f32, T.f32, 8, 8), (T.f16, T.f32, 4, 8)):
            out.append(MmaForm("m8n8k4", T.f16, T.f16, c, d, 2, 2, cr, Requirement(80, V("7.0")), layout=lay,
                               d_count=dr if dr != cr else 0))
    for shape, ar, br in (("m16n8k4", 2, 1), ("m16n8k8", 4, 2), ("m16n8k16", 8, 4)):  # sm_90 double mma
        out.append(MmaForm(shape, T.f64, T.f64, T.f64, T.f64, ar, br, 4, Requirement(90, V("7.8"))))
    for a in (T.e4m3, T.e5m2):  # fp8 (sm_89): any pairing of the two formats
        for b in (T.e4m3, T.e5m2):
            out.append(MmaForm("m16n8k32", a, b, T.f32, T.f32, 4, 2, 4, Requirement(89, V("8.4"))))
            out.append(MmaForm("m16n8k32", a, b, T.f16, T.f16, 4, 2, 2, Requirement(89, V("8.7"))))
            out.append(MmaForm("m16n8k16", a, b, T.f32, T.f32, 2, 1, 4, Requirement(89, V("8.7"))))
            out.append(MmaForm("m16n8k16", a, b, T.f16, T.f16, 2, 1, 2, Requirement(89, V("8.7"))))
    return out


MMA_FORMS = tuple(_int_forms() + _float_forms())
_BY_KEY = {(f.shape, f.a_type, f.b_type, f.c_type, f.bitop, f.d_type, f.layout): f for f in MMA_FORMS}


def mma_form(shape, a_type, b_type=None, acc=None, bitop=None, *, d_type=None, layout=("row", "col")) -> MmaForm:
    """The `MmaForm` for a shape and operand types; the error names the legal forms of the shape.

    Args:
        shape: "m16n8k32", "m16n8k16", ...
        a_type: the A type (s4 u4 s8 u8 b1 f16 bf16 tf32 f64 ...).
        b_type: the B type; by default `a_type`.
        acc: the accumulator type; by default s32 for integers, f32 for floats (f64 for f64).
        bitop: "xor" or "and" for .b1 (default xor).
        d_type: the result type where it differs from the accumulator's (m8n8k4 .f16: .f32 from .f16).
        layout: A's and B's layouts, ("row", "col") but for m8n8k4 .f16, which takes all four.
    """
    a = T.lookup(a_type)
    b = T.lookup(b_type) if b_type is not None else a
    if acc is None:
        acc = T.s32 if a.is_int or a is T.b1 else T.f32 if a is not T.f64 else T.f64
    acc = T.lookup(acc)
    if a is T.b1 and bitop is None:
        bitop = "xor"
    d = T.lookup(d_type) if d_type is not None else acc
    layout = tuple(layout)
    f = _BY_KEY.get((shape, a, b, acc, bitop, d, layout))
    if f is None and layout != ("row", "col") and _BY_KEY.get((shape, a, b, acc, bitop, d, ("row", "col"))):
        raise ValidationError(f"mma.{shape} .{a.name} is .row.col only; the A/B layouts "
                              f".{'.'.join(layout)} exist for m8n8k4 .f16")
    if f is None and d is not acc:
        raise ValidationError(f"mma.{shape} with A .{a.name}: the result .{d.name} differs from the accumulator "
                              f".{acc.name}; only m8n8k4 .f16 writes .f32 from an .f16 C (never .f16 from .f32)")
    if f is None:
        same_shape = sorted({f"{x.a_type.name}.{x.b_type.name}->{x.d_type.name}" for x in MMA_FORMS if x.shape == shape})
        shapes = sorted({x.shape for x in MMA_FORMS if x.a_type in (a, b)}, key=lambda s: (len(s), s))
        hint = (f"{shape} takes: {', '.join(same_shape)}" if same_shape else
                f"there is no shape {shape}; shapes for .{a.name}: {', '.join(shapes)}")
        if a.is_int and b.is_int and a.bits != b.bits:
            hint = f"A and B must have the same width (.s4/.u4 or .s8/.u8); {hint}"
        raise ValidationError(f"mma.{shape} with A .{a.name}, B .{b.name}, accumulator .{acc.name} "
                              f"is not a legal form; {hint}")
    return f


#: what ptxas's software routine for 4-bit mma.sync costs where there is no 4-bit tensor path (H200)
S4_EMULATION_COST = "~25x slower than mma.sync .s8 on an H200"


def warn_at(warning: Warning, loc: SourceLoc | None) -> None:
    """Issue `warning` at `loc` (the user's line that asked for the instruction), or, without one, at the caller
    of the function that called this."""
    if loc is not None:
        warnings.warn_explicit(warning, type(warning), loc.filename, loc.lineno)
    else:
        warnings.warn(warning, stacklevel=4)


def warn_emulated(form: MmaForm, target, loc: SourceLoc | None):
    """Warn (EmulatedInstructionWarning, at `loc`) that `form` has no tensor-core path on `target`."""
    msg = (f"mma.sync.{form.shape} with .{form.a_type.name}/.{form.b_type.name} operands has no 4-bit tensor "
           f"path on {target.name}: ptxas replaces it with a software routine ({S4_EMULATION_COST}). "
           "Unpack the nibbles to .s8 and use m16n8k32.s8 (ptxforge.schedules.Int4Gemm does this by default).")
    warn_at(EmulatedInstructionWarning(msg), loc)


def _fragment_kinds(form: MmaForm, role: str) -> tuple:
    """The register kinds ptxas takes for one mma.sync fragment (A/B/C/D): packed 16-bit and tf32
    fragments are untyped .b32 registers, integer ones .b32/.u32/.s32, f64 ones .f64/.b64;
    accumulators are their own type or bits of it, and f16 accumulators are .b32 pairs."""
    if role in ("a", "b"):
        if form.a_type is T.f64:
            return ("f", "b")
        return ("b", "u", "s") if form.is_integer or form.a_type is T.b1 else ("b",)
    acc = form.c_type if role == "c" else form.d_type
    if acc is T.f16:
        return ("b",)
    return ("f", "b") if acc.is_float else ("b", "u", "s")


def _check_fragment_kinds(form: MmaForm, d, a, b, c):
    for role, vec in (("d", d), ("a", a), ("b", b), ("c", c)):
        kinds = _fragment_kinds(form, role)
        for i, r in enumerate(vec.regs):
            if isinstance(r, Imm):
                if role == "c" and form.c_type is T.f16:
                    raise ValidationError(f"{form.mnemonic()}: the f16 C fragment is .b32 pairs; ptxas takes no "
                                          f"immediates there (C[{i}] is {r}): use zeroed registers")
                continue
            rt = getattr(r, "type", None)
            if rt is not None and rt.kind not in kinds:
                acc = form.c_type if role == "c" else form.d_type
                legal = " or ".join(f".{k}{rt.bits}" if k != "f" else f".{acc.name if role in 'cd' else 'f64'}"
                                    for k in kinds)
                raise ValidationError(f"{form.mnemonic()}: {role.upper()}[{i}] {r} is .{rt.name}; this fragment "
                                      f"takes {legal} registers")


def mma(form: MmaForm, d, a, b, c, satfinite=False):
    """Build and check `mma.sync.aligned.shape.row.col{.satfinite}.d.a.b.c {d}, {a}, {b}, {c}` (pure: no
    builder).

    Args:
        form: the `MmaForm`.
        d: the D fragment, a Vec of `form.c_regs` registers of `form.acc_reg_type`.
        a: the A fragment, `form.a_regs` registers of `form.frag_type`.
        b: the B fragment, `form.b_regs` registers.
        c: the C fragment (registers like D).
        satfinite: ``.satfinite`` (integer forms only): clamp to the s32 range instead of wrapping.
    """
    if satfinite and not form.satfinite:
        raise ValidationError(f"{form.mnemonic()} does not take .satfinite (only integer s4/u4/s8/u8 forms do)")
    ft = form.frag_type
    acc = form.c_reg_type
    d = check_vec(d, form.d_regs, form.acc_reg_type, f"{form.shape} D fragment")
    a = check_vec(a, form.a_regs, ft, f"{form.shape} A fragment (.{form.a_type.name})")
    b = check_vec(b, form.b_regs, ft, f"{form.shape} B fragment (.{form.b_type.name})")
    c = check_vec(c, form.c_regs, acc, f"{form.shape} C fragment", imm_ok=True)
    _check_fragment_kinds(form, d, a, b, c)
    if acc.is_float:  # an f32/f64 accumulator immediate is spelled as a float (ptxas refuses `0` there)
        c = Vec(tuple(Imm(x.value, acc) if isinstance(x, Imm) else x for x in c.regs))
    return make("mma", (form.mnemonic(satfinite),), (d, a, b, c), n_dst=1, req=form.req, info=form,
                mods=("satfinite",) if satfinite else (), type=form.d_type)


# ---------------------------------------------------------------- wgmma (sm_90a): see isa/wgmma.py

from .wgmma import REQ_WGMMA, WGMMA_FORMS, WGMMA_N_FLOAT, WGMMA_N_INT, WgmmaForm, WgmmaOps, wgmma, wgmma_form  # noqa: E402,F401

#: Every N some wgmma form takes (integer forms take a subset: WGMMA_N_INT).
WGMMA_N = WGMMA_N_FLOAT


def entry_register_cap(threads: int, min_ctas: int = 1) -> int:
    """The per-thread register cap ptxas applies at a kernel's entry for .maxntid `threads` (a product of
    the dimensions) and .minnctapersm `min_ctas`: `min_ctas` CTAs of whole warps must fit one SM's
    register file, allocated in granules of 8 registers per thread, and no thread holds more than 255.

    With such a cap (or .maxnreg) every warp starts with it, and the CTA's warps together hold
    threads x cap registers: the pool that setmaxnreg moves registers within.  Without one ptxas
    ignores setmaxnreg (warning C7508).
    """
    warps = -(-threads // 32)
    per_thread = DeviceLimits.registers_per_sm // (32 * warps * max(1, min_ctas))
    return min(DeviceLimits.registers_per_thread, per_thread // 8 * 8)


def directive_entry_registers(directives) -> int | None:
    """Registers per thread each warp holds at a kernel's entry when its `directives` ((key, value) pairs)
    give ptxas a register cap for setmaxnreg to move registers from: .maxnreg, or the cap .maxntid (or
    .reqntid) with .minnctapersm gives (`entry_register_cap`; the lower when both are given).  None without
    a cap: ptxas then ignores setmaxnreg (C7508)."""
    d = dict(directives)
    caps = []
    if "maxnreg" in d:
        caps.append(int(d["maxnreg"]))
    shape = d.get("maxntid", d.get("reqntid"))
    if shape is not None and "minnctapersm" in d:
        x, y, z = shape
        caps.append(entry_register_cap(x * y * z, int(d["minnctapersm"])))
    return min(caps) if caps else None


#: setmaxnreg: an arch-specific feature of sm_90a, sm_100a and sm_120a (ptxas 13 takes it there and refuses it on
#: sm_90, sm_100 and sm_120)
REQ_SETMAXNREG = Requirement(90, V("8.0"), arch_specific=True, also_arch=(100, 120))


def warn_ignored_setmaxnreg(loc: SourceLoc | None):
    """Warn (IgnoredInstructionWarning, at `loc`) that setmaxnreg in a kernel without an entry register cap
    does nothing."""
    msg = ("setmaxnreg in a kernel without a register cap at entry: ptxas ignores it (C7508) and no registers "
           "move. Build the kernel with maxntid=<threads> and minnctapersm=1 (or maxnreg=<n>), as "
           "ptxforge.hopper.WarpSpecialized requires.")
    warn_at(IgnoredInstructionWarning(msg), loc)


def setmaxnreg(action: str, n: int):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 n (sm_90a, sm_100a, sm_120a): move registers between warpgroups."""
    if action not in ("inc", "dec"):
        raise ValidationError(f"setmaxnreg action is 'inc' or 'dec', got {action!r}")
    n = int_arg(n, "setmaxnreg register count")
    if not 24 <= n <= 256 or n % 8:
        raise ValidationError(f"setmaxnreg register count must be a multiple of 8 in 24..256, got {n!r}")
    return make("setmaxnreg", ("setmaxnreg", action, "sync", "aligned", "u32"), (Imm(n),), req=REQ_SETMAXNREG,
                info=(action, n), mods=(action,))


class TensorOps(WgmmaOps):
    """Builder methods for tensor-core instructions: warp-level `mma.sync` (sm_80) and warpgroup-level `wgmma`
    with its fences and waits, and `setmaxnreg` (sm_90a).
    """
    def mma(self, a, b, c=0, *, shape, a_type, b_type=None, acc=None, satfinite=False, bitop=None, dst=None,
            d_type=None, layout=("row", "col"), pred=None):
        """Warp-level `mma.sync.aligned.<shape>.<alayout>.<blayout>` D = A*B + C.

        `a`, `b`, `c` are Vecs (or lists) of registers; `c=0` means a zero accumulator.
        `layout` is ("row", "col") except for m8n8k4 .f16, which takes all four A/B layouts and
        computes four independent 8x8x4 products, one per quad pair (lanes 4q..4q+3 and
        16+4q..16+4q+3); there `d_type="f32"` writes .f32 from an .f16 C.
        Returns D (a Vec); pass `dst=c` to accumulate in place.  A number `c` is the value of every C element
        (for .f16 accumulators, each half of each register).
        """
        form = mma_form(shape, a_type, b_type, acc, bitop, d_type=d_type, layout=layout)
        if form.a_type in (T.s4, T.u4) and not self.target.mma_s4_native:
            warn_emulated(form, self.target, caller_loc())
        acc_t = form.acc_reg_type
        d = self._val(dst) if dst is not None else Vec(tuple(self.reg(acc_t) for _ in range(form.d_regs)))
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            # mma takes registers only: materialize the constant accumulator and accumulate onto it
            if form.d_count:  # C and D differ in type: C (.f16 pairs) needs registers of its own
                if c != 0:
                    raise ValidationError(f"{form.mnemonic()}: a constant .f16 C must be 0; pass registers")
                c = Vec(tuple(self.reg(form.c_reg_type) for _ in range(form.c_regs)))
                for r in c:
                    self.mov(0, type=form.c_reg_type, dst=r)
            else:
                const_t = T.f16x2 if form.d_type is T.f16 else acc_t  # f16 accumulators: the value in both halves
                for r in d:
                    self.mov(c, type=const_t, dst=r)
                c = d
        else:
            c = self._val(c)
        self.emit(mma(form, d, self._val(a), self._val(b), c, satfinite), pred)
        return d

    def setmaxnreg(self, action: str, n: int):
        """Raise ('inc') or lower ('dec') this warpgroup's register budget to n (sm_90a).  Warns
        (IgnoredInstructionWarning) when the kernel has no entry register cap for it to move registers from."""
        ins = self.emit(setmaxnreg(action, n))
        if directive_entry_registers(self.directives) is None:
            warn_ignored_setmaxnreg(caller_loc())
        return ins
