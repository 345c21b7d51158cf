"""Operand text -> ptxforge operands, resolved against a kernel's declarations.

`Scope` knows a kernel's registers and variables (and the module's); `Scope.operand(text)`
turns one operand's spelling into the same value the builder would pass (Reg, Imm, Addr, Vec,
SpecialReg, Symbol, Label, ...), and caches it: the same spelling recurs on many lines.
"""

from __future__ import annotations

import re

from ..errors import ValidationError
from ..isa.operands import (DISCARD, PREDEFINED_CONSTANTS, SPECIAL_REGISTERS, Addr, Imm, Label, NegPred, PairDst,
                            Reg, SpecialReg, Symbol, SymbolOffset, TensorAddr, Vec)
from ..isa.calls import ArgList, FuncRef
from ..isa.literals import hex_float_problem, parse_imm, parse_int  # noqa: F401 (the reader's literals)
from ..isa.opaque import PlainLabel, RawOperand

_PTXFORGE_INTERNAL = True

_IDENT = re.compile(r"[A-Za-z_$%][\w$]*\Z")
_NUMBERED = re.compile(r"(.*\D)(\d+)\Z")  # a register spelling: its name and the decimal number ending it
_SYMBOL_OFFSET = re.compile(r"([A-Za-z_$][\w$]*)\s*\+\s*(-?\s*(?:0[xX][0-9a-fA-F]+|[0-9]+))\Z")
_ADDR_OFFSET = re.compile(r"(.*?)\s*\+\s*(-?\s*(?:0[xX][0-9a-fA-F]+|[0-9]+))\Z|(.*?)\s*-\s*(0[xX][0-9a-fA-F]+|[0-9]+)\Z")


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


class Scope:
    """The names one kernel's instructions may use, and a cache of operand spellings.

    Registers follow PTX's block structure: those declared at function scope are visible in the whole body
    (`declared`), those declared inside a `{ }` scope only until its `}` (`frames`), where they hide an outer
    register of the same spelling.  Every register of a function gets a name of its own (`declare_register`),
    so a register that hides another is a different `Reg`.
    """

    def __init__(self, declared: dict, symbols: dict, module_symbols: dict, functions: dict, owner: int = 0,
                 kernel: str = "", entries: set = frozenset()):
        self.declared = declared  # register spelling (`%r7`; `P1` when declared without %) -> its type
        self.declared_at: dict = {}  # function-scope register spelling -> line of its declaration
        self.renamed: dict = {}  # function-scope spelling -> its Reg's name, where that is not the spelling
        self.registers: dict = {}  # the Regs made so far (on first use: most declared registers are unused)
        self.frames: list = []  # per open { } scope: {register spelling: (Reg, line of its declaration)}
        self.ranged: set = set()  # function-scope spellings a `%r<N>` range declared
        self.frame_ranged: list = []  # per open { } scope: the spellings its ranges declared
        self.ranges: dict = {}  # function scope: range name as written (`%r`, `%y1`) -> (count, line)
        self.frame_ranges: list = []  # per open { } scope: the same for its ranges
        self.taken: dict = {}  # Reg name -> type, of every register of the function so far
        self.closed: dict = {}  # Reg name -> Reg, of registers whose { } scope has closed (a later scope may reuse)
        self.gone: dict = {}  # register spelling -> line of its declaration in a { } scope that has closed
        self.owner, self.kernel = owner, kernel
        self.symbols = symbols  # kernel-scope name -> Symbol
        self.module_symbols = module_symbols  # module-scope name -> Symbol
        self.functions = functions  # device function name -> Function/Prototype
        self.entries = entries  # names of the kernels defined so far (their addresses: `mov.u64 %rd, k`)
        self.locals: list = []  # stack of {name: Symbol} for { } scopes
        self.path: tuple = ()  # the open { } scopes, outermost first, each as the line of its `{`
        self.labels_used: dict = {}  # label name -> [(line, path)] of each use
        self.scoped_labels: dict = {}  # label text -> [(scope path, name)], where it is placed in several scopes
        self.cache: dict = {}

    def push(self, line: int = 0):
        """Enter a `{ }` scope that opens at `line` (its `.param` and `.reg` declarations are visible until
        `pop`)."""
        self.locals.append({})
        self.frames.append({})
        self.frame_ranged.append(set())
        self.frame_ranges.append({})
        self.path += (line,)
        self.cache = {}

    def pop(self):
        """Leave the innermost `{ }` scope: its registers are no longer visible."""
        if self.locals:
            self.locals.pop()
        if self.frames:
            self.frame_ranged.pop()
            self.frame_ranges.pop()
            for spelling, (r, line) in self.frames.pop().items():
                self.closed[r.name] = r
                self.gone[spelling] = line
            self.path = self.path[:-1]
        self.cache = {}

    def declare_range(self, base: str, count: int, line: int) -> bool:
        """Record range `base<count>` (`base` as written: `%r`, `y`) declared at `line` in the innermost open
        scope; returns whether its registers can be named.  ptxas reads the digits that end a register's name as
        its number in a range named without them (`%y10` is register 10 of `%y<N>`), so the registers of a range
        whose name ends in a digit (`%y1<3>`) are named by no operand: ptxas takes the declaration and refuses
        every use, and so does the reader (`range_miss` says why).  ValidationError when the scope already
        declares a range of that name (ptxas: duplicate definition of `%y1<`)."""
        ranges = self.frame_ranges[-1] if self.frames else self.ranges
        old = ranges.get(base)
        if old is not None:
            raise ValidationError(f"range {base}<{count}> is already declared in this scope (line {old[1]}: "
                                  f"{base}<{old[0]}>): a scope declares a range name once (ptxas: duplicate "
                                  f"definition of {base}<); a {{ }} block can declare one that hides it")
        ranges[base] = (count, line)
        return not base[-1].isdigit()

    def range_miss(self, spelling: str):
        """Why `spelling`, which names no declared register, is not a range register, where a range is involved
        (None otherwise): the range ptxas reads it as part of (by the digits that end it) and its registers, and
        a visible range whose name ends in a digit that seems to declare it."""
        m = _NUMBERED.match(spelling)
        scopes = [*reversed(self.frame_ranges), self.ranges]
        reads = None
        if m is not None:
            prefix, number = m.group(1), int(m.group(2))
            hit = next((r[prefix] for r in scopes if prefix in r), None)
            if hit is not None:
                reads = (f"ptxas reads it as register {number} of the range {prefix}<{hit[0]}> (line {hit[1]}), "
                         + (f"which holds {prefix}0 to {prefix}{hit[0] - 1}" if hit[0] else "which holds none"))
        lost = None
        for ranges in scopes:
            for base, (count, at) in ranges.items():
                rest = spelling[len(base):]
                if (base[-1].isdigit() and spelling.startswith(base)
                        and (not rest or (rest.isdigit() and int(rest) < count))):
                    lost = (base, count, at)
                    break
            if lost is not None:
                break
        if reads is None and lost is None:
            return None
        parts = [reads] if reads is not None else []
        if lost is not None:
            base, count, at = lost
            if reads is None:
                parts.append(f"ptxas reads it as register {int(m.group(2))} of a range {m.group(1)}<N>, and none is "
                             "declared here" if m else "no register has this name")
            parts.append(f"the range {base}<{count}> (line {at}) declares registers that no operand can name: its "
                         "name ends in a digit, and ptxas reads the digits that end a register's name as its number "
                         f"in a range named without them; name the range {base}_<{count}> and its registers "
                         f"{base}_0 to {base}_{max(count - 1, 0)}")
        return f"{spelling} is not declared: " + "; ".join(parts)

    def declare_register(self, spelling: str, t, line: int, ranged: bool = False):
        """Declare register `spelling` of type `t` at `line` in the innermost open scope; returns the Reg of a
        scoped one (None at function scope: made on first use).  `ranged`: a `%r<N>` range declares it, so
        that its number may also be spelled with leading zeros (`%r07`, as ptxas reads it: `numbered`).
        ValidationError when the scope already declares the spelling (or, for a spelling with leading zeros,
        the range register it names).  The Reg's name is the spelling without `%` unless another register of
        the function has that name (one this declaration hides, or one of another type in a closed scope): then
        a fresh `name$N`.  A closed scope's register of the same type is reused: the two never live together."""
        frame = self.frames[-1] if self.frames else None
        old = frame.get(spelling) if frame is not None else self.declared.get(spelling)
        if old is None and not ranged:
            canonical = _canonical(spelling)
            if canonical is not None and canonical in (self.frame_ranged[-1] if frame is not None else self.ranged):
                old = frame.get(canonical) if frame is not None else self.declared.get(canonical)
                if old is not None:
                    ot, at = (old[0].type, old[1]) if frame is not None else (old, self.declared_at[canonical])
                    raise ValidationError(f"{spelling} names {canonical} of a range declared .{ot.name} in "
                                          f"this scope (line {at}): ptxas reads a range register's number with "
                                          "leading zeros as the same register")
        if old is not None:
            ot, at = (old[0].type, old[1]) if frame is not None else (old, self.declared_at[spelling])
            raise ValidationError(f"{spelling} is already declared .{ot.name} in this scope (line {at}); a "
                                  "{ } block can declare a register of the same name that hides it")
        name = spelling.lstrip("%")
        if ranged:
            (self.frame_ranged[-1] if frame is not None else self.ranged).add(spelling)
        if frame is not None:
            reuse = self.closed.get(name)
            if reuse is not None and reuse.type is t:
                del self.closed[name]
                frame[spelling] = (reuse, line)
                self.cache = {}
                return reuse
        if name in self.taken:
            n = 1
            while f"{name}${n}" in self.taken:
                n += 1
            name = f"{name}${n}"
        self.taken[name] = t
        self.gone.pop(spelling, None)
        if frame is None:
            self.declared[spelling] = t
            self.declared_at[spelling] = line
            if name != spelling.lstrip("%"):
                self.renamed[spelling] = name
            return None
        r = Reg(name, t, self.owner, self.kernel)
        frame[spelling] = (r, line)
        self.cache = {}
        return r

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
        """The Reg a declared register spelling (`%r7`, or `P1` for one declared without %) stands for here
        (innermost scope first), or None.  A spelling declared nowhere that writes the number of a range
        register with leading zeros (`%r07`, `%r00`) names that register (`numbered`)."""
        r = self._declared(spelling)
        if r is None and "0" in spelling:  # (the quick test before the full one: a leading zero needs a 0)
            r = self.numbered(spelling)
        return r

    def numbered(self, spelling: str):
        """The register of a `%r<N>` range that `spelling` names with leading zeros in its number (`%r07` is
        `%r7`), innermost scope first, or None.  ptxas reads these (a name that no declaration spells exactly,
        whose number a range of the same name covers); a register declared alone (`.reg .b32 %r7;`) is not
        named so."""
        canonical = _canonical(spelling)
        if canonical is None:
            return None
        for frame, ranged in zip(reversed(self.frames), reversed(self.frame_ranged)):
            if canonical in ranged:
                return frame[canonical][0]
        return self._function_register(canonical) if canonical in self.ranged else None

    def _declared(self, spelling: str):
        """The Reg a declared register spelling stands for here (innermost scope first), or None."""
        for frame in reversed(self.frames):
            hit = frame.get(spelling)
            if hit is not None:
                return hit[0]
        return self._function_register(spelling)

    def _function_register(self, spelling: str):
        """The Reg of a register spelling declared at function scope (made on first use), or None."""
        r = self.registers.get(spelling)
        if r is None:
            t = self.declared.get(spelling)
            if t is None:
                return None
            r = self.registers[spelling] = Reg(self.renamed.get(spelling) or spelling.lstrip("%"), t, self.owner,
                                               self.kernel)
        return r

    def undeclared(self, spelling: str) -> str:
        """Why register `spelling` is not visible here: never declared, or declared in a closed { } scope."""
        line = self.gone.get(spelling)
        if line is not None:
            return (f"{spelling} is declared in a {{ }} scope (line {line}) that has closed: a register of a "
                    "scope is visible only inside it")
        return f"{spelling} is not declared"

    def _reg(self, name: str):
        r = self.register("%" + name)
        if r is not None:
            return r
        if name in SPECIAL_REGISTERS:
            return SpecialReg(name, SPECIAL_REGISTERS[name])
        if "%" + name in self.gone:
            raise ValidationError(self.undeclared("%" + name))
        why = self.range_miss("%" + name)
        if why is not None:
            raise ValidationError(why)
        raise ValidationError(f"%{name} is not declared (no .reg declares it, and it is not a special register)")

    def _spelled_reg(self, text: str):
        """The register `text` names after a `|` or a `!` (`%q`, or `q` for one declared without %)."""
        text = text.strip()
        if text[:1] == "%":
            return self._reg(text[1:])
        r = self.register(text)
        if r is None:
            raise ValidationError(self.range_miss(text) or self.undeclared(text) + " (no .reg declares it)")
        return r

    def _operand(self, text: str, line: int):
        c = text[:1]
        if c == "%":
            if "|" in text:
                a, b = text.split("|", 1)
                return PairDst(self._operand(a.strip(), line), self._spelled_reg(b))
            return self._reg(text[1:])
        if c == "[":
            return self._address(text[1:-1].strip(), line)
        if c == "{":
            inner = text[1:-1]
            return Vec(tuple(self._operand(p, line) for p in split_top(inner)))
        if c == "!":
            return NegPred(self._spelled_reg(text[1:]))
        if c == "(":
            items = split_top(text[1:-1])  # (names of .param variables; registers and immediates for .reg ones)
            return ArgList(tuple(self._named(p, line) if _IDENT.match(p) and p[0] != "%" else self._operand(p, line)
                                 for p in items if p))
        if text == "_":
            return DISCARD
        if (c.isalpha() or c == "_" or c == "$") and _IDENT.match(text):
            return self._named(text, line)
        imm = parse_imm(text)
        if imm is not None:
            return imm
        problem = hex_float_problem(text)
        if problem is not None:
            raise ValidationError(problem)
        if _IDENT.match(text):
            return self._named(text, line)
        if "|" in text:
            a, b = text.split("|", 1)
            return PairDst(self._operand(a.strip(), line), self._spelled_reg(b))
        m = _SYMBOL_OFFSET.match(text)
        if m is not None:  # var+imm: a variable's address plus an offset (mov, cvta)
            sym, offset = self._named(m.group(1), line), parse_int(m.group(2).replace(" ", ""))
            if isinstance(sym, Symbol) and offset is not None:
                return SymbolOffset(sym, offset)
        return RawOperand(text)

    def _named(self, name: str, line: int = 0):
        s = self.symbol(name)
        if s is not None:
            return s
        r = self.register(name)
        if r is not None:
            return r
        if name in self.functions or name in self.entries:  # (a kernel's address: what nvcc hands to the
            return FuncRef(name)                                 # device runtime's launch for `child<<<g, b>>>()`)
        if name in PREDEFINED_CONSTANTS:  # WARP_SZ: an immediate (no declaration may take the name)
            return Imm(PREDEFINED_CONSTANTS[name])
        if name in self.gone:
            raise ValidationError(self.undeclared(name))
        name = self.label_name(name)
        self.labels_used.setdefault(name, []).append((line, self.path))
        return label_of(name)

    def label_name(self, text: str) -> str:
        """The name label `text` has here: its own, unless it is placed in several `{ }` scopes; then the name of
        the placement in the innermost open scope around this point (`scoped_labels`)."""
        places = self.scoped_labels.get(text)
        if places is None:
            return text
        best = None
        for path, name in places:
            if self.path[:len(path)] == path and (best is None or len(path) > len(best[0])):
                best = (path, name)
        return best[1] if best is not None else text

    def forget_label_use(self, name: str):
        """Drop the last use of label `name` recorded by `_named` (the name turned out not to be a label)."""
        name = self.label_name(name)
        uses = self.labels_used.get(name)
        if uses:
            uses.pop()
            if not uses:
                del self.labels_used[name]

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
            else:  # ptxas refuses `[%rd-4]`: "Parsing error near '-'"
                raise ValidationError(f"address [{inner}]: PTX has no '-' in an address; a negative offset is "
                                      f"written [{m.group(3).strip()}+-{m.group(4)}]")
            if base_text == "":
                base_text = inner
                off = 0
        v = parse_int(base_text) if base_text[:1].isdigit() else None
        if v is not None:
            return Addr(v, off)
        if "+" in base_text:
            head, _, tail = base_text.partition("+")
            if not tail.strip():
                raise ValidationError(f"address [{inner}]: no offset follows the '+'")
            if head.strip()[:1] == "%" or "(" in tail:  # (a variable's `g+4` is its address plus 4)
                raise ValidationError(f"address [{inner}]: the offset '{inner.partition('+')[2].strip()}' after "
                                      f"{head.strip()} is no "
                                      "integer literal (ptxas evaluates a constant expression there, ptxforge reads "
                                      "literals); write its value")
        base = self._operand(base_text.strip(), line)
        if isinstance(base, SymbolOffset):  # [g+4+4]: the variable's address plus both offsets, [g+8]
            return Addr(base.symbol, base.offset + off)
        if isinstance(base, (Label, RawOperand, Imm)):
            if isinstance(base, Label):
                self.forget_label_use(base_text.strip())
            raise ValidationError(f"address [{inner}]: '{base_text.strip()}' is neither a register nor a "
                                  "declared variable")
        return Addr(base, off)


def _canonical(spelling: str) -> str | None:
    """`spelling` with the leading zeros of the number ending it dropped (`%r007` -> `%r7`, `%r00` -> `%r0`);
    None when it has none to drop."""
    m = _NUMBERED.match(spelling)
    if m is None or len(m.group(2)) < 2 or m.group(2)[0] != "0":
        return None
    return m.group(1) + str(int(m.group(2)))


def label_of(name: str) -> Label:
    """The label a name spells: `$L_x` is ptxforge's own Label('x'); other names stay as written."""
    if name.startswith("$L_"):
        return Label(name[3:], 0)
    return PlainLabel(name, 0)
