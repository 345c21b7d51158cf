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
from .instruction import check_value, check_vec, make
from .operands import Imm, Reg, Vec
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True


class EmulatedInstructionWarning(UserWarning):
    """The instruction assembles for the target but runs as a slow software routine there."""


@dataclass(frozen=True)
class MmaForm:
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

    @property
    def m(self) -> int:
        return int(self.shape[1:self.shape.index("n")])

    @property
    def n(self) -> int:
        return int(self.shape[self.shape.index("n") + 1:self.shape.index("k")])

    @property
    def k(self) -> int:
        return int(self.shape[self.shape.index("k") + 1:])

    @property
    def d_regs(self) -> int:
        return self.c_regs

    @property
    def frag_type(self) -> T.ScalarType:
        """Register type of the A/B fragments."""
        return T.f64 if self.a_type is T.f64 else T.b32

    @property
    def acc_reg_type(self) -> T.ScalarType:
        if self.d_type is T.f16:
            return T.b32  # f16x2 pairs
        return self.d_type

    @property
    def is_integer(self) -> bool:
        return self.a_type.is_int

    def mnemonic(self, satfinite=False) -> str:
        parts = ["mma", "sync", "aligned", self.shape, "row", "col"]
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
    return out


MMA_FORMS = tuple(_int_forms() + _float_forms())
_BY_KEY = {(f.shape, f.a_type, f.b_type, f.c_type, f.bitop): f for f in MMA_FORMS}


def mma_form(shape, a_type, b_type=None, acc=None, bitop=None) -> MmaForm:
    a = T.lookup(a_type)
    b = T.lookup(b_type) if b_type is not None else a
    if acc is None:
        acc = T.s32 if a.is_int or a is T.b1 else T.f32 if a is not T.f64 else T.f64
    acc = T.lookup(acc)
    if a is T.b1 and bitop is None:
        bitop = "xor"
    f = _BY_KEY.get((shape, a, b, acc, bitop))
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


def _warn_emulated(form: MmaForm, target, loc: SourceLoc | None):
    msg = (f"mma.sync.{form.shape} with .{form.a_type.name}/.{form.b_type.name} operands has no 4-bit tensor "
           f"path on {target.name}: ptxas replaces it with a software routine ({S4_EMULATION_COST}). "
           "Unpack the nibbles to .s8 and use m16n8k32.s8 (ptxforge.schedules.Int4Gemm does this by default).")
    if loc is not None:
        warnings.warn_explicit(EmulatedInstructionWarning(msg), EmulatedInstructionWarning, loc.filename, loc.lineno)
    else:
        warnings.warn(EmulatedInstructionWarning(msg), stacklevel=3)


def mma(form: MmaForm, d, a, b, c, satfinite=False):
    if satfinite and not form.satfinite:
        raise ValidationError(f"{form.mnemonic()} does not take .satfinite (only integer s4/u4/s8/u8 forms do)")
    ft = form.frag_type
    acc = form.acc_reg_type
    d = check_vec(d, form.c_regs, acc, f"{form.shape} D fragment")
    a = check_vec(a, form.a_regs, ft, f"{form.shape} A fragment (.{form.a_type.name})")
    b = check_vec(b, form.b_regs, ft, f"{form.shape} B fragment (.{form.b_type.name})")
    c = check_vec(c, form.c_regs, acc, f"{form.shape} C fragment", imm_ok=True)
    return make("mma", (form.mnemonic(satfinite),), (d, a, b, c), n_dst=1, req=form.req, info=form,
                mods=("satfinite",) if satfinite else (), type=form.d_type)


# ---------------------------------------------------------------- wgmma (sm_90a): see isa/wgmma.py

from .wgmma import REQ_WGMMA, WGMMA_FORMS, WGMMA_N_FLOAT, WGMMA_N_INT, WgmmaForm, WgmmaOps, wgmma, wgmma_form  # noqa: E402,F401

#: Every N some wgmma form takes (integer forms take a subset: WGMMA_N_INT).
WGMMA_N = WGMMA_N_FLOAT


def setmaxnreg(action: str, n: int):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 n (sm_90a): move registers between warpgroups."""
    if action not in ("inc", "dec"):
        raise ValidationError(f"setmaxnreg action is 'inc' or 'dec', got {action!r}")
    if not isinstance(n, int) or not 24 <= n <= 256 or n % 8:
        raise ValidationError(f"setmaxnreg register count must be a multiple of 8 in 24..256, got {n!r}")
    return make("setmaxnreg", ("setmaxnreg", action, "sync", "aligned", "u32"), (Imm(n),), req=REQ_WGMMA,
                info=(action, n), mods=(action,))


class TensorOps(WgmmaOps):
    def mma(self, a, b, c=0, *, shape, a_type, b_type=None, acc=None, satfinite=False, bitop=None, dst=None,
            pred=None):
        """Warp-level `mma.sync.aligned.<shape>.row.col` D = A*B + C.

        `a`, `b`, `c` are Vecs (or lists) of registers; `c=0` means a zero accumulator.
        Returns D (a Vec); pass `dst=c` to accumulate in place.
        """
        form = mma_form(shape, a_type, b_type, acc, bitop)
        if form.a_type in (T.s4, T.u4) and not self.target.mma_s4_native:
            _warn_emulated(form, self.target, caller_loc())
        acc_t = form.acc_reg_type
        d = self._val(dst) if dst is not None else Vec(tuple(self.reg(acc_t) for _ in range(form.c_regs)))
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            # mma takes registers only: materialize the constant accumulator in D and accumulate onto it
            for r in d:
                self.mov(c, type=acc_t, dst=r)
            c = d
        else:
            c = self._val(c)
        self.emit(mma(form, d, self._val(a), self._val(b), c, satfinite), pred)
        return d

    def setmaxnreg(self, action: str, n: int):
        """Raise ('inc') or lower ('dec') this warpgroup's register budget to n (sm_90a)."""
        self.emit(setmaxnreg(action, n))
