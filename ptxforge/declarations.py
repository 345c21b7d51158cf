"""Module and kernel parts that PTX files have and the builder does not make: module-scope
variables, device functions and their prototypes, verbatim directives, call scopes.

They exist so that a module read from PTX text (`ptxforge.parse`) renders back to PTX that
assembles the same.  Each part renders itself (`render()`); `Module` places module-scope parts
after the header and body parts where they stood in the kernel.
"""

from __future__ import annotations

import math
import numbers
import re
import struct
from dataclasses import dataclass, field

from .errors import ValidationError
from .kernel import Kernel, Param, check_align, check_identifier
from .isa import types as T
from .isa.literals import parse_imm
from .isa.pragmas import PRAGMAS
from .isa.operands import Reg, Symbol
from .isa.types import ScalarType

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class Variable:
    """A `.global`/`.const`/`.shared`/`.local` variable declared at module scope (or `.local` in a
    kernel): `{linkage} .space {.align A} {.v2|.v4} .type name{[n]...} {= init};`.

    `dims` holds the array sizes as written (None: an unsized `[]`); `init` is the initializer
    text (`7`, `{1, 2, 3}`), kept as written.  `vector` is 2 or 4 for a vector variable (each element
    `vector` values of `type`, aligned to its size unless `align` says otherwise, as ptxas lays it out;
    its initializer gives every vector as a `{ }` list of exactly `vector` values).
    """

    name: str
    space: str
    type: ScalarType
    align: int | None = None
    dims: tuple = ()
    init: str | None = None
    linkage: str = ""  # "", ".visible", ".extern", ".weak", ".common"
    extra: str = ""  # further attributes kept verbatim (e.g. ".attribute(.managed)")
    loc: object = field(default=None, compare=False)  # the SourceLoc of its declaration (PTX line), if known
    vector: int = 1  # 2 or 4: a .v2/.v4 variable

    @property
    def element_bytes(self) -> int:
        """Bytes of one element (one vector of a vector variable)."""
        return max(self.type.bits // 8, 1) * self.vector

    @property
    def natural_align(self) -> int:
        """The alignment ptxas gives the variable without `.align`: its element's size (a vector's whole size)."""
        return self.element_bytes

    @property
    def nbytes(self) -> int | None:
        """Bytes of the variable; None when an array is unsized."""
        n = self.element_bytes
        for d in self.dims:
            if d is None:
                return None
            n *= d
        return n

    @property
    def symbol(self) -> Symbol:
        """The operand that names this variable in instructions."""
        return Symbol(self.name, self.space, self.type, self.nbytes, self.align or self.natural_align)

    def render(self) -> str:
        """The declaration as PTX text."""
        parts = [self.linkage] if self.linkage else []
        if self.extra:
            parts.append(self.extra)
        parts.append("." + self.space)
        if self.align is not None:
            parts.append(f".align {self.align}")
        dims = "".join("[]" if d is None else f"[{d}]" for d in self.dims)
        if self.vector != 1:
            parts.append(f".v{self.vector}")
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
class RegParam(Param):
    """A `.reg` parameter or return value of a device function, `.func (.reg .b32 %r) f(.reg .b32 %a)`: the
    body names it as a register (`reg`), and a call passes a register or an immediate for it (or a `.param`
    variable: ptxas takes either for either).  It renders `.reg .type %name`."""

    state = "reg"  # (a plain class attribute: `signature_key` tells .reg from .param parameters by it)

    def render(self) -> str:
        """The declaration in the function's header (`.reg .b32 %a`)."""
        return f".reg .{self.type.name} %{self.name}"

    def register(self, owner: int = 0, kernel: str = "") -> Reg:
        """The register the body of function `kernel` (its allocation id `owner`) names this parameter by."""
        return Reg(self.name, self.type, owner, kernel)


@dataclass(frozen=True)
class Prototype:
    """A device function declared and not defined here: `.extern .func (ret) name (params);`.

    `directives` are the header's directives as (name, value) pairs, as a `Kernel` keeps them (`("noreturn",
    None)` for `.noreturn`): an `.alias` compares them with its function's."""

    name: str
    returns: tuple = ()  # Param
    params: tuple = ()  # Param
    linkage: str = ".extern"
    directives: tuple = ()

    def render(self) -> str:
        """The prototype as PTX text."""
        head = f"{self.linkage} .func " if self.linkage else ".func "
        if self.returns:
            head += "(" + ", ".join(p.render() for p in self.returns) + ") "
        tail = "".join(" " + directive_text(k, v) for k, v in self.directives)
        return head + self.name + "(" + ", ".join(p.render() for p in self.params) + ")" + tail + ";"


def directive_text(key: str, value) -> str:
    """A function header's directive as PTX: `.noreturn` (value None), `.maxntid 128, 1, 1`, `.maxnreg 64`."""
    if value is None:
        return f".{key}"
    if isinstance(value, tuple):
        return f".{key} {', '.join(str(x) for x in value)}"
    return f".{key} {value}"


def signature_key(returns, params, directives=()) -> tuple:
    """What two function declarations must share to name one function (an `.alias` and its function, as
    ptxas compares them): each return value's and parameter's type, size, alignment and state space, in
    order, and `.noreturn`.  Names do not count."""
    def one(p):
        natural = max(p.type.bits // 8, 1) if p.nbytes is None else 1
        return (getattr(p, "state", "param"), p.type.name, p.nbytes, p.align or natural, p.space)
    return (tuple(one(p) for p in returns), tuple(one(p) for p in params),
            any(k == "noreturn" for k, _ in directives))


@dataclass(frozen=True)
class Alias:
    """`.alias name, target;` at module scope: device function `name`, declared by a `Prototype` with the
    signature of `target` and never defined, is `target` (a function the module defines, or another alias).
    PTX ISA 6.3; ptxas refuses an alias of a kernel, of a `.weak` or `.extern` function, or of a variable."""

    name: str
    target: str
    loc: object = field(default=None, compare=False)  # the SourceLoc of the directive (PTX line), if known

    def render(self) -> str:
        """The directive as PTX text."""
        return f".alias {self.name}, {self.target};"


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
    """A declaration inside a body scope (call arguments: `.param .b32 param0;`, scoped `.reg`).

    `registers` are the registers a scoped `.reg` declares when a module read from PTX made them: they exist
    only inside the scope (the function's own `.reg` lines do not declare them)."""

    text: str
    symbol: Symbol | None = None
    registers: tuple = ()
    loc: object = field(default=None, compare=False)  # the SourceLoc of its PTX line, for text read from PTX

    def ptx_line(self) -> str:
        """The declaration as PTX text."""
        return self.text


@dataclass(frozen=True)
class BranchTargetsDecl:
    """`name: .branchtargets L0, L1;` in a body: the label list a `brx.idx` names."""

    targets: object  # ptxforge.isa.calls.BranchTargets
    loc: object = field(default=None, compare=False)  # the SourceLoc of its PTX line, for text read from PTX

    def ptx_line(self) -> str:
        """The declaration line."""
        return self.targets.declaration()


@dataclass(frozen=True)
class CallPrototypeDecl:
    """`name: .callprototype (.param .f32 _) _ (.param .u32 _);` in a call scope: the signature of
    an indirect call."""

    prototype: object  # ptxforge.isa.calls.CallPrototype
    loc: object = field(default=None, compare=False)  # the SourceLoc of its PTX line, for text read from PTX

    def ptx_line(self) -> str:
        """The declaration line (`CallPrototype.declaration`)."""
        return self.prototype.declaration()


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
    callees: tuple = ()  # the device functions the builder's call() named (a Module includes them)
    module_variables: tuple = ()  # the module-scope Variables the body names (a Module declares them)

    @property
    def header(self) -> str:
        """`.visible .entry name` / `.func (.param .b32 r) name` (without the parameter list)."""
        head = f"{self.linkage} .{self.kind} " if self.linkage else f".{self.kind} "
        if self.returns:
            head += "(" + ", ".join(p.render() for p in self.returns) + ") "
        return head + self.name


# ------------------------------------------------------------------ builder constructors

_VARIABLE_SPACES = ("global", "const", "local")


def variable(name: str, type, *, space: str = "global", count: int | None = None, init=None,
             align: int | None = None, visible: bool = False) -> Variable:
    """A variable for the builder: `{.visible} .space {.align A} .type name{[count]} {= init};`.

    `space` is "global" or "const" (module scope: pass it to a kernel's `ld`/`st`/`address_of`,
    and the Module declares it) or "local" (a kernel's per-thread array: `local_array()`).
    `count` makes an array; `init` is a number (a scalar) or a sequence of numbers (an array;
    shorter than `count` leaves the rest zero, as PTX does), rendered exactly (floats as `0f...`
    hex), or PTX initializer text (`"{1, 2, 3}"`) kept as written.  `.local` variables take no
    initializer.  `visible` gives a module variable external
    linkage (`.visible`: the host finds it by name)."""
    check_identifier(name, "variable")
    if space not in _VARIABLE_SPACES:
        raise ValidationError(f"variable space must be one of {', '.join(_VARIABLE_SPACES)}, got {space!r} "
                              "(shared memory: KernelBuilder.shared())")
    t = T.lookup(type)
    if t.is_pred or not t.can_declare or t.bits == 128:
        raise ValidationError(f"a variable of .{t.name} cannot be declared; use a scalar type such as .u32, "
                              ".f32 or .b8")
    if t.name in ("bf16", "bf16x2"):  # ptxas parses no .bf16 / .bf16x2 variable: they are stored as their bits
        raise ValidationError(f"a variable of .{t.name} cannot be declared (ptxas has no .{t.name} variables); "
                              f"declare .b{t.bits} and load or store it with type=pf.{t.name}")
    dims = ()
    if count is not None:
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise ValidationError(f"array size of {name} must be a positive int, got {count!r}")
        dims = (int(count),)
    if align is not None:
        align = check_align(align)
    if align is not None and align < max(t.bits // 8, 1):
        raise ValidationError(f".align {align} is less than the {t.bits // 8}-byte size of .{t.name}")
    text = None
    if init is not None:
        if space == "local":
            raise ValidationError(f".local variable {name} cannot have an initializer (ptxas refuses it)")
        if isinstance(init, str):  # PTX initializer text, kept as written (what to-python restates)
            text = " ".join(init.split())
            if not text or text.count("{") != text.count("}") or ";" in text:
                raise ValidationError(f"initializer text {init!r} of {name} is not a value or a {{ ... }} list")
        else:
            text = _init_text(name, t, init, dims)
    return Variable(name, space, t, align, dims, text, ".visible" if visible else "")


def _init_text(name, t, init, dims) -> str:
    scalar = not dims
    if isinstance(init, (str, bytes)):
        raise ValidationError(f"initializer of {name}: give numbers, not {type(init).__name__}")
    try:
        values = [init] if scalar else list(getattr(init, "ravel", lambda: init)())
    except TypeError:
        raise ValidationError(f"initializer of array {name}: give a sequence of numbers, got {init!r}") from None
    if not scalar and len(values) > dims[0]:
        raise ValidationError(f"initializer of {name}[{dims[0]}] has {len(values)} values")
    words = [_literal(name, t, v) for v in values]
    return words[0] if scalar else "{" + ", ".join(words) + "}"


def _literal(name, t, v) -> str:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValidationError(f"initializer of {name}: {v!r} is not a number")
    if t.is_float:
        if t.bits not in (32, 64) or t.lanes != 1:  # .f16 / .f16x2: ptxas takes no initial value of these
            raise ValidationError(f"initializer of {name}: .{t.name} variables are initialized as their bits "
                                  f"(declare .b{t.bits})")
        try:
            f = float(v)
            # packed after rounding to the type: what overflows is a value that rounds beyond the largest finite
            return ("0d" + struct.pack(">d", f).hex().upper() if t.bits == 64
                    else "0f" + struct.pack(">f", f).hex().upper())
        except OverflowError:
            limit = "1.7976931348623157e308" if t.bits == 64 else "3.4028235e38"
            raise ValidationError(f"initializer of {name}: {_short(v)} is outside the range of .{t.name} (finite values "
                                  f"round to at most {limit} in magnitude; inf and nan are allowed)") from None
    if isinstance(v, float) or not isinstance(v, numbers.Integral):
        if not math.isfinite(float(v)) or float(v) != int(v):
            raise ValidationError(f"initializer of {name} (.{t.name}): {v!r} is not an integer (an integer type "
                                  "takes whole numbers in its range)")
    v = int(v)
    lo = -(1 << (t.bits - 1)) if t.kind in ("s", "b") else 0
    hi = (1 << t.bits) - 1 if t.kind != "s" else (1 << (t.bits - 1)) - 1
    if not lo <= v <= hi:
        raise ValidationError(f"initializer of {name}: {_short(v)} does not fit .{t.name} ({lo}..{hi})")
    return str(v)


def _short(v) -> str:
    """A number for a message: a huge int as its leading digits and length."""
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:12]}...({len(text)} digits)"


#: An address in an initializer: `name`, `generic(name)`, either `+ offset` (the offset an integer literal).
_ADDRESS_WORD = re.compile(r"(?:generic\(\s*([A-Za-z_$][\w$]*)\s*\)|([A-Za-z_$][\w$]*))\s*(?:\+\s*(\S+))?\Z")


def initializer_items(text: str):
    """The initializer text of a variable as nested lists of its words: `7` -> '7', `{1, {2, 3}}` ->
    ['1', ['2', '3']] (spacing inside a word removed: `generic(g) + 8` -> 'generic(g)+8').  ValidationError
    when the braces do not nest or a value is missing."""
    tokens = [x.strip() for x in re.findall(r"[{},]|[^{},]+", text) if x.strip()]
    value, i = _initializer_item(text, tokens, 0)
    if i != len(tokens):
        raise ValidationError(f"initializer {text}: unexpected '{tokens[i]}' after the value")
    return value


def _initializer_item(text, tokens, i):
    """(the value or list starting at tokens[i], the index after it)."""
    if i >= len(tokens) or tokens[i] in ",}":
        raise ValidationError(f"initializer {text}: a value is missing")
    if tokens[i] != "{":
        return "".join(tokens[i].split()), i + 1
    items, i = [], i + 1
    if i < len(tokens) and tokens[i] == "}":
        return items, i + 1
    while True:
        item, i = _initializer_item(text, tokens, i)
        items.append(item)
        if i < len(tokens) and tokens[i] == ",":
            i += 1
        elif i < len(tokens) and tokens[i] == "}":
            return items, i + 1
        else:
            raise ValidationError(f"initializer {text}: a '{{' is never closed")


def initializer_value(word: str):
    """One initializer word read: ('int', n), ('float', value, bits) or ('address', name, generic, offset);
    None when it is none of these.  Numbers are read as instruction immediates are."""
    imm = parse_imm(word)
    if imm is not None:
        if imm.type is None:
            return ("int", imm.value)
        return ("float", imm.value, 32 if imm.type is T.f32 else 64)
    m = _ADDRESS_WORD.match(word)
    if m is None:
        return None
    offset = 0
    if m.group(3) is not None:
        imm = parse_imm(m.group(3))
        if imm is None or imm.type is not None:
            return None
        offset = imm.value
    return ("address", m.group(1) or m.group(2), m.group(1) is not None, offset)


def initializer_words(items):
    """The words of nested initializer lists (`initializer_items`), in order."""
    if isinstance(items, str):
        yield items
        return
    for x in items:
        yield from initializer_words(x)


def initial_bytes(var: Variable, address_of=None) -> bytes:
    """The bytes a variable holds before any kernel runs: its initializer (as written in PTX: integers as
    instructions read them, `0f`/`0d` hex floats, decimal floats, nested `{ }` lists) in little-endian
    order, zero-padded to its size; all zero without one.  An address (`g`, `generic(g)+8`, a function
    name) holds `address_of(name)` plus its offset; without `address_of`, or where it gives None, that is
    a ValidationError naming the variable's declaration."""
    n = var.nbytes or 0
    if var.init is None:
        return bytes(n)
    t = var.type
    width = max(t.bits // 8, 1)
    out = bytearray()
    try:
        items = initializer_items(var.init)
    except ValidationError as e:
        raise ValidationError(f"initializer of {var.name}: {e.message}", var.loc) from None
    for word in initializer_words(items):
        out += _word_bytes(var, t, width, word, address_of)
    if len(out) > n:
        raise ValidationError(f"initializer of {var.name} holds {len(out)} bytes; the variable has {n}", var.loc)
    return bytes(out) + bytes(n - len(out))


def _word_bytes(var, t, width, word, address_of) -> bytes:
    value = initializer_value(word)
    if value is None:
        raise ValidationError(f"initializer of {var.name}: cannot read {word!r}", var.loc)
    if value[0] == "address":
        _, name, _, offset = value
        base = address_of(name) if address_of is not None else None
        if base is None:
            raise ValidationError(f"initializer of {var.name}: the address {word} of {name} is not modelled here",
                                  var.loc)
        val = base + offset
    else:
        val = value[1]
    if t.is_float and t.bits in (32, 64):
        return struct.pack("<f" if t.bits == 32 else "<d", float(val))
    if isinstance(val, float):
        val = int(val)
    return (val & ((1 << (8 * width)) - 1)).to_bytes(width, "little")


def pragma_text(words, scope: str = "function") -> str:
    """`.pragma "w1", "w2";` for the given pragma strings (e.g. "nounroll"); each is one line of
    printable text without quotes, naming a pragma ptxas knows (nounroll; inside a function also
    `used_bytes_mask <mask>`, enable_smem_spilling and `frequency <n>`) with its argument.  `scope` is
    "function" (a `.pragma` line in a body) or "module"."""
    if not words:
        raise ValidationError('pragma() takes at least one string, e.g. pragma("nounroll")')
    known = ", ".join(PRAGMAS)
    for w in words:
        if not isinstance(w, str) or not w or '"' in w or "\\" in w or not w.isprintable():
            raise ValidationError(f"a pragma is a non-empty printable string without quotes, got {w!r}")
        parts = w.split()
        info = PRAGMAS.get(parts[0]) if parts else None
        if info is None:
            raise ValidationError(f"pragma {w!r} is not one ptxas knows ({known}); ptxas refuses any other")
        where, arg = info.where, info.arg
        if where == "function" and scope == "module":
            raise ValidationError(f"pragma {parts[0]!r} is allowed only inside a function (k.pragma()), not at module "
                                  "scope")
        if (arg is None and len(parts) != 1) or (arg is not None and (len(parts) != 2
                                                                      or not re.fullmatch(arg, parts[1]))):
            form = parts[0] + ("" if arg is None else " <mask>" if parts[0] == "used_bytes_mask" else " <n>")
            raise ValidationError(f"pragma {w!r}: write it as {form!r}")
    return ".pragma " + ", ".join(f'"{w}"' for w in words) + ";"


def pragma(*words: str) -> RawDirective:
    """A module-scope `.pragma "word";` directive (applies to every function after it), for
    `Module(..., declarations=[pragma("nounroll")])`; only nounroll may stand at module scope."""
    return RawDirective(pragma_text(words, "module"))


def source_file(index: int, path: str) -> RawDirective:
    """A module-scope `.file index "path"` directive: the source file that `.loc index ...` lines
    (`KernelBuilder.debug_loc`) name, for `Module(..., declarations=[source_file(1, "k.cu")])`."""
    if not isinstance(index, int) or isinstance(index, bool) or index < 1:
        raise ValidationError(f"source_file(): the file index is a positive int, got {index!r}")
    if not isinstance(path, str) or not path or '"' in path or "\\" in path or not path.isprintable():
        raise ValidationError(f"source_file(): the path is a non-empty printable string without quotes or "
                              f"backslashes, got {path!r}")
    return RawDirective(f'.file {index} "{path}"')
