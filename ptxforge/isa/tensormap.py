"""Tensor maps edited on the device (sm_90a, PTX 8.3): `tensormap.replace` rewrites one field of a 128-byte
tensor map in global or shared memory, and `tensormap.cp_fenceproxy` copies a map edited in shared memory to
global memory, releasing it to the tensormap proxy that TMA reads maps through.

    tensormap.replace.tile.field{.space}.b1024.type  [map], {ord,} value
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned  [dst], [src], 128

A TMA copy through the edited map in global memory then needs the acquire half,
`fence.proxy.tensormap::generic.acquire.scope [map], 128` (`KernelBuilder.fence(..., addr=)`), by the
threads that use it.  Which fields exist, their operand types, which take a dimension (`ord`, 0..4) and
which only an immediate value (with its range) is the table `TENSORMAP_FIELDS`, checked against ptxas 13.0.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_value, int_arg, int_or_val, make
from .operands import Imm
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

#: tensormap.replace is arch-specific: sm_90a, and the Blackwell 'a' targets too (ptxas 13 takes it on sm_100a and
#: sm_120a at their least PTX ISA, 8.6 and 8.7, and refuses it on sm_100 and sm_120)
REQ_REPLACE = Requirement(90, V("8.3"), arch_specific=True, also_arch=(100, 120))
REQ_CP_FENCEPROXY = Requirement(90, V("8.3"))


@dataclass(frozen=True)
class TensormapField:
    """One field `tensormap.replace` rewrites: its operand type, whether it names a dimension (`ord`), and for
    the fields that take only an immediate the values sm_90a accepts (None: any value, a register too)."""

    type: object
    ordinal: bool = False
    values: tuple | None = None


#: field -> what `tensormap.replace` takes for it on sm_90a (ptxas 13.0).  The immediate-only fields hold the
#: encodings of `cuTensorMapEncodeTiled`'s enumerations (the tables below); the others take the new value itself:
#: an address, a dimension or box extent, a stride in bytes (global_stride ordinal i: the stride of dimension
#: i + 1), an element stride, except `rank`, which takes the rank minus one (all measured on the H200).
TENSORMAP_FIELDS = {
    "global_address": TensormapField(T.b64),
    "rank": TensormapField(T.b32),
    "box_dim": TensormapField(T.b32, ordinal=True),
    "global_dim": TensormapField(T.b32, ordinal=True),
    "global_stride": TensormapField(T.b64, ordinal=True),
    "element_stride": TensormapField(T.b32, ordinal=True),
    "elemtype": TensormapField(T.b32, values=tuple(range(13))),
    "interleave_layout": TensormapField(T.b32, values=(0, 1, 2)),
    "swizzle_mode": TensormapField(T.b32, values=(0, 1, 2, 3)),
    "fill_mode": TensormapField(T.b32, values=(0, 1)),
}

#: What the immediate of each enumerated field means (its index), as `cuTensorMapEncodeTiled` encodes it: on the
#: H200 a map edited to element type 7, interleave 1 or fill 1 has exactly the bytes the driver gives f32, 16-byte
#: interleave or NaN fill (bench/results/h200_lane/tensormap/); element types 10-12 are f32 with subnormals
#: flushed and tf32 (with and without), which TMA converts on the way
TENSORMAP_ELEMTYPES = ("u8", "u16", "u32", "s32", "u64", "s64", "f16", "f32", "f64", "bf16", "f32.ftz", "tf32",
                       "tf32.ftz")
TENSORMAP_INTERLEAVES = (0, 16, 32)
TENSORMAP_SWIZZLES = (0, 32, 64, 128)
TENSORMAP_FILLS = ("zero", "nan")

#: the state spaces a tensor map may be edited in (None: a generic address)
TENSORMAP_SPACES = ("global", "shared::cta", None)
#: the scopes of tensormap.cp_fenceproxy's release
CP_FENCEPROXY_SCOPES = ("cta", "cluster", "gpu", "sys")


@dataclass(frozen=True)
class TensormapReplaceInfo:
    """Semantics of one tensormap.replace: the field, the state space of the map (None: generic) and the
    dimension it names (None for the fields without one)."""

    field: str
    space: str | None
    ordinal: int | None = None


def tensormap_replace(addr, field, value, ordinal=None, space="global"):
    """Build and check `tensormap.replace.tile.field{.space}.b1024.type [addr], {ordinal,} value` (pure: no builder;
    sm_90a, PTX 8.3): `field` one of `TENSORMAP_FIELDS`; `ordinal` the dimension (an int 0..4) of box_dim,
    global_dim, global_stride and element_stride; `value` a register or immediate of the field's type (an
    immediate in the listed range for elemtype, interleave_layout, swizzle_mode, fill_mode)."""
    f = TENSORMAP_FIELDS.get(field)
    if f is None:
        raise ValidationError(f"tensormap.replace rewrites {', '.join(TENSORMAP_FIELDS)}, not {field!r}"
                              + (" (swizzle_atomicity needs sm_100a)" if field == "swizzle_atomicity" else ""))
    if space not in TENSORMAP_SPACES:
        raise ValidationError(f"tensormap.replace edits a map in .global or .shared::cta memory (or at a generic "
                              f"address: space=None), not {space!r}")
    a = check_addr(addr, space or "generic", "tensormap.replace address")
    ops = [a]
    if f.ordinal:
        o = None if ordinal is None else int_arg(ordinal, f"tensormap.replace .{field} ordinal")
        if o is None or not 0 <= o <= 4:
            raise ValidationError(f"tensormap.replace .{field} names a dimension: an immediate ordinal 0..4, "
                                  f"got {ordinal!r}")
        ordinal = o
        ops.append(Imm(o))
    elif ordinal is not None:
        raise ValidationError(f"tensormap.replace .{field} takes no dimension ordinal")
    if f.values is not None:
        v = value.value if isinstance(value, Imm) else value
        if not T.is_integer(v) or v not in f.values:
            raise ValidationError(f"tensormap.replace .{field} takes an immediate {f.values[0]}..{f.values[-1]} "
                                  f"(ptxas refuses a register), got {value!r}")
        value = Imm(int(v))
    elif (n := int_arg(value, f"tensormap.replace .{field} value", f".{f.type.name}")) is not None:
        if not 0 <= n < (1 << f.type.bits):
            raise ValidationError(f"tensormap.replace .{field} value {n} does not fit .{f.type.name}")
        value = Imm(n)
    else:
        check_value(value, f.type, f"tensormap.replace .{field} value", imm_ok=False)
    ops.append(value)
    return make("tensormap.replace", ("tensormap", "replace", "tile", field, space, "b1024", f.type.name), tuple(ops),
                req=REQ_REPLACE, info=TensormapReplaceInfo(field, space, ordinal if f.ordinal else None))


def tensormap_cp_fenceproxy(dst, src, scope="gpu"):
    """Build `tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.scope.sync.aligned [dst], [src],
    128` (pure: no builder; sm_90, PTX 8.3): the 128-byte tensor map at shared `src` copied to global `dst` and
    released to the tensormap proxy at `scope`; every thread of the warp executes it (.sync.aligned)."""
    if scope not in CP_FENCEPROXY_SCOPES:
        raise ValidationError(f"tensormap.cp_fenceproxy releases at {', '.join(CP_FENCEPROXY_SCOPES)}, not {scope!r}")
    d = check_addr(dst, "global", "tensormap.cp_fenceproxy destination")
    s = check_addr(src, "shared", "tensormap.cp_fenceproxy source")
    return make("tensormap.cp_fenceproxy", ("tensormap", "cp_fenceproxy", "global", "shared::cta", "tensormap::generic",
                                            "release", scope, "sync", "aligned"), (d, s, Imm(128)),
                req=REQ_CP_FENCEPROXY, info=scope)


class TensormapOps:
    """Builder methods that edit tensor maps on the device (`tensormap.replace`, `tensormap.cp_fenceproxy`)."""

    def tensormap_replace(self, addr, field, value, *, ordinal=None, space="global", pred=None):
        """sm_90a `tensormap.replace` (`tensormap_replace`): one field of the 128-byte tensor map at `addr`
        (in `space`: 'global', 'shared::cta', or None for a generic address) set to `value` (an int, or a
        register of the field's type); `ordinal` names the dimension of box_dim / global_dim / global_stride /
        element_stride."""
        f = TENSORMAP_FIELDS.get(field)
        if f is not None and f.values is None:
            value = int_or_val(self._val, value, f"tensormap.replace .{field} value", f".{f.type.name}", f.type)
        self.emit(tensormap_replace(self._addr(addr), field, value, ordinal, space), pred)

    def tensormap_cp_fenceproxy(self, dst, src, *, scope="gpu", pred=None):
        """`tensormap.cp_fenceproxy` (`tensormap_cp_fenceproxy`): a warp copies the tensor map it edited in
        shared memory to global memory and releases it to the tensormap proxy; a TMA copy through it then
        needs fence('fence.proxy.tensormap::generic.acquire.<scope>', addr=dst) first."""
        self.emit(tensormap_cp_fenceproxy(self._addr(dst), self._addr(src), scope), pred)
