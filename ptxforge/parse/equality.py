"""Structural equality of modules: what a module *is*, independent of how it was made.

A parsed module and the builder's module differ in allocation ids (each builder numbers its
registers' owner) and in how a literal was handed over (`Imm(4, u32)` from the builder, `Imm(4)`
from text).  `structure(module)` is a value that leaves those out and keeps everything that
renders: kernels, parameters, directives, registers (name and declared type), shared
variables (dynamic ones once per module, as rendered), and each instruction's opcode, mnemonic,
operands (by kind and spelling), destination count, guard, requirement, modifiers, type and
semantic record (`info`, its operands compared the same way).
"""

from __future__ import annotations

import dataclasses

from ..isa.types import decl_type
from ..kernel import Comment, LabelDef
from ..isa.instruction import Instruction
from ..isa.operands import Imm, Label, Reg, Symbol, Vec

_PTXFORGE_INTERNAL = True


def _operand(op):
    if isinstance(op, Reg):
        return ("reg", op.name, decl_type(op.type).name)
    if isinstance(op, Imm):
        return ("imm", str(op))
    if isinstance(op, Vec):
        return ("vec",) + tuple(_operand(r) for r in op.regs)
    return (type(op).__name__, str(op))


def _canon(x):
    """A value of an instruction's `info` with operands by kind and spelling (allocation ids left out)."""
    if isinstance(x, (Reg, Imm, Vec)):
        return _operand(x)
    if isinstance(x, Label):
        return ("label", str(x))
    if isinstance(x, Symbol):
        return ("symbol", x.name, x.space)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__,) + tuple(_canon(getattr(x, f.name)) for f in dataclasses.fields(x))
    if isinstance(x, (tuple, list)):
        return tuple(_canon(v) for v in x)
    return x


def _item(item):
    if isinstance(item, Instruction):
        return ("ins", item.opcode, item.mnemonic, tuple(_operand(o) for o in item.operands), item.n_dst,
                str(item.guard) if item.guard is not None else None, item.req, item.mods,
                item.type.name if item.type is not None else None, _canon(item.info))
    if isinstance(item, LabelDef):
        return ("label", str(item.label))
    if isinstance(item, Comment):
        return ("comment", item.text, item.section)
    return (type(item).__name__, item.ptx_line())


def kernel_structure(k) -> tuple:
    """The structural value of one kernel (see the module docstring)."""
    groups: dict = {}
    for r in k.registers:
        groups.setdefault(decl_type(r.type).name, []).append(r.name)
    return (
        k.name, k.target.name, getattr(k, "header", f".visible .entry {k.name}"),
        tuple(p.render() for p in k.params), tuple(k.directives),
        tuple((t, tuple(names)) for t, names in groups.items()),
        tuple((s.name, s.nbytes, s.align) for s in k.shared),
        tuple(v.render() for v in getattr(k, "variables", ())),
        tuple(_item(x) for x in k.body),
        tuple(k.notes),
    )


def structure(module) -> tuple:
    """The structural value of a module: equal for modules that are the same PTX program."""
    externs: dict = {}  # rendered once per module (all .extern .shared arrays alias one base)
    for k in module.kernels:
        for s in k.extern_shared:
            externs[s.name] = max(externs.get(s.name, 1), s.align)
    return (module.target.name, tuple(getattr(module, "target_options", ())), str(module.version),
            tuple(d.render() for d in getattr(module, "declarations", ())) + tuple(externs.items()),
            tuple(kernel_structure(k) for k in module.kernels))


def same_module(a, b) -> bool:
    """Whether two modules are structurally equal (`structure(a) == structure(b)`)."""
    return structure(a) == structure(b)


def first_difference(a, b) -> str | None:
    """A readable description of where two modules differ first, or None when they are equal."""
    sa, sb = structure(a), structure(b)
    if sa == sb:
        return None
    if sa[:4] != sb[:4]:
        return f"module header/declarations differ: {sa[:4]} vs {sb[:4]}"
    for ka, kb in zip(sa[4], sb[4]):
        if ka != kb:
            names = ("name", "target", "header", "params", "directives", "registers", "shared",
                     "variables", "body", "notes")
            for n, x, y in zip(names, ka, kb):
                if x != y:
                    if n == "body":
                        for i, (p, q) in enumerate(zip(x, y)):
                            if p != q:
                                return f"kernel {ka[0]}: body item {i} differs: {p} vs {q}"
                        return f"kernel {ka[0]}: body lengths {len(x)} vs {len(y)}"
                    return f"kernel {ka[0]}: {n} differ: {x} vs {y}"
    return f"kernel counts differ: {len(sa[4])} vs {len(sb[4])}"
