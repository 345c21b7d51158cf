"""Calls to device functions, `call{.uni} (ret, ...), func, (arg, ...);`, and indexed branches,
`brx.idx{.uni} index, tlist;` through a `.branchtargets` list.

Arguments and return values travel through `.param` variables: a caller declares them in a
`{ ... }` scope around the call and writes them with `st.param`; a device function writes its
return value with `st.param` to its return parameter.  Those are the only `.param` variables
a store may name (`CallParam`); a kernel's own parameters stay read-only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from .instruction import make
from .operands import Imm, Label, Operand, Reg, Symbol
from .targets import BASE, Requirement, V
from .types import is_integer

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


@dataclass(frozen=True, slots=True)
class CallPrototype(Operand):
    """A `.callprototype` of an indirect call, `name: .callprototype (.param .f32 _) _ (.param .u32 _);`:
    the signature a call through a register promises (`returns`, `params`: Param values; it
    renders as its name)."""

    name: str
    returns: tuple = ()
    params: tuple = ()

    def __str__(self) -> str:
        return self.name

    def declaration(self) -> str:
        """The prototype's declaration line in the call scope: each entry as its declaration with the name `_`, a
        `.b8` array (a structure by value) keeping its size, `.param .align 8 .b8 _[16]` (without it ptxas finds
        the argument's type different from the formal parameter's)."""
        def one(p):
            if p.nbytes is not None:
                return f".param .align {p.align or 1} .b8 _[{p.nbytes}]"
            return p.render().rsplit(" ", 1)[0] + " _"
        head = f"{self.name}: .callprototype "
        if self.returns:
            head += "(" + ", ".join(one(p) for p in self.returns) + ") "
        return head + "_ (" + ", ".join(one(p) for p in self.params) + ");"


@dataclass(frozen=True)
class CallInfo:
    """What a call names: the function (its name, or the register of an indirect call), its return
    slots and its arguments, and an indirect call's prototype."""

    func: object  # str, or the Reg of an indirect call
    returns: tuple
    args: tuple
    uni: bool = False
    prototype: object = None  # CallPrototype of an indirect call


def call(func, args=(), returns=(), uni: bool = False, prototype=None, targets=None):
    """`call{.uni} (r0, ...), func, (a0, ...);` to a device function, or through a register:
    `call (r0, ...), %rd, (a0, ...), proto;`.

    `func` is a `FuncRef`, or a 64-bit register holding a function's address (`mov.u64 %rd, f`)
    together with `targets`, the `CallPrototype` the call promises.  `args` and `returns` are
    `.param` Symbols (call-scope variables declared by the caller), or, for a function with `.reg` parameters,
    registers (and immediate arguments).  When `prototype` is given
    (the callee's (returns, params) as Param lists) the counts must agree.
    """
    indirect = isinstance(func, Reg)
    if indirect:
        if func.type.bits != 64 or func.type.is_float or func.type.is_pred:
            raise ValidationError(f"an indirect call goes through a 64-bit register, got {func} (.{func.type.name})")
        if not isinstance(targets, CallPrototype):
            raise ValidationError("a call through a register names its .callprototype (targets=)")
        prototype = prototype or (targets.returns, targets.params)
    elif not isinstance(func, FuncRef):
        raise ValidationError(f"call needs a device function name, got {func!r}")
    elif targets is not None:
        raise ValidationError(f"call {func.name}: a .callprototype belongs to a call through a register")
    for what, items in (("argument", args), ("return value", returns)):
        for x in items:
            if isinstance(x, Reg) and not x.type.is_pred or what == "argument" and type(x) is Imm:
                continue  # the value of a .reg parameter (ptxas takes a register or an immediate for it)
            if not isinstance(x, Symbol) or x.space != "param":
                raise ValidationError(f"call {what} {x} must be a .param variable declared for the call, or a "
                                      f"register{' or an immediate' if what == 'argument' else ''} (.reg parameters)")
    if prototype is not None:
        want_ret, want_args = prototype
        if len(want_args) != len(args) or len(want_ret) != len(returns):
            raise ValidationError(
                f"call {func if indirect else func.name}: the function takes {len(want_args)} argument(s) and returns "
                f"{len(want_ret)} value(s); the call passes {len(args)} and receives {len(returns)}")
    ops = []
    if returns:
        ops.append(ArgList(tuple(returns)))
    ops.append(func)
    if args or indirect:
        ops.append(ArgList(tuple(args)))
    if indirect:
        ops.append(targets)
    name = func if indirect else func.name
    return make("call", ("call", "uni" if uni else None), ops, n_dst=0, req=BASE,
                info=CallInfo(name, tuple(returns), tuple(args), uni, targets), mods=("uni",) if uni else ())


@dataclass(frozen=True, slots=True)
class BranchTargets(Operand):
    """A `.branchtargets` list, `name: .branchtargets L0, L1, ...;`: the operand of `brx.idx`
    (it renders as its name; `labels` are the targets in index order)."""

    name: str
    labels: tuple

    def __str__(self) -> str:
        return self.name

    def declaration(self) -> str:
        """The list's declaration line in the body."""
        return f"{self.name}: .branchtargets {', '.join(str(x) for x in self.labels)};"


#: brx.idx is PTX ISA 6.0, sm_30 and newer (every target ptxforge writes).
REQ_BRX = Requirement(30, V("6.0"))


def brx_idx(index, targets: BranchTargets, uni: bool = False):
    """`brx.idx{.uni} index, tlist;`: branch to label `index` of the `.branchtargets` list (pure:
    no builder).  `index` is a 32-bit integer register (or an immediate); an index past the
    list is undefined behaviour in PTX.  `uni` promises every thread of the warp takes the same
    target."""
    if not isinstance(targets, BranchTargets) or not targets.labels:
        raise ValidationError(f"brx.idx needs a non-empty .branchtargets list, got {targets!r}")
    for x in targets.labels:
        if not isinstance(x, Label):
            raise ValidationError(f"brx.idx: {x!r} in {targets.name} is not a label")
    if isinstance(index, Reg):
        if index.type.is_pred or index.type.is_float or index.type.bits != 32:
            raise ValidationError(f"brx.idx index {index} is .{index.type.name}; it takes a .u32 register")
    elif not isinstance(index, Imm) or not is_integer(index.value) or index.value < 0:
        raise ValidationError(f"brx.idx index must be a .u32 register or a non-negative integer, got {index!r}")
    elif index.value >= len(targets.labels):
        raise ValidationError(f"brx.idx index {index.value} is past {targets.name}'s {len(targets.labels)} labels "
                              f"(0 to {len(targets.labels) - 1}; a jump past the list is undefined behaviour)")
    return make("brx.idx", ("brx", "idx", "uni" if uni else None), (index, targets), n_dst=0, req=REQ_BRX,
                info=targets.labels, mods=("uni",) if uni else ())
