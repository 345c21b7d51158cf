"""Emit a drawn `Spec` through the public KernelBuilder API, one family at a time."""

from __future__ import annotations

import warnings

from ..builder import KernelBuilder
from ..isa import types as T
from ..isa.arith import ARITH
from ..isa.bits import BITFIELD
from ..isa.control import mov
from ..isa.convert import cvta
from ..isa.operands import Addr, SymbolOffset
from ..isa.tensor import MMA_FORMS, IgnoredInstructionWarning
from ..isa.tensormap import TENSORMAP_FIELDS
from ..module import Module
from .spec import Scratch, Spec


def _emit_arith(sc: Scratch, s: Spec):
    """One arithmetic instruction through its builder method (k.add, k.mul24, ...), as its ARITH
    row describes it: operand types, whether the method takes type= and mode=."""
    k, t, op = sc.k, T.lookup(s["type"]), s.op
    form = ARITH[op]
    mode = s.get("mode")
    imm = s.get("imm")  # (position, value) or None
    srcs = []
    for i in range(form.arity):
        srcs.append(imm[1] if imm is not None and imm[0] == i else sc.reg(form.source_type(t, mode, i)))
    kw = {"pred": sc.guard(s.get("guard"))}
    if len(form.types) > 1:  # ex2, lg2, sin, cos take only .f32 and their methods no type=
        kw["type"] = t
    if form.takes_mode and mode is not None:
        kw["mode"] = mode
    if s.get("flags"):
        kw["flags"] = s["flags"]
    getattr(k, op)(*srcs, **kw)


LOGIC_METHODS = {"and": "and_", "or": "or_", "xor": "xor", "not": "not_", "cnot": "cnot"}


def _emit_bits(sc: Scratch, s: Spec):
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    imm = s.get("imm")
    if op in LOGIC_METHODS:
        t = T.lookup(s["type"])
        n = 1 if op in ("not", "cnot") else 2
        srcs = [imm if (imm is not None and i == n - 1 and not t.is_pred) else sc.reg(t) for i in range(n)]
        getattr(k, LOGIC_METHODS[op])(*srcs, type=t, pred=g)
    elif op in ("shl", "shr"):
        t = T.lookup(s["type"])
        k.shl(sc.reg(t), imm if imm is not None else sc.reg(T.u32), type=t, pred=g) if op == "shl" else \
            k.shr(sc.reg(t), imm if imm is not None else sc.reg(T.u32), type=t, pred=g)
    elif op == "lop3":
        b = imm if imm is not None else sc.reg(T.b32)
        combine = None
        if s.get("combine") is not None:
            q = s.get("q")
            combine = (s["combine"], q if isinstance(q, bool) else sc.guard(q))
        k.lop3(sc.reg(T.b32), b, sc.reg(T.b32), s["lut"], pred=g, combine=combine)
    elif op == "bmsk":
        k.bmsk(sc.reg(T.u32), imm if imm is not None else sc.reg(T.u32), mode=s["mode"], pred=g)
    elif op == "szext":
        t = T.lookup(s["type"])
        k.szext(sc.reg(t), imm if imm is not None else sc.reg(T.u32), type=t, mode=s["mode"], pred=g)
    elif op == "fns":
        base = s["base"] if s["base"] is not None else sc.reg(T.u32)
        k.fns(sc.reg(T.b32), base, imm if imm is not None else sc.reg(T.s32), pred=g)
    elif op == "prmt":
        sel = imm if imm is not None else sc.reg(T.b32)
        k.prmt(sc.reg(T.b32), sc.reg(T.b32), sel, mode=s.get("mode"), pred=g)
    elif op == "shf":
        n = imm if imm is not None else sc.reg(T.u32)
        k.shf(s["direction"], sc.reg(T.b32), sc.reg(T.b32), n, mode=s["mode"], pred=g)
    elif op in BITFIELD:
        t = T.lookup(s["type"])
        pos = imm if imm is not None else sc.reg(T.u32)
        if op == "bfe":
            k.bfe(sc.reg(t), pos, sc.reg(T.u32), type=t, pred=g)
        elif op == "bfi":
            k.bfi(sc.reg(t), sc.reg(t), pos, sc.reg(T.u32), type=t, pred=g)
        elif s.get("shiftamt"):
            k.bfind(sc.reg(t), type=t, shiftamt=True, pred=g)
        else:
            getattr(k, op)(sc.reg(t), type=t, pred=g)
    else:
        raise ValueError(f"unknown bits op {op}")


def _emit_control(sc: Scratch, s: Spec):
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    imm = s.get("imm")
    if op == "setp":
        t = T.lookup(s["type"])
        combine = None
        if s.get("combine") is not None:
            combine = (s["combine"], ~sc.p if s.get("negate") else sc.p)
        k.setp(s["cmp"], sc.reg(t), imm if imm is not None else sc.reg(t), type=t, combine=combine, pred=g,
               ftz=s.get("ftz", False), both=s.get("both", False))
    elif op == "set":
        t = T.lookup(s["type"])
        combine = (s["combine"], sc.p) if s.get("combine") is not None else None
        k.set(s["cmp"], sc.reg(t), imm if imm is not None else sc.reg(t), to=s["to"], type=t, combine=combine,
              ftz=s.get("ftz", False), pred=g)
    elif op == "slct":
        t = T.lookup(s["type"])
        k.slct(sc.reg(t), imm if imm is not None else sc.reg(t), sc.reg(T.lookup(s["ctype"])), type=t,
               ftz=s.get("ftz", False), pred=g)
    elif op == "testp":
        t = T.lookup(s["type"])
        k.testp(s["test"], sc.reg(t), type=t, pred=g)
    elif op == "selp":
        t = T.lookup(s["type"])
        k.selp(sc.reg(t), imm if imm is not None else sc.reg(t), sc.p, type=t, pred=g)
    elif op == "mov":
        t = T.lookup(s["type"])
        k.mov(imm if imm is not None else sc.reg(t), type=t, pred=g)
    elif op == "pack":
        bits, parts = s["bits"], s["parts"]
        k.mov(sc.regs(T.lookup(f"b{bits // parts}"), parts), type=T.lookup(f"b{bits}"), pred=g)
    elif op == "unpack":
        k.unpack(sc.reg(T.lookup(f"b{s['bits']}")), s["parts"], pred=g)
    elif op == "sreg":
        k.sreg(s["name"])
    elif op == "sym_offset":  # the shared array's address plus an offset, as a value
        addr = SymbolOffset(sc.smem, s.get("offset", 0))
        kind = s["form"].split(".", 1)
        if kind[0] == "mov":
            t = T.lookup(kind[1])
            k.emit(mov(t, sc.reg(t), addr), pred=g)
        else:
            k.emit(cvta(sc.reg(T.u64), addr, kind[1], False), pred=g)
    elif op == "bra":
        lbl = k.label("fwd")
        k.bra(lbl, pred=g, uni=s.get("uni", False))
        k.place(lbl)
    elif op == "alloca":
        k.alloca(s["size"] if s["size"] != "reg" else sc.reg(T.u64), align=s["align"], pred=g)
    elif op == "pmevent":
        k.pmevent(s["event"], mask=s["mask"], pred=g)
    elif op == "brkpt":
        k.brkpt(pred=g)
    elif op == "stacksave":
        k.stacksave(pred=g)
    elif op == "stackrestore":
        k.stackrestore(sc.reg(T.u64), pred=g)
    elif op == "call":  # a device function of one .u32 parameter, with or without a .u32 result
        k.call(_device_function(sc, s["result"]), args=[sc.reg(T.u32)], uni=s["uni"], pred=g)
    elif op == "brx_idx":
        here = k.label()
        k.brx_idx(k.mov(0, type=T.u32), [here], uni=s["uni"], pred=g)  # index 0: the one target
        k.place(here)
    elif op in ("ret", "exit", "trap"):
        getattr(k, op)(pred=sc.p if g is None else g)  # guarded, so the rest of the kernel stays reachable
    else:
        raise ValueError(f"unknown control op {op}")


def _device_function(sc: Scratch, result: bool):
    """The Scratch module's device function (one per kind): x -> x + 1 as .u32, or a store-free no-op."""
    from ..builder import FunctionBuilder
    key = "_fn_result" if result else "_fn_plain"
    f = getattr(sc, key, None)
    if f is None:
        f = FunctionBuilder(f"lane_fn_{'r' if result else 'p'}", str(sc.target))
        x = f.param_value("x", T.u32)
        if result:
            f.result("y", T.u32)
            f.set_result(f.add(x, 1))
        setattr(sc, key, f)
    return f


def _emit_convert(sc: Scratch, s: Spec):
    k, g = sc.k, sc.guard(s.get("guard"))
    if s.op == "cvt":
        dt, st_ = T.lookup(s["to"]), T.lookup(s["frm"])
        b = sc.reg(T.f32) if dt in (T.f16x2, T.bf16x2) else None
        k.cvt(sc.reg(st_), dt, frm=st_, rnd=s.get("rnd"), sat=s.get("sat", False), ftz=s.get("ftz", False),
              b=b, pred=g)
    elif s.op == "cvt_pack":
        k.cvt_pack(sc.reg(T.s32), sc.reg(T.s32), sc.reg(T.b32) if s["c"] else None, to=s["to"], pred=g)
    elif s.op == "cvt_narrow":
        from ..isa.convert_narrow import NARROW_CVT
        f = NARROW_CVT.get((s["to"], s["frm"]))
        srcs = sc.regs(f.src_type, f.nsrc) if f is not None else [sc.reg(T.f32)]
        k.cvt_narrow(*srcs, to=s["to"], frm=s["frm"], rnd=s["rnd"], relu=s["relu"], satfinite=s["satfinite"],
                     pred=g)
    elif s.op == "cvta":
        src = sc.reg(T.u64)
        if s["to"]:
            k.cvta(src, to=s["space"], pred=g)
        else:
            k.cvta(src, frm=s["space"], pred=g)
    else:
        raise ValueError(f"unknown convert op {s.op}")


def _address(sc: Scratch, space):
    """A base address for `space` (offsets are added by the spec)."""
    if space in ("global",):
        return sc.g
    if space in ("generic", None):
        return sc.g64
    if space in ("shared", "shared::cta", "shared::cluster"):  # a cluster address is a 32-bit shared one (mapa's)
        return sc.s
    if space == "local":
        return sc.reg(T.u64)
    if space in ("const", "param"):
        return sc.reg(T.u64)
    raise ValueError(space)


def _emit_memory(sc: Scratch, s: Spec):
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    if op in ("ld", "st"):
        t, vec, space = T.lookup(s["type"]), s["vec"], s["space"]
        addr = _address(sc, space)
        off = s.get("offset", 0)
        order = dict(sem=s.get("sem"), scope=s.get("scope"),
                     policy=k.createpolicy() if s.get("policy") else None)
        if op == "ld":
            k.ld(addr, type=t, space=space, vec=vec, nc=s.get("nc", False), cop=s.get("cop"),
                 hints=s.get("hints", ()), offset=off, pred=g, **order)
        else:
            imm = s.get("imm")
            reg_t = t if t.bits >= 32 or not (t.is_int or t.kind == "b") else T.lookup(f"{t.kind}32")
            vals = [imm if imm is not None else sc.reg(reg_t) for _ in range(vec)]
            k.st(addr, vals if vec > 1 else vals[0], type=t, space=space, cop=s.get("cop"),
                 hints=s.get("hints", ()), offset=off, pred=g, **order)
    elif op in ("atom", "red"):
        t, space = T.lookup(s["type"]), s["space"]
        addr = _address(sc, space)
        order = dict(sem=s.get("sem"), scope=s.get("scope"),
                     policy=k.createpolicy() if s.get("policy") else None)
        vec = s.get("vec", 1)
        value = [sc.reg(t) for _ in range(vec)] if vec != 1 else sc.reg(t)
        if op == "atom":
            cmp = sc.reg(t) if s["atom_op"] == "cas" else None
            k.atom(s["atom_op"], addr, value, type=t, space=space, compare=cmp, pred=g, **order)
        else:
            k.red(s["atom_op"], addr, value, type=t, space=space, pred=g, **order)
    elif op == "ldu":
        space = s["space"]
        k.ldu(_address(sc, space), type=s["type"], space=space, vec=s["vec"], offset=s.get("offset", 0), pred=g)
    elif op in ("prefetchu", "discard", "applypriority"):
        space = s.get("space")
        addr = _address(sc, space)
        if op == "prefetchu":
            from ..isa.cache import cache_control
            if space is not None:  # the form with a space does not exist: refused as a user meets it
                cache_control("prefetchu", addr, space)
            k.prefetchu(addr, pred=g)
        else:
            getattr(k, op)(addr, space=space, pred=g)
    elif op == "isspacep":
        k.isspacep(sc.g64, s["space"], pred=g)
    elif op == "createpolicy_range":
        sizes = (sc.reg(T.u32), sc.reg(T.u32)) if s["sizes"] == "reg" else s["sizes"]
        k.createpolicy_range(sc.g if s["space"] else sc.g64, *sizes, primary=s["primary"], secondary=s["secondary"],
                             space=s["space"])
    elif op == "createpolicy_cvt":
        k.createpolicy_cvt(sc.reg(T.b64))
    elif op in ("tex", "tld4", "txq", "istypep", "suld", "sust", "sured", "suq"):
        _emit_texture(sc, s, g)
    elif op == "st_async":
        t = T.lookup(s["type"])
        vals = sc.regs(t, s["vec"])
        k.st_async(sc.s, vals if s["vec"] > 1 else vals[0], sc.mb, type=t, weak=s.get("weak", False), pred=g)
    elif op == "red_async":
        t = T.lookup(s["type"])
        k.red_async(s["red_op"], sc.s, sc.reg(t), sc.mb, type=t, pred=g)
    elif op == "multimem":
        t = T.lookup(s["type"])
        kw = dict(type=t, sem=s["sem"], scope=s["scope"], pred=g)
        if s["kind"] == "ld_reduce":
            k.multimem_ld_reduce(s["red_op"], sc.g, **kw)
        elif s["kind"] == "st":
            k.multimem_st(sc.g, sc.reg(t), **kw)
        else:
            k.multimem_red(s["red_op"], sc.g, sc.reg(t), **kw)
    elif op == "ldmatrix":
        space = s["space"]
        addr = sc.g64 if space == "generic" else sc.s
        k.ldmatrix(addr, num=s["num"], trans=s["trans"], shape=s["shape"], type=s["type"], space=space, pred=g)
    elif op == "stmatrix":
        space = s["space"]
        addr = sc.g64 if space == "generic" else sc.s
        n = s.get("regs", s["num"])
        k.stmatrix(addr, sc.regs(T.b32, n), num=s["num"], trans=s["trans"], shape=s["shape"], type=s["type"],
                   space=space, pred=g)
    elif op == "prefetch":
        space = s.get("space")
        k.prefetch(_address(sc, space), level=s["level"], space=space, offset=s.get("offset", 0), pred=g)
    elif op == "prefetch_tensormap":
        k.prefetch_tensormap(sc.tmap(), space=s.get("space"), pred=g)
    else:
        raise ValueError(f"unknown memory op {op}")


def _emit_texture(sc: Scratch, s: Spec, g):
    """Texture and surface instructions on a .u64 handle register."""
    from ..isa import texture as tx
    k, op = sc.k, s.op
    h = sc.reg(T.u64)

    def coords(geoms, geom, t):
        array, n = geoms.get(geom, (False, 2))
        return [sc.reg(T.s32 if array and i == 0 else t) for i in range(n)]
    if op == "tex":
        ct = T.lookup(s["ctype"])
        lanes = tx.TEX_GRAD_LANES.get(s["geom"], 2)
        grad = [[sc.reg(T.f32) for _ in range(lanes)] for _ in "xy"] if s.get("grad") else None
        k.tex(h, coords(tx.TEX_GEOMS, s["geom"], ct), geom=s["geom"], dtype=s["dtype"], ctype=ct,
              lod=sc.reg(ct) if s["lod"] else None, grad=grad, pred=g)
    elif op == "tld4":
        k.tld4(s["comp"], h, coords(tx.TEX_GEOMS, s["geom"], T.f32), geom=s["geom"], dtype=s["dtype"], pred=g)
    elif op == "txq":
        k.txq(s["query"], h, lod=sc.reg(T.s32) if s["lod"] else None, pred=g)
    elif op == "istypep":
        k.istypep(s["kind"], h, pred=g)
    elif op == "suld":
        k.suld(h, coords(tx.SURF_GEOMS, s["geom"], T.s32), geom=s["geom"], type=s["type"], vec=s["vec"],
               clamp=s["clamp"], cop=s["cop"], pred=g)
    elif op == "sust":
        t = T.lookup(s["type"])
        vals = sc.regs(T.b16 if t is T.b8 else t, s["vec"])
        k.sust(h, coords(tx.SURF_GEOMS, s["geom"], T.s32), vals if s["vec"] > 1 else vals[0], geom=s["geom"], type=t,
               clamp=s["clamp"], cop=s["cop"], formatted=s["formatted"], pred=g)
    elif op == "sured":
        t = T.lookup(s["type"])
        k.sured(s["red_op"], h, coords(tx.SURF_GEOMS, s["geom"], T.s32), sc.reg(t), geom=s["geom"], type=t, pred=g)
    else:
        k.suq(s["query"], h, pred=g)


def _emit_async_copy(sc: Scratch, s: Spec):
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    if op == "cp_async":
        size = s["size"]
        fill = s.get("fill")
        kw = {}
        if fill == "imm":
            kw["src_size"] = s.get("src_size", size)
        elif fill == "reg":
            kw["src_size"] = sc.reg(T.u32)
        elif fill == "ignore":
            kw["ignore_src"] = sc.p
        elif fill == "~ignore":
            kw["ignore_src"] = ~sc.p
        elif fill == "imm+ignore":  # illegal on purpose: both zero-fill forms
            kw["src_size"], kw["ignore_src"] = s["src_size"], sc.p
        if s.get("policy"):
            kw["cache_policy"] = k.createpolicy()
        dst = Addr(sc.s, s.get("dst_offset", 0))
        src = Addr(sc.g, s.get("src_offset", 0))
        k.cp_async(dst, src, size, cache=s.get("cache"), prefetch=s.get("prefetch"), pred=g, **kw)
    elif op == "commit":
        k.cp_async_commit(pred=g)
    elif op == "wait":
        k.cp_async_wait(s["n"])
    elif op == "wait_all":
        k.cp_async_wait_all()
    elif op == "mbarrier_arrive":
        space = s.get("space", "shared")
        k.cp_async_mbarrier_arrive(sc.g64 if s.get("wide") else sc.mb, noinc=s["noinc"], space=space, pred=g)
    elif op == "createpolicy":
        fraction = s["fraction"]  # a number, or the type of the register that holds it
        k.createpolicy(s["level"], sc.reg(T.lookup(fraction)) if isinstance(fraction, str) else fraction)
    elif op == "bulk_copy":
        size = s["size"] if s["size"] is not None else sc.reg(T.u32)
        mc = s.get("multicast")
        k.bulk_copy(sc.s, sc.g, size, sc.mb, dst_space=s.get("dst_space", "shared::cluster"),
                    multicast=sc.reg(T.b16) if mc == "reg" else mc, pred=g)
    elif op == "bulk_copy_to_cluster":
        size = s["size"] if s["size"] is not None else sc.reg(T.u32)
        k.bulk_copy_to_cluster(sc.s, sc.s, size, sc.mb, pred=g)
    elif op == "tensor_load":
        coords = [c if c is not None else sc.reg(T.s32) for c in s["coords"]]
        mc = s.get("multicast")
        k.tensor_load(sc.s, sc.tmap(), coords, sc.mb, multicast=sc.reg(T.b16) if mc == "reg" else mc,
                      dst_space=s.get("dst_space", "shared::cluster"), pred=g)
    elif op == "tensor_load_im2col":
        d = s["dims"]
        k.tensor_load_im2col(sc.s, sc.tmap(), [sc.reg(T.s32) for _ in range(d)], sc.mb,
                             [sc.reg(T.b16) for _ in range(d - 2)], multicast=s["multicast"], pred=g)
    elif op == "bulk_prefetch":
        size = s["size"] if s["size"] is not None else sc.reg(T.u32)
        policy = k.createpolicy() if s["policy"] else None
        k.bulk_prefetch(sc.g, size, policy=policy, pred=g)
    elif op == "bulk_store":
        size = s["size"] if s["size"] is not None else sc.reg(T.u32)
        k.bulk_store(sc.g, sc.s, size, pred=g)
    elif op == "tensor_store":
        coords = [c if c is not None else sc.reg(T.s32) for c in s["coords"]]
        k.tensor_store(sc.tmap(), coords, sc.s, pred=g)
    elif op == "bulk_reduce":
        size = s["size"] if s["size"] is not None else sc.reg(T.u32)
        policy = k.createpolicy() if s.get("policy") else None
        cluster = s["dst"] == "shared::cluster"
        k.bulk_reduce(sc.s if cluster else sc.g, sc.s, size, s["red_op"], s["type"], mbar=sc.mb if cluster else None,
                      policy=policy, pred=g)
    elif op == "tensor_reduce":
        policy = k.createpolicy() if s.get("policy") else None
        k.tensor_reduce(sc.tmap(), [c if c is not None else sc.reg(T.s32) for c in s["coords"]], sc.s, s["red_op"],
                        mode=s["mode"], policy=policy, pred=g)
    elif op == "tensormap_replace":
        field = s["field"]
        v = s["value"] if s["value"] != "reg" else sc.reg(TENSORMAP_FIELDS[field].type)
        k.tensormap_replace(sc.s if s["space"] == "shared::cta" else sc.g, field, v, ordinal=s["ordinal"],
                            space=s["space"], pred=g)
    elif op == "tensormap_cp_fenceproxy":
        k.tensormap_cp_fenceproxy(sc.g, sc.s, scope=s["scope"], pred=g)
    elif op == "tensor_prefetch":
        k.tensor_prefetch(sc.tmap(), [c if c is not None else sc.reg(T.s32) for c in s["coords"]], pred=g)
    elif op == "bulk_commit":
        k.bulk_commit(pred=g)
    elif op == "bulk_wait":
        k.bulk_wait(s["n"], read=s["read"], pred=g)
    else:
        raise ValueError(f"unknown async_copy op {op}")


def _emit_sync(sc: Scratch, s: Spec):
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    if op in ("bar_sync", "bar_arrive"):
        bid = s["id"] if s["id"] is not None else sc.reg(T.u32)
        count = s.get("count")
        if count == "reg":
            count = sc.reg(T.u32)
        if op == "bar_sync":
            k.bar_sync(bid, count, pred=g)
        else:
            k.bar_arrive(bid, count, pred=g)
    elif op == "bar_warp_sync":
        k.bar_warp_sync(s["mask"], pred=g)
    elif op == "fence":
        k.fence(s["kind"], addr=sc.g64 if s.get("addr") else None, pred=g)
    elif op == "mbarrier_init":
        k.mbarrier_init(sc.mb, s["count"], space=s["space"], pred=g)
    elif op == "mbarrier_arrive":
        k.mbarrier_arrive(sc.mb, count=s.get("count"), expect_tx=s.get("expect_tx"), space=s["space"],
                          state="_" if s.get("discard") else None, release=s.get("release", False),
                          no_complete=s.get("no_complete", False), sem=s.get("sem"), scope=s.get("scope"), pred=g)
    elif op == "mbarrier_expect_tx":
        k.mbarrier_expect_tx(sc.mb, s["nbytes"], scope=s.get("scope", "cta"), pred=g)
    elif op in ("mbarrier_test_wait", "mbarrier_try_wait"):
        phase = s["phase"] if s["parity"] else sc.reg(T.b64)
        if s["parity"] and phase is None:
            phase = sc.reg(T.u32)
        kw = {}
        if s.get("suspend") is not None:
            kw["suspend_ns"] = sc.reg(T.u32) if s["suspend"] == "reg" else s["suspend"]
        getattr(k, op)(sc.mb, phase, parity=s["parity"], sem=s.get("sem"), scope=s.get("scope"), pred=g, **kw)
    elif op == "mbarrier_complete_tx":
        k.mbarrier_complete_tx(sc.mb, s["nbytes"] if s["nbytes"] is not None else sc.reg(T.u32), pred=g)
    elif op == "mbarrier_arrive_drop":
        k.mbarrier_arrive_drop(sc.mb, count=s.get("count"), space=s["space"], state="_" if s.get("discard") else None,
                               no_complete=s.get("no_complete", False), pred=g)
    elif op == "mbarrier_pending_count":
        k.mbarrier_pending_count(sc.reg(T.b64), pred=g)
    elif op == "bar_red":
        k.bar_red(s["red_op"], ~sc.p if s.get("negate") else sc.p, 1, s.get("count"), pred=g)
    elif op == "griddepcontrol":
        k.griddepcontrol(s["action"], pred=g)
    elif op == "mbarrier_inval":
        k.mbarrier_inval(sc.mb, pred=g)
    elif op == "nanosleep":
        k.nanosleep(s["ns"] if s["ns"] is not None else sc.reg(T.u32), pred=g)
    elif op == "barrier_cluster":
        getattr(k, f"barrier_cluster_{s['kind']}")(sem=s["sem"], aligned=s["aligned"], pred=g)
    elif op == "mapa":
        addr = sc.s if s["space"] == "shared::cluster" else sc.g
        k.mapa(addr, s["rank"] if s["rank"] is not None else sc.reg(T.u32), space=s["space"], pred=g)
    elif op == "getctarank":
        k.getctarank(sc.g64 if s["wide"] else sc.s, space=s["space"], pred=g)
    else:
        raise ValueError(f"unknown sync op {op}")


def _mma_form(s: Spec):
    for f in MMA_FORMS:
        if (f.shape, f.a_type.name, f.b_type.name, f.c_type.name, f.bitop, f.d_type.name, f.layout) == (
                s["shape"], s["a_type"], s["b_type"], s["acc"], s.get("bitop"), s.get("d_type", s["acc"]),
                tuple(s.get("layout", ("row", "col")))):
            return f
    return None


def _emit_tensor(sc: Scratch, s: Spec):
    k, op = sc.k, s.op
    if op == "mma":
        f = _mma_form(s)
        ft = f.frag_type if f is not None else T.b32
        acc_t = f.acc_reg_type if f is not None else T.s32
        n_a = s.get("a_regs", f.a_regs if f else 4)
        n_b = s.get("b_regs", f.b_regs if f else 2)
        n_c = s.get("c_regs", f.c_regs if f else 4)
        a = sc.regs(T.lookup(s.get("frag_reg", ft.name)), n_a)
        b = sc.regs(ft, n_b)
        c = s["c"]
        c_t = f.c_reg_type if f is not None else acc_t
        if c == "zero":  # a constant accumulator: the builder materializes it
            c = 0
        if c == "regs":
            c = sc.regs(c_t, n_c)
        dst = None
        if c == "inplace":
            c = dst = sc.regs(acc_t, n_c)
        extra = {k_: s[k_] for k_ in ("d_type", "layout") if s.get(k_) is not None}
        k.mma(a, b, c, shape=s["shape"], a_type=s["a_type"], b_type=s["b_type"], acc=s["acc"],
              satfinite=s.get("satfinite", False), bitop=s.get("bitop"), dst=dst,
              pred=sc.guard(s.get("guard")), **extra)
    elif op in ("wmma_load", "wmma_store"):
        space = s["space"]
        addr = {"generic": sc.g64, "global": sc.g, "local": sc.reg(T.u64)}.get(space, sc.s)
        stride = sc.reg(T.u32) if s.get("stride") == "reg" else s.get("stride")
        if op == "wmma_load":
            k.wmma_load(s["which"], addr, shape=s["shape"], type=s["type"], layout=s["layout"], stride=stride,
                        space=space, pred=sc.guard(s.get("guard")))
        else:
            from ..isa.wmma import _acc_form, _acc_reg_type
            t = T.lookup(s["type"])
            n = _acc_form(s["shape"], t).acc[t]  # refuses a type without an accumulator form first
            frag = sc.regs(_acc_reg_type(t), n)
            k.wmma_store(addr, frag, shape=s["shape"], type=t, layout=s["layout"], stride=stride, space=space,
                         pred=sc.guard(s.get("guard")))
    elif op == "mma_sp":
        from ..isa.sparse import SPARSE_MMA, _acc_reg
        f = SPARSE_MMA.get((s["shape"], T.lookup(s["a_type"])))
        acc = T.lookup(s["acc"])
        acc_reg = _acc_reg(acc) if acc in (T.f32, T.f16, T.s32) else T.b32
        c = sc.regs(acc_reg, f.c_regs(acc) if f is not None else 4)
        k.mma_sp(sc.regs(T.b32, f.a_regs if f else 2), sc.regs(T.b32, f.b_regs if f else 2), c, sc.reg(T.b32),
                 shape=s["shape"],
                 a_type=s["a_type"], b_type=s["b_type"], acc=acc, selector=s["selector"], ordered=s["ordered"],
                 satfinite=s.get("satfinite", False), pred=sc.guard(s.get("guard")))
    elif op == "wmma_mma":
        from ..isa.wmma import _acc_reg_type, wmma_form
        f = wmma_form(s["shape"], T.lookup(s["type"]))
        d_t, c_t = T.lookup(s["acc"]), T.lookup(s["c_type"])
        a = sc.regs(f.frag_type, f.a_regs)
        b = sc.regs(f.frag_type, f.b_regs)
        c = sc.regs(_acc_reg_type(c_t) if c_t in (T.f16, T.f32, T.s32, T.f64) else T.b32, f.acc.get(c_t, 8))
        k.wmma_mma(a, b, c, shape=s["shape"], type=s["type"], acc=d_t, c_type=c_t, a_layout=s["a_layout"],
                   b_layout=s["b_layout"], satfinite=s["satfinite"], bitop=s["bitop"], rnd=s["rnd"],
                   pred=sc.guard(s.get("guard")))
    elif op == "setmaxnreg":
        with warnings.catch_warnings():  # the scratch kernel has no entry cap: the form is what is tested
            warnings.simplefilter("ignore", IgnoredInstructionWarning)
            k.setmaxnreg(s["action"], s["n"])
    elif op in ("wgmma", "wgmma_sp"):
        a_t = T.lookup(s["a_type"])
        acc = T.lookup(s["acc"])
        n = s["n"]
        d = sc.regs(T.f32 if acc is T.f32 else T.b32 if acc is T.f16 else T.s32,
                    s.get("d_regs", n // 2 if acc is not T.f16 else n // 4))
        bitop = "and" if a_t is T.b1 else None
        a = sc.regs(T.b32, 4) if s["a_regs"] else sc.reg(T.b64)
        k.wgmma_fence()
        if op == "wgmma_sp":
            k.wgmma_sp(a, sc.reg(T.b64), d, sc.reg(T.b32), selector=s["selector"], n=n, a_type=a_t, b_type=s["b_type"],
                       acc=acc, scale_d=sc.p, satfinite=s.get("satfinite", False))
        else:
            k.wgmma(a, sc.reg(T.b64), d, n=n, a_type=a_t, b_type=s["b_type"], acc=acc, scale_d=sc.p,
                    satfinite=s.get("satfinite", False), bitop=bitop)
        k.wgmma_commit()
        k.wgmma_wait(s.get("wait", 0))
    else:
        raise ValueError(f"unknown tensor op {op}")


def _emit_warp(sc: Scratch, s: Spec):
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    if op == "shfl":
        lane = s["lane"] if s["lane"] is not None else sc.reg(T.u32)
        mask = s["mask"] if s["mask"] != "reg" else sc.reg(T.b32)
        k.shfl(s["mode"], sc.reg(T.lookup(s["type"])), lane, clamp=s.get("clamp"), mask=mask,
               in_range=sc.reg(T.pred) if s.get("in_range") else None, pred=g)
    elif op == "vote":
        k.vote(s["mode"], ~sc.p if s.get("negate") else sc.p, pred=g)
    elif op == "redux":
        t = T.lookup(s["type"])
        k.redux(s["redux_op"], sc.reg(t), type=t, pred=g)
    elif op == "elect":
        k.elect_sync(lane=s.get("lane", False))
    elif op == "movmatrix":
        k.movmatrix(sc.reg(T.b32), pred=g)
    elif op == "match":
        t = T.lookup(s["type"])
        k.match(s["mode"], sc.reg(t), type=t, with_pred=s["with_pred"], pred=g)
    elif op == "activemask":
        k.activemask()
    else:
        raise ValueError(f"unknown warp op {op}")


def _emit_kernel(sc: Scratch, s: Spec):
    """Kernel-level mistakes (drawn only as illegal specs)."""
    k, op = sc.k, s.op
    if op == "foreign_register":
        other = KernelBuilder("other", target=sc.target)
        k.add(other.reg(T.u32), 1)
    elif op == "foreign_label":
        other = KernelBuilder("other", target=sc.target)
        k.bra(other.label("elsewhere"))
    elif op == "unplaced_label":
        k.bra(k.label("nowhere"))
        k.finish()
    elif op == "maxntid_and_reqntid":
        KernelBuilder("both", target=sc.target, maxntid=s["maxntid"], reqntid=s["reqntid"])
    elif op == "static_shared":
        k.shared("huge", s["nbytes"])
    else:
        raise ValueError(f"unknown kernel op {op}")


def _emit_integer(sc: Scratch, s: Spec):
    """Carry chains (op "carry", opcode add/addc/sub/subc/mad/madc) and dp4a/dp2a."""
    k, op, g = sc.k, s.op, sc.guard(s.get("guard"))
    imm = s.get("imm")
    if op == "carry":
        t = T.lookup(s["type"])
        opcode = s["opcode"]
        n = 3 if opcode in ("mad", "madc") else 2
        srcs = [imm if imm is not None and i == 1 else sc.reg(t) for i in range(n)]
        kw = {"type": t, "pred": g}
        if s.get("mode") is not None:
            kw["mode"] = s["mode"]
        if opcode in ("addc", "subc", "madc"):
            kw["cc"] = s["cc"]
        elif not s["cc"]:
            from ..isa.integer import carry
            carry(opcode, t, sc.reg(t), [sc.reg(t)] * n, cc=False)  # the validator's refusal, as a user meets it
            return
        method = getattr(k, {"add": "add_cc", "sub": "sub_cc", "mad": "mad_cc"}.get(opcode, opcode), None)
        if method is None or opcode not in ("add", "sub", "mad", "addc", "subc", "madc"):
            from ..isa.integer import carry
            carry(opcode, t, sc.reg(t), srcs, cc=s["cc"])  # an unknown opcode: the validator's refusal
            return
        method(*srcs, **kw)
    elif op in ("dp4a", "dp2a"):
        at, bt = T.lookup(s["a_type"]), T.lookup(s["b_type"])
        kw = {"mode": s["mode"]} if op == "dp2a" else {}
        c_t = T.s32 if T.s32 in (at, bt) else T.u32
        getattr(k, op)(sc.reg(at), imm if imm is not None else sc.reg(bt), sc.reg(c_t), a_type=at, b_type=bt,
                       pred=g, **kw)
    elif op == "video":
        from ..isa.video import VIDEO
        f = VIDEO.get(s["opcode"])
        at, bt = T.lookup(s["atype"]), T.lookup(s["btype"])
        simd = f is not None and f.simd
        b = imm if imm is not None and not simd else sc.reg(bt)
        c = None
        if simd or (f is not None and f.op == "mad") or s.get("op2") is not None:
            c = sc.reg(T.u32)
        k.video(s["opcode"], sc.reg(at), b, c, dtype=s["dtype"], atype=at, btype=bt, sat=s["sat"], op2=s["op2"],
                mode=s["mode"], cmp=s["cmp"], scale=s["scale"], pred=g)
    else:
        raise ValueError(f"unknown integer op {op}")


_EMITTERS = {
    "arith": _emit_arith, "bits": _emit_bits, "control": _emit_control, "convert": _emit_convert,
    "memory": _emit_memory, "async_copy": _emit_async_copy, "sync": _emit_sync, "tensor": _emit_tensor,
    "warp": _emit_warp, "kernel": _emit_kernel, "integer": _emit_integer,
}


def emit_spec(sc: Scratch, s: Spec) -> None:
    """Emit one drawn instruction (and the few helpers it needs) into a Scratch kernel."""
    _EMITTERS[s.family](sc, s)


def build_module(target, specs, name: str = "prop") -> Module:
    """A minimal kernel for `target` holding the drawn instructions, as a Module."""
    sc = Scratch(target, name)
    for s in specs:
        emit_spec(sc, s)
    return sc.module()
