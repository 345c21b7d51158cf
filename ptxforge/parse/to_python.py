"""`to_python`: a Python script that rebuilds a parsed module with `KernelBuilder` calls.

One call per instruction: `k.emit(<ISA constructor>(...), pred=...)`, the same constructor call
the parser made for that line, with the registers kept under their PTX names (`%r7` is the
Python variable `r7`).  Running the script prints the module's PTX (the parsed module's own
rendering).  Device functions become `FunctionBuilder`s (parameters, `result()` return values),
call scopes `with k.call_scope():` blocks with `k.call_param()` declarations (a scope's own register: `k.scope_reg()`
and a `Reg` of the kernel that only the scope declares), `.local` arrays
`k.local_array()`, `.pragma` lines `k.pragma()`, and module-scope variables, prototypes and
directives the `declarations=` of the Module (`pf.variable()`, `Prototype`, `pf.pragma()`).
A scoped `.reg` list or range reads as one declaration a register, so each is a `k.scope_reg()`.
`.weak` device functions become `FunctionBuilder(..., weak=True)`, and the `.b8` arrays of structures passed or
returned by value `k.result(..., nbytes=, align=)`, `k.call_param(..., nbytes=, align=)` and `Param` entries of
`k.call_prototype()`.
What has no builder call (`.loc` lines other than the two forms `debug_loc` writes, `.extern` or `.common` function
definitions, `.reg` parameters, `.alias`, multi-dimensional, initialized or vector `.local` variables) is refused
with the reason, at the PTX line it is about.
"""

from __future__ import annotations

import inspect
import keyword
import math
import re
import struct

from ..declarations import (BodyDirective, BranchTargetsDecl, CallPrototypeDecl, LocalDecl, ParamDecl, Prototype,
                            RawDirective, RegParam, ScopeClose, ScopeOpen, Variable)
from ..kernel import Comment, Kernel, LabelDef, Param
from ..errors import ValidationError
from ..isa.calls import ArgList, BranchTargets, CallParam, CallPrototype, FuncRef
from ..isa.instruction import Instruction
from ..isa.opaque import OPAQUE, PlainLabel, RawOperand
from ..isa.operands import (Addr, Discard, Imm, Label, NegPred, PairDst, Reg, SpecialReg, Symbol, TensorAddr,
                            Vec)
from ..isa.types import ScalarType
from .decode import Call, decode_call

_PTXFORGE_INTERNAL = True

_RESERVED = {"k", "T", "pf", "build", "kernels", "Imm", "Addr", "Vec", "Label", "special", "main", "declarations",
             "CallParam", "FuncRef", "ArgList", "Param", "ParamDecl", "Prototype", "RawDirective", "Variable",
             "FunctionBuilder", "KernelBuilder"}


def _ident(name: str, prefix: str = "") -> str:
    s = prefix + re.sub(r"\W", "_", name.replace("$", "S"))
    if s[0].isdigit() or keyword.iskeyword(s) or s in _RESERVED:
        s = s + "_"
    return s


class _Writer:
    def __init__(self, k: Kernel, module_syms: dict | None = None):
        self.k = k
        self.regs: dict = {}
        self.syms: dict = dict(module_syms or {})
        self.indent = "    "
        self.labels: dict = {}
        self.imports: set = set()
        self.lines: list = []

    def expr(self, x) -> str:
        if isinstance(x, Call):
            fn = x.fn
            self.imports.add((fn.__module__, fn.__name__))
            return f"{fn.__name__}({', '.join(self._arguments(fn, x.args, x.kwargs))})"
        if isinstance(x, Reg):
            return self.regs[x.name]
        if isinstance(x, SpecialReg):
            return f'special("{x.name}")'
        if isinstance(x, Imm):
            value = self.number(x.value)
            return f"Imm({value})" if x.type is None else f"Imm({value}, T.{x.type.name})"
        if isinstance(x, Addr):
            base = repr(x.base) if isinstance(x.base, int) else self.expr(x.base)
            return f"Addr({base}, {x.offset})" if x.offset else f"Addr({base})"
        if isinstance(x, Vec):
            return "Vec((" + ", ".join(self.expr(r) for r in x.regs) + ("," if len(x.regs) == 1 else "") + "))"
        if isinstance(x, CallParam):
            if x.name in self.syms:
                return self.syms[x.name]
            return f'CallParam("{x.name}", "param", T.{x.type.name}, {x.nbytes!r}, {x.align})'
        if isinstance(x, (BranchTargets, CallPrototype)):
            return self.syms[x.name]
        if isinstance(x, FuncRef):
            return f'FuncRef("{x.name}")'
        if isinstance(x, ArgList):
            return f"ArgList({self.expr(tuple(x.items))})"
        if isinstance(x, Symbol):
            if x.name not in self.syms:
                raise ValidationError(f"to-python: variable {x.name} (.{x.space}) has no builder call yet")
            return self.syms[x.name]
        if isinstance(x, PlainLabel):
            return f'PlainLabel("{x.name}", k.id)'
        if isinstance(x, Label):
            return self.labels[x.name]
        if isinstance(x, NegPred):
            return f"NegPred({self.expr(x.reg)})"
        if isinstance(x, PairDst):
            return f"PairDst({self.expr(x.reg)}, {self.expr(x.pred)})"
        if isinstance(x, Discard):
            return "DISCARD"
        if isinstance(x, TensorAddr):
            return f"TensorAddr({self.expr(x.tmap)}, ({', '.join(self.expr(c) for c in x.coords)},))"
        if isinstance(x, RawOperand):
            return f"RawOperand({x.text!r})"
        if isinstance(x, ScalarType):
            return f"T.{x.name}"
        if isinstance(x, (list, tuple)):
            return "(" + ", ".join(self.expr(v) for v in x) + ("," if len(x) == 1 else "") + ")"
        if isinstance(x, float):
            return self.number(x)
        if x is None or isinstance(x, (bool, int, str)):
            return repr(x)
        raise ValidationError(f"to-python: cannot write {x!r} as Python")

    def _arguments(self, fn, args, kwargs) -> list:
        """Required arguments by position; the rest by name, and only where they differ from the default."""
        params = list(inspect.signature(fn).parameters.values())
        out = []
        named = dict(kwargs)
        for p, a in zip(params, args):
            if p.default is inspect.Parameter.empty:
                out.append(self.expr(a))
            else:
                named[p.name] = a
        for p in params:
            if p.name in named:
                v = named[p.name]
                if p.default is not inspect.Parameter.empty and type(v) is type(p.default) and v == p.default:
                    continue
                out.append(f"{p.name}={self.expr(v)}")
        return out

    def kernel(self) -> None:
        """The builder calls of one kernel or device function: its builder, declarations, labels and body.  A
        refusal names the PTX line it is about (the function's header, or the body line being written)."""
        self.at = self.k.loc
        try:
            self._builder()
            self._declarations()
            self._registers()
            self._labels()
            self._body()
        except ValidationError as e:
            if self.at is None:  # (a kernel built in Python: the error names the caller's line)
                raise
            raise ValidationError(e.message, self.at) from None
        self.lines.append("    kernels.append(k.finish())")
        self.lines.append("")

    def _builder(self) -> None:
        """The KernelBuilder or FunctionBuilder line, with its directives and notes (refusing what the builder
        does not write)."""
        k = self.k
        kind = getattr(k, "kind", "entry")
        linkage = getattr(k, "linkage", ".visible")
        if (kind == "entry" and linkage != ".visible") or (kind == "func" and linkage not in ("", ".visible", ".weak")):
            raise ValidationError(f"to-python: {k.name} is {linkage or 'file-local'} .{kind}; the builder writes "
                                  ".visible kernels and file-local, .visible or .weak device functions")
        out = self.lines
        kw = []
        extra = []
        for key, val in k.directives:
            if key in ("maxntid", "reqntid", "minnctapersm", "maxnreg", "reqnctapercluster", "maxclusterrank"):
                kw.append(f"{key}={val!r}")
            elif key == "explicitcluster":
                kw.append("explicitcluster=True")
            else:
                extra.append((key, val))
        if kind == "func":
            noreturn = ("noreturn", None) in extra
            extra = [x for x in extra if x != ("noreturn", None)]
            if kw or extra:
                raise ValidationError(f"to-python: device function {k.name} has performance directives, which "
                                      "FunctionBuilder does not take")
            out.append(f"    # device function {k.name}")
            out.append(f'    k = FunctionBuilder("{k.name}", "{k.target.name}"'
                       + (", visible=True" if linkage == ".visible" else ", weak=True" if linkage == ".weak" else "")
                       + (", noreturn=True" if noreturn else "") + ")")
        else:
            out.append(f"    # kernel {k.name}")
            out.append(f'    k = KernelBuilder("{k.name}", "{k.target.name}"' + "".join(", " + x for x in kw) + ")")
        for key, val in extra:
            out.append(f"    k.directives.append(({key!r}, {val!r}))")
        for key, val in k.notes:
            out.append(f"    k.note({key!r}, {val!r})")

    def _declarations(self) -> None:
        """Parameters, return values, local arrays and shared memory, each named in `syms`."""
        k, out = self.k, self.lines
        _refuse_reg_params(k.name, tuple(k.params) + tuple(getattr(k, "returns", ())))
        for p in k.params:
            if p.render() != (f".param .align {p.align or 1} .b8 {p.name}[{p.nbytes}]" if p.nbytes is not None
                              else f".param .{p.type.name} {p.name}"):
                out.append(f"    # written by the builder without its attributes: {p.render()}")
            var = _ident(p.name, "p_")
            args = f'"{p.name}", T.{p.type.name}'
            if p.nbytes is not None:
                args += f", nbytes={p.nbytes}, align={p.align or 1}"
            out.append(f"    {var} = k.param({args})")
            self.syms[p.name] = f"{var}.symbol"
        for p in getattr(k, "returns", ()):
            if p.render() != _plain_param(p.name, p.type, p.nbytes, p.align):
                raise ValidationError(f"to-python: {k.name} returns {p.render()}, a typed array or a value with "
                                      "attributes: FunctionBuilder.result() declares .param .type name, or a byte "
                                      "array .param .align A .b8 name[N]")
            out.append(f'    k.result("{p.name}", T.{p.type.name}{_array_args(p.nbytes, p.align)})')
        for v in getattr(k, "variables", ()):
            if v.space != "local" or v.init is not None or v.linkage or v.extra or len(v.dims) > 1 \
                    or None in v.dims or v.vector != 1:
                raise ValidationError(f"to-python: {v.render()} in {k.name} has no builder call "
                                      "(local_array() declares a one-dimensional .local array of scalars)")
            var = _ident(v.name, "l_")
            count = v.dims[0] if v.dims else None
            out.append(f'    {var} = k.local_array("{v.name}", T.{v.type.name}, {count!r}'
                       + (f", align={v.align}" if v.align is not None else "") + ")")
            self.syms[v.name] = f"{var}.symbol"
        for s in k.shared:
            var = _ident(s.name, "s_")
            out.append(f'    {var} = k.shared("{s.name}", {s.nbytes}, align={s.align})')
            self.syms[s.name] = var
        for s in k.extern_shared:
            var = _ident(s.name, "s_")
            out.append(f'    {var} = k.dynamic_shared("{s.name}", align={s.align})')
            self.syms[s.name] = var

    def _labels(self) -> None:
        """A Label object for every label the body defines (placed later by `_body`)."""
        k, out = self.k, self.lines
        for item in k.body:
            if isinstance(item, LabelDef) and not isinstance(item.label, PlainLabel):
                if item.label.name not in self.labels:
                    self.labels[item.label.name] = _ident(item.label.name, "L_")
                    out.append(f'    {self.labels[item.label.name]} = Label("{item.label.name}", k.id)')

    def _body(self) -> None:
        """The body's instructions, labels, comments, call scopes and directives, in order."""
        k, out = self.k, self.lines
        scoped: list = []
        for item in k.body:
            ind = self.indent
            self.at = getattr(item, "loc", None) or self.at
            if isinstance(item, Instruction):
                out.append(ind + self.instruction(item))
            elif isinstance(item, LabelDef):
                out.append(f"{ind}k.place({self.expr(item.label)})")
            elif isinstance(item, Comment):
                if item.section:
                    out.append(f"{ind}with k.section({item.text!r}):")
                    out.append(f"{ind}    pass")
                else:
                    out.append(f"{ind}k.comment({item.text!r})")
            elif isinstance(item, ScopeOpen):
                out.append(f"{ind}with k.call_scope():")
                self.indent += "    "
                scoped.append([])
            elif isinstance(item, ScopeClose):
                if out[-1].endswith(":"):
                    out.append(f"{ind}pass")
                self.indent = self.indent[:-4]
                for name, prev in reversed(scoped.pop() if scoped else []):
                    if prev is None:
                        self.syms.pop(name, None)
                    else:
                        self.syms[name] = prev
            elif isinstance(item, LocalDecl) and isinstance(item.symbol, CallParam) and scoped and \
                    item.text == _plain_param(item.symbol.name, item.symbol.type, item.symbol.nbytes,
                                              item.symbol.align) + ";":
                sym = item.symbol
                var = _ident(sym.name, "c_")
                scoped[-1].append((sym.name, self.syms.get(sym.name)))
                out.append(f'{ind}{var} = k.call_param("{sym.name}", T.{sym.type.name}'
                           f'{_array_args(sym.nbytes, sym.align)})')
                self.syms[sym.name] = var
            elif isinstance(item, LocalDecl) and scoped and item.symbol is None and _SCOPED_REG.match(item.text):
                m = _SCOPED_REG.match(item.text)
                out.append(f'{ind}k.scope_reg(T.{m.group(1)}, "{m.group(2)}")')
                for r in item.registers:  # the scope's own register: reg() would declare it for the whole kernel
                    self.imports.add(("ptxforge.isa.operands", "Reg"))
                    out.append(f'{ind}{self._reg_var(r)} = Reg("{r.name}", T.{r.type.name}, k.id, k.name)')
            elif isinstance(item, CallPrototypeDecl) and scoped and all(
                    type(p) is Param and (p.nbytes is None or p.type.name == "b8")
                    for p in item.prototype.returns + item.prototype.params):
                pr = item.prototype
                var = _ident(pr.name, "proto_")
                scoped[-1].append((pr.name, self.syms.get(pr.name)))
                rets = "".join(_prototype_entry(p) + ", " for p in pr.returns)
                params = "".join(_prototype_entry(p) + ", " for p in pr.params)
                out.append(f'{ind}{var} = k.call_prototype("{pr.name}", ({rets}), ({params}))')
                self.syms[pr.name] = var
            elif isinstance(item, BranchTargetsDecl):
                bt = item.targets
                var = _ident(bt.name, "t_")
                out.append(f'{ind}{var} = k.branch_targets("{bt.name}", {self.expr(tuple(bt.labels))})')
                self.syms[bt.name] = var
            elif isinstance(item, BodyDirective) and _LOC.match(item.text):
                g = _LOC.match(item.text).groups()
                extra = (f", function_name={g[3]!r}, inlined_at=({g[4]}, {g[5]}, {g[6]})" if g[3] else "")
                out.append(f"{ind}k.debug_loc({g[0]}, {g[1]}, {g[2]}{extra})")
            elif isinstance(item, BodyDirective) and _PRAGMA.match(item.text):
                words = re.findall(r'"([^"]*)"', item.text)
                out.append(f"{ind}k.pragma({', '.join(repr(w) for w in words)})")
            else:
                raise ValidationError(f"to-python: {item.ptx_line()} has no builder call{_why_not(item, scoped)}")

    def _registers(self):
        for r in self.k.registers:
            self.lines.append(f'    {self._reg_var(r)} = k.reg(T.{r.type.name}, "{r.name}", exact=True)')

    def _reg_var(self, r: Reg) -> str:
        """The Python variable of register `r` (one per register name, distinct from the symbols' variables)."""
        var = self.regs.get(r.name)
        if var is None:
            taken = {v.split(".")[0] for v in self.syms.values()} | set(self.regs.values())
            var = _ident(r.name)
            while var in taken:
                var += "_"
            self.regs[r.name] = var
        return var

    def number(self, value) -> str:
        """Python source for an immediate's value: its repr, or for an infinity or a NaN (`0f7FC00001`), which
        repr writes as names no script defines, its exact bits (a NaN's payload included)."""
        if not isinstance(value, float) or math.isfinite(value):
            return repr(value)
        self.imports.add(("struct", "unpack"))
        return f"unpack('<d', bytes.fromhex({struct.pack('<d', value).hex()!r}))[0]"

    def instruction(self, ins: Instruction) -> str:
        if ins.opcode == OPAQUE:
            self.imports.add(("ptxforge.isa.opaque", "opaque"))
            call = (f"opaque({ins.mnemonic!r}, {self.expr(tuple(ins.operands))}, {ins.info.reason!r}, "
                    f"n_dst={ins.n_dst})")
        else:
            c = decode_call(ins.mnemonic, list(ins.operands))
            if c.run().render() != ins.with_guard(None).render():
                raise ValidationError(f"to-python: cannot restate '{ins.render()}'")
            call = self.expr(c)
        if ins.guard is not None:
            g = self.expr(ins.guard.reg)
            return f"k.emit({call}, pred={'~' if ins.guard.negate else ''}{g})"
        return f"k.emit({call})"


_SCOPED_REG = re.compile(r"\.reg \.(\w+) (%?[A-Za-z_$][\w$]*);\Z")
#: what KernelBuilder.debug_loc() writes: `.loc f l c` and `.loc f l c, function_name L, inlined_at f l c`
_LOC = re.compile(r"^\.loc (\d+) (\d+) (\d+)(?:, function_name ([$%A-Za-z_][\w$]*), inlined_at (\d+) (\d+) (\d+))?$")
_PRAGMA = re.compile(r'\.pragma\s+"[^"]+"(\s*,\s*"[^"]+")*;\Z')


def _plain_param(name, t, nbytes, align) -> str:
    """The declaration the builder writes for a `.param` (a scalar, or a `.b8` array of `nbytes` aligned to
    `align`), without the `;`."""
    return Param(name, t, nbytes=nbytes, align=align if nbytes is not None else None).render()


def _array_args(nbytes, align) -> str:
    """`, nbytes=N, align=A` for a `.b8` array `.param` (the keywords of result() and call_param()); "" else."""
    return "" if nbytes is None else f", nbytes={nbytes}, align={align or 1}"


def _prototype_entry(p) -> str:
    """A call_prototype() entry: `T.f32`, or `Param("_", T.b8, nbytes=16, align=8)` for an array."""
    if p.nbytes is None:
        return f"T.{p.type.name}"
    return f'Param("_", T.{p.type.name}{_array_args(p.nbytes, p.align)})'


def _why_not(item, scoped) -> str:
    """Why body item `item` has no builder call (`scoped`: inside a `{ }` scope): what the builder's calls
    declare instead."""
    if not scoped and isinstance(item, (LocalDecl, CallPrototypeDecl)):
        return " outside a { } call scope (k.call_scope() holds the builder's call declarations)"
    if isinstance(item, LocalDecl) and isinstance(item.symbol, CallParam):
        return (" (k.call_param() declares .param .type name and the byte array .param .align A .b8 name[N]; a "
                "typed array or a scalar with .align has none)")
    if isinstance(item, CallPrototypeDecl):
        return (" (k.call_prototype() declares .param return values and parameters: scalars and .b8 arrays)")
    if isinstance(item, BodyDirective):
        return " (k.debug_loc() writes .loc FILE LINE COLUMN, with function_name and inlined_at; k.pragma() .pragma)"
    return ""


def _refuse_reg_params(name: str, params) -> None:
    """ValidationError naming the first `.reg` parameter or return value of function `name`: the builder
    declares `.param` ones only."""
    for p in params:
        if isinstance(p, RegParam):
            raise ValidationError(f"to-python: {name} has the .reg parameter {p.render()}, which has no builder call "
                                  "(FunctionBuilder declares .param parameters and return values)")


def _param_expr(p) -> str:
    if isinstance(p, ParamDecl):
        return (f'ParamDecl("{p.name}", T.{p.type.name}, None, {p.space!r}, {p.nbytes!r}, {p.align!r}, '
                f'spelling={p.spelling!r})')
    pointee = f"T.{p.pointee.name}" if p.pointee is not None else "None"
    return f'Param("{p.name}", T.{p.type.name}, {pointee}, {p.space!r}, {p.nbytes!r}, {p.align!r})'


def _declarations(module, lines: list, syms: dict) -> None:
    """Lines that build the module's declarations into the list `declarations`."""
    lines.append("    declarations = []")
    for d in module.declarations:
        if isinstance(d, Variable):
            var = _ident(d.name, "v_")
            simple = (d.space in ("global", "const") and d.linkage in ("", ".visible") and not d.extra
                      and len(d.dims) <= 1 and None not in d.dims and d.vector == 1)
            if simple:
                args = [f'"{d.name}"', f"T.{d.type.name}", f'space="{d.space}"']
                if d.dims:
                    args.append(f"count={d.dims[0]}")
                if d.init is not None:
                    args.append(f"init={d.init!r}")
                if d.align is not None:
                    args.append(f"align={d.align}")
                if d.linkage == ".visible":
                    args.append("visible=True")
                lines.append(f"    {var} = pf.variable({', '.join(args)})")
            else:
                lines.append(f'    {var} = Variable("{d.name}", "{d.space}", T.{d.type.name}, {d.align!r}, {d.dims!r}, '
                             f"{d.init!r}, {d.linkage!r}, {d.extra!r}"
                             + (f", vector={d.vector}" if d.vector != 1 else "") + ")")
            lines.append(f"    declarations.append({var})")
            syms[d.name] = f"{var}.symbol"
        elif isinstance(d, Prototype):
            _refuse_reg_params(d.name, d.returns + d.params)
            rets = "(" + "".join(_param_expr(p) + ", " for p in d.returns) + ")"
            params = "(" + "".join(_param_expr(p) + ", " for p in d.params) + ")"
            lines.append(f'    declarations.append(Prototype("{d.name}", {rets}, {params}, {d.linkage!r}'
                         + (f", {d.directives!r}" if d.directives else "") + "))")
        elif isinstance(d, RawDirective) and _PRAGMA.match(d.text):
            words = re.findall(r'"([^"]*)"', d.text)
            lines.append(f"    declarations.append(pf.pragma({', '.join(repr(w) for w in words)}))")
        elif isinstance(d, RawDirective):
            lines.append(f"    declarations.append(RawDirective({d.text!r}))")
        else:
            raise ValidationError(f"to-python: the module declaration {d.render()} has no builder call",
                                  getattr(d, "loc", None))


def to_python(module, *, source: str | None = None) -> str:
    """A Python script that rebuilds `module` with one builder call per instruction: `KernelBuilder`
    for kernels, `FunctionBuilder` for device functions, `pf.variable()` / `Prototype` /
    `pf.pragma()` for the module's declarations."""
    body = []
    imports = set()
    syms: dict = {}
    _declarations(module, body, syms)
    for k in module.kernels:
        w = _Writer(k, syms)
        w.kernel()
        body += w.lines
        imports |= w.imports
    head = [
        '"""' + (f"{source}, " if source else "") + 'rebuilt with KernelBuilder calls (written by ptxforge to-python).',
        "",
        "Run it to print the module's PTX.",
        '"""',
        "",
        "import ptxforge as pf",
        "from ptxforge import FunctionBuilder, KernelBuilder",
        "from ptxforge.declarations import ParamDecl, Prototype, RawDirective, Variable",
        "from ptxforge.isa.calls import ArgList, CallParam, FuncRef",
        "from ptxforge.kernel import Param",
        "from ptxforge.isa import types as T",
        "from ptxforge.isa.opaque import PlainLabel, RawOperand",
        "from ptxforge.isa.operands import (DISCARD, Addr, Imm, Label, NegPred, PairDst, TensorAddr, Vec,",
        "                                   special)",
    ]
    by_module: dict = {}
    for mod, name in sorted(imports):
        by_module.setdefault(mod, []).append(name)
    for mod, names in sorted(by_module.items()):
        head.append(f"from {mod} import {', '.join(sorted(names))}")
    head += ["", "", "def build() -> pf.Module:", '    """The module, instruction by instruction."""',
             "    kernels = []"]
    tail = [f'    return pf.Module(kernels, version="{module.version}", declarations=declarations'
            + (f", target_options={tuple(module.target_options)!r}" if getattr(module, "target_options", ()) else "")
            + ")", "", "",
            'if __name__ == "__main__":', '    print(build().ptx, end="")', ""]
    return "\n".join(head + body + tail)
