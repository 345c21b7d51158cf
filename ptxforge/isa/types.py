"""PTX scalar types.

A `ScalarType` knows its PTX spelling, its width in bits and its kind:
``b`` (untyped bits), ``u`` (unsigned), ``s`` (signed), ``f`` (float) or
``pred``.  Packed sub-byte types (s4, u4, b1) exist only inside registers
and memory, never as a register declaration, so they are marked ``packed``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True, eq=False)
class ScalarType:
    """One PTX type.  Every type is a module-level singleton, so equality is identity (cheap on the
    validation path, where types are looked up in legal-form tables); pickling keeps the singletons."""

    name: str
    bits: int
    kind: str  # "b", "u", "s", "f", "pred"
    packed: bool = False  # sub-byte / packed-only type: no register of this type exists
    lanes: int = 1  # f16x2 / bf16x2: two halves in one 32-bit register

    def __str__(self) -> str:
        return "." + self.name

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return lookup, (self.name,)

    @property
    def ptx(self) -> str:
        """The PTX type suffix, e.g. ``.u32``."""
        return "." + self.name

    @property
    def nbytes(self) -> float:
        """Bytes per element; fractional for sub-byte types."""
        return self.bits / 8

    @property
    def is_int(self) -> bool:
        """Whether the type is a signed or unsigned integer (.u*, .s*; not the .b* bit types)."""
        return self.kind in ("u", "s")

    @property
    def is_signed(self) -> bool:
        """Whether the type is a signed integer (.s*)."""
        return self.kind == "s"

    @property
    def is_float(self) -> bool:
        """Whether the type is a float (.f16 .bf16 .f32 .f64, the packed pairs, tf32 ...)."""
        return self.kind == "f"

    @property
    def is_pred(self) -> bool:
        """Whether the type is .pred."""
        return self.kind == "pred"

    @property
    def can_declare(self) -> bool:
        """True if `.reg <type>` is legal for this type."""
        return not self.packed

    def bits_type(self) -> "ScalarType":
        """The untyped bit type of the same width (.u32 -> .b32); .pred stays .pred."""
        return BY_NAME[f"b{self.bits}"] if self.kind != "pred" else self

    def as_unsigned(self) -> "ScalarType":
        """The unsigned integer type of this width (integer and bit types; others unchanged)."""
        return self._int_kind("u")

    def as_signed(self) -> "ScalarType":
        """The signed integer type of this width (integer and bit types; others unchanged)."""
        return self._int_kind("s")

    def _int_kind(self, kind: str) -> "ScalarType":
        if self.kind not in ("u", "s", "b"):
            return self
        t = BY_NAME.get(f"{kind}{self.bits}")
        if t is None:
            from ..errors import ValidationError  # a ValueError too
            raise ValidationError(f".{self.name} has no {'un' if kind == 'u' else ''}signed integer counterpart: "
                                  f"PTX integers are 8 to 64 bits")
        return t


def _t(name, bits, kind, packed=False, lanes=1):
    return ScalarType(name, bits, kind, packed, lanes)


pred = _t("pred", 1, "pred")
b8, b16, b32, b64, b128 = (_t(f"b{n}", n, "b") for n in (8, 16, 32, 64, 128))
u8, u16, u32, u64 = (_t(f"u{n}", n, "u") for n in (8, 16, 32, 64))
s8, s16, s32, s64 = (_t(f"s{n}", n, "s") for n in (8, 16, 32, 64))
f16, f32, f64 = _t("f16", 16, "f"), _t("f32", 32, "f"), _t("f64", 64, "f")
bf16 = _t("bf16", 16, "f")
f16x2 = _t("f16x2", 32, "f", lanes=2)
bf16x2 = _t("bf16x2", 32, "f", lanes=2)
tf32 = _t("tf32", 32, "f", packed=True)  # only as an mma operand format
s4, u4 = _t("s4", 4, "s", packed=True), _t("u4", 4, "u", packed=True)
b1 = _t("b1", 1, "b", packed=True)
u16x2 = _t("u16x2", 32, "u", packed=True, lanes=2)  # two 16-bit integers in a .b32 register (add/min/max, sm_90)
s16x2 = _t("s16x2", 32, "s", packed=True, lanes=2)
e4m3 = _t("e4m3", 8, "f", packed=True)  # fp8 (1-4-3), only as an mma / wgmma / cvt operand format
e5m2 = _t("e5m2", 8, "f", packed=True)  # fp8 (1-5-2)

ALL = (pred, b8, b16, b32, b64, b128, u8, u16, u32, u64, s8, s16, s32, s64,
       f16, f32, f64, bf16, f16x2, bf16x2, tf32, s4, u4, b1, e4m3, e5m2, u16x2, s16x2)
BY_NAME = {t.name: t for t in ALL}

def decl_type(t: ScalarType) -> ScalarType:
    """The type a register holding `t` values is declared with: `.reg .b16` for bf16, `.reg .b32`
    for bf16x2 (PTX has no bf16 registers) and for the packed integer pairs u16x2 / s16x2, `t` itself for every
    other type."""
    if t is bf16:
        return b16
    if t is bf16x2 or t is u16x2 or t is s16x2:
        return b32
    return t


def wide_type(t: ScalarType) -> ScalarType:
    """The result type of `.wide` integer arithmetic on `t`: twice the width, signed for signed
    sources and unsigned otherwise (`mul.wide.s32` -> `.s64`, `mad.wide.u16` -> `.u32`; untyped
    bits count as unsigned).  `t` must be an 8-, 16- or 32-bit integer or bit type."""
    if t.kind not in ("u", "s", "b") or t.packed or t.bits > 32:
        from ..errors import ValidationError  # a ValueError too
        raise ValidationError(f".wide doubles 8-, 16- or 32-bit integers; .{t.name} has no wide type")
    return lookup(f"{'s' if t.kind == 's' else 'u'}{t.bits * 2}")


# numpy dtype <-> PTX type, for parameters and arrays.
_NUMPY = {
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "b8": np.uint8, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
    "f16": np.float16, "f32": np.float32, "f64": np.float64,
}


def is_integer(v) -> bool:
    """Whether `v` is a Python or numpy integer (a bool, Python's or numpy's, is none): what a size, count or
    alignment argument must be."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def int_range(t: ScalarType) -> tuple:
    """(least, greatest) value of integer type `t`: signed for .s, unsigned otherwise (.u, .b)."""
    if t.kind == "s":
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def numpy_dtype(t: ScalarType) -> np.dtype:
    """The numpy dtype that holds one value of `t` (packed types: their container byte)."""
    if t.name in _NUMPY:
        return np.dtype(_NUMPY[t.name])
    if t in (s4, u4, b1):
        return np.dtype(np.uint8)
    if t is bf16:
        return np.dtype(np.uint16)
    raise ValueError(f"no numpy dtype for .{t.name}")


def lookup(t: "ScalarType | str") -> ScalarType:
    """Accept a ScalarType or its name ('u32', '.u32')."""
    if isinstance(t, ScalarType):
        return t
    if isinstance(t, str):
        key = t.lstrip(".")
        if key in BY_NAME:
            return BY_NAME[key]
    from ..errors import ValidationError  # a ValueError too
    raise ValidationError(f"unknown PTX type {t!r}; known: {', '.join(sorted(BY_NAME))}")


def compatible(instr_type: ScalarType, reg_type: ScalarType) -> bool:
    """PTX operand type-compatibility rule.

    The register must have the instruction type's width; bit types go with
    anything of that width, signed and unsigned integers go together (not with
    the packed u16x2 / s16x2, which take bit registers), and floats go with
    floats of the same name or with bit types.
    """
    if instr_type is reg_type:
        return True
    ik, rk = instr_type.kind, reg_type.kind
    if ik == "pred" or rk == "pred":
        return ik == rk
    if instr_type.bits != reg_type.bits:
        return False
    if ik == "b" or rk == "b":
        return True
    if instr_type.lanes != reg_type.lanes:  # the packed integer pairs (u16x2) live in .b32 registers only
        return False
    if ik in ("u", "s") and rk in ("u", "s"):
        return True
    if ik == "f" and rk == "f":
        return instr_type.name == reg_type.name
    return False
