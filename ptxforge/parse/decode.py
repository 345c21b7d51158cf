"""Mnemonic + operands -> the Instruction the builder would make, through the ISA's constructors.

Each decoder reads the modifiers of one family's mnemonic and calls that family's pure
constructor (`arith`, `ld`, `mma`, ...) with the parsed operands: the constructor's checks are
the only legality check.  `decode` then confirms that the constructor spells the same
instruction (the same mnemonic parts, the same operands); a form it spells otherwise is a form
the tables do not have.
"""

from __future__ import annotations

import struct

from ..errors import ValidationError
from ..isa import types as T
from ..isa.arith import ARITH, arith
from ..isa.async_copy import (bulk_commit_group, bulk_g2s, bulk_prefetch, bulk_s2g, bulk_s2s, bulk_tensor_g2s,
                              bulk_tensor_g2s_im2col, bulk_tensor_prefetch, bulk_tensor_s2g,
                              bulk_wait_group, commit_group, cp_async, cp_async_mbarrier_arrive, wait_all, wait_group)
from ..isa.bulk_reduce import TENSOR_REDUCE_MODES, TENSOR_REDUCE_OPS, bulk_reduce, bulk_tensor_reduce
from ..isa.bits import BITFIELD, bitfield, logic, lop3, prmt, shf, shift
from ..isa.calls import ArgList, CallPrototype, FuncRef, brx_idx, call
from ..isa.control import bra, mov, selp, setp, simple
from ..isa.convert import cvt, cvta
from ..isa.memory import ldmatrix, prefetch, prefetch_tensormap, stmatrix
from ..isa.operands import Imm, NegPred, PairDst, Reg, TensorAddr, Vec
from ..isa.sync import (BARRIER_SPELLINGS, FENCES_WITH_ADDRESS, bar, bar_warp_sync, fence, mbarrier_arrive,
                        mbarrier_expect_tx, mbarrier_init, mbarrier_inval, mbarrier_wait, nanosleep)
from ..isa.cluster import barrier_cluster, getctarank, mapa
from ..isa.tensor import mma, mma_form, setmaxnreg
from ..isa.tensormap import CP_FENCEPROXY_SCOPES, tensormap_cp_fenceproxy, tensormap_replace
from ..isa.wgmma import wgmma, wgmma_commit_group, wgmma_fence, wgmma_form, wgmma_sp, wgmma_wait_group
from ..isa.warp import activemask, redux, shfl, vote

_PTXFORGE_INTERNAL = True


from .decode_common import Call, NestedCall, Unknown, _int, _int_or_reg, _mask, _n, _t  # noqa: F401 (re-exported)
from .decode_compute import (COMPUTE_DECODERS, d_bar_red, d_carry, d_cvt_pack, d_elect, d_mbarrier_more, d_mma_sp,
                             narrow_cvt)
from .decode_memory import MEMORY_DECODERS


# ------------------------------------------------------------------ families

def _d_arith(parts, ops):
    if parts[-1] == "relu" and len(parts) > 2 and parts[-2] in T.BY_NAME:
        # `max.s16x2.relu`, `min.s32.relu`: the mode after the type, as the SIMD intrinsics' inline asm in
        # the CUDA headers writes it (ptxas takes both orders); the same instruction as `max.relu.s16x2`
        parts = [parts[0], "relu", *parts[1:-1]]
    op, t = parts[0], _t(parts[-1])
    mods = parts[1:-1]
    if t.is_float:
        modes = ("rn", "rz", "rm", "rp", "approx", "full")
        mode = next((m for m in mods if m in modes), None)
        flags = tuple(m for m in mods if m != mode)
        if "xorsign" in flags and "abs" in flags:  # one modifier written in two parts
            flags = tuple("xorsign.abs" if m == "xorsign" else m for m in flags if m != "abs")
    else:
        if "cc" in mods:
            return d_carry(parts, ops)
        # the first modifier is the mode (hi, lo, wide, relu, sat, ...); what follows it is a flag (mad.hi.sat)
        mode, flags = (mods[0] if mods else None), tuple(mods[1:])
    if not ops:
        raise ValidationError(f"{op} needs a destination")
    return Call(arith, op, t, ops[0], list(ops[1:]), mode, flags)


def _d_setp(parts, ops):
    mods = parts[2:-1]
    ftz = "ftz" in mods
    rest = [m for m in mods if m != "ftz"]
    if len(parts) < 3 or len(rest) > 1:
        raise ValidationError("setp is setp.cmp{.and|.or|.xor}{.ftz}.type")
    cmp, boolop, t = parts[1], (rest[0] if rest else None), _t(parts[-1])
    if boolop is None:
        p, a, b = _n(ops, 3, "setp")
        c = None
    else:
        p, a, b, c = _n(ops, 4, f"setp.{cmp}.{boolop}")
    q = None
    if isinstance(p, PairDst) and t.lanes != 2:  # p|q: the complement into q
        p, q = p.reg, p.pred
    return Call(setp, cmp, t, p, a, b, boolop, c, q, ftz)


def _d_selp(parts, ops):
    return Call(selp, _t(parts[-1]), *_n(ops, 4, "selp"))


def _float_bits(a, t):
    """A 0f/0d float literal moved into a bit type (`mov.b32 %r, 0f3F800000`, as Triton writes it): its bits."""
    if isinstance(a, Imm) and isinstance(a.value, float) and t.kind == "b" and t.bits in (32, 64):
        fmt = ("<f", "<I") if t.bits == 32 else ("<d", "<Q")
        return Imm(struct.unpack(fmt[1], struct.pack(fmt[0], a.value))[0])
    return a


def _d_mov(parts, ops):
    d, a = _n(ops, 2, "mov")
    t = _t(parts[-1])
    return Call(mov, t, d, _float_bits(a, t))


def _d_bra(parts, ops):
    (label,) = _n(ops, 1, "bra")
    return Call(bra, label, uni=parts[1:] == ["uni"])


def _d_simple(parts, ops):
    _n(ops, 0, parts[0])
    return Call(simple, parts[0])


def _d_logic(parts, ops):
    return Call(logic, parts[0], _t(parts[-1]), ops[0], list(ops[1:]))


def _d_shift(parts, ops):
    d, a, n = _n(ops, 3, parts[0])
    return Call(shift, parts[0], _t(parts[-1]), d, a, n)


def _d_lop3(parts, ops):
    if len(ops) == 6:  # lop3.boolop.b32 d|p, a, b, c, lut, q
        d, a, b, c, lut, q = ops
        if not isinstance(d, PairDst) or len(parts) != 3:
            raise ValidationError("lop3 with a predicate output is lop3.{and,or}.b32 d|p, a, b, c, lut, q")
        return Call(lop3, d.reg, a, b, c, _int(lut, "lop3 lookup table"), d.pred, parts[1], q)
    d, a, b, c, lut = _n(ops, 5, "lop3")
    return Call(lop3, d, a, b, c, _int(lut, "lop3 lookup table"))


def _d_prmt(parts, ops):
    d, a, b, c = _n(ops, 4, "prmt")
    return Call(prmt, d, a, b, c, parts[2] if len(parts) > 2 else None)


def _d_shf(parts, ops):
    d, a, b, c = _n(ops, 4, "shf")
    return Call(shf, parts[1], d, a, b, c, parts[2])


def _d_bitfield(parts, ops):
    return Call(bitfield, parts[0], _t(parts[-1]), ops[0], list(ops[1:]), parts[1:-1] == ["shiftamt"])


def _d_cvt(parts, ops):
    if parts[1:2] == ["pack"]:
        return d_cvt_pack(parts, ops)
    narrow = narrow_cvt(parts, ops)
    if narrow is not None:
        return narrow
    dt, st_ = _t(parts[-2]), _t(parts[-1])
    mods = parts[1:-2]
    rnd = next((m for m in mods if m not in ("ftz", "sat")), None)
    if dt in (T.f16x2, T.bf16x2):
        d, a, b = _n(ops, 3, f"cvt.{dt.name}")
        return Call(cvt, dt, st_, d, a, rnd, "sat" in mods, "ftz" in mods, b)
    d, a = _n(ops, 2, "cvt")
    return Call(cvt, dt, st_, d, a, rnd, "sat" in mods, "ftz" in mods)


def _d_cvta(parts, ops):
    d, a = _n(ops, 2, "cvta")
    to = parts[1] == "to"
    space = parts[2] if to else parts[1]
    return Call(cvta, d, a, space, to)


def _matrix_parts(parts):
    shape, num, trans, space = None, None, False, "generic"
    for p in parts[3:-1]:
        if p[0] == "m" and p[1:2].isdigit():
            shape = p
        elif p[0] == "x" and p[1:].isdigit():
            num = int(p[1:])
        elif p == "trans":
            trans = True
        else:
            space = p
    return shape, num, trans, space, _t(parts[-1])


def _d_ldmatrix(parts, ops):
    d, a = _n(ops, 2, "ldmatrix")
    shape, num, trans, space, t = _matrix_parts(parts)
    return Call(ldmatrix, d, a, num, trans, shape, t, space)


def _d_stmatrix(parts, ops):
    a, v = _n(ops, 2, "stmatrix")
    shape, num, trans, space, t = _matrix_parts(parts)
    return Call(stmatrix, a, v, num, trans, shape, t, space)


def _d_prefetch(parts, ops):
    (a,) = _n(ops, 1, "prefetch")
    space = parts[1] if len(parts) == 3 else None
    if parts[-1] == "tensormap":
        return Call(prefetch_tensormap, a, space)
    return Call(prefetch, a, parts[-1], space)


def _d_bar(parts, ops):
    if parts[:2] == ["bar", "red"]:
        return d_bar_red(parts, ops)
    name = BARRIER_SPELLINGS.get(".".join(parts), ".".join(parts))
    if name == "bar.warp.sync":
        (m,) = _n(ops, 1, "bar.warp.sync")
        return Call(bar_warp_sync, _mask(m))
    head, kind = name.split(".")[:2]
    if len(name.split(".")) != 2:
        raise ValidationError(f"{name}: the tables have bar.sync, bar.arrive, barrier.sync, barrier.arrive, "
                              "bar.warp.sync")
    if not 1 <= len(ops) <= 2:
        raise ValidationError(f"{name} takes a barrier id and an optional thread count")
    count = _int_or_reg(ops[1]) if len(ops) > 1 else None
    return Call(bar, kind, _int_or_reg(ops[0]), count, aligned=head == "bar")


def _d_fence(parts, ops):
    kind = ".".join(parts)
    if kind in FENCES_WITH_ADDRESS:  # [addr], size: decode compares the size with the table's
        a, _size = _n(ops, 2, kind)
        return Call(fence, kind, a)
    _n(ops, 0, parts[0])
    return Call(fence, kind)


def _d_mbarrier(parts, ops):
    kind = parts[1]
    space = next((p for p in parts if p.startswith("shared")), "shared")
    if kind == "init":
        a, n = _n(ops, 2, "mbarrier.init")
        return Call(mbarrier_init, a, _int_or_reg(n), space)
    sem = next((p for p in parts if p in ("release", "relaxed", "acquire")), None)
    scope = next((p for p in parts if p in ("cta", "cluster")), None)
    if kind == "arrive":
        tx = "expect_tx" in parts
        no_complete = "noComplete" in parts
        if len(ops) == 3:
            extra = _int_or_reg(ops[2])
            return Call(mbarrier_arrive, ops[0], ops[1], None if tx else extra, space, extra if tx else None, False,
                        no_complete, sem, scope)
        state, a = _n(ops, 2, "mbarrier.arrive")
        return Call(mbarrier_arrive, state, a, None, space, None, False, no_complete, sem, scope)
    if kind == "expect_tx":
        a, n = _n(ops, 2, "mbarrier.expect_tx")
        return Call(mbarrier_expect_tx, a, _int_or_reg(n), space, scope)
    if kind in ("test_wait", "try_wait"):
        hint = None
        if kind == "try_wait" and len(ops) == 4:  # the suspend-time hint
            p, a, phase, hint = ops
            hint = _int_or_reg(hint)
        else:
            p, a, phase = _n(ops, 3, f"mbarrier.{kind}")
        return Call(mbarrier_wait, kind, p, a, _int_or_reg(phase), "parity" in parts, space, hint, sem, scope)
    if kind == "inval":
        (a,) = _n(ops, 1, "mbarrier.inval")
        return Call(mbarrier_inval, a, space)
    more = d_mbarrier_more(parts, ops, space)
    if more is not None:
        return more
    raise Unknown(f"mbarrier.{kind} is not in the tables (they have init, arrive, expect_tx, test_wait, "
                  "try_wait, inval)")


def _d_nanosleep(parts, ops):
    (t,) = _n(ops, 1, "nanosleep")
    return Call(nanosleep, _int_or_reg(t))


def _d_shfl(parts, ops):
    d, a, b, c, m = _n(ops, 5, "shfl.sync")
    p = None
    if isinstance(d, PairDst):
        d, p = d.reg, d.pred
    return Call(shfl, parts[2], d, a, b, c, _mask(m), p)


def _d_vote(parts, ops):
    if parts[1:2] != ["sync"]:  # vote without .sync: gone since sm_70 (ptxas: "not supported on .target sm_70+")
        mode = ".".join(parts[1:]) or "ballot.b32"
        raise ValidationError(f"'{'.'.join(parts)}': vote without .sync is not supported on sm_70 and later; write "
                              f"vote.sync.{mode} d, p, membermask (e.g. 0xFFFFFFFF for the whole warp)")
    d, p, m = _n(ops, 3, "vote.sync")
    return Call(vote, parts[2], d, p, _mask(m))


def _d_redux(parts, ops):
    d, a, m = _n(ops, 3, "redux.sync")
    return Call(redux, parts[2], _t(parts[-1]), d, a, _mask(m))


def _d_elect(parts, ops):
    return d_elect(ops)


def _d_activemask(parts, ops):
    (d,) = _n(ops, 1, "activemask")
    return Call(activemask, d)


def _d_mma(parts, ops):
    if parts[1].startswith("sp"):
        return d_mma_sp(parts, ops)
    d, a, b, c = _n(ops, 4, "mma")
    # mma.sync.aligned.SHAPE.alayout.blayout{.satfinite}.dt.at.bt.ct{.bitop.popc}
    layout = tuple(parts[4:6])
    rest = parts[6:]
    satfinite = bool(rest) and rest[0] == "satfinite"
    if satfinite:
        rest = rest[1:]
    bitop = None
    if len(rest) == 6 and rest[-1] == "popc":
        bitop, rest = rest[4], rest[:4]
    if len(rest) != 4:
        raise ValidationError("mma is mma.sync.aligned.shape.row.col{.satfinite}.dtype.atype.btype.ctype")
    form = Call(mma_form, parts[3], _t(rest[1]), _t(rest[2]), _t(rest[3]), bitop, d_type=_t(rest[0]), layout=layout)
    return NestedCall(mma, form, d, a, b, c, satfinite)


def _d_wgmma(parts, ops):
    kind = parts[1]
    if kind == "fence":
        _n(ops, 0, "wgmma.fence")
        return Call(wgmma_fence)
    if kind == "commit_group":
        _n(ops, 0, "wgmma.commit_group")
        return Call(wgmma_commit_group)
    if kind == "wait_group":
        (n,) = _n(ops, 1, "wgmma.wait_group")
        return Call(wgmma_wait_group, _int(n, "wgmma.wait_group count"))
    if kind != "mma_async":
        raise Unknown(f"wgmma.{kind} is not in the tables")
    # wgmma.mma_async{.sp}.sync.aligned.SHAPE{.satfinite}.dtype.atype.btype{.and.popc}
    sparse = parts[2] == "sp"
    if sparse:
        parts = parts[:2] + parts[3:]
    rest = parts[5:]
    satfinite = bool(rest) and rest[0] == "satfinite"
    if satfinite:
        rest = rest[1:]
    bitop = None
    if len(rest) == 5 and rest[-1] == "popc":
        bitop, rest = rest[3], rest[:3]
    shape = parts[4]
    if len(rest) != 3 or not shape.startswith("m64n") or "k" not in shape:
        raise ValidationError("wgmma.mma_async is wgmma.mma_async.sync.aligned.m64nNkK{.satfinite}.dtype.atype.btype")
    n = int(shape[4:shape.index("k")])
    form = Call(wgmma_form, n, _t(rest[1]), _t(rest[2]), _t(rest[0]), bitop)
    f = form.run()
    want = f"m64n{f.n}k{2 * f.k}" if sparse else f.shape
    if want != shape:
        raise ValidationError(f"wgmma{'.sp' if sparse else ''} .{rest[1]} has K = {2 * f.k if sparse else f.k}: "
                              f"the shape is {want}, not {shape}")
    if len(ops) < (6 if sparse else 4):
        raise ValidationError("wgmma.mma_async takes d, a, b-desc{, sp-meta, sp-sel}, scale-d and the immediates of "
                              "its form")
    d, a, b = ops[:3]
    meta_sel = tuple(ops[3:5]) if sparse else ()
    scale_d = ops[5] if sparse else ops[3]
    extra = list(ops[6:] if sparse else ops[4:])
    kw = {}
    if f.has_scale_ab:
        if len(extra) < 2:
            raise ValidationError(f"{f.mnemonic()} takes imm-scale-a and imm-scale-b after scale-d")
        kw["scale_a"], kw["scale_b"] = _int(extra.pop(0), "imm-scale-a"), _int(extra.pop(0), "imm-scale-b")
    if f.transposable:
        if not isinstance(a, Vec):
            kw["trans_a"] = _int(extra.pop(0), "imm-trans-a") if extra else None
        kw["trans_b"] = _int(extra.pop(0), "imm-trans-b") if extra else None
    if extra:
        raise ValidationError(f"{f.mnemonic()}: too many operands")
    kw = {k: v for k, v in kw.items() if v is not None}
    if satfinite:
        kw["satfinite"] = True
    if sparse:
        return NestedCall(wgmma_sp, form, d, a, b, meta_sel[0], _int(meta_sel[1], "wgmma.sp selector"),
                          _int_or_reg(scale_d), **kw)
    return NestedCall(wgmma, form, d, a, b, _int_or_reg(scale_d), **kw)


def _d_barrier(parts, ops):
    if parts[1:2] == ["cluster"]:
        _n(ops, 0, "barrier.cluster")
        kind = parts[2] if len(parts) > 2 else None
        sem = next((p for p in parts[3:] if p != "aligned"), None)
        return Call(barrier_cluster, kind, sem, "aligned" in parts[3:])
    return _d_bar(parts, ops)


def _d_mapa(parts, ops):
    d, a, rank = _n(ops, 3, "mapa")
    space = parts[1] if len(parts) == 3 else "generic"
    return Call(mapa, d, a, _int_or_reg(rank), space)


def _d_getctarank(parts, ops):
    d, a = _n(ops, 2, "getctarank")
    return Call(getctarank, d, a, parts[1] if len(parts) == 3 else "generic")


def _d_setmaxnreg(parts, ops):
    (n,) = _n(ops, 1, "setmaxnreg")
    return Call(setmaxnreg, parts[1], _int(n, "setmaxnreg count"))


def _d_cp_async(parts, ops):
    name = ".".join(parts)
    if parts[1] == "reduce":
        return _bulk_reduce(parts, ops)
    if name == "cp.async.commit_group":
        return Call(commit_group)
    if name == "cp.async.wait_group":
        (n,) = _n(ops, 1, name)
        return Call(wait_group, _int(n, "cp.async.wait_group count"))
    if name == "cp.async.wait_all":
        return Call(wait_all)
    if parts[2] == "mbarrier":
        (a,) = _n(ops, 1, "cp.async.mbarrier.arrive")
        space = next((p for p in parts if p.startswith("shared")), "generic")  # (no space written: generic)
        return Call(cp_async_mbarrier_arrive, a, "noinc" in parts, space)
    if parts[2] == "bulk":
        return _bulk(parts, ops)
    if parts[2] not in ("ca", "cg") or len(ops) < 3:
        raise Unknown(f"{name} is not a cp.async form in the tables")
    dst, src, size = ops[:3]
    extra = list(ops[3:])
    policy = extra.pop() if "L2::cache_hint" in parts and extra else None
    src_size = ignore = None
    if extra:
        x = extra.pop(0)
        if isinstance(x, NegPred) or (isinstance(x, Reg) and x.type.is_pred):
            ignore = x
        else:
            src_size = _int_or_reg(x)
    if extra:
        raise ValidationError(f"{name}: too many operands")
    pf = next((p for p in parts if p.startswith("L2::") and p.endswith("B")), None)
    return Call(cp_async, dst, src, _int(size, "cp.async cp-size"), parts[2], src_size, ignore, pf, policy, parts[3])


def _bulk(parts, ops):
    name = ".".join(parts)
    if name == "cp.async.bulk.commit_group":
        return Call(bulk_commit_group)
    if parts[3] == "wait_group":
        (n,) = _n(ops, 1, name)
        return Call(bulk_wait_group, _int(n, "cp.async.bulk.wait_group count"), "read" in parts)
    if parts[3] == "prefetch" and parts[4:5] == ["L2"]:  # cp.async.bulk.prefetch.L2.global{.L2::cache_hint}
        if "L2::cache_hint" in parts:
            src, size, policy = _n(ops, 3, name)
            return Call(bulk_prefetch, src, _int_or_reg(size), policy)
        src, size = _n(ops, 2, name)
        return Call(bulk_prefetch, src, _int_or_reg(size))
    if parts[3] == "prefetch" and parts[4:5] == ["tensor"]:  # cp.async.bulk.prefetch.tensor.Nd.L2.global.tile
        (t,) = _n(ops, 1, name)
        if not isinstance(t, TensorAddr):
            raise ValidationError(f"{name} takes one operand, [tmap, {{coordinates}}]")
        return Call(bulk_tensor_prefetch, t.tmap, t.coords)
    if parts[3] == "tensor":
        dst_space = parts[5] if len(parts) > 5 and parts[5].startswith("shared") else "shared::cluster"
        if "im2col" in parts and len(ops) in (4, 5) and isinstance(ops[1], TensorAddr) and isinstance(ops[3], Vec):
            d, t, m, offs = ops[:4]
            mask = _int_or_reg(ops[4]) if len(ops) == 5 else None
            return Call(bulk_tensor_g2s_im2col, d, t.tmap, t.coords, m, offs.regs, mask, dst_space)
        if len(ops) in (3, 4) and isinstance(ops[1], TensorAddr):
            d, t, m = ops[:3]
            mask = _int_or_reg(ops[3]) if len(ops) == 4 else None  # .multicast::cluster: the CTA mask
            return Call(bulk_tensor_g2s, d, t.tmap, t.coords, m, mask, dst_space)
        if len(ops) == 2 and isinstance(ops[0], TensorAddr):
            t, s = ops
            return Call(bulk_tensor_s2g, t.tmap, t.coords, s)
        raise ValidationError(f"{name}: the tables have the tile load [smem], [tmap, {{...}}], [mbar], the "
                              "im2col load [smem], [tmap, {c, w, (h, (d,)) n}], [mbar], {offsets} and the tile "
                              "store [tmap, {...}], [smem]")
    if parts[3] == "global":  # the 1-D store shared -> global
        d, s, size = _n(ops, 3, "cp.async.bulk (store)")
        return Call(bulk_s2g, d, s, _int_or_reg(size))
    if parts[3:5] == ["shared::cluster", "shared::cta"]:  # this CTA's shared memory into a cluster CTA's
        d, s, size, m = _n(ops, 4, "cp.async.bulk (shared::cta -> shared::cluster)")
        return Call(bulk_s2s, d, s, _int_or_reg(size), m)
    # only a load from global memory is read as one (a copy between other spaces would meet its checks and mislead)
    if parts[4:5] != ["global"] or not parts[3].startswith("shared"):
        raise Unknown(f"{name} is not a bulk copy the tables have (global -> shared and shared::cta -> "
                      "shared::cluster with an mbarrier, shared::cta -> global with a bulk group)")
    if "multicast::cluster" in parts:
        d, s, size, m, mask = _n(ops, 5, "cp.async.bulk (multicast)")
        return Call(bulk_g2s, d, s, _int_or_reg(size), m, parts[3], _int_or_reg(mask))
    d, s, size, m = _n(ops, 4, "cp.async.bulk")
    return Call(bulk_g2s, d, s, _int_or_reg(size), m, parts[3])


def _bulk_reduce(parts, ops):
    """cp.reduce.async.bulk{.tensor.Nd}...: the reduction is the part the tables name, the element type the last."""
    name = ".".join(parts)
    red = next((p for p in parts[5:] if p in TENSOR_REDUCE_OPS), None)
    if red is None:
        raise ValidationError(f"{name}: no reduction the tables know ({', '.join(TENSOR_REDUCE_OPS)})")
    if parts[4] == "tensor":
        if len(ops) not in (2, 3) or not isinstance(ops[0], TensorAddr):
            raise ValidationError(f"{name} takes [tmap, {{coordinates}}], [smem]{{, cache-policy}}")
        mode = next((p for p in parts if p in TENSOR_REDUCE_MODES), "tile")
        return Call(bulk_tensor_reduce, ops[0].tmap, ops[0].coords, ops[1], red, mode, *ops[2:])
    if parts[4] == "shared::cluster":
        d, s, size, m = _n(ops, 4, name)
        return Call(bulk_reduce, d, s, _int_or_reg(size), red, parts[-1], m)
    if len(ops) == 4:
        d, s, size, policy = ops
        return Call(bulk_reduce, d, s, _int_or_reg(size), red, parts[-1], None, policy)
    d, s, size = _n(ops, 3, name)
    return Call(bulk_reduce, d, s, _int_or_reg(size), red, parts[-1])


def _d_tensormap(parts, ops):
    """tensormap.replace.tile.field{.space}.b1024.type [map], {ord,} value / tensormap.cp_fenceproxy...scope..."""
    name = ".".join(parts)
    if parts[1] == "cp_fenceproxy":
        d, s, _ = _n(ops, 3, name)
        scope = next((p for p in parts if p in CP_FENCEPROXY_SCOPES), None)
        return Call(tensormap_cp_fenceproxy, d, s, scope)
    if parts[1] != "replace" or len(parts) < 6:
        raise Unknown(f"{name} is not a tensormap form in the tables")
    field = parts[3]
    space = parts[4] if parts[4] in ("global", "shared::cta") else None
    if len(ops) == 3:
        return Call(tensormap_replace, ops[0], field, _int_or_reg(ops[2]), _int(ops[1], "tensormap.replace ordinal"),
                    space)
    a, v = _n(ops, 2, name)
    return Call(tensormap_replace, a, field, _int_or_reg(v), None, space)


def _d_call(parts, ops):
    rets, args, func, proto = (), (), None, None
    for op in ops:
        if isinstance(op, FuncRef) or (isinstance(op, Reg) and func is None):  # a register: an indirect call
            func = op
        elif isinstance(op, ArgList):
            if func is None:
                rets = op.items
            else:
                args = op.items
        elif isinstance(op, CallPrototype) and func is not None:
            proto = op
        else:
            raise ValidationError(f"call: {op} is neither a function, a (return list), an (argument list) nor a "
                                  ".callprototype")
    if func is None:
        raise ValidationError("call names no declared device function (.func)")
    if proto is not None:
        return Call(call, func, args, rets, uni=parts[1:] == ["uni"], targets=proto)
    return Call(call, func, args, rets, uni=parts[1:] == ["uni"])


def _without_empty_arguments(ops: list) -> list:
    """A call's operands without an empty argument list after the function (`call f, ();`, as nvcc -G
    writes it): the same call as `call f;`, which is how it renders."""
    for i, op in enumerate(ops):
        if isinstance(op, (FuncRef, Reg)):
            if i + 1 < len(ops) and isinstance(ops[i + 1], ArgList) and not ops[i + 1].items:
                return ops[:i + 1] + ops[i + 2:]
            break
    return ops


def _d_brx(parts, ops):
    if parts[1:2] != ["idx"] or parts[2:] not in ([], ["uni"]):
        raise ValidationError("brx: the tables know brx.idx{.uni} index, tlist")
    return Call(brx_idx, ops[0], ops[1], uni=parts[2:] == ["uni"])


#: First mnemonic part -> the decoder that reads that family's modifiers and operands.
DECODERS = {
    **{k: _d_arith for k in ARITH},
    "setp": _d_setp, "selp": _d_selp, "mov": _d_mov, "bra": _d_bra,
    "ret": _d_simple, "exit": _d_simple, "trap": _d_simple,
    **{k: _d_logic for k in ("and", "or", "xor", "not", "cnot")},
    "shl": _d_shift, "shr": _d_shift, "lop3": _d_lop3, "prmt": _d_prmt, "shf": _d_shf,
    **{k: _d_bitfield for k in BITFIELD},
    "cvt": _d_cvt, "cvta": _d_cvta,
    "ldmatrix": _d_ldmatrix, "stmatrix": _d_stmatrix, "prefetch": _d_prefetch,
    "bar": _d_bar, "barrier": _d_barrier, "mapa": _d_mapa, "getctarank": _d_getctarank,
    "membar": _d_fence, "fence": _d_fence, "mbarrier": _d_mbarrier,
    "nanosleep": _d_nanosleep, "shfl": _d_shfl, "vote": _d_vote, "redux": _d_redux, "elect": _d_elect,
    "activemask": _d_activemask, "mma": _d_mma, "wgmma": _d_wgmma, "setmaxnreg": _d_setmaxnreg,
    "cp": _d_cp_async, "call": _d_call, "brx": _d_brx, "tensormap": _d_tensormap,
    **MEMORY_DECODERS, **COMPUTE_DECODERS,
}

#: Instruction names the reader knows, for the "not in the tables" message.
KNOWN = tuple(sorted(set(DECODERS) - {"cp"}) + ["cp.async", "cp.reduce.async.bulk"])


def _spelled_alike(made: str, read: str) -> bool:
    if made == read:
        return True
    read = BARRIER_SPELLINGS.get(read, read)
    if made == read:
        return True
    a, b = made.split("."), read.split(".")
    return a[0] == b[0] and sorted(a) == sorted(b)


def _same_operand(made, read) -> bool:
    """Equal spellings, or two immediates of one value (`1.0` and `0f3F800000`, `-1` and `0xFFFFFFFF`)."""
    if isinstance(made, Imm) and isinstance(read, Imm):
        a, b = made.value, read.value
        if isinstance(a, int) and isinstance(b, int) and a != b:  # -1 and 0xFFFFFFFF: one 32-bit mask
            return -(1 << 31) <= min(a, b) and max(a, b) < (1 << 32) and (a - b) % (1 << 32) == 0
        if isinstance(a, int) and isinstance(b, float):  # bits made from a float literal read for a bit type
            return any(_float_bits(read, T.lookup(f"b{w}")).value == a for w in (32, 64))
        return float(a) == float(b)
    if isinstance(read, Vec) and len(read.regs) == 1 and not isinstance(made, Vec):  # `{ %r1 }` for `%r1`
        return str(made) == str(read.regs[0])
    return str(made) == str(read)


def decode_call(mnemonic: str, ops: list) -> Call:
    """The constructor call that `decode` makes for `mnemonic ops...` (not yet run)."""
    parts = mnemonic.split(".")
    return DECODERS[parts[0]](parts, ops)


_PARTS: dict = {}


def decode(mnemonic: str, ops: list):
    """The Instruction for `mnemonic ops...`; ValidationError (or Unknown) says why there is none."""
    parts = _PARTS.get(mnemonic)
    if parts is None:
        parts = mnemonic.split(".")
        if len(_PARTS) < 65536:
            _PARTS[mnemonic] = parts
    fn = DECODERS.get(parts[0])
    if parts[0] == "call":
        ops = _without_empty_arguments(ops)
    if fn is None or (parts[0] == "cp" and parts[1:2] != ["async"] and parts[1:4] != ["reduce", "async", "bulk"]):
        raise Unknown(f"'{mnemonic}': the tables have no instruction '{parts[0]}'")
    try:
        ins = fn(parts, ops).run()
    except ValidationError as e:
        if "unknown PTX type" in e.message:
            raise ValidationError(f"'{mnemonic}': {e.message}") from None
        raise
    except (IndexError, KeyError, TypeError, AttributeError, ValueError) as e:  # parts or operands of the wrong kind
        raise ValidationError(f"'{mnemonic}' is not a form the tables know ({type(e).__name__}: {e})") from None
    if ins.mnemonic != mnemonic and not _spelled_alike(ins.mnemonic, mnemonic):
        raise ValidationError(f"'{mnemonic}' is not a form the tables know; the nearest they have is "
                              f"'{ins.mnemonic}'")
    made = ins.operands
    if made != tuple(ops) and (len(made) != len(ops) or not all(_same_operand(x, y) for x, y in zip(made, ops))):
        raise ValidationError(f"'{mnemonic}': the tables' form has the operands {', '.join(map(str, made))}; "
                              f"the line has {', '.join(map(str, ops))}")
    return ins
