"""Bulk reductions (sm_90, PTX 8.0): shared memory reduced into global memory or into another CTA's
shared memory by the bulk-copy unit.

    cp.reduce.async.bulk.global.shared::cta.bulk_group{.L2::cache_hint}.op.type  [dst], [src], size{, policy}
    cp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.op.type  [dst], [src], size, [mbar]
    cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op.mode.bulk_group{.L2::cache_hint}  [tmap, {coords}], [src]{, policy}

Each element of the source is combined with the destination element at the same offset (`.add`,
`.min`, `.max`, `.inc`, `.dec`, `.and`, `.or`, `.xor`; `.inc` / `.dec` wrap at the source value as
`atom.inc` / `atom.dec` do), atomically per element.  The global forms complete through bulk groups
(`cp.async.bulk.commit_group` / `wait_group`: `.read` before the source is rewritten); the
shared::cluster form completes `size` transaction bytes on the mbarrier at [mbar] in the destination
CTA.  The tensor form reduces a TMA box of the tensor map's element type (the in-bounds part only).
Which element types each reduction takes is the table below, checked against ptxas 13.0.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .async_copy import REQ_BULK, _bulk_size
from .instruction import check_addr, check_value, int_or_val, make
from .operands import TensorAddr

_PTXFORGE_INTERNAL = True

_BITS = ("b32", "b64")
_HALF = ("f16", "bf16")

#: destination -> reduction -> the element types it takes (what ptxas 13.0 accepts for sm_90; the 16-bit float
#: additions are spelled `.add.noftz`)
BULK_REDUCE_TYPES = {
    "global": {"and": _BITS, "or": _BITS, "xor": _BITS,
               "add": ("u32", "s32", "u64", "f32", "f64") + _HALF, "inc": ("u32",), "dec": ("u32",),
               "min": ("u32", "s32", "u64", "s64") + _HALF, "max": ("u32", "s32", "u64", "s64") + _HALF},
    "shared::cluster": {"and": ("b32",), "or": ("b32",), "xor": ("b32",), "add": ("u32", "s32", "u64"),
                        "inc": ("u32",), "dec": ("u32",), "min": ("u32", "s32"), "max": ("u32", "s32")},
}

#: the reductions of the tensor form (the element type is the tensor map's)
TENSOR_REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
#: tensor-form load modes -> the dimensions each takes
TENSOR_REDUCE_MODES = {"tile": (1, 2, 3, 4, 5), "im2col_no_offs": (3, 4, 5)}


@dataclass(frozen=True)
class BulkReduceInfo:
    """Semantics of one bulk reduction: where it reduces into ('global', 'shared::cluster' or 'tensor'), the
    reduction, the element type (None for the tensor form: the tensor map's), the size in bytes (1-D forms),
    the tensor form's dimensions and load mode, and whether a cache policy is given."""

    dst: str
    op: str
    type: object = None
    size: object = None
    dims: int = 0
    mode: str = "tile"
    cache_hint: bool = False


def _policy(policy, what):
    if policy is not None:
        check_value(policy, T.b64, f"{what} cache policy", imm_ok=False)
    return policy


def bulk_reduce(dst, src, size, op, type, mbar=None, policy=None):
    """Build and check a 1-D bulk reduction (pure: no builder; sm_90): `size` bytes (a positive multiple of 16, or
    a .u32 register) of shared memory at `src` combined by `op` into `dst`.

    Without `mbar`: into global memory (`.global.shared::cta.bulk_group`, an optional .b64 cache `policy`).
    With `mbar`: into the shared memory of a CTA of the cluster (`dst` and `mbar` shared::cluster addresses,
    from `mapa`), completing `size` transaction bytes on that mbarrier.  `type`: an element type the table
    `BULK_REDUCE_TYPES` lists for `op` there.
    """
    where = "global" if mbar is None else "shared::cluster"
    ops_for = BULK_REDUCE_TYPES[where]
    if op not in ops_for:
        raise ValidationError(f"cp.reduce.async.bulk reduces with {', '.join(ops_for)}, not {op!r}")
    t = type if isinstance(type, T.ScalarType) else T.lookup(type)
    if t.name not in ops_for[op]:
        raise ValidationError(f"cp.reduce.async.bulk into {where} memory: .{op} takes "
                              f"{', '.join('.' + n for n in ops_for[op])}, not .{t.name}"
                              + ("" if mbar is None or t.name not in BULK_REDUCE_TYPES["global"][op]
                                 else " (that type is for reductions into global memory)"))
    size = _bulk_size(size)
    s = check_addr(src, "shared", "cp.reduce.async.bulk source")
    if mbar is None:
        d = check_addr(dst, "global", "cp.reduce.async.bulk destination")
        ops = (d, s, size) + ((_policy(policy, "cp.reduce.async.bulk"),) if policy is not None else ())
        parts = ("cp.reduce.async.bulk", "global", "shared::cta", "bulk_group",
                 "L2::cache_hint" if policy is not None else None, op,
                 "noftz" if op == "add" and t.name in _HALF else None, t.name)
    else:
        if policy is not None:
            raise ValidationError("cp.reduce.async.bulk into shared::cluster memory takes no cache policy")
        d = check_addr(dst, "shared", "cp.reduce.async.bulk destination")
        ops = (d, s, size, check_addr(mbar, "shared", "cp.reduce.async.bulk mbarrier"))
        parts = ("cp.reduce.async.bulk", "shared::cluster", "shared::cta", "mbarrier::complete_tx::bytes", op, t.name)
    return make("cp.reduce.async.bulk", parts, ops, req=REQ_BULK,
                info=BulkReduceInfo(where, op, t, size, cache_hint=policy is not None))


def bulk_tensor_reduce(tmap, coords, src, op, mode="tile", policy=None):
    """Build and check `cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op.mode.bulk_group{.L2::cache_hint}
    [tmap, {coords}], [src]{, policy}` (pure: no builder; sm_90): the box of the tensor map at `coords` (1 to 5
    .s32 values, innermost first; 3 to 5 with mode='im2col_no_offs') read from shared memory at `src` and
    combined by `op` into the tensor, elements of the tensor map's type, the out-of-bounds part left alone."""
    if op not in TENSOR_REDUCE_OPS:
        raise ValidationError(f"cp.reduce.async.bulk.tensor reduces with {', '.join(TENSOR_REDUCE_OPS)}, not {op!r}")
    if mode not in TENSOR_REDUCE_MODES:
        raise ValidationError(f"cp.reduce.async.bulk.tensor load modes are {', '.join(TENSOR_REDUCE_MODES)}, "
                              f"not {mode!r}")
    n = len(coords)
    if n not in TENSOR_REDUCE_MODES[mode]:
        raise ValidationError(f"cp.reduce.async.bulk.tensor .{mode} takes {min(TENSOR_REDUCE_MODES[mode])} to 5 "
                              f"coordinates, got {n}")
    for i, c in enumerate(coords):
        check_value(c, T.s32, f"tensor coordinate {i}")
    s = check_addr(src, "shared", "cp.reduce.async.bulk.tensor source")
    ops = (TensorAddr(tmap, tuple(coords)), s)
    if policy is not None:
        ops += (_policy(policy, "cp.reduce.async.bulk.tensor"),)
    return make("cp.reduce.async.bulk.tensor", ("cp.reduce.async.bulk.tensor", f"{n}d", "global", "shared::cta", op,
                                                mode, "bulk_group", "L2::cache_hint" if policy is not None else None),
                ops, req=REQ_BULK, info=BulkReduceInfo("tensor", op, dims=n, mode=mode,
                                                       cache_hint=policy is not None))


class BulkReduceOps:
    """Builder methods for the sm_90 bulk reductions (`cp.reduce.async.bulk`, its tensor form)."""

    def bulk_reduce(self, dst, src, size, op, type, *, mbar=None, policy=None, pred=None):
        """sm_90 1-D bulk reduction (`bulk_reduce`): `size` bytes of shared memory at `src` combined by `op`
        ('add', 'min', 'max', 'inc', 'dec', 'and', 'or', 'xor') into `dst`, elements of `type`.  Into global
        memory without `mbar` (close it with bulk_commit() and bulk_wait(n, read=True) before `src` is
        rewritten); with `mbar`, into the shared memory of a cluster CTA (`dst`, `mbar` from mapa), completing
        `size` transaction bytes on that mbarrier.  The writing threads need
        fence('fence.proxy.async.shared::cta') and a barrier before it."""
        size = int_or_val(self._val, size, "cp.async.bulk size")
        self.emit(bulk_reduce(self._addr(dst), self._addr(src), size, op, type,
                              None if mbar is None else self._addr(mbar),
                              None if policy is None else self._val(policy)), pred)

    def tensor_reduce(self, tmap, coords, src, op, *, mode="tile", policy=None, pred=None):
        """sm_90 TMA reduction (`bulk_tensor_reduce`): the box of the tensor map at `coords` read from shared
        memory at `src` and combined by `op` into the tensor (in-bounds part only); `tmap` the generic address of
        a CUtensorMap parameter.  Completed through bulk groups, as tensor_store is."""
        self.emit(bulk_tensor_reduce(self._val(tmap), tuple(self._val(c, T.s32) for c in coords), self._addr(src),
                                     op, mode, None if policy is None else self._val(policy)), pred)
