"""The warp-level matrix API: wmma.load.{a,b,c}, wmma.store.d, wmma.mma (every shape and type).

Legal forms as data: `WMMA_FORMS` maps (shape, A/B element type) to a `WmmaForm` row: the
registers each fragment takes per thread, the accumulator types, which layouts A and B may have,
and the requirement.  A fragment is a brace list of registers whose element-to-register mapping
the PTX ISA leaves to the implementation: code may load, store and multiply fragments, and apply
the same operation to every element, but must not rely on which element a register holds.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_value, check_vec, int_arg, int_or_val, make
from .operands import Imm, Reg, Vec
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

LAYOUTS = ("row", "col")
SPACES = ("global", "shared", "shared::cta", "generic")
_F16_SHAPES = ("m16n16k16", "m8n32k16", "m32n8k16")


@dataclass(frozen=True)
class WmmaForm:
    """One wmma shape x A/B element type.

    Fields:
        shape: `m16n16k16`, ...
        ab_type: the A and B element type (`f16`, `bf16`, `tf32`, `f64`, `s8`, `u8`, `s4`, `u4`, `b1`).
        a_regs, b_regs: registers per thread of the A and B fragments.
        acc: accumulator type -> registers per thread of a C/D fragment.
        layouts: the (A layout, B layout) pairs allowed (sub-byte forms: row A, column B only).
        req: least target and PTX ISA.
        satfinite: whether wmma.mma takes .satfinite (integer forms).
        bitops: the b1 operations (`xor.popc`, `and.popc`) with their own requirements.
    """

    shape: str
    ab_type: T.ScalarType
    a_regs: int
    b_regs: int
    acc: dict
    layouts: tuple
    req: Requirement
    satfinite: bool = False
    bitops: dict = None

    @property
    def frag_type(self) -> T.ScalarType:
        """The register type of A/B fragments: .f64 for f64, else .b32."""
        return T.f64 if self.ab_type is T.f64 else T.b32


_ANY = tuple((a, b) for a in LAYOUTS for b in LAYOUTS)
_ROW_COL = (("row", "col"),)
_R80 = Requirement(80, V("7.0"))


def _forms():
    out = {}
    for shape in _F16_SHAPES:
        out[(shape, T.f16)] = WmmaForm(shape, T.f16, 8, 8, {T.f16: 4, T.f32: 8}, _ANY, BASE)
    bf16 = {"m16n16k16": (4, 4), "m8n32k16": (2, 8), "m32n8k16": (8, 2)}
    i8 = {"m16n16k16": (2, 2), "m8n32k16": (1, 4), "m32n8k16": (4, 1)}
    for shape in _F16_SHAPES:
        out[(shape, T.bf16)] = WmmaForm(shape, T.bf16, *bf16[shape], {T.f32: 8}, _ANY, _R80)
        for t in (T.s8, T.u8):
            out[(shape, t)] = WmmaForm(shape, t, *i8[shape], {T.s32: 8}, _ANY, BASE, satfinite=True)
    out[("m16n16k8", T.tf32)] = WmmaForm("m16n16k8", T.tf32, 4, 4, {T.f32: 8}, _ANY, _R80)
    out[("m8n8k4", T.f64)] = WmmaForm("m8n8k4", T.f64, 1, 1, {T.f64: 2}, _ANY, _R80)
    for t in (T.s4, T.u4):
        out[("m8n8k32", t)] = WmmaForm("m8n8k32", t, 1, 1, {T.s32: 2}, _ROW_COL, BASE, satfinite=True)
    out[("m8n8k128", T.b1)] = WmmaForm("m8n8k128", T.b1, 1, 1, {T.s32: 2}, _ROW_COL, BASE,
                                       bitops={"xor.popc": BASE, "and.popc": Requirement(80, V("7.1"))})
    return out


#: The wmma legal-form table: (shape, A/B element type) -> WmmaForm.
WMMA_FORMS = _forms()
#: Directed rounding for f64 wmma.mma.
F64_ROUND = ("rn", "rz", "rm", "rp")


@dataclass(frozen=True)
class WmmaInfo:
    """What one wmma instruction is: the op (load_a/load_b/load_c/store/mma), its form, layout(s), the
    accumulator type where there is one (C's for mma), and for loads and stores the state space, for mma D's
    type, the .b1 bit operation and .satfinite."""

    op: str
    form: WmmaForm
    layout: tuple
    acc: T.ScalarType | None = None
    space: str = "generic"
    d: T.ScalarType | None = None
    bitop: str | None = None
    satfinite: bool = False


def wmma_form(shape, ab_type) -> WmmaForm:
    """The row for (shape, A/B type), or a ValidationError listing the legal pairs."""
    f = WMMA_FORMS.get((shape, ab_type))
    if f is None:
        legal = sorted(f"{s}.{t.name}" for s, t in WMMA_FORMS)
        raise ValidationError(f"wmma has no {shape} form for .{ab_type.name}; legal: {', '.join(legal)}")
    return f


def _acc_form(shape, acc):
    """A row whose accumulator is `acc` at `shape` (for loading/storing C/D fragments)."""
    for (s, _), f in WMMA_FORMS.items():
        if s == shape and acc in f.acc:
            return f
    raise ValidationError(f"wmma {shape} has no .{acc.name} accumulator")


def _space_req(space, req):
    if space not in SPACES:
        raise ValidationError(f"wmma addresses are {', '.join(SPACES)}, not {space!r}")
    return req.merge(Requirement(80, V("7.8"))) if space == "shared::cta" else req


def _acc_reg_type(acc):
    reg = {T.f16: T.b32, T.f32: T.f32, T.s32: T.s32, T.f64: T.f64}.get(acc)
    if reg is None:
        raise ValidationError(f"wmma accumulators are .f16, .f32, .s32 or .f64, not .{acc.name}")
    return reg


def _check_frag(frag, n, t, what):
    """A fragment: n registers of type t; float registers cannot hold integer or half data."""
    v = check_vec(frag, n, t, what)
    for i, r in enumerate(v.regs):
        if isinstance(r, Reg) and t is T.b32 and r.type.is_float and r.type.lanes == 1:
            raise ValidationError(f"{what}[{i}]: {r} is .{r.type.name}; this fragment holds packed "
                                  "integer or half data: use .b32 (or .f16x2/.bf16x2) registers")
        if isinstance(r, Reg) and t is T.s32 and r.type.is_float:
            raise ValidationError(f"{what}[{i}]: {r} is .{r.type.name}; an .s32 accumulator needs integer registers")
    return v


def _stride(stride):
    if stride is None:
        return ()
    if (n := int_arg(stride, "wmma stride", ".u32")) is not None:
        if n <= 0:
            raise ValidationError(f"wmma stride {n} must be a positive element count")
        return (Imm(n),)
    check_value(stride, T.u32, "wmma stride", imm_ok=False)
    return (stride,)


def wmma_load(which, frag, addr, shape, t, layout, stride=None, space="generic"):
    """wmma.load.{a,b,c}.sync.aligned.layout.shape{.space}.type {regs}, [addr]{, stride}."""
    if which not in ("a", "b", "c"):
        raise ValidationError(f"wmma.load loads fragment a, b or c, not {which!r}")
    if layout not in LAYOUTS:
        raise ValidationError(f"wmma layout is 'row' or 'col', not {layout!r}")
    if which == "c":
        form = _acc_form(shape, t)
        n, rt = form.acc[t], _acc_reg_type(t)
    else:
        form = wmma_form(shape, t)
        n, rt = (form.a_regs if which == "a" else form.b_regs), form.frag_type
        side = 0 if which == "a" else 1
        if layout not in {lay[side] for lay in form.layouts}:
            raise ValidationError(f"wmma.load.{which} of .{t.name} takes layout "
                                  f"{' or '.join(sorted({lay[side] for lay in form.layouts}))}, not .{layout}")
    req = _space_req(space, form.req)
    a = check_addr(addr, "generic" if space == "generic" else space.split("::")[0], "wmma.load")
    v = _check_frag(frag, n, rt, f"wmma.load.{which} fragment")
    parts = ("wmma", "load", which, "sync", "aligned", layout, shape, None if space == "generic" else space, t.name)
    return make("wmma.load", parts, (v, a, *_stride(stride)), n_dst=1, req=req, type=t,
                info=WmmaInfo(f"load_{which}", form, (layout,), t if which == "c" else None, space))


def wmma_store(addr, frag, shape, t, layout, stride=None, space="generic"):
    """wmma.store.d.sync.aligned.layout.shape{.space}.type [addr], {regs}{, stride}."""
    if layout not in LAYOUTS:
        raise ValidationError(f"wmma layout is 'row' or 'col', not {layout!r}")
    form = _acc_form(shape, t)
    req = _space_req(space, form.req)
    a = check_addr(addr, "generic" if space == "generic" else space.split("::")[0], "wmma.store")
    v = _check_frag(frag, form.acc[t], _acc_reg_type(t), "wmma.store.d fragment")
    parts = ("wmma", "store", "d", "sync", "aligned", layout, shape, None if space == "generic" else space, t.name)
    return make("wmma.store", parts, (a, v, *_stride(stride)), req=req, type=t,
                info=WmmaInfo("store", form, (layout,), t, space))


def wmma_mma(d, a, b, c, shape, ab_type, d_type, c_type, a_layout="row", b_layout="col", satfinite=False,
             bitop=None, rnd=None):
    """wmma.mma{.bitop}.sync.aligned.alayout.blayout.shape{.rnd}.types{.satfinite} d, a, b, c."""
    form = wmma_form(shape, ab_type)
    if (a_layout, b_layout) not in form.layouts:
        raise ValidationError(f"wmma.mma .{ab_type.name} takes layouts "
                              f"{', '.join('.'.join(x) for x in form.layouts)}, not {a_layout}.{b_layout}")
    for what, x in (("d", d_type), ("c", c_type)):
        if x not in form.acc:
            raise ValidationError(f"wmma.mma {shape} .{ab_type.name}: {what} is "
                                  + " or ".join("." + t.name for t in form.acc) + f", not .{x.name}")
    if ab_type is not T.f16 and d_type is not c_type:
        raise ValidationError(f"wmma.mma .{ab_type.name}: d and c have the same type")
    if satfinite and not form.satfinite:
        raise ValidationError(f"wmma.mma .{ab_type.name} takes no .satfinite (integer forms only)")
    req = form.req
    if form.bitops:
        if bitop not in form.bitops:
            raise ValidationError(f"wmma.mma .b1 needs bitop {' or '.join(form.bitops)}, got {bitop!r}")
        req = req.merge(form.bitops[bitop])
    elif bitop is not None:
        raise ValidationError(f"wmma.mma .{ab_type.name} takes no bit operation")
    if rnd is not None and (ab_type is not T.f64 or rnd not in F64_ROUND):
        raise ValidationError("wmma.mma takes a rounding mode only for .f64 (" + ", ".join(F64_ROUND) + ")")
    dv = _check_frag(d, form.acc[d_type], _acc_reg_type(d_type), "wmma.mma d")
    av = _check_frag(a, form.a_regs, form.frag_type, "wmma.mma a")
    bv = _check_frag(b, form.b_regs, form.frag_type, "wmma.mma b")
    cv = _check_frag(c, form.acc[c_type], _acc_reg_type(c_type), "wmma.mma c")
    if ab_type is T.f16:
        types = (d_type.name, c_type.name)
    else:
        types = (d_type.name, ab_type.name, ab_type.name, c_type.name)
    parts = ("wmma", "mma", bitop, "sync", "aligned", a_layout, b_layout, shape, rnd, *types,
             "satfinite" if satfinite else None)
    return make("wmma.mma", parts, (dv, av, bv, cv), n_dst=1, req=req, type=ab_type,
                info=WmmaInfo("mma", form, (a_layout, b_layout), c_type, d=d_type, bitop=bitop, satfinite=satfinite))


class WmmaOps:
    """Builder methods for the warp-level matrix API.  Fragments are Vecs of registers."""

    def _frag(self, n, t, dst):
        if dst is not None:
            return Vec(tuple(self._val(r) for r in (dst.regs if isinstance(dst, Vec) else dst)))
        return Vec(tuple(self.reg(t) for _ in range(n)))

    def wmma_load(self, which, addr, *, shape, type, layout="row", stride=None, space="generic", dst=None,
                  pred=None):
        """`wmma.load.{a,b,c}.sync.aligned.layout.shape{.space}.type {frag}, [addr]{, stride}`: the warp
        loads fragment `which` of a matrix at `addr` (row- or column-major, `stride` elements between
        rows/columns, default the shape's).  `type` is the element type (the accumulator type for "c").
        Returns the fragment (a Vec of registers)."""
        t = T.lookup(type)
        if which == "c":
            form = _acc_form(shape, t)
            n, rt = form.acc.get(t, 0), _acc_reg_type(t) if t in form.acc else T.b32
        else:
            form = wmma_form(shape, t)
            n, rt = (form.a_regs if which == "a" else form.b_regs), form.frag_type
        frag = self._frag(n, rt, dst)
        s = int_or_val(self._val, stride, "wmma stride")
        self.emit(wmma_load(which, frag, self._addr(addr), shape, t, layout, s, space), pred)
        return frag

    def wmma_store(self, addr, frag, *, shape, type, layout="row", stride=None, space="generic", pred=None):
        """`wmma.store.d.sync.aligned.layout.shape{.space}.type [addr], {frag}{, stride}`: the warp stores
        accumulator fragment `frag` (of element type `type`: f16, f32, s32 or f64)."""
        s = int_or_val(self._val, stride, "wmma stride")
        self.emit(wmma_store(self._addr(addr), self._frag(0, None, frag), shape, T.lookup(type), layout, s, space),
                  pred)

    def wmma_mma(self, a, b, c, *, shape, type, acc=None, c_type=None, a_layout="row", b_layout="col",
                 satfinite=False, bitop=None, rnd=None, dst=None, pred=None):
        """`wmma.mma.sync.aligned.alayout.blayout.shape...` d = a*b + c for fragments of element type
        `type`; `acc` is d's type (default the row's first accumulator type), `c_type` c's (default
        acc; f16 forms may mix .f16/.f32).  `bitop` ('xor.popc'/'and.popc') for .b1, `rnd` for .f64,
        `satfinite` for integer forms.  Returns d (a new fragment unless dst= is given)."""
        t = T.lookup(type)
        form = wmma_form(shape, t)
        d_t = T.lookup(acc) if acc is not None else next(iter(form.acc))
        c_t = T.lookup(c_type) if c_type is not None else d_t
        d = self._frag(form.acc.get(d_t, 0), _acc_reg_type(d_t) if d_t in form.acc else T.b32, dst)
        self.emit(wmma_mma(d, self._frag(0, None, a), self._frag(0, None, b), self._frag(0, None, c), shape, t,
                           d_t, c_t, a_layout, b_layout, satfinite, bitop, rnd), pred)
        return d
