"""What every decoder shares: the deferred constructor `Call`, the `Unknown` error, and the small
readers of operand lists (a fixed count, an immediate integer, a lane mask)."""

from __future__ import annotations

from ..errors import ValidationError
from ..isa import types as T
from ..isa.operands import Imm

_PTXFORGE_INTERNAL = True


class Unknown(ValidationError):
    """The tables have no instruction of this name (as opposed to an illegal form of a known one)."""


class Call:
    """A constructor call not yet made: `fn(*args, **kwargs)`; arguments may be Calls themselves.

    Decoders return one, `decode` runs it, and `to_python` writes it out as Python source.
    """

    __slots__ = ("fn", "args", "kwargs", "_value")

    def __init__(self, fn, *args, **kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self._value = None

    def run(self):
        """Make the call (once; the result is kept) and return its value."""
        if self._value is None:
            self._value = self.fn(*self.args, **self.kwargs)
        return self._value


class NestedCall(Call):
    """A Call some of whose arguments are Calls (run first): mma(mma_form(...), ...)."""

    __slots__ = ()

    def run(self):
        """Run the argument Calls first, then make this call (once) and return its value."""
        if self._value is None:
            args = [a.run() if isinstance(a, Call) else a for a in self.args]
            self._value = self.fn(*args, **self.kwargs)
        return self._value


def _t(name):
    return T.lookup(name)


def _n(ops, k, what):
    if len(ops) != k:
        raise ValidationError(f"{what} takes {k} operand(s), got {len(ops)}")
    return ops


def _int(op, what):
    if isinstance(op, Imm) and isinstance(op.value, int):
        return op.value
    raise ValidationError(f"{what} must be an immediate integer, got {op}")


def _int_or_reg(op):
    return op.value if isinstance(op, Imm) and isinstance(op.value, int) else op


def _mask(op):
    """A 32-bit lane mask written as -1 (nvcc does) is 0xFFFFFFFF."""
    if isinstance(op, Imm) and isinstance(op.value, int) and op.value < 0:
        return op.value & 0xFFFFFFFF
    return _int_or_reg(op)
