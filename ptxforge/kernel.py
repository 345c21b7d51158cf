"""The finished kernel and its parts: `Kernel`, `Param`, `LabelDef`, `Comment`.

These are the immutable values a `KernelBuilder` produces with `finish()` and that `Module`
renders, the runtime loads and the interpreter runs.  They depend only on `ptxforge.isa`, so every
consumer can read a kernel without importing the builder.
"""

from __future__ import annotations

import itertools
import numbers
import re
from dataclasses import dataclass, field

from .errors import SourceLoc, ValidationError
from .isa.instruction import Instruction
from .isa.operands import Label, Symbol
from .isa.pragmas import pragma_requirements
from .isa.tensor import directive_entry_registers
from .isa.targets import BASE, Requirement, Target, V
from .isa.types import ScalarType

_PTXFORGE_INTERNAL = True

_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")

#: Names with the form of an identifier that ptxas reserves: the predefined warp-size constant
#: (the special registers all start with %, which a name here cannot).
RESERVED_NAMES = frozenset({"WARP_SZ"})


def identifier_problem(name) -> str | None:
    """Why `name` cannot name a kernel, function, parameter or variable in PTX, or None when it can.

    The rules (PTX ISA "Identifiers", as ptxas 13 parses them): letters, digits, `_` and `$`; not
    starting with a digit; a name starting with `_` or `$` needs a further character (a lone `_` is
    the sink operand and a lone `$` does not parse); `%` starts register and special-register names;
    `WARP_SZ` is the predefined warp-size constant.  Opcodes and directive words (`add`, `shared`)
    are legal names."""
    if not isinstance(name, str):
        return f"a name is a str, not {type(name).__name__}"
    if not name:
        return "the name is empty"
    if name.startswith("%"):
        return "% starts register and special-register names only"
    bad = sorted(set(name) - _IDENT_CHARS)
    if bad:
        return ("PTX identifiers hold only letters, digits, _ and $, not "
                + " ".join(repr(c) for c in bad))
    if name[0] in "0123456789":
        return "a PTX identifier cannot start with a digit"
    if name in ("_", "$"):
        return (f"a name starting with {name} needs a letter, digit, _ or $ after it"
                + (" (a lone _ is PTX's sink operand)" if name == "_" else ""))
    if name in RESERVED_NAMES:
        return f"{name} is PTX's predefined warp-size constant"
    return None


def legal_spelling(name) -> str:
    """A PTX identifier close to `name`, for error messages (`name` itself when it is legal)."""
    s = re.sub(r"[^A-Za-z0-9_$]", "_", name.lstrip("%")) if isinstance(name, str) else "x"
    if not s or s in ("_", "$"):
        s = (s or "") + "x"
    if s[0] in "0123456789":
        s = "_" + s
    if s in RESERVED_NAMES:
        s = s.lower()
    return s


def check_identifier(name, what: str) -> str:
    """`name` when it is a legal PTX identifier; a ValidationError naming the rule and a legal spelling
    otherwise (`what` says what the name is for: "kernel", "parameter", ...)."""
    problem = identifier_problem(name)
    if problem is None:
        return name
    raise ValidationError(f"{what} name {name!r} is not a PTX identifier: {problem}; "
                          f"a legal spelling is {legal_spelling(name)!r}")


def check_align(align) -> int:
    """`align` as an int when it is a power of two (a Python or numpy integer, not a bool); a ValidationError
    otherwise.  What `.align A` takes: shared arrays, parameters and variables."""
    if isinstance(align, bool) or not isinstance(align, numbers.Integral) or align < 1 or align & (align - 1):
        raise ValidationError(f"alignment must be a power of two, got {align!r}")
    return int(align)


@dataclass(frozen=True)
class Param:
    """A kernel parameter: `.param .u64 x` (a scalar or pointer) or `.param .align A .b8 name[N]` (a byte block)."""

    name: str
    type: ScalarType
    pointee: ScalarType | None = None  # element type when this is a pointer
    space: str | None = None  # "global" for device pointers
    nbytes: int | None = None  # byte-array parameters (e.g. a 128-byte tensor map)
    align: int | None = None

    @property
    def symbol(self) -> Symbol:
        """The parameter as a `.param` symbol, the address operand of `ld.param`."""
        return Symbol(self.name, "param", self.type, self.nbytes, self.align or 1)

    @property
    def is_pointer(self) -> bool:
        """True for a device pointer (declared with a pointee type or a state space)."""
        return self.pointee is not None or self.space is not None

    def render(self) -> str:
        """The parameter's line in the `.entry` signature."""
        if self.nbytes is not None:
            return f".param .align {self.align or 1} .b8 {self.name}[{self.nbytes}]"
        align = (f".align {self.align} " if self.align is not None and self.align > self.type.bits // 8
                 and not self.is_pointer else "")  # (a pointer's align is its pointee's: `.ptr .align A`)
        return f".param {align}.{_PARAM_SPELLING.get(self.type.name, self.type.name)} {self.name}"

    @property
    def size(self) -> int:
        """Bytes the parameter takes in the launch's parameter buffer."""
        return self.nbytes if self.nbytes is not None else self.type.bits // 8


@dataclass(frozen=True)
class LabelDef:
    """A label placed in the body (`$L_name:`), with the Python line that placed it."""

    label: Label
    loc: SourceLoc | None = None


@dataclass(frozen=True)
class Comment:
    """A `// text` line in the body; a section comment (`// ---- name`) groups the listing."""

    text: str
    section: bool = False


@dataclass(frozen=True)
class Kernel:
    """A finished kernel, immutable: what `KernelBuilder.finish()` returns and `Module` renders as one
    `.visible .entry` with its directives, register and shared declarations and body."""

    name: str
    target: Target
    params: tuple
    directives: tuple  # (("maxntid", (256, 1, 1)), ...)
    registers: tuple  # Reg, in allocation order
    shared: tuple  # static Symbols
    extern_shared: tuple  # dynamic Symbols (module scope)
    body: tuple  # Instruction | LabelDef | Comment
    owner: int
    loc: SourceLoc | None = None
    notes: tuple = ()  # (key, value) facts a schedule wants in the listing header
    #: (name, SourceLoc) of each parameter, shared array and other named declaration: the Python line that
    #: declared it (the builder records them; a kernel read from PTX has none)
    decl_locs: tuple = field(default=(), compare=False, repr=False)

    def decl_loc(self, name: str) -> SourceLoc | None:
        """The Python line that declared the parameter, shared array or local array `name`; None when unknown."""
        for n, loc in self.decl_locs:
            if n == name:
                return loc
        return None

    @property
    def instructions(self):
        """The body's instructions, without labels and comments."""
        return [i for i in self.body if isinstance(i, Instruction)]

    def requirements(self):
        """(Requirement, what) pairs for the version computation."""
        for req, what, _ in self.located_requirements():
            yield req, what

    def located_requirements(self):
        """(Requirement, what, SourceLoc | None) triples: each requirement with the Python line behind it (the
        instruction's, the builder call that gave a directive or declared a parameter)."""
        for ins in self.body:
            if isinstance(ins, Instruction) and ins.req is not BASE and ins.req.min_ptx > _BASE_PTX:
                yield ins.req, f"'{ins.mnemonic}' (kernel {self.name})", ins.loc
        for item in self.body:  # .pragma lines in the body (pragma strings newer than the base ISA)
            text = getattr(item, "text", None) if not isinstance(item, Instruction) else None
            if isinstance(text, str) and text.startswith(".pragma"):
                for req, word in pragma_requirements(text):
                    yield req, f'.pragma "{word}" (kernel {self.name})', getattr(item, "loc", None) or self.loc
        for key, _ in self.directives:
            if key in _DIRECTIVE_REQ:
                yield _DIRECTIVE_REQ[key], f".{key} (kernel {self.name})", self.loc
        scoped = (r for item in self.body if not isinstance(item, Instruction)
                  for r in getattr(item, "registers", ()))  # those a `{ }` scope's .reg declares (read PTX)
        wide = next((r for r in itertools.chain(self.registers, scoped) if r.type.bits == 128), None)
        if wide is not None:
            loc = next((i.loc for i in self.body if isinstance(i, Instruction) and wide in i.registers()), None)
            yield _B128_REQ, f".reg .b128 %{wide.name} (kernel {self.name})", loc
        wide = next((p for p in self.params if p.nbytes is None and p.type.bits == 128), None)
        if wide is not None:
            yield _B128_REQ, f".param .b128 {wide.name} (kernel {self.name})", self.decl_loc(wide.name)
        if self.param_bytes > PARAM_BYTES_BASE:
            yield _BIG_PARAMS_REQ, f"{self.param_bytes} bytes of parameters (kernel {self.name})", self.loc

    @property
    def param_bytes(self) -> int:
        """Bytes of the kernel's parameter buffer (`param_buffer_bytes` of its parameters)."""
        return param_buffer_bytes(self.params)

    @property
    def block_limit(self) -> tuple | None:
        """("maxntid" | "reqntid", (x, y, z)) when the kernel declares a CTA shape, else None."""
        for key, val in self.directives:
            if key in ("maxntid", "reqntid"):
                return key, val
        return None

    @property
    def entry_registers(self) -> int | None:
        """Registers per thread each warp holds at entry when the kernel has a register cap for setmaxnreg
        to move registers from (`isa.tensor.directive_entry_registers` of its directives); None without one:
        ptxas then ignores setmaxnreg."""
        return directive_entry_registers(self.directives)

    @property
    def cluster_dims(self) -> tuple | None:
        """The .reqnctapercluster shape (x, y, z), or None."""
        for key, val in self.directives:
            if key == "reqnctapercluster":
                return val
        return None

    @property
    def static_shared_bytes(self) -> int:
        """Bytes of static `.shared` arrays, laid out in declaration order with their alignment."""
        total = 0
        for s in self.shared:
            total = -(-total // s.align) * s.align + (s.nbytes or 0)
        return total

    def param(self, name: str) -> Param:
        """The parameter called `name` (KeyError if there is none)."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)


#: The least PTX ISA any kernel gets; instructions needing no more do not count as requirements.
_BASE_PTX = V("7.0")

def param_align(p) -> int:
    """Where parameter `p` sits in the parameter buffer, as ptxas places it: a byte block at its `.align`, a
    scalar at its size or its `.align` if larger, a pointer at its size (its `.ptr .align` is the pointee's, and
    ptxas places `.u64 .ptr .global .align 16 p` after a `.u32` at offset 8)."""
    if p.nbytes is not None:
        return p.align or 1
    return p.size if p.is_pointer else max(p.size, p.align or 1)


def param_buffer_bytes(params) -> int:
    """Bytes a kernel's parameter buffer takes: each parameter at its alignment (`param_align`), in declaration
    order."""
    total = 0
    for p in params:
        align = param_align(p)
        total = -(-total // align) * align + p.size
    return total


#: Parameter types ptxas does not parse in a `.param` declaration, spelled as their bit container.
_PARAM_SPELLING = {"bf16": "b16", "f16x2": "b32", "bf16x2": "b32"}

#: .b128 registers and parameters are PTX ISA 8.3.
_B128_REQ = Requirement(80, V("8.3"))
#: A kernel's parameters may take 4352 bytes; PTX ISA 8.1 raised that to 32764 (ptxas checks both).
PARAM_BYTES_BASE = 4352
PARAM_BYTES_MAX = 32764
_BIG_PARAMS_REQ = Requirement(80, V("8.1"))

#: Entry directives that need more than the base: the cluster directives are sm_90 and PTX 7.8.
_DIRECTIVE_REQ = {
    "reqnctapercluster": Requirement(90, V("7.8")),
    "explicitcluster": Requirement(90, V("7.8")),
    "maxclusterrank": Requirement(90, V("7.8")),
}
