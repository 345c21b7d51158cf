"""Moves, comparisons and control: mov, setp, selp, bra, ret, exit."""

from __future__ import annotations

from ..errors import ValidationError
from . import types as T
from .arith import infer_type
from .instruction import check_dst, check_pred, check_value, make
from .operands import SPECIAL_REQUIREMENTS, Label, NegPred, PairDst, SpecialReg, Symbol, Vec
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


def setp(cmp, t, p, a, b, boolop=None, c=None):
    """Build and check `setp.cmp{.boolop}.type p, a, b{, c}` (pure: no builder).

    Args:
        cmp: the comparison, one of `cmp_ops(t)`.
        t: the type of `a` and `b` (one of `SETP_TYPES`).
        p: the .pred destination.
        a: first source.
        b: second source.
        boolop: "and", "or" or "xor" to combine the result with predicate `c`, or None.
        c: the predicate combined (a .pred register or its negation), with `boolop`.
    """
    if t not in SETP_TYPES:
        raise ValidationError(f"setp takes {', '.join('.' + x.name for x in SETP_TYPES)}, not .{t.name}")
    legal = cmp_ops(t)
    if cmp not in legal:
        raise ValidationError(f"setp.{cmp} is not defined for .{t.name}; legal comparisons: {', '.join(legal)}")
    if t.lanes == 2:  # packed pairs compare both halves: two predicates, written p|q
        if not isinstance(p, PairDst):
            raise ValidationError(f"setp.{cmp}.{t.name} writes two predicates (p|q), one per half")
        check_pred(p.reg, "setp destination (first half)")
        check_pred(p.pred, "setp destination (second half)")
    else:
        check_pred(p, "setp destination")
    half = t.is_float and (t.bits == 16 or t.lanes == 2)  # ptxas takes no immediates for half compares
    check_value(a, t, "setp source 1", imm_ok=not half)
    check_value(b, t, "setp source 2", imm_ok=not half)
    ops = [p, a, b]
    if boolop is not None:
        if boolop not in BOOL_OPS:
            raise ValidationError(f"setp combine op must be one of {BOOL_OPS}, got {boolop!r}")
        if c is None:
            raise ValidationError(f"setp.{cmp}.{boolop} needs a predicate to combine with")
        check_pred(c.reg if isinstance(c, NegPred) else c, "setp combine predicate")
        ops.append(c)
    return make("setp", ("setp", cmp, boolop, t.name), ops, n_dst=1, type=t, mods=(cmp,) + ((boolop,) if boolop else ()),
                req=SETP_REQ.get(t, BASE))


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
            raise ValidationError(f"mov pack/unpack takes " + ", ".join(f".b{b} with {n} parts" for b, n in PACK_FORMS)
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
        t = t.bits_type()  # ptxas has no mov.f16: half values move as bits
    check_dst(d, t, "mov destination")
    if isinstance(a, Symbol):
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
    """ret, exit, trap: the control instructions without operands."""
    if opcode not in ("ret", "exit", "trap"):
        raise ValidationError(f"{opcode!r} is not one of ret, exit, trap")
    return make(opcode, (opcode,))


class ControlOps:
    """Builder methods for moves, comparisons, selects and branches."""
    def mov(self, a, *, type=None, dst=None, pred=None):
        """Copy a register, immediate, special register or a variable's address into a register.

        `a` may be a list of registers to pack into one (`mov.b64 %rd, {%lo, %hi}`).
        """
        if isinstance(a, (list, tuple)):
            a = Vec(tuple(self._val(r) for r in a))
        a = self._val(a)
        if isinstance(a, Symbol):
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

    def setp(self, cmp, a, b, *, type=None, dst=None, pred=None, combine=None):
        """Compare: returns a .pred register.  `combine=("and", p)` emits setp.cmp.and."""
        a, b = self._val(a), self._val(b)
        t = infer_type(type, a, b)
        if t.kind == "b" and cmp not in ("eq", "ne"):
            t = t.as_unsigned()
        a, b = self._val(a, t), self._val(b, t)
        if t.lanes == 2:  # one predicate per half: returns (first, second)
            pair = tuple(dst) if dst is not None else (self.reg(T.pred), self.reg(T.pred))
            d = PairDst(self._dst(pair[0], T.pred), self._dst(pair[1], T.pred))
        else:
            d = self._dst(dst, T.pred)
        boolop, c = combine if combine else (None, None)
        if c is not None:
            c = self._guard(c)
            c = NegPred(c.reg) if c.negate else c.reg
        ins = setp(cmp, t, d, a, b, boolop, c)
        self.emit(ins, pred)
        return (d.reg, d.pred) if t.lanes == 2 else d

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

