"""Device functions, calls, variables and pragmas for the builder: the `FunctionOps` mixin.

`KernelBuilder` mixes this in, so a kernel (and a device function, `FunctionBuilder`) can

* call a device function with one method, `call()`, which writes the whole call scope
  (`{ .param ...; st.param ...; call ...; ld.param ...; }`) with the argument and return
  types checked against the callee's signature;
* declare a `.local` array (`local_array()`), use module-scope `.global`/`.const` variables
  (`ptxforge.declarations.variable()`) as addresses of `ld`/`st`/`mov`, and take their address
  (`address_of()`);
* place a `.pragma` line in the body (`pragma()`).

and a device function reads its parameters with `load_param`/`param_value` like a kernel and
writes its return values with `set_result()`.
"""

from __future__ import annotations

import hashlib
import numbers
import re
from collections.abc import Mapping
from contextlib import contextmanager

import numpy as np

from .declarations import (BodyDirective, BranchTargetsDecl, CallPrototypeDecl, Function, LocalDecl, Prototype,
                           ScopeClose, ScopeOpen, Variable)
from .declarations import pragma_text
from .errors import TargetError, ValidationError, caller_loc, with_loc
from .isa import types as T
from .isa.calls import (BranchTargets, CallParam, CallPrototype, FuncRef, brx_idx as brx_idx_instruction,
                        call as call_instruction)
from .isa.control import mov as mov_instruction
from .isa.instruction import check_value, describe, int_or_val
from .isa.operands import Addr, Imm, Reg, Symbol, half_pattern
from .isa.types import decl_type
from .kernel import Kernel, Param, check_align

_PTXFORGE_INTERNAL = True


def signature_of(func):
    """(name, return Params, parameter Params) of a call target: a finished device `Function`, a
    `Prototype`, or a `FunctionBuilder` (its signature so far; the module finishes it)."""
    if hasattr(func, "finish") and getattr(func, "kind", None) == "func":  # a FunctionBuilder
        return func.name, tuple(func._results), tuple(func.params)
    if isinstance(func, Function) and func.kind == "func":
        return func.name, tuple(func.returns), tuple(func.params)
    if isinstance(func, Prototype):
        return func.name, tuple(func.returns), tuple(func.params)
    if isinstance(func, (Function, Kernel)) or hasattr(func, "finish"):
        raise ValidationError(f"'{func.name}' is a kernel (.entry); only device functions (.func, from "
                              "FunctionBuilder) can be called")
    raise ValidationError(f"call needs a device function (a FunctionBuilder, its finished Function or a "
                          f"Prototype), got {describe(func) if isinstance(func, Reg) else repr(func)[:80]}")


def _compatible(reg_t: T.ScalarType, param_t: T.ScalarType) -> bool:
    """Whether a register of `reg_t` may be stored to / loaded from a `.param` of `param_t`."""
    if reg_t.is_pred or param_t.is_pred:
        return False
    d, p = decl_type(reg_t), param_t
    if d.bits != p.bits:
        return False
    if p.kind == "b" or d.kind == "b":
        return True
    return d.is_float == p.is_float


class FunctionOps:
    """Builder methods for device functions, call scopes, variables and pragmas (mixed into
    `KernelBuilder`)."""

    # ------------------------------------------------------------------ variables
    def _use_variable(self, var: Variable):
        """The symbol of a module-scope variable or of this kernel's `.local` array, recorded as used."""
        if var.space == "local":
            if var not in self._locals:
                raise ValidationError(f".local array {var.name} belongs to another kernel; declare it with "
                                      "this kernel's local_array()")
        elif var.space in ("global", "const"):
            prev = self._module_vars.get(var.name)
            if prev is not None and prev != var:
                raise ValidationError(f"two different module variables are called {var.name}")
            if prev is None and (var.name in self._internal or any(v.name == var.name for v in self._locals)):
                raise ValidationError(f"'{self.name}' declares {var.name!r} itself, which hides the module variable "
                                      f"{var.name!r} in the kernel (ptxas then reads the wrong space): rename one")
            self._module_vars[var.name] = var
        else:
            raise ValidationError(f"variable {var.name} is .{var.space}; the builder addresses module "
                                  ".global/.const variables and .local arrays (shared memory: shared())")
        return var.symbol

    def local_array(self, name: str, type, count: int | None, *, align: int | None = None) -> Variable:
        """A per-thread `.local` array in this kernel: `.local .align A .type name[count];` (a
        scalar with `count=None`).

        Use it as the address of `ld`/`st` with `space="local"` (`k.st(arr, v, space="local",
        offset=4)`), or take its address with `address_of()`.  Returns the `Variable`."""
        return self._local_array(name, type, count, align=align)

    def _local_array(self, name, type, count, *, align=None, internal=None):
        from .declarations import variable
        var = variable(name, type, space="local", count=count, align=align)
        self._claim(name, internal or ".local array", internal=internal is not None, local=True)
        self._locals.append(var)
        return var

    def printf(self, fmt: str, *args, pred=None):
        """Device printf: `vprintf(format, args)` as nvcc writes it, for debugging a kernel.  `fmt` is a C format
        string (%d %i %u %x %X %o %c, with h, or l/ll for 64-bit integers, %e %f %g %a, %s, %p, widths,
        precisions and `*`); each argument a register or a Python number of the conversion's kind: integers of at most 32
        bits for %d ..., of 64 bits for %lld ...; f16/bf16/f32/f64 registers or floats for %f ... (widened to a
        double, as C does); a Python str or a 64-bit generic address for %s; a 64-bit address for %p.  The
        format becomes a module `.global` string, the arguments a per-thread `.local` buffer.  Returns the
        call's result register (the number of arguments); the GPU prints at the next synchronization, the
        interpreter into `Report.printed` and stdout."""
        from .declarations import variable
        from .isa.vprintf import VPRINTF, buffer_layout, conversions
        try:
            if not isinstance(fmt, str):
                raise ValidationError(f"printf's format is a str, got {type(fmt).__name__}")
            specs = conversions(fmt)
            if len(args) != len(specs):
                raise ValidationError(f"printf {fmt!r} takes {len(specs)} argument(s) "
                                      f"({', '.join('%' + a.conv for a in specs) or 'none'}), got {len(args)}")
            values = [self._printf_value(a, spec, i) for i, (a, spec) in enumerate(zip(args, specs))]
        except ValidationError as e:
            raise with_loc(e, caller_loc())
        offsets, size = buffer_layout(specs)
        n = self._fresh_number("_printf_count", lambda n: (f"printf_args{n}",))
        buf = self._local_array(f"printf_args{n}", T.b8, size, align=8, internal="printf's argument buffer")
        for (value, t), off in zip(values, offsets):
            self.st(buf, value, type=t, space="local", offset=off)
        data = fmt.encode("utf-8") + b"\0"
        name = "printf_fmt_" + hashlib.sha1(data).hexdigest()[:12]  # one variable per distinct format
        text = self.address_of(variable(name, T.b8, count=len(data), init=list(data)), generic=True)
        return self.call(Prototype(VPRINTF, (Param(f"{VPRINTF}_result", T.b32),),
                                   (Param(f"{VPRINTF}_format", T.b64), Param(f"{VPRINTF}_args", T.b64))),
                         args=[text, self.address_of(buf, generic=True)], pred=pred)

    def _printf_value(self, a, spec, i):
        """(value, store type) of printf argument `i` for conversion `spec` (an isa.vprintf.Argument)."""
        from .declarations import variable
        what = f"printf argument {i} (%{spec.conv})"
        if spec.kind == "string" and isinstance(a, str):
            data = a.encode("utf-8") + b"\0"
            return self.address_of(variable("printf_str_" + hashlib.sha1(data).hexdigest()[:12], T.b8,
                                            count=len(data), init=list(data)), generic=True), T.b64
        if _is_bool(a) or not isinstance(a, (numbers.Real, Reg)):
            raise ValidationError(f"{what} is a register or a number, got {a!r}")
        if isinstance(a, numbers.Integral) and not isinstance(a, Reg):
            a = int(a)  # numpy integers as Python ints
        elif isinstance(a, numbers.Real) and not isinstance(a, Reg):
            a = float(a)
        if spec.kind == "float":
            if isinstance(a, (int, float)):
                try:
                    return Imm(float(a), T.f64), T.f64
                except OverflowError:
                    raise ValidationError(f"{what} is {a}, beyond the range of a double (the %{spec.conv} argument "
                                          "is widened to .f64: at most about 1.8e308)") from None
            if not a.type.is_float or a.type.lanes != 1 or a.type is T.tf32:
                hint = (" (a pair of halves: convert one half to .f32 first, e.g. with mov.b32 {lo, hi} and cvt)"
                        if a.type.lanes == 2 else " (tf32: cvt it to .f32 first)" if a.type is T.tf32
                        else " (an integer: use %d, %u or %x)")
                raise ValidationError(f"{what} takes a float; {a} is .{a.type.name}{hint}")
            if a.type is T.f64:
                return a, T.f64
            wide = a if a.type is T.f32 else self.cvt(a, T.f32)
            return self.cvt(wide, T.f64), T.f64
        if isinstance(a, float) or (isinstance(a, Reg) and (a.type.is_float or a.type.is_pred)):
            raise ValidationError(f"{what} takes {'an integer' if spec.kind == 'int' else 'a 64-bit address'}; "
                                  f"got {describe(a) if isinstance(a, Reg) else repr(a)}"
                                  + (" (a float: use %f, %e or %g)" if not isinstance(a, Reg)
                                                  or a.type.is_float else ""))
        bits = spec.nbytes * 8
        if isinstance(a, int):
            if not -(1 << (bits - 1)) <= a < 1 << bits:
                hint = ": use %ll" + spec.conv if bits == 32 and -(1 << 63) <= a < 1 << 64 else ""
                raise ValidationError(f"{what} is {a}, which does not fit the {bits}-bit argument (an int in "
                                      f"{-(1 << (bits - 1))}..{(1 << bits) - 1}; negative values are read as C "
                                      f"converts them){hint}")
            return Imm(a & ((1 << bits) - 1), T.lookup(f"u{bits}")), T.lookup(f"b{bits}")
        if spec.kind != "int" and a.type.bits != 64:
            raise ValidationError(f"{what} takes a 64-bit generic address; {a} is .{a.type.name}")
        if a.type.bits > bits:
            raise ValidationError(f"{what} takes a {bits}-bit integer; {a} is .{a.type.name}: use %ll{spec.conv}")
        if a.type.bits < bits and bits == 64:
            raise ValidationError(f"{what} takes a 64-bit integer; {a} is .{a.type.name}: drop the l/ll")
        if a.type.bits < bits:  # 8- and 16-bit registers widen as C promotes them
            a = self.cvt(a, T.lookup(("s" if a.type.kind == "s" else "u") + "32"))
        return a, T.lookup(f"b{bits}")

    def address_of(self, var: Variable, dst=None, *, generic: bool = False) -> Reg:
        """The address of a variable in its own space: `mov.u64 %rd, var` (the builder then knows the
        register holds a `.global`/`.const`/`.local` address); with `generic=True` also
        `cvta.<space>.u64` to a generic address.

        Of a device function (a `FunctionBuilder` or `Function`): `mov.u64 %rd, func`, the target
        of an indirect `call(reg, ..., prototype=func)` (the module includes the function)."""
        if getattr(var, "kind", None) == "func":
            self._check_callee_name(var.name)
            r = self._dst(dst, T.u64) if dst is not None else self.reg(T.u64, f"{var.name}_fn")
            self.emit(mov_instruction(T.u64, r, FuncRef(var.name)))
            self._callees.append(var)
            return r
        if not isinstance(var, Variable):
            raise ValidationError(f"address_of() takes a Variable (variable() or local_array()), got {var!r}")
        r = self.mov(var, type=T.u64, dst=dst if dst is not None else self.reg(T.u64, f"{var.name}_addr"))
        if generic:
            self.cvta(r, frm=var.space, dst=r)
        return r

    # ------------------------------------------------------------------ pragmas
    def pragma(self, *words: str) -> None:
        """A `.pragma "word", ...;` line at this point of the body (e.g. `pragma("nounroll")` before a
        loop's back branch: ptxas does not unroll it).  A pragma newer than the base ISA raises the module's
        least `.version` (used_bytes_mask 8.3, enable_smem_spilling 8.7, frequency 9.0)."""
        text = pragma_text(words)
        self._check_open("pragmas")
        self._body.append(BodyDirective(text, caller_loc()))

    def debug_loc(self, file: int, line: int, column: int = 0, *, function_name: str | None = None,
                  inlined_at: tuple | None = None) -> None:
        """A `.loc file line column` debug line at this point of the body: the instructions after it
        come from `line` (and `column`) of source file `file`, which the module declares with
        `.file file "name"` (`declarations=[pf.source_file(1, "k.cu")]`).  Debuggers and
        profilers map SASS back to the source through it; ptxas needs the `.file` declared.

        For code inlined from another function (what nvcc -lineinfo writes): `function_name` names
        the label of the inlined function's name string in the debug sections and `inlined_at` is
        the (file, line, column) of the call: `.loc 1 5 3, function_name $L__info_string0,
        inlined_at 1 20 7`.  Both or neither."""
        self._check_open("debug lines")
        def position(vals, what):
            for name, v in zip(("file", "line", "column"), vals):
                if not isinstance(v, int) or isinstance(v, bool) or v < 0 or (name == "file" and v == 0):
                    raise with_loc(ValidationError(
                        f"debug_loc(): {what}{name} must be a {'positive' if name == 'file' else 'non-negative'} "
                        f"int, got {v!r}"), caller_loc())
            return " ".join(str(v) for v in vals)
        text = ".loc " + position((file, line, column), "")
        if (function_name is None) != (inlined_at is None):
            raise with_loc(ValidationError("debug_loc(): function_name and inlined_at go together (an inlined "
                                           "position names both)"), caller_loc())
        if function_name is not None:
            if not isinstance(function_name, str) or not re.fullmatch(r"[$%A-Za-z_][\w$]*", function_name):
                raise with_loc(ValidationError(f"debug_loc(): function_name is a label name (e.g. "
                                               f"'$L__info_string0'), got {function_name!r}"), caller_loc())
            if not isinstance(inlined_at, tuple) or len(inlined_at) != 3:
                raise with_loc(ValidationError(f"debug_loc(): inlined_at is (file, line, column), got "
                                               f"{inlined_at!r}"), caller_loc())
            text += f", function_name {function_name}, inlined_at " + position(inlined_at, "inlined_at ")
        self._body.append(BodyDirective(text))

    # ------------------------------------------------------------------ indexed branches
    def branch_targets(self, name: str, labels) -> BranchTargets:
        """Declare a `.branchtargets` list here: `name: .branchtargets $L_a, $L_b, ...;` (the labels
        of this kernel, placed anywhere with `place()`); returns it for `brx_idx`."""
        return self._branch_targets(name, labels)

    def _branch_targets(self, name, labels, internal=None):
        self._claim(name, internal or "branch-target list", internal=internal is not None)
        labels = tuple(labels)
        if not labels:
            raise ValidationError(f".branchtargets {name} needs at least one label")
        for x in labels:
            self._use_label(x)
        bt = BranchTargets(name, labels)
        self._body.append(BranchTargetsDecl(bt))
        return bt

    def brx_idx(self, index, targets, *, uni: bool = False, pred=None) -> None:
        """`brx.idx{.uni} index, tlist;`: jump to `targets[index]`.

        `targets` is a list of labels (a `.branchtargets` list is declared just before) or a list
        from `branch_targets()`; `index` a 32-bit integer register or a number.  An index past the
        list is undefined behaviour in PTX (the interpreter stops there with the line).  `uni`
        promises the whole warp takes one target."""
        index = int_or_val(self._val, index, "brx_idx's index", t=T.u32)
        index = Imm(index, T.u32) if type(index) is int else index
        if not isinstance(targets, BranchTargets):
            n = self._fresh_number("_call_count", lambda n: (f"brx{n}_targets",))
            labels = tuple(targets)
            if labels:  # the branch checked before its list is declared: a refused call declares nothing
                for x in labels:
                    self._use_label(x)
                brx_idx_instruction(index, BranchTargets(f"brx{n}_targets", labels), uni)
            targets = self._branch_targets(f"brx{n}_targets", labels, internal="brx_idx's target list")
        elif targets.name not in self._names:
            raise ValidationError(f".branchtargets {targets.name} belongs to another kernel")
        self.emit(brx_idx_instruction(index, targets, uni), pred)

    # ------------------------------------------------------------------ calls
    def call(self, func, args=(), returns=None, *, uni: bool = False, pred=None, prototype=None):
        """Call a device function: the whole call scope in one builder call.

        Writes::

            {
                .param .f32 call0_a0;           // one per argument
                .param .f32 call0_r0;           // one per return value
                st.param.f32 [call0_a0], %f1;
                call{.uni} (call0_r0), func, (call0_a0);
                ld.param.f32 %f2, [call0_r0];
            }

        `func` is a `FunctionBuilder`, the `Function` it finished into, or a `Prototype` (an
        `.extern .func` the module declares).  `args` are registers or Python numbers, one per
        parameter, each of the parameter's width and kind (float/integer); `returns` is the
        register that receives the return value (default: a new one).  `pred` guards the `call`
        (ptxas refuses a guard on the scope's `st.param`/`ld.param`); a given return register keeps
        its value where the guard fails (`@p mov` from the return slot).  Returns the return
        register, or None for a function without a return value.

        A structure passed or returned by value (a `.b8` array parameter or result, `nbytes=`): its argument
        is a dict of its fields, `{byte offset: register or numpy scalar}` (one `st.param` each, at the
        register's type), and `returns=` names the fields to read, `{byte offset: type or register}`; the call
        then returns their registers in that order.  Each field must lie inside the array, at an offset that
        is a multiple of its size, no wider than the array's alignment, apart from the others.

        An indirect call: `func` is a 64-bit register holding a function's address
        (`address_of(f)`) and `prototype` the signature it promises (a `FunctionBuilder`, `Function`
        or `Prototype`); the scope then declares `protoN: .callprototype ...` and the call is
        `call (r), %rd, (a, ...), protoN;`.
        """
        target = None
        if isinstance(func, Reg) or prototype is not None:
            if prototype is None:
                raise ValidationError(f"a call through the register {func} needs prototype=: the function whose "
                                      "signature it has")
            target = self._val(func)
            if not isinstance(target, Reg):
                raise ValidationError(f"prototype= is for a call through a register; got {func!r} to call")
            _, rets, params = signature_of(prototype)
            name = str(target)
            _note_call(prototype, rets, params)
        else:
            name, rets, params = signature_of(func)
            self._check_callee_name(name)
            there = getattr(func, "target", None)  # (a Prototype is declared in the caller's module: it has none)
            if there is not None and there != self.target:
                raise TargetError(f"call {name}: the function is built for {there.name} and '{self.name}' for "
                                  f"{self.target.name}; a module has one target, so build both for the same one")
            _note_call(func, rets, params)
        vals = self._call_arguments(name, args, params)
        outs = self._call_returns(name, returns, rets)  # a Reg per scalar, a list of Field per array
        n = self._fresh_number("_call_count", lambda n: [f"call{n}_a{i}" for i in range(len(params))]
                               + [f"call{n}_r{i}" for i in range(len(rets))] + [f"proto{n}"])
        guard = self._guard(pred) if pred is not None else None
        arg_syms = [self._call_param(f"call{n}_a{i}", p) for i, p in enumerate(params)]
        ret_syms = [self._call_param(f"call{n}_r{i}", p) for i, p in enumerate(rets)]
        proto = None
        if target is not None:
            proto = CallPrototype(f"proto{n}", tuple(_unnamed(p) for p in rets), tuple(_unnamed(p) for p in params))
            self._claim(proto.name, "an indirect call's prototype", internal=True)
            ins = call_instruction(target, tuple(arg_syms), tuple(ret_syms), uni, (rets, params), targets=proto)
        else:
            ins = call_instruction(FuncRef(name), tuple(arg_syms), tuple(ret_syms), uni, (rets, params))
        self._body.append(ScopeOpen())
        for s, p in zip(arg_syms + ret_syms, list(params) + list(rets)):
            self._body.append(LocalDecl(Param(s.name, p.type, nbytes=p.nbytes, align=p.align).render() + ";", s))
        if proto is not None:
            self._body.append(CallPrototypeDecl(proto))
        for s, v, p in zip(arg_syms, vals, params):  # ptxas refuses a guard on these: only the call has one
            for off, x, t, _ in (v if p.nbytes is not None else [(0, v, p.type, True)]):
                self.st(Addr(s, off), x, type=_access_type(t), space="param")
        self.emit(ins, guard)
        for s, o, p in zip(ret_syms, outs, rets):
            for off, r, t, given in (o if p.nbytes is not None else [(0, o, p.type, returns is not None)]):
                if guard is not None and given:  # the given register keeps its value where not called
                    tmp = self.ld(Addr(s, off), type=_access_type(t), space="param", dst=self.reg(r.type))
                    self.mov(tmp, dst=r, pred=guard)
                else:
                    self.ld(Addr(s, off), type=_access_type(t), space="param", dst=r)
        self._body.append(ScopeClose())
        if target is None:
            self._callees.append(func)
        outs = [tuple(f[1] for f in o) if p.nbytes is not None else o for o, p in zip(outs, rets)]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _call_arguments(self, name: str, args, params) -> list:
        """The operands a call passes (`args`: one register or number per parameter), checked against the
        callee's parameters: count, scalar parameters only, width and kind."""
        args = list(args) if isinstance(args, (list, tuple)) else [args]
        if len(args) != len(params):
            raise ValidationError(
                f"call {name}: it takes {len(params)} argument(s) ({', '.join(_sig(p) for p in params)}), "
                f"got {len(args)}")
        vals = []
        for i, (a, p) in enumerate(zip(args, params)):
            if p.nbytes is not None:
                vals.append(self._fields(a, p, f"call {name}: argument {i} ({p.name})", store=True))
                continue
            if isinstance(a, Mapping):
                raise ValidationError(f"call {name}: argument {i} ({p.name}) is a scalar .{p.type.name}; {{offset: "
                                      "value}} fields are for a .b8 array parameter (a structure by value)")
            v = _param_operand(self, a, p, f"call {name}: argument {i} ({p.name})")
            if isinstance(v, Reg):
                if not _compatible(v.type, p.type):
                    raise ValidationError(
                        f"call {name}: argument {i} ({p.name}) is .{p.type.name}; {v} is .{v.type.name} "
                        f"(pass a {p.type.bits}-bit {'float' if p.type.is_float else 'integer'} register)")
            elif isinstance(v, Imm):  # checked here, named as the argument (not as the st.param that writes it)
                check_value(v, _access_type(p.type), f"call {name}: argument {i} ({p.name})")
            else:
                raise ValidationError(f"call {name}: argument {i} ({p.name}) must be a register or a number, "
                                      f"got {a!r}")
            vals.append(v)
        return vals

    def _call_returns(self, name: str, returns, rets) -> list:
        """The registers that receive a call's return values: `returns` checked against the callee's (count,
        width and kind), or new registers when None."""
        arrays = [p for p in rets if p.nbytes is not None]
        if arrays and returns is None:
            p = arrays[0]
            raise ValidationError(f"call {name}: it returns the {p.nbytes}-byte array {p.name} (a structure by value); "
                                  "name the fields to read, {offset: type or register}, e.g. returns={0: pf.s32, "
                                  "4: pf.f32}")
        if returns is None:  # of the return value's own type (a bf16 register for .bf16: cvt reads it as bf16)
            return [self.reg(p.type) for p in rets]
        outs = list(returns) if isinstance(returns, (list, tuple)) else [returns]
        if len(outs) != len(rets):
            raise ValidationError(f"call {name}: it returns {len(rets)} value(s) "
                                  f"({', '.join(_sig(p) for p in rets) or 'none'}), got {len(outs)} "
                                  "register(s) to receive them")
        for i, (o, p) in enumerate(zip(outs, rets)):
            if p.nbytes is not None:
                outs[i] = self._fields(o, p, f"call {name}: return value {p.name}", store=False)
                continue
            o = self._val(o)
            if not isinstance(o, Reg) or not _compatible(o.type, p.type):
                raise ValidationError(f"call {name}: return value {p.name} is .{p.type.name}; {describe(o)} cannot "
                                      f"receive it (give a {p.type.bits}-bit "
                                      f"{'float' if p.type.is_float else 'integer'} register, or leave returns= out)")
        return outs

    def _check_callee_name(self, name: str) -> None:
        """A kernel-scope name equal to a called function's hides the function (ptxas: 'Label expected')."""
        if name in self._names:
            raise ValidationError(f"'{self.name}' declares {name!r} itself, which hides the device function "
                                  f"{name!r} it calls (ptxas: 'Label expected' at the call): rename one")

    def _call_param(self, name: str, p: Param) -> CallParam:
        self._claim(name, "a call's .param variable", internal=True)
        return _param_symbol(name, p.type, p.nbytes, p.align)

    def _fields(self, fields, p: Param, what: str, *, store: bool) -> list:
        """The fields of .b8 array `p` a call passes (`store`) or reads, `{offset: value}`, checked: [(offset,
        register or Imm, type, given)] in offset order.  A stored value is a register or a numpy scalar (its
        dtype gives the width); a read one a register to receive it or a type (a new register)."""
        if not isinstance(fields, Mapping) or (store and not fields):  # (a result may be left unread: {})
            kind, example = (("register or numpy scalar", "{0: a, 4: b}") if store else
                             ("type or register", "{0: pf.s32, 4: pf.f32}"))
            raise ValidationError(f"{what} is a {p.nbytes}-byte array (a structure by value): give its fields as a "
                                  f"dict {{byte offset: {kind}}}, e.g. {example}; got {fields!r:.80}")
        out = []
        for off, v in fields.items():
            if store or isinstance(v, Reg):
                x = self._field_value(v, off, what) if store else self._val(v)
                if isinstance(x, Reg) and x.type.is_pred:
                    raise ValidationError(f"{what}: the field at {off!r} is the predicate {x}; a field holds a "
                                          "value (selp it into an integer register first)")
                t, given = x.type, True
            else:
                try:
                    t = T.lookup(v)
                except (ValidationError, KeyError, TypeError, AttributeError):
                    raise ValidationError(f"{what}: the field at {off!r} must be a type (a new register) or a register "
                                          f"to receive it, got {v!r}") from None
                if not t.can_declare or t.is_pred:
                    raise ValidationError(f"{what}: a field of .{t.name} cannot be read; use a scalar type")
                x, given = self.reg(t), False
            out.append((off, x, t, given))
        out.sort(key=lambda f: f[0] if isinstance(f[0], int) else -1)
        check_fields(p.name, p.nbytes, p.align or 1, [(off, t) for off, _, t, _ in out], what)
        return out

    def _field_value(self, v, off, what):
        """The operand of a stored field: a register as given, a numpy scalar as an immediate of its dtype's type."""
        if isinstance(v, Reg):
            return self._val(v)
        imm = None
        if isinstance(v, Imm) and v.type is not None:
            imm = v
        elif isinstance(v, np.generic) and not _is_bool(v) and v.dtype.kind in "iuf":
            t = T.lookup(f"{'s' if v.dtype.kind == 'i' else v.dtype.kind}{v.dtype.itemsize * 8}")
            imm = Imm(float(v) if t.is_float else int(v), t)
        if imm is not None:  # checked as the st.param that writes it will be (a half as its bits)
            if imm.type.name in ("f16", "bf16", "f16x2", "bf16x2") and isinstance(imm.value, numbers.Real):
                imm = Imm(half_pattern(imm.value, imm.type, f"{what}: the field at {off}"), imm.type.bits_type())
            check_value(imm, _access_type(imm.type), f"{what}: the field at {off}")
            return imm
        hint = " (a Python number has no width: write np.float32(1.5) or np.int32(3), or a register)" \
            if isinstance(v, (numbers.Number, Imm)) and not _is_bool(v) else ""
        raise ValidationError(f"{what}: the field at {off!r} must be a register or a numpy scalar, got {v!r}{hint}")

    # ------------------------------------------------------------------ call scopes by hand
    def call_scope(self):
        """A `{ ... }` scope in the body for a call written instruction by instruction (what `call()`
        writes in one step): declare its `.param` variables with `call_param()`, write them with
        `st` (space="param"), `emit` the `call` (`ptxforge.isa.calls.call`), read the return slots
        with `ld`.  The variables' names are free again after the scope.  Use it as `with k.call_scope():`."""
        return self._pending_block(self._call_scope(), "call_scope()")

    @contextmanager
    def _call_scope(self):
        self._check_open("call scopes")
        self._body.append(ScopeOpen())
        self._scope_names.append(set())
        try:
            with self._block("call_scope()"):
                yield
        finally:
            self._names -= self._scope_names.pop()
            self._body.append(ScopeClose())

    def scope_reg(self, type, name: str) -> None:
        """Declare `.reg .type name;` inside the innermost `call_scope()` (what nvcc writes in every
        call sequence, `.reg .b32 temp_param_reg;`).  A declaration line only: registers the
        instructions use come from `reg()`."""
        self._check_open()
        if not self._scope_names:
            raise ValidationError("scope_reg() declares a register inside `with k.call_scope():`")
        t = T.lookup(type)
        if not t.can_declare:
            raise ValidationError(f".reg .{t.name}: a packed type cannot be declared; declare .b32")
        if not isinstance(name, str) or not name.lstrip("%") or not all(c.isalnum() or c in "_$%" for c in name):
            raise ValidationError(f"register name {name!r} is not a PTX identifier")
        self._body.append(LocalDecl(f".reg .{t.name} {name};"))

    def call_prototype(self, name: str, returns=(), params=()) -> CallPrototype:
        """Declare `name: .callprototype (.param .t _) _ (.param .t _, ...);` in the innermost
        `call_scope()` (types of the return value and the parameters; a `.b8` array, a structure by
        value, as `pf.Param("_", pf.b8, nbytes=16, align=8)`); returns it, the `targets=` of an indirect
        `ptxforge.isa.calls.call` through a register."""
        if not self._scope_names:
            raise ValidationError("call_prototype() declares an indirect call's prototype inside "
                                  "`with k.call_scope():`")
        self._claim(name, "call prototype")
        self._scope_names[-1].add(name)
        proto = CallPrototype(name, tuple(_prototype_entry(t) for t in returns),
                              tuple(_prototype_entry(t) for t in params))
        self._body.append(CallPrototypeDecl(proto))
        return proto

    def call_param(self, name: str, type, *, nbytes: int | None = None, align: int | None = None) -> CallParam:
        """Declare a call's `.param .type name;` in the innermost `call_scope()`; returns the
        writable `.param` symbol (the address of `st.param`/`ld.param`, an item of a call's
        argument or return list).

        With `nbytes`: a byte array, `.param .align A .b8 name[nbytes];` (`type` is `pf.b8`; A is `align`,
        default 1), what nvcc declares for a structure passed or returned by value; `st.param`/`ld.param`
        address its fields as `Addr(sym, offset)`, each inside the array and aligned to its size.  A callee's
        array parameter wants the same size and alignment."""
        if not self._scope_names:
            raise ValidationError("call_param() declares a call's .param variable inside `with k.call_scope():`")
        t = T.lookup(type)
        if not t.can_declare or t.is_pred:
            raise ValidationError(f"a .param variable of .{t.name} is not allowed; use a scalar such as .b32")
        nbytes, align = param_array_shape(f"call parameter {name}", t, nbytes, align)
        self._claim(name, "call parameter")
        self._scope_names[-1].add(name)
        sym = _param_symbol(name, t, nbytes, align)
        self._body.append(LocalDecl(Param(name, t, nbytes=nbytes, align=align).render() + ";", sym))
        return sym

    # ------------------------------------------------------------------ the device-function side
    def result(self, name: str, type, *, nbytes: int | None = None, align: int | None = None) -> Param:
        """Declare a return value of this device function: `.func (.param .type name) f(...)`.
        Only a `FunctionBuilder` has return values; write it with `set_result()`.

        With `nbytes`: a structure returned by value, `.func (.param .align A .b8 name[nbytes]) f(...)`
        (`type` is `pf.b8`, A is `align`, default 1); `set_result({offset: value, ...})` writes its fields,
        and a caller names the fields it reads (`call(f, ..., returns={0: pf.s32, 4: pf.f32})`)."""
        if getattr(self, "kind", "entry") != "func":
            raise ValidationError(f"'{self.name}' is a kernel; kernels have no return values (a device function "
                                  "from FunctionBuilder has)")
        if self._results:
            raise ValidationError(f"'{self.name}' already returns {self._results[0].name}: a device function has at "
                                  "most one .param return value (ptxas: several need the .reg space)")
        if ("noreturn", None) in self.directives:
            raise ValidationError(f"'{self.name}' is .noreturn: PTX allows no return value on such a function "
                                  "(ptxas: 'Invalid directive .noreturn'); drop noreturn=True or the result")
        t = T.lookup(type)
        if not t.can_declare or t.is_pred:
            raise ValidationError(f"return type .{t.name} is not allowed; use a scalar such as .u32 or .f32")
        nbytes, align = param_array_shape(f"return value {name}", t, nbytes, align)
        if nbytes is None:
            narrow_abi_problem(t, "return value")
        self._claim(name, "return value")
        p = Param(name, t, nbytes=nbytes, align=align)
        self._results.append(p)
        return p

    def set_result(self, value, name: str | None = None, *, pred=None) -> None:
        """Write a return value of this device function: `st.param.type [name], value`.

        `name` picks the return value (default: the only one); `value` is a register of its width
        and kind, or a number.  Of a `.b8` array (a structure, `result(..., nbytes=)`): its fields,
        `{byte offset: register or numpy scalar}`, one `st.param` each, checked to lie inside the array,
        aligned to their sizes and apart."""
        if not self._results:
            raise ValidationError(f"'{self.name}' declares no return value; declare one with result()")
        if name is None:
            if len(self._results) != 1:
                raise ValidationError(f"'{self.name}' returns {len(self._results)} values; name the one to set")
            p = self._results[0]
        else:
            p = next((q for q in self._results if q.name == name), None)
            if p is None:
                raise ValidationError(f"'{self.name}' has no return value {name!r}; it has: "
                                      + ", ".join(q.name for q in self._results))
        sym = _param_symbol(p.name, p.type, p.nbytes, p.align)
        if p.nbytes is not None:
            for off, x, t, _ in self._fields(value, p, f"'{self.name}' return value {p.name}", store=True):
                self.st(Addr(sym, off), x, type=_access_type(t), space="param", pred=pred)
            return
        if isinstance(value, Mapping):
            raise ValidationError(f"return value {p.name} is a scalar .{p.type.name}; {{offset: value}} fields are for "
                                  "a .b8 array result (result(..., nbytes=))")
        v = _param_operand(self, value, p, f"return value {p.name}")
        if isinstance(v, Reg) and not _compatible(v.type, p.type):
            raise ValidationError(f"return value {p.name} is .{p.type.name}; {v} is .{v.type.name}")
        if isinstance(v, Imm):
            check_value(v, _access_type(p.type), f"'{self.name}' return value {p.name}")
        self.st(Addr(sym), v, type=_access_type(p.type), space="param", pred=pred)

    def _param_field(self, p: Param, offset, type, dst=None) -> Reg:
        """`ld.param.type %r, [p+offset]`: one field of this function's byte-block parameter `p`, checked."""
        t = T.lookup(type)
        if t.is_pred or not t.can_declare:
            raise ValidationError(f"a field of parameter {p.name} cannot be read as .{t.name}; use a scalar type")
        check_fields(p.name, p.nbytes, p.align or 1, [(offset, t)], f"load_param({p.name})")
        return self.ld(Addr(p.symbol, offset), type=_access_type(t), space="param",
                       dst=self._dst(dst, t) if dst is not None else self.reg(t))


def narrow_abi_problem(t: T.ScalarType, what: str) -> None:
    """A ValidationError for an 8- or 16-bit integer parameter or return value of a device function: ptxas's ABI
    passes none ('passing ... 8-bit and 16-bit parameters to device functions is not supported')."""
    if t.name in ("u8", "s8", "u16", "s16"):
        raise ValidationError(
            f"a device function's {what} cannot be .{t.name} (ptxas's ABI passes no 8- or 16-bit integers); "
            f"declare .b{t.bits} (the same bits) or .{t.name[0]}32 (widened, as nvcc passes a "
            f"{'short' if t.bits == 16 else 'char'})")


def _is_bool(x) -> bool:
    """A Python or numpy bool (numpy 2 names its type `bool`, not `bool_`)."""
    return isinstance(x, (bool, np.bool_))


def _param_operand(k, a, p: Param, what: str):
    """The operand that writes number or register `a` to call parameter / return value `p`: a Python or numpy
    number for a half type is its bit pattern (st.param.b16 stores bits; PTX has no half literal)."""
    if p.type.name in ("f16", "bf16", "f16x2", "bf16x2") and isinstance(a, numbers.Real) and not _is_bool(a):
        return Imm(half_pattern(a, p.type, what), p.type.bits_type())
    return k._val(a, p.type)


def _note_call(func, rets, params) -> None:
    """Remember, on a FunctionBuilder, the signature a call was written with (checked when it finishes)."""
    if hasattr(func, "finish") and getattr(func, "kind", None) == "func" and func._kernel is None:
        func._calls_written.append((_shape(rets, params), caller_loc()))


def _shape(rets, params):
    def one(p):
        return (p.type, p.nbytes, p.align if p.nbytes is not None else None)
    return (tuple(one(p) for p in rets), tuple(one(p) for p in params))


def _shape_text(shape) -> str:
    def one(items):
        return ", ".join((f".align {a} " if n is not None else "") + f".{t.name}" + (f"[{n}]" if n is not None else "")
                         for t, n, a in items) or "nothing"
    return f"takes ({one(shape[1])}) and returns ({one(shape[0])})"


def check_calls_written(func) -> None:
    """A FunctionBuilder's calls written before its signature was complete: a ValidationError at the first
    call whose parameters or return values differ from the finished function's."""
    now = _shape(func._results, func.params)
    for shape, loc in func._calls_written:
        if shape != now:
            raise ValidationError(
                f"this call to {func.name} was written when {func.name} {_shape_text(shape)}; the finished "
                f"function {_shape_text(now)} (ptxas: 'Call has wrong number of parameters'): declare its "
                "parameters and return value before the first call", loc)


def _access_type(t: T.ScalarType) -> T.ScalarType:
    """The type ld/st.param use for a parameter of type `t` (half types through their bits)."""
    return t.bits_type() if t.name in ("f16", "bf16", "f16x2", "bf16x2") else t


def _sig(p: Param) -> str:
    return f".{p.type.name} {p.name}"


def _param_symbol(name: str, t: T.ScalarType, nbytes, align) -> CallParam:
    """The writable `.param` symbol of a call parameter or return value: a scalar, or a `.b8` array."""
    if nbytes is not None:
        return CallParam(name, "param", t, nbytes, align or 1)
    return CallParam(name, "param", t, None, max(t.bits // 8, 1))


def _unnamed(p: Param) -> Param:
    """`p` as a `.callprototype` entry (`_`): its type, and an array's size and alignment."""
    return Param("_", p.type, nbytes=p.nbytes, align=p.align if p.nbytes is not None else None)


def _prototype_entry(x) -> Param:
    """A `call_prototype()` entry: a type, or a Param (a `.b8` array with nbytes and align)."""
    if isinstance(x, Param):
        nbytes, align = param_array_shape("a .callprototype entry", x.type, x.nbytes, x.align)
        return Param("_", x.type, nbytes=nbytes, align=align if nbytes is not None else None)
    return Param("_", T.lookup(x))


def param_array_shape(what: str, t: T.ScalarType, nbytes, align):
    """(nbytes, align) of a `.param` that may be a byte array, checked: an array is `.b8` of a positive size and a
    power-of-two alignment; a scalar takes neither."""
    if nbytes is None:
        if align is not None:
            raise ValidationError(f"{what}: align= goes with nbytes= (a .b8 array); a scalar .param is aligned to its "
                                  "size")
        return None, None
    if t is not T.b8:
        raise ValidationError(f"{what}: an array .param is declared .b8 (.param .align A .b8 name[nbytes]), got "
                              f".{t.name}; its fields' types are those of the ld.param/st.param that read and write "
                              "them")
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Integral) or nbytes < 1:
        raise ValidationError(f"{what}: nbytes must be a positive int (the array's size in bytes), got {nbytes!r}")
    return int(nbytes), check_align(1 if align is None else align)


def check_fields(name: str, nbytes: int, align: int, fields, what: str) -> None:
    """ValidationError unless each (offset, type) of `fields` (sorted by offset) lies inside the `nbytes`-byte
    `.param` array `name` aligned to `align`, at an offset that is a multiple of its size, apart from the others."""
    end, prev = 0, None
    for off, t in fields:
        size = max(t.bits // 8, 1)
        if isinstance(off, bool) or not isinstance(off, numbers.Integral) or off < 0:
            raise ValidationError(f"{what}: a field's offset is a byte offset, an int from 0 to {nbytes - 1}; got "
                                  f"{off!r}")
        if off + size > nbytes:
            raise ValidationError(f"{what}: the {size}-byte .{t.name} field at offset {off} reaches past the end of the "
                                  f"{nbytes}-byte array {name} (its last {size}-byte field starts at "
                                  f"{(nbytes - size) // size * size})")
        if off % size:
            raise ValidationError(f"{what}: the {size}-byte .{t.name} field at offset {off} is misaligned: its offset "
                                  f"is not a multiple of {size}")
        if align % size:
            raise ValidationError(f"{what}: {name} is aligned to {align} bytes, so a {size}-byte .{t.name} field in it "
                                  f"is misaligned; declare the array with align={size} or more")
        if off < end:
            raise ValidationError(f"{what}: the field at offset {off} overlaps the field at offset {prev} (it ends "
                                  f"at {end})")
        end, prev = off + size, off


def check_param_access(ins) -> None:
    """ValidationError for an `ld.param`/`st.param` that leaves the `.param` byte array it names, or whose
    offset is not a multiple of its element's size (ptxas takes both, and the access reads or writes other
    bytes than the array's)."""
    i = 1 if ins.opcode == "ld" else 0
    addr = ins.operands[i]
    base = getattr(addr, "base", None)
    if not isinstance(base, Symbol) or base.nbytes is None or base.space != "param":
        return
    size = max(ins.info.type.bits // 8, 1)
    total = size * ins.info.vec
    if addr.offset < 0 or addr.offset + total > base.nbytes:
        raise ValidationError(f"'{ins.render()}': the {total}-byte access at offset {addr.offset} leaves the "
                              f"{base.nbytes}-byte .param array {base.name} (offsets 0 to {base.nbytes - total} "
                              "hold it)")
    if addr.offset % size:
        raise ValidationError(f"'{ins.render()}': offset {addr.offset} in {base.name} is not a multiple of {size}, the "
                              f"size of .{ins.info.type.name}")
