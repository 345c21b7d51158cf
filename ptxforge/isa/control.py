"""Moves, comparisons and control: mov, setp (one or two predicates, .ftz), set, selp, slct, testp,
bra, ret, exit."""

from __future__ import annotations

from ..errors import ValidationError
from . import types as T
from .arith import infer_type
from .instruction import check_dst, check_pred, check_value, int_arg, int_or_val, make
from .operands import (SPECIAL_REQUIREMENTS, Imm, Label, NegPred, PairDst, Reg, SpecialReg, Symbol, SymbolOffset, Vec,
                       half_pattern)
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

INT_CMP = ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs")
SIGNED_CMP = ("eq", "ne", "lt", "le", "gt", "ge")
FLOAT_CMP = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
BOOL_OPS = ("and", "or", "xor")
SETP_TYPES = (T.b16, T.b32, T.b64, T.u16, T.u32, T.u64, T.s16, T.s32, T.s64, T.f32, T.f64, T.f16, T.bf16,
              T.f16x2, T.bf16x2)
#: setp types that need more than the base: .bf16 compares are sm_90 (PTX ISA 7.8).
SETP_REQ = {T.bf16: Requirement(90, V("7.8")), T.bf16x2: Requirement(90, V("7.8"))}
MOV_TYPES = (T.pred, T.b16, T.b32, T.b64, T.u16, T.u32, T.u64, T.s16, T.s32, T.s64, T.f16, T.f32, T.f64, T.b128)
#: (bits, parts) of the mov forms that pack registers into one or split one: mov.b16 {b8, b8} ... mov.b128 {b64, b64}.
PACK_FORMS = ((16, 2), (32, 2), (32, 4), (64, 2), (64, 4), (128, 2))
_B128 = Requirement(80, V("8.3"))
SELP_TYPES = (T.b16, T.b32, T.b64, T.u16, T.u32, T.u64, T.s16, T.s32, T.s64, T.f32, T.f64)


def cmp_ops(t: T.ScalarType):
    """The comparison operators `setp` takes for type `t`: ordered and unordered ones for floats, signed ones for
    .s, unsigned (lo ls hi hs too) for .u, eq/ne for bit types.
    """
    if t.is_float:
        return FLOAT_CMP
    if t.kind == "s":
        return SIGNED_CMP
    if t.kind == "u":
        return INT_CMP
    return ("eq", "ne")  # bit types compare only for equality


#: set: every destination type (true is all ones for integers, 1.0 for floats, per half for packed pairs); which
#: of them a compared type takes is `set_dtypes`.
SET_DTYPES = (T.u32, T.s32, T.f32, T.u16, T.s16, T.f16, T.bf16, T.f16x2, T.bf16x2)


def set_dtypes(t: T.ScalarType) -> tuple:
    """The destination types `set` takes for compared type `t` (ptxas 13.0, as the PTX ISA lists them): a packed
    pair writes its own type or a .u32/.s32 mask per half; a scalar half .u16, .s16, .u32, .s32 or .bf16, and
    .f16 also .f16 (a .bf16 comparison writes no .f16); every other type .u32, .s32, .f32, .f16 or .bf16."""
    if t.lanes == 2:
        return (t, T.u32, T.s32)
    if t is T.f16:
        return (T.u16, T.s16, T.u32, T.s32, T.f16, T.bf16)
    if t is T.bf16:
        return (T.u16, T.s16, T.u32, T.s32, T.bf16)
    return (T.u32, T.s32, T.f32, T.f16, T.bf16)
#: slct: the types of the selector c (d = c >= 0 ? a : b).
SLCT_CTYPES = (T.s32, T.f32)
#: testp: the properties a float can be tested for.
TESTP_OPS = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
TESTP_TYPES = (T.f32, T.f64)
#: setp / set: the compared types that take .ftz (flush subnormal inputs): not .f64, not the bf16 ones.
FTZ_COMPARE_TYPES = (T.f32, T.f16, T.f16x2)


def _compare_check(name, cmp, t, a, b, boolop, c, ftz):
    if t not in SETP_TYPES:
        raise ValidationError(f"{name} takes {', '.join('.' + x.name for x in SETP_TYPES)}, not .{t.name}")
    legal = cmp_ops(t)
    if cmp not in legal:
        raise ValidationError(f"{name}.{cmp} is not defined for .{t.name}; legal comparisons: {', '.join(legal)}")
    if ftz and t not in FTZ_COMPARE_TYPES:
        raise ValidationError(f"{name}.ftz applies to {', '.join('.' + x.name for x in FTZ_COMPARE_TYPES)} "
                              f"comparisons, not .{t.name}")
    half = t.is_float and (t.bits == 16 or t.lanes == 2)  # ptxas takes no immediates for half compares
    check_value(a, t, f"{name} source 1", imm_ok=not half)
    check_value(b, t, f"{name} source 2", imm_ok=not half)
    if boolop is not None:
        if boolop not in BOOL_OPS:
            raise ValidationError(f"{name} combine op must be one of {BOOL_OPS}, got {boolop!r}")
        if c is None:
            raise ValidationError(f"{name}.{cmp}.{boolop} needs a predicate to combine with")
        check_pred(c.reg if isinstance(c, NegPred) else c, f"{name} combine predicate")
        return [c]
    return []


def setp(cmp, t, p, a, b, boolop=None, c=None, q=None, ftz=False):
    """Build and check `setp.cmp{.boolop}{.ftz}.type p{|q}, a, b{, c}` (pure: no builder).

    Args:
        cmp: the comparison, one of `cmp_ops(t)`.
        t: the type of `a` and `b` (one of `SETP_TYPES`).
        p: the .pred destination; for packed pairs (.f16x2, .bf16x2) a `PairDst` of one predicate per half.
        a: first source.
        b: second source.
        boolop: "and", "or" or "xor" to combine the result with predicate `c`, or None.
        c: the predicate combined (a .pred register or its negation), with `boolop`.
        q: for scalar types, a second destination that gets the complement, q = !(a cmp b) boolop c.
        ftz: flush .f32 subnormal inputs to zero.
    """
    tail = _compare_check("setp", cmp, t, a, b, boolop, c, ftz)
    if t.lanes == 2:  # packed pairs compare both halves: two predicates, written p|q
        if q is not None:
            raise ValidationError(f"setp.{cmp}.{t.name} writes one predicate per half (p|q); it has no complement "
                                  "destination")
        if not isinstance(p, PairDst):
            raise ValidationError(f"setp.{cmp}.{t.name} writes two predicates (p|q), one per half")
        check_pred(p.reg, "setp destination (first half)")
        check_pred(p.pred, "setp destination (second half)")
        dst = p
    else:
        check_pred(p, "setp destination")
        if q is not None:
            if t.is_float and t.bits == 16:
                raise ValidationError(f"setp.{cmp}.{t.name} writes one predicate: the complement destination (p|q) "
                                      "exists for 32- and 64-bit comparisons only")
            check_pred(q, "setp second destination")
        dst = p if q is None else PairDst(p, q)
    mods = (cmp,) + ((boolop,) if boolop else ()) + (("ftz",) if ftz else ())
    return make("setp", ("setp", cmp, boolop, "ftz" if ftz else None, t.name), [dst, a, b, *tail], n_dst=1, type=t,
                mods=mods, req=SETP_REQ.get(t, BASE))


def set_(cmp, dt, t, d, a, b, boolop=None, c=None, ftz=False):
    """set.cmp{.boolop}{.ftz}.dtype.stype d, a, b{, c}: d = all ones (integer dtype) or 1.0 (a float dtype;
    per half for packed pairs) when (a cmp b) boolop c holds, else 0 (`set_dtypes(t)`: the dtypes of each t)."""
    if t in SETP_TYPES and dt not in set_dtypes(t):
        raise ValidationError(f"set on .{t.name} writes {', '.join('.' + x.name for x in set_dtypes(t))}, "
                              f"not .{dt.name}")
    if ftz and {dt, t} & {T.bf16, T.bf16x2}:
        raise ValidationError("set.ftz does not apply to a .bf16 destination or comparison (ptxas refuses it)")
    tail = _compare_check("set", cmp, t, a, b, boolop, c, ftz)
    check_dst(d, dt, "set destination")
    mods = (cmp,) + ((boolop,) if boolop else ()) + (("ftz",) if ftz else ())
    req = SETP_REQ.get(t) or SETP_REQ.get(dt) or BASE  # a .bf16 side is sm_90 (PTX ISA 7.8)
    return make("set", ("set", cmp, boolop, "ftz" if ftz else None, dt.name, t.name), [d, a, b, *tail], n_dst=1,
                type=t, mods=mods, info=dt, req=req)


def slct(t, ct, d, a, b, c, ftz=False):
    """slct{.ftz}.type.ctype d, a, b, c: d = a if c >= 0 else b (c .s32 or .f32; .ftz only with .f32)."""
    if t not in SELP_TYPES:
        raise ValidationError(f"slct takes {', '.join('.' + x.name for x in SELP_TYPES)}, not .{t.name}")
    if ct not in SLCT_CTYPES:
        raise ValidationError(f"slct's selector is .s32 or .f32, not .{ct.name}")
    if ftz and ct is not T.f32:
        raise ValidationError("slct.ftz applies only to an .f32 selector")
    check_dst(d, t, "slct destination")
    check_value(a, t, "slct source 1")
    check_value(b, t, "slct source 2")
    check_value(c, ct, "slct selector")
    return make("slct", ("slct", "ftz" if ftz else None, t.name, ct.name), (d, a, b, c), n_dst=1, type=t,
                mods=("ftz",) if ftz else (), info=ct)


def testp(op, t, p, a):
    """testp.op.type p, a: whether a is finite / infinite / a number / NaN / normal / subnormal."""
    if op not in TESTP_OPS:
        raise ValidationError(f"testp tests one of {', '.join(TESTP_OPS)}, not {op!r}")
    if t not in TESTP_TYPES:
        raise ValidationError(f"testp takes .f32 or .f64, not .{t.name}")
    check_pred(p, "testp destination")
    check_value(a, t, "testp source")
    return make("testp", ("testp", op, t.name), (p, a), n_dst=1, type=t, mods=(op,))


def selp(t, d, a, b, p):
    """Build and check `selp.type d, a, b, p` (pure: no builder): d = p ? a : b."""
    if t not in SELP_TYPES:
        raise ValidationError(f"selp takes {', '.join('.' + x.name for x in SELP_TYPES)}, not .{t.name}")
    check_dst(d, t, "selp destination")
    check_value(a, t, "selp source 1")
    check_value(b, t, "selp source 2")
    check_pred(p, "selp selector")
    return make("selp", ("selp", t.name), (d, a, b, p), n_dst=1, type=t)


def mov(t, d, a):
    """Build and check `mov.type d, a` (pure: no builder).

    A `Vec` on either side packs or unpacks: ``mov.b64 %rd, {%lo, %hi}`` and ``mov.b64 {%lo, %hi}, %rd``.

    Args:
        t: the type moved.
        d: the destination register (or a Vec of parts to unpack into).
        a: the source: a register, immediate, special register, symbol, or a Vec of parts to pack.
    """
    if isinstance(a, Vec) or isinstance(d, Vec):
        # pack / unpack: mov.b64 %rd, {%lo, %hi}  /  mov.b64 {%lo, %hi}, %rd
        vec, scalar = (a, d) if isinstance(a, Vec) else (d, a)
        if (t.bits, len(vec)) not in PACK_FORMS:
            raise ValidationError("mov pack/unpack takes " + ", ".join(f".b{b} with {n} parts" for b, n in PACK_FORMS)
                                  + f"; got .{t.name} and {len(vec)} parts")
        part = T.lookup(f"b{t.bits // len(vec)}")
        for i, r in enumerate(vec):
            check_value(r, part, f"mov part {i}", imm_ok=isinstance(a, Vec))
        if isinstance(d, Vec):
            check_value(scalar, t, "mov source", imm_ok=False)
        else:
            check_dst(scalar, t, "mov destination")
        return make("mov", ("mov", T.lookup(f"b{t.bits}").name), (d, a), n_dst=1, type=t,
                    mods=("unpack",) if isinstance(d, Vec) else ("pack",), req=_B128 if t.bits == 128 else BASE)
    if t not in MOV_TYPES and t not in (T.bf16, T.f16x2, T.bf16x2):
        raise ValidationError(f"mov does not take .{t.name}")
    if t in (T.f16, T.bf16, T.bf16x2, T.f16x2):
        if type(a) is Imm and a.type is not None and a.type.is_float:  # PTX has no 16-bit float literal
            a = Imm(half_pattern(a.value, t, "mov source"), t.bits_type())
        t = t.bits_type()  # ptxas has no mov.f16: half values move as bits
    if type(d) is not Reg or d.type is not t:
        check_dst(d, t, "mov destination")
    if type(a) is Reg or type(a) is Imm:  # the common case: a register or an immediate
        if type(a) is not Reg or a.type is not t:
            check_value(a, t, "mov source")
        return make("mov", ("mov", t.name), (d, a), n_dst=1, type=t, req=_B128 if t is T.b128 else BASE)
    from .calls import FuncRef
    if isinstance(a, FuncRef):  # a device function's address, the target of an indirect call
        if t not in (T.u64, T.b64, T.s64):
            raise ValidationError(f"the address of function {a.name} is 64-bit: use mov.u64, not .{t.name}")
    elif isinstance(a, (Symbol, SymbolOffset)):
        if t not in (T.u32, T.u64, T.b32, T.b64, T.s32, T.s64):
            raise ValidationError(f"the address of {a.name} is an integer: use mov.u32 or mov.u64, not .{t.name}")
    elif isinstance(a, SpecialReg):
        if a.type.bits != t.bits:
            raise ValidationError(f"%{a.name} is {a.type.bits}-bit; mov it with a {a.type.bits}-bit type")
        return make("mov", ("mov", t.name), (d, a), n_dst=1, type=t,
                    req=SPECIAL_REQUIREMENTS.get(a.name, BASE))
    else:
        check_value(a, t, "mov source")
    return make("mov", ("mov", t.name), (d, a), n_dst=1, type=t, req=_B128 if t is T.b128 else BASE)


def bra(label: Label, uni=False):
    """Build `bra{.uni} label` (pure: no builder); `uni` promises the branch is uniform across the warp."""
    if not isinstance(label, Label):
        raise ValidationError(f"bra needs a Label, got {label!r}")
    return make("bra", ("bra", "uni" if uni else None), (label,), info=label, mods=("uni",) if uni else ())


def simple(opcode: str):
    """ret, exit, trap, brkpt: the control instructions without operands."""
    if opcode not in ("ret", "exit", "trap", "brkpt"):
        raise ValidationError(f"{opcode!r} is not one of ret, exit, trap, brkpt")
    return make(opcode, (opcode,))


REQ_STACK = Requirement(80, V("7.3"))


def alloca(d, size, align=None):
    """alloca.u64 d, size{, align}: d = a fresh .local allocation of `size` bytes on the stack."""
    check_dst(d, T.u64, "alloca destination")
    if (n := int_arg(size, "alloca size", ".u64")) is not None:
        if n <= 0:
            raise ValidationError(f"alloca size {n} must be positive")
        size = Imm(n)
    else:
        check_value(size, T.u64, "alloca size", imm_ok=False)
    ops = (d, size)
    if align is not None:
        align = int_arg(align, "alloca alignment")
        if align <= 0 or align & (align - 1):
            raise ValidationError(f"alloca alignment must be a power of two, got {align!r}")
        ops += (Imm(align),)
    return make("alloca", ("alloca", "u64"), ops, n_dst=1, type=T.u64, req=REQ_STACK)


def stack(opcode, d):
    """stacksave.u64 d / stackrestore.u64 d: read or reset the stack pointer (with alloca)."""
    if opcode not in ("stacksave", "stackrestore"):
        raise ValidationError(f"{opcode!r} is not stacksave or stackrestore")
    check_value(d, T.u64, f"{opcode} operand", imm_ok=False)
    return make(opcode, (opcode, "u64"), (d,), n_dst=1 if opcode == "stacksave" else 0, type=T.u64, req=REQ_STACK)


def pmevent(event, mask=False):
    """pmevent a (a performance-monitor event 0..15) / pmevent.mask m (a 16-bit mask of them)."""
    limit = 0xFFFF if mask else 15
    event = int_arg(event, f"pmevent{'.mask' if mask else ''}")
    if not 0 <= event <= limit:
        raise ValidationError(f"pmevent{'.mask' if mask else ''} takes an integer in 0..{limit}, got {event!r}")
    return make("pmevent", ("pmevent", "mask" if mask else None), (Imm(event),), mods=("mask",) if mask else ())


class ControlOps:
    """Builder methods for moves, comparisons, selects and branches."""
    def mov(self, a, *, type=None, dst=None, pred=None):
        """Copy a register, immediate, special register or a variable's address into a register.

        `a` may be a list of registers to pack into one (`mov.b64 %rd, {%lo, %hi}`).  A number moved as
        .f16 / .bf16 is written as its bit pattern (rounded to nearest even: ``mov(1.0, type=f16)`` is
        ``mov.b16 %h, 0x3C00``); as .f16x2 / .bf16x2 both halves get it.  ``type="b16"`` moves raw bits.
        """
        if isinstance(a, (list, tuple)):
            a = Vec(tuple(self._val(r) for r in a))
        a = self._val(a)
        if isinstance(a, (Symbol, SymbolOffset)):
            t = T.lookup(type) if type is not None else T.u32 if a.space == "shared" else T.u64
        elif isinstance(a, Vec):
            t = T.lookup(type) if type is not None else T.lookup(f"b{sum(r.type.bits for r in a)}")
            a = Vec(tuple(self._val(r, T.lookup(f"b{t.bits // len(a)}")) for r in a))
        else:
            t = infer_type(type, a, dst)
            a = self._val(a, t)
        d = self._dst(dst, T.decl_type(t))
        self.emit(mov(t, d, a), pred)
        return d

    def unpack(self, a, parts: int = 2, *, dst=None, pred=None):
        """Split a 64-bit (or 32-bit) register into parts: `mov.b64 {%lo, %hi}, %rd`."""
        a = self._val(a)
        t = T.lookup(f"b{a.type.bits}")
        pt = T.lookup(f"b{t.bits // parts}")
        d = Vec(tuple(self._val(r) for r in dst)) if dst is not None else Vec(
            tuple(self.reg(pt) for _ in range(parts)))
        self.emit(mov(t, d, a), pred)
        return d

    def _compare_operands(self, cmp, a, b, type, combine):
        a, b = self._val(a), self._val(b)
        t = infer_type(type, a, b)
        if t.kind == "b" and cmp not in ("eq", "ne"):
            t = t.as_unsigned()
        if combine and (not isinstance(combine, (tuple, list)) or len(combine) != 2 or combine[0] not in BOOL_OPS):
            ops = "|".join(f'"{x}"' for x in BOOL_OPS)
            raise ValidationError(f"combine= takes a pair ({ops}, c), c a predicate or ~predicate: "
                                  f"e.g. combine=(\"{BOOL_OPS[0]}\", p); got {combine!r}")
        boolop, c = combine if combine else (None, None)
        if c is not None:
            c = self._guard(c)
            c = NegPred(c.reg) if c.negate else c.reg
        return t, self._val(a, t), self._val(b, t), boolop, c

    def setp(self, cmp, a, b, *, type=None, dst=None, pred=None, combine=None, ftz=False, both=False,
             qdst=None):
        """Compare: returns a .pred register.  `combine=("and", p)` emits setp.cmp.and; ftz=True
        flushes subnormal inputs (of the compared format); both=True also writes the complement (`setp p|q`, with q
        = !(a cmp b) combined the same way) and returns (p, q).  On .f16x2 / .bf16x2 pairs it returns (p, q)
        always: p the low halves' comparison, q the high halves', each combined with c."""
        t, a, b, boolop, c = self._compare_operands(cmp, a, b, type, combine)
        if t.lanes == 2:  # packed pairs: one predicate per half, returned as (low half's, high half's)
            pair = tuple(dst) if dst is not None else (self.reg(T.pred), self.reg(T.pred))
            d = PairDst(self._dst(pair[0], T.pred), self._dst(pair[1], T.pred))
            self.emit(setp(cmp, t, d, a, b, boolop, c, None, ftz), pred)
            return d.reg, d.pred
        d = self._dst(dst, T.pred)
        q = self._dst(qdst, T.pred) if both or qdst is not None else None
        self.emit(setp(cmp, t, d, a, b, boolop, c, q, ftz), pred)
        return (d, q) if q is not None else d

    def set(self, cmp, a, b, *, to=T.u32, type=None, dst=None, pred=None, combine=None, ftz=False):
        """`set.cmp{.boolop}{.ftz}.dtype.stype d, a, b{, c}`: compare into a register, all ones (to=u32/s32)
        or 1.0 (to=f32) for true and 0 for false; `combine` and `ftz` as for `setp`."""
        t, a, b, boolop, c = self._compare_operands(cmp, a, b, type, combine)
        dt = T.lookup(to)
        d = self._dst(dst, dt)
        self.emit(set_(cmp, dt, t, d, a, b, boolop, c, ftz), pred)
        return d

    def slct(self, a, b, c, *, type=None, ftz=False, dst=None, pred=None):
        """`slct{.ftz}.type.ctype d, a, b, c`: d = a if c >= 0 else b; the selector c is .s32 or .f32
        (its register type; an immediate: .s32 for ints, .f32 for floats)."""
        a, b, c = self._val(a), self._val(b), self._val(c)
        t = infer_type(type, a, b)
        ct = c.type if hasattr(c, "type") and c.type in (T.s32, T.f32) else (
            T.f32 if isinstance(getattr(c, "value", None), float) else T.s32)
        d = self._dst(dst, t)
        self.emit(slct(t, ct, d, self._val(a, t), self._val(b, t), self._val(c, ct), ftz), pred)
        return d

    def testp(self, op, a, *, type=None, dst=None, pred=None):
        """`testp.op.type p, a`: op is finite, infinite, number, notanumber, normal or subnormal."""
        a = self._val(a)
        t = infer_type(type, a)
        p = self._dst(dst, T.pred)
        self.emit(testp(op, t, p, self._val(a, t)), pred)
        return p

    def selp(self, a, b, p, *, type=None, dst=None, pred=None):
        """d = p ? a : b."""
        a, b = self._val(a), self._val(b)
        t = infer_type(type, a, b)
        d = self._dst(dst, t)
        self.emit(selp(t, d, self._val(a, t), self._val(b, t), self._val(p)), pred)
        return d

    def bra(self, label, *, pred=None, uni=False):
        """`bra{.uni} label`: jump to `label` (from `label()`; it must be placed before `finish`).

        Args:
            label: the target Label.
            pred: a .pred register (``~p`` negated): ``@p bra``, a conditional branch.
            uni: emit ``bra.uni`` (the branch goes the same way for the whole warp).
        """
        self._use_label(label)
        self.emit(bra(label, uni), pred)

    def stacksave(self, *, dst=None, pred=None):
        """`stacksave.u64 d`: the current stack pointer (to restore after alloca-style use)."""
        d = self._dst(dst, T.u64)
        self.emit(stack("stacksave", d), pred)
        return d

    def alloca(self, size, *, align=None, dst=None, pred=None):
        """`alloca.u64 d, size{, align}`: allocate `size` bytes (an int or a .u64 register) on the
        thread's stack; d is their .local address (use it with space="local")."""
        d = self._dst(dst, T.u64)
        self.emit(alloca(d, int_or_val(self._val, size, "alloca size", ".u64"), align), pred)
        return d

    def stackrestore(self, sp, *, pred=None):
        """`stackrestore.u64 sp`: reset the stack pointer to a value from `stacksave`."""
        self.emit(stack("stackrestore", self._val(sp)), pred)

    def pmevent(self, event, *, mask=False, pred=None):
        """`pmevent a` / `pmevent.mask m`: signal performance-monitor event(s) (a counter trigger)."""
        self.emit(pmevent(event, mask), pred)

    def brkpt(self, *, pred=None):
        """`brkpt`: suspend the thread at a breakpoint (for a debugger)."""
        self.emit(simple("brkpt"), pred)

    def ret(self, *, pred=None):
        """`ret`: return from the kernel (where `pred` holds, if given); `finish` adds a final one."""
        self.emit(simple("ret"), pred)

    def exit(self, *, pred=None):
        """`exit`: end the thread (where `pred` holds, if given)."""
        self.emit(simple("exit"), pred)

    def trap(self, *, pred=None):
        """`trap`: abort the kernel with an error the host sees at the next synchronization (where `pred` holds,
        if given).
        """
        self.emit(simple("trap"), pred)

