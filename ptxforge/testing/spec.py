"""The value a strategy draws, and the minimal kernel it is emitted into.

A `Spec` is plain data (family, operation, sorted parameters), so that Hypothesis can print
and shrink it; `Scratch` is a small kernel with the operands most instructions need.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..builder import KernelBuilder
from ..isa.types import decl_type
from ..isa import types as T
from ..module import Module

#: Targets the strategies draw from (the ones ptxforge is tested on).
TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
FAMILIES = ("arith", "bits", "control", "convert", "memory", "async_copy", "sync", "tensor", "warp", "integer")
GUARDS = (None, "p", "~p")


# ---------------------------------------------------------------- the drawn value

@dataclass(frozen=True)
class Spec:
    """One instruction to emit: family, operation and sorted (name, value) parameters."""

    family: str
    op: str
    params: tuple = ()

    def get(self, key, default=None):
        """The value of parameter `key`, or `default` when the spec has none."""
        for k, v in self.params:
            if k == key:
                return v
        return default

    def __getitem__(self, key):
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)

    def with_params(self, **extra) -> "Spec":
        """A copy of this spec with the parameters in `extra` added or replaced."""
        merged = dict(self.params)
        merged.update(extra)
        return Spec(self.family, self.op, tuple(sorted(merged.items())))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.family}.{self.op}({args})"


def spec(family: str, op: str, **params) -> Spec:
    """A `Spec` of `family` and `op` with `params` sorted by name (so equal specs compare and hash equal)."""
    return Spec(family, op, tuple(sorted(params.items())))


# ---------------------------------------------------------------- the kernel specs are emitted into

class Scratch:
    """A minimal kernel to emit drawn instructions into.

    Provides `g` (u64 global address), `s` (u32 address of 4 KB of shared memory aligned to
    128), `mb` (u32 address of an 8-byte mbarrier), `p` (a predicate computed from %tid) and,
    on sm_90+, `tmap()` (generic address of a 128-byte tensor-map parameter).
    """

    def __init__(self, target, name: str = "prop"):
        k = KernelBuilder(name, target=target)
        self.k = k
        self.target = k.target
        self.g = k.param_ptr("g", T.b8)
        self._tmap_param = k.param("tmap", T.b8, nbytes=128, align=64) if self.target.sm >= 90 else None
        self._tmap = None
        self.smem = k.shared("smem", 4096, 128)
        self.mbar = k.shared("mbar", 8, 8)
        self.s = k.shared_base(self.smem)
        self.mb = k.shared_base(self.mbar)
        self.p = k.setp("ne", k.tid(), 0)
        self.g64 = k.cvta(self.g, frm="global", dst=k.reg(T.u64))  # generic address, for generic-space forms

    def reg(self, t):
        """A new register of type `t` in the scratch kernel (a packed type gets its declarable register type).
        """
        return self.k.reg(decl_type(T.lookup(t)))

    def regs(self, t, n):
        """`n` new registers of type `t`."""
        return [self.reg(t) for _ in range(n)]

    def guard(self, g):
        """The predicate for a drawn guard: None for none, `p` for "p", ``~p`` otherwise."""
        return None if g is None else self.p if g == "p" else ~self.p

    def tmap(self):
        """The generic address of the kernel's tensor-map parameter (sm_90+; before sm_90 a plain .u64 register,
        so that the target check reports the instruction), made on first use.
        """
        if self._tmap is None:
            # before sm_90 there is no tensor map; any 64-bit address lets the target check speak
            self._tmap = (self.k.param_address(self._tmap_param) if self._tmap_param is not None
                          else self.k.reg(T.u64))
        return self._tmap

    def module(self) -> Module:
        """The scratch kernel as a Module, finished."""
        return self.k.module()
