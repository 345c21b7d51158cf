"""KernelBuilder: the one mutable object of ptxforge.

It owns a kernel's parameters, registers, shared memory, labels and body, and
records for every instruction the Python line that asked for it.  The
instruction methods themselves (``add``, ``ld``, ``cp_async``, ``mma`` ...)
come from the per-family mixins in :mod:`ptxforge.isa`.
"""

from __future__ import annotations

import functools
import itertools
import numbers
import re
import warnings
import weakref
from contextlib import contextmanager, nullcontext

from .errors import PtxforgeError, SourceLoc, TargetError, ValidationError, caller_loc, with_loc
from .isa import types as T
from .isa.arith import ArithOps
from .isa.bits import BitOps
from .isa.control import ControlOps
from .isa.convert import ConvertOps
from .isa.instruction import Instruction, as_operand, describe, int_imm, make
from .isa.async_store import AsyncStoreOps
from .isa.cache import CacheOps
from .isa.convert_narrow import NarrowConvertOps
from .isa.integer import IntegerOps
from .isa.sparse import SparseMmaOps
from .isa.texture import TextureOps
from .isa.video import VideoOps
from .isa.wmma import WmmaOps
from .isa.memory import MemoryOps
from .isa.opaque import opaque
from .isa.async_copy import AsyncCopyOps
from .isa.bulk_reduce import BulkReduceOps
from .isa.tensormap import TensormapOps
from .isa.cluster import ClusterOps, cluster_dims
from .isa.operands import (SPECIAL_REGISTERS, SPECIAL_REQUIREMENTS, Addr, Guard, Label, Reg, Symbol, SymbolOffset,
                           Vec, special)
from .isa.sync import SyncOps
from .isa.targets import Target
from .isa.tensor import TensorOps
from .isa.types import ScalarType, decl_type
from .kernel import (PARAM_BYTES_MAX, Comment, Kernel, LabelDef, Param, check_align, check_identifier,
                     param_buffer_bytes)
from .isa.warp import WarpOps
from .declarations import Function, Variable
from .functions import FunctionOps, check_calls_written, check_param_access, narrow_abi_problem

_PTXFORGE_INTERNAL = True

_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")  # PTX identifiers may start with $
_ids = itertools.count(1)
_BUILDERS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # id -> the live builder (error messages)

#: Auto-name prefixes by register type (readable, and unique per width class): a few types by name, the
#: rest by width; `_PREFIX_OF` holds the prefix of every declarable type, looked up once per new register
_NAMED_PREFIX = {"pred": "p", "f32": "f", "f64": "fd", "f16": "h", "f16x2": "hh"}
_WIDTH_PREFIX = {8: "rb", 16: "rh", 32: "r", 64: "rd", 128: "rq"}
_PREFIX_OF = {t: _NAMED_PREFIX.get(t.name) or _WIDTH_PREFIX[t.bits] for t in T.ALL if t.can_declare}


def _int_arg(x, what) -> int:
    """A Python or numpy integer as an int; anything else (floats included) is refused."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise ValidationError(f"{what} takes integers, got {x!r} ({type(x).__name__})")
    return int(x)


def _dims(v, what):
    if isinstance(v, numbers.Integral) or not isinstance(v, (tuple, list)):
        v = (v,)
    v = tuple(_int_arg(x, what) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise ValidationError(f"{what} takes 1 to 3 positive sizes, got {v}")
    v = v + (1,) * (3 - len(v))
    if v[0] * v[1] * v[2] > 1024:
        raise ValidationError(f"{what} {v} asks for {v[0] * v[1] * v[2]} threads; a CTA has at most 1024")
    return v


def _block_method(what: str):
    """A builder method written as a generator (as for `contextlib.contextmanager`) that returns a
    `_PendingBlock`: `with k.if_(c):` runs it; a bare `k.if_(c)` is refused instead of writing nothing."""
    def wrap(gen):
        make = contextmanager(gen)

        @functools.wraps(gen)
        def method(self, *args, **kwargs):
            return self._pending_block(make(self, *args, **kwargs), what)
        return method
    return wrap


class KernelBuilder(ArithOps, BitOps, ControlOps, ConvertOps, MemoryOps, AsyncCopyOps, BulkReduceOps,
                    SyncOps, TensorOps, WarpOps, IntegerOps, CacheOps, WmmaOps, VideoOps,
                    NarrowConvertOps, AsyncStoreOps, TextureOps, SparseMmaOps, ClusterOps, TensormapOps, FunctionOps):
    """Compose one kernel instruction by instruction: a PTX ``.visible .entry`` and its body.

    Each instruction method checks its operands against the ISA tables of :mod:`ptxforge.isa`
    and the target, appends one PTX instruction (a few for the structured helpers such as
    `if_` and `for_range`), records the Python line that asked for it and returns the
    destination register. Errors are raised as `ValidationError` or `TargetError` at that line.
    The instruction methods come from the per-family mixins of :mod:`ptxforge.isa` (`ArithOps`,
    `BitOps`, `ControlOps`, `ConvertOps`, `MemoryOps`, `SyncOps`, `TensorOps`, `WarpOps`, `ClusterOps`
    and the rest this class lists as bases); most take the keywords ``type=`` (the PTX type suffix, inferred from the
    operands when omitted), ``dst=`` (a register to write instead of a new one) and ``pred=``
    (a ``.pred`` register, or ``~reg`` for its negation, that guards the instruction as
    ``@p`` / ``@!p``).

    Args:
        name: the kernel's PTX name (``.entry name``), a PTX identifier.
        target: the ``.target`` (``"sm_80"``, ``"sm_90a"``, a `Target`); instructions the
            target lacks are rejected.
        maxntid: the most threads per CTA (``.maxntid``), an int or 1 to 3 sizes.
        reqntid: the exact CTA shape (``.reqntid``); not together with `maxntid`.
        minnctapersm: CTAs per SM to plan registers for (``.minnctapersm``).
        maxnreg: a register cap per thread, 16 to 255 (``.maxnreg``).
        explicitcluster: the kernel must be launched with clusters (``.explicitcluster``; sm_90).
        reqnctapercluster: the exact cluster shape (``.reqnctapercluster``; sm_90); not together
            with `maxclusterrank`.
        maxclusterrank: the most CTAs per cluster, 1 to 16 (``.maxclusterrank``; sm_90).

    >>> import ptxforge as pf
    >>> k = pf.KernelBuilder("scale", target="sm_80", maxntid=256)
    >>> x = k.param_ptr("x", pf.f32)              # ld.param.u64 + cvta.to.global.u64
    >>> i = k.global_index()                      # mad.lo.u32 from %ctaid.x, %ntid.x, %tid.x
    >>> p = k.add(x, k.mul(i, 4, mode="wide"))    # mul.wide.u32, add.u64
    >>> k.st(p, k.mul(k.ld(p, type=pf.f32), 2.0))
    >>> print(k.module().ptx.count("st.global.f32"))
    1

    Device functions (`FunctionBuilder`), calls (`call`), `.local` arrays, module variables and
    pragmas come from `ptxforge.functions.FunctionOps` (docs/functions.md).
    """

    #: "entry" for a kernel; a FunctionBuilder builds a "func".
    kind = "entry"

    def __init__(self, name: str, target="sm_80", *, maxntid=None, reqntid=None,
                 minnctapersm=None, maxnreg=None, reqnctapercluster=None, explicitcluster=False,
                 maxclusterrank=None):
        self.loc = caller_loc()
        try:
            check_identifier(name, "function" if self.kind == "func" else "kernel")
            self.name = name
            self.target = Target.parse(target)
            self.id = next(_ids)
            _BUILDERS[self.id] = self
            directives = []
            if maxntid is not None and reqntid is not None:
                raise ValidationError(
                    ".maxntid and .reqntid cannot both be given (ptxas rejects the pair): "
                    "use .reqntid for an exact CTA shape, .maxntid for an upper bound")
            if reqnctapercluster is not None and maxclusterrank is not None:
                raise ValidationError(
                    ".reqnctapercluster and .maxclusterrank cannot both be given (ptxas rejects the pair): "
                    "use .reqnctapercluster for an exact cluster shape, .maxclusterrank for an upper bound "
                    "on CTAs per cluster")
            if maxntid is not None:
                directives.append(("maxntid", _dims(maxntid, ".maxntid")))
            if reqntid is not None:
                directives.append(("reqntid", _dims(reqntid, ".reqntid")))
            if minnctapersm is not None:
                n = _int_arg(minnctapersm, ".minnctapersm")
                if n < 1:
                    raise ValidationError(f".minnctapersm must be a positive number of CTAs per SM, got {n}")
                if maxntid is None and reqntid is None:  # warned only of a value that is kept
                    warnings.warn(".minnctapersm is ignored by ptxas unless .maxntid or .reqntid is "
                                  "given too", stacklevel=2)
                directives.append(("minnctapersm", n))
            if maxnreg is not None:
                n = _int_arg(maxnreg, ".maxnreg")
                if not 16 <= n <= 255:
                    raise ValidationError(f".maxnreg must be in 16..255, got {maxnreg}")
                directives.append(("maxnreg", n))
            # clusters (sm_90): the exact shape, "must launch with a cluster", an upper bound
            if explicitcluster:
                directives.append(("explicitcluster", None))
            if reqnctapercluster is not None:
                directives.append(("reqnctapercluster", cluster_dims(reqnctapercluster)))
            if maxclusterrank is not None:
                n = _int_arg(maxclusterrank, ".maxclusterrank")
                if not 1 <= n <= 16:
                    raise ValidationError(f".maxclusterrank must be in 1..16, got {maxclusterrank}")
                directives.append(("maxclusterrank", n))
            if (explicitcluster or reqnctapercluster is not None or maxclusterrank is not None) \
                    and self.target.sm < 90:
                from .errors import TargetError
                raise TargetError(f"cluster directives need sm_90 or newer; the kernel targets {self.target.name}")
        except PtxforgeError as e:
            raise with_loc(e, self.loc)
        self.directives = directives
        self.params: list[Param] = []
        self._names: set[str] = set()  # params, shared symbols: one namespace
        self._decl_locs: dict = {}  # name -> the Python line that declared it
        self._regs: dict[str, Reg] = {}
        self._counters: dict[str, int] = {}
        self._shared: list[Symbol] = []
        self._extern: list[Symbol] = []
        self._body: list = []
        self._used: set = set()
        self._labels_placed: dict[str, SourceLoc | None] = {}
        self._labels_used: dict[str, SourceLoc | None] = {}
        self._label_counter = itertools.count()
        self._last_if = None
        self._loop_stack: list = []
        self._open: list = []  # (what, SourceLoc) of each with-block (if_, for_range, call_scope ...) not yet closed
        self._pending: list = []  # each _PendingBlock made and not yet entered with `with`
        self._notes: list = []
        self._kernel: Kernel | None = None
        # register name -> the state space of the address it holds, where the builder knows it
        # (cvta results, param_ptr, shared_base and what add/sub/mov derive from them)
        self._spaces: dict[str, str] = {}
        # device functions, calls and variables (ptxforge.functions)
        self._results: list[Param] = []
        self._locals: list = []
        self._module_vars: dict = {}
        self._callees: list = []
        self._call_count = 0
        self._printf_count = 0
        self._internal: dict = {}  # names the builder made itself -> (what for, the Python line)
        self._scope_names: list = []  # names declared in each open call_scope()

    # ------------------------------------------------------------------ registers
    def reg(self, type, name: str | None = None, *, exact: bool = False) -> Reg:
        """A new register of `type`; `name` makes it readable (`%name`, deduplicated).

        `exact=True` keeps `name` as given even where it has the form of an automatic name
        (`r7`, `p2`): a module read from PTX keeps its register names; a name already taken
        is an error then.
        """
        if name is None and type.__class__ is ScalarType:  # what instructions ask for: the short way
            base = _PREFIX_OF.get(type)  # None for a packed type (refused below)
            if base is not None:
                return self._numbered(type, base)
        try:
            t = T.lookup(type)
        except PtxforgeError as e:
            raise with_loc(e, caller_loc())
        if not t.can_declare:
            raise with_loc(ValidationError(
                f".{t.name} is a packed type that exists only inside registers and memory; "
                f"declare a .b32 register and read it as packed .{t.name} values"), caller_loc())
        if name is None:
            return self._numbered(t, _PREFIX_OF[t])
        if exact:
            if not _IDENT.match(name) or name in SPECIAL_REGISTERS:
                raise with_loc(ValidationError(f"register name {name!r} is not a PTX identifier"), caller_loc())
            if name in self._regs:
                raise with_loc(ValidationError(f"register %{name} is already declared in '{self.name}'"),
                               caller_loc())
            rname = name
        else:
            if not _IDENT.match(name):
                raise with_loc(ValidationError(f"register name {name!r} is not a PTX identifier"), caller_loc())
            rname = name
            n = 1
            while rname in self._regs or rname in SPECIAL_REGISTERS or re.fullmatch(
                    r"(p|f|fd|h|hh|rb|rh|r|rd|rq)\d+", rname):
                rname = f"{name}_{n}"
                n += 1
        r = Reg(rname, t, self.id, self.name)
        self._regs[rname] = r
        return r

    def _numbered(self, t: ScalarType, base: str) -> Reg:
        """A new register of declarable type `t` with the next free automatic name `base`N."""
        regs = self._regs
        n = self._counters.get(base, 0)
        rname = base + str(n)
        while rname in regs:
            n += 1
            rname = base + str(n)
        self._counters[base] = n + 1
        r = regs[rname] = Reg(rname, t, self.id, self.name)
        return r

    def regs(self, type, n: int, name: str | None = None) -> Vec:
        """n new registers as a Vec (a brace list); named `name0..name{n-1}` if `name` is given, each made unique
        as `reg()` makes names (`regs(t, 2, "r")` gives `%r0_1, %r1_1`: never an automatic name)."""
        n = _int_arg(n, "regs() count")
        if n < 0:
            raise ValidationError(f"regs() makes n >= 0 registers, got {n}")
        if name is None:
            return Vec(tuple(self.reg(type) for _ in range(n)))
        return Vec(tuple(self.reg(type, f"{name}{i}") for i in range(n)))

    def _own(self, r: Reg) -> Reg:
        if r.owner != self.id:
            raise ValidationError(
                f"register {r} belongs to kernel '{r.kernel}', not to '{self.name}': "
                "registers cannot cross kernels; allocate one with this kernel's reg()")
        return r

    def _own_symbol(self, s: Symbol) -> Symbol:
        """`s` when this kernel may name it: a shared array is declared inside the kernel that made it (a
        dynamic one only in the modules of the kernels that declared it), so another kernel's is unknown here."""
        if s.owner and s.owner != self.id and s.space == "shared":
            made = _BUILDERS.get(s.owner)
            raise ValidationError(
                f"shared array {s.name} belongs to {f'kernel {made.name!r}' if made is not None else 'another kernel'}"
                f", not to '{self.name}': ptxas knows "
                f"no '{s.name}' here; declare this kernel's own with shared() (or dynamic_shared() for the "
                "launch-sized array, which every kernel declares by the same name)")
        return s

    def _val(self, x, t: ScalarType | None = None):
        """Coerce a Python value or operand for use in this kernel."""
        if type(x) is Reg:  # the common cases, without the isinstance chain
            return x if x.owner == self.id else self._own(x)
        if type(x) is int:
            return int_imm(x, t)
        if isinstance(x, Reg):
            return self._own(x)
        if isinstance(x, Vec):
            me = self.id
            for r in x.regs:
                if isinstance(r, Reg) and r.owner != me:
                    self._own(r)
            return x
        if isinstance(x, (list, tuple)):
            return Vec(tuple(self._val(r, t) for r in x))
        if isinstance(x, Addr):
            if isinstance(x.base, Reg):
                self._own(x.base)
            elif isinstance(x.base, Symbol):
                self._own_symbol(x.base)
            return x
        if isinstance(x, Symbol):
            return self._own_symbol(x)
        if isinstance(x, SymbolOffset):
            self._own_symbol(x.symbol)
            return x
        if isinstance(x, Param):
            return self._own_param(x).symbol
        if isinstance(x, Variable):
            return self._use_variable(x)
        if isinstance(x, str):
            return special(x)  # "%tid.x" style
        return as_operand(x, t)

    def _dst(self, dst, t: ScalarType) -> Reg:
        if dst is None:
            return self.reg(decl_type(t))
        if not isinstance(dst, Reg):
            if isinstance(dst, (list, tuple, Vec)):
                raise ValidationError(f"destination must be a register, got a list of {len(dst)}: to split a "
                                      "register into parts, use unpack(a, dst=[...])")
            raise ValidationError(f"destination must be a register, got {dst!r}")
        return self._own(dst)

    def _guard(self, pred) -> Guard | None:
        if pred is None:
            return None
        if isinstance(pred, Reg):
            pred = Guard(pred)
        if not isinstance(pred, Guard) or not pred.reg.type.is_pred:
            got = (f"{'~' if pred.negate else ''}{pred.reg} (.{pred.reg.type.name})" if isinstance(pred, Guard)
                   else f"{pred!r} ({type(pred).__name__})")
            raise ValidationError(f"a guard must be a .pred register (from setp) or ~ of one, got {got}; for an "
                                  "integer register r, k.setp(\"ne\", r, 0) is its truth")
        self._own(pred.reg)
        return pred

    # ------------------------------------------------------------------ emission
    def emit(self, ins: Instruction, pred=None) -> Instruction:
        """Append a prebuilt instruction (checked against the target and this kernel's registers).

        `ins` should come from a family constructor (`ptxforge.isa.arith.arith`, `memory.ld`, ...),
        which validates its form; `emit` checks the target, the guard and that every register belongs
        to this kernel.  An `Instruction(...)` assembled by hand is not re-validated beyond that: for a
        line no table knows, use `raw()`, which marks it as unchecked.
        """
        try:
            if type(ins) is not Instruction and not isinstance(ins, Instruction):
                raise ValidationError(f"emit() takes an Instruction from a family constructor "
                                      f"(ptxforge.isa.arith.arith, ...), got {ins!r}; for PTX text use raw()")
            if self._kernel is not None:
                self._check_open("instructions")
            if self._pending:
                self._pending[0].refuse()
            guard = self._guard(pred) if pred is not None else None
            if guard is not None or ins.guard is not None:
                _check_guarded_param(ins, self._results)
            if ins.opcode in _PARAM_ACCESSES and getattr(ins.info, "space", None) == "param":
                check_param_access(ins)
            if guard is not None:
                if ins.guard is not None:
                    raise ValidationError(f"'{ins.mnemonic}' already has guard {ins.guard}; PTX allows one")
                ins = ins.with_guard(guard)
            req, target = ins.req, self.target
            if req.min_sm > target.sm or req.arch_specific:
                req.check(target, f"'{ins.mnemonic}'")
            me, used = self.id, self._used
            for r in ins.registers():
                if r.owner != me:
                    self._own(r)
                used.add(r.name)
        except PtxforgeError as e:
            raise with_loc(e, caller_loc())
        if self._spaces or self._module_vars or self._locals:
            try:
                _check_spaces(ins, self._spaces)
            except PtxforgeError as e:
                raise with_loc(e, caller_loc())
        if ins.loc is None:  # built by hand rather than by a family constructor
            ins = ins.with_loc(caller_loc())
        self._body.append(ins)
        if self._spaces or ins.opcode == "cvta" or (ins.opcode == "mov" and _names_variable(ins)):
            _track_spaces(ins, self._spaces)
        return ins

    def _check_open(self, what: str = "declarations") -> None:
        """A ValidationError once `finish()` has frozen the kernel: whatever is added after it would be lost."""
        if self._kernel is not None:
            raise ValidationError(f"{'function' if self.kind == 'func' else 'kernel'} '{self.name}' is finished; no "
                                  f"more {what} can be added (finish() and module() freeze it: add everything "
                                  "before either)")

    def raw(self, text: str, pred=None) -> Instruction:
        """Append one PTX statement verbatim: the documented escape hatch for forms the tables lack.

        `text` is a single statement (`"mov.u32 %r0, %envreg3"`; a trailing `;` is optional).  It is
        not validated: ptxas is its only check.  The listing marks the line `[opaque: raw PTX ...]`,
        and the interpreter refuses a kernel that reaches it.  Registers of this kernel that the text
        names (`%r3`) stay declared; `pred` guards it like any instruction.
        """
        text = str(text).strip()
        if text.endswith(";"):
            text = text[:-1].rstrip()
        if not text or "\n" in text or "\r" in text or ";" in text or "//" in text or "/*" in text:
            raise ValidationError(f"raw() takes one PTX statement on one line, without ';' inside or "
                                  f"comments, got {text!r}")
        if text.startswith("@"):
            raise ValidationError("raw(): give the guard as pred=, not in the text")
        _printable(text, "raw() text")
        if text.split()[0].startswith("."):
            raise ValidationError(f"raw() appends an instruction; a directive ({text.split()[0]}) is not "
                                  "an instruction")
        names = set(re.findall(r"%([A-Za-z_$][A-Za-z0-9_$]*)", text))
        mine = tuple(self._regs[n] for n in sorted(names) if n in self._regs)
        ins = opaque(text, (), "raw PTX from k.raw(), unchecked", loc=caller_loc())
        ins = self.emit(ins, pred)
        self._used.update(r.name for r in mine)
        return ins

    def comment(self, text: str) -> None:
        """A `// comment` line in the body (a text of several lines gives one `//` line each)."""
        self._check_open("comments")
        lines = str(text).splitlines() or [""]
        for line in lines:
            _printable(line, "comment")
        for line in lines:
            self._body.append(Comment(line))

    def section(self, name: str):
        """Start a named section of the listing here (a `// ---- name` heading; the name must be one line):
        the instructions after it, up to the next section, are grouped under it.  The heading is placed when
        called, so `k.section("load")` works as a statement and `with k.section("load"):` as a block."""
        self._check_open("sections")
        name = str(name)
        _one_line(name, "section name")
        self._body.append(Comment(name, section=True))
        return nullcontext()

    def note(self, key: str, value) -> None:
        """A fact shown in the kernel's listing header (e.g. the compute path a schedule chose)."""
        self._check_open("notes")
        key, value = str(key), str(value)
        _one_line(key, "note key")
        _one_line(value, "note value")
        self._notes.append((key, value))

    # ------------------------------------------------------------------ parameters
    def _claim(self, name: str, what: str, *, internal: bool = False, local: bool = False):
        self._check_open()
        check_identifier(name, what)
        if name in self._names:
            made = self._internal.get(name)
            if made is not None:
                raise ValidationError(f"'{name}' is the name the builder gave to {made[0]}"
                                      + (f" at {made[1]}" if made[1] is not None else "")
                                      + f" in kernel '{self.name}'; give the {what} another name")
            raise ValidationError(f"'{name}' is already declared in kernel '{self.name}'")
        if name in self._module_vars and (local or internal):  # (parameters and shared arrays: Module checks them)
            raise ValidationError(f"'{self.name}' uses the module variable {name!r}; a {what} of the same name would "
                                  "hide it in the kernel (ptxas then reads the wrong space): rename one")
        callee = next((c for c in self._callees if getattr(c, "name", None) == name), None)
        if callee is not None:
            raise ValidationError(f"'{self.name}' calls the device function {name!r}; a {what} of the same name would "
                                  "hide it (ptxas: 'Label expected' at the call): rename one")
        self._names.add(name)
        self._decl_locs[name] = caller_loc()
        if internal:
            self._internal[name] = (what, self._decl_locs[name])

    def _fresh_number(self, counter: str, names) -> int:
        """The next number n of `counter` (an attribute) for which none of `names(n)` is declared yet: the
        names the builder makes for call scopes and printf buffers never meet a name the user declared."""
        n = getattr(self, counter)
        while any(x in self._names for x in names(n)):
            n += 1
        setattr(self, counter, n + 1)
        return n

    def param(self, name: str, type, *, pointee=None, space=None, nbytes=None, align=None) -> Param:
        """Declare a `.param`; returns the Param (its `.symbol` is the address for ld.param).

        `nbytes` declares a byte block (`.param .align A .b8 name[nbytes]`, A = `align` or 1); `align` on a
        kernel's scalar declares `.param .align A .type name` (A at least the type's size); a pointer's
        (`pointee`/`space` given) is its pointee's alignment and does not move it.

        Half types PTX cannot declare as parameters (`.bf16`, `.f16x2`, `.bf16x2`) are declared as
        their bit container (`.b16`/`.b32`); the Param keeps its type, so launches pack the value."""
        self._claim(name, "parameter")
        t = T.lookup(type) if nbytes is None else T.b8
        if nbytes is None and (not t.can_declare or t.is_pred):
            raise ValidationError(f"parameter type .{t.name} is not allowed; use a scalar such as .u32")
        if self.kind == "func":
            narrow_abi_problem(t, "parameter")
        if nbytes is not None:
            nbytes = _int_arg(nbytes, f"parameter block {name}'s size in bytes")
            if nbytes < 1:
                raise ValidationError(f"parameter block {name} needs a positive int size, got {nbytes!r}")
        if align is not None:
            align = check_align(align)
            if nbytes is None and pointee is None and space is None:  # a scalar: `.param .align A .type x`
                # (launches pack it at that alignment; a pointer's align is its pointee's, `.ptr .align A`)
                if align < t.bits // 8:
                    raise ValidationError(f"parameter {name} is .{t.name}, aligned to at least {t.bits // 8} bytes; "
                                          f"align={align} would not be honoured (give {t.bits // 8} or more)")
                if self.kind == "func":
                    raise ValidationError(f"a device function's scalar parameter {name} takes no align=: each call "
                                          "would have to declare its argument with the same .align (ptxas: "
                                          "'Alignment of argument does not match formal parameter')")
        p = Param(name, t, T.lookup(pointee) if pointee is not None else None, space, nbytes, align)
        total = param_buffer_bytes([*self.params, p])
        if total > PARAM_BYTES_MAX:
            raise ValidationError(f"kernel '{self.name}' would take {total} bytes of parameters; a kernel may "
                                  f"take at most {PARAM_BYTES_MAX} (PTX ISA 8.1 and newer; 4352 before)")
        self.params.append(p)
        return p

    def param_tensormap(self, name: str) -> Reg:
        """Declare a by-value tensor-map parameter and return its generic address.

        Emits `.param .align 64 .b8 name[128]` (a `__grid_constant__` CUtensorMap) and
        `mov.b64` + `cvta.param.u64` (PTX 7.7) so the register is usable as the tensor-map operand
        of `cp.async.bulk.tensor` (tensor_load/tensor_store) and of `prefetch.tensormap`.
        Launch with a `ptxforge.runtime.TensorMap` (its 128 encoded bytes are packed) or raw bytes.
        """
        p = self.param(name, T.b8, nbytes=128, align=64)
        r = self.mov(p.symbol, type=T.u64, dst=self.reg(T.u64, name))
        return self.cvta(r, frm="param", dst=r)

    def load_param(self, p: Param | str, dst=None, *, type=None, offset=None) -> Reg:
        """`ld.param` a scalar parameter into a register.

        Of a byte-block parameter (`nbytes=`, a structure passed by value), one field: `type` and the
        byte `offset` inside the block (`ld.param.f32 %f, [x+4]`), checked to lie inside it and be
        aligned to the type's size."""
        if isinstance(p, str):
            p = next((q for q in self.params if q.name == p), None) or self._missing_param(p)
        self._own_param(p)
        if p.nbytes is not None:
            if type is None or offset is None:
                raise ValidationError(f"parameter {p.name} is a {p.nbytes}-byte block: load one field of it with "
                                      "type= and offset= (load_param(p, type=pf.f32, offset=4)), or take its "
                                      "address with param_address()")
            return self._param_field(p, offset, type, dst)
        if type is not None or offset is not None:
            raise ValidationError(f"parameter {p.name} is a scalar .{p.type.name}; type= and offset= read a field "
                                  "of a byte-block parameter")
        d = self._dst(dst, p.type)
        return self.ld(Addr(p.symbol), type=p.type, space="param", dst=d)

    def _missing_param(self, name):
        raise ValidationError(f"kernel '{self.name}' has no parameter '{name}'; it has "
                              + (", ".join(q.name for q in self.params) or "none"))

    def _own_param(self, p) -> Param:
        """`p` when it is one of this kernel's parameters (or this function's return value)."""
        if not isinstance(p, Param):
            raise ValidationError(f"expected a parameter (from param()) or its name, got {p!r}")
        if not any(q is p for q in self.params) and not any(q is p for q in self._results) \
                and p not in self.params and p not in self._results:
            raise ValidationError(f"{p.name} is not a parameter of '{self.name}' (another kernel's parameter is unknown "
                                  "here: ptxas refuses the name); declare it with this kernel's param()")
        return p

    def param_value(self, name: str, type) -> Reg:
        """Declare a scalar parameter and load it: `.param .u32 n` + `ld.param.u32`.  The register has
        the parameter's type (a `.bf16` parameter gives a bf16 register, declared `.b16`, so that
        `cvt` and arithmetic read it as bf16)."""
        p = self.param(name, type)
        return self.load_param(p, dst=self.reg(p.type, name))

    def param_ptr(self, name: str, pointee=T.b8, *, space: str = "global") -> Reg:
        """Declare a pointer parameter, load it and convert it to a `space` address (cvta.to)."""
        p = self.param(name, T.u64, pointee=pointee, space=space)
        r = self.load_param(p, dst=self.reg(T.u64, name))
        if space == "generic":
            return r
        return self.cvta(r, to=space, dst=r)

    def param_address(self, p: Param) -> Reg:
        """Generic address of a by-value parameter block (mov + cvta.param; PTX 7.7)."""
        r = self.mov(self._own_param(p).symbol, type=T.u64)
        return self.cvta(r, frm="param", dst=r)

    # ------------------------------------------------------------------ special registers
    def sreg(self, name: str, dst=None) -> Reg:
        """Read a special register: `mov.u32 %tid_x, %tid.x`."""
        s = special(name)
        req = SPECIAL_REQUIREMENTS.get(s.name)
        if req is not None and self.target.sm < req.min_sm:
            raise TargetError(f"%{s.name} needs sm_{req.min_sm} or newer; the kernel targets {self.target}")
        d = dst if dst is not None else self.reg(s.type, s.name.replace(".", "_"))
        return self.mov(s, dst=d)

    def tid(self, dim="x") -> Reg:
        """The thread index in the CTA along `dim` ("x", "y", "z"): `mov.u32 %tid_x, %tid.x`; returns the .u32
        register.
        """
        return self.sreg(f"tid.{dim}")

    def ntid(self, dim="x") -> Reg:
        """The CTA size along `dim`: `mov.u32 %ntid_x, %ntid.x`; returns the .u32 register."""
        return self.sreg(f"ntid.{dim}")

    def ctaid(self, dim="x") -> Reg:
        """The CTA index in the grid along `dim`: `mov.u32 %ctaid_x, %ctaid.x`; returns the .u32 register."""
        return self.sreg(f"ctaid.{dim}")

    def nctaid(self, dim="x") -> Reg:
        """The grid size in CTAs along `dim`: `mov.u32 %nctaid_x, %nctaid.x`; returns the .u32 register."""
        return self.sreg(f"nctaid.{dim}")

    def laneid(self) -> Reg:
        """The lane of this thread in its warp, 0..31: `mov.u32 %laneid, %laneid`; returns the .u32 register.
        """
        return self.sreg("laneid")

    def global_index(self, dim="x") -> Reg:
        """ctaid*ntid + tid along one dimension (u32)."""
        i = self.reg(T.u32, f"gid_{dim}")
        return self.mad(self.ctaid(dim), self.ntid(dim), self.tid(dim), mode="lo", dst=i)

    # ------------------------------------------------------------------ shared memory
    def shared(self, name: str, nbytes: int, align: int = 16) -> Symbol:
        """Static shared memory: `.shared .align A .b8 name[nbytes];` (at most 48 KB per kernel)."""
        self._claim(name, "shared variable")
        align = check_align(align)
        nbytes = _int_arg(nbytes, f"shared array {name}'s size in bytes")
        if nbytes <= 0:
            raise ValidationError(f"shared array {name} needs a positive size, got {nbytes}")
        s = Symbol(name, "shared", T.b8, nbytes, align, self.id)
        total = self._static_after(s)
        limit = self.target.limits.static_shared
        if total > limit:
            raise ValidationError(
                f"static shared memory would be {total} bytes; a kernel may declare at most {limit} "
                f"({limit // 1024} KB) statically: use dynamic_shared() and a launch-time size for more")
        self._shared.append(s)
        return s

    def _static_after(self, s: Symbol) -> int:
        total = 0
        for x in [*self._shared, s]:
            total = -(-total // x.align) * x.align + x.nbytes
        return total

    def dynamic_shared(self, name: str = "dyn_smem", align: int = 16) -> Symbol:
        """Dynamic shared memory (`.extern .shared`, module scope); its size is given at launch."""
        align = check_align(align)
        self._claim(name, "shared variable")
        s = Symbol(name, "shared", T.b8, None, align, self.id)
        self._extern.append(s)
        return s

    def shared_base(self, sym: Symbol, offset: int = 0, dst=None) -> Reg:
        """32-bit shared-window address of a shared variable (`mov.u32 %r, sym`), plus an offset."""
        if not isinstance(sym, Symbol) or sym.space != "shared":
            raise ValidationError(f"shared_base() takes a shared array (from shared() or dynamic_shared()), got "
                                  f"{describe(sym) if isinstance(sym, Reg) else repr(sym)}")
        offset = _int_arg(offset, "shared_base offset")
        r = self.mov(sym, type=T.u32, dst=dst if dst is not None else self.reg(T.u32, f"{sym.name}_base"))
        if offset:
            self.add(r, offset, dst=r)
        return r

    # ------------------------------------------------------------------ labels & structured control flow
    def label(self, name: str = "L") -> Label:
        """A new label (place it with place()); the name is made unique."""
        if not isinstance(name, str) or not _IDENT.match(name):
            raise with_loc(ValidationError(f"label name {name!r} is not a PTX identifier"), caller_loc())
        return Label(f"{name}_{next(self._label_counter)}", self.id)

    def place(self, label: Label) -> Label:
        """Put a label at the current position."""
        self._check_open("labels")
        if not isinstance(label, Label):
            raise ValidationError(f"place() takes a Label from label(), got {label!r}")
        if label.owner != self.id:
            raise ValidationError(f"label {label} belongs to another kernel")
        if label.name in self._labels_placed:
            raise ValidationError(f"label {label} is already placed")
        loc = caller_loc()
        self._labels_placed[label.name] = loc
        self._body.append(LabelDef(label, loc))
        return label

    def _use_label(self, label: Label):
        if not isinstance(label, Label):
            raise ValidationError(f"a branch target must be a Label from label(), got {label!r}")
        if label.owner != self.id:
            raise ValidationError(f"label {label} belongs to another kernel")
        self._labels_used.setdefault(label.name, caller_loc())

    def _pending_block(self, cm, what: str):
        """`cm` (a with-block of the body) as the user gets it: refused at the next instruction and at finish()
        until it is entered, so that a block called as a plain statement is not silently dropped."""
        return _PendingBlock(self, cm, what, caller_loc())

    @contextmanager
    def _block(self, what: str):
        """Mark a with-block of the body as open while its body runs: finish() inside it is refused."""
        self._open.append((what, caller_loc()))
        try:
            yield
        finally:
            self._open.pop()

    @_block_method("if_()")
    def if_(self, cond):
        """`with k.if_(cond):` runs the block only where `cond` (a .pred register or ~register) holds: a
        branch around it (`@!p bra`) and a label after it."""
        g = self._guard(cond)
        end = self.label("endif")
        self.bra(end, pred=~g)
        with self._block("if_()"):
            yield
        self.place(end)
        self._last_if = (len(self._body) - 1, end)

    @_block_method("else_()")
    def else_(self):
        """`with k.else_():` directly after a `with k.if_(...):` block runs where that block did not."""
        if self._last_if is None or self._last_if[0] != len(self._body) - 1:
            raise with_loc(ValidationError("else_() must directly follow an if_() block"), caller_loc())
        pos, _ = self._last_if
        self._last_if = None
        done = self.label("endelse")
        from .isa.control import bra
        skip = bra(done, uni=True).with_loc(caller_loc())  # the constructor: .uni in mods too, as bra() has it
        self._use_label(done)
        self._body.insert(pos, skip)
        with self._block("else_()"):
            yield
        self.place(done)

    @_block_method("for_range()")
    def for_range(self, start, stop, step: int = 1, *, type=T.u32, name: str = "i", uniform: bool = True):
        """A counted loop: `for i in range(start, stop, step)` in PTX.  Yields the counter register.

        `start`/`stop` may be registers or ints; `step` is a non-zero int of either sign.  The loop
        runs exactly the values Python's `range` gives: the counter of `type` (an integer type,
        default .u32) is compared with `stop` as that type is signed or unsigned, so int bounds must
        fit it (a negative bound needs a signed counter, `type=pf.s32`) and a register bound must
        have its signedness (an .s32 register with an .s32 counter; .b registers go with either).
        Where the counter could step past the top (or bottom) of its type, which a step of more than
        one toward a register bound allows, the loop leaves before the step instead of wrapping.
        The branches are `bra.uni` when `uniform` (the trip count is the same for the whole warp).
        """
        loc = caller_loc()
        try:
            t = T.lookup(type)
            if t.kind not in ("u", "s") or t.is_pred:
                raise ValidationError(f"for_range counter type .{t.name} is not an integer type; use .u32, .s32, "
                                      ".u64 or .s64")
            if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step == 0:
                raise ValidationError(f"for_range step must be a non-zero int, got {step!r}")
            step = int(step)
            lo, hi = T.int_range(t)
            start, stop = (self._range_bound(x, what, t, lo, hi) for x, what in ((start, "start"), (stop, "stop")))
            if abs(step) > hi - lo:
                raise ValidationError(f"for_range step {step} is larger than the .{t.name} counter can step")
        except PtxforgeError as e:
            raise with_loc(e, loc)
        if isinstance(stop, int):  # the last value is at most stop-1 (at least stop+1): can one more step wrap?
            wraps = stop - 1 + step > hi if step > 0 else stop + 1 + step < lo
        else:  # a register bound: only a step of one is sure to stay inside the type
            wraps = abs(step) != 1
        i = self.reg(t, name)
        self.mov(start, type=t, dst=i)
        top, end = self.label(f"{name}_loop"), self.label(f"{name}_end")
        self.place(top)
        done = self.setp("ge" if step > 0 else "le", i, stop, type=t)
        self.bra(end, pred=done, uni=uniform)
        self._loop_stack.append(end)
        try:
            with self._block("for_range()"):
                yield i
        finally:
            self._loop_stack.pop()
        if wraps:  # i is strictly before stop: the distance left, as an unsigned number, is exact
            ut = T.lookup(f"u{t.bits}")
            left = self.sub(stop, i, type=t) if step > 0 else self.sub(i, stop, type=t)
            last = self.setp("le", left, abs(step), type=ut)
            self.bra(end, pred=last, uni=uniform)
        self.add(i, step, dst=i)
        self.bra(top, uni=uniform)
        self.place(end)

    def _range_bound(self, x, what: str, t, lo: int, hi: int):
        """A for_range bound checked against the counter type `t` (range lo..hi)."""
        if isinstance(x, numbers.Integral) and not isinstance(x, bool):
            x = int(x)
            if not lo <= x <= hi:
                hint = ("; a negative bound needs a signed counter (type=pf.s32)" if x < 0 <= lo else
                        f"; use a wider counter (type=pf.{t.kind}64)" if t.bits < 64 else "")
                raise ValidationError(f"for_range {what} {x} does not fit the .{t.name} counter ({lo}..{hi}){hint}")
            return x
        if not isinstance(x, Reg):
            raise ValidationError(f"for_range {what} is an int or an integer register, got {x!r}")
        self._own(x)
        if x.type.is_float or x.type.is_pred or x.type.bits != t.bits:
            raise ValidationError(f"for_range {what} {x} is .{x.type.name}; the counter is .{t.name} (give a "
                                  f"{t.bits}-bit integer register, or type= of the register's type)")
        if {x.type.kind, t.kind} == {"s", "u"}:
            raise ValidationError(
                f"for_range {what} {x} is .{x.type.name} and the counter .{t.name}: the loop would compare them "
                f"as {'signed' if t.kind == 's' else 'unsigned'}; pass type=pf.{x.type.kind}{t.bits} (or convert "
                "the bound)")
        return x

    @_block_method("loop()")
    def loop(self, name: str = "loop"):
        """`with k.loop() as end:` an endless loop; leave it with `break_(pred)` (`end` is its end label)."""
        top, end = self.label(name), self.label(f"{name}_end")
        self.place(top)
        self._loop_stack.append(end)
        try:
            with self._block("loop()"):
                yield end
        finally:
            self._loop_stack.pop()
        self.bra(top)
        self.place(end)

    def break_(self, pred=None) -> None:
        """Leave the innermost for_range/loop (where `pred` holds, if given)."""
        if not self._loop_stack:
            raise ValidationError("break_() outside a loop")
        self.bra(self._loop_stack[-1], pred=pred)

    # ------------------------------------------------------------------ finishing
    def finish(self) -> Kernel:
        """Close the kernel and return the frozen `Kernel` (a `Function` when it has calls or variables): check
        that every branch target is placed and that no with-block is open or was called without `with`, add
        the final `ret` (none to a `.noreturn` function).  Later calls return the same value; nothing can be
        added after it."""
        if self._kernel is not None:
            return self._kernel
        if self._pending:
            self._pending[0].refuse()
        if self._open:
            what, loc = self._open[-1]
            raise ValidationError(f"'{self.name}' cannot be finished inside the {what} block opened"
                                  + (f" at {loc}" if loc is not None else "") + ": its closing instructions "
                                  "would be missing; call finish() / module() after the with block")
        for name, loc in self._labels_used.items():
            if name not in self._labels_placed:
                raise ValidationError(f"branch to label $L_{name}, which is never placed (use place())", loc)
        if ("noreturn", None) in self.directives:
            _check_never_returns(self)
        else:
            last = next((x for x in reversed(self._body) if isinstance(x, (Instruction, LabelDef))), None)
            if isinstance(last, LabelDef):
                # a label no branch names (nvcc -G ends each function with `ret; $L__func_end0:`) is reached only
                # by falling through, so what precedes it decides whether the end can be reached
                named = _branch_labels(self._body) | set(self._labels_used)
                last = next((x for x in reversed(self._body) if isinstance(x, Instruction) or (
                    isinstance(x, LabelDef) and x.label.name in named)), None)
            if not (isinstance(last, Instruction) and last.opcode in ("ret", "exit") and last.guard is None):
                self._body.append(make("ret", ("ret",)).with_loc(caller_loc()))
        used = self._used  # every register an emitted instruction names (collected by emit)
        regs = tuple(r for n, r in self._regs.items() if n in used)
        args = (self.name, self.target, tuple(self.params), tuple(self.directives), regs,
                tuple(self._shared), tuple(self._extern), tuple(self._body), self.id, self.loc, tuple(self._notes))
        decl_locs = tuple((n, loc) for n, loc in self._decl_locs.items() if loc is not None)
        if self.kind == "entry" and not (self._locals or self._module_vars or self._callees):
            self._kernel = Kernel(*args, decl_locs=decl_locs)
        else:  # a device function, or a kernel with variables or calls (ptxforge.functions)
            self._kernel = Function(*args, decl_locs=decl_locs, kind=self.kind, returns=tuple(self._results),
                                    linkage=self._linkage(), variables=tuple(self._locals),
                                    callees=tuple(self._callees), module_variables=tuple(self._module_vars.values()))
        return self._kernel

    def _linkage(self) -> str:
        return ".visible"

    def module(self, **kwargs):
        """A Module of this kernel (and the device functions it calls); `kwargs` go to `Module`."""
        from .module import Module
        return Module([self.finish()], **kwargs)


class _PendingBlock:
    """A with-block of a kernel's body (if_, else_, for_range, loop, call_scope) from the call that made it to
    the `with` that enters it; the builder refuses to go on while one was made and never entered."""

    __slots__ = ("builder", "cm", "what", "loc")

    def __init__(self, builder, cm, what: str, loc):
        self.builder, self.cm, self.what, self.loc = builder, cm, what, loc
        builder._pending.append(self)

    def __enter__(self):
        pending = self.builder._pending
        for i, x in enumerate(pending):
            if x is self:
                del pending[i]
                break
        return self.cm.__enter__()

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)

    def refuse(self):
        """Raise the ValidationError for a block never entered (at every later instruction and at finish())."""
        raise ValidationError(
            f"{self.what}" + (f" at {self.loc}" if self.loc is not None else "") + " was called without `with`: "
            f"as a plain call it writes nothing, and what follows would land outside the block; write "
            f"`with k.{self.what[:-2]}(...):` and indent the block's body under it")


class FunctionBuilder(KernelBuilder):
    """Compose one device function: a PTX `.func` with typed parameters and return values.

    Everything a `KernelBuilder` does, plus return values: declare parameters with `param()` /
    `param_value()` (`ld.param` reads them), return values with `result(name, type)`, write them
    with `set_result(value)` (`st.param`), and leave with `ret()` (`finish` adds a final one).
    A kernel calls it with `k.call(f, args=[...])`; the Module that holds the kernel renders the
    function before it.

    Args:
        name: the function's PTX name, a PTX identifier.
        target: the ``.target``, as for a kernel (caller and callee must share it).
        visible: `.visible .func` (external linkage) instead of a file-local `.func`.
        weak: `.weak .func`: external linkage that another module's definition of the same name may
            replace when they are linked (what nvcc writes for inline and template functions under -G).
        noreturn: the `.noreturn` directive (the function ends in `trap`/`exit`, never returns).

    >>> import ptxforge as pf
    >>> f = pf.FunctionBuilder("twice", target="sm_80")
    >>> x = f.param_value("x", pf.f32)            # .param .f32 x; ld.param.f32
    >>> y = f.result("y", pf.f32)                 # .func (.param .f32 y) twice(...)
    >>> f.set_result(f.add(x, x))                 # add.f32; st.param.f32 [y]
    >>> k = pf.KernelBuilder("k", target="sm_80")
    >>> out = k.param_ptr("out", pf.f32)
    >>> k.st(out, k.call(f, args=[1.5]))          # { .param ...; call (..), twice, (..); ld.param ... }
    >>> print([x.name for x in k.module().kernels])
    ['twice', 'k']
    """

    kind = "func"

    def __init__(self, name: str, target="sm_80", *, visible: bool = False, weak: bool = False,
                 noreturn: bool = False):
        if visible and weak:
            raise with_loc(ValidationError(f"function '{name}': visible=True and weak=True are two linkages; a "
                                           "function has one (.visible: this definition is the one; .weak: another "
                                           "module's may replace it)"), caller_loc())
        super().__init__(name, target)
        self._calls_written: list = []  # (signature, Python line) of each call written before finish()
        self.visible = bool(visible)
        self.weak = bool(weak)
        if noreturn:  # .noreturn: the function never returns (it traps or exits)
            self.directives.append(("noreturn", None))

    def finish(self) -> Function:
        """Close the function (as `KernelBuilder.finish`); a call written while its parameters or return
        value were still being declared, with a signature the finished function no longer has, is a
        ValidationError at that call's line."""
        if self._kernel is None:
            check_calls_written(self)
        return super().finish()

    def _linkage(self) -> str:
        return ".visible" if self.visible else ".weak" if self.weak else ""

    def ret(self, *, pred=None):
        """`ret`: return to the caller (where `pred` holds, if given); `finish` adds a final one.  A `.noreturn`
        function has none: it ends in `trap()` or `exit()`."""
        if ("noreturn", None) in self.directives:
            raise ValidationError(f"function '{self.name}' is .noreturn: it never returns to its caller (ptxas takes "
                                  "a ret, which is undefined at run time); end the path with trap() or exit()")
        super().ret(pred=pred)


def _branch_labels(body) -> set:
    """The names of the labels that an instruction of `body` (a branch, a `brx.idx` list) or a `.branchtargets`
    declaration names."""
    out = set()
    for x in body:
        items = x.operands if isinstance(x, Instruction) else (x.targets,) if type(x).__name__ == "BranchTargetsDecl" \
            else ()
        for op in items:
            if isinstance(op, Label):
                out.add(op.name)
            for lab in getattr(op, "labels", ()) or ():
                if isinstance(lab, Label):
                    out.add(lab.name)
    return out


#: instructions after which a path does not go on to the next line (when unguarded)
_PATH_ENDS = frozenset(("ret", "exit", "trap", "bra", "brx.idx"))


def _check_never_returns(f) -> None:
    """A `.noreturn` function must not reach its end (finish() adds no `ret` to it): its last instruction,
    past labels no branch names, is an unguarded trap, exit or branch."""
    for x in reversed(f._body):
        if isinstance(x, LabelDef) and x.label.name not in f._labels_used:
            continue  # unreachable: no branch names it, and the line above it does not fall through to it
        if isinstance(x, (Instruction, LabelDef)):
            if isinstance(x, Instruction) and x.opcode in _PATH_ENDS and x.guard is None:
                return
            break
    raise ValidationError(f"function '{f.name}' is .noreturn but can reach its end (its last instruction is not an "
                          "unguarded trap, exit or branch); end it with trap() or exit()")


_DERIVES = frozenset({"add", "sub", "mov"})  # an address plus/minus offsets stays in its space
_VARIABLE_SPACES = frozenset({"shared", "global", "const", "local"})


def _track_spaces(ins: Instruction, spaces: dict) -> None:
    """Record the state space of the address a register holds after `ins`, or forget it."""
    if not ins.n_dst:
        return
    d = ins.operands[0]
    if type(d) is not Reg:
        return
    space = None
    op = ins.opcode
    if op == "cvta":
        space = ins.mods[-1] if "to" in ins.mods else "generic"
    elif op in _DERIVES and ins.guard is None:
        srcs = ins.operands[1:]
        if op == "mov" and len(srcs) == 1 and type(srcs[0]) is Symbol and srcs[0].space in _VARIABLE_SPACES:
            space = srcs[0].space  # the variable's address in its own space
        else:
            known = {spaces[r.name] for r in srcs if type(r) is Reg and r.name in spaces}
            # one addressed source, the rest offsets (sub: only the minuend may be the address)
            if len(known) == 1 and not (op == "sub" and type(srcs[0]) is Reg and srcs[0].name not in spaces):
                n_addr = sum(1 for r in srcs if type(r) is Reg and r.name in spaces)
                if n_addr == 1:
                    space = known.pop()
    if space is None:
        spaces.pop(d.name, None)
    else:
        spaces[d.name] = space


#: the opcodes whose address operands name a state space (besides every mbarrier.*), by where it is named
_MEMORY_OPS = ("ld", "st", "atom", "red")  # in the instruction's MemInfo
_MATRIX_OPS = ("ldmatrix", "stmatrix")  # as its first modifier
_ADDRESSING = frozenset(("cp.async",) + _MEMORY_OPS + _MATRIX_OPS)


def _space_of(ins: Instruction, i: int) -> str | None:
    """The state space operand `i` of `ins` addresses, where one is named."""
    op = ins.opcode
    if op == "cp.async":
        return "shared" if i == 0 else "global"
    if op in _MEMORY_OPS:
        space = ins.info.space
    elif op in _MATRIX_OPS:
        space = ins.mods[0]
    elif op.startswith("mbarrier."):
        space = "shared"
    else:
        return None
    return "generic" if space in (None, "", "generic") else space.split("::")[0]


#: (space an instruction addresses, space the register's address is in) pairs that are mistakes.
_SPACE_CLASH = {("shared", "global"), ("shared", "generic"), ("global", "shared"), ("generic", "shared"),
                ("local", "global"), ("local", "shared"), ("global", "local"), ("shared", "local"),
                # a .const or .local window address is no generic address (cvta.const / cvta.local first)
                ("generic", "const"), ("generic", "local"), ("global", "const"), ("const", "global"),
                ("shared", "const"), ("const", "shared"), ("local", "const"), ("const", "local")}


#: the opcodes that read and write `.param` variables (a byte array's bounds are checked at emit)
_PARAM_ACCESSES = ("ld", "st")


def _check_guarded_param(ins: Instruction, results) -> None:
    """ptxas refuses a guard on `st.param`/`ld.param` of a call's `.param` variable (a device
    function's own return value may be stored under a guard)."""
    if ins.opcode not in ("ld", "st") or getattr(ins.info, "space", None) != "param":
        return
    addr = ins.operands[0] if ins.opcode == "st" else ins.operands[1]
    base = getattr(addr, "base", None)
    if type(base).__name__ == "CallParam" and not any(p.name == base.name for p in results):
        raise ValidationError(f"'{ins.mnemonic}' of the call parameter {base.name} cannot be guarded (ptxas "
                              "refuses it): guard the call instead")


def _names_variable(ins: Instruction) -> bool:
    """`mov %rd, var` of a module .global/.const variable or a .local array (its address)."""
    src = ins.operands[-1]
    return type(src) is Symbol and src.space in ("global", "const", "local")


def _check_spaces(ins: Instruction, spaces: dict) -> None:
    opcode = ins.opcode
    if opcode not in _ADDRESSING and not opcode.startswith("mbarrier."):
        return  # no operand of it addresses a named space (_space_of answers None for each)
    for i, op in enumerate(ins.operands):
        if type(op) is Addr and type(op.base) is Symbol and op.base.space in ("global", "const", "local"):
            want = _space_of(ins, i)
            if want is not None and want != op.base.space and not (want == "generic" and op.base.space == "global"):
                raise ValidationError(
                    f"'{ins.mnemonic}' addresses .{want} memory, but {op.base.name} is a .{op.base.space} variable: "
                    f"use space=\"{op.base.space}\"" + ("" if op.base.space == "global" else
                                                      " (or a generic address from address_of(..., generic=True))"))
            continue
        if type(op) is not Addr or type(op.base) is not Reg or op.base.name not in spaces:
            continue
        want = _space_of(ins, i)
        have = spaces[op.base.name]
        if want is not None and (want, have) in _SPACE_CLASH:
            how = {"global": "a global address (param_ptr / cvta.to.global)",
                   "const": "a .const-window address (address_of a .const variable)",
                   "generic": "a generic address", "shared": "a shared-window address (shared_base / cvta.to.shared)",
                   "local": "a local-window address"}[have]
            raise ValidationError(
                f"'{ins.mnemonic}' addresses .{want} memory through {op.base}, which holds {how}: "
                + ("convert it with cvta (cvta.to.shared of a generic shared address) or address a shared "
                   "variable" if want == "shared" else f"use a .{have} access or convert the address with cvta"))


def _one_line(text: str, what: str) -> None:
    # a line break would start a PTX line that is not a comment and shift every mapped line (Python's
    # splitlines() breaks at \x0b, \x0c, \x1c-\x1e, \x85, \u2028 and \u2029 too: so would a reader of the text)
    if len(text.splitlines()) > 1 or text.endswith(("\n", "\r")):
        raise ValidationError(f"{what} {text!r} holds a line break; it is rendered as one // comment line "
                              "(use comment() for several lines)")
    _printable(text, what)


def _printable(text: str, what: str) -> None:
    """Refuse text ptxas cannot read in a comment: any non-ASCII character ('Unexpected non-ASCII character',
    fatal), and NUL, which ends what the assembler reads."""
    if text.isascii() and "\0" not in text:
        return
    bad = next(ch for ch in text if not ch.isascii() or ch == "\0")
    raise ValidationError(f"{what} {text!r} holds {'a NUL character' if bad == chr(0) else repr(bad)}: ptxas "
                          + ("stops reading at a NUL" if bad == "\0" else "reads only ASCII, even in comments")
                          + "; write it in ASCII")
