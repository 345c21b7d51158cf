"""PTX operands: registers, register vectors, immediates, symbols, addresses, labels, guards.

Operands are immutable values.  `str(op)` is the PTX spelling.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .quick_init import quick_init
from .targets import Requirement, V
from .types import ScalarType

_PTXFORGE_INTERNAL = True


class Operand:
    """The base of every PTX operand type (registers, immediates, addresses, labels ...); rendering with
    ``str()`` gives the PTX spelling.
    """
    __slots__ = ()


@quick_init
@dataclass(frozen=True, slots=True)
class Reg(Operand):
    """A virtual register of one kernel."""

    name: str  # without the leading '%'
    type: ScalarType
    owner: int = 0  # id of the KernelBuilder that allocated it
    kernel: str = ""

    def __str__(self) -> str:
        return "%" + self.name

    def __invert__(self) -> "Guard":
        if not self.type.is_pred:
            raise ValidationError(f"~{self} negates a guard, but {self} is .{self.type.name}, not .pred")
        return Guard(self, True)

    def __repr__(self) -> str:
        return f"Reg(%{self.name}: .{self.type.name})"


@quick_init
@dataclass(frozen=True, slots=True)
class SpecialReg(Operand):
    """A read-only special register such as %tid.x."""

    name: str  # e.g. "tid.x"
    type: ScalarType

    def __str__(self) -> str:
        return "%" + self.name


@quick_init
@dataclass(frozen=True, slots=True)
class Vec(Operand):
    """A brace list of registers: `{%a0, %a1, %a2, %a3}`."""

    regs: tuple

    def __str__(self) -> str:
        return "{" + ", ".join(map(str, self.regs)) + "}"

    def __len__(self) -> int:
        return len(self.regs)

    def __iter__(self):
        return iter(self.regs)

    def __getitem__(self, i):
        return self.regs[i]


#: The 16-bit float formats: name -> (exponent bits, fraction bits).
HALF_FORMATS = {"f16": (5, 10), "bf16": (8, 7)}


def half_bits(value, t: ScalarType) -> int | None:
    """The bit pattern of the number `value` as the 16-bit float type `t` (.f16, .bf16), rounded once to nearest
    even; for the pairs .f16x2 / .bf16x2 the same value in both halves (the 32-bit pattern, low half first).
    NaN gives the format's quiet NaN; None when a finite value is beyond the type's range.

    PTX has no 16-bit float literal: a constant for a half register is this pattern in a `mov.b16` (`mov.b32`
    for a pair).
    """
    name = t.name[:-2] if t.lanes == 2 else t.name
    ebits, mbits = HALF_FORMATS[name]
    x = float(value)
    top = (1 << ebits) - 1  # the all-ones exponent: infinity and NaN
    if math.isnan(x):
        one = top << mbits | 1 << (mbits - 1)
    else:
        sign = (1 << (ebits + mbits)) if math.copysign(1.0, x) < 0 else 0
        x = abs(x)
        if math.isinf(x):
            one = sign | top << mbits
        elif x == 0:
            one = sign
        else:
            bias = (1 << (ebits - 1)) - 1
            exp = max(math.frexp(x)[1] - 1, 1 - bias)  # x's binade; subnormals share the least normal one
            n = round(math.ldexp(x, mbits - exp))  # the significand in units of the last place, to nearest even
            biased = exp + bias if n >= 1 << mbits else 0
            if n >= 1 << (mbits + 1):  # rounded up into the next binade
                biased, n = biased + 1, n >> 1
            if biased >= top:
                return None
            one = sign | biased << mbits | (n & ((1 << mbits) - 1))
    return one | one << 16 if t.lanes == 2 else one


def half_pattern(value, t: ScalarType, what: str) -> int:
    """`half_bits(value, t)`, or a ValidationError naming `what` when the number is beyond `t`'s range: the
    pattern a number written as .f16 / .bf16 (or a pair) takes, `mov` and `st` alike."""
    bits = half_bits(value, t)
    if bits is None:
        raise ValidationError(f"{what}: {value!r} is beyond the range of .{t.name}; for a raw bit pattern write "
                              f"type=\"b{t.bits}\"")
    return bits


@quick_init
@dataclass(frozen=True, slots=True)
class Imm(Operand):
    """An immediate; rendered exactly (floats as 0f/0d hex, so no rounding surprises)."""

    value: int | float
    type: ScalarType | None = None

    def __str__(self) -> str:
        t, v = self.type, self.value
        if t is not None and t.is_float:
            if t.bits == 64:
                return "0d%016X" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]
            if t.name in HALF_FORMATS or t.lanes == 2:  # PTX has no 16-bit float literal: the bit pattern
                bits = half_bits(v, t)
                return "0x%0*X" % (t.bits // 4, bits if bits is not None else 0)
            return "0f%08X" % struct.unpack("<I", struct.pack("<f", float(v)))[0]
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, float):
            if not v.is_integer():
                return "0d%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
            v = int(v)
        if v >= 4096:
            return "0x%X" % v
        return str(v)

    def fits(self, t: ScalarType) -> bool:
        """Whether the literal is representable as `t` (integers: as a signed or unsigned bit pattern)."""
        if t.is_float:
            if not isinstance(self.value, (int, float)) or isinstance(self.value, bool):
                return False
            if t.bits == 64:
                try:
                    float(self.value)
                except OverflowError:
                    return False
                return True
            if t.name in HALF_FORMATS or t.lanes == 2:
                try:
                    return half_bits(self.value, t) is not None
                except OverflowError:
                    return False
            # f32 immediates must be representable as f32
            try:
                struct.pack("<f", float(self.value))
            except (OverflowError, struct.error):
                return False
            return True
        if not isinstance(self.value, int):
            return False
        return -(1 << (t.bits - 1)) <= self.value <= (1 << t.bits) - 1


@quick_init
@dataclass(frozen=True, slots=True)
class Symbol(Operand):
    """A named variable: a shared-memory array, a kernel parameter, a global."""

    name: str
    space: str  # "shared", "param", "global"
    type: ScalarType = T.b8
    nbytes: int | None = None  # None: unsized (dynamic shared memory)
    align: int = 1
    owner: int = 0

    def __str__(self) -> str:
        return self.name


@quick_init
@dataclass(frozen=True, slots=True)
class SymbolOffset(Operand):
    """The address of a variable plus a byte offset, as a value (`mov.u64 %rd, tile+16`, `cvta.shared.u64 %rd,
    tile+16`): the ISA's `var+imm` operand.  ptxas reads `tile-16` as a syntax error, so a negative offset is
    written `tile+-16`."""

    symbol: Symbol
    offset: int

    def __str__(self) -> str:
        return f"{self.symbol.name}+{self.offset}"

    @property
    def name(self) -> str:
        """The variable's name."""
        return self.symbol.name

    @property
    def space(self) -> str:
        """The variable's state space."""
        return self.symbol.space


@quick_init
@dataclass(frozen=True, slots=True)
class Addr(Operand):
    """A memory operand `[base+offset]`; base is a register, a symbol or an absolute int."""

    base: Reg | Symbol | int
    offset: int = 0

    def __str__(self) -> str:
        if isinstance(self.base, int):
            return f"[{self.base + self.offset}]"
        if self.offset > 0:
            return f"[{self.base}+{self.offset}]"
        if self.offset < 0:
            return f"[{self.base}+{self.offset}]"  # ptxas reads [%r-8] as a syntax error
        return f"[{self.base}]"

    def __add__(self, delta: int) -> "Addr":
        return Addr(self.base, self.offset + int(delta))


@quick_init
@dataclass(frozen=True, slots=True)
class TensorAddr(Operand):
    """`[tmap, {c0, c1, ...}]`: a tensor-map address with coordinates (bulk tensor copies)."""

    tmap: Reg | Symbol
    coords: tuple

    def __str__(self) -> str:
        return f"[{self.tmap}, {{{', '.join(str(c) for c in self.coords)}}}]"


@quick_init
@dataclass(frozen=True, slots=True)
class Label(Operand):
    """A branch target of one kernel, rendered as ``$L_name``; made by `KernelBuilder.label` and placed with
    `KernelBuilder.place`.
    """
    name: str  # rendered as $L_<name>
    owner: int = 0

    def __str__(self) -> str:
        return "$L_" + self.name


@quick_init
@dataclass(frozen=True, slots=True)
class Guard:
    """`@%p` or `@!%p` in front of an instruction."""

    reg: Reg
    negate: bool = False

    def __str__(self) -> str:
        return ("@!" if self.negate else "@") + str(self.reg)

    def __invert__(self) -> "Guard":
        return Guard(self.reg, not self.negate)


@quick_init
@dataclass(frozen=True, slots=True)
class NegPred(Operand):
    """`!%p` as a source operand (setp combine, cp.async ignore-src)."""

    reg: Reg

    def __str__(self) -> str:
        return "!" + str(self.reg)


@quick_init
@dataclass(frozen=True, slots=True)
class PairDst(Operand):
    """`%r|%p`: a destination paired with a predicate (shfl in-range flag, elect.sync)."""

    reg: object
    pred: Reg

    def __str__(self) -> str:
        return f"{self.reg}|{self.pred}"


@quick_init
@dataclass(frozen=True, slots=True)
class Discard(Operand):
    """`_`: a sink destination (mbarrier.arrive state, etc.)."""

    def __str__(self) -> str:
        return "_"


DISCARD = Discard()

#: The PTX ISA's predefined constants: `WARP_SZ`, the threads of a warp, which PTX lets stand where an
#: immediate may (nvcc writes `mov.u32 %r, WARP_SZ;` for the width of `__shfl_*_sync`).  The PTX ISA calls it
#: a run-time constant without giving it a type; ptxas takes it as an integer immediate, and on every target
#: ptxforge knows it is 32, so the reader reads it as that immediate.
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}

SPECIAL_REGISTERS = {
    # .w: the fourth component of these .v4 registers, which ptxas takes and reads as 0
    **{f"{n}.{d}": T.u32 for n in ("tid", "ntid", "ctaid", "nctaid") for d in "xyzw"},
    **{f"{n}.{d}": T.u32 for n in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid")
       for d in "xyzw"},
    "laneid": T.u32, "warpid": T.u32, "nwarpid": T.u32, "smid": T.u32, "nsmid": T.u32,
    "gridid": T.u64, "clock": T.u32, "clock64": T.u64, "globaltimer": T.u64,
    "lanemask_eq": T.u32, "lanemask_le": T.u32, "lanemask_lt": T.u32,
    "lanemask_ge": T.u32, "lanemask_gt": T.u32,
    "dynamic_smem_size": T.u32, "total_smem_size": T.u32,
    "cluster_ctarank": T.u32, "cluster_nctarank": T.u32, "is_explicit_cluster": T.pred,
    **{f"envreg{i}": T.b32 for i in range(32)},  # driver-set values (grid-sync workspace, ...)
    **{f"pm{i}": T.u32 for i in range(8)}, **{f"pm{i}_64": T.u64 for i in range(8)},  # performance counters
    "clock_hi": T.u32, "globaltimer_lo": T.u32, "globaltimer_hi": T.u32,
    "aggr_smem_size": T.u32, "current_graph_exec": T.u64,
    **{f"reserved_smem_offset_{n}": T.b32 for n in ("begin", "end", "cap", "0", "1")},
}

# Special registers that only exist on sm_90 and newer.
SM90_SPECIAL = frozenset(n for n in SPECIAL_REGISTERS if n.startswith("cluster")
                         or n.startswith("ncluster") or n == "is_explicit_cluster")


#: What reading a special register needs beyond the base (least sm, least PTX ISA).
SPECIAL_REQUIREMENTS = {
    **{n: Requirement(90, V("7.8")) for n in SM90_SPECIAL},
    "aggr_smem_size": Requirement(90, V("8.1")),
    "current_graph_exec": Requirement(80, V("8.0")),
    **{f"reserved_smem_offset_{n}": Requirement(80, V("7.6")) for n in ("begin", "end", "cap", "0", "1")},
}


def special(name: str) -> SpecialReg:
    """The special register ``%name`` (``tid.x``, ``laneid``, ``clock64`` ...) with its type; the error lists the
    known ones.
    """
    key = name.lstrip("%")
    if key not in SPECIAL_REGISTERS:
        raise ValidationError(
            f"%{key} is not a PTX special register; known: "
            + ", ".join("%" + n for n in sorted(SPECIAL_REGISTERS)))
    return SpecialReg(key, SPECIAL_REGISTERS[key])


def reg_list(x) -> tuple:
    """Flatten a Vec, tuple/list of registers or single register into a tuple of registers."""
    if isinstance(x, Vec):
        return x.regs
    if isinstance(x, (list, tuple)):
        out = []
        for r in x:
            out.extend(reg_list(r))
        return tuple(out)
    return (x,)
