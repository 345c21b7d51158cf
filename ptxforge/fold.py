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


def mul(k, a, n):
    """a * n with n an int (shift for powers of two)."""
    if not is_reg(a):
        return a * n
    if n == 1:
        return a
    if n == 0:
        return 0
    if is_pow2(n):
        return k.shl(a, log2(n))
    return k.mul(a, n)


def div(k, a, n):
    """a // n with n a positive int: shr.u32 for powers of two, div otherwise (unsigned a)."""
    if not is_reg(a):
        return a // n
    if n == 1:
        return a
    if is_pow2(n):
        return k.shr(a, log2(n))
    return k.div(a, n)


def rem(k, a, n):
    """a % n with n a positive int: and with n-1 for powers of two, rem otherwise (unsigned a)."""
    if not is_reg(a):
        return a % n
    if n == 1:
        return 0
    if is_pow2(n):
        return k.and_(a, n - 1)
    return k.rem(a, n)


def mad(k, a, b, c):
    """a*b + c (32-bit) for any mix of ints and registers."""
    if not is_reg(a) and not is_reg(b):
        return add(k, c, a * b)
    if is_reg(a) and is_reg(b):
        return k.mad(a, b, c) if is_reg(c) or c != 0 else k.mul(a, b)
    r, n = (a, b) if is_reg(a) else (b, a)
    if n == 0:
        return c
    if is_pow2(n) or not is_reg(c) and c == 0:
        return add(k, mul(k, r, n), c)
    return k.mad(r, n, c)


def wide(k, a, b):
    """a * b as a 64-bit value: int, or a u64 register (mul.wide.u32 / mul.lo.u64)."""
    if not is_reg(a) and not is_reg(b):
        return a * b
    if not is_reg(a):
        a, b = b, a
    if not is_reg(b):
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
