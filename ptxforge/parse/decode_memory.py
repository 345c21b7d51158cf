"""Decoders of the memory families: ld / st / atom / red with memory orders, scopes and cache
policies, ldu, the cache-control and createpolicy forms, isspacep, st.async / red.async,
multimem, and the texture and surface instructions.

Each reads a mnemonic's parts as a set of modifiers (the order they are written in is checked
afterwards, by comparing the constructor's own spelling) and calls the ISA constructor.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..isa import texture as tx
from ..isa.async_copy import createpolicy
from ..isa.async_store import multimem, red_async, st_async
from ..isa.cache import CACHE_CONTROL, cache_control, createpolicy_cvt, createpolicy_range
from ..isa.convert import isspacep
from ..isa.memory import ATOM_HALF_TYPES, CACHE_OPS, MEM_SEMANTICS, SCOPES, SPACES, atom, ld, ldu, st
from ..isa.operands import Addr, Imm, TensorAddr, Vec
from .decode_common import Call, Unknown, _int_or_reg, _n, _t

_PTXFORGE_INTERNAL = True

_ORDERS = frozenset(s for sems in MEM_SEMANTICS.values() for s in sems)
_HINT = "L2::cache_hint"


def mem_order(parts):
    """The memory order and scope a mnemonic names (`ld.acquire.gpu...` -> ("acquire", "gpu")), or Nones."""
    sem = next((p for p in parts[1:] if p in _ORDERS), None)
    scope = next((p for p in parts[1:] if p in SCOPES), None)
    return sem, scope


def _mem_parts(parts):
    space = "generic"
    vec, nc, cop, hints, policy = 1, False, None, [], False
    for p in parts[1:-1]:
        if p in SPACES:
            space = p
        elif p == "nc":
            nc = True
        elif p[0] == "v" and p[1:].isdigit():
            vec = int(p[1:])
        elif p in CACHE_OPS["ld"] or p in CACHE_OPS["st"]:
            cop = p
        elif p == _HINT:
            policy = True
        elif p in _ORDERS or p in SCOPES:
            continue
        else:
            hints.append(p)
    return space, vec, nc, cop, tuple(hints), policy, _t(parts[-1])


def _one(x, vec):
    """A scalar access may name its register in braces (`{ %r1 }`, as LLVM writes it): the register."""
    return x.regs[0] if vec == 1 and isinstance(x, Vec) and len(x.regs) == 1 else x


def _policy(ops, policy, k, what):
    """The operands without the trailing cache-policy register, and that register (or None)."""
    if policy:
        _n(ops, k + 1, f"{what}.L2::cache_hint")
        return ops[:k], ops[k]
    return _n(ops, k, what), None


def _d_ld(parts, ops):
    space, vec, nc, cop, hints, policy, t = _mem_parts(parts)
    (d, a), pol = _policy(ops, policy, 2, "ld")
    sem, scope = mem_order(parts)
    return Call(ld, t, _one(d, vec), a, space, vec, nc, cop, hints, sem, scope, pol)


def _d_st(parts, ops):
    if parts[1:2] == ["async"]:
        a, v, m = _n(ops, 3, "st.async")
        vec = next((int(p[1:]) for p in parts if p[0] == "v" and p[1:].isdigit()), 1)
        return Call(st_async, a, v, m, _t(parts[-1]), vec, "weak" in parts)
    space, vec, nc, cop, hints, policy, t = _mem_parts(parts)
    if nc:
        raise ValidationError("st has no .nc")
    (a, v), pol = _policy(ops, policy, 2, "st")
    sem, scope = mem_order(parts)
    return Call(st, t, a, _one(v, vec), space, vec, cop, hints, sem, scope, pol)


def _d_atom(parts, ops):
    red = parts[0] == "red"
    if red and parts[1:2] == ["async"]:
        a, v, m = _n(ops, 3, "red.async")
        return Call(red_async, parts[-2], a, v, m, _t(parts[-1]))
    sem, scope = mem_order(parts)
    policy = _HINT in parts
    vec = next((int(p[1:]) for p in parts[1:-1] if p[0] == "v" and p[1:].isdigit()), 1)
    rest = [p for p in parts[1:-1] if p not in (sem, scope, _HINT, "noftz", f"v{vec}")]
    space = rest[0] if len(rest) == 2 else "generic"
    if len(rest) not in (1, 2) or (len(rest) == 2 and rest[0] not in SPACES):
        raise ValidationError(f"{parts[0]} is {parts[0]}{{.sem}}{{.scope}}{{.space}}.op{{.noftz}}{{.L2::cache_hint}}"
                              "{.vN}.type")
    op, t = rest[-1], _t(parts[-1])
    if ("noftz" in parts) != (t in ATOM_HALF_TYPES):
        raise ValidationError(f"{parts[0]}: .noftz goes with the half types (" + ", ".join(
            "." + x.name for x in ATOM_HALF_TYPES) + f") and only with them; this is .{t.name}")
    if red:
        (a, b), pol = _policy(ops, policy, 2, "red")
        return Call(atom, op, t, None, a, b, None, space, True, sem, scope, pol, vec)
    if op == "cas":
        (d, a, b, c), pol = _policy(ops, policy, 4, "atom.cas")
        return Call(atom, op, t, d, a, b, c, space, False, sem, scope, pol)
    (d, a, b), pol = _policy(ops, policy, 3, "atom")
    return Call(atom, op, t, _one(d, vec), a, _one(b, vec), None, space, False, sem, scope, pol, vec)


def _d_ldu(parts, ops):
    d, a = _n(ops, 2, "ldu")
    space = "global" if "global" in parts else "generic"
    vec = next((int(p[1:]) for p in parts[1:-1] if p[0] == "v" and p[1:].isdigit()), 1)
    return Call(ldu, _t(parts[-1]), _one(d, vec), a, space, vec)


def _d_cache_control(parts, ops):
    form = CACHE_CONTROL[parts[0]]
    _n(ops, 1 if form.size is None else 2, parts[0])
    if form.size is not None and not (isinstance(ops[1], Imm) and ops[1].value == form.size):
        raise ValidationError(f"{parts[0]} takes the size {form.size}, got {ops[1]}")
    space = "global" if "global" in parts else None
    return Call(cache_control, parts[0], ops[0], space)


def _d_createpolicy(parts, ops):
    kind = parts[1]
    if kind == "fractional":
        d, frac = _n(ops, 2, "createpolicy")  # an immediate fraction, or a register holding one
        return Call(createpolicy, d, parts[2], float(frac.value) if isinstance(frac, Imm) else frac)
    if kind == "cvt":
        d, prop = _n(ops, 2, "createpolicy.cvt")
        return Call(createpolicy_cvt, d, prop)
    if kind == "range":
        d, a, primary_size, total_size = _n(ops, 4, "createpolicy.range")
        space = "global" if "global" in parts else None
        levels = [p for p in parts[2:-1] if p.startswith("L2::")]
        if not 1 <= len(levels) <= 2:
            raise ValidationError("createpolicy.range names a primary and an optional secondary priority")
        secondary = levels[1] if len(levels) == 2 else None
        return Call(createpolicy_range, d, a, _int_or_reg(primary_size), _int_or_reg(total_size), levels[0],
                    secondary, space)
    raise Unknown(f"createpolicy.{kind}: the tables have createpolicy.fractional, .range and .cvt")


def _d_isspacep(parts, ops):
    p, a = _n(ops, 2, "isspacep")
    return Call(isspacep, p, a, ".".join(parts[1:]))


def _d_multimem(parts, ops):
    kind = parts[1]
    sem = next((p for p in parts[2:] if p in ("weak", "relaxed", "acquire", "release")), None)
    scope = next((p for p in parts[2:] if p in SCOPES), None)
    rest = [p for p in parts[2:-1] if p not in (sem, scope, "global")]
    op = rest[0] if rest else None
    if kind == "ld_reduce":
        d, a = _n(ops, 2, "multimem.ld_reduce")
        return Call(multimem, kind, _t(parts[-1]), a, d, None, op, sem, scope)
    a, v = _n(ops, 2, f"multimem.{kind}")
    return Call(multimem, kind, _t(parts[-1]), a, None, v, op, sem, scope)


# ---------------------------------------------------------------- textures and surfaces

def _handle_coords(op, what):
    if not isinstance(op, TensorAddr):
        raise ValidationError(f"{what} addresses [handle, {{coordinates}}], got {op}")
    return op.tmap, op.coords


def _handle(op, what):
    if not (isinstance(op, Addr) and op.offset == 0):
        raise ValidationError(f"{what} names its object as [handle], got {op}")
    return op.base


def _d_tex(parts, ops):
    lod = grad = None
    if parts[1] == "level":
        d, hc, lod = _n(ops, 3, "tex.level")
        parts = parts[:1] + parts[2:]
    elif parts[1] == "grad":
        d, hc, dx, dy = _n(ops, 4, "tex.grad")
        grad = (dx, dy)
        parts = parts[:1] + parts[2:]
    else:
        d, hc = _n(ops, 2, "tex")
    h, c = _handle_coords(hc, "tex")
    return Call(tx.tex, d, h, c, parts[1], _t(parts[-2]), _t(parts[-1]), lod, grad)


def _d_tld4(parts, ops):
    d, hc = _n(ops, 2, "tld4")
    h, c = _handle_coords(hc, "tld4")
    if parts[-1] != "f32":
        raise ValidationError("tld4 reads .f32 coordinates")
    return Call(tx.tld4, parts[1], d, h, c, parts[2], _t(parts[-2]))


def _d_txq(parts, ops):
    if parts[1] == "level":
        d, h, lod = _n(ops, 3, "txq.level")
        return Call(tx.txq, parts[2], d, _handle(h, "txq"), lod)
    d, h = _n(ops, 2, "txq")
    return Call(tx.txq, parts[1], d, _handle(h, "txq"))


def _d_istypep(parts, ops):
    p, h = _n(ops, 2, "istypep")
    return Call(tx.istypep, parts[1], p, h)


def _surface_parts(parts):
    vec = next((int(p[1:]) for p in parts if p[0] == "v" and p[1:].isdigit()), 1)
    cop = next((p for p in parts[3:-2] if p in tx.SURF_COPS.get(parts[0], ())), None)
    return parts[2], cop, vec, _t(parts[-2]), parts[-1]


def _d_suld(parts, ops):
    d, hc = _n(ops, 2, "suld")
    h, c = _handle_coords(hc, "suld")
    geom, cop, vec, t, clamp = _surface_parts(parts)
    return Call(tx.suld, d, h, c, geom, t, vec, clamp, cop)


def _d_sust(parts, ops):
    hc, v = _n(ops, 2, "sust")
    h, c = _handle_coords(hc, "sust")
    geom, cop, vec, t, clamp = _surface_parts(parts)
    return Call(tx.sust, h, c, v, geom, t, vec, clamp, cop, parts[1] == "p")


def _d_sured(parts, ops):
    hc, v = _n(ops, 2, "sured")
    h, c = _handle_coords(hc, "sured")
    return Call(tx.sured, parts[2], h, c, v, parts[3], _t(parts[-2]), parts[-1])


def _d_suq(parts, ops):
    d, h = _n(ops, 2, "suq")
    return Call(tx.suq, parts[1], d, _handle(h, "suq"))


#: First mnemonic part -> decoder, for the memory families.
MEMORY_DECODERS = {
    "ld": _d_ld, "st": _d_st, "atom": _d_atom, "red": _d_atom, "ldu": _d_ldu,
    **{k: _d_cache_control for k in CACHE_CONTROL},
    "createpolicy": _d_createpolicy, "isspacep": _d_isspacep, "multimem": _d_multimem,
    "tex": _d_tex, "tld4": _d_tld4, "txq": _d_txq, "istypep": _d_istypep,
    "suld": _d_suld, "sust": _d_sust, "sured": _d_sured, "suq": _d_suq,
}
