"""Decoders of the breadth families outside memory: carry chains, dot products and video
instructions, the bit-manipulation extras (bmsk, szext, fns), set / slct / testp, the stack and
performance-monitor instructions, narrow and packing conversions, match / movmatrix, bar.red,
griddepcontrol, the later mbarrier operations, sparse mma and the wmma API.

Each reads a mnemonic's parts and calls the ISA constructor; `decode` checks that the constructor
spells the line the same way.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..isa import types as T
from ..isa.bits import bmsk, fns, szext
from ..isa.control import alloca, pmevent, set_, simple, slct, stack, testp
from ..isa.convert_narrow import CVT_PACK, NARROW_CVT, cvt_narrow, cvt_pack
from ..isa.integer import CARRY_FORMS, DOT_FORMS, carry, dot
from ..isa.operands import DISCARD, PairDst, Reg
from ..isa.sparse import mma_sp
from ..isa.sync import bar_red, griddepcontrol, mbarrier_arrive_drop, mbarrier_complete_tx, mbarrier_pending_count
from ..isa.video import VIDEO, video
from ..isa.warp import elect, match, movmatrix
from ..isa.wmma import wmma_load, wmma_mma, wmma_store
from .decode_common import Call, Unknown, _int, _int_or_reg, _mask, _n, _t

_PTXFORGE_INTERNAL = True


def d_carry(parts, ops):
    """add.cc / addc{.cc} / sub.cc / subc{.cc} / mad{.lo,.hi}.cc / madc{.lo,.hi}{.cc}."""
    mods = parts[1:-1]
    cc = "cc" in mods
    mode = next((m for m in mods if m in ("lo", "hi")), None)
    if len(mods) != cc + (mode is not None):
        raise ValidationError(f"{parts[0]} takes {{.lo,.hi}} and .cc only")
    if not ops:
        raise ValidationError(f"{parts[0]} needs a destination")
    return Call(carry, parts[0], _t(parts[-1]), ops[0], list(ops[1:]), cc, mode)


def _d_dot(parts, ops):
    d, a, b, c = _n(ops, 4, parts[0])
    mode = parts[1] if len(parts) == 4 else None
    return Call(dot, parts[0], _t(parts[-2]), _t(parts[-1]), d, a, b, c, mode)


def _d_video(parts, ops):
    form = VIDEO[parts[0]]
    ntypes = 3 if form.dtype else 2
    types = [_t(p) for p in parts[1:1 + ntypes]]
    kw = dict(zip(("dtype", "atype", "btype") if form.dtype else ("atype", "btype"), types))
    for p in parts[1 + ntypes:]:
        if p == "sat":
            kw["sat"] = True
        elif p in ("clamp", "wrap"):
            kw["mode"] = p
        elif p in ("shr7", "shr15"):
            kw["scale"] = p
        elif p in ("add", "min", "max"):
            kw["op2"] = p
        else:
            kw["cmp"] = p
    if len(ops) not in (3, 4):
        raise ValidationError(f"{parts[0]} takes d, a, b and an optional c")
    return Call(video, parts[0], *ops, **kw)


def _d_bmsk(parts, ops):
    d, a, b = _n(ops, 3, "bmsk")
    if parts[-1] != "b32":
        raise ValidationError("bmsk is bmsk.{clamp,wrap}.b32")
    return Call(bmsk, parts[1], d, a, b)


def _d_szext(parts, ops):
    d, a, b = _n(ops, 3, "szext")
    return Call(szext, parts[1], _t(parts[-1]), d, a, b)


def _d_fns(parts, ops):
    d, mask, base, offset = _n(ops, 4, "fns")
    if parts[1:] != ["b32"]:
        raise ValidationError("fns is fns.b32")
    return Call(fns, d, mask, base, offset)


def d_set(parts, ops):
    """set.cmp{.boolop}{.ftz}.dtype.stype d, a, b{, c}."""
    mods = parts[2:-2]
    ftz = "ftz" in mods
    boolop = next((m for m in mods if m != "ftz"), None)
    if boolop is None:
        d, a, b = _n(ops, 3, "set")
        return Call(set_, parts[1], _t(parts[-2]), _t(parts[-1]), d, a, b, None, None, ftz)
    d, a, b, c = _n(ops, 4, f"set.{parts[1]}.{boolop}")
    return Call(set_, parts[1], _t(parts[-2]), _t(parts[-1]), d, a, b, boolop, c, ftz)


def _d_slct(parts, ops):
    d, a, b, c = _n(ops, 4, "slct")
    return Call(slct, _t(parts[-2]), _t(parts[-1]), d, a, b, c, "ftz" in parts[1:-2])


def _d_testp(parts, ops):
    p, a = _n(ops, 2, "testp")
    return Call(testp, parts[1], _t(parts[-1]), p, a)


def _d_stack(parts, ops):
    (d,) = _n(ops, 1, parts[0])
    if parts[1:] != ["u64"]:
        raise ValidationError(f"{parts[0]} is {parts[0]}.u64")
    return Call(stack, parts[0], d)


def _d_alloca(parts, ops):
    if len(ops) not in (2, 3):
        raise ValidationError("alloca takes d, size and an optional alignment")
    if parts[1:] != ["u64"]:
        raise ValidationError("alloca is alloca.u64")
    align = _int(ops[2], "alloca alignment") if len(ops) == 3 else None
    return Call(alloca, ops[0], _int_or_reg(ops[1]), align)


def _d_pmevent(parts, ops):
    (e,) = _n(ops, 1, "pmevent")
    return Call(pmevent, _int(e, "pmevent event"), parts[1:] == ["mask"])


def _d_brkpt(parts, ops):
    _n(ops, 0, "brkpt")
    return Call(simple, "brkpt")


def narrow_cvt(parts, ops):
    """The cvt forms of the narrow table (fp8 pairs, tf32, .relu/.satfinite forms), or None when the
    line is an ordinary cvt."""
    to, frm = parts[-2], parts[-1]
    mods = parts[1:-2]
    if (to, frm) not in NARROW_CVT:
        return None
    if to in ("f16", "bf16", "f16x2", "bf16x2") and frm == "f32" and "relu" not in mods and "satfinite" not in mods:
        return None  # the ordinary cvt
    rnd = next((m for m in mods if m not in ("relu", "satfinite")), None)
    return Call(cvt_narrow, to, frm, ops[0], list(ops[1:]), rnd, "relu" in mods,
                True if "satfinite" in mods else None)


def d_cvt_pack(parts, ops):
    """cvt.pack.sat.t.s32{.b32} d, a, b{, c}."""
    if parts[1:3] != ["pack", "sat"]:
        raise ValidationError("cvt.pack is cvt.pack.sat.type.s32{.b32}")
    t = _t(parts[3])
    if t not in CVT_PACK:
        raise ValidationError(f"cvt.pack packs into {', '.join('.' + x.name for x in CVT_PACK)}, not .{t.name}")
    if len(ops) == 4:
        return Call(cvt_pack, t, *ops)
    d, a, b = _n(ops, 3, "cvt.pack")
    return Call(cvt_pack, t, d, a, b)


def _d_match(parts, ops):
    d, a, m = _n(ops, 3, "match")
    p = None
    if isinstance(d, PairDst):
        d, p = d.reg, d.pred
    return Call(match, parts[1], _t(parts[-1]), d, a, _mask(m), p)


def _d_movmatrix(parts, ops):
    d, a = _n(ops, 2, "movmatrix")
    return Call(movmatrix, d, a)


def d_bar_red(parts, ops):
    """bar.red.popc.u32 / bar.red.{and,or}.pred d, id{, count}, {!}p."""
    if len(ops) == 3:
        d, bid, p = ops
        return Call(bar_red, parts[2], d, _int_or_reg(bid), p)
    d, bid, count, p = _n(ops, 4, "bar.red")
    return Call(bar_red, parts[2], d, _int_or_reg(bid), p, _int_or_reg(count))


def _d_griddepcontrol(parts, ops):
    _n(ops, 0, "griddepcontrol")
    return Call(griddepcontrol, ".".join(parts[1:]))


def d_mbarrier_more(parts, ops, space):
    """mbarrier.complete_tx / arrive_drop / pending_count, or None for another kind."""
    kind = parts[1]
    if kind == "complete_tx":
        a, n = _n(ops, 2, "mbarrier.complete_tx")
        return Call(mbarrier_complete_tx, a, _int_or_reg(n), space)
    if kind == "arrive_drop":
        no_complete = "noComplete" in parts
        if len(ops) == 3:
            return Call(mbarrier_arrive_drop, ops[0], ops[1], _int_or_reg(ops[2]), space, no_complete)
        state, a = _n(ops, 2, "mbarrier.arrive_drop")
        return Call(mbarrier_arrive_drop, state, a, None, space, no_complete)
    if kind == "pending_count":
        d, state = _n(ops, 2, "mbarrier.pending_count")
        return Call(mbarrier_pending_count, d, state)
    return None


def d_elect(ops):
    """elect.sync {lane|_}|p, mask."""
    d, m = _n(ops, 2, "elect.sync")
    if not isinstance(d, PairDst):
        raise ValidationError("elect.sync writes `_|%p` (or `%r|%p`)")
    lane = None if d.reg is DISCARD or not isinstance(d.reg, Reg) else d.reg
    return Call(elect, d.pred, _mask(m), lane)


def d_mma_sp(parts, ops):
    """mma.sp{::ordered_metadata}.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype d, a, b, c, e,
    selector."""
    d, a, b, c, e, sel = _n(ops, 6, "mma.sp")
    satfinite = parts[7:8] == ["satfinite"]
    if satfinite:
        parts = parts[:7] + parts[8:]
    if parts[5:7] != ["row", "col"] or len(parts) != 11:
        raise ValidationError("mma.sp is mma.sp.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype")
    if parts[7] != parts[10]:
        raise ValidationError(f"mma.sp: d (.{parts[7]}) and c (.{parts[10]}) have one type")
    return Call(mma_sp, d, a, b, c, e, _int(sel, "mma.sp sparsity selector"), parts[4], _t(parts[8]), _t(parts[9]),
                _t(parts[7]), parts[1] == "sp::ordered_metadata", **({"satfinite": True} if satfinite else {}))


_SPACES = ("global", "shared", "shared::cta", "local")


def _d_wmma(parts, ops):
    kind = parts[1]
    rest = [p for p in parts if p not in ("sync", "aligned")]
    if kind in ("load", "store"):
        space = next((p for p in rest if p in _SPACES), "generic")
        layout, shape = rest[3], rest[4]
        t = _t(rest[-1])
        if len(ops) not in (2, 3):
            raise ValidationError(f"wmma.{kind} takes the fragment, the address and an optional stride")
        stride = _int_or_reg(ops[2]) if len(ops) == 3 else None
        if kind == "load":
            return Call(wmma_load, rest[2], ops[0], ops[1], shape, t, layout, stride, space)
        if rest[2] != "d":
            raise ValidationError("wmma.store stores fragment d")
        return Call(wmma_store, ops[0], ops[1], shape, t, layout, stride, space)
    if kind != "mma":
        raise Unknown(f"wmma.{kind} is not in the tables (they have load, store, mma)")
    d, a, b, c = _n(ops, 4, "wmma.mma")
    rest = rest[2:]
    bitop = None
    if rest[:1] in (["xor"], ["and"]) and rest[1:2] == ["popc"]:
        bitop, rest = rest[0] + ".popc", rest[2:]
    satfinite = rest[-1:] == ["satfinite"]
    if satfinite:
        rest = rest[:-1]
    a_layout, b_layout, shape, rest = rest[0], rest[1], rest[2], rest[3:]
    rnd = None
    if rest and rest[0] in ("rn", "rz", "rm", "rp"):
        rnd, rest = rest[0], rest[1:]
    elif len(rest) == 5 and rest[-1] in ("rn", "rz", "rm", "rp"):
        # `...m8n8k4.f64.f64.f64.f64.rn`: the rounding after the types, as mma.h writes the f64 wmma::mma_sync
        # (ptxas takes both places); wmma_mma still refuses a rounding on any type but .f64
        rnd, rest = rest[-1], rest[:-1]
    if len(rest) == 2:
        d_t, ab, c_t = _t(rest[0]), T.f16, _t(rest[1])
    elif len(rest) == 4:
        if rest[1] != rest[2]:
            raise ValidationError("wmma.mma: a and b have one type")
        d_t, ab, c_t = _t(rest[0]), _t(rest[1]), _t(rest[3])
    else:
        raise ValidationError("wmma.mma is wmma.mma.sync.aligned.alayout.blayout.shape.dtype{.atype.btype}.ctype")
    return Call(wmma_mma, d, a, b, c, shape, ab, d_t, c_t, a_layout, b_layout, satfinite, bitop, rnd)


#: First mnemonic part -> decoder, for these families.
COMPUTE_DECODERS = {
    **{k: d_carry for k in CARRY_FORMS if k.endswith("c")},
    **{k: _d_dot for k in DOT_FORMS},
    **{k: _d_video for k in VIDEO},
    "bmsk": _d_bmsk, "szext": _d_szext, "fns": _d_fns, "set": d_set, "slct": _d_slct, "testp": _d_testp,
    "stacksave": _d_stack, "stackrestore": _d_stack, "alloca": _d_alloca, "pmevent": _d_pmevent,
    "brkpt": _d_brkpt, "match": _d_match, "movmatrix": _d_movmatrix, "griddepcontrol": _d_griddepcontrol,
    "wmma": _d_wmma,
}
