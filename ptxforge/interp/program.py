"""A kernel compiled for the interpreter: one executor closure per instruction, built once.

Registers get indices; every (register, view dtype) pair an instruction reads or writes gets a
*slot*, so an executor finds its numpy view with one list index (`S.V[slot]`).  Operand readers
and writers are small closures made here; the per-family modules (`exec_*`) build executors
from them.  Building never touches numpy state of a launch, so a Program is cached per kernel
and reused by every launch and every batch of CTAs.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from ..declarations import LocalDecl, RegParam, ScopeClose, ScopeOpen
from ..kernel import Kernel, LabelDef, Param
from ..isa import types as T
from ..isa.instruction import Instruction
from ..isa.operands import Discard, Imm, NegPred, PairDst, Reg, SpecialReg, Symbol, SymbolOffset, Vec
from .dispatch import build_op
from .exec_call import expand_calls, function_address
from ..isa.calls import CallParam, FuncRef, call
from ..isa.memory import ld, st
from ..isa.operands import Addr
from .findings import InterpUnsupported
from .values import const, float_literal_bits, storage_dtype, view_dtype

_PTXFORGE_INTERNAL = True

class Program:
    """Executors for one kernel, plus the register and shared-memory tables a Machine needs."""

    def __init__(self, kernel: Kernel, functions: dict | None = None):
        """`functions`: the module's device functions by name, which the kernel's calls run
        (expanded in place: see exec_call)."""
        self.kernel = kernel
        self.functions = dict(functions or {})
        self.name = kernel.name
        self.reg_index: dict = {}
        self.reg_types: list = []  # storage dtype per register index
        self.slots: list = []  # (register index, view dtype)
        self._slot_of: dict = {}
        self.instructions: list = []
        labels: dict = {}
        # (.reg parameters pass through .param variables, which the expansion binds to registers)
        expanded, self.param_arrays = expand_calls(*through_params(kernel, self.functions))
        for item in expanded:
            if isinstance(item, LabelDef):
                labels[item.label.name] = len(self.instructions)
            elif isinstance(item, Instruction):
                self.instructions.append(item)
        self.labels = labels
        for r in kernel.registers:
            self._reg(r)
        self.ops = [build_op(self, pc, ins) for pc, ins in enumerate(self.instructions)]
        from .exec_wgmma import guard_accumulators
        guard_accumulators(self)
        self.uses_stack = any(i.opcode in ("alloca", "stacksave", "stackrestore") for i in self.instructions)
        self.uses_async = any(i.opcode.startswith("cp.async") or i.opcode.startswith("mbarrier")
                              for i in self.instructions)

    # ------------------------------------------------------------ registers and slots
    def _reg(self, r: Reg) -> int:
        i = self.reg_index.get(r.name)
        if i is None:
            i = len(self.reg_types)
            self.reg_index[r.name] = i
            self.reg_types.append(storage_dtype(r.type))
        return i

    def slot(self, r: Reg, dt) -> int:
        """The slot of register `r` viewed as `dt` (same width as its storage)."""
        i = self._reg(r)
        dt = np.dtype(dt)
        key = (i, dt)
        s = self._slot_of.get(key)
        if s is None:
            if dt.itemsize != self.reg_types[i].itemsize:
                raise AssertionError(f"view {dt} of {r} does not match its width")
            s = len(self.slots)
            self.slots.append(key)
            self._slot_of[key] = s
        return s

    def raw_slot(self, r: Reg) -> int:
        """The view slot of register `r` in its own storage dtype."""
        return self.slot(r, self.reg_types[self._reg(r)])

    def target(self, label, ins) -> int:
        """The pc of `label` (a branch target of instruction `ins`); InterpUnsupported when it is not placed.
        """
        pc = self.labels.get(label.name)
        if pc is None:
            raise InterpUnsupported(f"branch to {label}, which is not placed in kernel {self.name}", ins)
        return pc

    # ------------------------------------------------------------ operand readers
    def reader(self, op, t: T.ScalarType, ins, *, extend: str | None = None):
        """A function S -> numpy array (or scalar) holding operand `op` read as type `t`.

        A register wider than `t` (ld/st/cvt allow it) is truncated; one narrower is widened,
        sign-extended when `extend` is 'sign' (or, by default, when `t` is signed).
        """
        dt = view_dtype(t)
        if isinstance(op, Reg):
            rb = op.type.bits if not op.type.is_pred else 1
            tb = t.bits if not t.is_pred else 1
            if rb == tb:
                s = self.slot(op, dt)
                return lambda S: S.V[s]
            if rb > tb:
                s = self.raw_slot(op)
                udt = storage_dtype(t)
                return lambda S: S.V[s].astype(udt).view(dt)
            # a register narrower than the type: widen it, by the instruction type's signedness
            signed = extend == "sign" or (extend is None and t.kind == "s")
            src_dt = view_dtype(op.type.as_signed() if signed else op.type.as_unsigned())
            s = self.slot(op, src_dt)
            wide = np.dtype(("int" if signed else "uint") + str(t.bits))
            return lambda S: S.V[s].astype(wide).view(dt)
        if isinstance(op, Imm):
            if t.is_float and op.type is not None and not op.type.is_float and not isinstance(op.value, float):
                c = const(op.value, T.lookup(f"b{t.bits}")).view(dt)  # an integer literal gives the bits
            elif op.type is not None and op.type.is_float and not t.is_float and not t.is_pred:
                c = float_literal_bits(op.value, op.type, t)  # st.f32 [p], 0f3FC00000 reads the bits as .b32
            else:
                c = const(op.value, t)
            return lambda S: c
        if isinstance(op, SpecialReg):
            get = special_reader(op.name, ins)
            udt = storage_dtype(t)
            if op.type.bits != t.bits:
                return lambda S: get(S).astype(udt).view(dt)
            return lambda S: get(S).view(dt)
        if isinstance(op, (Symbol, SymbolOffset)):  # a variable's address (plus an offset) in its space
            name, space = op.name, op.space
            offset = op.offset if isinstance(op, SymbolOffset) else 0
            mask = (1 << t.bits) - 1

            def sym(S):
                addr = (S.launch.symbol_address(name, space) + offset) & mask
                return np.array(addr, dtype=storage_dtype(t)).view(dt)[()]
            return sym
        if isinstance(op, FuncRef):  # a device function's address (an indirect call's target)
            try:
                c = const(function_address(self.functions, own_name(self.functions, op.name)), t)
            except KeyError:
                raise InterpUnsupported(f"{op.name} is not a device function of the module", ins) from None
            return lambda S: c
        if isinstance(op, NegPred):
            g = self.reader(op.reg, T.pred, ins)
            return lambda S: ~g(S)
        raise InterpUnsupported(f"operand {op!r} is not modelled", ins)

    def pred_reader(self, op, ins):
        """A function of the machine that reads predicate operand `op` of `ins` (a .pred register, its negation
        or an immediate) as a bool array.
        """
        if isinstance(op, NegPred):
            s = self.slot(op.reg, bool)
            return lambda S: ~S.V[s]
        if isinstance(op, Imm):
            c = bool(op.value)
            return lambda S: c
        s = self.slot(op, bool)
        return lambda S: S.V[s]

    # ------------------------------------------------------------ operand writers
    def writer(self, op, t: T.ScalarType, ins, *, extend: str = "zero"):
        """A function (S, value, mask) storing `value` (of t's view dtype) into register `op`.

        Writing a register wider than `t` extends the value ('sign' or 'zero'), as ld/cvt do.
        """
        if isinstance(op, Discard):
            return lambda S, v, m: None
        if isinstance(op, PairDst):
            return self.writer(op.reg, t, ins, extend=extend)
        if not isinstance(op, Reg):
            raise InterpUnsupported(f"destination {op!r} is not a register", ins)
        dt = view_dtype(t)
        rb = op.type.bits if not op.type.is_pred else 1
        tb = t.bits if not t.is_pred else 1
        if rb == tb:
            s = self.slot(op, dt)

            def put(S, v, m):
                np.copyto(S.V[s], v, where=m, casting="unsafe")
            return put
        s = self.raw_slot(op)
        if rb > tb:
            src = np.dtype(("int" if extend == "sign" else "uint") + str(tb))
            wide = np.dtype(("int" if extend == "sign" else "uint") + str(rb))

            def put_wide(S, v, m):
                v = np.asarray(v)
                if v.dtype.itemsize != src.itemsize:
                    v = v.astype(storage_dtype(t))  # keep the low bits of the type
                np.copyto(S.V[s], v.view(src).astype(wide), where=m, casting="unsafe")
            return put_wide
        # a narrower register than the type (e.g. 16-bit register written by a .b32 op): truncate
        udt = storage_dtype(op.type)

        def put_narrow(S, v, m):
            np.copyto(S.V[s], np.asarray(v).view(storage_dtype(t)).astype(udt), where=m, casting="unsafe")
        return put_narrow

    def regs_of(self, vec) -> tuple:
        """The registers of a Vec operand, or the operand alone as a 1-tuple."""
        return tuple(vec.regs) if isinstance(vec, Vec) else (vec,)


# ---------------------------------------------------------------- special registers

def special_reader(name: str, ins):
    """%tid.x ... as a function of the machine; values are uint32 (uint64 for 64-bit ones)."""
    simple = {
        "tid.x": "tid_x", "tid.y": "tid_y", "tid.z": "tid_z",
        "ctaid.x": "ctaid_x", "ctaid.y": "ctaid_y", "ctaid.z": "ctaid_z",
        "laneid": "laneid", "warpid": "warpid",
        "lanemask_eq": "lanemask_eq", "lanemask_le": "lanemask_le", "lanemask_lt": "lanemask_lt",
        "lanemask_ge": "lanemask_ge", "lanemask_gt": "lanemask_gt",
        "clusterid.x": "clusterid_x", "clusterid.y": "clusterid_y", "clusterid.z": "clusterid_z",
        "cluster_ctaid.x": "cluster_ctaid_x", "cluster_ctaid.y": "cluster_ctaid_y",
        "cluster_ctaid.z": "cluster_ctaid_z", "cluster_ctarank": "cluster_ctarank",
    }
    if name in simple:
        attr = simple[name]
        return lambda S: getattr(S, attr)
    consts = {
        "ntid.x": lambda S: S.launch.block[0], "ntid.y": lambda S: S.launch.block[1],
        "ntid.z": lambda S: S.launch.block[2],
        "nctaid.x": lambda S: S.launch.grid[0], "nctaid.y": lambda S: S.launch.grid[1],
        "nctaid.z": lambda S: S.launch.grid[2],
        "nclusterid.x": lambda S: S.launch.grid[0] // S.launch.cluster[0],
        "nclusterid.y": lambda S: S.launch.grid[1] // S.launch.cluster[1],
        "nclusterid.z": lambda S: S.launch.grid[2] // S.launch.cluster[2],
        "cluster_nctaid.x": lambda S: S.launch.cluster[0], "cluster_nctaid.y": lambda S: S.launch.cluster[1],
        "cluster_nctaid.z": lambda S: S.launch.cluster[2],
        "cluster_nctarank": lambda S: S.launch.cluster[0] * S.launch.cluster[1] * S.launch.cluster[2],
        "nwarpid": lambda S: 64, "smid": lambda S: 0, "nsmid": lambda S: 1,
        "dynamic_smem_size": lambda S: S.launch.dynamic_shared,
        "total_smem_size": lambda S: S.launch.total_shared,
        "gridid": lambda S: 0,
        # the .w component of the .v4 id registers: ptxas reads it as 0 (%ntid.w and %nctaid.w too)
        **{f"{n}.w": (lambda S: 0) for n in ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid",
                                              "cluster_ctaid", "cluster_nctaid")},
        # %envreg0..31 hold what a launch asks the driver for (a cooperative launch's grid workspace);
        # an ordinary launch leaves them 0
        **{f"envreg{i}": (lambda S: 0) for i in range(32)},
    }
    if name in consts:
        f = consts[name]
        sixty_four = name == "gridid"

        def get(S):
            return np.full(S.N, f(S), dtype=np.uint64 if sixty_four else np.uint32)
        return get
    if name in ("clock", "clock64", "globaltimer", "clock_hi", "globaltimer_lo", "globaltimer_hi"):
        wide = name in ("clock64", "globaltimer")
        shift = 32 if name.endswith("_hi") else 0

        def clock(S):
            v = np.full(S.N, S.step * 4, dtype=np.uint64) >> np.uint64(shift)
            return v if wide else v.astype(np.uint32)
        return clock
    if name == "aggr_smem_size":  # no shared memory is reserved by the interpreter's "driver"
        return lambda S: np.full(S.N, S.launch.total_shared, dtype=np.uint32)
    if name.startswith("reserved_smem_offset_") or name == "current_graph_exec":
        wide = name == "current_graph_exec"  # not launched from a graph: 0
        return lambda S: np.zeros(S.N, dtype=np.uint64 if wide else np.uint32)
    if name == "is_explicit_cluster":
        return lambda S: np.full(S.N, S.launch.explicit_cluster, dtype=bool)
    raise InterpUnsupported(f"special register %{name} is not modelled", ins)



def own_name(functions: dict, name: str) -> str:
    """The name of the function `name` runs: its own, or, for an `.alias`, its function's (so the two give one
    address, as on a GPU); KeyError for a name that is no device function."""
    return functions[name].name


# ---------------------------------------------------------------- .reg parameters

def through_params(kernel, functions: dict) -> tuple:
    """(kernel, functions) where `.reg` parameters travel as `.param` variables, the form `expand_calls` runs:
    a function with `.reg` parameters (`RegParam`) reads each from a `.param` variable of its own into its
    register when it starts and writes each `.reg` return value to one before each `ret`; a call that passes
    registers or immediates (or receives registers) stores them to `.param` variables of a `{ }` scope around
    it and loads its return values from them after it (under the call's guard).  The values are those of the
    `.reg` form; the module is not changed."""
    if not any(isinstance(p, RegParam) for f in functions.values() for p in f.params + f.returns) \
            and not _register_calls(kernel.body):
        return kernel, functions
    sites = itertools.count(1)
    done: dict = {}  # id of a function -> its form (an alias names the same function)
    out = {}
    for name, f in functions.items():
        if id(f) not in done:
            done[id(f)] = _through_params(f, functions, sites)
        out[name] = done[id(f)]
    return dataclasses.replace(kernel, body=_calls_through_params(kernel.body, functions, sites)), out


def _register_calls(body) -> bool:
    """Whether a call of `body` passes or receives anything but `.param` variables."""
    return any(isinstance(x, Instruction) and x.opcode == "call" and hasattr(x.info, "args")
               and not all(isinstance(a, Symbol) for a in x.info.args + x.info.returns) for x in body)


def _bits_type(t) -> T.ScalarType:
    """The .bN type of `t`'s width: what a value of `t` travels as through a .param variable."""
    return T.lookup(f"b{t.bits}")


def _through_params(f, functions: dict, sites):
    """Function `f` with its `.reg` parameters and return values as `.param` ones (see `through_params`)."""
    body = _calls_through_params(f.body, functions, sites)
    if not any(isinstance(p, RegParam) for p in f.params + f.returns):
        return f if body is f.body else dataclasses.replace(f, body=body)

    def memory(p):  # the .param variable of a .reg parameter, and the register the body names it by
        sym = CallParam(f"{p.name}@reg", "param", _bits_type(p.type), None, max(p.type.bits // 8, 1))
        return sym, Reg(p.name, p.type, f.owner, f.name)
    params = tuple(Param(f"{p.name}@reg", _bits_type(p.type)) if isinstance(p, RegParam) else p for p in f.params)
    returns = tuple(Param(f"{p.name}@reg", _bits_type(p.type)) if isinstance(p, RegParam) else p
                    for p in f.returns)
    entry = []
    for p in f.params:
        if isinstance(p, RegParam):
            sym, reg = memory(p)
            entry.append(ld(sym.type, reg, Addr(sym), space="param").with_loc(f.loc))
    stores = [memory(p) for p in f.returns if isinstance(p, RegParam)]
    new = list(entry)
    for item in body:
        if isinstance(item, Instruction) and item.opcode == "ret":
            for sym, reg in stores:
                new.append(st(sym.type, Addr(sym), reg, space="param").with_guard(item.guard).with_loc(item.loc))
        new.append(item)
    return dataclasses.replace(f, params=params, returns=returns, body=tuple(new))


def _calls_through_params(body, functions: dict, sites) -> tuple:
    """`body` with each call that passes registers or immediates (or receives registers) wrapped in a `{ }`
    scope of `.param` variables that carry them (see `through_params`); `body` itself when it has none."""
    if not _register_calls(body):
        return body
    out = []
    for item in body:
        if not (isinstance(item, Instruction) and item.opcode == "call" and hasattr(item.info, "args")) \
                or all(isinstance(a, Symbol) for a in item.info.args + item.info.returns):
            out.append(item)
            continue
        info = item.info
        callee = functions.get(info.func) if isinstance(info.func, str) else info.prototype
        site = next(sites)
        out.append(ScopeOpen())
        after = []

        def carried(x, i, what):
            if isinstance(x, Symbol):
                return x
            p = callee.params[i] if what == "arg" else callee.returns[i]
            t = _bits_type(p.type if callee is not None else x.type)
            sym = CallParam(f"{what}{i}@{site}", "param", t, None, max(t.bits // 8, 1))
            out.append(LocalDecl(f".param .{t.name} {sym.name};", sym))
            if what == "arg":
                out.append(st(t, Addr(sym), x, space="param").with_guard(item.guard).with_loc(item.loc))
            else:
                after.append(ld(t, x, Addr(sym), space="param").with_guard(item.guard).with_loc(item.loc))
            return sym
        args = tuple(carried(x, i, "arg") for i, x in enumerate(info.args))
        returns = tuple(carried(x, i, "ret") for i, x in enumerate(info.returns))
        func = info.func if not isinstance(info.func, str) else FuncRef(info.func)
        out.append(call(func, args, returns, info.uni, targets=info.prototype).with_guard(item.guard)
                   .with_loc(item.loc))
        out += after
        out.append(ScopeClose())
    return tuple(out)
