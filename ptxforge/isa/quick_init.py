"""A cheaper constructor for the frozen value classes made once per emitted instruction.

A frozen dataclass stores each field with ``object.__setattr__(self, name, value)`` (its own
``__setattr__`` refuses), a generic call that looks the attribute up by name every time.  The
classes built for every instruction (`Instruction`, `Reg`, `Imm`, `Vec`, `Addr`, a load's `MemInfo`,
a merged `Requirement` ...) are made thousands of times per kernel, so `quick_init` gives such a
class an ``__init__`` that stores each field directly (through its slot descriptor, or into the
instance dictionary of a class without slots): the same fields, defaults and order, still frozen
afterwards, about half the cost.
"""

from __future__ import annotations

import dataclasses

_PTXFORGE_INTERNAL = True


def quick_init(cls):
    """Class decorator, applied above ``@dataclass(frozen=True)`` (slotted or not): replace the generated
    ``__init__`` by one that writes each field through its slot descriptor or into the instance dictionary.

    Only plain fields are supported (no ``default_factory``, ``InitVar`` or ``__post_init__``); a class
    with any of them is refused, so the replacement can never drop a behaviour of the original.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"quick_init takes a frozen dataclass, not {cls.__name__}")
    slotted = "__slots__" in cls.__dict__
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"quick_init: {cls.__name__} has __post_init__")
    names, env, args = [], {}, []
    for f in dataclasses.fields(cls):
        if not f.init or f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"quick_init: field {cls.__name__}.{f.name} is not a plain init field")
        names.append(f.name)
        if slotted:
            env[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            args.append(f.name)
        else:
            env[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
    if slotted:
        body = "".join(f"    _set_{n}(self, {n})\n" for n in names) or "    pass\n"
    else:
        body = "    d = self.__dict__\n" + "".join(f"    d[{n!r}] = {n}\n" for n in names)
    exec(f"def __init__(self, {', '.join(args)}):\n{body}", env)  # noqa: S102 (fixed text, field names only)
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls
