"""Warp-level data exchange and votes: shfl.sync, vote.sync, redux.sync, match.sync, elect.sync,
activemask."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_pred, check_value, int_arg, make
from .operands import Imm, NegPred, PairDst, Reg
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

SHFL_MODES = ("up", "down", "bfly", "idx")
VOTE_MODES = ("all", "any", "uni", "ballot")
REDUX_OPS = {"add": (T.u32, T.s32), "min": (T.u32, T.s32), "max": (T.u32, T.s32),
             "and": (T.b32,), "or": (T.b32,), "xor": (T.b32,)}
FULL = 0xFFFFFFFF


@dataclass(frozen=True)
class ShflInfo:
    """Semantics of one shfl.sync: its mode (up, down, bfly, idx)."""
    mode: str


def _mask(m):
    if (n := int_arg(m, "member mask", ".b32")) is not None:
        if not 0 < n <= FULL:
            raise ValidationError(f"member mask must be a non-zero 32-bit lane mask, got {n:#x}")
        return Imm(n)
    check_value(m, T.b32, "member mask", imm_ok=False)
    return m


def shfl(mode, d, a, b, c, mask=FULL, p=None):
    """Build and check `shfl.sync.mode.b32 d{|p}, a, b, c, mask` (pure: no builder).

    Args:
        mode: one of `SHFL_MODES`.
        d: the .b32 destination.
        a: the value shared.
        b: the source lane (idx) or the lane offset / xor mask (up, down, bfly), 0..31.
        c: the clamp and segment mask operand.
        mask: the member mask (int or .b32 register).
        p: an optional .pred written true where the source lane was in range.
    """
    if mode not in SHFL_MODES:
        raise ValidationError(f"shfl mode must be one of {SHFL_MODES}, got {mode!r}")
    check_dst(d, T.b32, "shfl destination")
    check_value(a, T.b32, "shfl source")
    check_value(b, T.u32, "shfl lane/offset")
    check_value(c, T.u32, "shfl clamp/segment")
    if isinstance(b, Imm) and not 0 <= b.value <= 31:
        raise ValidationError(f"shfl lane/offset {b.value} is outside 0..31")
    dst = d if p is None else PairDst(d, p)
    return make("shfl", ("shfl", "sync", mode, "b32"), (dst, a, b, c, _mask(mask)), n_dst=1, type=T.b32,
                info=ShflInfo(mode), mods=(mode,))


def vote(mode, d, p, mask=FULL):
    """Build and check `vote.sync.mode.{pred,b32} d, p, mask` (pure: no builder): all/any/uni give a .pred,
    ballot a .b32 lane mask of where `p` holds.
    """
    if mode not in VOTE_MODES:
        raise ValidationError(f"vote mode must be one of {VOTE_MODES}, got {mode!r}")
    check_pred(p.reg if isinstance(p, NegPred) else p, f"vote.{mode} source")
    if mode == "ballot":
        check_dst(d, T.b32, "vote.ballot destination")
    else:
        check_pred(d, f"vote.{mode} destination")
    return make("vote", ("vote", "sync", mode, "b32" if mode == "ballot" else "pred"), (d, p, _mask(mask)),
                n_dst=1, mods=(mode,))


def redux(op, t, d, a, mask=FULL):
    """Build and check `redux.sync.op.type d, a, mask` (pure: no builder; sm_80): the reduction of `a` over the
    lanes of `mask`; ops and types in `REDUX_OPS`.
    """
    if op not in REDUX_OPS:
        raise ValidationError(f"redux.sync op must be one of {tuple(REDUX_OPS)}, got {op!r}")
    if t not in REDUX_OPS[op]:
        raise ValidationError(f"redux.sync.{op} takes " + ", ".join("." + x.name for x in REDUX_OPS[op]))
    for r, role in ((d, "destination"), (a, "source")):
        if isinstance(r, Reg) and r.type.is_float:
            raise ValidationError(f"redux.sync.{op} {role} {r} is .{r.type.name}: redux reduces integer "
                                  "registers (.b32/.u32/.s32), not floats")
    check_dst(d, t, "redux destination")
    check_value(a, t, "redux source", imm_ok=False)
    return make("redux", ("redux", "sync", op, t.name), (d, a, _mask(mask)), n_dst=1, type=t,
                req=Requirement(80, V("7.0")), mods=(op,))


def elect(p, mask=FULL, lane=None):
    """elect.sync {lane|_}|p, mask (sm_90): p is true in exactly one active lane of the mask; `lane`
    (a .b32 register, optional) receives the elected lane's id."""
    from .operands import DISCARD
    check_pred(p, "elect.sync predicate")
    if lane is not None:
        check_dst(lane, T.b32, "elect.sync lane id")
    return make("elect", ("elect", "sync"), (PairDst(DISCARD if lane is None else lane, p), _mask(mask)), n_dst=1,
                req=Requirement(90, V("8.0")))


def activemask(d):
    """activemask.b32 d: the lanes of the warp executing this instruction."""
    check_dst(d, T.b32, "activemask destination")
    return make("activemask", ("activemask", "b32"), (d,), n_dst=1, req=Requirement(80, V("6.2")))


MATCH_MODES = ("any", "all")
MATCH_TYPES = (T.b32, T.b64)
REQ_MATCH = Requirement(80, V("6.0"))


def match(mode, t, d, a, mask=FULL, p=None):
    """match.any.sync.type d, a, mask: the lanes of mask whose a equals this lane's; match.all.sync
    .type d{|p}, a, mask: mask if every lane's a is equal (p true), else 0 (p false)."""
    if mode not in MATCH_MODES:
        raise ValidationError(f"match mode is 'any' or 'all', got {mode!r}")
    if t not in MATCH_TYPES:
        raise ValidationError(f"match compares .b32 or .b64 values, not .{t.name}")
    check_dst(d, T.b32, f"match.{mode} destination")
    check_value(a, t, f"match.{mode} source")
    if p is not None:
        if mode != "all":
            raise ValidationError("only match.all writes a predicate")
        check_pred(p, "match.all predicate")
    return make("match", ("match", mode, "sync", t.name), (d if p is None else PairDst(d, p), a, _mask(mask)),
                n_dst=1, type=t, req=REQ_MATCH, mods=(mode,))


REQ_MOVMATRIX = Requirement(80, V("7.8"))


def movmatrix(d, a):
    """movmatrix.sync.aligned.m8n8.trans.b16 d, a: transpose an 8x8 b16 matrix held one row pair per
    lane group (the ldmatrix / mma fragment layout) across the warp."""
    check_dst(d, T.b32, "movmatrix destination")
    check_value(a, T.b32, "movmatrix source", imm_ok=False)
    return make("movmatrix", ("movmatrix", "sync", "aligned", "m8n8", "trans", "b16"), (d, a), n_dst=1, type=T.b16,
                req=REQ_MOVMATRIX)


class WarpOps:
    """Builder methods for warp-level operations: shuffles, votes, reductions, elect and activemask."""
    def shfl(self, mode, value, lane_or_offset, *, clamp=None, mask=FULL, dst=None, in_range=None, pred=None):
        """shfl.sync.<mode>.b32.  `clamp` defaults to 31 for idx/bfly/down and 0 for up."""
        if clamp is None:
            clamp = 0 if mode == "up" else 31
        d = self._dst(dst, T.b32)
        p = self._val(in_range) if in_range is not None else None
        if isinstance(mask, Reg):
            mask = self._val(mask)
        self.emit(shfl(mode, d, self._val(value, T.b32), self._val(lane_or_offset, T.u32), self._val(clamp, T.u32),
                       mask, p), pred)
        return d

    def vote(self, mode, p, *, mask=FULL, dst=None, pred=None):
        """`vote.sync.mode mask`: a warp vote on predicate `p` (a .pred register or ``~p``); returns d.

        Args:
            mode: "all", "any", "uni" (a .pred result) or "ballot" (a .b32 mask of the lanes where `p` holds).
            p: the predicate voted on.
            mask: the lanes taking part (default all 32).
            dst: a register to write instead of a new one.
            pred: a .pred register guarding it.
        """
        d = self._dst(dst, T.b32 if mode == "ballot" else T.pred)
        g = self._guard(p)
        self.emit(vote(mode, d, NegPred(g.reg) if g.negate else g.reg, mask), pred)
        return d

    def redux(self, op, value, *, type=None, mask=FULL, dst=None, pred=None):
        """`redux.sync.op.type d, value, mask` (sm_80): reduce `value` over the lanes of `mask`; every lane gets
        the result d.

        Args:
            op: "add", "min", "max" (.u32/.s32), or "and", "or", "xor" (.b32).
            value: a 32-bit register.
            type: the type; by default that of `value` (bit type for the logic ops).
            mask: the lanes taking part (default all 32).
            dst: a register to write instead of a new one.
            pred: a .pred register guarding it.
        """
        from .arith import infer_type
        v = self._val(value)
        t = infer_type(type, v)
        if op in ("and", "or", "xor"):
            t = t.bits_type()
        d = self._dst(dst, t)
        self.emit(redux(op, t, d, v, mask), pred)
        return d

    def elect_sync(self, *, mask=FULL, dst=None, lane=False, lane_dst=None):
        """elect.sync (sm_90): a predicate true in exactly one active lane.

        lane=True (or lane_dst=) also writes the elected lane's id (`elect.sync %r|%p, mask`) and
        returns (lane, p)."""
        p = self._dst(dst, T.pred)
        want_lane = lane or lane_dst is not None
        r = self._dst(lane_dst, T.b32) if want_lane else None
        self.emit(elect(p, mask, r))
        return (r, p) if want_lane else p

    def match(self, mode, value, *, mask=FULL, type=None, dst=None, pred_dst=None, with_pred=False, pred=None):
        """`match.any.sync` / `match.all.sync` over the lanes of `mask`: returns the lane mask (and,
        for mode "all" with with_pred=True or pred_dst=, (mask, p) with p true when all agree)."""
        from .arith import infer_type
        v = self._val(value)
        t = infer_type(type, v)
        t = T.lookup(f"b{t.bits}")
        d = self._dst(dst, T.b32)
        p = self._dst(pred_dst, T.pred) if (with_pred or pred_dst is not None) else None
        if isinstance(mask, Reg):
            mask = self._val(mask)
        self.emit(match(mode, t, d, self._val(v, t), mask, p), pred)
        return (d, p) if p is not None else d

    def movmatrix(self, a, *, dst=None, pred=None):
        """`movmatrix.sync.aligned.m8n8.trans.b16 d, a`: the warp's 8x8 b16 fragment `a`, transposed."""
        d = self._dst(dst, T.b32)
        self.emit(movmatrix(d, self._val(a)), pred)
        return d

    def activemask(self, *, dst=None):
        """`activemask.b32 d`: the mask of the lanes currently executing; returns d."""
        d = self._dst(dst, T.b32)
        self.emit(activemask(d))
        return d
