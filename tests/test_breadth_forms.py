"""The instruction forms real kernels are written in beyond the core families: carry chains, dp4a/
dp2a, min/max .relu and .xorsign.abs, fma .relu, tanh, half-precision ex2, copysign, mad24, bmsk,
szext, fns, bfind.shiftamt, lop3 with a predicate, two-predicate and .ftz setp, set, slct, testp.

Each form is rendered exactly, every legal candidate of them assembles with ptxas (batched per
target), illegal ones are refused at the calling line, and the interpreter's results match Python
references written from the PTX ISA definitions.
"""

import math
import struct

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T
from ptxforge.testing import strategies as pst
from support.located import assert_located

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")

NT = 64


def _is_new(s) -> bool:
    """Whether a legal candidate exercises one of the forms this file covers."""
    if s.family == "integer":
        return True
    if s.family == "arith":
        return (s.op in ("mad24", "tanh", "copysign") or (s.op == "ex2" and s["type"] != "f32")
                or s.get("mode") == "relu" or any(f in ("relu", "xorsign.abs") for f in s.get("flags", ())))
    if s.family == "bits":
        return s.op in ("bmsk", "szext", "fns") or bool(s.get("shiftamt")) or s.get("combine") is not None
    if s.family == "control":
        return s.op in ("set", "slct", "testp", "stacksave", "stackrestore", "pmevent", "brkpt", "alloca") or bool(s.get("both")) or bool(
            s.get("ftz"))
    if s.family == "memory":
        return (s.op in ("ldu", "prefetchu", "discard", "applypriority", "isspacep", "createpolicy_range",
                         "createpolicy_cvt", "st_async", "red_async", "multimem", "tex", "tld4", "txq", "istypep",
                         "suld", "sust", "sured", "suq") or s.get("sem") is not None
                or s.get("scope") is not None or bool(s.get("policy")) or s.get("space") == "shared::cluster")
    if s.family == "sync":
        return (s.op in ("mbarrier_complete_tx", "mbarrier_arrive_drop", "mbarrier_pending_count", "bar_red",
                         "griddepcontrol") or s.get("suspend") is not None or "cluster" in str(s.get("kind")))
    if s.family == "warp":
        return s.op in ("match", "movmatrix") or bool(s.get("lane"))
    if s.family == "tensor":
        return s.op.startswith("wmma") or s.op == "mma_sp"
    if s.family == "convert":
        return s.op in ("cvt_narrow", "cvt_pack")
    if s.family == "async_copy":
        return s.op == "createpolicy" and isinstance(s["fraction"], str)  # the fraction in a register
    return False


def _chunks(xs, n):
    return [xs[i:i + n] for i in range(0, len(xs), n)]


@pytest.mark.parametrize("target", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_every_new_legal_form_assembles(target):
    specs = [s for fam in ("arith", "bits", "control", "integer", "memory", "sync", "warp", "tensor", "convert",
                           "async_copy") for s in pst.legal_candidates(target, fam) if _is_new(s)]
    assert len(specs) > 100
    for chunk in _chunks(specs, 400):
        module = pst.build_module(target, chunk)
        try:
            pf.assemble(module)
        except pf.AssemblyError as e:
            raise AssertionError(f"{target}: {e}") from e


def test_every_new_operation_has_legal_forms():
    """A form the validator or the builder cannot express would silently leave the legal pool."""
    ops = {(s.family, s.op) for fam in pst.FAMILIES for s in pst.legal_candidates("sm_90", fam) if _is_new(s)}
    want = {("memory", o) for o in ("ldu", "prefetchu", "discard", "applypriority", "isspacep", "createpolicy_range",
                                    "createpolicy_cvt", "st_async", "red_async", "multimem", "tex", "tld4", "txq",
                                    "istypep", "suld", "sust", "sured", "suq", "ld", "st", "atom", "red")}
    want |= {("sync", o) for o in ("mbarrier_complete_tx", "mbarrier_arrive_drop", "mbarrier_pending_count",
                                   "mbarrier_try_wait", "bar_red", "griddepcontrol", "fence")}
    want |= {("control", o) for o in ("set", "slct", "testp", "setp", "stacksave", "stackrestore", "pmevent", "brkpt",
                                      "alloca")}
    want |= {("bits", o) for o in ("bmsk", "szext", "fns", "bfind", "lop3")}
    want |= {("integer", o) for o in ("carry", "dp4a", "dp2a", "video")}
    want |= {("warp", o) for o in ("match", "movmatrix", "elect")}
    want |= {("tensor", o) for o in ("wmma_load", "wmma_store", "wmma_mma", "mma_sp")}
    want |= {("convert", o) for o in ("cvt_narrow", "cvt_pack")}
    want |= {("arith", o) for o in ("mad24", "tanh", "copysign", "ex2", "min", "max", "fma")}
    assert not want - ops, sorted(want - ops)
    multimem = {s["kind"] for s in pst.legal_candidates("sm_90", "memory") if s.op == "multimem"}
    assert multimem == {"ld_reduce", "st", "red"}


def test_late_opened_forms_are_in_the_drawn_pools():
    """Forms opened after the pools were written (atomics and orders on another CTA's shared memory, ld.volatile
    with an L2 prefetch size, a createpolicy fraction in a register) are drawn, so the property and differential
    tests reach them; the cluster's shared memory only from sm_90."""
    def drawn(target, family, op, **want):
        return [s for s in pst.legal_candidates(target, family)
                if s.op == op and all(s.get(k) == v for k, v in want.items())]
    assert drawn("sm_90", "memory", op="atom", space="shared::cluster", atom_op="cas")
    assert drawn("sm_90", "memory", op="red", space="shared::cluster", sem="release", scope="cluster")
    assert drawn("sm_90", "memory", op="ld", space="shared::cluster", sem="acquire", scope="cluster")
    assert drawn("sm_90", "memory", op="st", space="shared::cluster", sem="volatile")
    assert not [s for s in pst.legal_candidates("sm_80", "memory") if s.get("space") == "shared::cluster"]
    for target in ("sm_80", "sm_90"):
        assert drawn(target, "memory", op="ld", sem="volatile", hints=("L2::256B",))
        assert {s["fraction"] for s in drawn(target, "async_copy", op="createpolicy")} >= {"f32", "b32", 0.5}
        assert "u32" not in {s["fraction"] for s in drawn(target, "async_copy", op="createpolicy")}


def test_forms_by_target():
    """Forms that need a newer target are legal only there."""
    ops = {t: {(s.op, s.get("mode"), tuple(s.get("flags", ())), s.get("type"))
               for s in pst.legal_candidates(t, "arith") if _is_new(s)} for t in ("sm_80", "sm_86", "sm_90")}
    assert ("min", "relu", (), "s32") in ops["sm_90"] and ("min", "relu", (), "s32") not in ops["sm_86"]
    assert ("max", None, ("xorsign.abs",), "f32") in ops["sm_86"] - ops["sm_80"]
    assert ("tanh", None, (), "bf16") in ops["sm_90"] - ops["sm_86"]
    assert ("ex2", None, ("ftz",), "bf16x2") in ops["sm_90"] - ops["sm_86"]
    assert ("ex2", None, (), "f16x2") in ops["sm_80"]


# ---------------------------------------------------------------- rendering

def _body(fn, target="sm_90"):
    k = pf.KernelBuilder("t", target=target)
    fn(k)
    return k, [i.render() for i in k.finish().instructions[:-1]]


def test_rendering():
    def body(k):
        r, s_ = k.reg(pf.u32, "r"), k.reg(pf.s32, "s")
        f, g = k.reg(pf.f32, "f"), k.reg(pf.f32, "g")
        p = k.reg(pf.pred, "p")
        h = k.reg(pf.f16, "h")
        x = k.reg(pf.b32, "x")
        k.add_cc(r, r, dst=r)
        k.addc(r, 1, cc=True, dst=r)
        k.sub_cc(s_, s_, dst=s_)
        k.subc(s_, s_, dst=s_)
        k.mad_cc(r, r, r, mode="hi", dst=r)
        k.madc(r, r, r, cc=True, dst=r)
        k.dp4a(r, s_, r, dst=s_)
        k.dp2a(r, r, r, mode="lo", dst=r)
        k.mad24(s_, s_, s_, mode="hi", dst=s_)
        k.copysign(f, g, dst=f)
        k.tanh(f, dst=f)
        k.ex2(h, dst=h)
        k.ex2(x, type="bf16x2", flags=("ftz",), dst=x)
        k.fma(h, h, h, flags=("ftz", "relu"), dst=h)
        k.min(s_, 0, mode="relu", dst=s_)
        k.max(f, g, flags=("xorsign.abs", "NaN"), dst=f)
        k.bmsk(r, 8, mode="wrap", dst=r)
        k.szext(s_, 12, dst=s_)
        k.fns(r, 3, -1, dst=r)
        k.bfind(s_, shiftamt=True, dst=r)
        k.lop3(x, x, x, 0xE8, combine=("or", ~p), dst=x, pdst=p)
        k.setp("lt", f, g, ftz=True, both=True, dst=p, qdst=k.reg(pf.pred, "q"))
        k.setp("gt", s_, 0, both=True, combine=("xor", p), dst=p, qdst=k.reg(pf.pred, "q2"))
        k.set("le", f, g, to=pf.f32, combine=("and", p), dst=g)
        k.set("ne", s_, 4, dst=r)
        k.slct(r, 7, s_, dst=r)
        k.slct(f, g, f, ftz=True, dst=f)
        k.testp("notanumber", f, dst=p)
    k, lines = _body(body)
    assert lines == [
        "add.cc.u32      %r, %r, %r;",
        "addc.cc.u32     %r, %r, 1;",
        "sub.cc.s32      %s, %s, %s;",
        "subc.s32        %s, %s, %s;",
        "mad.hi.cc.u32   %r, %r, %r, %r;",
        "madc.lo.cc.u32  %r, %r, %r, %r;",
        "dp4a.u32.s32    %s, %r, %s, %r;",
        "dp2a.lo.u32.u32 %r, %r, %r, %r;",
        "mad24.hi.s32    %s, %s, %s, %s;",
        "copysign.f32    %f, %f, %g;",
        "tanh.approx.f32 %f, %f;",
        "ex2.approx.f16  %h, %h;",
        "ex2.approx.ftz.bf16x2 %x, %x;",
        "fma.rn.ftz.relu.f16 %h, %h, %h, %h;",
        "min.relu.s32    %s, %s, 0;",
        "max.NaN.xorsign.abs.f32 %f, %f, %g;",
        "bmsk.wrap.b32   %r, %r, 8;",
        "szext.clamp.s32 %s, %s, 12;",
        "fns.b32         %r, %r, 3, -1;",
        "bfind.shiftamt.s32 %r, %s;",
        "lop3.or.b32     %x|%p, %x, %x, %x, 232, !%p;",
        "setp.lt.ftz.f32 %p|%q, %f, %g;",
        "setp.gt.xor.s32 %p|%q2, %s, 0, %p;",
        "set.le.and.f32.f32 %g, %f, %g, %p;",
        "set.ne.u32.s32  %r, %s, 4;",
        "slct.u32.s32    %r, %r, 7, %s;",
        "slct.ftz.f32.f32 %f, %f, %g, %f;",
        "testp.notanumber.f32 %p, %f;",
    ]
    pf.assemble(k.module())


def test_versions_follow_the_forms():
    """bmsk/szext need PTX ISA 7.6, lop3 with a predicate 8.2, min.relu 8.0 on sm_90."""
    def version(fn, target="sm_80"):
        k = pf.KernelBuilder("v", target=target)
        fn(k)
        return str(k.module()).split(".version ")[1].split()[0]
    assert version(lambda k: k.bmsk(k.reg(pf.u32), 3)) == "7.6"
    assert version(lambda k: k.lop3(k.reg(pf.b32), 1, 2, 0x80, combine=("and", True))) == "8.2"
    assert version(lambda k: k.min(k.reg(pf.s32), 1, mode="relu"), "sm_90") == "8.0"
    with pytest.raises(pf.TargetError):
        version(lambda k: k.min(k.reg(pf.s32), 1, mode="relu"), "sm_80")


# ---------------------------------------------------------------- refusals

def test_refusals_name_the_line():
    k = pf.KernelBuilder("bad", target="sm_80")
    r, f, h = k.reg(pf.u32), k.reg(pf.f32), k.reg(pf.f16)
    cases = [
        (lambda: k.madc(r, r, r, mode="wide"), "madc-wide", ".lo or .hi"),  # <- madc-wide
        (lambda: k.add_cc(k.reg(pf.u16), 1), "cc-u16", ".u32, .s32"),  # <- cc-u16
        (lambda: k.fma(h, h, h, flags=("sat", "relu")), "sat-relu", "cannot be combined"),  # <- sat-relu
        (lambda: k.min(r, r, mode="relu"), "relu-u32", "only for .s32"),  # <- relu-u32
        (lambda: k.tanh(f, flags=("ftz",)), "tanh-ftz", "does not take .ftz"),  # <- tanh-ftz
        (lambda: k.ex2(k.reg(pf.b16), type="bf16"), "ex2-bf16", "only with .ftz"),  # <- ex2-bf16
        (lambda: k.lop3(r, r, r, 1, combine=("xor", True)), "lop3-xor", "'and' or 'or'"),  # <- lop3-xor
        (lambda: k.szext(k.reg(pf.s64), 3), "szext-64", ".u32, .s32"),  # <- szext-64
        (lambda: k.fns(r, 32, 1), "fns-base", "outside 0..31"),  # <- fns-base
        (lambda: k.setp("lt", r, r, ftz=True), "setp-ftz", "only to .f32"),  # <- setp-ftz
        (lambda: k.set("lt", f, f, to="f64"), "set-f64", "set writes"),  # <- set-f64
        (lambda: k.slct(r, r, r, ftz=True), "slct-ftz", ".f32 selector"),  # <- slct-ftz
        (lambda: k.testp("finite", r), "testp-u32", ".f32 or .f64"),  # <- testp-u32
        (lambda: k.dp2a(r, r, r, mode=None), "dp2a-mode", ".lo or .hi"),  # <- dp2a-mode
    ]
    for fn, marker, text in cases:
        with pytest.raises(pf.ValidationError) as info:
            fn()
        assert text in str(info.value), (marker, str(info.value))
        assert_located(info.value, "<- " + marker, __file__)


def test_min_relu_on_sm80_is_a_target_error():
    k = pf.KernelBuilder("t", target="sm_86")
    with pytest.raises(pf.TargetError):
        k.max(k.reg(pf.s32), 0, mode="relu")
    k2 = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.TargetError):
        k2.min(k2.reg(pf.f32), 0.0, flags=("xorsign.abs",))


# ---------------------------------------------------------------- the interpreter against references

def _probe(in_types, out_types, build, target="sm_90"):
    """Kernel: outs[j][tid] = build(k, *ins[tid])[j]; values travel as raw bits."""
    k = pf.KernelBuilder("p", target=target, reqntid=NT)
    ins = [k.param_ptr(f"in{i}", pf.b8) for i in range(len(in_types))]
    outs = [k.param_ptr(f"out{j}", pf.b8) for j in range(len(out_types))]
    tid = k.tid()
    vals = []
    for p, t in zip(ins, in_types):
        t = T.lookup(t)
        if t.is_pred:
            b = k.ld(k.add(p, k.cvt(tid, "u64")), type=pf.u8)
            vals.append(k.setp("ne", b, 0, type=pf.u32))
            continue
        lt = T.lookup(f"b{t.bits}")
        vals.append(k.ld(k.add(p, k.mul(tid, t.bits // 8, mode="wide")), type=lt,
                         dst=k.reg(T.decl_type(t) if t is not T.bf16 else T.b16)))
    res = build(k, *vals)
    res = res if isinstance(res, tuple) else (res,)
    for p, t, r in zip(outs, out_types, res):
        t = T.lookup(t)
        if t.is_pred:
            r, t = k.selp(1, 0, r, type=pf.u32), T.u32
        k.st(k.add(p, k.mul(tid, t.bits // 8, mode="wide")), r, type=T.lookup(f"b{t.bits}"))
    return k.module()


_NP = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _run(in_types, out_types, build, inputs, target="sm_90"):
    mod = _probe(in_types, out_types, build, target)
    pf.assemble(mod)
    outs = [np.zeros(NT, _NP[T.lookup(t).bits if not T.lookup(t).is_pred else 32]) for t in out_types]
    interp.run(mod, block=NT, args=[np.asarray(a) for a in inputs] + outs)
    return outs


def _words(rng, bits, n=NT):
    v = rng.integers(0, 2 ** 63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n).astype(np.uint64)
    v = v.astype(_NP[bits]) if bits < 64 else v
    edges = [0, 1, (1 << bits) - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1]
    v[:len(edges)] = edges
    return v


def test_carry_chains_add_subtract_and_multiply_128_bit_numbers():
    rng = np.random.default_rng(1)
    a = [_words(rng, 32) for _ in range(4)]
    b = [_words(rng, 32) for _ in range(4)]
    b[0][5:10] = 0xFFFFFFFF
    a[1][5:10] = 0xFFFFFFFF

    def add(k, *w):
        x, y = w[:4], w[4:]
        out = [k.add_cc(x[0], y[0])]
        out += [k.addc(x[i], y[i], cc=True) for i in (1, 2)]
        out.append(k.addc(x[3], y[3]))
        return tuple(out)

    def sub(k, *w):
        x, y = w[:4], w[4:]
        out = [k.sub_cc(x[0], y[0])]
        out += [k.subc(x[i], y[i], cc=True) for i in (1, 2)]
        out.append(k.subc(x[3], y[3]))
        return tuple(out)

    def mul(k, x0, x1, y0, y1):
        # the 64-bit product of two 64-bit numbers' low words, from 32-bit pieces with mad.cc/madc
        lo = k.mul(x0, y0)
        hi = k.mul(x0, y0, mode="hi")
        hi = k.mad(x0, y1, hi)
        hi = k.mad(x1, y0, hi)
        t0 = k.mad_cc(x0, y0, 0, mode="lo")
        t1 = k.madc(x0, y0, 0, mode="hi")
        return lo, hi, t0, t1

    def num(ws, i):
        return sum(int(w[i]) << (32 * j) for j, w in enumerate(ws))

    got = _run(("u32",) * 8, ("u32",) * 4, add, a + b)
    for i in range(NT):
        assert num(got, i) == (num(a, i) + num(b, i)) % (1 << 128), i
    got = _run(("u32",) * 8, ("u32",) * 4, sub, a + b)
    for i in range(NT):
        assert num(got, i) == (num(a, i) - num(b, i)) % (1 << 128), i
    got = _run(("u32",) * 4, ("u32",) * 4, mul, [a[0], a[1], b[0], b[1]])
    for i in range(NT):
        x, y = num(a[:2], i), num(b[:2], i)
        assert num(got[:2], i) == (x * y) % (1 << 64), i
        p = int(a[0][i]) * int(b[0][i])
        assert (int(got[2][i]), int(got[3][i])) == (p & 0xFFFFFFFF, p >> 32), i  # + 0, carry 0


def test_signed_64_bit_carry():
    rng = np.random.default_rng(2)
    a, b = _words(rng, 64), _words(rng, 64)
    got = _run(("s64", "s64"), ("s64", "s64"), lambda k, x, y: (k.add_cc(x, y), k.addc(x, 0, type="s64")), [a, b])
    for i in range(NT):
        s = int(a[i]) + int(b[i])
        assert int(got[0][i]) == s % (1 << 64)
        assert int(got[1][i]) == (int(a[i]) + (s >> 64)) % (1 << 64)


def _sx(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def test_dp4a_and_dp2a():
    rng = np.random.default_rng(3)
    a, b, c = (_words(rng, 32) for _ in range(3))
    for at in ("u32", "s32"):
        for bt in ("u32", "s32"):
            def build(k, x, y, z, at=at, bt=bt):
                return (k.dp4a(x, y, z, a_type=at, b_type=bt), k.dp2a(x, y, z, a_type=at, b_type=bt, mode="lo"),
                        k.dp2a(x, y, z, a_type=at, b_type=bt, mode="hi"))
            got = _run(("u32", "u32", "u32"), ("u32",) * 3, build, [a, b, c])
            for i in range(NT):
                x, y, z = int(a[i]), int(b[i]), int(c[i])
                ex = (lambda v, w: _sx(v >> (8 * w), 8)) if at == "s32" else (lambda v, w: (v >> (8 * w)) & 0xFF)
                ey = (lambda v, w: _sx(v >> (8 * w), 8)) if bt == "s32" else (lambda v, w: (v >> (8 * w)) & 0xFF)
                hx = (lambda v, w: _sx(v >> (16 * w), 16)) if at == "s32" else (lambda v, w: (v >> (16 * w)) & 0xFFFF)
                zc = _sx(z, 32) if "s32" in (at, bt) else z
                d4 = zc + sum(ex(x, j) * ey(y, j) for j in range(4))
                lo = zc + hx(x, 0) * ey(y, 0) + hx(x, 1) * ey(y, 1)
                hi = zc + hx(x, 0) * ey(y, 2) + hx(x, 1) * ey(y, 3)
                assert [int(g[i]) for g in got] == [d4 & 0xFFFFFFFF, lo & 0xFFFFFFFF, hi & 0xFFFFFFFF], (at, bt, i)


def test_bit_field_masks_extensions_and_searches():
    rng = np.random.default_rng(4)
    a = _words(rng, 32)
    n = rng.integers(0, 40, NT).astype(np.uint32)
    off = rng.integers(-34, 34, NT).astype(np.int32).view(np.uint32)
    base = rng.integers(0, 32, NT).astype(np.uint32)

    def build(k, x, w, o, bs):
        return (k.bmsk(bs, w, mode="clamp"), k.bmsk(bs, w, mode="wrap"), k.szext(x, w, type="s32"),
                k.szext(x, w, type="u32", mode="wrap"), k.fns(x, bs, o), k.bfind(x, shiftamt=True),
                k.bfind(x, type="s32", shiftamt=True))
    got = _run(("u32",) * 4, ("u32",) * 7, build, [a, n, off, base])

    def bmsk(s, w, wrap):
        s, w = (s & 31, w & 31) if wrap else (min(s, 32), min(w, 32))
        return (((1 << w) - 1) << s) & 0xFFFFFFFF if s < 32 else 0

    def szext(v, w, signed, wrap):
        w = w & 31 if wrap else min(w, 32)
        if w == 0:
            return 0
        v &= (1 << w) - 1
        return (_sx(v, w) if signed else v) & 0xFFFFFFFF

    def fns(mask, b, o):
        o = _sx(o, 32)
        bits = [i for i in range(32) if mask >> i & 1]
        if o == 0:
            return b if b in bits else 0xFFFFFFFF
        cand = [i for i in bits if i >= b] if o > 0 else [i for i in reversed(bits) if i <= b]
        return cand[abs(o) - 1] if abs(o) <= len(cand) else 0xFFFFFFFF

    def shiftamt(v, signed):
        if signed and v >> 31:
            v = ~v & 0xFFFFFFFF
        return 31 - (v.bit_length() - 1) if v else 0xFFFFFFFF

    for i in range(NT):
        x, w, o, b = int(a[i]), int(n[i]), int(off[i]), int(base[i])
        want = [bmsk(b, w, False), bmsk(b, w, True), szext(x, w, True, False), szext(x, w, False, True),
                fns(x, b, o), shiftamt(x, False), shiftamt(x, True)]
        assert [int(g[i]) for g in got] == want, (i, x, w, o, b)


def test_lop3_predicate_and_two_predicate_setp():
    rng = np.random.default_rng(5)
    a, b = _words(rng, 32), _words(rng, 32)
    a[10:20] = b[10:20]
    q = rng.integers(0, 2, NT).astype(np.uint8)

    def build(k, x, y, p):
        d, pa = k.lop3(x, y, 0, 0x3C, combine=("and", p))  # a ^ b
        _, po = k.lop3(x, y, 0, 0x3C, combine=("or", ~p))
        lt, ge = k.setp("lt", x, y, type="s32", both=True)
        c1, c2 = k.setp("eq", x, y, both=True, combine=("and", p))
        return d, pa, po, lt, ge, c1, c2
    got = _run(("u32", "u32", "pred"), ("u32", "pred", "pred", "pred", "pred", "pred", "pred"), build, [a, b, q])
    for i in range(NT):
        x, y, p = int(a[i]), int(b[i]), bool(q[i])
        d = x ^ y
        lt = _sx(x, 32) < _sx(y, 32)
        eq = x == y
        want = [d, int(d != 0 and p), int(d != 0 or not p), int(lt), int(not lt), int(eq and p), int(not eq and p)]
        assert [int(g[i]) for g in got] == want, i


def _f32(rng):
    v = (rng.standard_normal(NT) * 10.0 ** rng.integers(-3, 4, NT)).astype(np.float32)
    v[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 1.5]
    return v


def test_set_slct_testp_copysign():
    rng = np.random.default_rng(6)
    x, y = _f32(rng), _f32(rng)
    y[20:30] = x[20:30]
    s = rng.integers(-5, 5, NT).astype(np.int32)

    def build(k, a, b, c):
        return (k.set("lt", a, b), k.set("ge", a, b, to="f32", ftz=True), k.slct(a, b, c), k.slct(c, 7, a),
                k.slct(c, 7, a, ftz=True), k.testp("normal", a), k.testp("subnormal", a), k.testp("finite", a),
                k.copysign(a, b), k.setp("lt", a, b, ftz=True))
    outs = ("u32", "f32", "f32", "s32", "s32", "pred", "pred", "pred", "f32", "pred")
    got = _run(("f32", "f32", "s32"), outs, build, [x.view(np.uint32), y.view(np.uint32), s.view(np.uint32)])
    tiny = np.finfo(np.float32).tiny

    def ftz(v):
        return 0.0 * math.copysign(1, v) if v != 0 and abs(v) < tiny else v
    for i in range(NT):
        a, b, c = float(x[i]), float(y[i]), int(s[i])
        bits = lambda v: struct.unpack("<I", struct.pack("<f", v))[0]
        want = [0xFFFFFFFF if a < b else 0, bits(1.0) if ftz(a) >= ftz(b) else 0,
                bits(a) if c >= 0 else bits(b), c if a >= 0 else 7, c if ftz(a) >= 0 else 7,
                # testp.normal holds for zeros too (measured on an H100, sm_90), not for subnormals
                int(math.isfinite(a) and (abs(a) >= tiny or a == 0)), int(a != 0 and abs(a) < tiny),
                int(math.isfinite(a)),
                (bits(b) & 0x7FFFFFFF) | (bits(a) & 0x80000000), int(ftz(a) < ftz(b))]
        assert [int(g[i]) for g in got] == [w & 0xFFFFFFFF for w in want], (i, a, b, c)


def test_min_max_relu_xorsign_and_fma_relu():
    rng = np.random.default_rng(7)
    x, y = _f32(rng), _f32(rng)
    si, sj = _words(rng, 32).view(np.int32), _words(rng, 32).view(np.int32)
    hx = (rng.standard_normal(NT) * 4).astype(np.float16)
    hy = (rng.standard_normal(NT) * 4).astype(np.float16)

    def build(k, a, b, i, j, h, g):
        return (k.min(a, b, flags=("xorsign.abs",)), k.max(a, b, flags=("xorsign.abs", "NaN")),
                k.min(i, j, mode="relu"), k.max(i, j, mode="relu"), k.fma(h, g, h, flags=("relu",)),
                k.max(h, g, flags=("xorsign.abs",)))
    got = _run(("f32", "f32", "s32", "s32", "f16", "f16"), ("f32", "f32", "s32", "s32", "f16", "f16"), build,
               [x.view(np.uint32), y.view(np.uint32), si.view(np.uint32), sj.view(np.uint32), hx.view(np.uint16),
                hy.view(np.uint16)])
    f = [g.view(np.float32) for g in got[:2]]
    for i in range(NT):
        a, b = float(x[i]), float(y[i])
        sign = -1.0 if (math.copysign(1, a) < 0) != (math.copysign(1, b) < 0) else 1.0
        if not (math.isnan(a) or math.isnan(b)):
            assert f[0][i] == sign * min(abs(a), abs(b)), i
            assert f[1][i] == sign * max(abs(a), abs(b)), i
        else:
            assert math.isnan(f[1][i]), i
        ii, jj = int(si[i]), int(sj[i])
        assert int(got[2].view(np.int32)[i]) == max(min(ii, jj), 0)
        assert int(got[3].view(np.int32)[i]) == max(ii, jj, 0)
        h, g = float(hx[i]), float(hy[i])
        assert got[4].view(np.float16)[i] == np.float16(max(h * g + h, 0.0)), i
        hs = -1.0 if (h < 0) != (g < 0) else 1.0
        assert got[5].view(np.float16)[i] == np.float16(hs * max(abs(h), abs(g))), i


def test_tanh_ex2_half_and_mad24():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(NT) * 2).astype(np.float32)
    h = (rng.standard_normal(NT) * 2).astype(np.float16)
    a, b, c = _words(rng, 32), _words(rng, 32), _words(rng, 32)

    def build(k, f, hh, i, j, l):
        return k.tanh(f), k.ex2(hh), k.tanh(hh), k.mad24(i, j, l, type="s32"), k.mad24(i, j, l, mode="hi")
    got = _run(("f32", "f16", "u32", "u32", "u32"), ("f32", "f16", "f16", "u32", "u32"), build,
               [x.view(np.uint32), h.view(np.uint16), a, b, c])
    assert np.allclose(got[0].view(np.float32), np.tanh(x), rtol=2 ** -10, atol=1e-6)
    assert np.allclose(got[1].view(np.float16).astype(np.float64), np.exp2(h.astype(np.float64)), rtol=2 ** -9)
    assert np.allclose(got[2].view(np.float16).astype(np.float64), np.tanh(h.astype(np.float64)), rtol=2 ** -9,
                       atol=1e-3)
    for i in range(NT):
        p = _sx(int(a[i]), 24) * _sx(int(b[i]), 24)
        assert int(got[3][i]) == (p + int(c[i])) & 0xFFFFFFFF
        pu = (int(a[i]) & 0xFFFFFF) * (int(b[i]) & 0xFFFFFF)
        assert int(got[4][i]) == ((pu >> 16) + int(c[i])) & 0xFFFFFFFF


def test_memory_order_and_cache_rendering():
    def body(k):
        g = k.param_ptr("g", pf.u32)
        r = k.reg(pf.u32, "r")
        pol = k.createpolicy()
        k.ld(g, type=pf.u32, sem="acquire", scope="gpu", dst=r)
        k.ld(g, type=pf.u32, sem="volatile", dst=r)
        k.st(g, r, sem="release", scope="cluster")
        k.st(g, r, policy=pol, hints=("L1::no_allocate",))
        k.ld(g, type=pf.u32, hints=("L2::128B",), policy=pol, dst=r)
        k.atom("add", g, r, sem="acq_rel", scope="sys", dst=r)
        k.atom("add", g, r, scope="gpu", policy=pol, dst=r)
        k.red("add", g, r, sem="release", scope="cta")
        k.ldu(g, type=pf.u32, vec=2)
        k.prefetchu(k.cvta(g, frm="global"))
        k.discard(g)
        k.applypriority(g)
        k.isspacep(k.cvta(g, frm="global", dst=k.reg(pf.u64, "gen")), "shared::cta")
        k.fence("fence.acq_rel.cluster")
        k.griddepcontrol("wait")
        k.match("all", r, with_pred=True)
        k.elect_sync(lane=True)
        sp = k.stacksave()
        k.stackrestore(sp)
        p = k.reg(pf.pred, "p")
        k.bar_red("popc", ~p, 1, 64)
        k.createpolicy_range(g, 256, 8192, primary="L2::evict_first", secondary="L2::evict_unchanged",
                             space="global")
        k.createpolicy_cvt(k.reg(pf.b64, "prop"))
    k, lines = _body(body)
    text = "\n".join(lines)
    for want in ["ld.acquire.gpu.global.u32 %r, [%g];", "ld.volatile.global.u32 %r, [%g];",
                 "st.release.cluster.global.u32 [%g], %r;", "st.global.L1::no_allocate.L2::cache_hint.u32 [%g], %r, %rd",
                 "ld.global.L2::cache_hint.L2::128B.u32 %r, [%g], %rd", "atom.acq_rel.sys.global.add.u32 %r, [%g], %r;",
                 "atom.gpu.global.add.L2::cache_hint.u32 %r, [%g], %r, %rd", "red.release.cta.global.add.u32 [%g], %r;",
                 "ldu.global.v2.u32 {%r", "prefetchu.L1    [%rd", "discard.global.L2 [%g], 128;",
                 "applypriority.global.L2::evict_normal [%g], 128;", "isspacep.shared::cta %p", "fence.acq_rel.cluster;",
                 "griddepcontrol.wait;", "match.all.sync.b32 %r", "elect.sync      %r", "stacksave.u64   %rd",
                 "stackrestore.u64 %rd", "bar.red.popc.u32 %r",
                 "createpolicy.range.global.L2::evict_first.L2::evict_unchanged.b64 %rd", "[%g], 256, 0x2000;",
                 "createpolicy.cvt.L2.b64 %rd"]:
        assert want in text, (want, text)
    assert "1, 64, !%p;" in text
    pf.assemble(k.module())


def test_memory_order_refusals():
    k = pf.KernelBuilder("bad", target="sm_80")
    g = k.param_ptr("g", pf.u32)
    r = k.reg(pf.u32)
    sh, pol = k.shared_base(k.shared("s", 64)), k.createpolicy()
    cases = [
        (lambda: k.ld(g, type=pf.u32, sem="relaxed"), "no-scope", "needs a scope"),  # <- no-scope
        (lambda: k.ld(g, type=pf.u32, sem="release", scope="gpu"), "ld-release", "memory orders"),  # <- ld-release
        (lambda: k.ld(g, type=pf.u32, sem="volatile", cop="cg"), "vol-cg", "cannot be combined"),  # <- vol-cg
        (lambda: k.st(k.reg(pf.u64), r, space="local", sem="relaxed", scope="cta"), "local", ".local"),  # <- local
        (lambda: k.red("add", g, r, sem="acquire", scope="gpu"), "red-acq", "memory orders"),  # <- red-acq
        (lambda: k.ld(sh, type=pf.u32, space="shared", policy=pol), "pol-shared", "applies to .global"),  # <- pol-shared
        (lambda: k.discard(g, space="shared"), "discard", "address"),  # <- discard
        (lambda: k.isspacep(g, "texture"), "isspacep", "isspacep tests"),  # <- isspacep
        (lambda: k.match("any", r, with_pred=True), "match-any-p", "only match.all"),  # <- match-any-p
        (lambda: k.bar_red("xor", k.reg(pf.pred)), "bar-red-xor", "bar.red reduces"),  # <- bar-red-xor
    ]
    for fn, marker, text in cases:
        with pytest.raises(pf.ValidationError) as info:
            fn()
        assert text in str(info.value), (marker, str(info.value))
        assert_located(info.value, "<- " + marker, __file__)
    with pytest.raises(pf.TargetError):
        k.ld(g, type=pf.u32, sem="acquire", scope="cluster")
    with pytest.raises(pf.TargetError):
        k.griddepcontrol("wait")


def test_match_isspacep_ldu_on_the_interpreter():
    rng = np.random.default_rng(9)
    vals = rng.integers(0, 4, NT).astype(np.uint32)
    vals[32:] = 7  # the second warp agrees

    def build(k, v):
        anym = k.match("any", v)
        allm, agree = k.match("all", v, with_pred=True)
        sh = k.shared("buf", 16)
        gen = k.cvta(k.cvt(k.shared_base(sh), "u64"), frm="shared", dst=k.reg(pf.u64))
        return anym, allm, agree, k.isspacep(gen, "shared"), k.isspacep(gen, "global")
    got = _run(("u32",), ("u32", "u32", "pred", "pred", "pred"), build, [vals])
    for i in range(NT):
        w = i // 32 * 32
        same = sum(1 << (j - w) for j in range(w, w + 32) if vals[j] == vals[i])
        everyone = all(vals[j] == vals[w] for j in range(w, w + 32))
        assert [int(g[i]) for g in got] == [same, 0xFFFFFFFF if everyone else 0, int(everyone), 1, 0], i
    data = rng.integers(0, 1 << 32, 4, dtype=np.uint64).astype(np.uint32)
    k = pf.KernelBuilder("u", target="sm_80", reqntid=32)
    src, out = k.param_ptr("src", pf.u32), k.param_ptr("out", pf.u32)
    v = k.ldu(src, type=pf.u32, vec=4)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.add(k.add(v[0], v[1]), k.add(v[2], v[3])))
    res = np.zeros(32, np.uint32)
    interp.run(k.module(), block=32, args=[data, res])
    assert (res == np.uint32(int(data.astype(np.uint64).sum()) & 0xFFFFFFFF)).all()


def test_arrive_drop_and_complete_tx_on_the_interpreter():
    """Two warps arrive; one drops out, so the next phase completes with one arrival.  A
    complete_tx of the expected bytes stands in for a copy."""
    k = pf.KernelBuilder("mb", target="sm_90", reqntid=64)
    out = k.param_ptr("out", pf.u32)
    bar = k.shared("bar", 8, 8)
    mb = k.shared_base(bar)
    tid = k.tid()
    first = k.setp("eq", tid, 0)
    k.mbarrier_init(mb, 2, pred=first)
    k.bar_sync()
    warp = k.shr(tid, 5)
    leader = k.setp("eq", k.and_(tid, 31), 0)
    k.mbarrier_arrive_drop(mb, state="_", pred=k.and_(leader, k.setp("eq", warp, 1)))
    k.mbarrier_arrive(mb, expect_tx=128, pred=k.and_(leader, k.setp("eq", warp, 0)))
    k.mbarrier_complete_tx(mb, 128, pred=k.and_(leader, k.setp("eq", warp, 0)))
    k.mbarrier_wait(mb, 0)
    # phase 1 now expects one arrival: warp 0 alone completes it
    k.mbarrier_arrive(mb, state="_", pred=k.and_(leader, k.setp("eq", warp, 0)))
    k.mbarrier_wait(mb, 1)
    k.st(k.add(out, k.mul(tid, 4, mode="wide")), k.add(tid, 1))
    res = np.zeros(NT, np.uint32)
    pf.assemble(k.module())
    interp.run(k.module(), block=NT, args=[res])
    assert (res == np.arange(1, NT + 1)).all()


def test_wmma_covers_every_shape_and_type():
    from ptxforge.isa.wmma import WMMA_FORMS
    legal = pst.legal_candidates("sm_80", "tensor")
    mma = {(s["shape"], s["type"], s["acc"], s["c_type"]) for s in legal if s.op == "wmma_mma"}
    want = {(sh, t.name, d.name, c.name) for (sh, t), f in WMMA_FORMS.items() for d in f.acc for c in f.acc
            if t is T.f16 or d is c}
    assert mma == want
    loads = {(s["which"], s["shape"], s["type"]) for s in legal if s.op == "wmma_load"}
    assert {(w, sh, t.name) for (sh, t) in WMMA_FORMS for w in "ab"} <= loads
    stores = {(s["shape"], s["type"]) for s in legal if s.op == "wmma_store"}
    assert stores == {(sh, acc.name) for (sh, _), f in WMMA_FORMS.items() for acc in f.acc}
    # sub-byte and single-bit A fragments are row-major only
    assert not [s for s in legal if s.op == "wmma_load" and s["type"] in ("s4", "u4", "b1") and s["which"] == "a"
                and s["layout"] == "col"]


def test_wmma_rendering_and_refusals():
    k = pf.KernelBuilder("w", target="sm_80")
    g = k.param_ptr("g", pf.f16)
    a = k.wmma_load("a", g, shape="m16n16k16", type="f16", space="global", stride=16)
    b = k.wmma_load("b", g, shape="m16n16k16", type="f16", layout="col", space="global")
    c = k.wmma_load("c", g, shape="m16n16k16", type="f32", space="global", stride=16)
    d = k.wmma_mma(a, b, c, shape="m16n16k16", type="f16", acc="f32")
    k.wmma_store(g, d, shape="m16n16k16", type="f32", space="global", stride=16)
    x = k.wmma_load("a", g, shape="m8n8k128", type="b1", space="global")
    y = k.wmma_load("c", g, shape="m8n8k128", type="s32", space="global")
    k.wmma_mma(x, x, y, shape="m8n8k128", type="b1", bitop="and.popc")
    lines = [i.render() for i in k.finish().instructions[:-1]]
    text = "\n".join(lines)
    assert "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r" in text and "], 16;" in text
    assert "wmma.load.b.sync.aligned.col.m16n16k16.global.f16" in text
    assert "wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%f" in text
    assert "wmma.store.d.sync.aligned.row.m16n16k16.global.f32 [%g], {%f" in text
    assert "wmma.mma.and.popc.sync.aligned.row.col.m8n8k128.s32.b1.b1.s32" in text
    assert len(a) == 8 and len(c) == 8 and len(x) == 1 and len(y) == 2
    pf.assemble(k.module())
    f = k.reg(pf.f32)
    cases = [
        (lambda: k.wmma_load("a", g, shape="m16n16k8", type="f16"), "shape", "no m16n16k8 form"),  # <- shape
        (lambda: k.wmma_load("a", g, shape="m8n8k32", type="s4", layout="col"), "s4-col", "layout row"),  # <- s4-col
        (lambda: k.wmma_mma(a, b, c, shape="m16n16k16", type="f16", acc="f32", satfinite=True), "sat",
         "no .satfinite"),  # <- sat
        (lambda: k.wmma_mma(a, b, [f] * 8, shape="m16n16k16", type="s8"), "count", "needs 2 registers"),  # <- count
        (lambda: k.wmma_store(g, [f] * 8, shape="m16n16k16", type="s32"), "kind", "integer registers"),  # <- kind
    ]
    for fn, marker, text in cases:
        with pytest.raises(pf.ValidationError) as info:
            fn()
        assert text in str(info.value), (marker, str(info.value))
    assert_located(pytest.raises(pf.ValidationError, cases[1][0]).value, "<- s4-col", __file__)


def test_scalar_video_instructions_on_the_interpreter():
    rng = np.random.default_rng(10)
    a, b, c = _words(rng, 32), _words(rng, 32), _words(rng, 32)
    b[::3] = rng.integers(0, 40, len(b[::3]))  # small shift amounts too

    def build(k, x, y, z):
        return (k.video("vadd", x, y, dtype="s32", atype="s32", btype="u32", sat=True),
                k.video("vsub", x, y, z, op2="min"), k.video("vabsdiff", x, y, atype="s32", btype="s32"),
                k.video("vmax", x, y, z, dtype="s32", atype="s32", btype="s32", op2="add"),
                k.video("vshl", x, y, mode="clamp", sat=True), k.video("vshr", x, y, atype="s32", dtype="s32",
                                                                      mode="wrap"),
                k.video("vmad", x, y, z, atype="s32", btype="u32", dtype="s32", sat=True, scale="shr15"),
                k.video("vset", x, y, z, atype="s32", btype="s32", cmp="lt", op2="add"))
    got = _run(("u32",) * 3, ("u32",) * 8, build, [a, b, c])

    def clamp(v, signed):
        return max(-(1 << 31), min(v, (1 << 31) - 1)) if signed else max(0, min(v, (1 << 32) - 1))

    def low34(v):  # vshl .sat first keeps the ISA's 34-bit signed result
        v &= (1 << 34) - 1
        return v - (1 << 34) if v >> 33 else v

    for i in range(NT):
        x, y, z = int(a[i]), int(b[i]), int(c[i])
        sx, sy, sz = _sx(x, 32), _sx(y, 32), _sx(z, 32)
        d = (x - y) & 0xFFFFFFFF  # vsub .min: the low 32 bits with bit 31 copied into bit 32, against c (u32)
        # (the vsub, vshl and vmad rules as an H100, sm_90, computes them; vmad extends every source by sign)
        want = [clamp(sx + y, True), min(d | (d >> 31) << 32, z), abs(sx - sy), max(sx, sy) + sz,
                clamp(low34(x << min(y, 32)), False), sx >> (y & 31),
                clamp((sx * sy + sz) >> 15, True), int(sx < sy) + z]
        assert [int(g[i]) for g in got] == [w & 0xFFFFFFFF for w in want], i


def _fp8_table(fmt):
    """Every finite fp8 code of a format and its value, from the format's definition."""
    eb, mb, bias = (4, 3, 7) if fmt == "e4m3x2" else (5, 2, 15)
    out = {}
    for code in range(128):
        e, m = code >> mb, code & ((1 << mb) - 1)
        if fmt == "e4m3x2" and e == 15 and m == 7:
            continue
        if fmt == "e5m2x2" and e == 31:
            continue
        out[code] = (m / (1 << mb)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mb)) * 2.0 ** (e - bias)
    return out


def _nearest(x, table):
    """The code nearest to |x| (ties to the even code), saturating at the largest value."""
    best = min(table, key=lambda c: (abs(table[c] - abs(x)), c & 1))
    return best


def test_fp8_and_tf32_conversions_on_the_interpreter():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(NT) * 10.0 ** rng.integers(-3, 4, NT)).astype(np.float32)
    y = (rng.standard_normal(NT) * 10.0 ** rng.integers(-3, 5, NT)).astype(np.float32)
    x[:6] = [0.0, -0.0, 1e6, -1e6, 0.001953125, 448.0]

    def build(k, a, b):
        return (k.cvt_narrow(a, b, to="e4m3x2"), k.cvt_narrow(a, b, to="e5m2x2", relu=True),
                k.cvt_narrow(a, to="tf32"), k.cvt_narrow(a, to="tf32", rnd="rz"),
                k.cvt_narrow(a, b, to="bf16x2", relu=True), k.cvt_narrow(a, to="f16", satfinite=True))
    got = _run(("f32", "f32"), ("b16", "b16", "u32", "u32", "u32", "b16"), build,
               [x.view(np.uint32), y.view(np.uint32)])
    tables = {f: _fp8_table(f) for f in ("e4m3x2", "e5m2x2")}
    for i in range(NT):
        a, b = float(x[i]), float(y[i])
        for j, (fmt, relu) in enumerate((("e4m3x2", False), ("e5m2x2", True))):
            vals = [(v if v > 0 else 0.0) if relu else v for v in (a, b)]
            want = 0
            for v in vals:
                code = _nearest(v, tables[fmt]) | (0x80 if math.copysign(1, v) < 0 and not relu else 0)
                want = (want << 8) | code
            assert int(got[j][i]) == want, (i, fmt, a, b)
        u = int(x.view(np.uint32)[i])
        assert int(got[3][i]) == u & ~0x1FFF  # rz: truncate
        lo, up = u & ~0x1FFF, (u & ~0x1FFF) + 0x2000
        assert int(got[2][i]) == (up if (u & 0x1FFF) >= 0x1000 else lo)  # rna: half away from zero
        bfa = np.float32(a if a > 0 else 0.0), np.float32(b if b > 0 else 0.0)
        want_bf = [int(np.array(v).view(np.uint32)) for v in bfa]
        rne = [(w + 0x7FFF + ((w >> 16) & 1)) >> 16 for w in want_bf]
        assert int(got[4][i]) == (rne[0] << 16) | rne[1], i
        h = np.float16(a) if abs(a) <= 65504 else np.float16(math.copysign(65504, a))
        assert int(got[5][i]) == int(np.array(h).view(np.uint16)), i


def test_fp8_pairs_decode_to_f16x2():
    codes = np.arange(NT * 4, dtype=np.uint32) % 256
    pairs = (codes[0::2] | (codes[1::2] << 8)).astype(np.uint16)[:NT]
    for fmt in ("e4m3x2", "e5m2x2"):
        table = _fp8_table(fmt)
        got = _run(("b16",), ("u32",), lambda k, p, fmt=fmt: k.cvt_narrow(p, to="f16x2", frm=fmt), [pairs])[0]
        for i in range(NT):
            for half, byte in ((0, int(pairs[i]) & 0xFF), (1, int(pairs[i]) >> 8)):
                h = np.array((int(got[i]) >> (16 * half)) & 0xFFFF, dtype=np.uint16).view(np.float16)
                mag = byte & 0x7F
                if mag in table:
                    want = -table[mag] if byte & 0x80 else table[mag]
                    assert float(h) == want and math.copysign(1, float(h)) == (-1 if byte & 0x80 else 1), (fmt, byte)
                elif fmt == "e5m2x2" and mag == 0x7C:
                    assert np.isinf(h), (fmt, byte)
                else:
                    assert np.isnan(h), (fmt, byte)


def test_movmatrix_transposes_and_cvt_pack_saturates():
    rng = np.random.default_rng(12)
    words = rng.integers(0, 1 << 32, NT, dtype=np.uint64).astype(np.uint32)
    a, b = _words(rng, 32).view(np.int32), _words(rng, 32).view(np.int32)
    a[:8] = [300, -300, 127, -129, 70000, -70000, 7, -9]

    def build(k, w, x, y):
        return (k.movmatrix(w), k.cvt_pack(x, y, w, to="u8"), k.cvt_pack(x, y, to="s16"),
                k.cvt_pack(x, y, w, to="s4"))
    got = _run(("u32", "s32", "s32"), ("u32",) * 4, build, [words, a.view(np.uint32), b.view(np.uint32)])

    def element(warp, r, c):  # the source matrix of one warp: lane 4r + c//2, half c%2
        return (int(words[warp * 32 + 4 * r + c // 2]) >> (16 * (c % 2))) & 0xFFFF

    def sat(v, n, signed):
        lo, hi = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else (0, (1 << n) - 1)
        return min(max(v, lo), hi) & ((1 << n) - 1)
    for i in range(NT):
        warp, lane = divmod(i, 32)
        r, c = lane // 4, 2 * (lane % 4)
        assert int(got[0][i]) == element(warp, c, r) | (element(warp, c + 1, r) << 16), i
        x, y, w = int(a[i]), int(b[i]), int(words[i])
        assert int(got[1][i]) == ((w << 16) | (sat(x, 8, False) << 8) | sat(y, 8, False)) & 0xFFFFFFFF, i
        assert int(got[2][i]) == (sat(x, 16, True) << 16) | sat(y, 16, True), i
        assert int(got[3][i]) == ((w << 8) | (sat(x, 4, True) << 4) | sat(y, 4, True)) & 0xFFFFFFFF, i


def test_async_stores_multimem_and_alloca_render():
    k = pf.KernelBuilder("a", target="sm_90")
    g = k.param_ptr("g", pf.u32)
    sm = k.shared_base(k.shared("buf", 64))
    mb = k.shared_base(k.shared("bar", 8, 8))
    r = k.reg(pf.u32, "r")
    k.st_async(sm, [r, r], mb)
    k.red_async("add", sm, r, mb)
    k.multimem_ld_reduce("add", g, type="u32", sem="relaxed", scope="sys")
    k.multimem_st(g, r, sem="release", scope="gpu")
    k.multimem_red("max", g, k.reg(pf.s32), sem="relaxed", scope="cluster")
    p = k.alloca(64, align=16)
    k.st(p, r, space="local")
    text = "\n".join(i.render() for i in k.finish().instructions)
    for want in ["st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.u32 [%",
                 "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%",
                 "multimem.ld_reduce.relaxed.sys.global.add.u32 %", "multimem.st.release.gpu.global.u32 [%g], %r;",
                 "multimem.red.relaxed.cluster.global.max.s32 [%g]", "alloca.u64", ", 64, 16;"]:
        assert want in text, (want, text)
    pf.assemble(k.module())
    k80 = pf.KernelBuilder("b", target="sm_80")
    s80 = k80.shared_base(k80.shared("buf", 64))
    with pytest.raises(pf.TargetError):
        k80.st_async(s80, k80.reg(pf.u32), s80)


def test_texture_and_surface_forms_render():
    k = pf.KernelBuilder("t", target="sm_80")
    tex_h = k.param("tex", pf.u64)
    surf_h = k.param("surf", pf.u64)
    th, sh = k.ld(tex_h, type=pf.u64, space="param"), k.ld(surf_h, type=pf.u64, space="param")
    x, y = k.reg(pf.f32, "x"), k.reg(pf.f32, "y")
    i, j = k.reg(pf.s32, "i"), k.reg(pf.s32, "j")
    k.tex(th, [x, y])
    k.tex(th, [i, x, y, y], geom="a2d", dtype="s32", lod=x)
    k.tld4("g", th, [x, y])
    k.txq("width", th)
    k.txq("height", th, lod=i)
    k.istypep("surfref", sh)
    v = k.suld(sh, [i, j], type="b32", vec=2, clamp="zero")
    k.sust(sh, [i, j], v, clamp="clamp")
    k.sured("add", sh, [i, j], k.reg(pf.u32))
    k.suq("width", sh)
    text = "\n".join(ins.render() for ins in k.finish().instructions)
    for want in ["tex.2d.v4.f32.f32 {%f", ", {%x, %y}];", "tex.level.a2d.v4.s32.f32 {%r", ", {%i, %x, %y, %y}], %x;",
                 "tld4.g.2d.v4.f32.f32", "txq.width.b32", "txq.level.height.b32", ", %i;", "istypep.surfref %p",
                 "suld.b.2d.v2.b32.zero {%r", ", {%i, %j}];", "sust.b.2d.v2.b32.clamp [%rd", "sured.b.add.2d.u32.trap",
                 "suq.width.b32"]:
        assert want in text, (want, text)
    pf.assemble(k.module())
    with pytest.raises(pf.ValidationError) as info:
        k.tex(th, [x, y], geom="3d")  # <- tex-3d
    assert "takes 4 coordinate(s)" in str(info.value)
    assert_located(info.value, "<- tex-3d", __file__)
    with pytest.raises(pf.ValidationError):
        k.sured("add", sh, [i, j], k.reg(pf.u32), geom="a1d")


def test_mma_sp_rendering_and_refusals():
    k = pf.KernelBuilder("s", target="sm_80")
    a, b = [k.reg(pf.b32) for _ in range(2)], [k.reg(pf.b32) for _ in range(2)]
    c = [k.reg(pf.f32) for _ in range(4)]
    e = k.reg(pf.b32, "meta")
    k.mma_sp(a, b, c, e, shape="m16n8k16", a_type="f16", selector=3)
    k.mma_sp(a, b, [k.reg(pf.s32) for _ in range(4)], e, shape="m16n8k32", a_type="u8", b_type="s8", selector=1)
    text = "\n".join(i.render() for i in k.finish().instructions)
    assert "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f" in text and ", %meta, 3;" in text
    assert "mma.sp.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32" in text
    pf.assemble(k.module())
    with pytest.raises(pf.ValidationError) as info:
        k.mma_sp(a, b, c, e, shape="m16n8k16", a_type="bf16", selector=4)  # <- sp-sel
    assert "selector is 0..3" in str(info.value)
    assert_located(info.value, "<- sp-sel", __file__)
    with pytest.raises(pf.ValidationError):
        k.mma_sp(a, b, c, e, shape="m16n8k16", a_type="s8")


@pytest.mark.parametrize("op", ["isspacep", "cvta"])
def test_param_window_forms_raise_the_module_to_ptx_7_7(op):
    """cvta and isspacep on .param need PTX ISA 7.7; an sm_80 module otherwise says 7.0, which ptxas refuses."""
    k = pf.KernelBuilder("pw", target="sm_80")
    a = k.param_value("a", pf.u64)
    if op == "isspacep":
        k.isspacep(a, "param")
    else:
        k.cvta(a, to="param")
    m = k.module()
    assert ".version 7.7" in m.ptx
    pf.assemble(m)
