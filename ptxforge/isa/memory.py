"""Memory: ld, st (scalar and vector, every state space), atom/red, prefetch, ldmatrix, stmatrix,
with memory-consistency qualifiers (`MEM_SEMANTICS`, `SCOPES`) and L2 cache-policy operands.

Legal forms as data: `LDMATRIX_FORMS`, `STMATRIX_FORMS` (shape x count x trans ->
registers, arch, ISA), `LD_TYPES`, `CACHE_OPS`, `ATOM_OPS`, `PREFETCH_LEVELS`, `MEM_SEMANTICS`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from . import types as T
from .instruction import check_addr, check_dst, check_value, check_vec, checked_form, int_arg, make
from .operands import Addr, Reg, Symbol, Vec, half_pattern
from .quick_init import quick_init
from .targets import BASE, Requirement, V

_PTXFORGE_INTERNAL = True

SPACES = ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "const", "generic")
# No .f16/.bf16: ptxas moves half values as .b16 (the builder maps them).
LD_TYPES = (T.b8, T.b16, T.b32, T.b64, T.u8, T.u16, T.u32, T.u64, T.s8, T.s16, T.s32, T.s64,
            T.f32, T.f64, T.b128)
CACHE_OPS = {"ld": ("ca", "cg", "cs", "lu", "cv"), "st": ("wb", "cg", "cs", "wt")}
PREFETCH = ("L2::64B", "L2::128B", "L2::256B")
EVICT = ("L1::evict_normal", "L1::evict_unchanged", "L1::evict_first", "L1::evict_last",
         "L1::no_allocate")


#: Memory-consistency qualifiers by instruction: `.volatile` (no scope), or a memory order
#: that needs a scope (`ld.acquire.gpu`, `st.release.sys`, `atom.acq_rel.cta`).  They apply to
#: the spaces of `ORDER_SPACES` only, and not together with cache operators or .nc; .volatile takes
#: no L1 eviction priority and no cache policy, and ld.volatile takes an L2 prefetch size.
MEM_SEMANTICS = {"ld": ("volatile", "relaxed", "acquire"), "st": ("volatile", "relaxed", "release"),
                 "atom": ("relaxed", "acquire", "release", "acq_rel"), "red": ("relaxed", "release")}
SCOPES = ("cta", "cluster", "gpu", "sys")
REQ_CLUSTER_SCOPE = Requirement(90, V("7.8"))
#: `.L2::cache_hint`: a 64-bit cache policy (from createpolicy) as the last operand (PTX 7.4).
REQ_CACHE_HINT = Requirement(80, V("7.4"))
#: The state spaces a memory order (.volatile, .relaxed, .acquire, .release) may name: not .local, .param or
#: .const.  .shared::cluster (another CTA's shared memory, an address from mapa) is sm_90 (`_mem_req`).
ORDER_SPACES = ("global", "shared", "shared::cta", "shared::cluster", "generic")
#: A .b128 access (ld, st, atom.exch / atom.cas) at .sys scope: PTX ISA 8.4 (ptxas:
#: "Feature '.b128 with .sys' requires PTX ISA .version 8.4 or later"); other scopes take .b128 from 8.3.
REQ_B128_SYS = Requirement(80, V("8.4"))


@quick_init
@dataclass(frozen=True)
class MemInfo:
    """Semantics of one ld/st: space, element type, vector width, cache hints, memory order."""

    space: str
    type: T.ScalarType
    vec: int
    nc: bool = False
    cop: str | None = None
    sem: str | None = None  # volatile / relaxed / acquire / release
    scope: str | None = None
    policy: bool = False  # an .L2::cache_hint operand follows the value

    @property
    def nbytes(self) -> int:
        """Bytes one thread moves: the element size times the vector width."""
        return self.type.bits // 8 * self.vec


def _order_check(name, sem, scope, space, *, cop=None, nc=False, hints=(), t=None):
    """The memory-order qualifier parts (`volatile` / `relaxed`, `gpu`) and their requirement (`t`: the type, for
    .b128 at .sys scope)."""
    if sem is None:
        if scope is not None and name in ("ld", "st"):
            raise ValidationError(f"{name}.{scope}: a scope needs a memory order (sem='relaxed', 'acquire', ...)")
        if scope is not None and scope not in SCOPES:
            raise ValidationError(f"{name} scope must be one of {SCOPES}, got {scope!r}")
        return (None, scope), _scope_req(scope, t)
    legal = MEM_SEMANTICS[name]
    if sem not in legal:
        raise ValidationError(f"{name} takes the memory orders {', '.join('.' + x for x in legal)}, not .{sem}")
    if space not in ORDER_SPACES:
        raise ValidationError(f"{name}.{sem} applies to " + ", ".join("." + x for x in ORDER_SPACES[:-1])
                              + f" or generic addresses, not .{space}")
    if sem == "volatile":
        if scope is not None:
            raise ValidationError(f"{name}.volatile takes no scope (it acts as .relaxed.sys)")
        evict = [h for h in hints if h not in PREFETCH]
        if evict:
            raise ValidationError(f"{name}.volatile takes no L1 eviction priority, got "
                                  + ", ".join("." + h for h in evict)
                                  + ("; ld.volatile takes an L2 prefetch size (" + ", ".join("." + h for h in PREFETCH)
                                     + ")" if name == "ld" else ""))
    elif scope is None and name in ("atom", "red"):
        pass  # an atomic's scope defaults to .gpu (the PTX ISA; ptxas takes atom.relaxed.global.cas.b32)
    elif scope not in SCOPES:
        raise ValidationError(f"{name}.{sem} needs a scope, one of {', '.join('.' + x for x in SCOPES)}; got {scope!r}")
    if cop is not None or nc:
        raise ValidationError(f"{name}.{sem} cannot be combined with {'.nc' if nc else '.' + cop}")
    return (sem, scope), _scope_req(scope, t)


def _scope_req(scope, t):
    """What a scope needs: .cluster is sm_90 (PTX 7.8); .b128 at .sys is PTX 8.4."""
    req = REQ_CLUSTER_SCOPE if scope == "cluster" else BASE
    return req.merge(REQ_B128_SYS) if t is T.b128 and scope == "sys" else req


def _policy_check(name, policy, space, sem):
    if policy is None:
        return
    if space not in ("global", "generic"):
        raise ValidationError(f"{name}.L2::cache_hint applies to .global or generic addresses, not .{space}")
    if sem == "volatile":
        raise ValidationError(f"{name}.volatile cannot take an .L2::cache_hint policy")
    check_value(policy, T.b64, f"{name} cache policy", imm_ok=False)


def _space_part(space):
    if space not in SPACES:
        raise ValidationError(f"unknown state space {space!r}; one of {SPACES}")
    return None if space == "generic" else space


def _mem_req(space, t, hints, vec=1):
    req = REQ_WIDE_VECTOR if _wide_vector(t, vec) else BASE
    if space == "shared::cta":
        req = req.merge(Requirement(80, V("7.8")))
    if space == "shared::cluster":  # another CTA's shared memory (an address from mapa)
        req = req.merge(Requirement(90, V("7.8")))
    if t is T.b128:
        req = req.merge(Requirement(80, V("8.3")))
    if any(h in PREFETCH or h in EVICT for h in hints):
        req = req.merge(Requirement(80, V("7.4")))
    return req


def _hint_space_check(hints, space, what, cop=None, nc=False):
    # eviction priorities and L2 prefetch sizes steer the global-memory caches only
    if hints and space not in ("global", "generic"):
        raise ValidationError(f"{what}: cache hints {', '.join('.' + h for h in hints)} apply to .global "
                              f"(or generic) addresses, not .{space}")
    evict = [h for h in hints if h in EVICT]
    sizes = [h for h in hints if h in PREFETCH]
    if len(evict) > 1:
        raise ValidationError(f"{what}: one L1 eviction priority per access, got "
                              + ", ".join("." + h for h in evict))
    if len(sizes) > 1:
        raise ValidationError(f"{what}: one L2 prefetch size per access, got " + ", ".join("." + h for h in sizes))
    if evict and cop is not None:
        raise ValidationError(f"{what}: the cache operator .{cop} and the L1 eviction priority .{evict[0]} "
                              "cannot be combined; give one or the other")
    if nc and cop in ("cv", "lu"):
        raise ValidationError(f"ld.global.nc reads through the read-only cache: .{cop} is not legal with .nc "
                              "(use .ca, .cg or .cs, or drop .nc)")


def _vec_regs_check(regs, t, what):
    """The registers of one vector access: ptxas refuses elements of different types (bit types
    mix with anything of their width)."""
    for r in regs:  # the common case first: every register of the access's own type
        if type(r) is not Reg or r.type is not t:
            break
    else:
        return
    typed = {r.type.name if r.type.is_float else "int" for r in regs if isinstance(r, Reg) and r.type.kind != "b"}
    if len(typed) > 1:
        raise ValidationError(f"{what}: the registers of a vector access must have one type; got "
                              + ", ".join(f"{r} (.{r.type.name})" for r in regs if isinstance(r, Reg)))


def _addr_form_check(a, space, what, nbytes=0, vector=False):
    """Immediate addresses exist only for .local; an access of `nbytes` must be aligned to its size: a vector
    access always (its register base is taken to be aligned), a single value where the address is known, a
    variable aligned to a multiple of the size and a constant offset (ptxas takes `ld.shared.u32 [smem+2]`,
    which faults at run time)."""
    if isinstance(a.base, int) and space != "local":
        raise ValidationError(f"{what}: an immediate address [{a.base + a.offset}] is legal only for .local; "
                              "address other spaces through a register or a variable")
    if not vector:
        base = a.base
        if (nbytes > 1 and isinstance(base, Symbol) and base.align % nbytes == 0 and a.offset % nbytes
                and space != "param"):
            raise ValidationError(f"{what}: a {nbytes}-byte access must be {nbytes}-byte aligned; {base.name} is "
                                  f"aligned to {base.align} and the offset {a.offset} is not a multiple of {nbytes}")
        return
    if nbytes > 1:
        base = a.base
        known = base.align if isinstance(base, Symbol) else nbytes  # a register base: its offset must keep it
        # .param variables are laid out by the calling convention, which packs vectors in them itself
        if a.offset % nbytes or (isinstance(base, Symbol) and known % nbytes and space != "param"):
            raise ValidationError(
                f"{what}: a {nbytes}-byte vector access must be {nbytes}-byte aligned; "
                + (f"{base.name} is aligned to {base.align} and the offset is {a.offset}" if isinstance(base, Symbol)
                   else f"the constant offset {a.offset} is not a multiple of {nbytes}"))


#: 256-bit vector accesses (.v8 of 32-bit, .v4 of 64-bit values) to global or generic memory: sm_100, PTX 8.8.
REQ_WIDE_VECTOR = Requirement(100, V("8.8"))


def _wide_vector(t, vec) -> bool:
    return vec > 1 and t.bits * vec == 256 and t.bits in (32, 64)


def _vec_check(t, vec, what, space="global"):
    if vec not in (1, 2, 4, 8):
        raise ValidationError(f"{what}: vector width must be 1, 2, 4 or 8, got {vec}")
    if t is T.b128 and vec != 1:
        raise ValidationError(f"{what}: .b128 cannot be a vector")
    if _wide_vector(t, vec):
        if space not in ("global", "generic"):
            raise ValidationError(f"{what}: a 256-bit .v{vec}.{t.name} access exists only for .global (or generic) "
                                  "addresses")
        return
    if vec == 8 or (vec > 1 and t.bits * vec > 128):
        raise ValidationError(f"{what}: .v{vec}.{t.name} is {t.bits * vec} bits; a vector access moves at most 128 "
                              "(256 as .v8 of 32-bit or .v4 of 64-bit values in .global memory on sm_100)")


def _with_policy(hints, policy):
    """The hint parts with `L2::cache_hint` placed before any L2 prefetch size."""
    if policy is None:
        return tuple(hints)
    ev = tuple(h for h in hints if h not in PREFETCH)
    return ev + ("L2::cache_hint",) + tuple(h for h in hints if h in PREFETCH)


def ld(t, d, addr, space="generic", vec=1, nc=False, cop=None, hints=(), sem=None, scope=None, policy=None):
    """Build and check `ld{.sem.scope}{.space}{.nc}{.cop}{.hints}{.L2::cache_hint}{.vN}.type d, [addr]{, policy}`
    (pure: no builder).

    Args:
        t: the element type (one of `LD_TYPES`).
        d: the destination register, or a Vec of `vec` registers.
        addr: an `Addr` (register plus constant offset) or a symbol.
        space: one of `SPACES` ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "const",
            "generic").
        vec: 1, 2 or 4 elements (``.v2``/``.v4``; at most 16 bytes; 256-bit vectors on sm_100).
        nc: ``ld.global.nc`` (through the non-coherent read-only cache).
        cop: a cache operator of `CACHE_OPS` ("ca", "cg", "cs", "lu", "cv").
        hints: eviction priorities (`EVICT`), sm_80 and PTX 7.4 on.
        sem: a memory order of `MEM_SEMANTICS` ("volatile", "relaxed", "acquire"), with `scope` where it takes one;
            only for the spaces of `ORDER_SPACES`.
        scope: "cta", "cluster", "gpu" or "sys".
        policy: a 64-bit cache-policy register (`createpolicy`) for ``.L2::cache_hint``.
    """
    hints, vec = tuple(hints), int_arg(vec, "ld vector width")  # (a form is kept under its key: 4.0 and True too)
    form = checked_form(_FORMS, ("ld", t, space, vec, nc, cop, hints, sem, scope, policy is not None), _ld_form)
    what, what_d, parts, req, info = form
    a = check_addr(addr, "generic" if space == "generic" else space.split("::")[0], what)
    _addr_form_check(a, space, what, t.bits // 8 * vec, vec > 1)
    wide = t.is_int or t.kind == "b"
    if vec == 1:
        if isinstance(d, Vec):
            raise ValidationError(f"{what}: a scalar load has one destination register, got {len(d)}; pass vec=")
        if type(d) is not Reg or d.type is not t:
            check_dst(d, t, what_d, wide_ok=wide)
    else:
        check_vec(d, vec, t, what_d, wide_ok=wide)
        _vec_regs_check(d, t, what_d)
    if policy is not None:
        _policy_check("ld", policy, space, sem)
    return make("ld", parts, (d, a) + ((policy,) if policy is not None else ()), n_dst=1, type=t, req=req,
                info=info, mods=(space,))


#: ld/st forms checked before (`checked_form`): (opcode, type, space, vec, nc, cop, hints, sem, scope, has a
#: policy) -> (what, what of the register operand, mnemonic parts, requirement, MemInfo)
_FORMS: dict = {}


def _ld_form(_, t, space, vec, nc, cop, hints, sem, scope, has_policy):
    what = f"ld.{space}"
    if t not in LD_TYPES:
        raise ValidationError(f"{what} does not take .{t.name}; types: " + ", ".join("." + x.name for x in LD_TYPES))
    _vec_check(t, vec, what, space)
    if nc and space != "global":
        raise ValidationError("ld.nc (read-only data cache) exists only for .global")
    if cop is not None and cop not in CACHE_OPS["ld"]:
        raise ValidationError(f"ld cache operator must be one of {CACHE_OPS['ld']}, got {cop!r}")
    for h in hints:
        if h not in PREFETCH + EVICT:
            raise ValidationError(f"unknown ld hint {h!r}; one of {PREFETCH + EVICT}")
    _hint_space_check(hints, space, what, cop, nc)
    order, oreq = _order_check("ld", sem, scope, space, cop=cop, nc=nc, hints=hints, t=t)
    req = _mem_req(space, t, hints, vec).merge(oreq)
    if has_policy:
        req = req.merge(REQ_CACHE_HINT)
    parts = ("ld", *order, _space_part(space), "nc" if nc else None, cop, *_with_policy(hints, has_policy or None),
             f"v{vec}" if vec > 1 else None, t.name)
    what_d = f"{what} destination" if vec == 1 else f"{what}.v{vec} destination"
    return what, what_d, parts, req, MemInfo(space, t, vec, nc, cop, sem, scope, has_policy)


def _writable_param(addr) -> bool:
    """Call arguments and return values (`CallParam`) are the .param variables a store may name."""
    from .calls import CallParam
    base = addr.base if isinstance(addr, Addr) else addr
    return isinstance(base, CallParam)


def st(t, addr, v, space="generic", vec=1, cop=None, hints=(), sem=None, scope=None, policy=None):
    """Build and check `st{.sem.scope}{.space}{.cop}{.hints}{.L2::cache_hint}{.vN}.type [addr], v{, policy}`
    (pure: no builder).

    Arguments as for `ld`, with `v` the value stored (a register, immediate, or a Vec of `vec` of them) and
    `sem` "volatile", "relaxed" or "release"; the .param and .const spaces are read-only.
    """
    hints, vec = tuple(hints), int_arg(vec, "st vector width")
    form = checked_form(_FORMS, ("st", t, space, vec, None, cop, hints, sem, scope, policy is not None), _st_form)
    what, what_v, parts, req, info = form
    if space == "param" and not _writable_param(addr):
        raise ValidationError("st.param is not allowed: .param memory is read-only in a kernel (only call "
                              "arguments and return values, .param variables a call or a device function "
                              "declares, may be stored to)")
    a = check_addr(addr, "generic" if space == "generic" else space.split("::")[0], what)
    _addr_form_check(a, space, what, t.bits // 8 * vec, vec > 1)
    if vec == 1:
        if isinstance(v, Vec):
            raise ValidationError(f"{what}: a scalar store takes one register or number, got a list of {len(v)}; "
                                  "pass the value itself (or vec= and a list of 2, 4 or 8 for a vector store)")
        if type(v) is not Reg or v.type is not t:
            check_value(v, t, what_v, wide_ok=t.is_int or t.kind == "b")
    else:
        check_vec(v, vec, t, what_v, imm_ok=True, wide_ok=t.is_int or t.kind == "b")
        _vec_regs_check(v, t, what_v)
    if policy is not None:
        _policy_check("st", policy, space, sem)
    return make("st", parts, (a, v) + ((policy,) if policy is not None else ()), n_dst=0, type=t, req=req,
                info=info, mods=(space,))


def _st_form(_, t, space, vec, _nc, cop, hints, sem, scope, has_policy):
    what = f"st.{space}"
    if t not in LD_TYPES:
        raise ValidationError(f"{what} does not take .{t.name}")
    if space == "const":
        raise ValidationError("st.const is not allowed: .const memory is read-only in a kernel")
    _vec_check(t, vec, what, space)
    if cop is not None and cop not in CACHE_OPS["st"]:
        raise ValidationError(f"st cache operator must be one of {CACHE_OPS['st']}, got {cop!r}")
    for h in hints:
        if h not in EVICT:
            raise ValidationError(f"unknown st hint {h!r}; one of {EVICT}")
    _hint_space_check(hints, space, what, cop)
    order, oreq = _order_check("st", sem, scope, space, cop=cop, hints=hints, t=t)
    req = _mem_req(space, t, hints, vec).merge(oreq)
    if has_policy:
        req = req.merge(REQ_CACHE_HINT)
    parts = ("st", *order, _space_part(space), cop, *_with_policy(hints, has_policy or None),
             f"v{vec}" if vec > 1 else None, t.name)
    what_v = f"{what} source" if vec == 1 else f"{what}.v{vec} source"
    return what, what_v, parts, req, MemInfo(space, t, vec, False, cop, sem, scope, has_policy)


def ldu(t, d, addr, space="global", vec=1):
    """ldu{.global}{.vN}.type d, [a]: a load of a value every thread of the warp reads at one address
    (through the uniform cache); the address must be read-only for the kernel's lifetime."""
    if space not in ("global", "generic"):
        raise ValidationError(f"ldu reads .global or generic addresses, not .{space}")
    if t not in LD_TYPES or t is T.b128:
        raise ValidationError(f"ldu does not take .{t.name}")
    vec = int_arg(vec, "ldu vector width")
    _vec_check(t, vec, "ldu")
    if t.bits * vec > 128:
        raise ValidationError(f"ldu: .v{vec}.{t.name} is {t.bits * vec} bits; ldu moves at most 128")
    a = check_addr(addr, space, "ldu")
    wide = t.is_int or t.kind == "b"
    if vec == 1:
        check_dst(d, t, "ldu destination", wide_ok=wide)
    else:
        check_vec(d, vec, t, f"ldu.v{vec} destination", wide_ok=wide)
    parts = ("ldu", _space_part(space), f"v{vec}" if vec > 1 else None, t.name)
    return make("ldu", parts, (d, a), n_dst=1, type=t, info=MemInfo(space, t, vec), mods=(space,))


# ------------------------------------------------------------------ prefetch

#: prefetch level -> (state spaces it may name, requirement); None is the generic space.
PREFETCH_LEVELS = {
    "L1": ((None, "global", "local"), BASE),
    "L2": ((None, "global", "local"), BASE),
    "L2::evict_last": ((None, "global"), Requirement(80, V("7.4"))),
    "L2::evict_normal": ((None, "global"), Requirement(80, V("7.4"))),
}
#: prefetch.tensormap: the tensor map may be named by a generic, .const or .param address.
TENSORMAP_SPACES = (None, "const", "param")
REQ_TENSORMAP = Requirement(90, V("8.0"))


@dataclass(frozen=True)
class PrefetchInfo:
    """Semantics of one prefetch: the cache level (or "tensormap") and the space, None for generic."""
    level: str  # "L1", "L2", "L2::evict_last", ... or "tensormap"
    space: str | None


def prefetch(addr, level="L2", space=None):
    """prefetch{.space}.level [a]: bring a line into L1/L2 (a hint: no result, no fault)."""
    if level not in PREFETCH_LEVELS:
        raise ValidationError(f"prefetch level must be one of {tuple(PREFETCH_LEVELS)}, got {level!r}")
    spaces, req = PREFETCH_LEVELS[level]
    if space not in spaces:
        raise ValidationError(f"prefetch.{level} takes the state spaces "
                              + ", ".join("generic" if s is None else "." + s for s in spaces) + f", not {space!r}")
    a = check_addr(addr, space or "generic", "prefetch")
    return make("prefetch", ("prefetch", space, level), (a,), req=req, info=PrefetchInfo(level, space))


def prefetch_tensormap(addr, space=None):
    """prefetch{.const|.param}.tensormap [a] (sm_90): warm the TMA descriptor cache."""
    if space not in TENSORMAP_SPACES:
        raise ValidationError("prefetch.tensormap takes a generic, .const or .param address, not "
                              f"{space!r}")
    a = check_addr(addr, space or "generic", "prefetch.tensormap")
    return make("prefetch", ("prefetch", space, "tensormap"), (a,), req=REQ_TENSORMAP,
                info=PrefetchInfo("tensormap", space))


# ------------------------------------------------------------------ atomics

ATOM_OPS = {
    "add": (T.u32, T.s32, T.u64, T.f32, T.f64, T.f16, T.f16x2, T.bf16, T.bf16x2),
    "min": (T.u32, T.s32, T.u64, T.s64, T.f16, T.f16x2, T.bf16, T.bf16x2),
    "max": (T.u32, T.s32, T.u64, T.s64, T.f16, T.f16x2, T.bf16, T.bf16x2),
    "and": (T.b32, T.b64), "or": (T.b32, T.b64), "xor": (T.b32, T.b64),
    "exch": (T.b32, T.b64, T.b128), "cas": (T.b16, T.b32, T.b64, T.b128), "inc": (T.u32,), "dec": (T.u32,),
}
#: The state spaces atom/red name with this CTA's addresses -> what naming each needs (.shared::cta: PTX ISA 7.8).
ATOM_SPACES = {"global": BASE, "shared": BASE, "shared::cta": Requirement(80, V("7.8")), "generic": BASE}
#: ... and the cluster's shared memory, any CTA's (an address from mapa): sm_90, scalar forms only.
ATOM_CLUSTER_SPACES = {"shared::cluster": Requirement(90, V("7.8"))}
_ATOM_SPACE_REQ = {**ATOM_SPACES, **ATOM_CLUSTER_SPACES}
#: The half-precision types atom/red take, always with .noftz (ptxas: "'.noftz' modifier required").
ATOM_HALF_TYPES = (T.f16, T.f16x2, T.bf16, T.bf16x2)
#: Vector atom/red (sm_90, PTX ISA 8.1; .global or generic addresses): (op, type) -> the legal lengths.  Half
#: types take min/max only as vectors.
ATOM_VECTORS = {
    **{("add", T.f32): (2, 4)},
    **{(op, t): (2, 4, 8) for op in ("add", "min", "max") for t in (T.f16, T.bf16)},
    **{(op, t): (2, 4) for op in ("add", "min", "max") for t in (T.f16x2, T.bf16x2)},
}
#: What the newer atom/red types need beyond the base.
ATOM_TYPE_REQ = {T.bf16: Requirement(90, V("7.8")), T.bf16x2: Requirement(90, V("7.8")),
                 T.b128: Requirement(90, V("8.3"))}
REQ_ATOM_VECTOR = Requirement(90, V("8.1"))
#: The atom/red operations that take `.L2::cache_hint` (with a cache-policy operand): every one but cas, whose
#: three-operand form (compare and new value) the PTX ISA gives no cache hint (ptxas: "Illegal modifier
#: '.L2::cache_hint' for instruction 'atom'", for every cas type).
ATOM_CACHE_HINT_OPS = tuple(op for op in ATOM_OPS if op != "cas")


@dataclass(frozen=True)
class AtomInfo:
    """Semantics of one atom/red: operation, space, type, memory order, scope and vector length (each element
    of a vector atom is an atomic of its own)."""

    op: str
    space: str
    type: T.ScalarType
    sem: str | None = None
    scope: str | None = None
    vec: int = 1


def atom(op, t, d, addr, b, c=None, space="global", reduce_only=False, sem=None, scope=None, policy=None, vec=1):
    """Build and check `atom{.sem}{.scope}{.space}.op{.noftz}{.L2::cache_hint}{.vN}.type d, [addr], b{, c}{, policy}`
    or `red...` likewise without d (pure: no builder).  The half types (f16, f16x2, bf16, bf16x2) are written
    with `.noftz`; a vector form (`vec` 2, 4 or 8: `ATOM_VECTORS`) takes brace lists for d and b.

    Args:
        op: one of `ATOM_OPS` (add min max and or xor exch cas inc dec).
        t: the type; legal types per operation in `ATOM_OPS`.
        d: the destination (the old value); ignored for red.
        addr: the address.
        b: the operand (for cas, the value compared).
        c: cas only: the new value.
        space: one of `ATOM_SPACES` ("global", "shared", "shared::cta", "generic") or `ATOM_CLUSTER_SPACES`
            ("shared::cluster").
        reduce_only: build ``red`` (no result; not for exch and cas).
        sem: a memory order ("relaxed", "acquire", "release", "acq_rel"); scope: "cta", "cluster", "gpu", "sys".
        policy: a 64-bit cache-policy register for ``.L2::cache_hint`` (every operation of
            `ATOM_CACHE_HINT_OPS`: not cas).
        vec: the vector length (1: a scalar atomic).
    """
    name = "red" if reduce_only else "atom"
    if op not in ATOM_OPS:
        raise ValidationError(f"{name} operation must be one of {tuple(ATOM_OPS)}, got {op!r}")
    legal = ATOM_OPS[op]
    if t not in legal:
        raise ValidationError(f"{name}.{op} takes " + ", ".join("." + x.name for x in legal) + f", not .{t.name}")
    if reduce_only and op in ("exch", "cas"):
        raise ValidationError(f"red has no .{op}; use atom")
    if space not in _ATOM_SPACE_REQ:
        raise ValidationError(f"{name} works on " + ", ".join("." + s for s in _ATOM_SPACE_REQ)
                              + f" addresses, not .{space}")
    a = check_addr(addr, space.split("::")[0], name)
    vec = int_arg(vec, f"{name} vector width")
    if vec != 1:
        lengths = ATOM_VECTORS.get((op, t))
        if lengths is None:
            raise ValidationError(f"{name}.{op}.{t.name} has no vector form (vectors: "
                                  + ", ".join(f"{o}.{x.name} .v{'/.v'.join(map(str, n))}"
                                              for (o, x), n in ATOM_VECTORS.items()) + ")")
        if vec not in lengths:
            raise ValidationError(f"{name}.{op}.{t.name} vectors are .v{' or .v'.join(map(str, lengths))}, not .v{vec}")
        if space not in ("global", "generic"):
            raise ValidationError(f"a vector {name} works on .global or generic addresses, not .{space}")
        b = check_vec(b, vec, t, f"{name} operand")
    elif t in ATOM_HALF_TYPES and op in ("min", "max"):
        raise ValidationError(f"{name}.{op} on .{t.name} exists only as a vector (.v2 ...; ptxas: 'Vector modifier "
                              "required'): pass a list of values")
    else:
        check_value(b, t, f"{name} operand", imm_ok=t not in ATOM_HALF_TYPES and t is not T.b128)
    ops = [a, b]
    if op == "cas":
        if c is None:
            raise ValidationError("atom.cas needs a compare value and a new value")
        check_value(c, t, "atom.cas new value", imm_ok=t is not T.b128)
        ops.append(c)
    n_dst = 0
    if not reduce_only:
        if vec != 1:
            d = check_vec(d, vec, t, f"{name} destination")
        else:
            check_dst(d, t, f"{name} destination")
        ops = [d] + ops
        n_dst = 1
    order, req = _order_check(name, sem, scope, space, t=t)
    if t in ATOM_TYPE_REQ:
        req = req.merge(ATOM_TYPE_REQ[t])
    if vec != 1:
        req = req.merge(REQ_ATOM_VECTOR)
    req = req.merge(_ATOM_SPACE_REQ[space])
    _policy_check(name, policy, space, sem)
    if policy is not None:
        if op not in ATOM_CACHE_HINT_OPS:
            raise ValidationError(f"{name}.{op} takes no .L2::cache_hint (no cache-policy operand); the operations "
                                  "that do: " + ", ".join("." + o for o in ATOM_CACHE_HINT_OPS))
        ops.append(policy)
        req = req.merge(REQ_CACHE_HINT)
    parts = (name, *order, _space_part(space), op, "noftz" if t in ATOM_HALF_TYPES else None,
             "L2::cache_hint" if policy is not None else None, f"v{vec}" if vec != 1 else None, t.name)
    semantic_scope = "gpu" if sem is not None and scope is None else scope  # written without, it acts as .gpu
    return make(name, parts, ops, n_dst=n_dst, type=t, info=AtomInfo(op, space, t, sem, semantic_scope, vec),
                mods=(op,), req=req)


# ------------------------------------------------------------------ ldmatrix / stmatrix

@dataclass(frozen=True)
class MatrixForm:
    """One legal ldmatrix/stmatrix form: registers per thread, least arch and ISA."""

    opcode: str  # "ldmatrix" / "stmatrix"
    shape: str
    num: int  # x1 / x2 / x4
    trans: bool
    type: T.ScalarType
    regs: int
    req: Requirement

    @property
    def address_lanes(self) -> int:
        """Lanes whose addresses are read: 8 rows per matrix."""
        return 8 * self.num

    @property
    def row_bytes(self) -> int:
        """Bytes of one matrix row each address points at: 16 (eight b16 values)."""
        return 16


LDMATRIX_FORMS = tuple(
    MatrixForm("ldmatrix", "m8n8", num, trans, T.b16, num, Requirement(75, V("6.5")).merge(Requirement(80, V("7.0"))))
    for num in (1, 2, 4) for trans in (False, True)
) + tuple(
    # 8-bit transposing forms exist only on arch-specific Blackwell targets
    MatrixForm("ldmatrix", "m16n16", num, True, T.b8, 2 * num, Requirement(100, V("8.6"), True))
    for num in (1, 2)
)
STMATRIX_FORMS = tuple(
    MatrixForm("stmatrix", "m8n8", num, trans, T.b16, num, Requirement(90, V("7.8")))
    for num in (1, 2, 4) for trans in (False, True)
)


_MATRIX_BY_KEY = {(f.opcode, f.shape, f.num, f.trans, f.type): f for f in LDMATRIX_FORMS + STMATRIX_FORMS}


def matrix_form(opcode, shape, num, trans, t) -> MatrixForm:
    """The legal `MatrixForm` for an ldmatrix/stmatrix shape, count, transpose and type; the error lists the
    legal ones.
    """
    f = _MATRIX_BY_KEY.get((opcode, shape, int_arg(num, f"{opcode} num"), bool(trans), t))
    if f is not None:
        return f
    table = LDMATRIX_FORMS if opcode == "ldmatrix" else STMATRIX_FORMS
    legal = sorted({f"{f.shape}.x{f.num}{'.trans' if f.trans else ''}.{f.type.name}" for f in table})
    raise ValidationError(f"{opcode}.{shape}.x{num}{'.trans' if trans else ''}.{t.name} is not a legal form; "
                          f"legal: {', '.join(legal)}")


def ldmatrix(d, addr, num=4, trans=False, shape="m8n8", t=T.b16, space="shared"):
    """Build and check `ldmatrix.sync.aligned.shape.xN{.trans}.type {d...}, [addr]` (pure: no builder).

    Args:
        d: a Vec of the form's registers (.b32, one per matrix for m8n8).
        addr: the shared-memory row address this lane supplies (lanes 0..8N-1 supply the rows).
        num: 1, 2 or 4 matrices.
        trans: load transposed.
        shape: "m8n8" (b16), or "m16n16" (b8, transposing, Blackwell arch-specific targets).
        t: the element type.
        space: "shared", "shared::cta" or "generic".
    """
    form = matrix_form("ldmatrix", shape, num, trans, t)
    if space not in ("shared", "shared::cta", "generic"):
        raise ValidationError(f"ldmatrix reads shared memory; space must be shared or generic, got {space!r}")
    a = check_addr(addr, "shared" if space != "generic" else "generic", "ldmatrix")
    d = check_vec(d, form.regs, T.b32, f"ldmatrix.x{form.num} destination")
    req = form.req.merge(Requirement(80, V("7.8"))) if space == "shared::cta" else form.req
    parts = ("ldmatrix", "sync", "aligned", shape, f"x{form.num}", "trans" if trans else None, _space_part(space),
             t.name)
    return make("ldmatrix", parts, (d, a), n_dst=1, req=req, info=form, type=t, mods=(space,))


def stmatrix(addr, v, num=4, trans=False, shape="m8n8", t=T.b16, space="shared"):
    """Build and check `stmatrix.sync.aligned.shape.xN{.trans}.type [addr], {v...}` (pure: no builder; sm_90).

    Arguments as for `ldmatrix`, with `v` the Vec of registers stored.
    """
    form = matrix_form("stmatrix", shape, num, trans, t)
    if space not in ("shared", "shared::cta", "generic"):
        raise ValidationError(f"stmatrix writes shared memory; space must be shared or generic, got {space!r}")
    a = check_addr(addr, "shared" if space != "generic" else "generic", "stmatrix")
    v = check_vec(v, form.regs, T.b32, f"stmatrix.x{form.num} source")
    parts = ("stmatrix", "sync", "aligned", shape, f"x{form.num}", "trans" if trans else None, _space_part(space),
             t.name)
    return make("stmatrix", parts, (a, v), n_dst=0, req=form.req, info=form, type=t, mods=(space,))


_HALF_TYPES = (T.f16, T.bf16, T.f16x2, T.bf16x2)


def _half_pattern(x, t):
    """A Python or numpy number stored as the 16-bit float type `t` (or its pair): its bit pattern, which the
    store writes as a .b16 / .b32 immediate (PTX has no 16-bit float literal); anything else as it is."""
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_)):
        return half_pattern(x, t, "st source")
    return x


_BIT_OPS = ("and", "or", "xor", "exch", "cas")


class MemoryOps:
    """Builder methods for loads, stores, prefetches, atomics and ldmatrix/stmatrix.

    Addresses are a register (plus `offset` bytes), an `Addr` or a shared symbol; `space` defaults to global.
    """
    def _addr(self, addr, offset=0):
        if type(offset) is not int:  # (the common case: a Python int) numpy integers are integers too
            if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, numbers.Integral):
                raise ValidationError(f"offset= is a constant byte offset, an integer; got {offset!r} "
                                      f"({type(offset).__name__})")
            offset = int(offset)
        a = self._val(addr)
        if isinstance(a, (Reg, Symbol)):
            a = Addr(a, offset)
        elif offset:
            a = a + offset
        return a

    def ld(self, addr, *, type, space="global", vec=1, nc=False, cop=None, hints=(), offset=0,
           dst=None, pred=None, sem=None, scope=None, policy=None):
        """Load `vec` values of `type` from `addr` (a register, Addr or variable) in `space`.

        `sem`/`scope` give the memory order (`sem="volatile"`, or "relaxed"/"acquire" with scope
        "cta", "cluster", "gpu" or "sys": `ld.acquire.gpu.global.u32`); `policy` is a 64-bit
        cache policy from `createpolicy` (`.L2::cache_hint`).
        Returns the destination register, or a Vec of registers for vector loads.  A sub-word integer load
        (8 or 16 bits) widens into a 32-bit register (`ld.global.u16 %r0` with `%r0` a `.u32`): pass the same
        `type=` to `st` to write it back at its width.
        """
        t = T.lookup(type)
        reg_t = t
        if t in _HALF_TYPES:
            t = t.bits_type()  # ld.f16 does not exist; the register keeps its half type
        vec = int_arg(vec, "ld vector width")
        _vec_check(t, vec, f"ld.{space}", space)  # before allocating `vec` registers
        if dst is None:
            # sub-word integer loads widen into 32-bit registers (ld.global.u8 %r, [...])
            if reg_t is not t:
                rt = T.decl_type(reg_t)
            elif t.bits < 32 and (t.is_int or t.kind == "b"):
                rt = T.lookup(f"{t.kind}32")
            else:
                rt = T.decl_type(t)
            d = self.reg(rt) if vec == 1 else Vec(tuple(self.reg(rt) for _ in range(vec)))
        else:
            d = self._val(dst)
        policy = self._val(policy) if policy is not None else None
        self.emit(ld(t, d, self._addr(addr, offset), space, vec, nc, cop, tuple(hints), sem, scope, policy), pred)
        return d

    def st(self, addr, value, *, type=None, space="global", vec=None, cop=None, hints=(), offset=0, pred=None,
           sem=None, scope=None, policy=None):
        """Store a register/immediate (or a list of them: a vector store) to `addr` in `space`.

        `sem` ("volatile", "relaxed", "release") with `scope`, and `policy`, as for `ld`.  A number stored as
        f16 / bf16 (or a pair) is written as its bit pattern.  Without `type`, the value's register type is the
        store's: a sub-word `ld` (`type=u16`) returns a 32-bit register, so storing it back 16 bits wide needs
        `type=u16` (else `st.u32` writes 4 bytes)."""
        if type is not None and T.lookup(type) in _HALF_TYPES:
            ht = T.lookup(type)
            patterns = ([_half_pattern(x, ht) for x in value] if isinstance(value, (list, tuple))
                        else _half_pattern(value, ht))
            if isinstance(value, (list, tuple)) and 0 < sum(p is not x for p, x in zip(patterns, value)) < len(value):
                raise ValidationError(f"a vector store of .{ht.name} takes registers or numbers, not both (ptxas "
                                      "refuses a vector of mixed element types): move the numbers into registers "
                                      f"first, k.mov(x, type={ht.name})")
            if patterns != value:  # numbers became bit patterns: store them as the raw bits they are
                value, type = patterns, ht.bits_type()
        if isinstance(value, (list, tuple, Vec)):
            vals = tuple(self._val(v) for v in (value.regs if isinstance(value, Vec) else value))
            vec = len(vals) if vec is None else vec  # (vec=False is no vector width: refused, not defaulted)
            if type is None:
                type = next((v.type for v in vals if isinstance(v, Reg)), None)
            t = T.lookup(type) if type is not None else None
            if t is None:
                raise ValidationError("st of immediates needs type=")
            v = Vec(tuple(self._val(x, t) for x in vals))
        else:
            v = self._val(value)
            if type is None:
                type = getattr(v, "type", None)
                if type is None:
                    raise ValidationError("st of an immediate needs type=")
            t = T.lookup(type)
            v = self._val(value, t)
            vec = 1 if vec is None else vec
        if t in _HALF_TYPES:
            t = t.bits_type()
        policy = self._val(policy) if policy is not None else None
        self.emit(st(t, self._addr(addr, offset), v, space, vec, cop, tuple(hints), sem, scope, policy), pred)

    def ldu(self, addr, *, type, space="global", vec=1, offset=0, dst=None, pred=None):
        """`ldu.global{.vN}.type d, [addr]`: a warp-uniform load of read-only data; returns the
        register (or a Vec for vec > 1), as `ld` does."""
        t = T.lookup(type)
        reg_t = t
        if t in _HALF_TYPES:
            t = t.bits_type()
        vec = int_arg(vec, "ldu vector width")  # before allocating `vec` registers
        if dst is None:
            rt = T.decl_type(reg_t) if reg_t is not t else (
                T.lookup(f"{t.kind}32") if t.bits < 32 and (t.is_int or t.kind == "b") else T.decl_type(t))
            d = self.reg(rt) if vec == 1 else Vec(tuple(self.reg(rt) for _ in range(vec)))
        else:
            d = self._val(dst)
        self.emit(ldu(t, d, self._addr(addr, offset), space, vec), pred)
        return d

    def prefetch(self, addr, *, level="L2", space="global", offset=0, pred=None):
        """prefetch{.space}.level [addr]; space None (generic), 'global' or 'local'."""
        self.emit(prefetch(self._addr(addr, offset), level, space), pred)

    def prefetch_tensormap(self, tmap, *, space=None, pred=None):
        """prefetch.tensormap [tmap] (sm_90): `tmap` is the generic address of a CUtensorMap (param_address)."""
        self.emit(prefetch_tensormap(self._addr(tmap), space), pred)

    def atom(self, op, addr, value, *, type=None, space="global", compare=None, dst=None, pred=None, sem=None,
             scope=None, policy=None, offset=0):
        """Atomic read-modify-write at `addr` (plus `offset` bytes, as for `ld`); returns the old value (a Vec of
        them for a vector atom).

        `sem` ("relaxed", "acquire", "release", "acq_rel") and/or `scope` ("cta", "cluster", "gpu",
        "sys") qualify it (`atom.acq_rel.gpu.global.add.u32`); `policy` adds `.L2::cache_hint`.  Half types
        (`type="f16"`, "f16x2", "bf16", "bf16x2": add, and min/max as vectors) are written with `.noftz`; a list
        of values makes a vector atom (sm_90: `atom.global.add.v4.f32`, `ATOM_VECTORS`), each element an atomic
        of its own."""
        t, v, vec, cas_new = self._atom_operands(op, value, type, compare)
        d = self._atom_dst(dst, t, vec)
        policy = self._val(policy) if policy is not None else None
        self.emit(atom(op, t, d, self._addr(addr, offset), v, cas_new, space, sem=sem, scope=scope, policy=policy,
                       vec=vec), pred)
        return d

    def red(self, op, addr, value, *, type=None, space="global", pred=None, sem=None, scope=None, policy=None,
            offset=0):
        """Reduction into memory with no result (red.global.add.s32 ...); `sem` ("relaxed",
        "release"), `scope`, `policy`, `offset`, half types and vectors as for `atom`."""
        t, v, vec, _ = self._atom_operands(op, value, type, None)
        policy = self._val(policy) if policy is not None else None
        self.emit(atom(op, t, None, self._addr(addr, offset), v, None, space, reduce_only=True, sem=sem, scope=scope,
                       policy=policy, vec=vec), pred)

    def _atom_operands(self, op, value, type, compare):
        """(type, operand, vector length, cas new value) of an atom/red call."""
        from .arith import infer_type
        vec = len(value) if isinstance(value, (list, tuple)) else 1
        vals = [self._val(x) for x in value] if vec != 1 else [self._val(value)]
        t = infer_type(type, vals[0])
        if op in _BIT_OPS and t.is_int:
            t = t.bits_type()  # atom.and/or/xor/exch/cas exist only for bit types
        if op == "cas" and compare is not None:
            return t, self._val(compare, t), vec, self._val(value, t)
        vals = [self._val(x, t) for x in vals]
        return t, (Vec(tuple(vals)) if vec != 1 else vals[0]), vec, None

    def _atom_dst(self, dst, t, vec):
        if vec == 1:
            return self._dst(dst, t)
        if dst is not None:
            return Vec(tuple(self._val(r) for r in (dst.regs if isinstance(dst, Vec) else dst)))
        return Vec(tuple(self.reg(T.decl_type(t)) for _ in range(vec)))

    def ldmatrix(self, addr, *, num=4, trans=False, shape="m8n8", type=T.b16, space="shared", dst=None,
                 pred=None):
        """Warp-collective load of `num` 8x8 b16 matrices; returns a Vec of .b32 registers."""
        t = T.lookup(type)
        form = matrix_form("ldmatrix", shape, num, trans, t)
        d = self._val(dst) if dst is not None else Vec(tuple(self.reg(T.b32) for _ in range(form.regs)))
        self.emit(ldmatrix(d, self._addr(addr), num, trans, shape, t, space), pred)
        return d

    def stmatrix(self, addr, values, *, num=None, trans=False, shape="m8n8", type=T.b16, space="shared",
                 pred=None):
        """Warp-collective store of 8x8 b16 matrices (sm_90)."""
        v = self._val(values)
        num = len(v) if num is None else num
        self.emit(stmatrix(self._addr(addr), v, num, trans, shape, T.lookup(type), space), pred)
