"""Bit logic: and or xor not cnot, shl shr, lop3, prmt, shf, bfe bfi, popc clz brev bfind."""

from __future__ import annotations

from ..errors import ValidationError
from . import types as T
from .arith import infer_type
from .instruction import check_dst, check_value, make
from .operands import Imm

_PTXFORGE_INTERNAL = True

LOGIC_TYPES = (T.pred, T.b16, T.b32, T.b64)
SHIFT_TYPES = {"shl": (T.b16, T.b32, T.b64),
               "shr": (T.b16, T.b32, T.b64, T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)}
PRMT_MODES = ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")
BITFIELD = {
    "bfe": (T.u32, T.u64, T.s32, T.s64),
    "bfi": (T.b32, T.b64),
    "popc": (T.b32, T.b64),
    "clz": (T.b32, T.b64),
    "brev": (T.b32, T.b64),
    "bfind": (T.u32, T.u64, T.s32, T.s64),
}


def _types_msg(ts):
    return ", ".join("." + t.name for t in ts)


def logic(opcode, t, d, srcs):
    if opcode == "cnot" and t.is_pred:
        raise ValidationError("cnot has no .pred form; use not.pred (or xor with 1)")
    if t not in LOGIC_TYPES:
        # integer registers are fine with a bit type of the same width
        bt = t.bits_type() if not t.is_float else None
        if bt not in LOGIC_TYPES:
            raise ValidationError(f"{opcode} takes {_types_msg(LOGIC_TYPES)}, not .{t.name}")
        t = bt
    check_dst(d, t, f"{opcode} destination")
    for i, s in enumerate(srcs):
        check_value(s, t, f"{opcode} source {i + 1}")
    return make(opcode, (opcode, t.name), (d, *srcs), n_dst=1, type=t)


def shift(opcode, t, d, a, n):
    if t not in SHIFT_TYPES[opcode]:
        if opcode == "shl" and not t.is_float and t.bits_type() in SHIFT_TYPES["shl"]:
            t = t.bits_type()
        else:
            raise ValidationError(f"{opcode} takes {_types_msg(SHIFT_TYPES[opcode])}, not .{t.name}")
    check_dst(d, t, f"{opcode} destination")
    check_value(a, t, f"{opcode} source")
    check_value(n, T.u32, f"{opcode} shift amount")
    return make(opcode, (opcode, t.name), (d, a, n), n_dst=1, type=t)


def lop3(d, a, b, c, lut: int):
    if not isinstance(lut, int) or not 0 <= lut <= 255:
        raise ValidationError(f"lop3 lookup table must be an int in 0..255, got {lut!r}")
    for i, x in enumerate((a, b, c)):
        check_value(x, T.b32, f"lop3 source {i + 1}")
    check_dst(d, T.b32, "lop3 destination")
    return make("lop3", ("lop3", "b32"), (d, a, b, c, Imm(lut)), n_dst=1, type=T.b32, info=lut)


def lut_of(fn) -> int:
    """The lop3 lookup table of a Python function of three ints: fn(0xF0, 0xCC, 0xAA) & 0xFF."""
    return fn(0xF0, 0xCC, 0xAA) & 0xFF


def prmt(d, a, b, c, mode=None):
    if mode is not None and mode not in PRMT_MODES:
        raise ValidationError(f"prmt mode must be one of {PRMT_MODES}, got {mode!r}")
    for i, x in enumerate((a, b, c)):
        check_value(x, T.b32, f"prmt source {i + 1}")
    check_dst(d, T.b32, "prmt destination")
    return make("prmt", ("prmt", "b32", mode), (d, a, b, c), n_dst=1, type=T.b32,
                mods=(mode,) if mode else ())


def shf(direction, d, a, b, c, mode="wrap"):
    if direction not in ("l", "r"):
        raise ValidationError(f"shf direction is 'l' or 'r', got {direction!r}")
    if mode not in ("wrap", "clamp"):
        raise ValidationError(f"shf mode is 'wrap' or 'clamp', got {mode!r}")
    check_dst(d, T.b32, "shf destination")
    check_value(a, T.b32, "shf low word")
    check_value(b, T.b32, "shf high word")
    check_value(c, T.u32, "shf shift amount")
    return make("shf", ("shf", direction, mode, "b32"), (d, a, b, c), n_dst=1, type=T.b32,
                mods=(direction, mode))


def bitfield(opcode, t, d, srcs):
    legal = BITFIELD[opcode]
    if t not in legal:
        alt = t.bits_type() if opcode in ("bfi", "popc", "clz", "brev") and not t.is_float else None
        if alt not in legal:
            raise ValidationError(f"{opcode} takes {_types_msg(legal)}, not .{t.name}")
        t = alt
    dt = T.u32 if opcode in ("popc", "clz", "bfind") else t
    check_dst(d, dt, f"{opcode} destination")
    n_pos = {"bfe": 1, "bfi": 2}.get(opcode)
    if n_pos is not None:
        for i, role in ((n_pos, "position"), (n_pos + 1, "length")):
            x = srcs[i]
            if isinstance(x, Imm) and isinstance(x.value, int) and not 0 <= x.value <= 255:
                raise ValidationError(f"{opcode} {role} {x.value} is outside 0..255 (ptxas takes an 8-bit "
                                      "immediate; wider fields are pointless anyway)")
    if opcode == "bfe":
        check_value(srcs[0], t, "bfe source")
        check_value(srcs[1], T.u32, "bfe position")
        check_value(srcs[2], T.u32, "bfe length")
    elif opcode == "bfi":
        check_value(srcs[0], t, "bfi field")
        check_value(srcs[1], t, "bfi base")
        check_value(srcs[2], T.u32, "bfi position")
        check_value(srcs[3], T.u32, "bfi length")
    else:
        check_value(srcs[0], t, f"{opcode} source")
    return make(opcode, (opcode, t.name), (d, *srcs), n_dst=1, type=t)


class BitOps:
    def _logic(self, opcode, srcs, type, dst, pred):
        srcs = [self._val(s) for s in srcs]
        t = infer_type(type, *srcs)
        if not t.is_pred and not t.is_float:
            t = t.bits_type()
        srcs = [self._val(s, t) for s in srcs]
        d = self._dst(dst, t)
        self.emit(logic(opcode, t, d, srcs), pred)
        return d

    def and_(self, a, b, *, type=None, dst=None, pred=None):
        return self._logic("and", (a, b), type, dst, pred)

    def or_(self, a, b, *, type=None, dst=None, pred=None):
        return self._logic("or", (a, b), type, dst, pred)

    def xor(self, a, b, *, type=None, dst=None, pred=None):
        return self._logic("xor", (a, b), type, dst, pred)

    def not_(self, a, *, type=None, dst=None, pred=None):
        return self._logic("not", (a,), type, dst, pred)

    def cnot(self, a, *, type=None, dst=None, pred=None):
        return self._logic("cnot", (a,), type, dst, pred)

    def _shift(self, opcode, a, n, type, dst, pred):
        a = self._val(a)
        t = infer_type(type, a)
        if opcode == "shl" and not t.is_float:
            t = t.bits_type()
        d = self._dst(dst, t)
        self.emit(shift(opcode, t, d, self._val(a, t), self._val(n, T.u32)), pred)
        return d

    def shl(self, a, n, *, type=None, dst=None, pred=None):
        return self._shift("shl", a, n, type, dst, pred)

    def shr(self, a, n, *, type=None, dst=None, pred=None):
        """Logical shift for .u/.b types, arithmetic for .s types."""
        return self._shift("shr", a, n, type, dst, pred)

    def lop3(self, a, b, c, lut, *, dst=None, pred=None):
        """Any 3-input logic function; `lut` is an int or a function f(a, b, c) of Python ints."""
        if callable(lut):
            lut = lut_of(lut)
        d = self._dst(dst, T.b32)
        self.emit(lop3(d, self._val(a, T.b32), self._val(b, T.b32), self._val(c, T.b32), lut), pred)
        return d

    def prmt(self, a, b, selector, *, mode=None, dst=None, pred=None):
        d = self._dst(dst, T.b32)
        self.emit(prmt(d, self._val(a, T.b32), self._val(b, T.b32), self._val(selector, T.b32), mode), pred)
        return d

    def shf(self, direction, lo, hi, n, *, mode="wrap", dst=None, pred=None):
        """Funnel shift of the 64-bit pair {hi, lo}."""
        d = self._dst(dst, T.b32)
        self.emit(shf(direction, d, self._val(lo, T.b32), self._val(hi, T.b32), self._val(n, T.u32), mode),
                  pred)
        return d

    def _bitfield(self, opcode, srcs, type, dst, pred):
        srcs = [self._val(s) for s in srcs]
        t = infer_type(type, *srcs)
        if opcode in ("bfi", "popc", "clz", "brev") and not t.is_float:
            t = t.bits_type()
        srcs = [self._val(s, t if i < (2 if opcode == "bfi" else 1) else T.u32) for i, s in enumerate(srcs)]
        d = self._dst(dst, T.u32 if opcode in ("popc", "clz", "bfind") else t)
        self.emit(bitfield(opcode, t, d, srcs), pred)
        return d

    def bfe(self, a, pos, length, *, type=None, dst=None, pred=None):
        return self._bitfield("bfe", (a, pos, length), type, dst, pred)

    def bfi(self, field, base, pos, length, *, type=None, dst=None, pred=None):
        return self._bitfield("bfi", (field, base, pos, length), type, dst, pred)

    def popc(self, a, *, type=None, dst=None, pred=None):
        return self._bitfield("popc", (a,), type, dst, pred)

    def clz(self, a, *, type=None, dst=None, pred=None):
        return self._bitfield("clz", (a,), type, dst, pred)

    def brev(self, a, *, type=None, dst=None, pred=None):
        return self._bitfield("brev", (a,), type, dst, pred)

    def bfind(self, a, *, type=None, dst=None, pred=None):
        return self._bitfield("bfind", (a,), type, dst, pred)
