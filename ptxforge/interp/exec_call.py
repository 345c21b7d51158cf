"""Calls to device functions on the interpreter: each `call` is expanded in place.

A `Program` runs one flat list of instructions, so a kernel's calls are expanded when it is
built (`expand_calls`): the callee's body is copied after the call, its registers renamed to
`function.register` (one set per function, as a GPU's callee keeps no registers across calls),
its labels renamed per call site, each `ret` turned into a branch to the call's end (around a
callee that uses alloca, a stacksave before the call and a stackrestore after its end release
what it allocated, as its return does), and every
`.param` variable of a call (the caller's arguments and return slots, the callee's parameters
and return values) becomes a per-thread register that `st.param`/`ld.param` write and read
(`param.move`, an interpreter-only instruction).  A `.param` byte array (what nvcc writes for a
structure or a vector type passed or returned by value) becomes per-thread `.local` memory of its
size and alignment, one per declaration (`Expander.param_arrays`), and `st.param`/`ld.param` of it,
at any offset and vector width, become `.local` accesses, bounds-checked like any other.
Instructions keep the Python or PTX line they came from, so findings inside a device function name
the function's line.

`brx.idx` becomes a chain of compare-and-branch instructions, one per target.  A call to the CUDA
runtime's `vprintf` (printf, declared `.extern`) becomes the interpreter-only `exec_printf.PRINTF`.

A call through a register (`mov.u64 %rd, func` gives a fixed address per function) becomes a
comparison with the address of each function of the module that has the `.callprototype`'s
signature and a branch to that function's expanded body.

Not modelled (refused when reached, naming the line): recursion, vector or offset accesses to
scalar call parameters, a call scope's `.param` array of another size or alignment than the function's
parameter (or a scalar for an array; ptxas refuses both).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..declarations import Variable
from ..isa import types as T
from ..isa.control import bra, setp, stack as stack_op
from ..isa.instruction import Instruction
from ..isa.operands import Addr, Guard, Imm, Label, Reg, Symbol
from ..isa.targets import BASE
from ..isa.vprintf import VPRINTF
from ..kernel import LabelDef
from .exec_printf import PRINTF
from .findings import InterpUnsupported
from .values import from_words128

_PTXFORGE_INTERNAL = True

#: The opcode of the interpreter-only copy between a register and a call's `.param` register.
PARAM_MOVE = "param.move"


def _param_reg(name: str, t: T.ScalarType) -> Reg:
    """The per-thread register that holds `.param` variable `name` (its type's bits)."""
    return Reg(name, T.lookup(f"b{max(t.bits, 8)}") if not t.is_pred else t, 0, "")


def _rewrite(x, regs: dict, labels: dict, memo: dict):
    """`x` with registers and labels renamed (deep, through operands and `info` records)."""
    key = id(x)
    hit = memo.get(key)
    if hit is not None:
        return hit[1]
    t = type(x)
    if t is Reg or isinstance(x, Reg):
        out = regs.get(x.name)
        if out is None:
            out = dataclasses.replace(x, name=regs["@prefix"] + x.name)
            regs[x.name] = out
    elif isinstance(x, Symbol):  # a function's .local arrays are its own: renamed like its registers
        out = dataclasses.replace(x, name=regs["@prefix"] + x.name) if x.space == "local" else x
    elif isinstance(x, Label):
        out = labels.get(x.name)
        if out is None:
            out = Label(x.name + labels["@suffix"], x.owner)
            labels[x.name] = out
    elif t is tuple or t is list:
        items = [_rewrite(v, regs, labels, memo) for v in x]
        out = x if all(a is b for a, b in zip(items, x)) else t(items)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, T.ScalarType):
        changes = {}
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            nv = _rewrite(v, regs, labels, memo)
            if nv is not v:
                changes[f.name] = nv
        out = dataclasses.replace(x, **changes) if changes else x
    else:
        out = x
    memo[key] = (x, out)
    return out


def _param_access(ins, params: dict):
    """What an ld/st.param of a call parameter in `params` runs as: a `param.move` to or from the scalar
    parameter's register, or a `.local` access of a byte-array parameter (held in local memory); `ins` itself
    for any other instruction."""
    if ins.opcode not in ("ld", "st") or getattr(ins.info, "space", None) != "param":
        return ins
    i = 1 if ins.opcode == "ld" else 0
    addr = ins.operands[i]
    if not isinstance(addr, Addr) or not isinstance(addr.base, Symbol) or addr.base.name not in params:
        return ins
    where = params[addr.base.name]
    if isinstance(where, Symbol):  # a byte array in local memory
        ops = list(ins.operands)
        ops[i] = dataclasses.replace(addr, base=where)
        return dataclasses.replace(ins, operands=tuple(ops), info=dataclasses.replace(ins.info, space="local"))
    if addr.offset or ins.info.vec != 1:
        raise InterpUnsupported(f"'{ins.render()}': vector or offset accesses to call parameters are not "
                                "modelled", ins)
    ops = (where, ins.operands[1]) if ins.opcode == "st" else (ins.operands[0], where)
    return Instruction(PARAM_MOVE, ins.mnemonic, ops, 1, ins.guard, ins.req, None, (), ins.info.type, ins.loc)


class _Expander:
    def __init__(self, functions: dict):
        self.functions = functions
        self.sites = 0
        self.out: list = []
        self.param_arrays: list = []  # the .local Variables holding .param byte arrays

    def param_array(self, sym) -> Symbol:
        """A per-thread `.local` array of this declaration's own for `.param` byte array `sym`."""
        self.sites += 1
        name = f".param {sym.name}@{self.sites}"  # as findings name it (never rendered as PTX)
        self.param_arrays.append(Variable(name, "local", T.b8, align=max(sym.align or 1, 1), dims=(sym.nbytes,)))
        return Symbol(name, "local", T.b8, sym.nbytes, max(sym.align or 1, 1))

    def body(self, items, params: dict, stack: tuple, ret_label):
        """Append `items` (a kernel's or an instance's body), `params`: .param name -> register."""
        scopes: list = []
        out = self.out
        for item in items:
            name = type(item).__name__
            if name == "ScopeOpen":
                scopes.append({})
                continue
            if name == "ScopeClose":
                if scopes:
                    for k, old in scopes.pop().items():
                        if old is None:
                            params.pop(k, None)
                        else:
                            params[k] = old
                continue
            if name == "LocalDecl" and isinstance(item.symbol, Symbol) and item.symbol.space == "param":
                sym = item.symbol
                if scopes and sym.name not in scopes[-1]:
                    scopes[-1][sym.name] = params.get(sym.name)
                if sym.nbytes is not None:
                    params[sym.name] = self.param_array(sym)
                    continue
                self.sites += 1
                params[sym.name] = _param_reg(f"{sym.name}@{self.sites}", sym.type)
                continue
            if not isinstance(item, (Instruction, LabelDef)):
                continue
            if isinstance(item, LabelDef):
                out.append(item)
                continue
            ins = item
            if ins.opcode == "call":
                self.call(ins, params, stack)
                continue
            if ins.opcode == "brx.idx":
                self.brx(ins)
                continue
            if ins.opcode == "ret" and ret_label is not None:
                out.append(bra(ret_label).with_guard(ins.guard).with_loc(ins.loc) if ins.guard is not None
                           else bra(ret_label).with_loc(ins.loc))
                continue
            out.append(_param_access(ins, params))

    def brx(self, ins):
        """`brx.idx i, tlist` as a chain: `setp.eq p, i, j; @p bra tlist[j]` for each j, then a
        stop for an index past the list (undefined in PTX)."""
        self.sites += 1
        site = self.sites
        index, targets = ins.operands
        t = index.type if isinstance(index, Reg) else T.u32
        p = Reg(f"brx@{site}", T.pred, 0, "")
        skip = Label(f"brx@skip{site}", -1)
        if ins.guard is not None:
            self.out.append(bra(skip).with_guard(Guard(ins.guard.reg, not ins.guard.negate)).with_loc(ins.loc))
        for j, label in enumerate(ins.info):
            self.out.append(setp("eq", t, p, index, Imm(j, t)).with_loc(ins.loc))
            self.out.append(bra(label).with_guard(Guard(p)).with_loc(ins.loc))
        self.out.append(_refusal(f"'{ins.render()}': the index is past the {len(ins.info)} targets of {targets.name} "
                                 "(undefined behaviour in PTX)", ins))
        if ins.guard is not None:
            self.out.append(LabelDef(skip, ins.loc))

    def call(self, ins, params: dict, stack: tuple):
        info = ins.info
        missing = [a for a in tuple(info.args) + tuple(info.returns) if a.name not in params]
        if missing:
            self.out.append(_refusal(f"'{ins.render()}': {missing[0].name} is not a .param variable of the call "
                                     "scope", ins))
            return
        if isinstance(info.func, Reg):
            self.indirect(ins, params, stack)
            return
        func = self.functions.get(info.func)
        if func is None and info.func == VPRINTF and len(info.args) == 2:  # the CUDA runtime's printf
            ret = params[info.returns[0].name] if info.returns else None
            self.out.append(Instruction(PRINTF, ins.mnemonic, (ret, params[info.args[0].name],
                                                                params[info.args[1].name]),
                                        1 if ret is not None else 0, ins.guard, ins.req, None, (), None, ins.loc))
            return
        if func is None:
            self.out.append(_refusal(f"'{ins.render()}' is a call to {info.func}, which the module does not "
                                     "define; the interpreter runs calls to device functions the module defines", ins))
            return
        self.sites += 1
        end = Label(f"{func.name}@ret{self.sites}", -1)
        frame = self._frame(ins, [func])
        if ins.guard is not None:  # a guarded call: threads whose guard fails skip the body
            self.out.append(_skip(ins, end))
        self.inline(func, ins, params, stack, end)
        self.out.append(LabelDef(end, ins.loc))
        self._release(frame, ins)

    def _frame(self, ins, funcs):
        """Before a call to one of `funcs`: when one allocates with alloca, save the stack pointer into a
        register of this call site (returned; None otherwise) so the call's end can release the frame."""
        if not any(isinstance(x, Instruction) and x.opcode == "alloca" for f in funcs for x in f.body):
            return None
        reg = Reg(f"frame@{self.sites}", T.u64, 0, "")
        self.out.append(stack_op("stacksave", reg).with_loc(ins.loc))
        return reg

    def _release(self, frame, ins):
        """After a call's end: the stack pointer as it was before the call (what the callee allocated is freed)."""
        if frame is not None:
            self.out.append(stack_op("stackrestore", frame).with_loc(ins.loc))

    def indirect(self, ins, params: dict, stack: tuple):
        """A call through a register: compare it with the address of each function of the module that
        has the prototype's signature, branch to that function's expanded body; an address of no such
        function stops there."""
        info = ins.info
        proto = info.prototype
        want = _signature(proto.returns, proto.params)
        names = [n for n in sorted(self.functions)
                 if _signature(self.functions[n].returns, self.functions[n].params) == want]
        self.sites += 1
        site = self.sites
        end = Label(f"indirect@ret{site}", -1)
        frame = self._frame(ins, [self.functions[n] for n in names])
        if ins.guard is not None:
            self.out.append(_skip(ins, end))
        p = Reg(f"icall@{site}", T.pred, 0, "")
        entries = []
        for n in names:
            entry = Label(f"{n}@icall{site}", -1)
            entries.append(entry)
            self.out.append(setp("eq", T.u64, p, info.func, Imm(function_address(self.functions, n), T.u64))
                            .with_loc(ins.loc))
            self.out.append(bra(entry).with_guard(Guard(p)).with_loc(ins.loc))
        self.out.append(_refusal(f"'{ins.render()}': the register holds no address of a device function of the "
                                 f"module with the signature of {proto.name}"
                                 + (f" ({', '.join(names)})" if names else " (none has it)"), ins))
        for n, entry in zip(names, entries):
            self.out.append(LabelDef(entry, ins.loc))
            self.inline(self.functions[n], ins, params, stack, end)
            self.out.append(bra(end).with_loc(ins.loc))
        self.out.append(LabelDef(end, ins.loc))
        self._release(frame, ins)

    def inline(self, func, ins, params: dict, stack: tuple, end: Label):
        """`func`'s body for the call `ins`, its parameters bound to the call scope's registers, its
        `ret` a branch to `end`."""
        if func.name in stack:
            self.out.append(_refusal(f"'{ins.render()}': a recursive call ({' -> '.join(stack + (func.name,))}) is "
                                     "not modelled", ins))
            return
        info = ins.info
        if len(func.params) != len(info.args) or len(func.returns) != len(info.returns):
            self.out.append(_refusal(
                f"'{ins.render()}' passes {len(info.args)} argument(s) and {len(info.returns)} return slot(s); "
                f"{func.name} takes {len(func.params)} parameter(s) and returns {len(func.returns)} value(s) "
                "(ptxas refuses the call)", ins))
            return
        for p, a in zip(tuple(func.params) + tuple(func.returns), tuple(info.args) + tuple(info.returns)):
            problem = _array_mismatch(p, a)
            if problem:
                self.out.append(_refusal(f"'{ins.render()}': {a.name} is {_shape_text(a)}; parameter {p.name} of "
                                         f"{func.name} is {_shape_text(p)} (ptxas: '{problem} of argument does not match formal "
                                         f"parameter')", ins))
                return
        self.sites += 1
        inner = {}
        for p, a in zip(func.params, info.args):
            inner[p.name] = params[a.name]
        for p, r in zip(func.returns, info.returns):
            inner[p.name] = params[r.name]
        regs = {"@prefix": f"{func.name}."}
        labels = {"@suffix": f"@{self.sites}"}
        memo: dict = {}
        items = [_rewrite(x, regs, labels, memo) if isinstance(x, (Instruction, LabelDef)) else x for x in func.body]
        self.body(items, inner, stack + (func.name,), end)


def _array_mismatch(p, a) -> str:
    """"Type" or "Alignment" when call scope variable `a` and the function's parameter `p` (either a `.b8` array,
    a structure by value) differ in kind, size or alignment, as ptxas refuses them; "" otherwise (and for `.reg`
    parameters and register arguments, which are not arrays)."""
    if not isinstance(a, Symbol) or getattr(p, "state", "param") != "param" or (p.nbytes is None and a.nbytes is None):
        return ""
    if p.nbytes != a.nbytes:
        return "Type"
    return "Alignment" if (p.align or 1) != (a.align or 1) else ""


def _shape_text(x) -> str:
    return "a scalar" if x.nbytes is None else f"a {x.nbytes}-byte array aligned to {x.align or 1}"


def _signature(returns, params) -> tuple:
    """What an indirect call compares between its prototype and a function: each return value's and parameter's
    width in bits and, for a `.b8` array (a structure by value), its size in bytes."""
    return (tuple((p.type.bits, p.nbytes) for p in returns), tuple((p.type.bits, p.nbytes) for p in params))


def _skip(ins, end: Label):
    """The branch past a guarded call's body for the threads whose guard fails: `bra.uni` for `call.uni`, which
    promises that every active thread of the warp has the same guard, so a divergent guard is reported as a
    divergent uniform branch at the call's line."""
    uni = "uni" in ins.mods
    return bra(end, uni=uni).with_guard(Guard(ins.guard.reg, not ins.guard.negate)).with_loc(ins.loc)


#: Where the interpreter places device functions' addresses (`mov.u64 %rd, func`): 16 bytes apart.
FUNCTION_BASE = 0x4000_0000_0000


def function_address(functions: dict, name: str) -> int:
    """The address `mov.u64 %rd, name` gives on the interpreter (by the function's rank in name
    order); KeyError for a name that is no device function of the module."""
    if name not in functions:
        raise KeyError(name)
    return FUNCTION_BASE + 16 * (1 + sorted(functions).index(name))


#: The opcode of a stand-in for what the interpreter cannot expand; it refuses when reached.
UNSUPPORTED_CALL = "call.unsupported"


def _refusal(message, ins=None):
    """An instruction that refuses, with `message`, when a thread reaches it (`ins`: the instruction it stands for,
    which the refusal shows)."""
    return Instruction(UNSUPPORTED_CALL, "call", (), 0, None, ins.req if ins is not None else BASE, (message, ins),
                       (), None, getattr(ins, "loc", None))


def make_unsupported_call(P, op):
    """The executor of a call the interpreter cannot expand: InterpUnsupported naming the instruction it stands for
    and its line."""
    message, ins = op.ins.info
    raise InterpUnsupported(message, ins if ins is not None else op.ins)


def expand_calls(kernel, functions: dict) -> tuple:
    """The kernel's body with every direct call to a device function of `functions` (name ->
    Function) expanded in place (see the module docstring); Instructions and LabelDefs only."""
    if not any(isinstance(i, Instruction) and i.opcode in ("call", "brx.idx") for i in kernel.body) and \
            not any(type(i).__name__ == "LocalDecl" for i in kernel.body):
        return [i for i in kernel.body if isinstance(i, (Instruction, LabelDef))], []
    e = _Expander(functions)
    params: dict = {}
    if getattr(kernel, "kind", "entry") == "func":  # run on its own: its parameters are registers too
        for p in tuple(kernel.params) + tuple(kernel.returns):
            params[p.name] = e.param_array(p) if p.nbytes is not None else _param_reg(p.name, p.type)
    e.body(kernel.body, params, (kernel.name,), None)
    return e.out, e.param_arrays


def make_param_move(P, op):
    """The executor of `param.move`: copy a call's `.param` register to or from an ordinary register
    (what `st.param`/`ld.param` of call arguments and return values do here). Returns ``fn(S, m)``."""
    ins = op.ins
    t = ins.type
    dst, src = ins.operands
    ext = "sign" if t.kind == "s" else "zero"
    if isinstance(src, Imm) and t.bits == 128:  # st.param.b128 [a], 5: the number's 128 bits, low word first
        v = int(src.value) & ((1 << 128) - 1)
        c = from_words128(np.array([[v & (2**64 - 1), v >> 64]], np.uint64))[0]
        put = P.writer(dst, t, ins, extend=ext)
        return lambda S, m: put(S, c, m)
    get = P.reader(src, t, ins)
    put = P.writer(dst, t, ins, extend=ext)
    return lambda S, m: put(S, get(S), m)


def reachable_functions(kernel, functions: dict) -> list:
    """The device functions of `functions` a run of `kernel` may call, directly or through others, each once."""
    out, seen, todo = [], {kernel.name}, [kernel]
    while todo:
        k = todo.pop()
        for ins in k.body:
            if isinstance(ins, Instruction) and ins.opcode == "call" and isinstance(ins.info.func, str):
                f = functions.get(ins.info.func)
                if f is not None and f.name not in seen:
                    seen.add(f.name)
                    todo.append(f)
                    out.append(f)
    return out


def local_variables(kernel, functions: dict) -> list:
    """The `.local` variables a run of `kernel` uses: its own, then those of the functions it
    reaches (renamed `function.name`, as their instructions are)."""
    out = [v for v in getattr(kernel, "variables", ()) if v.space == "local"]
    for f in reachable_functions(kernel, functions):
        out += [dataclasses.replace(v, name=f"{f.name}.{v.name}") for v in getattr(f, "variables", ())
                if v.space == "local"]
    return out


def function_shared(kernel, functions: dict) -> list:
    """The `.shared` arrays the device functions `kernel` reaches declare in their bodies: one per CTA each (a
    function's shared array is static, shared by every call), under its own name."""
    return [s for f in reachable_functions(kernel, functions) for s in getattr(f, "shared", ())]
