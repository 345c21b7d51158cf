"""Bit logic: and or xor not cnot, shl shr, lop3 (with an optional predicate output), prmt, shf,
bfe bfi, popc clz brev bfind (and bfind.shiftamt), bmsk, szext, fns."""

from __future__ import annotations

from ..errors import ValidationError
from . import types as T
from .arith import infer_type
from .instruction import check_dst, check_pred, check_sources, check_value, int_arg, make
from .operands import Imm, NegPred, PairDst, Reg
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

LOGIC_TYPES = (T.pred, T.b16, T.b32, T.b64)
SHIFT_TYPES = {"shl": (T.b16, T.b32, T.b64),
               "shr": (T.b16, T.b32, T.b64, T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)}
PRMT_MODES = ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")
BITFIELD = {
    "bfe": (T.u32, T.u64, T.s32, T.s64),
    "bfi": (T.b32, T.b64),
    "popc": (T.b32, T.b64),
    "clz": (T.b32, T.b64),
    "brev": (T.b32, T.b64),
    "bfind": (T.u32, T.u64, T.s32, T.s64),
}


#: bmsk / szext: mode -> how out-of-range positions and widths are treated (both need PTX 7.6).
MASK_MODES = ("clamp", "wrap")
SZEXT_TYPES = (T.u32, T.s32)
REQ_BMSK = Requirement(80, V("7.6"))
#: lop3 with a predicate output: p = (d != 0) BoolOp q (PTX 8.2).
LOP3_BOOL_OPS = ("and", "or")
REQ_LOP3_PRED = Requirement(80, V("8.2"))


def _types_msg(ts):
    return ", ".join("." + t.name for t in ts)


def logic(opcode, t, d, srcs):
    """Build and check `and/or/xor/not/cnot.type d, srcs...` (pure: no builder).

    Args:
        opcode: "and", "or", "xor", "not" or "cnot".
        t: the type; an integer type is taken as the bit type of its width (.pred .b16 .b32 .b64).
        d: the destination register.
        srcs: the source operands (two, or one for not and cnot).
    """
    if opcode == "cnot" and t.is_pred:
        raise ValidationError("cnot has no .pred form; use not.pred (or xor with 1)")
    if t not in LOGIC_TYPES:
        # integer registers are fine with a bit type of the same width
        bt = t.bits_type() if not t.is_float else None
        if bt not in LOGIC_TYPES:
            raise ValidationError(f"{opcode} takes {_types_msg(LOGIC_TYPES)}, not .{t.name}")
        t = bt
    if type(d) is not Reg or d.type is not t:
        check_dst(d, t, f"{opcode} destination")
    check_sources(opcode, srcs, t)
    return make(opcode, (opcode, t.name), (d, *srcs), n_dst=1, type=t)


def shift(opcode, t, d, a, n):
    """Build and check `shl.bN` / `shr.type d, a, n` (pure: no builder).

    Args:
        opcode: "shl" (bit types) or "shr" (logical on .b/.u, arithmetic on .s).
        t: the type of `a` and `d`.
        d: the destination register.
        a: the value shifted.
        n: the shift amount, .u32.
    """
    if t not in SHIFT_TYPES[opcode]:
        if opcode == "shl" and not t.is_float and t.bits_type() in SHIFT_TYPES["shl"]:
            t = t.bits_type()
        else:
            raise ValidationError(f"{opcode} takes {_types_msg(SHIFT_TYPES[opcode])}, not .{t.name}")
    if type(d) is not Reg or d.type is not t:
        check_dst(d, t, f"{opcode} destination")
    if type(a) is not Reg or a.type is not t:
        check_value(a, t, f"{opcode} source")
    if type(n) is not Imm or n.type is not None or type(n.value) is not int or not 0 <= n.value < 2 ** 32:
        check_value(n, T.u32, f"{opcode} shift amount")
    return make(opcode, (opcode, t.name), (d, a, n), n_dst=1, type=t)


def lop3(d, a, b, c, lut: int, p=None, boolop=None, q=None):
    """lop3.b32 d, a, b, c, lut; with `p`, `lop3.boolop.b32 d|p, a, b, c, lut, q`: p = (d != 0)
    boolop q (`and`/`or`; q a predicate, possibly negated, or 0/1)."""
    lut = int_arg(lut, "lop3 lookup table")
    if not 0 <= lut <= 255:
        raise ValidationError(f"lop3 lookup table must be an int in 0..255, got {lut!r}")
    for i, x in enumerate((a, b, c)):
        check_value(x, T.b32, f"lop3 source {i + 1}")
    check_dst(d, T.b32, "lop3 destination")
    if p is None:
        if boolop is not None or q is not None:
            raise ValidationError("lop3 with a boolean operation needs the predicate output p")
        return make("lop3", ("lop3", "b32"), (d, a, b, c, Imm(lut)), n_dst=1, type=T.b32, info=lut)
    if boolop not in LOP3_BOOL_OPS:
        raise ValidationError(f"lop3 with a predicate output needs boolop 'and' or 'or', got {boolop!r}")
    check_pred(p, "lop3 predicate output")
    if isinstance(q, Imm):
        if q.value not in (0, 1):
            raise ValidationError(f"lop3 predicate input must be a predicate or 0/1, got {q.value}")
    else:
        check_pred(q.reg if isinstance(q, NegPred) else q, "lop3 predicate input")
    return make("lop3", ("lop3", boolop, "b32"), (PairDst(d, p), a, b, c, Imm(lut), q), n_dst=1, type=T.b32,
                info=lut, mods=(boolop,), req=REQ_LOP3_PRED)


def lut_of(fn) -> int:
    """The lop3 lookup table of a Python function of three ints: fn(0xF0, 0xCC, 0xAA) & 0xFF."""
    return fn(0xF0, 0xCC, 0xAA) & 0xFF


def prmt(d, a, b, c, mode=None):
    """Build and check `prmt.b32{.mode} d, a, b, c` (pure: no builder): a byte permute of the pair {b, a}
    selected by `c`; `mode` one of `PRMT_MODES` or None for the generic form.
    """
    if mode is not None and mode not in PRMT_MODES:
        raise ValidationError(f"prmt mode must be one of {PRMT_MODES}, got {mode!r}")
    for i, x in enumerate((a, b, c)):
        check_value(x, T.b32, f"prmt source {i + 1}")
    check_dst(d, T.b32, "prmt destination")
    return make("prmt", ("prmt", "b32", mode), (d, a, b, c), n_dst=1, type=T.b32,
                mods=(mode,) if mode else ())


def shf(direction, d, a, b, c, mode="wrap"):
    """Build and check `shf.{l,r}.{wrap,clamp}.b32 d, a, b, c` (pure: no builder): the funnel shift of the 64-bit
    pair {b, a} by `c`.

    Args:
        direction: "l" or "r".
        d: the destination register.
        a: the low word.
        b: the high word.
        c: the shift amount, .u32.
        mode: "wrap" (amount mod 32) or "clamp" (amount clamped to 32).
    """
    if direction not in ("l", "r"):
        raise ValidationError(f"shf direction is 'l' or 'r', got {direction!r}")
    if mode not in ("wrap", "clamp"):
        raise ValidationError(f"shf mode is 'wrap' or 'clamp', got {mode!r}")
    check_dst(d, T.b32, "shf destination")
    check_value(a, T.b32, "shf low word")
    check_value(b, T.b32, "shf high word")
    check_value(c, T.u32, "shf shift amount")
    return make("shf", ("shf", direction, mode, "b32"), (d, a, b, c), n_dst=1, type=T.b32,
                mods=(direction, mode))


def bmsk(mode, d, a, b):
    """bmsk.{clamp,wrap}.b32 d, a, b: a mask of b one-bits starting at bit a."""
    if mode not in MASK_MODES:
        raise ValidationError(f"bmsk mode is 'clamp' or 'wrap', got {mode!r}")
    check_dst(d, T.b32, "bmsk destination")
    check_value(a, T.u32, "bmsk start position")
    check_value(b, T.u32, "bmsk width")
    return make("bmsk", ("bmsk", mode, "b32"), (d, a, b), n_dst=1, type=T.b32, mods=(mode,), req=REQ_BMSK)


def szext(mode, t, d, a, b):
    """szext.{clamp,wrap}.{s32,u32} d, a, b: sign- (s32) or zero-extend (u32) the low b bits of a."""
    if mode not in MASK_MODES:
        raise ValidationError(f"szext mode is 'clamp' or 'wrap', got {mode!r}")
    if t not in SZEXT_TYPES:
        raise ValidationError(f"szext takes {_types_msg(SZEXT_TYPES)}, not .{t.name}")
    check_dst(d, t, "szext destination")
    check_value(a, t, "szext source")
    check_value(b, T.u32, "szext width")
    return make("szext", ("szext", mode, t.name), (d, a, b), n_dst=1, type=t, mods=(mode,), req=REQ_BMSK)


def fns(d, mask, base, offset):
    """fns.b32 d, mask, base, offset: the bit position of the offset-th set bit of mask counted from
    bit base (upward for offset > 0, downward for offset < 0; offset 0: base itself if set), or
    0xFFFFFFFF when there is none."""
    check_dst(d, T.b32, "fns destination")
    check_value(mask, T.b32, "fns mask")
    check_value(base, T.u32, "fns base")
    check_value(offset, T.s32, "fns offset")
    if isinstance(base, Imm) and not 0 <= base.value <= 31:
        raise ValidationError(f"fns base {base.value} is outside 0..31")
    return make("fns", ("fns", "b32"), (d, mask, base, offset), n_dst=1, type=T.b32, req=BASE)


def bitfield(opcode, t, d, srcs, shiftamt=False):
    """Build and check one of `bfe bfi popc clz brev bfind` (pure: no builder).

    Args:
        opcode: the opcode; the legal types are in `BITFIELD`.
        t: the operand type (a bit type of the same width is used where the opcode takes only bit types).
        d: the destination (.u32 for popc, clz and bfind).
        srcs: ``(a, pos, len)`` for bfe, ``(field, base, pos, len)`` for bfi, ``(a,)`` otherwise.
        shiftamt: for bfind, ``bfind.shiftamt``: the left shift that moves that bit to the top.
    """
    legal = BITFIELD[opcode]
    if t not in legal:
        alt = t.bits_type() if opcode in ("bfi", "popc", "clz", "brev") and not t.is_float else None
        if alt not in legal:
            raise ValidationError(f"{opcode} takes {_types_msg(legal)}, not .{t.name}")
        t = alt
    dt = T.u32 if opcode in ("popc", "clz", "bfind") else t
    check_dst(d, dt, f"{opcode} destination")
    n_pos = {"bfe": 1, "bfi": 2}.get(opcode)
    if n_pos is not None:
        for i, role in ((n_pos, "position"), (n_pos + 1, "length")):
            x = srcs[i]
            if isinstance(x, Imm) and isinstance(x.value, int) and not 0 <= x.value <= 255:
                raise ValidationError(f"{opcode} {role} {x.value} is outside 0..255 (ptxas takes an 8-bit "
                                      "immediate; wider fields are pointless anyway)")
    if opcode == "bfe":
        check_value(srcs[0], t, "bfe source")
        check_value(srcs[1], T.u32, "bfe position")
        check_value(srcs[2], T.u32, "bfe length")
    elif opcode == "bfi":
        check_value(srcs[0], t, "bfi field")
        check_value(srcs[1], t, "bfi base")
        check_value(srcs[2], T.u32, "bfi position")
        check_value(srcs[3], T.u32, "bfi length")
    else:
        check_value(srcs[0], t, f"{opcode} source")
    if shiftamt and opcode != "bfind":
        raise ValidationError(f".shiftamt exists only for bfind, not {opcode}")
    return make(opcode, (opcode, "shiftamt" if shiftamt else None, t.name), (d, *srcs), n_dst=1, type=t,
                mods=("shiftamt",) if shiftamt else ())


class BitOps:
    """Builder methods for bit logic, shifts, permutes and bit fields; each returns the destination register.

    Integer operands are used as the bit type of their width (``and.b32`` on a .u32 register); a Python int is
    an immediate.
    """
    def _logic(self, opcode, srcs, type, dst, pred):
        srcs = [self._val(s) for s in srcs]
        t = infer_type(type, *srcs)
        if not t.is_pred and not t.is_float:
            t = t.bits_type()
        else:  # only a float type changes what a literal becomes (integer literals stay untyped)
            srcs = [self._val(s, t) for s in srcs]
        d = self._dst(dst, t)
        self.emit(logic(opcode, t, d, srcs), pred)
        return d

    def and_(self, a, b, *, type=None, dst=None, pred=None):
        """`and.type d, a, b`: bitwise and (logical on .pred); returns d. `type` (the PTX type; inferred from the
        first register), `dst` and `pred` as for every builder method.
        """
        return self._logic("and", (a, b), type, dst, pred)

    def or_(self, a, b, *, type=None, dst=None, pred=None):
        """`or.type d, a, b`: bitwise or (logical on .pred); returns d. `type` (the PTX type; inferred from the
        first register), `dst` and `pred` as for every builder method.
        """
        return self._logic("or", (a, b), type, dst, pred)

    def xor(self, a, b, *, type=None, dst=None, pred=None):
        """`xor.type d, a, b`: bitwise exclusive or (on .pred too); returns d. `type` (the PTX type; inferred
        from the first register), `dst` and `pred` as for every builder method.
        """
        return self._logic("xor", (a, b), type, dst, pred)

    def not_(self, a, *, type=None, dst=None, pred=None):
        """`not.type d, a`: bitwise complement (logical not on .pred); returns d. `type` (the PTX type; inferred
        from the first register), `dst` and `pred` as for every builder method.
        """
        return self._logic("not", (a,), type, dst, pred)

    def cnot(self, a, *, type=None, dst=None, pred=None):
        """`cnot.type d, a`: d = (a == 0) ? 1 : 0, the C-style logical not (no .pred form); returns d. `type`
        (the PTX type; inferred from the first register), `dst` and `pred` as for every builder method.
        """
        return self._logic("cnot", (a,), type, dst, pred)

    def _shift(self, opcode, a, n, type, dst, pred):
        a = self._val(a)
        t = infer_type(type, a)
        if opcode == "shl" and not t.is_float:
            t = t.bits_type()
        d = self._dst(dst, t)
        self.emit(shift(opcode, t, d, self._val(a, t), self._val(n, T.u32)), pred)
        return d

    def shl(self, a, n, *, type=None, dst=None, pred=None):
        """`shl.bN d, a, n`: a shifted left by `n` (a .u32 register or int; amounts over the width give 0);
        returns d. `type` (the PTX type; inferred from the first register), `dst` and `pred` as for every
        builder method.
        """
        return self._shift("shl", a, n, type, dst, pred)

    def shr(self, a, n, *, type=None, dst=None, pred=None):
        """Logical shift for .u/.b types, arithmetic for .s types."""
        return self._shift("shr", a, n, type, dst, pred)

    def lop3(self, a, b, c, lut, *, dst=None, pred=None, combine=None, pdst=None):
        """Any 3-input logic function; `lut` is an int or a function f(a, b, c) of Python ints.

        `combine=("and"|"or", q)` also writes a predicate, `lop3.and.b32 d|p, a, b, c, lut, q`:
        p = (d != 0) and/or q (q a predicate, ~q, or True/False; PTX 8.2); then the method returns
        (d, p), p being `pdst` or a new predicate.
        """
        if callable(lut):
            lut = lut_of(lut)
        d = self._dst(dst, T.b32)
        srcs = (self._val(a, T.b32), self._val(b, T.b32), self._val(c, T.b32))
        if combine is None:
            self.emit(lop3(d, *srcs, lut), pred)
            return d
        if not isinstance(combine, (tuple, list)) or len(combine) != 2 or combine[0] not in LOP3_BOOL_OPS:
            ops = "|".join(f'"{x}"' for x in LOP3_BOOL_OPS)
            raise ValidationError(f"lop3 combine= takes a pair ({ops}, q), q a predicate, ~predicate or True/False: "
                                  f"e.g. combine=(\"{LOP3_BOOL_OPS[0]}\", p); got {combine!r}")
        boolop, q = combine
        if isinstance(q, bool):
            q = Imm(int(q))
        else:
            g = self._guard(q)
            q = NegPred(g.reg) if g.negate else g.reg
        p = self._dst(pdst, T.pred)
        self.emit(lop3(d, *srcs, lut, p, boolop, q), pred)
        return d, p

    def prmt(self, a, b, selector, *, mode=None, dst=None, pred=None):
        """`prmt.b32{.mode} d, a, b, selector`: pick four bytes of the pair {b, a}; returns d.

        Args:
            a: the low word (bytes 0-3).
            b: the high word (bytes 4-7).
            selector: a register or int; in the generic form each nibble picks a byte (bit 3 replicates its
                sign).
            mode: one of f4e b4e rc8 ecl ecr rc16, or None for the generic form.
            dst: a register to write instead of a new one.
            pred: a .pred register (``~p`` negated) guarding the instruction.
        """
        d = self._dst(dst, T.b32)
        self.emit(prmt(d, self._val(a, T.b32), self._val(b, T.b32), self._val(selector, T.b32), mode), pred)
        return d

    def shf(self, direction, lo, hi, n, *, mode="wrap", dst=None, pred=None):
        """Funnel shift of the 64-bit pair {hi, lo}."""
        d = self._dst(dst, T.b32)
        self.emit(shf(direction, d, self._val(lo, T.b32), self._val(hi, T.b32), self._val(n, T.u32), mode),
                  pred)
        return d

    def bmsk(self, start, width, *, mode="clamp", dst=None, pred=None):
        """`bmsk.{clamp,wrap}.b32 d, start, width`: `width` one-bits from bit `start` (clamp: values
        over 32 count as 32; wrap: taken modulo 32)."""
        d = self._dst(dst, T.b32)
        self.emit(bmsk(mode, d, self._val(start, T.u32), self._val(width, T.u32)), pred)
        return d

    def szext(self, a, width, *, type=None, mode="clamp", dst=None, pred=None):
        """`szext.{clamp,wrap}.{s32,u32} d, a, width`: the low `width` bits of a, sign-extended
        (.s32) or zero-extended (.u32); width 0 gives 0."""
        a = self._val(a)
        t = T.lookup(type) if type is not None else (a.type if getattr(a, "type", None) in SZEXT_TYPES else T.u32)
        d = self._dst(dst, t)
        self.emit(szext(mode, t, d, self._val(a, t), self._val(width, T.u32)), pred)
        return d

    def fns(self, mask, base, offset, *, dst=None, pred=None):
        """`fns.b32 d, mask, base, offset`: find the n-th set bit (see `ptxforge.isa.bits.fns`)."""
        d = self._dst(dst, T.b32)
        self.emit(fns(d, self._val(mask, T.b32), self._val(base, T.u32), self._val(offset, T.s32)), pred)
        return d

    def _bitfield(self, opcode, srcs, type, dst, pred, shiftamt=False):
        srcs = [self._val(s) for s in srcs]
        t = infer_type(type, *srcs)
        if opcode in ("bfi", "popc", "clz", "brev") and not t.is_float:
            t = t.bits_type()
        srcs = [self._val(s, t if i < (2 if opcode == "bfi" else 1) else T.u32) for i, s in enumerate(srcs)]
        d = self._dst(dst, T.u32 if opcode in ("popc", "clz", "bfind") else t)
        self.emit(bitfield(opcode, t, d, srcs, shiftamt), pred)
        return d

    def bfe(self, a, pos, length, *, type=None, dst=None, pred=None):
        """`bfe.type d, a, pos, length`: extract `length` bits of `a` from bit `pos`, zero- or sign-extended by
        the type (.u32 .u64 .s32 .s64); returns d. `type` (the PTX type; inferred from the first register),
        `dst` and `pred` as for every builder method.
        """
        return self._bitfield("bfe", (a, pos, length), type, dst, pred)

    def bfi(self, field, base, pos, length, *, type=None, dst=None, pred=None):
        """`bfi.bN d, field, base, pos, length`: `base` with `length` bits from bit `pos` replaced by the low
        bits of `field`; returns d. `type` (the PTX type; inferred from the first register), `dst` and `pred`
        as for every builder method.
        """
        return self._bitfield("bfi", (field, base, pos, length), type, dst, pred)

    def popc(self, a, *, type=None, dst=None, pred=None):
        """`popc.bN d, a`: the number of set bits of `a`, into a .u32; returns d. `type` (the PTX type; inferred
        from the first register), `dst` and `pred` as for every builder method.
        """
        return self._bitfield("popc", (a,), type, dst, pred)

    def clz(self, a, *, type=None, dst=None, pred=None):
        """`clz.bN d, a`: the number of leading zero bits of `a`, into a .u32; returns d. `type` (the PTX type;
        inferred from the first register), `dst` and `pred` as for every builder method.
        """
        return self._bitfield("clz", (a,), type, dst, pred)

    def brev(self, a, *, type=None, dst=None, pred=None):
        """`brev.bN d, a`: `a` with its bits reversed; returns d. `type` (the PTX type; inferred from the first
        register), `dst` and `pred` as for every builder method.
        """
        return self._bitfield("brev", (a,), type, dst, pred)

    def bfind(self, a, *, type=None, shiftamt=False, dst=None, pred=None):
        """`bfind{.shiftamt}.type d, a`: the position of the most significant non-sign bit of a
        (0xFFFFFFFF if none); shiftamt=True gives the left shift that moves it to the top instead."""
        return self._bitfield("bfind", (a,), type, dst, pred, shiftamt)
