"""PTX statements -> a Module: directives, variables, functions, bodies.

The reader walks the statements of `lexer.statements` once.  Declarations become the parts the
builder makes (Param, Symbol, Reg) or, where the builder has none, the parts of
`ptxforge.declarations`; instructions go through `decode` (the ISA constructors) and then the
target rule of the ISA (`Requirement.check`).  Every instruction carries the PTX file and line
it came from as its source location.
"""

from __future__ import annotations

import itertools
import re
import struct
import warnings
from dataclasses import dataclass, field

from ..builder import KernelBuilder
from ..kernel import Comment, Kernel, LabelDef, Param
from ..declarations import (Alias, BodyDirective, BranchTargetsDecl, CallPrototypeDecl, Function, LocalDecl,
                            ParamDecl, Prototype, RawDirective, RegParam, ScopeClose, ScopeOpen, Variable, initializer_items,
                            initializer_value, initializer_words, signature_key)
from ..errors import PtxforgeError, SourceLoc, TargetError, ValidationError
from ..isa import types as T
from ..isa.async_copy import BulkInfo, check_cluster_mask
from ..isa.calls import BranchTargets, CallParam, CallPrototype, call
from ..isa.instruction import Instruction
from ..isa.opaque import opaque
from ..isa.operands import (SPECIAL_REQUIREMENTS, Guard, Imm, Label, PairDst, Reg, SpecialReg, Symbol,
                            Vec)
from ..isa.targets import RELEASED_VERSIONS, PtxVersion, Target
from ..isa.tensor import (S4_EMULATION_COST, directive_entry_registers, warn_at, warn_emulated,
                          warn_ignored_setmaxnreg)
from ..module import Module
from .decode import decode
from .lexer import CLOSE, COMMENT, HEADER, LABEL, LINE, OPEN, STMT, statements
from .missing_semicolon import missing_semicolon
from .operands import Scope, parse_int, split_top

_PTXFORGE_INTERNAL = True

_ids = itertools.count(1)
_REG_NAME = re.compile(r"%?[A-Za-z_$][\w$]*\Z")
_NAME = re.compile(r"[A-Za-z_$%][\w$]*\Z")
_MNEMONIC = re.compile(r"[A-Za-z_][\w.:]*\Z")
_OPERAND_START = re.compile(r"[%\[{(]")
_RANGE = re.compile(r"(%?)([A-Za-z_$][\w$]*)<(\d+)>\Z")
#: the most registers one `.reg` range may declare (each is made as the line is read: a range of a billion
#: would take minutes and gigabytes, where ptxas makes only the registers used)
MAX_RANGE = 1 << 18
_GUARD = re.compile(r"@\s*(!?)\s*(\S*)\s*(.*)\Z", re.S)
_NOTE = re.compile(r"(\S+): (.+?) = (.*)\Z")
_LINKAGE = (".visible", ".extern", ".weak", ".common")
_SPACES = (".global", ".const", ".shared", ".local")
_FLAGS = ("noreturn", "explicitcluster")
_PERF = {"maxntid": 3, "reqntid": 3, "reqnctapercluster": 3, "minnctapersm": 1, "maxnreg": 1,
         "maxclusterrank": 1}


class ParseError(ValidationError):
    """A PTX line that ptxforge cannot read or that the tables reject; names the file and line."""


class NarrowedImmediateWarning(UserWarning):
    """An integer literal of a PTX line that does not fit its operand's type (`add.u16 %rs1, %rs2, 70000;`):
    ptxas keeps its low bits without a word, and so does the reader, warning at the file and line."""


class IgnoredBodyWarning(UserWarning):
    """A function body that ptxas drops: the definition of a name an `.alias` made another function's name."""


#: The ISA's refusal of an integer immediate wider than its operand's type (`check_value`).
_WIDE_IMMEDIATE = re.compile(r"immediate (-?\d+) does not fit \.(\w+)\Z")


def require_text(text, who: str) -> None:
    """Raise ParseError unless `text` is PTX text (a str); `who` names the call that was given it.  Bytes are
    refused too, with the decode that makes them text: PTX is ASCII, but which encoding a byte string holds is
    for its owner to say."""
    if isinstance(text, str):
        return
    got = "None" if text is None else type(text).__name__
    if isinstance(text, (bytes, bytearray, memoryview)):
        raise ParseError(f"{who} takes PTX text as a str, got {got}: decode it first, e.g. data.decode('utf-8')")
    raise ParseError(f"{who} takes PTX text as a str, got {got}")


@dataclass
class Finding:
    """One thing `lint` reports: file, line, severity ('error'/'warning'), message."""

    filename: str
    line: int
    severity: str
    message: str

    def __str__(self) -> str:
        """`FILE:LINE: severity: message`."""
        return f"{self.filename}:{self.line}: {self.severity}: {self.message}"


@dataclass
class Reading:
    """What reading a file produced: the module and, with strict=False, what was kept opaque."""

    module: Module | None
    findings: list = field(default_factory=list)
    opaque: list = field(default_factory=list)  # (line, text, reason)
    version: PtxVersion | None = None
    target: Target | None = None
    target_line: int = 0
    version_line: int = 0  # the line of the .version directive (0: none)
    #: (Requirement, (line, mnemonic)) of the instructions kept opaque because the file's target or .version is
    #: too old for them (strict=False): what the module would need, which `lint` counts in its least target
    too_new: list = field(default_factory=list)


class Reader:
    """Reads one PTX text into a `Reading` (`read()`); `strict` as in `ptxforge.parse`."""

    def __init__(self, text: str, filename: str | None, strict: bool):
        self.text = text
        self.filename = filename or "<ptx>"
        self.strict = strict
        self.lines = None
        self.version: PtxVersion | None = None
        self.target: Target | None = None
        self.target_line = 0
        self.target_options = ()
        self.version_line = 0
        self.kernels: list = []
        self.declarations: list = []
        self.module_symbols: dict = {}
        self.module_lines: dict = {}  # module variable name -> (line, linkage, Variable) of its declaration
        self.externs: list = []  # extern .shared symbols
        self.functions: dict = {}  # name -> Prototype or Function
        self.entries: set = set()  # the kernels (.entry) defined so far: `mov.u64 %rd, k` takes one's address
        self.defined: dict = {}  # kernel or function name -> the line of its header
        self.aliases: dict = {}  # alias name -> its Alias (`.alias name, target;`)
        self.prototyped: set = set()  # device function names a module-scope prototype declares
        self.pending_comments: list = []
        self.findings: list = []
        self.opaque: list = []
        self.too_new: list = []  # (Requirement, (line, mnemonic)): see Reading.too_new

    # ------------------------------------------------------------ reporting
    def loc(self, line: int, function: str = "") -> SourceLoc:
        """The SourceLoc of PTX line `line` of this text (in `function`, when given)."""
        return SourceLoc(self.filename, line, function)

    def line_text(self, line: int) -> str:
        """The text of PTX line `line`, stripped ("" past the end)."""
        if self.lines is None:
            self.lines = self.text.split("\n")
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def error(self, line: int, message: str, cls=ParseError):
        """A ParseError (or `cls`) naming the file and line, with the line's text; the caller raises it."""
        text = self.line_text(line)
        return cls(f"{self.filename}:{line}: {message}" + (f"\n    {text}" if text else ""), self.loc(line))

    def note(self, line: int, severity: str, message: str):
        """Record a `Finding` of `severity` at `line` (kept in the Reading rather than raised)."""
        self.findings.append(Finding(self.filename, line, severity, message))

    # ------------------------------------------------------------ module level
    def read(self) -> Reading:
        """Read the whole text: module directives, variables and functions in order; returns the `Reading`
        (Module None when the text has no kernel). A missing ``.target`` is an error.
        """
        if not self.text.isascii():
            self.non_ascii()
        stmts = statements(self.text)
        self.check_opening(stmts)
        i, n = 0, len(stmts)
        while i < n:
            st = stmts[i]
            kind = st.kind
            if kind == COMMENT:
                self.pending_comments.append(st.text)
                i += 1
                continue
            if kind == LINE:
                self.module_line(st)
            elif kind == HEADER:
                i = self.function(stmts, i)
                self.pending_comments = []
                continue
            elif kind == STMT:
                if not st.text:
                    self.no_empty_statement(st)
                self.module_statement(st)
            elif kind == LABEL:
                raise self.error(st.line, f"label {st.text} outside a function body")
            else:
                raise self.error(st.line, f"unexpected '{st.text}' at module scope")
            self.pending_comments = []
            i += 1
        if self.target is None:
            raise self.error(1, "no .target directive: a PTX module names its target (.target sm_XX)")
        self.check_alias_targets()
        if not self.kernels:
            return Reading(None, self.findings, self.opaque, self.version, self.target, self.target_line,
                           self.version_line, self.too_new)
        try:
            module = Module(self.kernels, version=self.version, declarations=self.declarations,
                            target_options=self.target_options)
        except PtxforgeError as e:
            raise self.error(self.version_line or 1, e.message) from None
        return Reading(module, self.findings, self.opaque, self.version, self.target, self.target_line,
                           self.version_line, self.too_new)

    def check_pragma(self, text: str, line: int):
        """ParseError unless `text` is `.pragma "word"` or a comma-separated list of such strings, the form ptxas
        parses (a bare word or a number is its syntax error)."""
        if _PRAGMA.match(text) is None:
            raise self.error(line, '.pragma takes one or more double-quoted strings separated by commas: .pragma '
                                   '"nounroll";')

    def check_opening(self, stmts):
        """ParseError unless the module opens as ptxas requires: `.version` first, `.target` next (comments
        aside); ptxas refuses anything else ("Missing .version directive at start of file", "Missing .target
        directive ...").  A text with no statement after `.version` is left to the missing-target error."""
        opening = []
        for st in stmts:
            if st.kind != COMMENT:
                opening.append(st)
                if len(opening) == 2:
                    break
        for st, want, example in zip(opening, (".version", ".target"), (".version 8.0", ".target sm_90")):
            if st.kind == LINE and st.text.split(None, 1)[0] == want:
                continue
            first = st.text.split("\n", 1)[0][:60]
            raise self.error(st.line, f"a PTX module opens with .version, then .target: {want} must come "
                                      f"before {first!r} (ptxas: 'Missing {want} directive at start of file'); "
                                      f"write it first, e.g. '{example}'")

    def non_ascii(self):
        """Raise the ParseError for the first non-ASCII character of the text (ptxas refuses any, even in a
        comment)."""
        at = next(i for i, ch in enumerate(self.text) if not ch.isascii())
        ch = self.text[at]
        raise self.error(self.text.count("\n", 0, at) + 1, f"non-ASCII character U+{ord(ch):04X} ({ch!r}): PTX is "
                                                            "ASCII, comments included (ptxas refuses it)")

    def no_empty_statement(self, st):
        """Raise the ParseError for an empty statement (a `;` with nothing before it: ptxas refuses it)."""
        raise self.error(st.line, "an empty statement (a ';' with nothing before it): ptxas refuses it; remove the "
                                  "';'")

    def line_directive(self, st) -> str:
        """The text of line directive `st`; a ParseError when a `;` ends it (it ends at the end of its line)."""
        if st.text.endswith(";"):
            head = st.text.split(None, 1)[0]
            raise self.error(st.line, f"{head} is a line directive: it ends at the end of its line, with no ';' "
                                      "(ptxas refuses one)")
        return st.text

    def module_line(self, st):
        """One module-level directive line (``.version``, ``.target``, ``.address_size`` ...)."""
        text = self.line_directive(st)
        word = text.split(None, 1)
        head = word[0]
        arg = word[1].strip() if len(word) > 1 else ""
        if head == ".version":
            if self.version_line:
                raise self.error(st.line, f"a second .version (the first is at line {self.version_line}): a module "
                                          "has one, at its start (ptxas refuses another)")
            try:
                self.version = PtxVersion.parse(arg)
            except PtxforgeError as e:
                raise self.error(st.line, e.message) from None
            self.version_line = st.line
            if self.version not in RELEASED_VERSIONS:  # as the builder: any version renders; the assembler judges
                newer = self.version > RELEASED_VERSIONS[-1]
                self.note(st.line, "warning", f".version {self.version} is no released PTX ISA version "
                                              f"({RELEASED_VERSIONS[0]} to {RELEASED_VERSIONS[-1]}, not every one "
                                              "in between); an assembler refuses a .version "
                                              + ("newer than its own" if newer else "it does not know"))
        elif head == ".target":
            names = [a.strip() for a in arg.split(",")]
            try:
                self.target = Target.parse(names[0])
            except PtxforgeError as e:
                raise self.error(st.line, e.message) from None
            self.target_line = st.line
            for opt in names[1:]:
                if opt not in ("debug", "texmode_unified", "texmode_independent", "map_f64_to_f32"):
                    raise self.error(st.line, f".target option {opt} is not one of debug, texmode_unified, "
                                              "texmode_independent, map_f64_to_f32")
            self.target_options = tuple(names[1:])
        elif head == ".address_size":
            if arg != "64":
                raise self.error(st.line, f".address_size {arg}: ptxforge writes and reads 64-bit modules only")
        else:  # .file, .section, @@DWARF: kept as written
            if head == ".section" and text.count("{") != text.count("}"):
                raise self.error(st.line, f"the {text.split(None, 2)[:2][-1]} section's {{ }} block is never closed")
            self.declarations.append(RawDirective(text))

    def module_statement(self, st):
        """One module-level statement: a ``.pragma``, a variable declaration (global, const, shared, extern) or a
        function prototype.
        """
        text = st.text
        words = text.split()
        head = words[0]
        if head == ".pragma":
            self.check_pragma(text, st.line)
            self.declarations.append(RawDirective(text + ";"))
            return
        if head == ".alias":
            self.alias(text, st.line)
            return
        link = head if head in _LINKAGE else ""
        rest = words[1:] if link else words
        if rest and rest[0] == ".entry":  # a kernel's declaration (`.visible .entry k(.param .u64 p);`): nothing
            if text.count("(") != text.count(")"):
                raise self.error(st.line, "the parameter list's ( is never closed by a )")
            if not _ENTRY_DECL.match(text):  # calls a kernel, so it is kept as written
                raise self.error(st.line, "a kernel declaration is `{.visible|.extern|.weak} .entry name(.param ... "
                                          "p, ...);` (a definition opens its body with { on the header)")
            self.declarations.append(RawDirective(" ".join(text.split()) + ";"))
            return
        if rest and rest[0] == ".func":
            proto = self.prototype(text, st.line, link)
            self.functions[proto.name] = proto
            self.prototyped.add(proto.name)
            self.declarations.append(proto)
            return
        if rest and rest[0].startswith(".attribute"):  # `.visible .attribute(.managed) .global ...`: ptxas takes
            rest = rest[1:]                               # the attribute before the space as after it
        if rest and rest[0] in _SPACES:
            for one in _each_declared(text):
                self.module_variable(one, st.line)
            return
        message = (f"'{head}' is not a module-scope directive ptxforge reads (it reads .version, .target, "
                   ".address_size, variables, .func/.entry, .extern, .pragma, .file, .section)")
        if self.strict or not _keepable(text):
            raise self.error(st.line, message)
        self.note(st.line, "error", message + "; kept as written")
        self.opaque.append((st.line, text, message))
        self.declarations.append(RawDirective(text + ";"))

    # ------------------------------------------------------------ declarations
    def module_variable(self, text: str, line: int):
        """One module-scope variable declared by `text` at `line`."""
        var = self.variable(text, line)
        if not self.declare_module_variable(var, line):
            return
        if var.init is not None:
            self.declare_initializer_functions(var)
        if var.space == "shared" and var.linkage == ".extern" and var.dims and var.dims[-1] is None:
            sym = Symbol(var.name, "shared", T.b8, None, var.align or var.natural_align)
            self.externs.append(sym)
            self.module_symbols[var.name] = sym
            return
        self.module_symbols[var.name] = var.symbol
        self.declarations.append(var)

    def declare_module_variable(self, var: Variable, line: int) -> bool:
        """Record module variable `var` declared at `line`; whether it is a declaration of its own.  A name
        declared before is an error unless one of the two declarations is `.extern` (it names a variable
        defined elsewhere), as ptxas rules: then the module keeps one declaration, the definition."""
        old = self.module_lines.get(var.name)
        if old is None:
            self.module_lines[var.name] = (line, var.linkage, var)
            return True
        if var.linkage != ".extern" and old[1] != ".extern":
            raise self.error(line, f"variable {var.name} is already declared at line {old[0]}: a module declares a "
                                   "name once (.extern declares one that is defined elsewhere)")
        if var.linkage == ".extern":
            return False
        if old[2] in self.declarations:  # the definition of what an earlier .extern declared: it takes its place
            self.declarations[self.declarations.index(old[2])] = var
            self.module_lines[var.name] = (line, var.linkage, var)
            self.module_symbols[var.name] = var.symbol
            return False
        return True

    def variable(self, text: str, line: int, default_space: str | None = None) -> Variable:
        """A `Variable` from a declaration `text` at `line` (space, alignment, type, dimensions, initializer);
        `default_space` where the text names none.
        """
        init = None
        if "=" in text:
            text, init = text.split("=", 1)
            init = " ".join(init.split())
            if not _balanced(init) or (("{" in init) != init.startswith("{")):
                raise self.error(line, f"initializer '{init}' is neither a value nor a {{ ... }} list")
        words = text.split()
        linkage, extra, space, align, t, name, vector = "", [], None, None, None, None, 1
        i = 0
        while i < len(words):
            w = words[i]
            if w in _LINKAGE:
                linkage = w
            elif w in _SPACES or w == ".param":
                space = w[1:]
            elif w == ".align":
                i += 1
                align = self.alignment(words, i, line)
            elif w.startswith(".attribute"):
                extra.append(w)
            elif w.startswith(".v") and w[2:].isdigit() and t is None:
                vector = int(w[2:])
                if w not in (".v2", ".v4"):
                    raise self.error(line, f"{w}: a vector variable is .v2 or .v4")
                if i + 1 >= len(words) or not _is_type(words[i + 1]):
                    raise self.error(line, f"{w} is followed by the element type: {{.align N}} {w} .type name")
            elif w.startswith(".") and t is None:
                try:
                    t = T.lookup(w)
                except PtxforgeError:
                    if w in (".texref", ".surfref", ".samplerref"):
                        raise self.error(line, f"{w} variables (texture, surface and sampler references, which CUDA "
                                               "12 removed) are not read: ptxforge reads texture and surface objects, "
                                               ".u64 handles passed as parameters") from None
                    raise self.error(line, f"unknown type {w} in a variable declaration") from None
                if vector != 1:
                    self.check_vector_type(w, t, vector, line)
            else:
                name = " ".join(words[i:])
                break
            i += 1
        if name is None or t is None or (space is None and default_space is None):
            raise self.error(line, "a variable is declared as {linkage} .space {.align N} .type name{[n]} {= init}")
        base, dims = self.dims(name, line)
        if not _NAME.match(base):
            raise self.error(line, f"variable name '{base}' is not a PTX identifier")
        if align is not None and (align < 1 or align & (align - 1)):
            raise self.error(line, f".align {align} is not a power of two")
        var = Variable(base, space or default_space, t, align, dims, init, linkage, " ".join(extra), self.loc(line),
                       vector)
        if init is not None:
            try:
                self.check_initializer(var)
            except ValidationError as e:
                raise self.error(line, f"initializer of {base}: {e.message}") from None
        return var

    def check_initializer(self, var: Variable):
        """ValidationError unless `var`'s initializer is one ptxas takes: none for .f16/.bf16 (and their
        pairs) and .pred; one value for a scalar, `{ }` lists nested as deep as the array's dimensions with at
        most as many items as each; float literals for .f32/.f64, integers or addresses for .u/.s types
        (a constant expression is left to ptxas); an address names a .global/.const variable or a device function declared before it."""
        t = var.type
        if t.is_pred or t.name in ("f16", "bf16", "f16x2", "bf16x2"):
            raise ValidationError(f"a .{t.name} variable takes no initializer (ptxas refuses one)"
                                  + (f"; declare .b{t.bits} and give the bits" if not t.is_pred else ""))
        self.check_shape(initializer_items(var.init), var.dims, var.vector)
        for word in initializer_words(initializer_items(var.init)):
            value = initializer_value(word)
            if value is None:  # a constant expression (`1+2`): kept as written, for ptxas to judge
                continue
            if t.is_float and value[0] != "float":
                raise ValidationError(f"'{word}' is not a float literal: a .{t.name} initializer takes float "
                                      "literals (1.0, 0f3F800000)")
            if t.kind in ("u", "s") and value[0] == "float":
                raise ValidationError(f"'{word}' is a float literal: a .{t.name} initializer takes integers "
                                      "(or addresses)")
            if value[0] == "address":
                self.check_initializer_address(word, value[1], value[2])

    def declare_initializer_functions(self, var: Variable):
        """Declare by a prototype each device function defined above whose address `var`'s initializer holds
        (a function-pointer table): the module renders its declarations before its functions, and ptxas takes
        a function's address in an initializer only after the function is declared."""
        for word in initializer_words(initializer_items(var.init)):
            value = initializer_value(word)
            if value is not None and value[0] == "address":
                self.declare_defined_function(value[1])

    def declare_defined_function(self, name: str):
        """Append a prototype of device function `name` to the module-scope declarations when it is defined
        above and no prototype declares it yet (what the module renders before its functions must not name a
        function declared only by its definition); the prototype has the function's linkage, return values,
        parameters and `.noreturn`, as ptxas requires of a declaration and its definition."""
        decl = self.functions.get(name)
        if not isinstance(decl, Function) or name in self.prototyped:
            return
        self.prototyped.add(name)
        self.declarations.append(Prototype(name, decl.returns, decl.params, decl.linkage, _flags(decl.directives)))

    def check_vector_type(self, word: str, t, vector: int, line: int):
        """ParseError unless .v`vector` of type `t` (spelled `word`) is a vector variable ptxas declares: no
        .pred, at most 128 bits."""
        if t.is_pred:
            raise self.error(line, f".v{vector} {word}: a .pred variable is a scalar register (ptxas: predicate type "
                                   "can only be used to define scalar register variables)")
        if t.bits * vector > 128:
            raise self.error(line, f".v{vector} {word} is {t.bits * vector} bits: a vector has at most 128 (ptxas: "
                                   "vector type too large)")

    def check_shape(self, items, dims: tuple, vector: int = 1):
        """ValidationError unless `items` (see `initializer_items`) nest as `dims` (array sizes) ask, each
        element of a .v`vector` variable a `{ }` list of exactly `vector` values."""
        if not dims:
            if vector != 1:
                if isinstance(items, str) or len(items) != vector or not all(isinstance(x, str) for x in items):
                    raise ValidationError(f"a .v{vector} value is a {{ }} list of {vector} values, got "
                                          f"{_items_text(items)} (ptxas: incorrect number of elements in vector "
                                          "initializer)")
                return
            if not isinstance(items, str):
                raise ValidationError("a scalar takes one value, not a { } list")
            return
        if isinstance(items, str):
            raise ValidationError(f"an array takes a {{ }} list, not the single value {items}")
        if dims[0] is not None and len(items) > dims[0]:
            raise ValidationError(f"{len(items)} values for {dims[0]} elements (ptxas: greater number of elements "
                                  "in array initializer)")
        for x in items:
            if len(dims) > 1 or not isinstance(x, str) or vector != 1:
                self.check_shape(x, dims[1:], vector)

    def check_initializer_address(self, word: str, name: str, generic: bool):
        """ValidationError unless address `word` names a .global/.const variable declared before it (or, not
        through generic(), a device function)."""
        sym = self.module_symbols.get(name)
        if sym is not None and sym.space in ("global", "const"):
            return
        if sym is not None:
            raise ValidationError(f"{word}: {name} is a .{sym.space} variable; an initializer takes the address of "
                                  "a .global or .const variable")
        if name in self.functions and not generic:
            return
        raise ValidationError(f"{word}: {name} names no .global/.const variable"
                              + (" (a device function's address is written without generic())" if name in
                                 self.functions else " or device function declared before it"))

    def dims(self, name: str, line: int):
        """(base name, dimensions) of a declared name such as ``buf[4][8]`` (a dimension may be empty: ``[]``).
        """
        name = name.replace(" ", "")
        if "[" not in name:
            return name, ()
        base = name[:name.index("[")]
        dims = []
        for d in re.findall(r"\[([^\]]*)\]", name):
            if d == "":
                dims.append(None)
            else:
                v = parse_int(d)
                if v is None or v <= 0:
                    raise self.error(line, f"array size [{d}] must be a positive integer")
                dims.append(v)
        return base, tuple(dims)

    def alignment(self, words: list, i: int, line: int) -> int:
        """The value of `.align N` whose N is words[i]: a power of two (ptxas refuses any other)."""
        align = parse_int(words[i]) if i < len(words) else None
        if align is None or align <= 0 or align & (align - 1):
            raise self.error(line, f".align takes a power of two, got {words[i] if i < len(words) else 'none'}")
        return align

    def param(self, text: str, line: int, writable: bool = False):
        """(Param for rendering, Symbol the body names it by) of one `.param ...` declaration; for a `.reg`
        parameter (`reg_param`), (RegParam, the register's spelling)."""
        words = text.split()
        if words and words[0] == ".reg":
            return self.reg_param(words, line)
        if not words or words[0] != ".param":
            raise self.error(line, f"'{text}': parameters are declared `.param .type name` or `.reg .type name`")
        t, align, ptr_space, ptr, name = None, None, None, False, None
        late = False  # an .align after the type, which ptxas takes and ignores (unless after .ptr: the pointee's)
        i = 1
        while i < len(words):
            w = words[i]
            if w == ".align":
                i += 1
                align = self.alignment(words, i, line)
                late = t is not None
            elif w == ".ptr":
                ptr = True
            elif ptr and w in (".global", ".shared", ".const", ".local"):
                ptr_space = w[1:]
            elif w.startswith(".") and t is None:
                try:
                    t = T.lookup(w)
                except PtxforgeError:
                    raise self.error(line, f"unknown parameter type {w}") from None
            else:
                name = "".join(words[i:])
                break
            i += 1
        if t is None or name is None:
            raise self.error(line, f"'{text}': a parameter is `.param {{.align N}} .type name{{[n]}}`")
        base, dims = self.dims(name, line)
        if not _NAME.match(base):
            raise self.error(line, f"parameter name '{base}' is not a PTX identifier")
        if late and not ptr:  # ptxas places `.param .u64 .align 16 p` (or `.b8 .align 16 a[16]`) as without it
            self.note(line, "warning", f"parameter {base}: ptxas ignores an .align written after the type (the "
                                       f"parameter sits at its type's alignment); write `.param .align {align} "
                                       f".{t.name} {name}` to align it")
            align = None
        elem = max(t.bits // 8, 1)
        normalized = " ".join(text.split()).replace(" [", "[")
        if dims:
            n = elem
            for d in dims:
                if d is None:
                    raise self.error(line, f"parameter {base}: an array parameter needs a size")
                n *= d
            p = ParamDecl(base, T.b8, None, None, n, align or elem, spelling=normalized)
            if t is T.b8 and align is not None and len(dims) == 1:
                p = Param(base, T.b8, None, None, n, align)
        elif ptr or t.is_pred:
            # a pointer's `.ptr .align A` is its pointee's alignment (nvcc 13 writes `.ptr .align 1` for sm_100 and
            # newer): the parameter sits at its own size in the buffer, so with no state space to say it is a
            # pointer, that alignment is left out of the layout (the spelling keeps it)
            p = ParamDecl(base, t, None, ptr_space, None, None if ptr and ptr_space is None else align,
                          spelling=normalized)
        else:  # a scalar's .align above its size places it in the parameter buffer (ptxas takes and ignores less)
            p = Param(base, t, align=align if align is not None and align > elem else None)
        sym = p.symbol
        if writable:
            sym = CallParam(sym.name, "param", sym.type, sym.nbytes, sym.align)
        return p, sym

    def reg_param(self, words: list, line: int):
        """(RegParam, the spelling the body names it by) of a `.reg .type name` parameter or return value of a
        device function: a scalar of a type a register has; not .pred (ptxas: 'passing predicate ... parameters
        to device functions is not supported')."""
        text = " ".join(words)
        if len(words) == 4 and re.fullmatch(r"\.v\d+", words[1]):
            raise self.error(line, _vector_reg_param(text, words))
        if len(words) != 3 or not _REG_NAME.match(words[2]):
            raise self.error(line, f"'{text}': a .reg parameter is `.reg .type name` (a scalar: no .align, "
                                   "vector or array)")
        try:
            t = T.lookup(words[1])
        except PtxforgeError as e:
            raise self.error(line, f"'{text}': {e.message}") from None
        if t.is_pred:
            raise self.error(line, f"'{text}': ptxas passes no .pred parameter to a device function (in ABI "
                                   "compilation, passing predicate ... parameters to device functions is not "
                                   "supported); pass a .b32 0 or 1")
        if not t.can_declare:
            raise self.error(line, f"'{text}': .{t.name} is a packed type; declare a .b{t.bits} parameter")
        return RegParam(words[2].lstrip("%"), t), words[2]

    def prototype(self, text: str, line: int, linkage: str):
        """A `Prototype` (name, returns, params, linkage, directives) from a function header with no body."""
        name, returns, params, rest = self.signature(text, line)
        directives = self.directives(rest, line) if rest else ()
        return Prototype(name, tuple(p for p, _ in returns), tuple(p for p, _ in params), linkage, directives)

    # ------------------------------------------------------------ .alias
    def alias(self, text: str, line: int):
        """`.alias name, target;`: device function `name` (declared before by a prototype, never defined) is
        `target` (a device function declared before it, defined in this module), as ptxas rules: PTX ISA 6.3,
        no kernel, no `.weak` or `.extern` function, the same signature (types, sizes, alignments, `.noreturn`),
        one alias per name."""
        names = [x.strip() for x in text[len(".alias"):].split(",")]
        if len(names) != 2 or not all(_REG_NAME.match(x) and not x.startswith("%") for x in names):
            raise self.error(line, ".alias takes two function names: .alias alias_name, function_name;")
        name, target = names
        need = PtxVersion.parse("6.3")
        if self.version is not None and self.version < need:
            raise self.error(line, f"'.alias' needs PTX ISA {need}; the file says .version {self.version}",
                             TargetError)
        old = self.aliases.get(name)
        if old is not None:
            raise self.error(line, f"{name} is already an alias of {old.target} (line {old.loc.lineno}): a name is "
                                   "aliased once")
        alias_decl = self.alias_end(name, line, "alias")
        target_decl = self.alias_end(target, line, "function")
        if name == target:
            raise self.error(line, f".alias {name}, {target}: a function is no alias of itself")
        if signature_key(alias_decl.returns, alias_decl.params, alias_decl.directives) != signature_key(
                target_decl.returns, target_decl.params, target_decl.directives):
            raise self.error(line, f"the prototype of {name} ({alias_decl.render()}) and of {target} differ: an alias "
                                   "has its function's return values, parameters (types, sizes, alignments) and "
                                   ".noreturn (ptxas: mismatch in prototype of alias)")
        alias = Alias(name, target, self.loc(line))
        self.aliases[name] = alias
        self.declare_defined_function(target)
        self.declarations.append(alias)

    def alias_end(self, name: str, line: int, role: str):
        """The declaration of `name` as one end of an `.alias` (`role` "alias": a prototype, never defined;
        "function": a device function declared before, neither `.weak` nor `.extern`); a ParseError saying what
        it is otherwise."""
        decl = self.functions.get(name)
        if decl is None:
            if name in self.defined:
                raise self.error(line, f"{name} is a kernel: an .alias names device functions (.func)")
            if name in self.module_lines:
                raise self.error(line, f"{name} is a variable: an .alias names device functions (.func)")
            raise self.error(line, f"{name} is not declared before the .alias: declare the "
                                   + ("alias by a prototype (.func ... name(...);)" if role == "alias"
                                      else "function (or its prototype) before it"))
        if role == "alias" and not isinstance(decl, Prototype):
            raise self.error(line, f"{name} is defined at line {self.defined[name]}: an alias is a prototype with "
                                   "no body of its own (ptxas: illegal redefinition of function as alias)")
        if role == "function" and decl.linkage in (".weak", ".extern") and name not in self.aliases:
            raise self.error(line, f"{name} is {decl.linkage}: ptxas aliases no {decl.linkage} function (it must be "
                                   "defined here, once)")
        return decl

    def check_alias_targets(self):
        """ParseError unless the function each `.alias` names is defined in the module (or is an alias of one)."""
        for alias in self.aliases.values():
            seen = {alias.name}
            target = alias.target
            while target in self.aliases and target not in seen:
                seen.add(target)
                target = self.aliases[target].target
            if target not in self.defined:
                raise self.error(alias.loc.lineno, f"{alias.target}, which {alias.name} aliases, is never defined in "
                                                   "this module: an alias names a function defined here")

    def signature(self, text: str, line: int):
        """(name, returns, params, directives text) of `{linkage} .entry|.func {(rets)} name (params) dirs`."""
        try:
            return self._signature(text, line)
        except ParseError:
            raise
        except ValidationError as e:
            raise self.error(line, e.message) from None

    def _signature(self, text: str, line: int):
        m = re.match(r"\s*(?:\.\w+\s+)*?\.(?:entry|func)\s*", text)
        if m is None:
            raise self.error(line, "expected .entry or .func")
        rest = text[m.end():]
        returns = []
        if rest.startswith("("):
            close = _matching(rest, 0)
            returns = [self.param(p, self.header_line(line, p), writable=True) for p in split_top(rest[1:close]) if p]
            rest = rest[close + 1:].strip()
        mm = re.match(r"([A-Za-z_$][\w$]*)\s*", rest)
        if mm is None:
            raise self.error(line, "expected a function name")
        name = mm.group(1)
        rest = rest[mm.end():]
        params = []
        if rest.startswith("("):
            close = _matching(rest, 0)
            params = [self.param(p, self.header_line(line, p)) for p in split_top(rest[1:close]) if p]
            rest = rest[close + 1:].strip()
        return name, returns, params, rest

    def directives(self, text: str, line: int):
        """The performance directives of a function header (``.maxntid``, ``.reqntid``, ``.minnctapersm``,
        ``.maxnreg``, cluster ones, flags) as (name, value) pairs; an unknown one or a bad value is an error.
        """
        out = []
        header = line
        for piece in re.findall(r"\.(\w+)([^.]*)", text):
            key, val = piece[0], piece[1].strip()
            line = self.directive_line(header, key)
            if key in _FLAGS:
                if val:
                    raise self.error(line, f".{key} takes no value, got '{val}'")
                out.append((key, None))  # a flag directive, as the builder records .explicitcluster
                continue
            if key not in _PERF:
                raise self.error(line, f".{key} is not a performance directive ptxforge reads; known: "
                                       + ", ".join("." + k for k in _PERF))
            nums = [parse_int(x.strip()) for x in val.split(",") if x.strip()]
            if not nums or None in nums:
                raise self.error(line, f".{key} takes integers, got '{val}'")
            if _PERF[key] == 3:
                if len(nums) > 3:
                    raise self.error(line, f".{key} takes 1 to 3 sizes")
                out.append((key, tuple(nums) + (1,) * (3 - len(nums))))
            else:
                out.append((key, nums[0]))
        return tuple(out)

    # ------------------------------------------------------------ functions
    def function(self, stmts, i) -> int:
        """Read the function whose header is statement `i` (an ``.entry`` or ``.func``, with or without a body)
        and return the index of the statement after it.
        """
        head = stmts[i]
        text = head.text
        words = text.split("(", 1)[0].split()
        linkage = next((w for w in words if w in _LINKAGE), "")
        kind = "entry" if ".entry" in words else "func"
        name, returns, params, rest = self.signature(text, head.line)
        directives = self.directives(rest, head.line) if rest else ()
        if i + 1 >= len(stmts) or stmts[i + 1].kind != OPEN:
            raise self.error(head.line, f"{name}: expected the body's {{")
        first = self.defined.get(name)
        if first is not None:
            raise self.error(head.line, f"{'kernel' if kind == 'entry' else 'function'} {name} is already defined "
                                        f"at line {first}: a module defines a name once")
        self.defined[name] = head.line
        notes = []
        for c in self.pending_comments:
            m = _NOTE.match(c)
            if m is not None and m.group(1) == name:
                notes.append((m.group(2), m.group(3)))
        if self.target is None:
            raise self.error(head.line, f"{name} comes before any .target directive")
        if kind == "func":
            self.functions.setdefault(name, None)  # a function may call itself
        else:  # a kernel's address is an operand from its header on (dynamic parallelism launches it, itself too)
            self.entries.add(name)
        body = BodyReader(self, name, kind, head.line, directives)
        seen: dict = {}  # parameter name -> the header line it was found on (a second one is looked for past it)
        for p, sym in params + returns:
            at = seen[p.name] = self.header_line(head.line, p.render(), seen.get(p.name, 0))
            if isinstance(p, RegParam):
                if kind == "entry":
                    raise self.error(at, f"kernel parameter {p.name} is .reg: a kernel's parameters are "
                                         ".param (ptxas: entry parameter must have .param state space)")
                body.declare_param_register(p, sym, at)
            else:
                body.declare_symbol(sym, at)
        j = body.read(stmts, i + 2)
        self.builder_rules(kind, name, directives, [p for p, _ in params], body.shared, head.line)
        if kind == "entry" and directive_entry_registers(directives) is None:
            for ins in body.items:  # ptxas drops setmaxnreg without an entry register cap (C7508)
                if isinstance(ins, Instruction) and ins.opcode == "setmaxnreg":
                    self.note(ins.loc.lineno, "warning", f"'{ins.mnemonic}' does nothing here: {name} has no register "
                                                       "cap at entry (.maxnreg, or .maxntid with .minnctapersm)")
                    warn_ignored_setmaxnreg(ins.loc)
        ordinary = kind == "entry" and linkage == ".visible" and not returns and not body.variables
        regs = body.used_registers()
        owner = body.owner
        args = (name, self.target, tuple(p for p, _ in params), directives, regs, tuple(body.shared),
                tuple(self.externs), tuple(body.items), owner, self.loc(head.line, name), tuple(notes))
        if ordinary:
            k = Kernel(*args)
        else:
            k = Function(*args, kind=kind, returns=tuple(p for p, _ in returns), linkage=linkage,
                         variables=tuple(body.variables))
        alias = self.aliases.get(name)
        if alias is not None:  # ptxas assembles calls of an alias to its function and drops this body
            message = (f"{name} is an alias of {alias.target} (line {alias.loc.lineno}): ptxas ignores this body and "
                       f"runs {alias.target} for {name}; the module leaves the body out")
            self.note(head.line, "warning", message)
            warn_at(IgnoredBodyWarning(message), self.loc(head.line, name))
            return j
        if kind == "func":
            self.functions[name] = k
        self.kernels.append(k)
        return j


    def header_line(self, header: int, declaration: str, after: int = 0) -> int:
        """The line of parameter `declaration` (its name, the last word) in the header that starts at line `header`
        (nvcc writes one parameter a line), past line `after`; `header` when the header is one line or the name
        is not found."""
        words = declaration.split()
        if not words:
            return header
        name = re.escape(words[-1].split("[", 1)[0].lstrip("%"))
        for n in range(header, header + 4096):
            if n > header and n > len(self.lines or ()):
                break
            text = self.line_text(n).split("//", 1)[0]
            if n > max(header, after) and re.search(rf"(?<![\w$.%]){name}(?![\w$])", text):
                return n
            if "{" in text or ";" in text:
                break
        return header

    def directive_line(self, header: int, key: str) -> int:
        """The line of performance directive `.key` in the function header that starts at line `header` (up to
        its body's `{`); `header` itself when it is not found on a line of its own."""
        for n in range(header, header + 64):
            text = self.line_text(n).split("//", 1)[0]
            if re.search(rf"\.{key}\b", text):
                return n
            if "{" in text or n > len(self.lines):
                break
        return header

    def builder_rules(self, kind, name, directives, params, shared, line):
        """The builder's rules for what it also makes: the name, the performance directives, a
        kernel's parameters, static shared memory (at most 48 KB).  Its warnings become findings."""
        perf = {k: v for k, v in directives if k in ("maxntid", "reqntid", "minnctapersm", "maxnreg",
                                                        "reqnctapercluster", "maxclusterrank")}
        if any(k == "explicitcluster" for k, _ in directives):
            perf["explicitcluster"] = True
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                kb = KernelBuilder(name, self.target, **perf)
                if kind == "entry":
                    for p in params:
                        kb.param(p.name, p.type, pointee=p.pointee, space=p.space, nbytes=p.nbytes,
                                 align=p.align)
                for sym in shared:
                    kb.shared(sym.name, sym.nbytes, sym.align)
            except PtxforgeError as e:
                named = [k for k in tuple(_PERF) + _FLAGS if f".{k}" in e.message]
                at = max((self.directive_line(line, k) for k in named), default=line)
                raise self.error(at, f"{name}: {e.message}") from None
        for w in caught:
            self.note(line, "warning", f"{name}: {w.message}")


def _vector_reg_param(text: str, words: list) -> str:
    """Why a vector `.reg` parameter (`.reg .v4 .f32 a`: `words`) is not read, and what to declare instead."""
    name = words[3].lstrip("%")
    try:
        size = int(words[1][2:]) * max(T.lookup(words[2]).bits // 8, 1)
    except PtxforgeError:
        size = None
    instead = (f"; declare it `.param .align {size} .b8 {name}[{size}]` and pass it with st.param{words[1]} / "
               f"ld.param{words[1]}" if size else "")
    return (f"'{text}': a .reg parameter is `.reg .type name` (a scalar: no .align, vector or array) here.  ptxas "
            f"takes a vector one, but passes it only in a vector register (`.reg {words[1]} {words[2]} %v;` at the "
            "call, `call f, (%v);`: a { } list or scalar registers are refused), and the body names its components "
            f"({words[3]}.x, {words[3]}.y, ...) or the whole vector; ptxforge has no vector registers or component "
            "operands, so it is not read" + instead)


def needing(ins) -> str:
    """What instruction `ins` needs a newer target or PTX ISA for, as a refusal names it: the mnemonic, or the
    special register that raises its requirement (`%cluster_ctarank (read by 'mov.b32')`)."""
    for op in ins.operands:
        if isinstance(op, SpecialReg):
            need = SPECIAL_REQUIREMENTS.get(op.name)
            if need is not None and need.min_sm >= ins.req.min_sm and need.min_ptx >= ins.req.min_ptx:
                return f"%{op.name} (read by '{ins.mnemonic}')"
    return f"'{ins.mnemonic}'"




#: the words of a variable declaration before its name: linkage, state space, `.align N`, `.vN`, the type
_DECL_HEAD = re.compile(r"\s*((?:\.[\w$().:]+(?:\s+\d+)?\s+)+)(.*)\Z", re.S)


def _each_declared(text: str) -> list:
    """The declarations of a variable declaration `text` that declares several names, as ptxas takes them
    (`.global .u32 a, b[4];`, `.shared .b8 s1[16], s2[32];`, `.global .u32 a = 1, b = 2;`): one text a name, each
    with the words before the first name; `[text]` for one name."""
    if "," not in text:
        return [text]
    m = _DECL_HEAD.match(text)
    if m is None:
        return [text]
    names = split_top(m.group(2))
    if len(names) < 2 or not all(names):
        return [text]
    return [m.group(1) + name for name in names]


def _flags(directives) -> tuple:
    """The flag directives (`.noreturn`) of a function header's directives: what a prototype of it repeats."""
    return tuple((k, v) for k, v in directives if v is None)


def _is_type(word: str) -> bool:
    """Whether `word` names a PTX type (`.f32`, `.b8`, ...)."""
    try:
        T.lookup(word)
    except PtxforgeError:
        return False
    return word.startswith(".")


def _items_text(items) -> str:
    """Initializer items (`initializer_items`) written back as PTX text."""
    return items if isinstance(items, str) else "{" + ", ".join(_items_text(x) for x in items) + "}"


def _balanced(text: str) -> bool:
    """Whether (), [] and {} nest properly in `text`."""
    stack = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in ")]}":
            if not stack or stack.pop() != "([{"[")]}".index(ch)]:
                return False
    return not stack


_DIRECTIVE_WORD = re.compile(r"\.[A-Za-z_]\w*\Z")


def _keepable(text: str) -> bool:
    """Whether an unknown directive can be kept verbatim: `.word args` with no brackets that could
    swallow what follows it when the module is read again."""
    return _DIRECTIVE_WORD.match(text.split(None, 1)[0]) is not None and not any(c in text for c in "{}()[]")


def _matching(text: str, start: int) -> int:
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ValidationError(f"unbalanced parentheses in '{text}'")


def _scoped_label_names(stmts, i) -> dict:
    """The names the labels of the body opening at statement `i` get where one label is placed in several
    `{ }` scopes (inline asm inlined twice: `{ ... LAB_WAIT: ... }` per copy), which ptxas takes: label
    spelling -> [(scope path, name)], the first placement keeping the spelling and the others `name$N`.
    A path is the lines of the open `{`s, outermost first, as `Scope.path` spells it."""
    depth, path, places = 0, (), {}
    while i < len(stmts):
        st = stmts[i]
        if st.kind == OPEN:
            depth += 1
            path += (st.line,)
        elif st.kind == CLOSE:
            if depth == 0:
                break
            depth -= 1
            path = path[:-1]
        elif st.kind == LABEL and not (i + 1 < len(stmts) and stmts[i + 1].kind == STMT
                                       and stmts[i + 1].text.startswith((".branchtargets", ".callprototype"))):
            places.setdefault(st.text, []).append(path)
        i += 1
    out = {}
    for text, paths in places.items():
        distinct = list(dict.fromkeys(paths))  # (a second placement in one scope keeps the name: "placed twice")
        if len(distinct) > 1:
            out[text] = [(p, text if k == 0 else f"{text}${k}") for k, p in enumerate(distinct)]
    return out


class BodyReader:
    """Reads one function body: declarations, labels, instructions, scopes."""

    def __init__(self, reader: Reader, name: str, kind: str, line: int, directives=()):
        self.r = reader
        self.name = name
        self.kind = kind
        self.line = line
        self.directives = directives  # the function's (name, value) directives, for the checks that need them
        self.owner = -next(_ids)
        self.declared: dict = {}  # register name -> type, in declaration order
        self.used: set = set()
        self.symbols: dict = {}
        self.shared: list = []
        self.variables: list = []
        self.items: list = []
        self.labels: dict = {}
        self.param_registers: set = set()  # spellings of the .reg parameters (declared by the header)
        self.scope = Scope(self.declared, self.symbols, reader.module_symbols, reader.functions, self.owner, name,
                           reader.entries)
        self.version = reader.version
        self.target = reader.target

    def declare_param_register(self, p, spelling: str, line: int):
        """Declare the register of `.reg` parameter `p` (spelled `spelling` in the header): the body names it as
        any register, and the header declares it (the body's `.reg` lines leave it out)."""
        if spelling in self.declared or p.name in self.symbols:
            raise self.r.error(line, f"{spelling} is declared twice in the header of {self.name}")
        try:
            self.scope.declare_register(spelling, p.type, line)
        except ValidationError as e:
            raise self.r.error(line, e.message) from None
        self.param_registers.add(spelling)

    def declare_symbol(self, sym, line):
        """Declare a function-scope variable; a name declared twice is an error."""
        if sym.name in self.symbols:
            raise self.r.error(line, f"'{sym.name}' is declared twice in {self.name}")
        self.symbols[sym.name] = sym

    def declare_regs(self, text: str, line: int, scoped: bool):
        """Declare the registers of a ``.reg .type %a, %b<N>, ...`` line (ranges expanded) in the innermost scope;
        a name the scope already declares is an error.  Inside a `{ }` scope, returns the `LocalDecl`s that
        declare them there, one a register (`.reg .f16 low, high;` is `.reg .f16 %low;` and `.reg .f16 %high;`,
        each what `KernelBuilder.scope_reg` writes), spelled with the names they got: see `Scope.declare_register`;
        at function scope, none."""
        words = text.split(None, 2)
        if len(words) < 3:
            raise self.r.error(line, "a register declaration is `.reg .type %name, %name<N>, ...`")
        tname = words[1]
        if tname.startswith(".v") and tname[2:].isdigit():
            raise self.r.error(line, f"vector registers (.reg {tname}) are not read: ptxforge has no vector register "
                                     "operands (a whole vector, or its components %v.x ...); declare scalar registers "
                                     "and use { } lists")
        try:
            t = T.lookup(tname)
        except PtxforgeError as e:
            raise self.r.error(line, e.message) from None
        if not t.can_declare and t is not T.b128:
            raise self.r.error(line, f".reg .{t.name}: .{t.name} is a packed type; declare .b32 registers")
        made = []
        for item in words[2].split(","):
            item = item.strip()
            if "<" in item:  # `%rd < 3 >`: ptxas takes spaces inside a range
                item = "".join(item.split())
            m = _RANGE.match(item)
            names = [item]
            if m is not None:
                if int(m.group(3)) > MAX_RANGE:
                    raise self.r.error(line, f"{item}: the reader declares a range's registers as it reads it and "
                                             f"takes ranges of up to {MAX_RANGE} registers (ptxas makes only those "
                                             "used); declare as many as the function uses")
                try:
                    nameable = self.scope.declare_range(m.group(1) + m.group(2), int(m.group(3)), line)
                except ValidationError as e:
                    raise self.r.error(line, e.message) from None
                # a register named without % (legal PTX) is written with one when ptxforge renders it
                names = [f"{m.group(1)}{m.group(2)}{k}" for k in range(int(m.group(3)))] if nameable else []
            if not m and not _REG_NAME.match(item):
                raise self.r.error(line, f"register name '{item}' is not a PTX identifier")
            regs = []
            for nm in names:
                try:
                    r = self.scope.declare_register(nm, t, line, ranged=m is not None)
                except ValidationError as e:
                    raise self.r.error(line, e.message) from None
                regs.append(r)
            made += regs
        if scoped:
            return [LocalDecl(f".reg {tname} {r};", registers=(r,), loc=self.r.loc(line, self.name))
                    for r in made]
        return ()

    def used_registers(self) -> tuple:
        """The function-scope registers the body's instructions name, in declaration order (those of a { } scope
        are declared by its `LocalDecl`)."""
        used = self.used
        regs = self.scope.registers
        out = []
        for key in self.declared:
            if key in self.param_registers:
                continue
            r = regs.get(key)
            if r is not None and r.name in used:
                out.append(r)
        return tuple(out)

    def read(self, stmts, i) -> int:
        """Read the body that opens at statement `i` up to its closing brace; returns the index of the statement
        after it.
        """
        depth = 0
        items = self.items
        r = self.r
        strict = r.strict
        n = len(stmts)
        self.scope.scoped_labels = _scoped_label_names(stmts, i)
        while i < n:
            st = stmts[i]
            kind = st.kind
            if kind == STMT:
                text = st.text
                if not text:
                    r.no_empty_statement(st)
                if text[0] == ".":
                    self.body_directive(text, st.line, depth)
                else:
                    ins = self.instruction(text, st.line, strict)
                    if ins is not None:
                        items.append(ins)
            elif kind == LABEL and i + 1 < n and stmts[i + 1].kind == STMT \
                    and stmts[i + 1].text.startswith(".branchtargets"):
                self.branch_targets(st.text, stmts[i + 1].text, stmts[i + 1].line)
                i += 2
                continue
            elif kind == LABEL and i + 1 < n and stmts[i + 1].kind == STMT \
                    and stmts[i + 1].text.startswith(".callprototype"):
                self.call_prototype(st.text, stmts[i + 1].text, stmts[i + 1].line, depth)
                i += 2
                continue
            elif kind == LABEL:
                lab = self.scope._named(st.text)
                name = self.scope.label_name(st.text)
                if name in self.labels:
                    raise r.error(st.line, f"label {st.text} is placed twice in {self.name}")
                if not isinstance(lab, Label):
                    raise r.error(st.line, f"label {st.text} has the name of a variable")
                self.labels[name] = (st.line, self.scope.path)
                items.append(LabelDef(lab, r.loc(st.line, self.name)))
            elif kind == COMMENT:
                text = st.text
                if text.startswith("---- "):
                    items.append(Comment(text[5:], section=True))
                else:
                    items.append(Comment(text))
            elif kind == OPEN:
                depth += 1
                self.scope.push(st.line)
                items.append(ScopeOpen())
            elif kind == CLOSE:
                if depth == 0:
                    self.finish_labels()
                    return i + 1
                depth -= 1
                self.scope.pop()
                items.append(ScopeClose())
            elif kind == LINE:
                if not st.text.startswith(".loc"):
                    raise r.error(st.line, f"{st.text.split(None, 1)[0]} belongs at module scope, not inside "
                                           f"{self.name}")
                # spacing normalized (".loc\t1 76 0" -> ".loc 1 76 0"): what KernelBuilder.debug_loc() writes
                items.append(BodyDirective(" ".join(r.line_directive(st).split()), r.loc(st.line, self.name)))
            else:
                raise r.error(st.line, f"unexpected {st.text!r} inside {self.name}")
            i += 1
        raise r.error(self.line, f"{self.name}: the body is never closed (missing }})")

    def branch_targets(self, name: str, text: str, line: int):
        """`name: .branchtargets L0, L1, ...;`: the label list a `brx.idx` names (its labels must be
        placed in this body)."""
        names = [x.strip() for x in text[len(".branchtargets"):].split(",")]
        if not names or not all(names):
            raise self.r.error(line, f"{name}: .branchtargets takes a comma-separated list of labels")
        labels = []
        for x in names:
            lab = self.scope._named(x, line)
            if not isinstance(lab, Label):
                raise self.r.error(line, f"{name}: {x} in a .branchtargets list is not a label")
            labels.append(lab)
        bt = BranchTargets(name, tuple(labels))
        self.declare_symbol(bt, line)
        self.scope.cache = {}
        self.items.append(BranchTargetsDecl(bt, loc=self.r.loc(line, self.name)))

    def call_prototype(self, name: str, text: str, line: int, depth: int):
        """`name: .callprototype (.param .t _) _ (.param .t _, ...);`: the signature an indirect call
        in this scope names."""
        rest = text[len(".callprototype"):].strip()
        _, returns, params, tail = self.r.signature(".func " + rest, line)
        if tail:
            raise self.r.error(line, f"{name}: unexpected '{tail}' after the .callprototype signature")
        proto = CallPrototype(name, tuple(p for p, _ in returns), tuple(p for p, _ in params))
        if depth > 0:
            self.scope.locals[-1][name] = proto
        else:
            self.declare_symbol(proto, line)
        self.scope.cache = {}
        self.items.append(CallPrototypeDecl(proto, loc=self.r.loc(line, self.name)))

    def finish_labels(self):  # (labels_used and self.labels are keyed by the names labels got: label_name)
        """Check that every label a branch names is placed in this body (or is a variable or a device function),
        in the { } scope of the branch or one around it."""
        for name, uses in self.scope.labels_used.items():
            placed = self.labels.get(name)
            if placed is None:
                raise self.r.error(uses[0][0], f"'{name}' is not a label of {self.name}, a declared variable or a "
                                               "device function")
            at, path = placed
            for line, where in uses:
                if where[:len(path)] != path:
                    raise self.r.error(line, f"label {name} is placed inside the {{ }} scope that opens at line "
                                             f"{path[-1]} (line {at}): a label of a scope is visible only inside it")

    def body_directive(self, text: str, line: int, depth: int):
        """One directive inside the body (``.reg``, ``.shared``, ``.local``, ``.param``, ``.pragma`` ...) at
        scope `depth`.
        """
        head = text.split(None, 1)[0]
        r = self.r
        if head == ".reg":
            self.items.extend(self.declare_regs(text, line, depth > 0))
            return
        if head == ".pragma":
            r.check_pragma(text, line)
            self.items.append(BodyDirective(text + ";", r.loc(line, self.name)))
            return
        if head == ".param":
            if depth == 0:
                raise r.error(line, ".param inside a body belongs in a { } call scope")
            for one in _each_declared(text):  # (`.param .b32 a0, a1;`: one declaration each)
                p, sym = r.param(one, line, writable=True)
                self.scope.locals[-1][sym.name] = sym
                self.scope.cache = {}
                self.items.append(LocalDecl(p.render() + ";", sym, loc=r.loc(line, self.name)))
            return
        if head in (".shared", ".local", ".global", ".const") or head in _LINKAGE:
            for one in _each_declared(text):
                self.variable(one, line)
            return
        message = (f"'{head}' is not a directive ptxforge reads inside a function body (it reads .reg, .shared, "
                   ".local, .param in call scopes, .pragma, .loc)")
        if r.strict or not _keepable(text):
            raise r.error(line, message)
        r.note(line, "error", message + "; kept as written")
        r.opaque.append((line, text, message))
        self.items.append(BodyDirective(text + ";", r.loc(line, self.name)))

    def variable(self, text: str, line: int):
        """One variable of the body declared by `text` at `line`."""
        r = self.r
        var = r.variable(text, line)
        if var.linkage == ".extern" and var.space == "shared":
            sym = Symbol(var.name, "shared", T.b8, None, var.align or var.natural_align)
            r.externs.append(sym)
            r.module_symbols[var.name] = sym
            return
        if var.space == "shared" and var.init is None and not var.linkage and var.nbytes:
            sym = Symbol(var.name, "shared", T.b8, var.nbytes, var.align or var.natural_align, self.owner)
            self.shared.append(sym)
        else:
            sym = var.symbol
            self.variables.append(var)
        self.declare_symbol(sym, line)

    def instruction(self, text: str, line: int, strict: bool):
        """One instruction line: its guard, mnemonic and operands, decoded through the ISA constructors and
        checked against the target; `strict` refuses what it cannot decode instead of keeping it opaque.
        """
        r = self.r
        statement = text
        gtext = None
        if text[0] == "@":
            m = _GUARD.match(text)  # `@%p`, `@!%p`, and with spaces: `@ %p`, `@ !%p` (ptxas takes them)
            gtext, text = "@" + m.group(1) + m.group(2), m.group(3)
        words = text.split(None, 1)
        mnemonic = words[0] if words else ""
        if not mnemonic:
            raise r.error(line, "a guard with no instruction")
        rest = words[1] if len(words) > 1 else ""
        glued = _OPERAND_START.search(mnemonic)
        if glued is not None and glued.start() > 0:  # `add.u32%r1,%r2,1;`: ptxas reads an operand that starts
            mnemonic = mnemonic[:glued.start()]       # with % [ { ( right after the mnemonic
            rest = text[len(mnemonic):].strip()
        if _MNEMONIC.match(mnemonic) is None:
            raise r.error(line, f"cannot read '{text}' as an instruction")
        scope = self.scope
        if ("[" in rest or "{" in rest or "(" in rest) and not _balanced(rest):
            raise r.error(line, "unbalanced brackets in the operands")
        loc = SourceLoc(r.filename, line, self.name)
        try:
            guard = None
            if gtext is not None:
                g = gtext.strip()
                neg = g[1:2] == "!"
                name = g[1 + neg:]
                if not name:
                    raise ValidationError(f"guard {g} names no predicate register")
                reg = scope._reg(name[1:]) if name[0] == "%" else scope.register(name)
                if reg is None:
                    raise ValidationError(f"guard {g}: {name} is not a declared register")
                if not isinstance(reg, Reg) or not reg.type.is_pred:
                    raise ValidationError(f"guard {g} is not a .pred register")
                guard = Guard(reg, neg)
            ops = [scope.operand(o, line) for o in split_top(rest)] if rest else []
            bad = None
        except ValidationError as e:
            if strict:
                raise r.error(*self.where(statement, rest, line, e.message)) from None
            bad = e.message
            ops = [_raw_or(scope, o, line) for o in split_top(rest)] if rest else []
        newer = None
        try:
            if bad is not None:
                raise ValidationError(bad)
            ins, narrowed = _decode_narrowing(mnemonic, ops)
            _check_float_literals(ins)
            if isinstance(ins.info, BulkInfo) and ins.info.multicast and type(ins.operands[-1]) is Imm:
                check_cluster_mask(ins.operands[-1].value, self.directives)  # (as the builder checks it)
            if ins.opcode == "call":
                callee = r.functions.get(ins.info.func)
                if callee is not None:  # the callee's signature: the same counts (ptxas checks the types)
                    call(ins.operands[1 if ins.info.returns else 0], ins.info.args, ins.info.returns,
                         ins.info.uni, (callee.returns, callee.params))
                else:
                    callee = ins.info.prototype
                if callee is not None:
                    ins = _register_arguments(ins, callee, narrowed)
            req = ins.req
            newer = (req, (line, mnemonic))  # (what a target or .version refusal below is about)
            if req.min_sm > self.target.sm or req.arch_specific:
                req.check(self.target, needing(ins))
            if self.version is not None and req.ptx_on(self.target) > self.version:
                raise TargetError(f"{needing(ins)} needs PTX ISA {req.ptx_on(self.target)}; the file says .version "
                                  f"{self.version}")
            ins = Instruction(ins.opcode, ins.mnemonic, ins.operands, ins.n_dst, guard, req, ins.info, ins.mods,
                              ins.type, loc)
            for value, kept, t in narrowed:
                message = (f"the literal {value} does not fit .{t.name}: ptxas keeps its low {t.bits} bits, "
                           f"{kept}{f' ({kept & ((1 << t.bits) - 1):#x})' if kept < 0 or kept >= 10 else ''}, "
                           "without a warning; the module holds that value")
                r.note(line, "warning", message)
                warn_at(NarrowedImmediateWarning(message), loc)
            if ins.opcode == "mma" and ins.info.a_type in (T.s4, T.u4) and not self.target.mma_s4_native:
                r.note(line, "warning", f"'{ins.mnemonic}' has no 4-bit tensor path on {self.target.name}: "
                                        f"ptxas emulates it ({S4_EMULATION_COST})")
                warn_emulated(ins.info, self.target, loc)
        except PtxforgeError as e:
            at, reason = self.where(statement, rest, line, _unreadable_operand(e.message, ops))
            if strict:
                raise r.error(at, reason, TargetError if isinstance(e, TargetError) else ParseError) from None
            r.note(at, "error", reason)
            r.opaque.append((line, text, reason))
            if isinstance(e, TargetError) and newer is not None:
                r.too_new.append(newer)
            n_dst = 1 if ops and isinstance(ops[0], (Reg, Vec, PairDst)) else 0
            ins = opaque(mnemonic, tuple(ops), reason, n_dst=n_dst, guard=guard, loc=loc)
        self.used.update(r.name for r in ins.registers())
        if ins.opcode == "call" and not is_opaque_call(ins):  # registers passed to .reg parameters
            self.used.update(x.name for x in ins.info.args + ins.info.returns if isinstance(x, Reg))
        return ins

    def where(self, statement: str, rest: str, line: int, reason: str) -> tuple:
        """(line, reason) of the refusal of the instruction `statement` (operands `rest`) that starts on `line`:
        as given, or, when it is two instructions with no ';' between them, the line that lacks the ';'."""
        head = statement[:len(statement) - len(rest)] if rest else statement
        semi = missing_semicolon(self.r.text, line, head, rest) if rest else None
        return semi if semi is not None else (line, reason)


#: The families whose source operands (values, not addresses or predicates) all have the instruction's type.
_TYPED_SOURCES = frozenset(("mov", "add", "sub", "mul", "div", "fma", "mad", "min", "max", "abs", "neg", "rcp", "sqrt",
                            "rsqrt", "sin", "cos", "lg2", "ex2", "tanh", "setp", "set", "selp", "slct", "testp",
                            "copysign", "st", "atom", "red"))


def _check_float_literals(ins):
    """ValidationError when an integer literal of the line is a floating-point operand: ptxas refuses that
    ('Arguments mismatch'); a float operand is spelled as a float literal.  In the families of
    `_TYPED_SOURCES` a source has the instruction's type, except the selector of `slct` (the second type)."""
    t = ins.type
    if ins.opcode not in _TYPED_SOURCES or not (t is not None and t.is_float or ins.opcode == "slct"):
        return
    ops = ins.operands
    for i in range(ins.n_dst, len(ops)):
        op = ops[i]
        if type(op) is not Imm or isinstance(op.value, float):
            continue
        ot = ins.info if ins.opcode == "slct" and i == len(ops) - 1 else t
        if isinstance(ot, T.ScalarType) and ot.is_float:
            if ot.name in ("f32", "f64"):
                bits = struct.pack(">f" if ot.bits == 32 else ">d", float(op.value)).hex().upper()
                legal = f"a float literal ({float(op.value)!r} or 0{'f' if ot.bits == 32 else 'd'}{bits})"
            else:
                legal = "no literal: give a register (mov.b16 %h, 0x3C00 holds 1.0 as .f16)"
            raise ValidationError(f"the integer literal {op.value} is a .{ot.name} operand here: a .{ot.name} operand "
                                  f"takes {legal}")


def is_opaque_call(ins) -> bool:
    """Whether `ins` is a call kept opaque (it has no call record to read arguments from)."""
    return not hasattr(ins.info, "args")


def _register_arguments(ins, callee, narrowed: list):
    """Call `ins` checked against the parameters of `callee` (a function, prototype or .callprototype) where it
    passes (or receives) registers or immediates, as ptxas checks them: a register of the parameter's size
    (ptxas: 'type of argument does not match formal parameter'), an integer immediate read as the parameter's
    type, keeping its low bits where it is wider (appended to `narrowed`, as `_decode_narrowing` does)."""
    info = ins.info
    args = list(info.args)
    for what, values, params in (("argument", args, callee.params), ("return value", info.returns,
                                                                      callee.returns)):
        for i, (x, p) in enumerate(zip(values, params)):
            if isinstance(x, Reg) and (p.nbytes is not None or x.type.bits != p.type.bits):
                raise ValidationError(f"call {what} {x} (.{x.type.name}) does not match parameter {p.name} of "
                                      f"{getattr(callee, 'name', '')} ({p.render()}): a register of its size "
                                      "(ptxas: type of argument does not match formal parameter)")
            if type(x) is Imm and (p.nbytes is not None or not x.fits(p.type)):
                if p.nbytes is not None or not isinstance(x.value, int) or not -(1 << 63) <= x.value < (1 << 64):
                    raise ValidationError(f"call {what} {x.value} does not fit parameter {p.name} ({p.render()})")
                kept = narrow_integer(x.value, p.type)
                narrowed.append((x.value, kept, p.type))
                values[i] = Imm(kept, x.type)
    if args == list(info.args):
        return ins
    func = ins.operands[1 if info.returns else 0]
    return call(func, tuple(args), info.returns, info.uni, targets=info.prototype)


def _decode_narrowing(mnemonic: str, ops: list):
    """(the decoded instruction, [(literal, value kept, type)]): `decode`, where an integer literal wider than
    its operand's type reads as ptxas reads it, its low bits (signed for an .s type).  A literal outside 64
    bits stays an error: ptxas reduces some of those modulo 2^64 and refuses others ('Constant overflow')."""
    narrowed = []
    while True:
        try:
            return decode(mnemonic, ops), narrowed
        except ValidationError as e:
            m = _WIDE_IMMEDIATE.search(e.message)
            if m is None or len(narrowed) >= len(ops):
                raise
            value, t = int(m.group(1)), T.lookup(m.group(2))
            if not -(1 << 63) <= value < (1 << 64):
                raise ValidationError(f"{e.message}, nor 64 bits: ptxas reduces some such literals modulo 2^64 and "
                                      "refuses others ('Constant overflow'); write the value in 64 bits") from None
            kept = narrow_integer(value, t)
            new = [_narrowed(op, value, kept) for op in ops]
            if new == ops:
                raise
            ops = new
            narrowed.append((value, kept, t))


def narrow_integer(value: int, t) -> int:
    """The value ptxas gives integer literal `value` as an operand of integer type `t`: its low `t.bits` bits,
    read as signed for an .s type and as unsigned otherwise."""
    kept = value & ((1 << t.bits) - 1)
    if t.kind == "s" and kept >= 1 << (t.bits - 1):
        kept -= 1 << t.bits
    return kept


def _narrowed(op, value: int, kept: int):
    """`op` with the integer literal `value` (alone or in a `{ }` vector) replaced by `kept`."""
    if type(op) is Imm and not isinstance(op.value, (float, bool)) and op.value == value:
        return Imm(kept, op.type)
    if type(op) is Vec:
        items = tuple(_narrowed(x, value, kept) for x in op.regs)
        return op if items == op.regs else Vec(items)
    return op


#: what may stand in an operand beside registers, names and literals: an operator of a constant expression
#: an integer constant expression, which ptxas evaluates (`1+1`, `(1 << 3)`, `-(4*2)`): numbers, operators, ( )
_CONSTANT_EXPRESSION = re.compile(r"[\s(]*[-~!]?[\s(]*(0[xX][0-9a-fA-F]+|\d+)U?"
                                  r"([\s)]*(<<|>>|[-+*/%&|^])[\s(]*[-~!]?[\s(]*(0[xX][0-9a-fA-F]+|\d+)U?)+[\s)]*\Z")
_RAW_IN_REASON = re.compile(r"RawOperand\(text='([^']*)'\)")


_PRAGMA = re.compile(r'\.pragma\s+"[^"]*"(\s*,\s*"[^"]*")*\Z')
_ENTRY_DECL = re.compile(r"(\.\w+\s+)?\.entry\s+[A-Za-z_$][\w$]*\s*\([^()]*\)\s*\Z")


def _unreadable_operand(reason: str, ops=()) -> str:
    """`reason`, a constructor's refusal of an instruction's operands `ops`, with each operand it names by its
    Python form (`PlainLabel(name='b4', owner=0)`, `Imm(value=3, type=None)`) named as the line spells it; a name
    read as a label, where a register or a value belongs, is said to be declared as nothing else.  When the
    operand is text the reader could not read (`RawOperand(text='...')`): what the text is not, and what to write
    (a constant expression's value: ptxas evaluates `1+1` or `(1<<3)`, the reader takes literals)."""
    m = _RAW_IN_REASON.search(reason)
    if m is not None:
        text = m.group(1) if len(m.group(1)) <= 60 else m.group(1)[:57] + "..."
        if _CONSTANT_EXPRESSION.match(m.group(1)):
            return (f"'{text}' is a constant expression: ptxas evaluates it, ptxforge reads literal operands only; "
                    "write its value")
        return (f"cannot read the operand '{text}': not a register, a literal (decimal, 0x hex, 0b binary, 0 "
                "octal, 0f/0d hex float, decimal float), an address, a { } list, a label or a declared name")
    for op in ops:
        shown = repr(op)
        if shown not in reason:
            continue
        reason = reason.replace(shown, f"'{op}'")
        if isinstance(op, Label):
            reason += f" ('{op}' is no declared register or variable, so it reads as a label)"
    return reason


def _raw_or(scope, text, line):
    """The operand, or its spelling kept verbatim when it names nothing declared."""
    from ..isa.opaque import RawOperand
    try:
        return scope.operand(text, line)
    except ValidationError:
        return RawOperand(text)
