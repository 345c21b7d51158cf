"""`to_python`: a Python script that rebuilds a parsed module with `KernelBuilder` calls.

One call per instruction: `k.emit(<ISA constructor>(...), pred=...)`, the same constructor call
the parser made for that line, with the registers kept under their PTX names (`%r7` is the
Python variable `r7`).  Running the script prints the module's PTX (the parsed module's own
rendering).  Kernels only: device functions, call scopes and module-scope variables have no
builder calls yet, so a module with them is refused with the reason.
"""

from __future__ import annotations

import inspect
import keyword
import re

from ..kernel import Comment, Kernel, LabelDef
from ..errors import ValidationError
from ..isa.calls import ArgList, CallParam, FuncRef
from ..isa.instruction import Instruction
from ..isa.opaque import OPAQUE, PlainLabel, RawOperand
from ..isa.operands import (Addr, Discard, Imm, Label, NegPred, PairDst, Reg, SpecialReg, Symbol, TensorAddr,
                            Vec)
from ..isa.types import ScalarType
from .decode import Call, decode_call

_PTXFORGE_INTERNAL = True

_RESERVED = {"k", "T", "pf", "build", "kernels", "Imm", "Addr", "Vec", "Label", "special", "main"}


def _ident(name: str, prefix: str = "") -> str:
    s = prefix + re.sub(r"\W", "_", name.replace("$", "S"))
    if s[0].isdigit() or keyword.iskeyword(s) or s in _RESERVED:
        s = s + "_"
    return s


class _Writer:
    def __init__(self, k: Kernel):
        self.k = k
        self.regs: dict = {}
        self.syms: dict = {}
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
            return f"Imm({x.value!r})" if x.type is None else f"Imm({x.value!r}, T.{x.type.name})"
        if isinstance(x, Addr):
            base = repr(x.base) if isinstance(x.base, int) else self.expr(x.base)
            return f"Addr({base}, {x.offset})" if x.offset else f"Addr({base})"
        if isinstance(x, Vec):
            return "Vec((" + ", ".join(self.expr(r) for r in x.regs) + ("," if len(x.regs) == 1 else "") + "))"
        if isinstance(x, (CallParam, FuncRef, ArgList)):
            raise ValidationError("to-python: calls to device functions have no builder calls yet")
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
        if x is None or isinstance(x, (bool, int, float, str)):
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
        k = self.k
        if getattr(k, "kind", "entry") != "entry" or getattr(k, "variables", ()) or getattr(k, "returns", ()):
            raise ValidationError(f"to-python: {k.name} is a device function or has .local variables; "
                                  "the builder writes kernels only")
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
        out.append(f"    # kernel {k.name}")
        out.append(f'    k = KernelBuilder("{k.name}", "{k.target.name}"' + "".join(", " + x for x in kw) + ")")
        for key, val in extra:
            out.append(f"    k.directives.append(({key!r}, {val!r}))")
        for key, val in k.notes:
            out.append(f"    k.note({key!r}, {val!r})")
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
        for s in k.shared:
            var = _ident(s.name, "s_")
            out.append(f'    {var} = k.shared("{s.name}", {s.nbytes}, align={s.align})')
            self.syms[s.name] = var
        for s in k.extern_shared:
            var = _ident(s.name, "s_")
            out.append(f'    {var} = k.dynamic_shared("{s.name}", align={s.align})')
            self.syms[s.name] = var
        self._registers()
        for item in k.body:
            if isinstance(item, LabelDef) and not isinstance(item.label, PlainLabel):
                if item.label.name not in self.labels:
                    self.labels[item.label.name] = _ident(item.label.name, "L_")
                    out.append(f'    {self.labels[item.label.name]} = Label("{item.label.name}", k.id)')
        for item in k.body:
            if isinstance(item, Instruction):
                out.append("    " + self.instruction(item))
            elif isinstance(item, LabelDef):
                out.append(f"    k.place({self.expr(item.label)})")
            elif isinstance(item, Comment):
                if item.section:
                    out.append(f"    with k.section({item.text!r}):")
                    out.append("        pass")
                else:
                    out.append(f"    k.comment({item.text!r})")
            else:
                raise ValidationError(f"to-python: {type(item).__name__} ({item.ptx_line()}) has no builder call yet")
        out.append("    kernels.append(k.finish())")
        out.append("")

    def _registers(self):
        taken = {v.split(".")[0] for v in self.syms.values()}
        for r in self.k.registers:
            var = _ident(r.name)
            while var in taken:
                var += "_"
            taken.add(var)
            self.lines.append(f'    {var} = k.reg(T.{r.type.name}, "{r.name}", exact=True)')
            self.regs[r.name] = var

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


def to_python(module, *, source: str | None = None) -> str:
    """A Python script that rebuilds `module` with one `KernelBuilder` call per instruction."""
    if getattr(module, "declarations", ()):
        raise ValidationError("to-python: module-scope variables and prototypes have no builder calls yet")
    body = []
    imports = set()
    for k in module.kernels:
        w = _Writer(k)
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
        "from ptxforge import KernelBuilder",
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
    tail = [f'    return pf.Module(kernels, version="{module.version}")', "", "",
            'if __name__ == "__main__":', '    print(build().ptx, end="")', ""]
    return "\n".join(head + body + tail)
