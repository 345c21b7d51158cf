"""Module: kernels plus a target -> PTX text, a line map back to Python, and listings.

`str(module)` is exact and deterministic: the same kernels give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._version import __version__
from .errors import TargetError, ValidationError
from .isa.instruction import Instruction
from .isa.opaque import OPAQUE
from .isa.targets import PtxVersion, Target, least_version
from .isa.types import decl_type
from .kernel import Comment, Kernel, LabelDef

_PTXFORGE_INTERNAL = True

_INDENT = "    "


@dataclass(frozen=True)
class Rendered:
    """The PTX text of a module at one ``.version``, with the line map from PTX lines back to instructions.

    Attributes:
        text: the PTX source.
        version: the ``.version`` it was rendered at.
        line_map: 1-based PTX line -> (Instruction, kernel name).
        decl_map: 1-based PTX line -> (SourceLoc, kernel name) for the lines that declare something: a
            kernel's header and directives (the line that made the builder), its parameters, shared
            and local arrays (the line that declared each).
    """
    text: str
    version: PtxVersion
    line_map: dict  # 1-based PTX line -> (Instruction, kernel name)
    decl_map: dict = field(default_factory=dict)  # 1-based PTX line -> (SourceLoc, kernel name)

    def loc_at(self, line: int):
        """The Python line that emitted or declared what PTX line `line` (1-based) holds, or None."""
        hit = self.line_map.get(line)
        if hit is not None:
            return hit[0].loc
        hit = self.decl_map.get(line)
        return hit[0] if hit else None

    def instruction_at(self, line: int):
        """The `Instruction` rendered on PTX line `line` (1-based), or None for a directive, label or blank line.
        """
        hit = self.line_map.get(line)
        return hit[0] if hit else None


class Module:
    """One PTX module: one or more kernels for one target.

    `kernels` holds finished `Kernel` values or anything with a `finish()` method that returns one
    (a `KernelBuilder`).  `target` (a `Target` or a name such as "sm_90a"; default: the kernels' own, which
    must be one) is checked against each kernel's; `version` (a `PtxVersion` or "8.0") fixes the
    ``.version`` line, refused with what needs more when an instruction or the target is newer (default:
    the least that covers the module).  Load it on a GPU with `ptxforge.load(module)`.
    """

    def __init__(self, kernels, *, target=None, version=None, declarations=(), target_options=()):
        """`declarations`: module-scope parts rendered after the header, in order (variables,
        prototypes, verbatim directives: see ptxforge.declarations); `target_options`: words after
        the target on the .target line (`debug` for modules with DWARF sections)."""
        ks, declarations = _with_callees_and_variables(kernels, tuple(declarations))
        if not ks:
            raise ValidationError("a module needs at least one kernel")
        targets = {k.target for k in ks}
        if target is not None:
            target = Target.parse(target)
            bad = [k.name for k in ks if k.target != target]
            if bad:
                raise TargetError(f"kernels {bad} were built for another target than {target}")
        elif len(targets) > 1:
            raise TargetError("all kernels of a module must share one target; got "
                              + ", ".join(sorted(t.name for t in targets)))
        else:
            target = ks[0].target
        names = [k.name for k in ks]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValidationError(f"kernel and function names must be unique within a module: {sorted(dup)}")
        self.kernels = tuple(ks)
        self.declarations = tuple(declarations)
        self.target_options = tuple(target_options)
        self.target = target
        _check_calls(self.kernels, self.declarations)
        _check_names(self.kernels, self.declarations)
        self._version = PtxVersion.parse(version) if version is not None else None
        if self._version is not None:
            self.check_version(self._version)
        self._cache: dict = {}

    # ---------------------------------------------------------------- versions
    def requirements(self):
        """Yield the `Requirement` of every instruction and directive of every kernel (what decides the least
        ``.version``).
        """
        for k in self.kernels:
            yield from k.requirements()

    def check_version(self, version) -> None:
        """Raise a TargetError unless the module can be written at `.version` `version`: the target and every
        instruction and directive must exist in that PTX ISA.  The error names each that needs more (the
        target, or the instruction and the Python line that emitted it)."""
        v = PtxVersion.parse(version)
        target = self.target
        short = {}  # what -> (the version it needs, the line naming it)
        for k in self.kernels:
            for req, what, loc in k.located_requirements():
                need = req.ptx_on(target)
                if need > v and what not in short:
                    at = f", emitted at {loc}" + (f": {loc.code}" if loc.code else "") if loc is not None else ""
                    short[what] = (need, f"{what} needs PTX ISA {need}{at}")
        lines = [line for _, line in sorted(short.values(), key=lambda x: x[0], reverse=True)]
        if target.min_ptx > v:
            lines.insert(0, f".target {target.name} needs PTX ISA {target.min_ptx}")
        if not lines:
            return
        need = least_version(target, self.requirements())
        shown = lines[:4] + ([f"and {len(lines) - 4} more"] if len(lines) > 4 else [])
        raise TargetError(f"requested .version {v}, but the module needs at least {need}:\n    "
                          + "\n    ".join(shown))

    def least_version(self, cap: PtxVersion | None = None) -> PtxVersion:
        """The least PTX ISA covering the target and all instructions (error if above `cap`)."""
        return least_version(self.target, self.requirements(), cap)

    def version_for(self, cap: PtxVersion | None = None) -> PtxVersion:
        """The ``.version`` the module renders at: the one asked for at construction, else the least one covering
        every instruction; `cap` is the newest the consumer accepts (TargetError above it).
        """
        if self._version is not None:
            if cap is not None and self._version > cap:
                raise TargetError(f".version {self._version} was requested, but the toolchain accepts at most {cap}")
            return self._version
        return self.least_version(cap)

    @property
    def version(self) -> PtxVersion:
        """The ``.version`` the module renders at when nothing caps it (see `version_for`)."""
        return self.version_for()

    # ---------------------------------------------------------------- rendering
    def render(self, version: PtxVersion | str | None = None, cap: PtxVersion | None = None) -> Rendered:
        """The module as PTX text at `version` (default: `version_for(cap)`), with its line map; cached per
        version.

        Args:
            version: the ``.version`` to write, or None for the least one that covers the module; one below
                that is a TargetError naming what needs more (`check_version`).
            cap: the newest ``.version`` the consumer (a driver, an assembler) accepts.
        """
        v = PtxVersion.parse(version) if version is not None else self.version_for(cap)
        key = str(v)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if version is not None:  # a version asked for here, not one the module chose
            self.check_version(v)
        lines = [
            "//",
            f"// Generated by ptxforge {__version__}",
            "//",
            f".version {v}",
            f".target {', '.join((self.target.name,) + self.target_options)}",
            ".address_size 64",
        ]
        line_map: dict = {}
        decl_map: dict = {}
        externs = {}
        extern_locs = {}
        for k in self.kernels:
            for s in k.extern_shared:
                prev = externs.get(s.name)
                externs[s.name] = max(prev, s.align) if prev else s.align
                if extern_locs.get(s.name) is None:
                    extern_locs[s.name] = (_decl_loc(k, s.name), k.name)
        if externs:
            lines.append("")
            lines.append("// dynamic shared memory: every .extern .shared array aliases the same base")
            for name, align in externs.items():
                lines.append(f".extern .shared .align {align} .b8 {name}[];")
                if extern_locs[name][0] is not None:
                    decl_map[len(lines)] = extern_locs[name]
        if self.declarations:
            lines.append("")
            for d in self.declarations:  # one entry per rendered line: a .section block spans many
                lines.extend(d.render().split("\n"))
        for k in self.kernels:
            lines.append("")
            _render_kernel(k, lines, line_map, decl_map)
        text = "\n".join(lines) + "\n"
        r = Rendered(text, v, line_map, decl_map)
        self._cache[key] = r
        return r

    @property
    def ptx(self) -> str:
        """The PTX text at the module's `version` (the same as ``str(module)``), deterministic for the same
        kernels.
        """
        return self.render().text

    def __str__(self) -> str:
        return self.ptx

    def kernel(self, name: str | None = None) -> Kernel:
        """The kernel called `name`, or the only kernel when `name` is None; a ValidationError lists the kernels
        otherwise.
        """
        if name is None:
            entries = self.entries
            if len(entries) != 1:
                raise ValidationError(f"module has {len(entries)} kernels; name one. {self._names()}" if entries
                                      else f"module has no kernel (.entry). {self._names()}")
            return entries[0]
        for k in self.kernels:
            if k.name == name:
                return k
        raise ValidationError(f"no kernel '{name}' in module. {self._names()}")

    def _names(self) -> str:
        """What a lookup by name can find, for a message: the kernels, and the device functions apart."""
        funcs = ", ".join(f.name for f in self.functions)
        return (f"Kernels (.entry): {', '.join(k.name for k in self.entries) or 'none'}"
                + (f"; device functions (.func): {funcs}" if funcs else ""))

    @property
    def entries(self) -> tuple:
        """The kernels (`.entry`) of the module, without its device functions (`.func`)."""
        return tuple(k for k in self.kernels if getattr(k, "kind", "entry") == "entry")

    @property
    def functions(self) -> tuple:
        """The device functions (`.func`) the module defines, in the order they render."""
        return tuple(k for k in self.kernels if getattr(k, "kind", "entry") == "func")

    def instruction_count(self) -> int:
        """The number of instructions of all kernels (labels and comments not counted)."""
        return sum(len(k.instructions) for k in self.kernels)

    # ---------------------------------------------------------------- listing
    def listing(self, *, sources: bool = True, numbers: bool = True, version=None) -> str:
        """PTX for people: line numbers and, for each instruction, the Python file:line that emitted it."""
        r = self.render(version)
        text_lines = ptx_lines(r.text)
        width = max((len(s) for s in text_lines), default=0)
        width = min(width, 88)
        out = []
        nw = len(str(len(text_lines)))
        for i, line in enumerate(text_lines, 1):
            hit = r.line_map.get(i) if sources else None
            if hit is not None and hit[0].loc is not None:
                line = f"{line:<{width}}  // {hit[0].loc}"
            if hit is not None and hit[0].opcode == OPAQUE:
                line += f"  [opaque: {hit[0].info.reason}]"
            out.append(f"{i:>{nw}} | {line}" if numbers else line)
        return "\n".join(out) + "\n"

    def describe_line(self, line: int, version=None) -> str:
        """'PTX line N: <text>  (emitted at file.py:L: code)' for error messages: the Python line that emitted the
        instruction, or that declared the kernel, parameter or array the line declares."""
        r = self.render(version)
        text_lines = ptx_lines(r.text)
        text = text_lines[line - 1].strip() if 0 < line <= len(text_lines) else "?"
        loc = r.loc_at(line)
        where = ""
        if loc is not None:
            code = loc.code
            where = f"\n    emitted at {loc}" + (f": {code}" if code else "")
        return f"PTX line {line}: {text}{where}"


def ptx_lines(text: str) -> list:
    """The lines of PTX text as ptxas numbers them: split at newlines only (Python's `splitlines` also splits at
    form feeds, vertical tabs and other separators, which ptxas reads as spaces, and would shift the numbers)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _decl_loc(k: Kernel, name: str):
    """The Python line that declared `name` in `k`, if the kernel records one (a parsed kernel does not)."""
    find = getattr(k, "decl_loc", None)
    return find(name) if find is not None else None


def _render_kernel(k: Kernel, lines: list, line_map: dict, decl_map: dict) -> None:
    name = k.name

    def declared(loc):  # the line just appended declares something made at `loc`
        if loc is not None:
            decl_map[len(lines)] = (loc, name)

    for key, value in k.notes:
        lines.append(f"// {k.name}: {key} = {value}")
    header = getattr(k, "header", None) or f".visible .entry {k.name}"
    if k.params:
        lines.append(f"{header}(")
        declared(k.loc)
        for i, p in enumerate(k.params):
            lines.append(f"{_INDENT}{p.render()}{',' if i + 1 < len(k.params) else ''}")
            declared(_decl_loc(k, p.name))
        lines.append(")")
    else:
        lines.append(f"{header}()")
        declared(k.loc)
    for key, val in k.directives:  # given to the builder's constructor (FunctionBuilder's .noreturn too)
        if val is None:  # a flag directive (.explicitcluster)
            lines.append(f".{key}")
        elif isinstance(val, tuple):
            lines.append(f".{key} {', '.join(str(x) for x in val)}")
        else:
            lines.append(f".{key} {val}" if val != "" else f".{key}")
        declared(k.loc)
    lines.append("{")
    groups: dict = {}
    for r in k.registers:
        groups.setdefault(decl_type(r.type).name, []).append("%" + r.name)
    for tname, names in groups.items():
        for i in range(0, len(names), 12):
            lines.append(f"{_INDENT}.reg .{tname} {', '.join(names[i:i + 12])};")
    for s in k.shared:
        lines.append(f"{_INDENT}.shared .align {s.align} .b8 {s.name}[{s.nbytes}];")
        declared(_decl_loc(k, s.name))
    for v in getattr(k, "variables", ()):
        lines.append(_INDENT + v.render())
        declared(_decl_loc(k, v.name))
    lines.append("")
    for item in k.body:
        if type(item) is Instruction or isinstance(item, Instruction):
            lines.append(_INDENT + item.render())
            line_map[len(lines)] = (item, name)
        elif isinstance(item, LabelDef):
            lines.append(f"{item.label}:")
        elif isinstance(item, Comment):
            lines.append(f"{_INDENT}// ---- {item.text}" if item.section else f"{_INDENT}// {item.text}")
        else:  # call scopes, scoped declarations, .loc/.pragma lines (ptxforge.declarations)
            lines.append(_INDENT + item.ptx_line())
    lines.append("}")


def _with_callees_and_variables(kernels, declarations):
    """The module's functions in render order and its declarations: every device function a
    builder's `call()` named is included (once, before its first caller), and every module-scope
    variable and prototype the kernels use is declared after the given declarations."""
    order: list = []
    seen: dict = {}  # id of a builder or a finished kernel -> the finished kernel
    extra: list = []

    def finished(k):
        hit = seen.get(id(k))
        if hit is None:
            hit = k.finish() if hasattr(k, "finish") else k
            seen[id(k)] = hit
            seen[id(hit)] = hit
        return hit

    visiting: set = set()

    def visit(k):
        if getattr(k, "render", None) is not None and not hasattr(k, "body"):  # a Prototype
            if k not in declarations and k not in extra:
                extra.append(k)
            return
        fk = finished(k)
        if any(x is fk for x in order) or id(fk) in visiting:
            return
        visiting.add(id(fk))
        for c in getattr(fk, "callees", ()):
            visit(c)
        visiting.discard(id(fk))
        order.append(fk)

    for k in kernels:
        visit(k)
    del visit  # empties the cell through which it recurses: no cycle keeps the kernels alive after this call
    named = {getattr(d, "name", None): d for d in declarations}
    for k in order:
        for var in getattr(k, "module_variables", ()):
            prev = named.get(var.name)
            if prev is None:
                named[var.name] = var
                extra.append(var)
            elif prev != var:
                raise ValidationError(f"two different module-scope declarations are called {var.name}: "
                                      f"{prev.render()} and {var.render()}")
    return order, declarations + tuple(extra)


def _check_names(kernels, declarations) -> None:
    """Module-scope names are one each (a kernel or function, a module variable, a dynamic shared array: ptxas
    crashed on a dynamic shared array named like its kernel), and no kernel names a parameter or shared array
    like a module variable it uses (ptxas: 'State space mismatch')."""
    scope = {}  # name -> what holds it

    def claim(name, what, same=None):
        prev = scope.get(name)
        if prev is None:
            scope[name] = (what, same)
        elif same is None or prev[1] != same:
            raise ValidationError(f"{what} and {prev[0]} share the name {name!r}: module-scope names must differ")
    for k in kernels:
        claim(k.name, f"{'function' if getattr(k, 'kind', 'entry') == 'func' else 'kernel'} {k.name!r}")
    for d in declarations:
        if type(d).__name__ != "Prototype" and getattr(d, "name", None):
            claim(d.name, f"module variable {d.name!r}", same=d)
    for k in kernels:
        for sym in getattr(k, "extern_shared", ()):  # (every kernel that uses it declares the same array)
            claim(sym.name, f"the dynamic shared array {sym.name!r} of {k.name!r}", same=("extern", sym.name))
        used = {v.name for v in getattr(k, "module_variables", ())}
        for sym in tuple(getattr(k, "params", ())) + tuple(getattr(k, "shared", ())):
            if sym.name in used:
                raise ValidationError(f"{k.name!r} declares {sym.name!r} and also uses the module variable "
                                      f"{sym.name!r}: the kernel's name hides the module's; rename one")


def _check_calls(kernels, declarations) -> None:
    """Every direct `call` names a device function the module defines or declares."""
    known = {k.name for k in kernels if getattr(k, "kind", "entry") == "func"}
    known |= {d.name for d in declarations if type(d).__name__ == "Prototype"}
    for k in kernels:
        for ins in k.body:
            if isinstance(ins, Instruction) and ins.opcode == "call":
                func = getattr(ins.info, "func", None)
                if isinstance(func, str) and func not in known:
                    raise ValidationError(
                        f"'{k.name}' calls {func}, which the module neither defines (.func) nor declares "
                        "(a Prototype in declarations=)", ins.loc)
