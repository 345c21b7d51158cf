"""Tensor maps edited on the device: `tensormap.replace` and `tensormap.cp_fenceproxy`.

On the interpreter a tensor map's 128 bytes hold a handle of a `TensorMap` of the launch (`tensormaps.py`).
`tensormap.replace` reads the handle at its address (global or shared memory: a map copied there from a
`param_tensormap` parameter, or edited before), makes the TensorMap with the field changed, validated as
the host's constructor validates (a map the driver would refuse stops the run: an "oob" finding), and
writes that map's handle back.  The values are what the H200 takes (`isa.tensormap`): the rank minus one
for `.rank`, the enumerations of `cuTensorMapEncodeTiled` for the element type, interleave, swizzle and
fill, the new address, extent or stride itself otherwise.  `tensormap.cp_fenceproxy` copies the 128 bytes
from shared to global memory.  A TMA copy may then name the map in global memory (exec_tma).

Refused (`InterpUnsupported`): raising the rank (the dimensions it would add hold no values the
interpreter knows), the f32-ftz and tf32 element types (TMA converts those), editing an im2col map.
A TMA copy through a map written into global memory during the launch needs the issuing thread's
`fence.proxy.tensormap::generic.acquire` since the write (`tensormap_order`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ValidationError
from ..isa.tensormap import (TENSORMAP_ELEMTYPES, TENSORMAP_FIELDS, TENSORMAP_FILLS, TENSORMAP_INTERLEAVES,
                             TENSORMAP_SWIZZLES)
from ..runtime.tensormap import Im2colTensorMap
from .access import Part, gather, map_access, scatter, shadow_read, shadow_write
from .exec_memory import address_reader
from .findings import InterpUnsupported
from .tensormap_order import on_written
from .tensormaps import TENSORMAP_MAGIC, handle_bytes

_PTXFORGE_INTERNAL = True

#: the TensorMap attribute each dimension field rewrites (one entry of its tuple)
_PER_DIMENSION = {"box_dim": "box", "global_dim": "global_dims", "global_stride": "global_strides",
                  "element_stride": "element_strides"}


#: the TensorMap attribute each enumerated field sets, and what its immediate names (by index)
_ENUMERATED = {"interleave_layout": ("interleave", TENSORMAP_INTERLEAVES),
               "swizzle_mode": ("swizzle", TENSORMAP_SWIZZLES), "fill_mode": ("oob_fill", TENSORMAP_FILLS)}


def edited(tm, field: str, ordinal, value: int, ins=None):
    """The TensorMap `tm` with `field` set the way `tensormap.replace ... value` sets it (ValidationError when
    the result is a map the driver would refuse; InterpUnsupported for what is not modelled)."""
    if isinstance(tm, Im2colTensorMap):
        raise InterpUnsupported("tensormap.replace of an im2col tensor map is not modelled", ins)
    if field == "global_address":
        return tm.with_base(value)
    if field == "rank":
        rank = value + 1
        if not 1 <= rank <= len(tm.global_dims):
            raise InterpUnsupported(f"tensormap.replace .rank {value} (rank {rank}) of a rank-{len(tm.global_dims)} "
                                    "map is not modelled: only lowering the rank is", ins)
        return dataclasses.replace(tm, global_dims=tm.global_dims[:rank], box=tm.box[:rank],
                                   global_strides=tm.global_strides[:rank - 1],
                                   element_strides=tm.element_strides[:rank])
    if field in _PER_DIMENSION:
        name = _PER_DIMENSION[field]
        old = tuple(getattr(tm, name))
        if ordinal >= len(old):
            raise ValidationError(f"tensormap.replace .{field} ordinal {ordinal}: the rank-{len(tm.global_dims)} map "
                                  f"has {len(old)} such value(s)")
        return dataclasses.replace(tm, **{name: old[:ordinal] + (value,) + old[ordinal + 1:]})
    if field == "elemtype":
        name = TENSORMAP_ELEMTYPES[value]
        if "." in name or name.startswith("tf32"):
            raise InterpUnsupported(f"tensormap.replace .elemtype {value} ({name}: TMA converts it) is not modelled",
                                    ins)
        return dataclasses.replace(tm, dtype=name)
    attr, values = _ENUMERATED[field]
    return dataclasses.replace(tm, **{attr: values[value]})


def _space(space):
    return "generic" if space is None else "shared" if space == "shared::cta" else space


def make_tensormap_replace(P, op):
    """Executor of `tensormap.replace`: the handle at the map's address replaced by the edited map's."""
    ins = op.ins
    info = ins.info
    f = TENSORMAP_FIELDS[info.field]
    get_addr = address_reader(P, ins.operands[0], ins, _space(info.space))
    get_val = P.reader(ins.operands[-1], f.type, ins)

    def replace(S, m):
        L = S.launch
        thr = np.flatnonzero(m)
        vals = np.broadcast_to(np.asarray(get_val(S)), (S.N,))[thr]
        for part in map_access(S, op, _space(info.space), get_addr(S)[thr], thr, 128, align=64, write=True,
                               what="tensormap.replace"):
            if S.track and part.space == "shared":
                shadow_read(S, op, part, 8)
            words = gather(S, part, 8, 1)[:, 0]
            new = []
            for word, t, v in zip(words.tolist(), part.thr.tolist(), vals[part.sel].tolist()):
                idx = word >> 32
                if (word & 0xFFFFFFFF) != TENSORMAP_MAGIC or idx >= len(getattr(L, "tensormaps", ())):
                    S.fail("oob", "tensormap.replace: the address does not hold a tensor map of this launch (copy one "
                           "from a param_tensormap() parameter first)", op, np.array([t]))
                try:
                    tm = edited(L.tensormaps[idx], info.field, info.ordinal, int(v), ins)
                except ValidationError as e:
                    S.fail("oob", f"tensormap.replace .{info.field} makes a tensor map the driver would refuse: "
                           f"{e.message if hasattr(e, 'message') else e}", op, np.array([t]))
                L.tensormaps.append(tm)
                new.append(int.from_bytes(handle_bytes(len(L.tensormaps) - 1)[:8], "little"))
            if S.track and part.space == "shared":
                shadow_write(S, op, part, 8, pc=op.pc)
            scatter(S, part, 8, np.array(new, dtype=np.uint64)[:, None])
            if part.space == "global":  # a map edited in place: TMA must acquire it again
                for off in part.off.tolist():
                    on_written(S, op, off)
    return replace


def make_tensormap_cp_fenceproxy(P, op):
    """Executor of `tensormap.cp_fenceproxy`: the 128 bytes at the shared source copied to the global destination."""
    ins = op.ins
    get_dst = address_reader(P, ins.operands[0], ins, "global")
    get_src = address_reader(P, ins.operands[1], ins, "shared")

    def cp_fenceproxy(S, m):
        thr = np.flatnonzero(m)
        src = map_access(S, op, "shared", get_src(S)[thr], thr, 128, align=64, what="tensormap.cp_fenceproxy source")
        dst = {t: off for p in map_access(S, op, "global", get_dst(S)[thr], thr, 128, align=64, write=True,
                                          what="tensormap.cp_fenceproxy destination")
               for t, off in zip(p.thr.tolist(), p.off.tolist())}  # thread -> heap offset
        for part in src:
            if S.track:
                shadow_read(S, op, part, 128)
            data = gather(S, part, 8, 16)
            for i, t in enumerate(part.thr.tolist()):
                if t in dst:
                    scatter(S, Part("global", np.zeros(1, np.int64), np.array([dst[t]]), np.array([t])), 8,
                            data[i:i + 1])
                    on_written(S, op, dst[t])
    return cp_fenceproxy

