"""Candidate instructions enumerated from the ISA tables, filtered by the validator per target."""

from __future__ import annotations

import functools
import itertools
import warnings

from ..errors import PtxforgeError
from ..isa import types as T
from ..isa.arith import ARITH, float_class
from ..isa.async_copy import CP_ASYNC_SIZES, CREATEPOLICY, PREFETCH_SIZES
from ..isa.bulk_reduce import BULK_REDUCE_TYPES, TENSOR_REDUCE_MODES, TENSOR_REDUCE_OPS
from ..isa.tensormap import CP_FENCEPROXY_SCOPES, TENSORMAP_FIELDS, TENSORMAP_SPACES
from ..isa.bits import BITFIELD, LOGIC_TYPES, LOP3_BOOL_OPS, MASK_MODES, PRMT_MODES, SHIFT_TYPES, SZEXT_TYPES
from ..isa.control import (MOV_TYPES, PACK_FORMS, SELP_TYPES, SET_DTYPES, SETP_TYPES, SLCT_CTYPES, TESTP_OPS,
                           TESTP_TYPES, cmp_ops)
from ..isa.integer import CARRY_FORMS, CARRY_TYPES, DOT_FORMS, DOT_TYPES
from ..isa.video import SCALAR_OP2, SHIFT_MODES, VIDEO, VMAD_SCALES, VSET_CMP
from ..isa.convert import CVT_TYPES, CVTA_SPACES, FLOAT_ROUND, INT_ROUND
from ..isa.convert_narrow import NARROW_CVT
from ..isa.cache import CACHE_CONTROL
from ..isa.convert import ISSPACEP_SPACES
from ..isa.memory import (ATOM_OPS, ATOM_SPACES, ATOM_VECTORS, CACHE_OPS, EVICT, LD_TYPES, LDMATRIX_FORMS, MEM_SEMANTICS, PREFETCH,
                          PREFETCH_LEVELS, SCOPES, STMATRIX_FORMS)
from ..isa.sync import BAR_RED_OPS, GRIDDEPCONTROL
from ..isa.warp import MATCH_MODES, MATCH_TYPES
from ..isa.wmma import F64_ROUND, LAYOUTS, WMMA_FORMS
from ..isa.operands import SPECIAL_REGISTERS
from ..isa.sync import ARRIVE_SEMS, FENCES, FENCES_WITH_ADDRESS, MBAR_SCOPES, WAIT_SEMS
from ..isa.targets import Target
from ..isa.tensor import MMA_FORMS
from ..isa.wgmma import WGMMA_FORMS
from ..isa.warp import REDUX_OPS, SHFL_MODES, VOTE_MODES
from .emit import LOGIC_METHODS, emit_spec
from .spec import FAMILIES, TARGETS, Scratch, Spec, spec


def _subsets(items):
    items = tuple(items)
    return [c for n in range(len(items) + 1) for c in itertools.combinations(items, n)]


def _arith_candidates():
    """Every type x mode x flag set of every ARITH row (a mode only where the method takes one)."""
    out = []
    for op, form in ARITH.items():
        for t in form.types:
            if t.is_float:
                modes, flags = form.float_mods[float_class(t)]
                mode_opts = (None,) + tuple(modes) if form.takes_mode else (None,)
                for mode in mode_opts:
                    for fl in _subsets(flags):
                        out.append(spec("arith", op, type=t.name, mode=mode, flags=fl))
            else:
                for mode in form.int_modes_for(t):
                    out.append(spec("arith", op, type=t.name, mode=mode, flags=()))
                    # an integer flag with the modes and types it goes with (mad.hi.sat.s32)
                    out += [spec("arith", op, type=t.name, mode=mode, flags=(f,))
                            for f, (modes, types) in form.int_flags.items() if mode in modes and t in types]
    return out


_INT_TYPES = (T.u16, T.u32, T.u64, T.s16, T.s32, T.s64)


def _bits_candidates():
    out = []
    for op in LOGIC_METHODS:
        for t in LOGIC_TYPES + _INT_TYPES:
            out.append(spec("bits", op, type=t.name))
    for op, types in SHIFT_TYPES.items():
        for t in types + _INT_TYPES:
            out.append(spec("bits", op, type=t.name))
    out += [spec("bits", "lop3", lut=lut) for lut in (0x00, 0x96, 0xE8, 0xF0, 0xFF, 0x6A)]
    out += [spec("bits", "prmt", mode=m) for m in (None,) + PRMT_MODES]
    out += [spec("bits", "shf", direction=d, mode=m) for d in ("l", "r") for m in ("wrap", "clamp")]
    for op, types in BITFIELD.items():
        for t in types + (T.b32, T.u32, T.s64):
            out.append(spec("bits", op, type=t.name))
    out += [spec("bits", "bfind", type=t.name, shiftamt=True) for t in BITFIELD["bfind"]]
    out += [spec("bits", "lop3", lut=0x96, combine=op, q=q) for op in LOP3_BOOL_OPS for q in ("p", "~p", True)]
    out += [spec("bits", "bmsk", mode=m) for m in MASK_MODES]
    out += [spec("bits", "szext", mode=m, type=t.name) for m in MASK_MODES for t in SZEXT_TYPES + (T.b32,)]
    out += [spec("bits", "fns", base=b) for b in (None, 0, 31)]
    return out


def _control_candidates():
    out = []
    for t in SETP_TYPES:
        for cmp in cmp_ops(t):
            for combine in (None, "and", "or", "xor"):
                for neg in ((False, True) if combine else (False,)):
                    out.append(spec("control", "setp", type=t.name, cmp=cmp, combine=combine, negate=neg))
    for t in SETP_TYPES:  # the two-predicate and .ftz forms, one comparison each
        cmp = cmp_ops(t)[2 % len(cmp_ops(t))]
        for combine in (None, "and"):
            for ftz in (False, True):
                out.append(spec("control", "setp", type=t.name, cmp=cmp, combine=combine, negate=False, both=True,
                                ftz=ftz))
            out.append(spec("control", "setp", type=t.name, cmp=cmp, combine=combine, negate=False, ftz=True))
            for dt in SET_DTYPES:  # every destination type, legal for t (set_dtypes) or a near miss
                for ftz in (False, True):
                    out.append(spec("control", "set", type=t.name, to=dt.name, cmp=cmp, combine=combine, ftz=ftz))
    out += [spec("control", "slct", type=t.name, ctype=ct.name, ftz=f) for t in SELP_TYPES for ct in SLCT_CTYPES
            for f in (False, True)]
    out += [spec("control", "testp", test=o, type=t.name) for o in TESTP_OPS for t in TESTP_TYPES + (T.u32,)]
    out += [spec("control", "selp", type=t.name) for t in SELP_TYPES]
    out += [spec("control", "mov", type=t.name) for t in MOV_TYPES + (T.f16x2, T.bf16, T.bf16x2)]
    out += [spec("control", op, bits=b, parts=p) for op in ("pack", "unpack") for b, p in PACK_FORMS]
    out += [spec("control", "sreg", name=n) for n in sorted(SPECIAL_REGISTERS)]
    # a variable's address plus an offset as a value (SymbolOffset): mov.u32/u64 %r, smem+N; cvta.shared.u64 %rd, smem+N
    out += [spec("control", "sym_offset", form=f) for f in ("mov.u32", "mov.u64", "cvta.shared", "cvta.shared::cta")]
    out += [spec("control", "bra", uni=u) for u in (False, True)]
    out += [spec("control", op) for op in ("ret", "exit", "trap")]
    out += [spec("control", "call", result=r, uni=u) for r in (False, True) for u in (False, True)]
    out += [spec("control", "brx_idx", uni=u) for u in (False, True)]
    out += [spec("control", "stacksave"), spec("control", "stackrestore"), spec("control", "brkpt")]
    out += [spec("control", "alloca", size=sz, align=al) for sz in (64, "reg") for al in (None, 16, 12)]
    out += [spec("control", "pmevent", event=e, mask=m) for e, m in ((3, False), (16, False), (0x8001, True))]
    return out


def _convert_candidates():
    out = []
    rounds = (None,) + INT_ROUND + FLOAT_ROUND
    for dt in CVT_TYPES:
        for st_ in CVT_TYPES:
            for rnd in rounds:
                for sat in (False, True):
                    out.append(spec("convert", "cvt", to=dt.name, frm=st_.name, rnd=rnd, sat=sat, ftz=False))
            if T.f32 in (dt, st_):
                out.append(spec("convert", "cvt", to=dt.name, frm=st_.name, rnd=None, sat=False, ftz=True))
    for dt in (T.f16x2, T.bf16x2):
        for rnd in (None,) + FLOAT_ROUND:
            out.append(spec("convert", "cvt", to=dt.name, frm="f32", rnd=rnd, sat=False, ftz=False))
    out += [spec("convert", "cvta", space=sp, to=to) for sp in CVTA_SPACES for to in (True, False)]
    from ..isa.convert_narrow import CVT_PACK
    out += [spec("convert", "cvt_pack", to=t.name, c=c) for t in tuple(CVT_PACK) + (T.u32,) for c in (False, True)]
    for (to, frm) in NARROW_CVT:
        for rnd in ("rn", "rz", "rna", "rm"):
            for relu in (False, True):
                for sat in (None, False, True):
                    out.append(spec("convert", "cvt_narrow", to=to, frm=frm, rnd=rnd, relu=relu, satfinite=sat))
    return out


_LD_SPACES = ("global", "shared", "shared::cta", "local", "generic")


_MOD_TYPES = (T.u8, T.b16, T.b32, T.f32, T.u64, T.b128)  # cache modifiers are drawn with these


def _memory_candidates():
    out = []
    for op in ("ld", "st"):
        hint_opts = [(h,) for h in (PREFETCH + EVICT if op == "ld" else EVICT)]
        for t in LD_TYPES + (T.f16, T.bf16):
            for vec in (1, 2, 4):
                for space in _LD_SPACES:
                    out.append(spec("memory", op, type=t.name, vec=vec, space=space, cop=None, hints=(), nc=False))
                    if t not in _MOD_TYPES or vec == 2:
                        continue  # one modifier at a time, on a few types, keeps the list small
                    for cop in CACHE_OPS[op]:
                        out.append(spec("memory", op, type=t.name, vec=vec, space=space, cop=cop, hints=(),
                                        nc=False))
                    for hints in hint_opts:
                        out.append(spec("memory", op, type=t.name, vec=vec, space=space, cop=None, hints=hints,
                                        nc=False))
                    if op == "ld":
                        out.append(spec("memory", op, type=t.name, vec=vec, space=space, cop=None, hints=(),
                                        nc=True))
    for name in ("atom", "red"):
        for aop, types in ATOM_OPS.items():
            for t in types + (T.u32, T.s32):
                for space in ATOM_SPACES:
                    out.append(spec("memory", name, atom_op=aop, type=t.name, space=space))
        for (aop, t), lengths in ATOM_VECTORS.items():  # vector atoms (sm_90): .global and generic only
            for vec in (1,) + lengths + (3,):
                for space in ("global", "generic", "shared"):
                    out.append(spec("memory", name, atom_op=aop, type=t.name, space=space, vec=vec))
    for f in LDMATRIX_FORMS:
        for space in ("shared", "shared::cta", "generic"):
            out.append(spec("memory", "ldmatrix", shape=f.shape, num=f.num, trans=f.trans, type=f.type.name,
                            space=space))
    for f in STMATRIX_FORMS:
        for space in ("shared", "shared::cta", "generic"):
            out.append(spec("memory", "stmatrix", shape=f.shape, num=f.num, trans=f.trans, type=f.type.name,
                            space=space))
    for level, (spaces, _) in PREFETCH_LEVELS.items():
        for space in spaces:
            out.append(spec("memory", "prefetch", level=level, space=space))
    out += [spec("memory", "prefetch_tensormap", space=None)]
    for op in ("ld", "st"):  # memory orders and cache policies, on a few types and spaces
        for sem in MEM_SEMANTICS[op]:
            for scope in ((None,) if sem == "volatile" else SCOPES + (None,)):
                for t in (T.u32, T.f64, T.b128):
                    for space in ("global", "shared", "generic", "local"):
                        out.append(spec("memory", op, type=t.name, vec=1, space=space, cop=None, hints=(), nc=False,
                                        sem=sem, scope=scope))
                out.append(spec("memory", op, type="u32", vec=4, space="global", cop=None, hints=(), nc=False,
                                sem=sem, scope=scope))
                out.append(spec("memory", op, type="u32", vec=1, space="global", cop=CACHE_OPS[op][1], hints=(),
                                nc=False, sem=sem, scope=scope))
        for space in ("global", "generic", "shared"):
            for hints in ((), (EVICT[3],)) + (((PREFETCH[1],),) if op == "ld" else ()):
                out.append(spec("memory", op, type="u32", vec=2, space=space, cop=None, hints=hints, nc=False,
                                policy=True))
            out.append(spec("memory", op, type="u32", vec=1, space=space, cop=None, hints=(), nc=False, policy=True,
                            sem="relaxed", scope="gpu"))
    for op in ("ld", "st"):  # another CTA's shared memory (sm_90), in every order
        for sem in MEM_SEMANTICS[op] + (None,):
            for scope in ((None,) if sem in ("volatile", None) else SCOPES + (None,)):
                out.append(spec("memory", op, type="u32", vec=1, space="shared::cluster", cop=None, hints=(), nc=False,
                                sem=sem, scope=scope))
    for hints in ((p,) for p in PREFETCH):  # ld.volatile takes an L2 prefetch size (no L1 priority)
        out.append(spec("memory", "ld", type="u32", vec=1, space="global", cop=None, hints=hints, nc=False,
                        sem="volatile", scope=None))
    for name in ("atom", "red"):
        for aop, types in ATOM_OPS.items():  # the cluster's shared memory: scalar forms only
            out += [spec("memory", name, atom_op=aop, type=t.name, space="shared::cluster") for t in types]
        for sem in MEM_SEMANTICS[name] + (None,):
            for scope in SCOPES + (None,):
                for space in ("global", "shared", "generic", "shared::cluster"):
                    out.append(spec("memory", name, atom_op="add", type="u32", space=space, sem=sem, scope=scope))
        for space in ("global", "shared", "generic"):
            out.append(spec("memory", name, atom_op="add", type="f32", space=space, policy=True))
    for t in LD_TYPES + (T.f16,):
        for vec in (1, 2, 4):
            out += [spec("memory", "ldu", type=t.name, vec=vec, space=sp) for sp in ("global", "generic", "shared")]
    for op, form in CACHE_CONTROL.items():
        out += [spec("memory", op, space=sp) for sp in (None, "global", "local")]
    out += [spec("memory", "isspacep", space=sp) for sp in tuple(ISSPACEP_SPACES) + ("tex",)]
    from ..isa.cache import POLICY_PRIMARY, POLICY_SECONDARY
    out += [spec("memory", "createpolicy_range", primary=p, secondary=s_, space=sp, sizes=sz)
            for p in POLICY_PRIMARY for s_ in (None,) + POLICY_SECONDARY + ("L2::evict_last",)
            for sp in (None, "global") for sz in ((128, 4096), "reg", (4096, 128))]
    out += [spec("memory", "createpolicy_cvt")]
    from ..isa import texture as tx
    for geom in tx.TEX_GEOMS:
        for dt in tuple(tx.TEX_TYPES) + (T.f64,):
            for ct in tx.TEX_COORD_TYPES:
                out.append(spec("memory", "tex", geom=geom, dtype=dt.name, ctype=ct.name, lod=False))
        out.append(spec("memory", "tex", geom=geom, dtype="f32", ctype="f32", lod=True))
        out += [spec("memory", "tex", geom=geom, dtype=dt, ctype=ct, lod=False, grad=True)
                for dt, ct in (("f32", "f32"), ("u32", "s32"))]
    out += [spec("memory", "tld4", comp=c, geom=g_, dtype=d) for c in tx.TLD4_COMPONENTS for g_ in tx.TLD4_GEOMS + ("1d",)
            for d in ("f32", "s32")]
    out += [spec("memory", "txq", query=q, lod=False) for q in tx.TXQ_QUERIES]
    out += [spec("memory", "txq", query=q, lod=True) for q in tx.TXQ_LEVEL_QUERIES + ("channel_order",)]
    out += [spec("memory", "istypep", kind=k_) for k_ in tx.ISTYPEP_KINDS]
    for geom in tx.SURF_GEOMS:
        for t in tx.SURF_TYPES:
            for vec in (1, 2, 4):
                out.append(spec("memory", "suld", geom=geom, type=t.name, vec=vec, clamp="trap", cop=None))
                out.append(spec("memory", "sust", geom=geom, type=t.name, vec=vec, clamp="zero", cop=None,
                                formatted=False))
        for clamp in tx.SURF_CLAMP:
            out.append(spec("memory", "suld", geom=geom, type="b32", vec=1, clamp=clamp, cop="cg"))
            out.append(spec("memory", "sust", geom=geom, type="b32", vec=4, clamp=clamp, cop="wt", formatted=True))
        out += [spec("memory", "sured", red_op=o, geom=geom, type=t.name) for o, ts in tx.SURED_OPS.items()
                for t in ts + (T.b64,)]
    out += [spec("memory", "suq", query=q) for q in tx.SUQ_QUERIES]
    from ..isa.async_store import MULTIMEM_OPS, MULTIMEM_SEMANTICS, MULTIMEM_ST_TYPES, RED_ASYNC_OPS, ST_ASYNC_TYPES
    out += [spec("memory", "st_async", type=t.name, vec=v, weak=w) for t in ST_ASYNC_TYPES for v in (1, 2, 4)
            for w in (False, True)]
    out += [spec("memory", "red_async", red_op=o, type=t.name) for o, ts in RED_ASYNC_OPS.items()
            for t in ts + (T.f32,)]
    for kind, sems in MULTIMEM_SEMANTICS.items():
        for sem, scope in [(None, None)] + [(s_, None if s_ == "weak" else "gpu") for s_ in sems]:
            if kind == "st":
                out += [spec("memory", "multimem", kind=kind, red_op=None, type=t.name, sem=sem, scope=scope)
                        for t in MULTIMEM_ST_TYPES]
            else:
                out += [spec("memory", "multimem", kind=kind, red_op=o, type=t.name, sem=sem, scope=scope)
                        for o, ts in MULTIMEM_OPS.items() for t in ts]
    return out


def _async_copy_candidates():
    out = []
    for cache, sizes in CP_ASYNC_SIZES.items():
        for size in sizes:
            for fill in (None, "imm", "reg", "ignore", "~ignore"):
                for prefetch in (None,) + PREFETCH_SIZES:
                    for policy in (False, True):
                        out.append(spec("async_copy", "cp_async", cache=cache, size=size, fill=fill,
                                        prefetch=prefetch, policy=policy))
    out += [spec("async_copy", "commit"), spec("async_copy", "wait_all")]
    out += [spec("async_copy", "mbarrier_arrive", noinc=b) for b in (False, True)]
    # the mbarrier named by a generic address: 64-bit, or the 32-bit shared offset ptxas also takes
    out += [spec("async_copy", "mbarrier_arrive", noinc=b, space="generic", wide=w) for b in (False, True)
            for w in (False, True)]
    out += [spec("async_copy", "createpolicy", level=lv, fraction=fr) for lv in CREATEPOLICY
            for fr in (1.0, 0.5, "f32", "b32", "u32")]
    out += [spec("async_copy", "wait", n=0)]
    out += [spec("async_copy", "bulk_copy", size=1024), spec("async_copy", "bulk_copy", size=None)]
    out += [spec("async_copy", "bulk_copy", size=1024, dst_space="shared::cta")]
    out += [spec("async_copy", "bulk_copy", size=n, multicast=m) for n in (1024, None) for m in (3, "reg")]
    out += [spec("async_copy", "bulk_copy_to_cluster", size=n) for n in (1024, None)]
    out += [spec("async_copy", op, coords=(None,) * d) for op in ("tensor_load", "tensor_store", "tensor_prefetch")
            for d in range(1, 6)]
    out += [spec("async_copy", "tensor_load", coords=(None,) * d, dst_space="shared::cta") for d in range(1, 6)]
    out += [spec("async_copy", "tensor_load", coords=(None, None), multicast=m) for m in (3, "reg")]
    out += [spec("async_copy", "tensor_load_im2col", dims=d, multicast=m) for d in (3, 4, 5) for m in (None, 3)]
    out += [spec("async_copy", "bulk_store", size=n) for n in (256, None)]
    out += [spec("async_copy", "bulk_prefetch", size=n, policy=p) for n in (256, None, 24) for p in (False, True)]
    out += [spec("async_copy", "bulk_commit")]
    out += [spec("async_copy", "bulk_wait", n=n, read=r) for n in (0, 1) for r in (False, True)]
    # every reduction x element type into both destinations (the table refuses what ptxas would)
    out += [spec("async_copy", "bulk_reduce", dst=dst, red_op=o, type=t, size=n, policy=p)
            for dst in ("global", "shared::cluster") for o in BULK_REDUCE_TYPES["global"]
            for t in ("b32", "b64", "u32", "s32", "u64", "s64", "f16", "bf16", "f32", "f64")
            for n, p in ((64, False), (None, dst == "global"))]
    out += [spec("async_copy", "tensor_reduce", red_op=o, mode=mode, coords=(None,) * d, policy=p)
            for o in TENSOR_REDUCE_OPS for mode in TENSOR_REDUCE_MODES for d in range(1, 6) for p in (False, True)]
    # every field in every space, a register and the immediates at and past each range (the table refuses the rest)
    for field, f in TENSORMAP_FIELDS.items():
        values = ("reg", 1) if f.values is None else ("reg", f.values[-1], f.values[-1] + 1)
        for space in TENSORMAP_SPACES:
            for v in values:
                for o in ((None,) if not f.ordinal else (4, 5)):
                    out.append(spec("async_copy", "tensormap_replace", field=field, space=space, value=v, ordinal=o))
    out += [spec("async_copy", "tensormap_cp_fenceproxy", scope=sc) for sc in CP_FENCEPROXY_SCOPES]
    return out


def _sync_candidates():
    out = []
    for op in ("bar_sync", "bar_arrive"):
        for count in ((None, 32, "reg") if op == "bar_sync" else (32, "reg")):
            for bid in (0, None):
                out.append(spec("sync", op, id=bid, count=count))
    out += [spec("sync", "bar_warp_sync", mask=m) for m in (0xFFFFFFFF, 0x0000FFFF)]
    out += [spec("sync", "fence", kind=kind) for kind in FENCES]
    out += [spec("sync", "fence", kind=kind, addr=True) for kind in FENCES_WITH_ADDRESS]
    for space in ("shared", "shared::cta"):
        out.append(spec("sync", "mbarrier_init", count=1, space=space))
        out.append(spec("sync", "mbarrier_inval", space=space))
        for discard in (False, True):
            for release in (False, True):
                out.append(spec("sync", "mbarrier_arrive", space=space, discard=discard, release=release))
            out.append(spec("sync", "mbarrier_arrive", space=space, discard=discard, count=2))
            for release in (False, True):  # .noComplete: an arrival of count that does not complete the phase
                out.append(spec("sync", "mbarrier_arrive", space=space, discard=discard, count=1, no_complete=True,
                                release=release))
        out.append(spec("sync", "mbarrier_arrive", space=space, expect_tx=4096))
        for parity in (True, False):
            for op in ("mbarrier_test_wait", "mbarrier_try_wait"):
                out.append(spec("sync", op, parity=parity, phase=0))
    out += [spec("sync", "mbarrier_expect_tx", nbytes=64)]
    out += [spec("sync", "mbarrier_complete_tx", nbytes=n) for n in (64, None)]
    for space in ("shared", "shared::cta"):
        for count in (None, 2):
            for discard in (False, True):
                out.append(spec("sync", "mbarrier_arrive_drop", space=space, count=count, discard=discard))
        out.append(spec("sync", "mbarrier_arrive_drop", space=space, count=1, discard=False, no_complete=True))
    out += [spec("sync", "mbarrier_pending_count")]
    out += [spec("sync", "mbarrier_try_wait", parity=pa, phase=0, suspend=sus) for pa in (True, False)
            for sus in (1000, "reg")]
    out += [spec("sync", "bar_red", red_op=o, count=c, negate=n) for o in BAR_RED_OPS for c in (None, 64)
            for n in (False, True)]
    out += [spec("sync", "griddepcontrol", action=a) for a in GRIDDEPCONTROL]
    out += [spec("sync", "nanosleep", ns=100), spec("sync", "nanosleep", ns=None)]
    for aligned in (False, True):
        out += [spec("sync", "barrier_cluster", kind="arrive", sem=sem, aligned=aligned)
                for sem in (None, "release", "relaxed")]
        out += [spec("sync", "barrier_cluster", kind="wait", sem=sem, aligned=aligned) for sem in (None, "acquire")]
    out += [spec("sync", "mapa", space=sp, rank=r) for sp in ("shared::cluster", "generic") for r in (1, None)]
    out += [spec("sync", "getctarank", space=sp, wide=w) for sp in ("shared::cluster", "generic") for w in (False, True)]
    out += [spec("sync", "mbarrier_arrive", space="shared::cluster", discard=True)]
    # memory semantics and scope written out (isa.sync.ARRIVE_SEMS, WAIT_SEMS, MBAR_SCOPES)
    for scope in MBAR_SCOPES:
        for space in ("shared::cta", "shared::cluster"):
            for sem in ARRIVE_SEMS:
                out.append(spec("sync", "mbarrier_arrive", space=space, discard=True, sem=sem, scope=scope))
                out.append(spec("sync", "mbarrier_arrive", space=space, discard=True, expect_tx=4096, sem=sem,
                                scope=scope))
        out.append(spec("sync", "mbarrier_arrive", space="shared::cta", discard=False, count=2, sem="release",
                        scope=scope))
        out.append(spec("sync", "mbarrier_expect_tx", nbytes=64, scope=scope))
        for sem in WAIT_SEMS:
            for op in ("mbarrier_test_wait", "mbarrier_try_wait"):
                out.append(spec("sync", op, parity=True, phase=0, sem=sem, scope=scope))
    return out


def _tensor_candidates():
    out = []
    for f in MMA_FORMS:
        # the quad-pair m8n8k4 .f16 forms name their layouts and result type; .inplace needs C and D alike
        extra = dict(layout=f.layout, d_type=f.d_type.name) if f.quad_pairs else {}
        for sat in ((False, True) if f.satfinite else (False,)):
            for c in ("zero", "regs", "inplace")[:2 if f.d_count else 3]:
                out.append(spec("tensor", "mma", shape=f.shape, a_type=f.a_type.name, b_type=f.b_type.name,
                                acc=f.c_type.name, bitop=f.bitop, satfinite=sat, c=c, **extra))
    for f in WGMMA_FORMS:  # every type combination; N sampled at its edges and a few inside
        if f.n not in (8, 16, 24, 32, 48, 64, 128, 136, 256):
            continue
        for a_regs in (False, True):
            out.append(spec("tensor", "wgmma", n=f.n, a_type=f.a_type.name, b_type=f.b_type.name,
                            acc=f.d_type.name, a_regs=a_regs))
            if f.n in (8, 64, 256):  # the sparse form with every selector the table takes and one past them
                out += [spec("tensor", "wgmma_sp", n=f.n, a_type=f.a_type.name, b_type=f.b_type.name,
                             acc=f.d_type.name, a_regs=a_regs, selector=sel) for sel in (0, 1, 2)]
    out += [spec("tensor", "setmaxnreg", action=a, n=n) for a in ("inc", "dec") for n in (24, 40, 232, 256)]
    for (shape, t), f in WMMA_FORMS.items():
        for which in ("a", "b"):
            for lay in LAYOUTS:
                out.append(spec("tensor", "wmma_load", which=which, shape=shape, type=t.name, layout=lay,
                                space="generic", stride=None))
        for acc in f.acc:
            for lay in LAYOUTS:
                out.append(spec("tensor", "wmma_load", which="c", shape=shape, type=acc.name, layout=lay,
                                space="global", stride=16))
                out.append(spec("tensor", "wmma_store", shape=shape, type=acc.name, layout=lay, space="shared",
                                stride="reg"))
        for al, bl in ((a, b) for a in LAYOUTS for b in LAYOUTS):
            for d in f.acc:
                for c in f.acc:
                    for sat in (False, True):
                        for bitop in (f.bitops or {None: None}):
                            out.append(spec("tensor", "wmma_mma", shape=shape, type=t.name, acc=d.name,
                                            c_type=c.name, a_layout=al, b_layout=bl, satfinite=sat, bitop=bitop,
                                            rnd=None))
        if t is T.f64:
            out += [spec("tensor", "wmma_mma", shape=shape, type="f64", acc="f64", c_type="f64", a_layout="row",
                         b_layout="col", satfinite=False, bitop=None, rnd=r) for r in F64_ROUND]
    from ..isa.sparse import SPARSE_MMA
    for (shape, at), f in SPARSE_MMA.items():
        for bt in f.b_types:
            for acc in f.acc:
                for sel in range(f.max_selector + 2):
                    out.append(spec("tensor", "mma_sp", shape=shape, a_type=at.name, b_type=bt.name, acc=acc.name,
                                    selector=sel, ordered=False))
        out.append(spec("tensor", "mma_sp", shape=shape, a_type=at.name, b_type=at.name, acc=f.acc[0].name,
                        selector=0, ordered=True))
        if f.is_integer:  # .satfinite clamps the integer forms' result
            out += [spec("tensor", "mma_sp", shape=shape, a_type=at.name, b_type=at.name, acc=f.acc[0].name,
                         selector=0, ordered=o, satfinite=True) for o in (False, True)]
    out += [spec("tensor", "wmma_load", which="a", shape="m16n16k16", type="f16", layout="row", space=sp,
                 stride=None) for sp in ("global", "shared", "shared::cta", "local")]
    return out


def _warp_candidates():
    out = []
    for mode in SHFL_MODES:
        for t in ("b32", "u32", "f32"):
            for in_range in (False, True):
                out.append(spec("warp", "shfl", mode=mode, type=t, in_range=in_range, lane=1, mask=0xFFFFFFFF))
    out += [spec("warp", "vote", mode=m, negate=n) for m in VOTE_MODES for n in (False, True)]
    out += [spec("warp", "redux", redux_op=op, type=t.name) for op, ts in REDUX_OPS.items() for t in ts + (T.u32,)]
    out += [spec("warp", "elect"), spec("warp", "activemask"), spec("warp", "elect", lane=True)]
    out += [spec("warp", "movmatrix")]
    out += [spec("warp", "match", mode=m, type=t.name, with_pred=wp) for m in MATCH_MODES
            for t in MATCH_TYPES + (T.u32, T.f32) for wp in (False, True)]
    return out


def _integer_candidates():
    out = []
    for op, form in CARRY_FORMS.items():
        for t in CARRY_TYPES + (T.u16,):
            for cc in ((False, True) if form.carry_in else (True, False)):
                for mode in form.modes or (None,):
                    out.append(spec("integer", "carry", opcode=op, type=t.name, cc=cc, mode=mode))
    for op, modes in DOT_FORMS.items():
        for mode in modes:
            for a in DOT_TYPES + (T.u16,):
                for b in DOT_TYPES:
                    out.append(spec("integer", op, mode=mode, a_type=a.name, b_type=b.name))
    for op, f in VIDEO.items():
        base = dict(dtype="u32", atype="u32", btype="u32", sat=False, op2=None, mode=None, cmp=None, scale=None)
        if f.shift:
            base["mode"] = "clamp"
        if f.op == "set":
            base["cmp"] = "lt"
        variants = [base, dict(base, dtype="s32", atype="s32"), dict(base, atype="s32", btype="s32"),
                    dict(base, sat=True), dict(base, op2="add"), dict(base, sat=True, op2="add"),
                    dict(base, dtype="u16")]
        if not f.simd:
            variants += [dict(base, op2=o) for o in SCALAR_OP2]
        variants += [dict(base, mode=m) for m in SHIFT_MODES] if f.shift else [dict(base, mode="wrap")]
        variants += [dict(base, cmp=c) for c in VSET_CMP] if f.op == "set" else [dict(base, cmp="eq")]
        variants += [dict(base, scale=s_) for s_ in VMAD_SCALES] if f.scale else [dict(base, scale="shr7")]
        out += [spec("integer", "video", opcode=op, **v) for v in variants]
    return out


_CANDIDATES = {
    "arith": _arith_candidates, "bits": _bits_candidates, "control": _control_candidates,
    "convert": _convert_candidates, "memory": _memory_candidates, "async_copy": _async_copy_candidates,
    "sync": _sync_candidates, "tensor": _tensor_candidates, "warp": _warp_candidates,
    "integer": _integer_candidates,
}


def accepts(target, s: Spec) -> bool:
    """Whether ptxforge accepts the spec for `target` (the validator is the filter)."""
    try:
        emit_spec(_probe(str(Target.parse(target))), s)
    except PtxforgeError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _probe(target: str) -> Scratch:
    return Scratch(target, "probe")


@functools.lru_cache(maxsize=None)
def legal_candidates(target: str, family: str) -> tuple:
    """The table-enumerated specs of a family that ptxforge accepts for `target` (cached)."""
    target = str(Target.parse(target))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # emulated-instruction warnings are expected here
        return tuple(s for s in _CANDIDATES[family]() if accepts(target, s))


def _too_new_for(target: str) -> list:
    """Legal specs of newer targets that `target` does not have (its target checks must refuse them)."""
    newer = [t for t in TARGETS if _is_newer(t, target)]
    out = []
    for fam in FAMILIES:
        have = set(legal_candidates(target, fam))
        for t in newer:
            for s in legal_candidates(t, fam):
                if s not in have:
                    have.add(s)
                    out.append(s)
    return out


def _is_newer(new: str, old: str) -> bool:
    n, o = Target.parse(new), Target.parse(old)
    return (n.sm, n.arch_specific) > (o.sm, o.arch_specific)


@functools.lru_cache(maxsize=None)
def too_new_candidates(target: str) -> tuple:
    """Specs ptxforge accepts for some newer target but must refuse for `target` (cached)."""
    return tuple(_too_new_for(str(Target.parse(target))))
