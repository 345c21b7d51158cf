"""Bulk reductions (`cp.reduce.async.bulk` and its tensor form): shared memory combined into global memory or
into a cluster CTA's shared memory, element by element.

* Into global memory (1-D, or a TMA box): the source is read when the instruction issues (checked for races
  and for the async proxy, and held until `cp.async.bulk.wait_group.read` retires its group, as a bulk store's
  is) and each element is combined into global memory then.  Reductions are atomic per element, so units of
  any CTA may reduce into the same words; another CTA that reads the result still needs a release/acquire
  chain (`global_order`), as after any write, and a reduction into words plain stores wrote needs that
  chain from another CTA and a proxy fence (fence.proxy.async.global) after them, as any async-proxy read
  of generic writes does.  A TMA box reduces its in-bounds part only.
* Into shared::cluster memory: the source is read at issue and the combination lands when the destination
  CTA's mbarrier is polled, like a bulk copy's bytes, so touching the destination before that is an "async"
  finding.

`.add` on f16 / bf16 rounds the exact sum to nearest even (`.noftz`: subnormals kept); f32 / f64 add in
IEEE arithmetic, subnormals kept (the PTX ISA's cp.reduce.async.bulk section says the current implementation
of `.add.f32` flushes subnormal inputs and results to zero; an H100 keeps them, in the 1-D and the tensor form
alike, bit for bit as IEEE addition does: tests/test_bulk_reduce_gpu_subnormal.py); `.min` / `.max` on floats
return the number where one side is NaN; `.inc` / `.dec` wrap at the source value as `atom.inc` / `atom.dec` do.
A tensor map whose element type the reduction does not take is refused (`InterpUnsupported`), as is the
`.im2col_no_offs` mode.
"""

from __future__ import annotations

import numpy as np

from ..bfloat16 import to_bf16
from ..isa import types as T
from ..isa.bulk_reduce import BULK_REDUCE_TYPES
from .exec_memory import _atom_apply
from .exec_tma import make_bulk_store, make_bulk_to_cluster, make_tensor_store
from .findings import InterpUnsupported
from .minmax import canonical_nan, min_max
from .values import UINT, bf16_to_f32, f16_bits_to_f32, half_bits

_PTXFORGE_INTERNAL = True

_SIGNED = {32: np.int32, 64: np.int64}
_FLOAT = {32: np.float32, 64: np.float64}


def _bf16_canonical(x):
    """float64 sums rounded once to bf16 bits, a NaN as the canonical 0x7FC0."""
    return np.where(np.isnan(x), np.uint16(0x7FC0), to_bf16(np.asarray(x, dtype=np.float64)))


def combine(op: str, tname: str, old: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The bytes of `old` (uint8, whole elements of PTX type `tname`) combined with `src` by reduction `op`."""
    bits = T.lookup(tname).bits
    u = UINT[bits]
    o, s = old.reshape(-1).view(u), src.reshape(-1).view(u)
    if tname in ("f16", "bf16"):
        to_f = bf16_to_f32 if tname == "bf16" else f16_bits_to_f32
        a, b = to_f(o).astype(np.float64), to_f(s).astype(np.float64)
        if op == "add":
            new = _bf16_canonical(a + b) if tname == "bf16" else (a + b).astype(np.float16).view(np.uint16)
        else:  # min / max as the min/max instructions (minmax.py): -0 below +0, a NaN result canonical
            r = min_max(op, a, b)
            new = canonical_nan(half_bits(r, tname == "bf16"), r)
        return np.asarray(new, u).view(np.uint8)
    if tname in ("f32", "f64"):
        f = _FLOAT[bits]
        new = (o.view(f) + s.view(f)).view(u)
        return new.view(np.uint8)
    vt = _SIGNED[bits] if tname.startswith("s") else u
    new = _atom_apply(op, None, o.view(vt), s.view(vt), None)
    return np.asarray(new, vt).view(np.uint8)


def _tensor_type(op: str, tm, ins) -> str:
    """The PTX type a TMA reduction of tensor map `tm` combines with `op` (its bit type for and/or/xor)."""
    name = tm.dtype
    if op in ("and", "or", "xor") and name[0] in "usb" and T.lookup(name).bits in (32, 64):
        name = f"b{T.lookup(name).bits}"
    if name not in BULK_REDUCE_TYPES["global"][op]:
        raise InterpUnsupported(f"a .{op} TMA reduction of a tensor map of .{tm.dtype} elements is not modelled "
                                f"(.{op} takes {', '.join('.' + t for t in BULK_REDUCE_TYPES['global'][op])})", ins)
    return name


def make_bulk_reduce(P, op):
    """Executor of `cp.reduce.async.bulk` (1-D): into global memory the bulk store's executor with each element
    combined; into a cluster CTA's shared memory, landing on its mbarrier."""
    ins = op.ins
    info = ins.info
    red, tname = info.op, info.type.name
    if info.dst == "global":
        return make_bulk_store(P, op, lambda old, new: combine(red, tname, old, new), ins.opcode)
    return make_bulk_to_cluster(P, op, f"{ins.opcode} destination", lambda old, new: combine(red, tname, old, new))


def make_tensor_reduce(P, op):
    """Executor of `cp.reduce.async.bulk.tensor` in tile mode: the TMA store's executor (the in-bounds part of the
    box, the source held until wait_group.read) with each element combined into the tensor."""
    ins = op.ins
    info = ins.info
    if info.mode != "tile":
        raise InterpUnsupported(f"cp.reduce.async.bulk.tensor .{info.mode} is not modelled (tile mode is)", ins)

    def land(tm, old, new):
        return combine(info.op, _tensor_type(info.op, tm, ins), old, new).reshape(old.shape)
    return make_tensor_store(P, op, land, "TMA reduction")
