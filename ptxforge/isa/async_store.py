"""Stores and reductions into (possibly another CTA's) shared memory that complete on that CTA's
mbarrier (sm_90): st.async and red.async, and the multimem accesses of a multicast object
(multimem.ld_reduce, multimem.st, multimem.red).

Legal forms as data: `ST_ASYNC_TYPES` (element type -> vector widths), `RED_ASYNC_OPS` (operation ->
types) and `MULTIMEM_OPS` / `MULTIMEM_SEMANTICS`.  Both st.async and red.async name the
destination and the mbarrier by .shared::cluster addresses (from mapa, or the CTA's own .shared
addresses); the mbarrier's transaction count is decremented by the bytes written.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_dst, check_value, check_vec, make
from .operands import Vec
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

REQ_ASYNC_STORE = Requirement(90, V("8.1"))
ST_ASYNC_TYPES = {T.b32: (1, 2, 4), T.u32: (1, 2, 4), T.s32: (1, 2, 4), T.f32: (1, 2, 4),
                  T.b64: (1, 2), T.u64: (1, 2), T.s64: (1, 2), T.f64: (1, 2)}
RED_ASYNC_OPS = {"inc": (T.u32,), "dec": (T.u32,), "min": (T.u32, T.s32), "max": (T.u32, T.s32),
                 "add": (T.u32, T.s32, T.u64), "and": (T.b32,), "or": (T.b32,), "xor": (T.b32,)}
_COMPLETE = "mbarrier::complete_tx::bytes"


@dataclass(frozen=True)
class AsyncStoreInfo:
    """One st.async / red.async: the operation (None for st.async), type and vector width."""

    op: str | None
    type: T.ScalarType
    vec: int = 1


def st_async(addr, v, mbar, t, vec=1, weak=False):
    """st.async{.weak}.shared::cluster.mbarrier::complete_tx::bytes{.vN}.type [a], v, [mbar] (`weak`: the default
    semantics written out, as libcu++ spells it)."""
    if t not in ST_ASYNC_TYPES:
        raise ValidationError(f"st.async stores {', '.join('.' + x.name for x in ST_ASYNC_TYPES)}, not .{t.name}")
    if vec not in ST_ASYNC_TYPES[t]:
        raise ValidationError(f"st.async.{t.name} takes vector widths {ST_ASYNC_TYPES[t]}, not {vec}")
    a = check_addr(addr, "shared", "st.async destination")
    m = check_addr(mbar, "shared", "st.async mbarrier")
    if vec == 1:
        check_value(v, t, "st.async value", imm_ok=False)
    else:
        v = check_vec(v, vec, t, f"st.async.v{vec} value")
    return make("st.async", ("st", "async", "weak" if weak else None, "shared::cluster", _COMPLETE,
                             f"v{vec}" if vec > 1 else None, t.name),
                (a, v, m), req=REQ_ASYNC_STORE, type=t, info=AsyncStoreInfo(None, t, vec))


def red_async(op, addr, v, mbar, t):
    """red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [a], v, [mbar]."""
    if op not in RED_ASYNC_OPS:
        raise ValidationError(f"red.async operation is one of {', '.join(RED_ASYNC_OPS)}, not {op!r}")
    if t not in RED_ASYNC_OPS[op]:
        raise ValidationError(f"red.async.{op} takes {', '.join('.' + x.name for x in RED_ASYNC_OPS[op])}, "
                              f"not .{t.name}")
    a = check_addr(addr, "shared", "red.async destination")
    m = check_addr(mbar, "shared", "red.async mbarrier")
    check_value(v, t, "red.async value", imm_ok=False)
    return make("red.async", ("red", "async", "relaxed", "cluster", "shared::cluster", _COMPLETE, op, t.name),
                (a, v, m), req=REQ_ASYNC_STORE, type=t, info=AsyncStoreInfo(op, t), mods=(op,))


# ---------------------------------------------------------------- multimem

MULTIMEM_OPS = {"add": (T.u32, T.s32, T.u64, T.f32), "min": (T.u32, T.s32, T.u64, T.s64),
                "max": (T.u32, T.s32, T.u64, T.s64), "and": (T.b32, T.b64), "or": (T.b32, T.b64),
                "xor": (T.b32, T.b64)}
MULTIMEM_SEMANTICS = {"ld_reduce": ("weak", "relaxed", "acquire"), "st": ("weak", "relaxed", "release"),
                      "red": ("relaxed", "release")}
MULTIMEM_ST_TYPES = (T.b32, T.b64, T.u32, T.u64, T.s32, T.s64, T.f32, T.f64)
SCOPES = ("cta", "cluster", "gpu", "sys")


def _multimem_order(kind, sem, scope):
    if sem is None:
        if scope is not None:
            raise ValidationError(f"multimem.{kind}: a scope needs a memory order")
        return (None, None)
    if sem not in MULTIMEM_SEMANTICS[kind]:
        raise ValidationError(f"multimem.{kind} takes {', '.join('.' + s for s in MULTIMEM_SEMANTICS[kind])}, "
                              f"not .{sem}")
    if sem == "weak":
        if scope is not None:
            raise ValidationError(f"multimem.{kind}.weak takes no scope")
        return (sem, None)
    if scope not in SCOPES:
        raise ValidationError(f"multimem.{kind}.{sem} needs a scope, one of {', '.join(SCOPES)}")
    return (sem, scope)


def multimem(kind, t, addr, d=None, v=None, op=None, sem=None, scope=None):
    """multimem.ld_reduce{.sem.scope}.global.op.type d, [a] / multimem.st{.sem.scope}.global.type [a], v /
    multimem.red{.sem.scope}.global.op.type [a], v (sm_90): accesses of a multicast object."""
    if kind not in MULTIMEM_SEMANTICS:
        raise ValidationError(f"multimem is ld_reduce, st or red, not {kind!r}")
    order = _multimem_order(kind, sem, scope)
    a = check_addr(addr, "global", f"multimem.{kind}")
    if kind == "st":
        if op is not None:
            raise ValidationError("multimem.st takes no operation")
        if t not in MULTIMEM_ST_TYPES:
            raise ValidationError(f"multimem.st stores {', '.join('.' + x.name for x in MULTIMEM_ST_TYPES)}")
        check_value(v, t, "multimem.st value", imm_ok=False)
        ops, n_dst = (a, v), 0
    else:
        if op not in MULTIMEM_OPS:
            raise ValidationError(f"multimem.{kind} reduces with one of {', '.join(MULTIMEM_OPS)}, not {op!r}")
        if t not in MULTIMEM_OPS[op]:
            raise ValidationError(f"multimem.{kind}.{op} takes {', '.join('.' + x.name for x in MULTIMEM_OPS[op])}")
        if kind == "ld_reduce":
            check_dst(d, t, "multimem.ld_reduce destination")
            ops, n_dst = (d, a), 1
        else:
            check_value(v, t, "multimem.red value", imm_ok=False)
            ops, n_dst = (a, v), 0
    return make(f"multimem.{kind}", ("multimem", kind, *order, "global", op, t.name), ops, n_dst=n_dst,
                req=REQ_ASYNC_STORE, type=t, mods=tuple(x for x in (op,) if x))


class AsyncStoreOps:
    """Builder methods for st.async, red.async and multimem."""

    def st_async(self, addr, value, mbar, *, type=None, weak=False, pred=None):
        """`st.async{.weak}.shared::cluster.mbarrier::complete_tx::bytes{.vN}.type [addr], value, [mbar]`
        (sm_90): store into a cluster CTA's shared memory; the write completes `nbytes` of
        transactions on that CTA's mbarrier.  `value` may be a list (a vector store); `weak=True` writes
        the default semantics out."""
        if isinstance(value, (list, tuple, Vec)):
            regs = tuple(self._val(x) for x in (value.regs if isinstance(value, Vec) else value))
            t = T.lookup(type) if type is not None else regs[0].type
            v, vec = Vec(regs), len(regs)
        else:
            v = self._val(value)
            t, vec = T.lookup(type) if type is not None else v.type, 1
        self.emit(st_async(self._addr(addr), v, self._addr(mbar), t, vec, weak), pred)

    def red_async(self, op, addr, value, mbar, *, type=None, pred=None):
        """`red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.op.type [addr], value,
        [mbar]` (sm_90): an atomic reduction into a cluster CTA's shared memory completing on its
        mbarrier (op: inc, dec, min, max, add, and, or, xor)."""
        v = self._val(value)
        t = T.lookup(type) if type is not None else v.type
        if op in ("and", "or", "xor") and t.is_int:
            t = t.bits_type()
        self.emit(red_async(op, self._addr(addr), v, self._addr(mbar), t), pred)

    def multimem_ld_reduce(self, op, addr, *, type, sem=None, scope=None, dst=None, pred=None):
        """`multimem.ld_reduce{.sem.scope}.global.op.type d, [addr]` (sm_90): load from every copy of a
        multicast object and reduce (add, min, max, and, or, xor).  Returns d."""
        t = T.lookup(type)
        d = self._dst(dst, t)
        self.emit(multimem("ld_reduce", t, self._addr(addr), d=d, op=op, sem=sem, scope=scope), pred)
        return d

    def multimem_st(self, addr, value, *, type=None, sem=None, scope=None, pred=None):
        """`multimem.st{.sem.scope}.global.type [addr], value` (sm_90): store to every copy."""
        v = self._val(value)
        t = T.lookup(type) if type is not None else v.type
        self.emit(multimem("st", t, self._addr(addr), v=v, sem=sem, scope=scope), pred)

    def multimem_red(self, op, addr, value, *, type=None, sem=None, scope=None, pred=None):
        """`multimem.red{.sem.scope}.global.op.type [addr], value` (sm_90): reduce into every copy."""
        v = self._val(value)
        t = T.lookup(type) if type is not None else v.type
        if op in ("and", "or", "xor") and t.is_int:
            t = t.bits_type()
        self.emit(multimem("red", t, self._addr(addr), v=v, op=op, sem=sem, scope=scope), pred)
