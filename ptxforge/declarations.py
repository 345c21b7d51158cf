"""Module and kernel parts that PTX files have and the builder does not make: module-scope
variables, device functions and their prototypes, verbatim directives, call scopes.

They exist so that a module read from PTX text (`ptxforge.parse`) renders back to PTX that
assembles the same.  Each part renders itself (`render()`); `Module` places module-scope parts
after the header and body parts where they stood in the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kernel import Kernel, Param
from .isa.operands import Symbol
from .isa.types import ScalarType

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class Variable:
    """A `.global`/`.const`/`.shared`/`.local` variable declared at module scope (or `.local` in a
    kernel): `{linkage} .space {.align A} .type name{[n]...} {= init};`.

    `dims` holds the array sizes as written (None: an unsized `[]`); `init` is the initializer
    text (`7`, `{1, 2, 3}`), kept as written.
    """

    name: str
    space: str
    type: ScalarType
    align: int | None = None
    dims: tuple = ()
    init: str | None = None
    linkage: str = ""  # "", ".visible", ".extern", ".weak", ".common"
    extra: str = ""  # further attributes kept verbatim (e.g. ".attribute(.managed)")

    @property
    def nbytes(self) -> int | None:
        """Bytes of the variable; None when an array is unsized."""
        n = max(self.type.bits // 8, 1)
        for d in self.dims:
            if d is None:
                return None
            n *= d
        return n

    @property
    def symbol(self) -> Symbol:
        """The operand that names this variable in instructions."""
        return Symbol(self.name, self.space, self.type, self.nbytes,
                      self.align or max(self.type.bits // 8, 1))

    def render(self) -> str:
        """The declaration as PTX text."""
        parts = [self.linkage] if self.linkage else []
        if self.extra:
            parts.append(self.extra)
        parts.append("." + self.space)
        if self.align is not None:
            parts.append(f".align {self.align}")
        dims = "".join("[]" if d is None else f"[{d}]" for d in self.dims)
        parts.append(f".{self.type.name} {self.name}{dims}")
        text = " ".join(parts)
        if self.init is not None:
            text += " = " + self.init
        return text + ";"


@dataclass(frozen=True)
class ParamDecl(Param):
    """A parameter with the attributes the builder does not write: `.ptr .global .align 8`, typed
    arrays (`.b32 a[4]`).  `spelling` is the declaration as normalized text (`.param ...`)."""

    spelling: str = ""

    def render(self) -> str:
        """The parameter declaration as read (normalized spacing)."""
        return self.spelling or Param.render(self)


@dataclass(frozen=True)
class Prototype:
    """A device function declared and not defined here: `.extern .func (ret) name (params);`."""

    name: str
    returns: tuple = ()  # Param
    params: tuple = ()  # Param
    linkage: str = ".extern"

    def render(self) -> str:
        """The prototype as PTX text."""
        head = f"{self.linkage} .func " if self.linkage else ".func "
        if self.returns:
            head += "(" + ", ".join(p.render() for p in self.returns) + ") "
        return head + self.name + "(" + ", ".join(p.render() for p in self.params) + ");"


@dataclass(frozen=True)
class RawDirective:
    """A module-scope directive kept verbatim: `.file 1 "k.cu"`, `.section .debug_info { ... }`,
    `.pragma`, `@@DWARF` lines.  Assembled as written; no table judges it."""

    text: str

    def render(self) -> str:
        """The directive as read."""
        return self.text


# ------------------------------------------------------------------ body parts

@dataclass(frozen=True)
class BodyDirective:
    """A directive line inside a body, kept verbatim: `.loc 1 5 3`, `.pragma "nounroll";`."""

    text: str
    loc: object = None

    def ptx_line(self) -> str:
        """The line as read."""
        return self.text


@dataclass(frozen=True)
class ScopeOpen:
    """`{` inside a body: opens a scope for call-local declarations."""

    def ptx_line(self) -> str:
        """`{`."""
        return "{"


@dataclass(frozen=True)
class ScopeClose:
    """`}` closing a ScopeOpen."""

    def ptx_line(self) -> str:
        """`}`."""
        return "}"


@dataclass(frozen=True)
class LocalDecl:
    """A declaration inside a body scope (call arguments: `.param .b32 param0;`, scoped `.reg`)."""

    text: str
    symbol: Symbol | None = None

    def ptx_line(self) -> str:
        """The declaration as PTX text."""
        return self.text


# ------------------------------------------------------------------ functions

@dataclass(frozen=True)
class Function(Kernel):
    """A kernel or device function with what PTX allows beyond the builder's kernels.

    `kind` is "entry" (a kernel) or "func" (a device function, called with `call`); `returns`
    are a function's return parameters; `linkage` is `.visible`, `.weak` or "" (file-local);
    `variables` are kernel-scope variables other than static shared memory (e.g. `.local`
    stacks), rendered after the registers.
    """

    kind: str = "entry"
    returns: tuple = ()
    linkage: str = ".visible"
    variables: tuple = ()

    @property
    def header(self) -> str:
        """`.visible .entry name` / `.func (.param .b32 r) name` (without the parameter list)."""
        head = f"{self.linkage} .{self.kind} " if self.linkage else f".{self.kind} "
        if self.returns:
            head += "(" + ", ".join(p.render() for p in self.returns) + ") "
        return head + self.name
