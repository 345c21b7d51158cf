"""Calls to device functions: `call{.uni} (ret, ...), func, (arg, ...);`.

Arguments and return values travel through `.param` variables: a caller declares them in a
`{ ... }` scope around the call and writes them with `st.param`; a device function writes its
return value with `st.param` to its return parameter.  Those are the only `.param` variables
a store may name (`CallParam`); a kernel's own parameters stay read-only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from .instruction import make
from .operands import Operand, Symbol
from .targets import BASE

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True, slots=True)
class CallParam(Symbol):
    """A writable `.param` variable: a call argument, a call's return slot, or a device function's
    return parameter (`st.param` may name it)."""


@dataclass(frozen=True, slots=True)
class FuncRef(Operand):
    """The name of a device function (`.func`) as a call target."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ArgList(Operand):
    """A parenthesized list of `.param` variables: `(param0, param1)`."""

    items: tuple

    def __str__(self) -> str:
        return "(" + ", ".join(str(x) for x in self.items) + ")"


@dataclass(frozen=True)
class CallInfo:
    """What a call names: the function, its return slots and its arguments."""

    func: str
    returns: tuple
    args: tuple
    uni: bool = False


def call(func: FuncRef, args=(), returns=(), uni: bool = False, prototype=None):
    """`call{.uni} (r0, ...), func, (a0, ...);` to a device function.

    `args` and `returns` are `.param` Symbols (call-scope variables declared by the caller).  When
    `prototype` is given (the callee's (returns, params) as Param lists) the counts must agree.
    """
    if not isinstance(func, FuncRef):
        raise ValidationError(f"call needs a device function name, got {func!r}")
    for what, items in (("argument", args), ("return value", returns)):
        for x in items:
            if not isinstance(x, Symbol) or x.space != "param":
                raise ValidationError(f"call {what} {x} must be a .param variable declared for the call")
    if prototype is not None:
        want_ret, want_args = prototype
        if len(want_args) != len(args) or len(want_ret) != len(returns):
            raise ValidationError(
                f"call {func.name}: the function takes {len(want_args)} argument(s) and returns "
                f"{len(want_ret)} value(s); the call passes {len(args)} and receives {len(returns)}")
    ops = []
    if returns:
        ops.append(ArgList(tuple(returns)))
    ops.append(func)
    if args:
        ops.append(ArgList(tuple(args)))
    return make("call", ("call", "uni" if uni else None), ops, n_dst=0, req=BASE,
                info=CallInfo(func.name, tuple(returns), tuple(args), uni), mods=("uni",) if uni else ())
