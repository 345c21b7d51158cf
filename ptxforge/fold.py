"""Integer-or-register arithmetic that folds constants while a kernel is written.

    from ptxforge import fold as F
    row = F.div(k, tid, 4)          # shr.u32 when tid is a register, tid // 4 when it is an int
    off = F.mad(k, row, 64, byte)   # shl + add, mad.lo, or a plain int

Kernel parts (tile copies, shared layouts, GEMM staging) take tile origins, bounds and strides
either as Python ints (known when the kernel is written) or as registers (known at run time).
Every function here takes the `KernelBuilder` `k` first, emits an instruction only when a register
is involved, picks shifts and masks for powers of two, and returns an int or a register.
"""

from __future__ import annotations

import numbers

from .errors import ValidationError, caller_loc, with_loc
from .isa import types as T
from .isa.operands import Reg

_PTXFORGE_INTERNAL = True


def is_reg(x) -> bool:
    """True when x is a register (a run-time value), False for a Python int."""
    return isinstance(x, Reg)


def is_pow2(n: int) -> bool:
    """True when the int n is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


def log2(n: int) -> int:
    """floor(log2(n)) of a positive int (the shift count of a power of two)."""
    return n.bit_length() - 1


def as_u32(k, x):
    """A u32 operand: ints stay ints; 64-bit registers are narrowed with cvt."""
    if is_reg(x) and x.type.bits == 64:
        return k.cvt(x, T.u32)
    return x


def add(k, a, b):
    """a + b: an int when both are ints, a itself when b is 0, else add (of the register's type)."""
    if not is_reg(a) and not is_reg(b):
        return a + b
    if not is_reg(a):
        a, b = b, a
    if not is_reg(b) and b == 0:
        return a
    return k.add(a, b)


def sub(k, a, b):
    """a - b: an int when both are ints, a itself when b is 0, else sub (of the register's type)."""
    if not is_reg(a) and not is_reg(b):
        return a - b
    if not is_reg(b) and b == 0:
        return a
    if not is_reg(a):
        return k.sub(a, b, type=b.type)
    return k.sub(a, b)


def _int_factor(n, what: str) -> int:
    """`n` as an int (Python or numpy integer); a located ValidationError for anything else."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise with_loc(ValidationError(f"{what} takes an int (known when the kernel is written), got {n!r} "
                                       f"({type(n).__name__}); for a float, use k.mul/k.div on a float register"),
                       caller_loc())
    return int(n)


def _int_reg(a, what: str):
    """`a` unchanged unless it is a register that is not an integer one: a located ValidationError then (the shifts
    and masks fold picks exist for integers only, and their own refusal would name shl/shr, not the fold call)."""
    if is_reg(a) and (a.type.is_float or a.type.is_pred):
        raise with_loc(ValidationError(f"{what} folds integer arithmetic; {a} (.{a.type.name}) is not an integer "
                                       f"register: for a float, call k.{what.split('.')[1]} on it"), caller_loc())
    return a


def _signed(a) -> bool:
    return a.type.kind == "s"


def _typed_dst(k, a):
    """A destination of `a`'s own type for a bit operation standing in for arithmetic (shl for mul, shr for
    div, and for rem), so a .s or .u register keeps its signedness; None (the operation's .b type) otherwise."""
    return k.reg(a.type) if a.type.kind in ("s", "u") else None


def _trunc_div(a: int, n: int) -> int:
    """a / n rounded toward zero, as PTX div (and C) compute it."""
    q = abs(a) // abs(n)
    return q if (a < 0) == (n < 0) else -q


def mul(k, a, n):
    """a * n with n an int: an int when a is one, else a register of a's own type (shl for powers of
    two, written into a register of a's type so that signedness is kept; mul.lo otherwise)."""
    n = _int_factor(n, "fold.mul")
    _int_reg(a, "fold.mul")
    if not is_reg(a):
        return a * n
    if n == 1:
        return a
    if n == 0:
        return 0
    if is_pow2(n):
        return k.shl(a, log2(n), dst=_typed_dst(k, a))
    return k.mul(a, n)


def _divisor(k, a, n, what):
    n = _int_factor(n, what)
    _int_reg(a, what)
    if n == 0:
        raise with_loc(ValidationError(f"{what}: division by zero"), caller_loc())
    if n < 0 and is_reg(a) and not _signed(a):
        raise with_loc(ValidationError(
            f"{what}: the divisor {n} is negative and {a} is .{a.type.name}: an unsigned division would read "
            f"{n} as {n & ((1 << a.type.bits) - 1)}; give a positive divisor or a signed (.s) register"),
            caller_loc())
    return n


def div(k, a, n):
    """a / n rounded toward zero, as PTX `div` does, with n a non-zero int: an int when a is one (C
    division: -7 / 2 == -3); for an unsigned register shr for powers of two, div.u otherwise (n must
    be positive); for a signed register div.s (which truncates; ptxas turns a constant divisor into
    shifts itself)."""
    n = _divisor(k, a, n, "fold.div")
    if not is_reg(a):
        return _trunc_div(a, n)
    if n == 1:
        return a
    if is_pow2(n) and not _signed(a):
        return k.shr(a, log2(n), dst=_typed_dst(k, a))
    return k.div(a, n)


def rem(k, a, n):
    """The remainder of a / n rounded toward zero (sign of a, as PTX `rem` and C `%` give it), n a
    non-zero int: an int when a is one (-7 % 2 == -1); for an unsigned register `and` with n-1 for
    powers of two, rem.u otherwise (n must be positive); for a signed register rem.s."""
    n = _divisor(k, a, n, "fold.rem")
    if not is_reg(a):
        return a - n * _trunc_div(a, n)
    if n in (1, -1):
        return 0
    if is_pow2(n) and not _signed(a):
        return k.and_(a, n - 1, dst=_typed_dst(k, a))
    return k.rem(a, n)


def mad(k, a, b, c):
    """a*b + c for any mix of ints and integer registers (in the registers' type: mad.lo, or shl/mul and add)."""
    for x in (a, b, c):
        _int_reg(x, "fold.mad")
    if not is_reg(a) and not is_reg(b):
        return add(k, c, a * b)
    if is_reg(a) and is_reg(b):
        return k.mad(a, b, c) if is_reg(c) or c != 0 else k.mul(a, b)
    r, n = (a, b) if is_reg(a) else (b, a)
    n = _int_factor(n, "fold.mad")
    if n == 0:
        return c
    if is_pow2(n) or not is_reg(c) and c == 0:
        return add(k, mul(k, r, n), c)
    return k.mad(r, n, c)


def wide(k, a, b):
    """a * b as a 64-bit value: int, or a 64-bit register (mul.wide.u32 / mul.wide.s32 / mul.lo.u64).

    An int factor of an unsigned register must not be negative (mul.wide.u32 would read -3 as
    4294967293); a signed register takes any int that fits .s32."""
    if not is_reg(a) and not is_reg(b):
        return a * b
    if not is_reg(a):
        a, b = b, a
    if not is_reg(b):
        b = _int_factor(b, "fold.wide")
        if b < 0 and not _signed(a):
            raise with_loc(ValidationError(
                f"fold.wide: the factor {b} is negative and {a} is .{a.type.name}: an unsigned multiply would "
                f"read {b} as {b & ((1 << a.type.bits) - 1)}; use a signed (.s32) register for a signed product"),
                caller_loc())
        if b == 0:
            return 0
        if a.type.bits == 64:
            return mul(k, a, b)
        if b == 1:
            return k.cvt(a, T.u64)
        return k.mul(a, b, mode="wide")
    if a.type.bits == 64 or b.type.bits == 64:
        a64 = a if a.type.bits == 64 else k.cvt(a, T.u64)
        b64 = b if b.type.bits == 64 else k.cvt(b, T.u64)
        return k.mul(a64, b64)
    return k.mul(a, b, mode="wide")


def add64(k, a, b):
    """a + b where a is a u64 register and b an int, a u32 register or a u64 register."""
    if not is_reg(b):
        return a if b == 0 else k.add(a, b)
    if b.type.bits == 32:
        b = k.cvt(b, T.u64)
    return k.add(a, b)
