"""Textures and surfaces through 64-bit object handles (CUDA texture/surface objects passed as .u64
kernel parameters): tex, tld4, txq, istypep, suld, sust, sured, suq.

Legal forms as data: `TEX_GEOMS` (geometry -> whether the first coordinate is an array index, the
coordinate count as written), `SURF_GEOMS`, `TEX_TYPES`, `TXQ_QUERIES`, `SUQ_QUERIES`,
`SURF_CLAMP`, `SURED_OPS`.  Coordinates are written `[handle, {c0, ...}]`; 3-D and cube forms
take four components, the last one unused (and array forms an .s32 index first).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_pred, check_value, check_vec, make
from .operands import Addr, Reg, TensorAddr, Vec
from .targets import BASE

_PTXFORGE_INTERNAL = True

#: geometry -> (array index first, coordinates written)
TEX_GEOMS = {"1d": (False, 1), "2d": (False, 2), "3d": (False, 4), "a1d": (True, 2), "a2d": (True, 4),
             "cube": (False, 4), "acube": (True, 4)}
TLD4_GEOMS = ("2d", "a2d", "cube", "acube")
TLD4_COMPONENTS = ("r", "g", "b", "a")
#: tex result type -> registers written
TEX_TYPES = {T.u32: 4, T.s32: 4, T.f32: 4, T.f16x2: 2}
TEX_COORD_TYPES = (T.s32, T.f32)
#: tex.grad: geometry -> .f32 lanes of each gradient vector, dPdx and dPdy (ptxas 13 takes exactly these; the
#: array index and the unused fourth coordinate have none: 1d and a1d take a one-lane vector, not a scalar)
TEX_GRAD_LANES = {"1d": 1, "a1d": 1, "2d": 2, "a2d": 2, "3d": 4, "cube": 4, "acube": 4}
TXQ_QUERIES = ("width", "height", "depth", "channel_data_type", "channel_order", "normalized_coords",
               "array_size", "num_mipmap_levels", "num_samples", "filter_mode", "addr_mode_0", "addr_mode_1",
               "addr_mode_2", "force_unnormalized_coords")
TXQ_LEVEL_QUERIES = ("width", "height", "depth")
ISTYPEP_KINDS = ("texref", "samplerref", "surfref")
SURF_GEOMS = {"1d": (False, 1), "2d": (False, 2), "3d": (False, 4), "a1d": (True, 2), "a2d": (True, 4)}
SURF_TYPES = (T.b8, T.b16, T.b32, T.b64)
SURF_CLAMP = ("trap", "clamp", "zero")
SURF_COPS = {"suld": ("ca", "cg", "cs", "cv"), "sust": ("wb", "cg", "cs", "wt")}
SURED_OPS = {"add": (T.u32, T.s32, T.u64), "min": (T.u32, T.s32), "max": (T.u32, T.s32), "and": (T.b32,),
             "or": (T.b32,)}
SURED_GEOMS = {"1d": (False, 1), "2d": (False, 2), "3d": (False, 4)}  # no array geometries
SUQ_QUERIES = ("width", "height", "depth", "channel_data_type", "channel_order", "array_size", "memory_layout")


@dataclass(frozen=True)
class TextureInfo:
    """What one texture/surface instruction names: the opcode's kind and geometry."""

    kind: str
    geom: str | None = None


def _handle(h, what):
    check_value(h, T.u64, f"{what} handle", imm_ok=False)
    return h


def _coords(geoms, geom, coords, ctype, what):
    if geom not in geoms:
        raise ValidationError(f"{what} geometry is one of {', '.join(geoms)}, not {geom!r}")
    array, n = geoms[geom]
    coords = tuple(coords)
    if len(coords) != n:
        raise ValidationError(f"{what}.{geom} takes {n} coordinate(s)"
                              + (" (the array index first)" if array else "")
                              + (" (the last one unused)" if n == 4 and geom not in ("a2d", "acube") else "")
                              + f", got {len(coords)}")
    for i, c in enumerate(coords):
        check_value(c, T.s32 if array and i == 0 else ctype, f"{what} coordinate {i}")
    return coords


def _gradient(v, geom, what):
    lanes = TEX_GRAD_LANES[geom]
    items = tuple(v.regs) if isinstance(v, Vec) else tuple(v)
    if len(items) != lanes:
        raise ValidationError(f"tex.grad.{geom}: {what} is a vector of {lanes} .f32 lane(s), got {len(items)}")
    for x in items:
        check_value(x, T.f32, f"tex.grad {what}")
    return Vec(items)


def tex(d, handle, coords, geom="2d", dtype=T.f32, ctype=T.f32, lod=None, grad=None):
    """tex{.level|.grad}.geom.vN.dtype.ctype d, [handle, {coords}]{, lod | , dPdx, dPdy}.

    `lod` (.level) is the mipmap level of detail; `grad` (.grad) is the pair (dPdx, dPdy) of .f32 gradient
    vectors the level is derived from (`TEX_GRAD_LANES` lanes each): the two exclude each other.
    """
    if dtype not in TEX_TYPES:
        raise ValidationError(f"tex returns {', '.join('.' + t.name for t in TEX_TYPES)}, not .{dtype.name}")
    if ctype not in TEX_COORD_TYPES:
        raise ValidationError(f"tex coordinates are .s32 or .f32, not .{ctype.name}")
    if geom in ("cube", "acube") and ctype is not T.f32:
        raise ValidationError("cube textures take .f32 coordinates")
    c = _coords(TEX_GEOMS, geom, coords, ctype, "tex")
    n = TEX_TYPES[dtype]
    dv = check_vec(d, n, T.b32 if dtype is T.f16x2 else dtype, "tex destination")
    ops = (dv, TensorAddr(_handle(handle, "tex"), c))
    if lod is not None and grad is not None:
        raise ValidationError("tex takes a level of detail (.level) or gradients (.grad), not both")
    if lod is not None:
        check_value(lod, ctype, "tex level of detail")
        ops += (lod,)
    if grad is not None:
        if len(grad) != 2:
            raise ValidationError("tex.grad takes two gradient vectors, dPdx and dPdy")
        ops += (_gradient(grad[0], geom, "dPdx"), _gradient(grad[1], geom, "dPdy"))
    mode = "level" if lod is not None else "grad" if grad is not None else None
    return make("tex", ("tex", mode, geom, f"v{n}", dtype.name, ctype.name), ops,
                n_dst=1, req=BASE, type=dtype, info=TextureInfo("tex", geom))


def tld4(comp, d, handle, coords, geom="2d", dtype=T.f32):
    """tld4.comp.geom.v4.dtype.f32 d, [handle, {coords}]: one component of the four texels bilinear
    filtering would read."""
    if comp not in TLD4_COMPONENTS:
        raise ValidationError(f"tld4 gathers component r, g, b or a, not {comp!r}")
    if geom not in TLD4_GEOMS:
        raise ValidationError(f"tld4 geometry is one of {', '.join(TLD4_GEOMS)}, not {geom!r}")
    if dtype not in (T.u32, T.s32, T.f32):
        raise ValidationError(f"tld4 returns .u32, .s32 or .f32, not .{dtype.name}")
    c = _coords(TEX_GEOMS, geom, coords, T.f32, "tld4")
    dv = check_vec(d, 4, dtype, "tld4 destination")
    return make("tld4", ("tld4", comp, geom, "v4", dtype.name, "f32"), (dv, TensorAddr(_handle(handle, "tld4"), c)),
                n_dst=1, type=dtype, info=TextureInfo("tld4", geom))


def txq(query, d, handle, lod=None):
    """txq{.level}.query.b32 d, [handle]{, lod}: a texture's attribute (of mipmap level lod)."""
    queries = TXQ_LEVEL_QUERIES if lod is not None else TXQ_QUERIES
    if query not in queries:
        raise ValidationError(f"txq{'.level' if lod is not None else ''} queries one of {', '.join(queries)}, "
                              f"not {query!r}")
    check_dst(d, T.b32, "txq destination")
    ops = (d, Addr(_handle(handle, "txq")))
    if lod is not None:
        check_value(lod, T.s32, "txq level")
        ops += (lod,)
    return make("txq", ("txq", "level" if lod is not None else None, query, "b32"), ops, n_dst=1,
                info=TextureInfo("txq"), mods=(query,))


def istypep(kind, p, handle):
    """istypep.kind p, handle: whether a 64-bit handle is a texture, sampler or surface object."""
    if kind not in ISTYPEP_KINDS:
        raise ValidationError(f"istypep tests {', '.join(ISTYPEP_KINDS)}, not {kind!r}")
    check_pred(p, "istypep destination")
    return make("istypep", ("istypep", kind), (p, _handle(handle, "istypep")), n_dst=1, info=TextureInfo("istypep"),
                mods=(kind,))


def _surf_common(what, geom, coords, t, vec, clamp, cop):
    if t not in SURF_TYPES:
        raise ValidationError(f"{what} moves {', '.join('.' + x.name for x in SURF_TYPES)}, not .{t.name}")
    if vec not in (1, 2, 4) or (vec > 1 and t.bits * vec > 128):
        raise ValidationError(f"{what}.{t.name} takes vector widths 1, 2, 4 (at most 128 bits), not {vec}")
    if clamp not in SURF_CLAMP:
        raise ValidationError(f"{what} out-of-range mode is one of {', '.join(SURF_CLAMP)}, not {clamp!r}")
    opcode = what.split(".")[0]
    if cop is not None and cop not in SURF_COPS.get(opcode, ()):
        raise ValidationError(f"{what} cache operator is one of {', '.join(SURF_COPS.get(opcode, ()))}, not {cop!r}")
    return _coords(SURF_GEOMS, geom, coords, T.s32, what)


def _reg_type(t):
    return T.b16 if t is T.b8 else t


def _scalar(x, what):
    """The register of the scalar form: `x`, or the one register of a brace list `{%r}` (as nvcc writes it);
    ValidationError, spelled as PTX, for a list of more."""
    if isinstance(x, Vec):
        if len(x.regs) != 1:
            raise ValidationError(f"{what}: {x} holds {len(x.regs)} registers; the scalar form takes one "
                                  f"(.v{len(x.regs)} takes {len(x.regs)})")
        return x.regs[0]
    return x


def suld(d, handle, coords, geom="2d", t=T.b32, vec=1, clamp="trap", cop=None):
    """suld.b.geom{.cop}{.vN}.type.clamp d, [handle, {coords}] (x in bytes; `{d}` is `d`)."""
    c = _surf_common("suld.b", geom, coords, t, vec, clamp, cop)
    if vec == 1:
        d = _scalar(d, "suld destination")
        check_dst(d, _reg_type(t), "suld destination", wide_ok=True)
    else:
        d = check_vec(d, vec, _reg_type(t), "suld destination", wide_ok=True)
    return make("suld", ("suld", "b", geom, cop, f"v{vec}" if vec > 1 else None, t.name, clamp),
                (d, TensorAddr(_handle(handle, "suld"), c)), n_dst=1, type=t, info=TextureInfo("suld", geom))


def sust(handle, coords, v, geom="2d", t=T.b32, vec=1, clamp="trap", cop=None, formatted=False):
    """sust.{b,p}.geom{.cop}{.vN}.type.clamp [handle, {coords}], v (.p: formatted, .b32 only; `{v}` is `v`)."""
    c = _surf_common("sust.b", geom, coords, t, vec, clamp, cop)
    if formatted and t is not T.b32:
        raise ValidationError("sust.p (formatted) stores .b32 values")
    if vec == 1:
        v = _scalar(v, "sust value")
        check_value(v, _reg_type(t), "sust value", imm_ok=False, wide_ok=True)
    else:
        v = check_vec(v, vec, _reg_type(t), "sust value", wide_ok=True)
    return make("sust", ("sust", "p" if formatted else "b", geom, cop, f"v{vec}" if vec > 1 else None, t.name, clamp),
                (TensorAddr(_handle(handle, "sust"), c), v), type=t, info=TextureInfo("sust", geom))


def sured(op, handle, coords, v, geom="2d", t=T.u32, clamp="trap"):
    """sured.b.op.geom.type.clamp [handle, {coords}], v: an atomic reduction into a surface."""
    if op not in SURED_OPS:
        raise ValidationError(f"sured reduces with one of {', '.join(SURED_OPS)}, not {op!r}")
    if t not in SURED_OPS[op]:
        raise ValidationError(f"sured.{op} takes {', '.join('.' + x.name for x in SURED_OPS[op])}, not .{t.name}")
    if clamp not in SURF_CLAMP:
        raise ValidationError(f"sured out-of-range mode is one of {', '.join(SURF_CLAMP)}, not {clamp!r}")
    c = _coords(SURED_GEOMS, geom, coords, T.s32, "sured")
    check_value(v, t, "sured value", imm_ok=False)
    return make("sured", ("sured", "b", op, geom, t.name, clamp), (TensorAddr(_handle(handle, "sured"), c), v),
                type=t, info=TextureInfo("sured", geom), mods=(op,))


def suq(query, d, handle):
    """suq.query.b32 d, [handle]: a surface's attribute."""
    if query not in SUQ_QUERIES:
        raise ValidationError(f"suq queries one of {', '.join(SUQ_QUERIES)}, not {query!r}")
    check_dst(d, T.b32, "suq destination")
    return make("suq", ("suq", query, "b32"), (d, Addr(_handle(handle, "suq"))), n_dst=1,
                info=TextureInfo("suq"), mods=(query,))


class TextureOps:
    """Builder methods for textures and surfaces addressed by 64-bit object handles."""

    def _coord_regs(self, coords, t, array):
        return tuple(self._val(c, T.s32 if array and i == 0 else t) for i, c in enumerate(coords))

    def tex(self, handle, coords, *, geom="2d", dtype="f32", ctype=None, lod=None, grad=None, dst=None,
            pred=None):
        """`tex{.level|.grad}.geom.v4.dtype.ctype d, [handle, {coords}]{, lod | , dPdx, dPdy}`: sample a
        texture object (`handle`, a .u64) at `coords` (.f32 or .s32 by their registers, default .f32; array
        geometries take an .s32 index first; 3-D and cube take four components), at level of detail `lod`
        or with the level derived from `grad` = (dPdx, dPdy), two lists of .f32 values (one lane for 1d
        and a1d, two for 2d and a2d, four for 3d and the cubes).  Returns a Vec (four registers; two .b32
        for dtype f16x2)."""
        dt = T.lookup(dtype)
        last = coords[-1] if coords else None
        ct = T.lookup(ctype) if ctype is not None else (
            T.s32 if isinstance(last, Reg) and last.type in (T.s32, T.u32, T.b32) else T.f32)
        n = TEX_TYPES.get(dt, 4)
        rt = T.b32 if dt is T.f16x2 else dt
        d = Vec(tuple(self._val(r) for r in dst)) if dst is not None else Vec(tuple(self.reg(rt) for _ in range(n)))
        array = TEX_GEOMS.get(geom, (False, 0))[0]
        g = None if grad is None else tuple(tuple(self._val(x, T.f32) for x in v) for v in grad)
        self.emit(tex(d, self._val(handle), self._coord_regs(coords, ct, array), geom, dt, ct,
                      self._val(lod, ct) if lod is not None else None, g), pred)
        return d

    def tld4(self, comp, handle, coords, *, geom="2d", dtype="f32", dst=None, pred=None):
        """`tld4.comp.geom.v4.dtype.f32 d, [handle, {coords}]`: component `comp` (r, g, b, a) of the
        four texels around `coords`.  Returns a Vec of four registers."""
        dt = T.lookup(dtype)
        d = Vec(tuple(self._val(r) for r in dst)) if dst is not None else Vec(tuple(self.reg(dt) for _ in range(4)))
        array = TEX_GEOMS.get(geom, (False, 0))[0]
        self.emit(tld4(comp, d, self._val(handle), self._coord_regs(coords, T.f32, array), geom, dt), pred)
        return d

    def txq(self, query, handle, *, lod=None, dst=None, pred=None):
        """`txq{.level}.query.b32 d, [handle]{, lod}`: a texture object's width, height, ... (query)."""
        d = self._dst(dst, T.b32)
        self.emit(txq(query, d, self._val(handle), self._val(lod, T.s32) if lod is not None else None), pred)
        return d

    def istypep(self, kind, handle, *, dst=None, pred=None):
        """`istypep.kind p, handle`: whether `handle` is a texture (texref), sampler or surface object."""
        p = self._dst(dst, T.pred)
        self.emit(istypep(kind, p, self._val(handle)), pred)
        return p

    def suld(self, handle, coords, *, geom="2d", type="b32", vec=1, clamp="trap", cop=None, dst=None, pred=None):
        """`suld.b.geom{.cop}{.vN}.type.clamp d, [handle, {coords}]`: read a surface object (x in bytes;
        clamp "trap", "clamp" or "zero" for out-of-range coordinates).  Returns the register or a Vec."""
        t = T.lookup(type)
        rt = _reg_type(t)
        if dst is not None:
            d = self._val(dst) if vec == 1 else Vec(tuple(self._val(r) for r in dst))
        else:
            d = self.reg(rt) if vec == 1 else Vec(tuple(self.reg(rt) for _ in range(vec)))
        array = SURF_GEOMS.get(geom, (False, 0))[0]
        self.emit(suld(d, self._val(handle), self._coord_regs(coords, T.s32, array), geom, t, vec, clamp, cop), pred)
        return d

    def sust(self, handle, coords, value, *, geom="2d", type="b32", clamp="trap", cop=None, formatted=False,
             pred=None):
        """`sust.{b,p}.geom{.cop}{.vN}.type.clamp [handle, {coords}], value`: write a surface object
        (`value` a register or a list: a vector; formatted=True writes .p, converting to the
        surface's format)."""
        t = T.lookup(type)
        vals = value if isinstance(value, (list, tuple, Vec)) else None
        v = Vec(tuple(self._val(x) for x in (vals.regs if isinstance(vals, Vec) else vals))) if vals is not None \
            else self._val(value)
        array = SURF_GEOMS.get(geom, (False, 0))[0]
        self.emit(sust(self._val(handle), self._coord_regs(coords, T.s32, array), v, geom, t,
                       len(v) if isinstance(v, Vec) else 1, clamp, cop, formatted), pred)

    def sured(self, op, handle, coords, value, *, geom="2d", type=None, clamp="trap", pred=None):
        """`sured.b.op.geom.type.clamp [handle, {coords}], value`: reduce into a surface (add, min, max,
        and, or)."""
        v = self._val(value)
        t = T.lookup(type) if type is not None else v.type
        if op in ("and", "or") and t.is_int:
            t = t.bits_type()
        array = SURF_GEOMS.get(geom, (False, 0))[0]
        self.emit(sured(op, self._val(handle), self._coord_regs(coords, T.s32, array), v, geom, t, clamp), pred)

    def suq(self, query, handle, *, dst=None, pred=None):
        """`suq.query.b32 d, [handle]`: a surface object's width, height, depth, ... (query)."""
        d = self._dst(dst, T.b32)
        self.emit(suq(query, d, self._val(handle)), pred)
        return d
