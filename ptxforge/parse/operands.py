"""Operand text -> ptxforge operands, resolved against a kernel's declarations.

`Scope` knows a kernel's registers and variables (and the module's); `Scope.operand(text)`
turns one operand's spelling into the same value the builder would pass (Reg, Imm, Addr, Vec,
SpecialReg, Symbol, Label, ...), and caches it: the same spelling recurs on many lines.
"""

from __future__ import annotations

import re
import struct

from ..errors import ValidationError
from ..isa import types as T
from ..isa.operands import (DISCARD, SPECIAL_REGISTERS, Addr, Imm, Label, NegPred, PairDst, Reg, SpecialReg,
                            TensorAddr, Vec)
from ..isa.calls import ArgList, FuncRef
from ..isa.opaque import PlainLabel, RawOperand

_PTXFORGE_INTERNAL = True

_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)[uU]?\Z")
_FLOAT_HEX = re.compile(r"[-+]?0([fFdD])([0-9a-fA-F]+)\Z")
_FLOAT_DEC = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?\Z")
_IDENT = re.compile(r"[A-Za-z_$%][\w$]*\Z")
_ADDR_OFFSET = re.compile(r"(.*?)\s*\+\s*(-?\s*(?:0[xX][0-9a-fA-F]+|\d+))\Z|(.*?)\s*-\s*(0[xX][0-9a-fA-F]+|\d+)\Z")


def split_top(text: str, sep: str = ",") -> list:
    """Split at `sep` outside (), [] and {}."""
    if "(" not in text and "[" not in text and "{" not in text:
        return [p.strip() for p in text.split(sep)] if text.strip() else []
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    if last or out:
        out.append(last)
    return out


def parse_int(text: str) -> int | None:
    """A PTX integer literal (decimal, 0x hex, 0b binary, 0 octal, optional U suffix), else None."""
    if text.isdigit() and (text[0] != "0" or len(text) == 1):
        return int(text)
    if _INT.match(text) is None:
        return None
    t = text.rstrip("uU")
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    if t[:2] in ("0x", "0X"):
        v = int(t[2:], 16)
    elif t[:2] in ("0b", "0B"):
        v = int(t[2:], 2)
    elif len(t) > 1 and t[0] == "0":
        v = int(t, 8)
    else:
        v = int(t)
    return sign * v


def parse_imm(text: str) -> Imm | None:
    """An immediate: integer, 0fXXXXXXXX (f32 bits), 0dXXXXXXXXXXXXXXXX (f64 bits) or a decimal float."""
    v = parse_int(text)
    if v is not None:
        return Imm(v)
    m = _FLOAT_HEX.match(text)
    if m is not None:
        neg = text.startswith("-")
        if m.group(1) in "fF":
            val = struct.unpack("<f", struct.pack("<I", int(m.group(2), 16) & 0xFFFFFFFF))[0]
            return Imm(-val if neg else val, T.f32)
        val = struct.unpack("<d", struct.pack("<Q", int(m.group(2), 16) & 0xFFFFFFFFFFFFFFFF))[0]
        return Imm(-val if neg else val, T.f64)
    if _FLOAT_DEC.match(text) is not None and any(c in text for c in ".eE"):
        return Imm(float(text), T.f64)
    return None


class Scope:
    """The names one kernel's instructions may use, and a cache of operand spellings."""

    def __init__(self, declared: dict, symbols: dict, module_symbols: dict, functions: dict, owner: int = 0,
                 kernel: str = ""):
        self.declared = declared  # register spelling (`%r7`; `P1` when declared without %) -> its type
        self.registers: dict = {}  # the Regs made so far (on first use: most declared registers are unused)
        self.owner, self.kernel = owner, kernel
        self.symbols = symbols  # kernel-scope name -> Symbol
        self.module_symbols = module_symbols  # module-scope name -> Symbol
        self.functions = functions  # device function name -> Function/Prototype
        self.locals: list = []  # stack of {name: Symbol} for { } scopes
        self.labels_used: dict = {}  # label text -> first line that names it
        self.cache: dict = {}

    def push(self):
        """Enter a `{ }` scope (its `.param` declarations are visible until `pop`)."""
        self.locals.append({})
        self.cache = {}

    def pop(self):
        """Leave the innermost `{ }` scope."""
        if self.locals:
            self.locals.pop()
        self.cache = {}

    def symbol(self, name: str):
        """The variable `name` names here (innermost scope first), or None."""
        for frame in reversed(self.locals):
            s = frame.get(name)
            if s is not None:
                return s
        s = self.symbols.get(name)
        if s is not None:
            return s
        return self.module_symbols.get(name)

    def operand(self, text: str, line: int = 0):
        """The operand one spelling stands for (ValidationError when it names nothing declared)."""
        op = self.cache.get(text)
        if op is None:
            op = self._operand(text, line)
            if not isinstance(op, Label):  # labels record their first use
                self.cache[text] = op
        return op

    def register(self, spelling: str):
        """The Reg a declared register spelling (`%r7`, or `P1` for one declared without %) stands for,
        or None."""
        r = self.registers.get(spelling)
        if r is None:
            t = self.declared.get(spelling)
            if t is None:
                return None
            r = self.registers[spelling] = Reg(spelling.lstrip("%"), t, self.owner, self.kernel)
        return r

    def _reg(self, name: str):
        r = self.register("%" + name)
        if r is not None:
            return r
        if name in SPECIAL_REGISTERS:
            return SpecialReg(name, SPECIAL_REGISTERS[name])
        raise ValidationError(f"%{name} is not declared (no .reg declares it, and it is not a special register)")

    def _operand(self, text: str, line: int):
        c = text[:1]
        if c == "%":
            if "|" in text:
                a, b = text.split("|", 1)
                return PairDst(self._operand(a.strip(), line), self._reg(b.strip()[1:]))
            return self._reg(text[1:])
        if c == "[":
            return self._address(text[1:-1].strip(), line)
        if c == "{":
            inner = text[1:-1]
            return Vec(tuple(self._operand(p, line) for p in split_top(inner)))
        if c == "!":
            return NegPred(self._reg(text[1:].strip()[1:]))
        if c == "(":
            items = split_top(text[1:-1])
            return ArgList(tuple(self._named(p, line) for p in items if p))
        if text == "_":
            return DISCARD
        if (c.isalpha() or c == "_" or c == "$") and _IDENT.match(text):
            return self._named(text, line)
        imm = parse_imm(text)
        if imm is not None:
            return imm
        if _IDENT.match(text):
            return self._named(text, line)
        if "|" in text:
            a, b = text.split("|", 1)
            return PairDst(self._operand(a.strip(), line), self._reg(b.strip()[1:]))
        return RawOperand(text)

    def _named(self, name: str, line: int = 0):
        s = self.symbol(name)
        if s is not None:
            return s
        r = self.register(name)
        if r is not None:
            return r
        if name in self.functions:
            return FuncRef(name)
        self.labels_used.setdefault(name, line)
        return label_of(name)

    def _address(self, inner: str, line: int):
        if "," in inner:  # [tmap, {c0, c1}]
            head, rest = inner.split(",", 1)
            coords = self._operand(rest.strip(), line)
            tmap = self._operand(head.strip(), line)
            return TensorAddr(tmap, tuple(coords.regs) if isinstance(coords, Vec) else (coords,))
        m = _ADDR_OFFSET.match(inner) if ("+" in inner or "-" in inner) else None
        off = 0
        base_text = inner
        if m is not None:
            if m.group(1) is not None:
                base_text, off = m.group(1), parse_int(m.group(2).replace(" ", ""))
            else:
                base_text, off = m.group(3), -parse_int(m.group(4))
            if base_text == "":
                base_text = inner
                off = 0
        v = parse_int(base_text) if base_text[:1].isdigit() else None
        if v is not None:
            return Addr(v, off)
        base = self._operand(base_text.strip(), line)
        if isinstance(base, (Label, RawOperand, Imm)):
            if isinstance(base, Label):
                self.labels_used.pop(base_text.strip(), None)
            raise ValidationError(f"address [{inner}]: '{base_text.strip()}' is neither a register nor a "
                                  "declared variable")
        return Addr(base, off)


def label_of(name: str) -> Label:
    """The label a name spells: `$L_x` is ptxforge's own Label('x'); other names stay as written."""
    if name.startswith("$L_"):
        return Label(name[3:], 0)
    return PlainLabel(name, 0)
