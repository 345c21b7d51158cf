"""KernelBuilder: the one mutable object of ptxforge.

It owns a kernel's parameters, registers, shared memory, labels and body, and
records for every instruction the Python line that asked for it.  The
instruction methods themselves (``add``, ``ld``, ``cp_async``, ``mma`` ...)
come from the per-family mixins in :mod:`ptxforge.isa`.
"""

from __future__ import annotations

import itertools
import re
import warnings
from contextlib import contextmanager

from .errors import PtxforgeError, SourceLoc, TargetError, ValidationError, caller_loc, with_loc
from .isa import types as T
from .isa.arith import ArithOps
from .isa.bits import BitOps
from .isa.control import ControlOps
from .isa.convert import ConvertOps
from .isa.instruction import Instruction, as_operand, make
from .isa.async_store import AsyncStoreOps
from .isa.cache import CacheOps
from .isa.convert_narrow import NarrowConvertOps
from .isa.integer import IntegerOps
from .isa.sparse import SparseMmaOps
from .isa.texture import TextureOps
from .isa.video import VideoOps
from .isa.wmma import WmmaOps
from .isa.memory import MemoryOps
from .isa.async_copy import AsyncCopyOps
from .isa.cluster import ClusterOps, cluster_dims
from .isa.operands import (SM90_SPECIAL, SPECIAL_REGISTERS, Addr, Guard, Label, Reg, Symbol, Vec,
                           special)
from .isa.sync import SyncOps
from .isa.targets import Target
from .isa.tensor import TensorOps
from .isa.types import ScalarType, decl_type
from .kernel import Comment, Kernel, LabelDef, Param
from .isa.warp import WarpOps

_PTXFORGE_INTERNAL = True

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_ids = itertools.count(1)

#: Auto-name prefixes by register type (readable, and unique per width class).
_PREFIX = {
    "pred": "p", "f32": "f", "f64": "fd", "f16": "h", "f16x2": "hh",
}


def _prefix(t: ScalarType) -> str:
    if t.name in _PREFIX:
        return _PREFIX[t.name]
    return {8: "rb", 16: "rh", 32: "r", 64: "rd", 128: "rq"}[t.bits]


def _dims(v, what):
    if isinstance(v, int):
        v = (v,)
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise ValidationError(f"{what} takes 1 to 3 positive sizes, got {v}")
    v = v + (1,) * (3 - len(v))
    if v[0] * v[1] * v[2] > 1024:
        raise ValidationError(f"{what} {v} asks for {v[0] * v[1] * v[2]} threads; a CTA has at most 1024")
    return v


def _report_at_caller(fn):
    """Wrap a builder method so that a PtxforgeError raised inside it carries the caller's line."""
    def wrapper(self, *args, **kwargs):
        try:
            return fn(self, *args, **kwargs)
        except PtxforgeError as e:
            raise with_loc(e, caller_loc())
    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


class KernelBuilder(ArithOps, BitOps, ControlOps, ConvertOps, MemoryOps, AsyncCopyOps,
                    SyncOps, TensorOps, WarpOps, IntegerOps, CacheOps, WmmaOps, VideoOps,
                    NarrowConvertOps, AsyncStoreOps, TextureOps, SparseMmaOps, ClusterOps):
    """Compose one kernel instruction by instruction.

    >>> k = KernelBuilder("scale", target="sm_80", maxntid=256)
    >>> x = k.param_ptr("x", T.f32)
    """

    def __init__(self, name: str, target="sm_80", *, maxntid=None, reqntid=None,
                 minnctapersm=None, maxnreg=None, reqnctapercluster=None, explicitcluster=False,
                 maxclusterrank=None):
        self.loc = caller_loc()
        try:
            if not isinstance(name, str) or not _IDENT.match(name):
                raise ValidationError(f"kernel name {name!r} is not a PTX identifier "
                                      "(letters, digits, _ and $, not starting with a digit)")
            self.name = name
            self.target = Target.parse(target)
            self.id = next(_ids)
            directives = []
            if maxntid is not None and reqntid is not None:
                raise ValidationError(
                    ".maxntid and .reqntid cannot both be given (ptxas rejects the pair): "
                    "use .reqntid for an exact CTA shape, .maxntid for an upper bound")
            if maxntid is not None:
                directives.append(("maxntid", _dims(maxntid, ".maxntid")))
            if reqntid is not None:
                directives.append(("reqntid", _dims(reqntid, ".reqntid")))
            if minnctapersm is not None:
                if maxntid is None and reqntid is None:
                    warnings.warn(".minnctapersm is ignored by ptxas unless .maxntid or .reqntid is "
                                  "given too", stacklevel=2)
                directives.append(("minnctapersm", int(minnctapersm)))
            if maxnreg is not None:
                if not 16 <= int(maxnreg) <= 255:
                    raise ValidationError(f".maxnreg must be in 16..255, got {maxnreg}")
                directives.append(("maxnreg", int(maxnreg)))
            # clusters (sm_90): the exact shape, "must launch with a cluster", an upper bound
            if explicitcluster:
                directives.append(("explicitcluster", None))
            if reqnctapercluster is not None:
                directives.append(("reqnctapercluster", cluster_dims(reqnctapercluster)))
            if maxclusterrank is not None:
                if not 1 <= int(maxclusterrank) <= 16:
                    raise ValidationError(f".maxclusterrank must be in 1..16, got {maxclusterrank}")
                directives.append(("maxclusterrank", int(maxclusterrank)))
            if (explicitcluster or reqnctapercluster is not None or maxclusterrank is not None) \
                    and self.target.sm < 90:
                from .errors import TargetError
                raise TargetError(f"cluster directives need sm_90 or newer; the kernel targets {self.target.name}")
        except PtxforgeError as e:
            raise with_loc(e, self.loc)
        self.directives = directives
        self.params: list[Param] = []
        self._names: set[str] = set()  # params, shared symbols: one namespace
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
        self._notes: list = []
        self._kernel: Kernel | None = None

    # ------------------------------------------------------------------ registers
    def reg(self, type, name: str | None = None, *, exact: bool = False) -> Reg:
        """A new register of `type`; `name` makes it readable (`%name`, deduplicated).

        `exact=True` keeps `name` as given even where it has the form of an automatic name
        (`r7`, `p2`): a module read from PTX keeps its register names; a name already taken
        is an error then.
        """
        try:
            t = T.lookup(type)
        except PtxforgeError as e:
            raise with_loc(e, caller_loc())
        if not t.can_declare:
            raise with_loc(ValidationError(
                f".{t.name} is a packed type that exists only inside registers and memory; "
                f"declare a .b32 register and read it as packed .{t.name} values"), caller_loc())
        if name is None:
            base = _prefix(t)
            n = self._counters.get(base, 0)
            rname = base + str(n)
            while rname in self._regs:
                n += 1
                rname = base + str(n)
            self._counters[base] = n + 1
        elif exact:
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

    def regs(self, type, n: int, name: str | None = None) -> Vec:
        """n new registers as a Vec (a brace list); named `name0..name{n-1}` if `name` is given."""
        if name is None:
            return Vec(tuple(self.reg(type) for _ in range(n)))
        return Vec(tuple(self.reg(type, f"{name}{i}") for i in range(n)))

    def _own(self, r: Reg) -> Reg:
        if r.owner != self.id:
            raise ValidationError(
                f"register {r} belongs to kernel '{r.kernel}', not to '{self.name}': "
                "registers cannot cross kernels; allocate one with this kernel's reg()")
        return r

    def _val(self, x, t: ScalarType | None = None):
        """Coerce a Python value or operand for use in this kernel."""
        if type(x) is Reg:  # the common case, without the isinstance chain
            return x if x.owner == self.id else self._own(x)
        if isinstance(x, Reg):
            return self._own(x)
        if isinstance(x, Vec):
            for r in x.regs:
                if isinstance(r, Reg):
                    self._own(r)
            return x
        if isinstance(x, (list, tuple)):
            return Vec(tuple(self._val(r, t) for r in x))
        if isinstance(x, Addr):
            if isinstance(x.base, Reg):
                self._own(x.base)
            return x
        if isinstance(x, Param):
            return x.symbol
        if isinstance(x, str):
            return special(x)  # "%tid.x" style
        return as_operand(x, t)

    def _dst(self, dst, t: ScalarType) -> Reg:
        if dst is None:
            return self.reg(decl_type(t))
        if not isinstance(dst, Reg):
            raise ValidationError(f"destination must be a register, got {dst!r}")
        return self._own(dst)

    def _guard(self, pred) -> Guard | None:
        if pred is None:
            return None
        if isinstance(pred, Reg):
            pred = Guard(pred)
        if not isinstance(pred, Guard) or not pred.reg.type.is_pred:
            raise ValidationError(f"a guard must be a .pred register or ~register, got {pred!r}")
        self._own(pred.reg)
        return pred

    # ------------------------------------------------------------------ emission
    def emit(self, ins: Instruction, pred=None) -> Instruction:
        """Append a prebuilt instruction (checked against the target and this kernel's registers)."""
        try:
            if self._kernel is not None:
                raise ValidationError(f"kernel '{self.name}' is finished; no more instructions can be added")
            guard = self._guard(pred) if pred is not None else None
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
        if ins.loc is None:  # built by hand rather than by a family constructor
            ins = ins.with_loc(caller_loc())
        self._body.append(ins)
        return ins

    def comment(self, text: str) -> None:
        """A `// comment` line in the body."""
        for line in str(text).splitlines() or [""]:
            self._body.append(Comment(line))

    @contextmanager
    def section(self, name: str):
        """Group the instructions emitted inside under a named section in the listing."""
        self._body.append(Comment(name, section=True))
        yield

    def note(self, key: str, value) -> None:
        """A fact shown in the kernel's listing header (e.g. the compute path a schedule chose)."""
        self._notes.append((str(key), str(value)))

    # ------------------------------------------------------------------ parameters
    def _claim(self, name: str, what: str):
        if not isinstance(name, str) or not _IDENT.match(name):
            raise ValidationError(f"{what} name {name!r} is not a PTX identifier")
        if name in self._names:
            raise ValidationError(f"'{name}' is already declared in kernel '{self.name}'")
        self._names.add(name)

    def param(self, name: str, type, *, pointee=None, space=None, nbytes=None, align=None) -> Param:
        """Declare a `.param`; returns the Param (its `.symbol` is the address for ld.param)."""
        self._claim(name, "parameter")
        t = T.lookup(type) if nbytes is None else T.b8
        if nbytes is None and (not t.can_declare or t.is_pred):
            raise ValidationError(f"parameter type .{t.name} is not allowed; use a scalar such as .u32")
        p = Param(name, t, T.lookup(pointee) if pointee is not None else None, space, nbytes, align)
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

    def load_param(self, p: Param | str, dst=None) -> Reg:
        """`ld.param` a scalar parameter into a register."""
        if isinstance(p, str):
            p = next((q for q in self.params if q.name == p), None) or self._missing_param(p)
        if p.nbytes is not None:
            raise ValidationError(f"parameter {p.name} is a {p.nbytes}-byte block; take its address "
                                  "with param_address()")
        d = self._dst(dst, p.type)
        return self.ld(Addr(p.symbol), type=p.type, space="param", dst=d)

    def _missing_param(self, name):
        raise ValidationError(f"kernel '{self.name}' has no parameter '{name}'; it has: "
                              + ", ".join(q.name for q in self.params))

    def param_value(self, name: str, type) -> Reg:
        """Declare a scalar parameter and load it: `.param .u32 n` + `ld.param.u32`."""
        p = self.param(name, type)
        return self.load_param(p, dst=self.reg(decl_type(p.type), name))

    def param_ptr(self, name: str, pointee=T.b8, *, space: str = "global") -> Reg:
        """Declare a pointer parameter, load it and convert it to a `space` address (cvta.to)."""
        p = self.param(name, T.u64, pointee=pointee, space=space)
        r = self.load_param(p, dst=self.reg(T.u64, name))
        if space == "generic":
            return r
        return self.cvta(r, to=space, dst=r)

    def param_address(self, p: Param) -> Reg:
        """Generic address of a by-value parameter block (mov + cvta.param; PTX 7.7)."""
        r = self.mov(p.symbol, type=T.u64)
        return self.cvta(r, frm="param", dst=r)

    # ------------------------------------------------------------------ special registers
    def sreg(self, name: str, dst=None) -> Reg:
        """Read a special register: `mov.u32 %tid_x, %tid.x`."""
        s = special(name)
        if s.name in SM90_SPECIAL and self.target.sm < 90:
            raise TargetError(f"%{s.name} needs sm_90 or newer; the kernel targets {self.target}")
        d = dst if dst is not None else self.reg(s.type, s.name.replace(".", "_"))
        return self.mov(s, dst=d)

    def tid(self, dim="x") -> Reg:
        return self.sreg(f"tid.{dim}")

    def ntid(self, dim="x") -> Reg:
        return self.sreg(f"ntid.{dim}")

    def ctaid(self, dim="x") -> Reg:
        return self.sreg(f"ctaid.{dim}")

    def nctaid(self, dim="x") -> Reg:
        return self.sreg(f"nctaid.{dim}")

    def laneid(self) -> Reg:
        return self.sreg("laneid")

    def global_index(self, dim="x") -> Reg:
        """ctaid*ntid + tid along one dimension (u32)."""
        i = self.reg(T.u32, f"gid_{dim}")
        return self.mad(self.ctaid(dim), self.ntid(dim), self.tid(dim), mode="lo", dst=i)

    # ------------------------------------------------------------------ shared memory
    def shared(self, name: str, nbytes: int, align: int = 16) -> Symbol:
        """Static shared memory: `.shared .align A .b8 name[nbytes];` (at most 48 KB per kernel)."""
        self._claim(name, "shared variable")
        _check_align(align)
        if int(nbytes) <= 0:
            raise ValidationError(f"shared array {name} needs a positive size, got {nbytes}")
        s = Symbol(name, "shared", T.b8, int(nbytes), int(align), self.id)
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
        _check_align(align)
        self._claim(name, "shared variable")
        s = Symbol(name, "shared", T.b8, None, int(align), self.id)
        self._extern.append(s)
        return s

    def shared_base(self, sym: Symbol, offset: int = 0, dst=None) -> Reg:
        """32-bit shared-window address of a shared variable (`mov.u32 %r, sym`), plus an offset."""
        if not isinstance(sym, Symbol) or sym.space != "shared":
            raise ValidationError(f"{sym!r} is not a shared-memory variable")
        r = self.mov(sym, type=T.u32, dst=dst if dst is not None else self.reg(T.u32, f"{sym.name}_base"))
        if offset:
            self.add(r, int(offset), dst=r)
        return r

    # ------------------------------------------------------------------ labels & structured control flow
    def label(self, name: str = "L") -> Label:
        """A new label (place it with place()); the name is made unique."""
        if not _IDENT.match(name):
            raise with_loc(ValidationError(f"label name {name!r} is not a PTX identifier"), caller_loc())
        return Label(f"{name}_{next(self._label_counter)}", self.id)

    def place(self, label: Label) -> Label:
        """Put a label at the current position."""
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

    @contextmanager
    def if_(self, cond):
        """Run the body only where `cond` (a .pred register or ~register) holds."""
        g = self._guard(cond)
        end = self.label("endif")
        self.bra(end, pred=~g)
        yield
        self.place(end)
        self._last_if = (len(self._body) - 1, end)

    @contextmanager
    def else_(self):
        """The else branch of the if_ block that just ended."""
        if self._last_if is None or self._last_if[0] != len(self._body) - 1:
            raise with_loc(ValidationError("else_() must directly follow an if_() block"), caller_loc())
        pos, _ = self._last_if
        self._last_if = None
        done = self.label("endelse")
        from .isa.control import bra
        skip = bra(done, uni=True).with_loc(caller_loc())  # the constructor: .uni in mods too, as bra() has it
        self._use_label(done)
        self._body.insert(pos, skip)
        yield
        self.place(done)

    @contextmanager
    def for_range(self, start, stop, step: int = 1, *, type=T.u32, name: str = "i", uniform: bool = True):
        """A counted loop: `for i in range(start, stop, step)` in PTX.  Yields the counter register.

        `start`/`stop` may be registers or ints; `step` is a non-zero int.
        The exit branch is `bra.uni` when `uniform` (the trip count is the same for the whole warp).
        """
        t = T.lookup(type)
        if not isinstance(step, int) or step == 0:
            raise with_loc(ValidationError(f"for_range step must be a non-zero int, got {step!r}"), caller_loc())
        i = self.reg(t, name)
        self.mov(start, type=t, dst=i)
        top, end = self.label(f"{name}_loop"), self.label(f"{name}_end")
        self.place(top)
        done = self.setp("ge" if step > 0 else "le", i, stop, type=t)
        self.bra(end, pred=done, uni=uniform)
        self._loop_stack.append(end)
        try:
            yield i
        finally:
            self._loop_stack.pop()
        self.add(i, step, dst=i)
        self.bra(top, uni=uniform)
        self.place(end)

    @contextmanager
    def loop(self, name: str = "loop"):
        """An endless loop; leave it with break_(pred)."""
        top, end = self.label(name), self.label(f"{name}_end")
        self.place(top)
        self._loop_stack.append(end)
        try:
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
        """Close the kernel: check labels, add the final `ret`, freeze."""
        if self._kernel is not None:
            return self._kernel
        for name, loc in self._labels_used.items():
            if name not in self._labels_placed:
                raise ValidationError(f"branch to label $L_{name}, which is never placed (use place())", loc)
        last = next((x for x in reversed(self._body) if isinstance(x, (Instruction, LabelDef))), None)
        if not (isinstance(last, Instruction) and last.opcode in ("ret", "exit") and last.guard is None):
            self._body.append(make("ret", ("ret",)).with_loc(caller_loc()))
        used = self._used  # every register an emitted instruction names (collected by emit)
        regs = tuple(r for n, r in self._regs.items() if n in used)
        self._kernel = Kernel(self.name, self.target, tuple(self.params), tuple(self.directives), regs,
                              tuple(self._shared), tuple(self._extern), tuple(self._body), self.id,
                              self.loc, tuple(self._notes))
        return self._kernel

    def module(self, **kwargs):
        """A Module holding just this kernel."""
        from .module import Module
        return Module([self.finish()], **kwargs)


def _check_align(align):
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        raise ValidationError(f"alignment must be a power of two, got {align!r}")


# These attach the caller's line themselves; they run for every instruction, so they skip the wrapper.
_SELF_LOCATING = frozenset({"emit", "reg"})


def _wrap_public_methods(cls):
    """Every public builder method (the mixins' included) reports errors at the caller's line.

    This is the one wrapping mechanism: methods are not decorated one by one."""
    import inspect
    for name in dir(cls):
        if name.startswith("_") or name in _SELF_LOCATING:
            continue
        attr = inspect.getattr_static(cls, name)
        if inspect.isfunction(attr):
            setattr(cls, name, _report_at_caller(attr))


_wrap_public_methods(KernelBuilder)
