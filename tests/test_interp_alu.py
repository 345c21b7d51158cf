"""Integer, bit and conversion instructions are bit-exact; f32 arithmetic is correctly rounded.

Each case is one instruction applied by 64 threads to values loaded from global memory (drawn
at random, edge values mixed in).  References are written with Python integers from the PTX
ISA definitions, not with the interpreter's numpy code.
"""

import functools
import zlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T
from ptxforge.testing.interp_strategies import poison, seeds

NT = 64
DT = {"u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "u32": np.uint32, "s32": np.int32,
      "u64": np.uint64, "s64": np.int64, "b16": np.uint16, "b32": np.uint32, "b64": np.uint64,
      "f16": np.float16, "f32": np.float32, "f64": np.float64, "pred": np.uint8}


def wrap(v, t):
    bits = T.lookup(t).bits
    v &= (1 << bits) - 1
    if t.startswith("s") and v >> (bits - 1):
        v -= 1 << bits
    return v


def unsigned(v, t):
    return v & ((1 << T.lookup(t).bits) - 1)


def probe(name, in_types, out_type, build, target="sm_80"):
    """Kernel: out[tid] = build(k, *inputs[tid])."""
    k = pf.KernelBuilder(name, target=target, reqntid=NT)
    ptrs = [k.param_ptr(f"in{i}", pf.b8) for i in range(len(in_types))]
    out = k.param_ptr("out", pf.b8)
    tid = k.tid()
    vals = []
    for p, t in zip(ptrs, in_types):
        tt = T.lookup(t)
        if tt.is_pred:
            byte = k.ld(k.add(p, k.cvt(tid, "u64")), type=pf.u8)
            vals.append(k.setp("ne", byte, 0, type=pf.u32))
            continue
        lt = tt.bits_type() if tt.kind == "f" and tt.bits == 16 else tt
        if tt is T.bf16:
            vals.append(k.ld(k.add(p, k.mul(tid, 2, mode="wide")), type=T.b16, dst=k.reg(T.bf16)))
            continue
        vals.append(k.ld(k.add(p, k.mul(tid, tt.bits // 8, mode="wide")), type=lt, dst=k.reg(tt)))
    r = build(k, *vals)
    ot = T.lookup(out_type)
    if ot.is_pred:
        r = k.selp(1, 0, r, type=pf.u32)
        ot = T.u32
    st = ot.bits_type() if ot.kind == "f" and ot.bits == 16 else ot
    k.st(k.add(out, k.mul(tid, ot.bits // 8, mode="wide")), r, type=st)
    return k.module()


def draw(rng, t, n=NT):
    tt = T.lookup(t)
    if tt.is_pred:
        return rng.integers(0, 2, n).astype(np.uint8)
    if tt.is_float:
        v = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, 1.5, 2.5, -2.5, 1e30, -1e30, 3e9, -3e9]
        idx = rng.integers(0, n, 10)
        v[idx] = rng.choice(special, 10)
        with np.errstate(over="ignore"):
            return v.astype(DT[t])
    bits = tt.bits
    raw = rng.integers(0, 2 ** 63, n, dtype=np.uint64) if bits == 64 else rng.integers(0, 2 ** bits, n)
    raw = raw.astype(np.uint64)
    if bits == 64:
        raw = raw * np.uint64(2) + rng.integers(0, 2, n).astype(np.uint64)
    edges = [0, 1, 2 ** bits - 1, 2 ** (bits - 1), 2 ** (bits - 1) - 1, 2]
    raw[rng.integers(0, n, 6)] = rng.choice(np.array(edges, dtype=np.uint64), 6)
    small = rng.integers(0, n, 8)
    raw[small] = rng.integers(0, 72, 8).astype(np.uint64)  # small values: shift amounts, bit positions
    return raw.astype(np.dtype(f"u{bits // 8}" if bits > 8 else "u1")).view(DT[t]) if t[0] != "b" else raw.astype(
        DT[t])


def pyints(a, t):
    if T.lookup(t).is_pred:
        return [int(x) for x in a]
    return [int(x) for x in a.astype(object)] if a.dtype.kind in "iu" else list(a)


INT = ("u16", "s16", "u32", "s32", "u64", "s64")
CASES = {}


def case(name, in_types, out_type, ref, *, skip=None):
    def deco(build):
        CASES[name] = (in_types, out_type, build, ref, skip)
        return build
    return deco


def _reg_cases():
    for t in INT:
        bits = T.lookup(t).bits
        case(f"add.{t}", (t, t), t, lambda a, b, t=t: wrap(a + b, t))(lambda k, a, b: k.add(a, b))
        case(f"sub.{t}", (t, t), t, lambda a, b, t=t: wrap(a - b, t))(lambda k, a, b: k.sub(a, b))
        case(f"mul.lo.{t}", (t, t), t, lambda a, b, t=t: wrap(a * b, t))(lambda k, a, b: k.mul(a, b))
        case(f"mul.hi.{t}", (t, t), t, lambda a, b, t=t, bits=bits: wrap((a * b) >> bits, t))(
            lambda k, a, b: k.mul(a, b, mode="hi"))
        case(f"mad.lo.{t}", (t, t, t), t, lambda a, b, c, t=t: wrap(a * b + c, t))(
            lambda k, a, b, c: k.mad(a, b, c))
        case(f"mad.hi.{t}", (t, t, t), t, lambda a, b, c, t=t, bits=bits: wrap(((a * b) >> bits) + c, t))(
            lambda k, a, b, c: k.mad(a, b, c, mode="hi"))
        case(f"min.{t}", (t, t), t, min)(lambda k, a, b: k.min(a, b))
        case(f"max.{t}", (t, t), t, max)(lambda k, a, b: k.max(a, b))

        def divref(a, b, t=t, rem=False):
            if b == 0:
                return None
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            return wrap(a - q * b, t) if rem else wrap(q, t)
        case(f"div.{t}", (t, t), t, divref)(lambda k, a, b: k.div(a, b))
        case(f"rem.{t}", (t, t), t, functools.partial(divref, t=t, rem=True))(lambda k, a, b: k.rem(a, b))
        if bits < 64:
            w = ("s" if t[0] == "s" else "u") + str(2 * bits)
            case(f"mul.wide.{t}", (t, t), w, lambda a, b: a * b)(lambda k, a, b: k.mul(a, b, mode="wide"))
            case(f"mad.wide.{t}", (t, t, w), w, lambda a, b, c, w=w: wrap(a * b + c, w))(
                lambda k, a, b, c: k.mad(a, b, c, mode="wide"))
        case(f"sad.{t}", (t, t, t), t, lambda a, b, c, t=t: wrap(c + abs(a - b), t))(
            lambda k, a, b, c: k.sad(a, b, c))
        if t in ("u32", "s32"):
            def mul24_ref(a, b, hi, t=t):
                a24, b24 = a & 0xFFFFFF, b & 0xFFFFFF
                if t == "s32":  # the low 24 bits, read as a signed 24-bit value
                    a24, b24 = (a24 ^ 0x800000) - 0x800000, (b24 ^ 0x800000) - 0x800000
                p = (a24 * b24) & ((1 << 48) - 1)  # the 48-bit product
                return wrap(p >> 16 if hi else p, t)
            case(f"mul24.lo.{t}", (t, t), t, functools.partial(mul24_ref, hi=False))(lambda k, a, b: k.mul24(a, b))
            case(f"mul24.hi.{t}", (t, t), t, functools.partial(mul24_ref, hi=True))(
                lambda k, a, b: k.mul24(a, b, mode="hi"))
        if t[0] == "s":
            case(f"abs.{t}", (t,), t, lambda a, t=t: wrap(abs(a), t))(lambda k, a: k.abs(a))
            case(f"neg.{t}", (t,), t, lambda a, t=t: wrap(-a, t))(lambda k, a: k.neg(a))
        case(f"shl.{t}", (t, "u32"), t, lambda a, n, t=t, bits=bits: wrap(a << min(n, bits), t))(
            lambda k, a, n: k.shl(a, n))
        case(f"shr.{t}", (t, "u32"), t, lambda a, n, bits=bits: a >> min(n, bits))(lambda k, a, n: k.shr(a, n))
    case("add.sat.s32", ("s32", "s32"), "s32", lambda a, b: max(-2 ** 31, min(2 ** 31 - 1, a + b)))(
        lambda k, a, b: k.add(a, b, mode="sat"))
    case("sub.sat.s32", ("s32", "s32"), "s32", lambda a, b: max(-2 ** 31, min(2 ** 31 - 1, a - b)))(
        lambda k, a, b: k.sub(a, b, mode="sat"))
    for t in ("b32", "b64"):
        bits = int(t[1:])
        case(f"and.{t}", (t, t), t, lambda a, b: a & b)(lambda k, a, b: k.and_(a, b))
        case(f"or.{t}", (t, t), t, lambda a, b: a | b)(lambda k, a, b: k.or_(a, b))
        case(f"xor.{t}", (t, t), t, lambda a, b: a ^ b)(lambda k, a, b: k.xor(a, b))
        case(f"not.{t}", (t,), t, lambda a, t=t: unsigned(~a, t))(lambda k, a: k.not_(a))
        case(f"cnot.{t}", (t,), t, lambda a: int(a == 0))(lambda k, a: k.cnot(a))
        case(f"popc.{t}", (t,), "u32", lambda a: bin(a).count("1"))(lambda k, a: k.popc(a))
        case(f"clz.{t}", (t,), "u32", lambda a, bits=bits: bits - a.bit_length())(lambda k, a: k.clz(a))
        case(f"brev.{t}", (t,), t, lambda a, bits=bits: int(f"{a:0{bits}b}"[::-1], 2))(lambda k, a: k.brev(a))

        def bfi_ref(f, b, pos, ln, bits=bits):
            # 32-bit forms take position and length modulo 256 (the ISA); 64-bit forms the whole 32-bit
            # operands (measured on an H100, sm_90: a position of 256 inserts nothing there)
            if bits == 32:
                pos, ln = pos & 0xFF, ln & 0xFF
            for i in range(min(ln, bits)):
                if pos + i >= bits:
                    break
                b = (b & ~(1 << (pos + i))) | (((f >> i) & 1) << (pos + i))
            return b
        case(f"bfi.{t}", (t, t, "u32", "u32"), t, bfi_ref)(lambda k, f, b, p, n: k.bfi(f, b, p, n))
    for t in ("u32", "s32", "u64", "s64"):
        bits = T.lookup(t).bits

        def bfe_ref(a, pos, ln, t=t, bits=bits):
            if bits == 32:  # as bfi_ref: the 64-bit forms take the whole operands (H100, sm_90)
                pos, ln = pos & 0xFF, ln & 0xFF
            ua = unsigned(a, t)
            sbit = 0 if t[0] == "u" or ln == 0 else (ua >> min(pos + ln - 1, bits - 1)) & 1
            d = 0
            for i in range(bits):
                bit = (ua >> (pos + i)) & 1 if (i < ln and pos + i < bits) else sbit
                d |= bit << i
            return wrap(d, t)
        case(f"bfe.{t}", (t, "u32", "u32"), t, bfe_ref)(lambda k, a, p, n: k.bfe(a, p, n))

        def bfind_ref(a, t=t):
            v = ~a if a < 0 else a
            return v.bit_length() - 1 if v else 0xFFFFFFFF
        case(f"bfind.{t}", (t,), "u32", bfind_ref)(lambda k, a: k.bfind(a))
    for lut in (0x96, 0xE8, 0xF8, 0x6A, 0x1E, 0x00, 0xFF, 0xCA, 0x80, 0x01, 0x7F, 0x5C):
        def lop3_ref(a, b, c, lut=lut):
            return sum(((lut >> (((a >> i) & 1) << 2 | ((b >> i) & 1) << 1 | ((c >> i) & 1))) & 1) << i
                       for i in range(32))
        case(f"lop3.{lut:#04x}", ("b32", "b32", "b32"), "b32", lop3_ref)(
            lambda k, a, b, c, lut=lut: k.lop3(a, b, c, lut))
    modes = {None: None, "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
             "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
             "rc8": [[s] * 4 for s in range(4)], "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
             "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
             "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]]}
    for mode, table in modes.items():
        def prmt_ref(a, b, c, table=table):
            src = (b << 32) | a
            out = 0
            for i in range(4):
                if table is None:
                    sel = (c >> (4 * i)) & 0xF
                    byte = (src >> (8 * (sel & 7))) & 0xFF
                    if sel & 8:
                        byte = 0xFF if byte & 0x80 else 0
                else:
                    byte = (src >> (8 * table[c & 3][i])) & 0xFF
                out |= byte << (8 * i)
            return out
        case(f"prmt.{mode}", ("b32", "b32", "b32"), "b32", prmt_ref)(
            lambda k, a, b, c, mode=mode: k.prmt(a, b, c, mode=mode))
    for d in ("l", "r"):
        for mode in ("wrap", "clamp"):
            def shf_ref(lo, hi, n, d=d, mode=mode):
                n = min(n, 32) if mode == "clamp" else n & 31
                v = (hi << 32) | lo
                return ((v << n) >> 32) & 0xFFFFFFFF if d == "l" else (v >> n) & 0xFFFFFFFF
            case(f"shf.{d}.{mode}", ("b32", "b32", "u32"), "b32", shf_ref)(
                lambda k, lo, hi, n, d=d, mode=mode: k.shf(d, lo, hi, n, mode=mode))
    cmps = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
            "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
    for t in ("s32", "u32", "s64", "u64", "s16"):
        for cmp, f in cmps.items():
            case(f"setp.{cmp}.{t}", (t, t), "pred", lambda a, b, f=f: int(f(a, b)))(
                lambda k, a, b, cmp=cmp: k.setp(cmp, a, b))
    case("setp.lt.and.s32", ("s32", "s32", "pred"), "pred", lambda a, b, p: int(a < b and p))(
        lambda k, a, b, p: k.setp("lt", a, b, combine=("and", p)))
    case("setp.ge.xor.not.u32", ("u32", "u32", "pred"), "pred", lambda a, b, p: int((a >= b) != (not p)))(
        lambda k, a, b, p: k.setp("ge", a, b, combine=("xor", ~p)))
    case("selp.s64", ("s64", "s64", "pred"), "s64", lambda a, b, p: a if p else b)(
        lambda k, a, b, p: k.selp(a, b, p))
    ints = ("u8", "s8", "u16", "s16", "u32", "s32", "u64", "s64")
    for src in ("u16", "s16", "u32", "s32", "u64", "s64"):
        for dst in ints:
            case(f"cvt.{dst}.{src}", (src,), dst, lambda a, dst=dst: wrap(a, dst))(
                lambda k, a, dst=dst: k.cvt(a, dst))
            lo, hi = (0, 2 ** T.lookup(dst).bits - 1) if dst[0] == "u" else (
                -2 ** (T.lookup(dst).bits - 1), 2 ** (T.lookup(dst).bits - 1) - 1)
            slo, shi = (0, 2 ** T.lookup(src).bits - 1) if src[0] == "u" else (
                -2 ** (T.lookup(src).bits - 1), 2 ** (T.lookup(src).bits - 1) - 1)
            if lo <= slo and shi <= hi:
                continue  # nothing to saturate: ptxas refuses .sat
            case(f"cvt.sat.{dst}.{src}", (src,), dst, lambda a, lo=lo, hi=hi: max(lo, min(hi, a)))(
                lambda k, a, dst=dst: k.cvt(a, dst, sat=True))


_reg_cases()


def _sub_word_out(t):
    """cvt to 8/16-bit types writes a 32-bit (or 16-bit) register; store the type's bytes."""
    return t


@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_instruction(name):
    in_types, out_type, build, ref, _ = CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    ins = [draw(rng, t) for t in in_types]
    if name.startswith(("div.", "rem.")):
        ins[1] = np.where(ins[1] == 0, ins[1].dtype.type(3), ins[1])
    ot = out_type if out_type != "pred" else "u32"
    out = poison(np.empty(NT, DT[ot]))
    mod = probe(name.replace(".", "_"), in_types, out_type if out_type not in ("u8", "s8") else out_type, build)
    interp.run(mod, block=NT, args=ins + [out])
    cols = [pyints(a, t) for a, t in zip(ins, in_types)]
    want = [ref(*vals) for vals in zip(*cols)]
    got = pyints(out, ot)
    if ot[0] in "ub":
        want = [unsigned(w, ot) for w in want]
    assert got == want, [(i, g, w, [c[i] for c in cols]) for i, (g, w) in enumerate(zip(got, want)) if g != w][:4]


def test_integer_division_by_zero_is_reported():
    mod = probe("div0", ("u32", "u32"), "u32", lambda k, a, b: k.div(a, b))
    a = np.arange(NT, dtype=np.uint32)
    b = np.ones(NT, dtype=np.uint32)
    b[5] = 0
    out = np.empty(NT, np.uint32)
    r = interp.run(mod, block=NT, args=[a, b, out], check=False)
    assert [f.kind for f in r.findings] == ["arith"] and r.findings[0].threads[0].tid[0] == 5
    assert out[5] == 0xFFFFFFFF and out[4] == 4


# ---------------------------------------------------------------- floating point

def round_f32(x: Fraction) -> np.float32:
    """Correct round-to-nearest-even of an exact rational to float32."""
    f = np.float32(float(x))
    best = None
    for c in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - x)
        key = (d, int(np.array(c).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, c)
    return best[1]


def _finite_f32(rng, n):
    v = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    return v


@given(seed=seeds(), op=st.sampled_from(["add", "sub", "mul", "fma", "div"]))
def test_f32_arithmetic_is_correctly_rounded(seed, op):
    rng = np.random.default_rng(seed)
    a, b, c = (_finite_f32(rng, NT) for _ in range(3))
    if op == "fma":  # make cancellation likely: c close to -a*b
        c = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(NT) * 1e-7)).astype(np.float32)
    build = {"add": lambda k, x, y, z: k.add(x, y), "sub": lambda k, x, y, z: k.sub(x, y),
             "mul": lambda k, x, y, z: k.mul(x, y), "fma": lambda k, x, y, z: k.fma(x, y, z),
             "div": lambda k, x, y, z: k.div(x, y)}[op]
    out = poison(np.empty(NT, np.float32))
    interp.run(probe(f"f32_{op}", ("f32", "f32", "f32"), "f32", build), block=NT, args=[a, b, c, out])
    F = [Fraction(float(x)) for x in a], [Fraction(float(x)) for x in b], [Fraction(float(x)) for x in c]
    exact = {"add": lambda x, y, z: x + y, "sub": lambda x, y, z: x - y, "mul": lambda x, y, z: x * y,
             "fma": lambda x, y, z: x * y + z, "div": lambda x, y, z: x / y}[op]
    want = np.array([round_f32(exact(*v)) for v in zip(*F)], dtype=np.float32)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


FLOAT_CASES = {
    "cvt.rni.s32.f32": (("f32",), "s32", lambda k, a: k.cvt(a, "s32", rnd="rni")),
    "cvt.rzi.s32.f32": (("f32",), "s32", lambda k, a: k.cvt(a, "s32", rnd="rzi")),
    "cvt.rmi.u32.f32": (("f32",), "u32", lambda k, a: k.cvt(a, "u32", rnd="rmi")),
    "cvt.rpi.s64.f32": (("f32",), "s64", lambda k, a: k.cvt(a, "s64", rnd="rpi")),
    "cvt.rn.f32.s32": (("s32",), "f32", lambda k, a: k.cvt(a, "f32")),
    "cvt.rn.f16.f32": (("f32",), "f16", lambda k, a: k.cvt(a, "f16")),
    "cvt.f32.f16": (("f16",), "f32", lambda k, a: k.cvt(a, "f32")),
    "cvt.rn.f32.f64": (("f64",), "f32", lambda k, a: k.cvt(a, "f32")),
    "cvt.rn.bf16.f32": (("f32",), "b16", lambda k, a: k.cvt(a, "bf16")),
    "min.f32": (("f32", "f32"), "f32", lambda k, a, b: k.min(a, b)),
    "max.f32": (("f32", "f32"), "f32", lambda k, a, b: k.max(a, b)),
    "abs.f32": (("f32",), "f32", lambda k, a: k.abs(a)),
    "neg.f32": (("f32",), "f32", lambda k, a: k.neg(a)),
    "sqrt.rn.f32": (("f32",), "f32", lambda k, a: k.sqrt(k.abs(a))),
    "setp.ltu.f32": (("f32", "f32"), "pred", lambda k, a, b: k.setp("ltu", a, b)),
    "setp.ne.f32": (("f32", "f32"), "pred", lambda k, a, b: k.setp("ne", a, b)),
    "setp.nan.f32": (("f32", "f32"), "pred", lambda k, a, b: k.setp("nan", a, b)),
}


def _cvt_int_ref(x, rnd, lo, hi):
    if np.isnan(x):
        return 0
    r = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rnd](np.float64(x))
    if r >= hi:
        return hi
    if r <= lo:
        return lo
    return int(r)


def _bf16_ref(x):
    u = int(np.array(x, dtype=np.float32).view(np.uint32))
    if np.isnan(x):
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


FLOAT_REFS = {
    "cvt.rni.s32.f32": lambda a: _cvt_int_ref(a, "rni", -2 ** 31, 2 ** 31 - 1),
    "cvt.rzi.s32.f32": lambda a: _cvt_int_ref(a, "rzi", -2 ** 31, 2 ** 31 - 1),
    "cvt.rmi.u32.f32": lambda a: _cvt_int_ref(a, "rmi", 0, 2 ** 32 - 1),
    "cvt.rpi.s64.f32": lambda a: _cvt_int_ref(a, "rpi", -2 ** 63, 2 ** 63 - 1),
    "cvt.rn.f32.s32": lambda a: round_f32(Fraction(int(a))),
    "cvt.rn.f16.f32": lambda a: np.array(a).astype(np.float16),
    "cvt.f32.f16": lambda a: np.float32(a),
    "cvt.rn.f32.f64": lambda a: np.float32(a),
    "cvt.rn.bf16.f32": _bf16_ref,
    "min.f32": lambda a, b: b if np.isnan(a) else a if np.isnan(b) else min(a, b),
    "max.f32": lambda a, b: b if np.isnan(a) else a if np.isnan(b) else max(a, b),
    "abs.f32": lambda a: np.float32(np.abs(a)),
    "neg.f32": lambda a: np.float32(-a),
    "sqrt.rn.f32": lambda a: np.sqrt(np.float32(np.abs(a))),
    "setp.ltu.f32": lambda a, b: int(bool(np.isnan(a) or np.isnan(b) or a < b)),
    "setp.ne.f32": lambda a, b: int(bool(not (np.isnan(a) or np.isnan(b)) and a != b)),
    "setp.nan.f32": lambda a, b: int(bool(np.isnan(a) or np.isnan(b))),
}


@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_float_conversions_and_compares(name):
    in_types, out_type, build = FLOAT_CASES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    ins = [draw(rng, t) for t in in_types]
    ot = "u32" if out_type == "pred" else out_type
    out = poison(np.empty(NT, DT[ot]))
    interp.run(probe(name.replace(".", "_"), in_types, out_type, build), block=NT, args=ins + [out])
    with np.errstate(over="ignore"):
        want = np.array([FLOAT_REFS[name](*v) for v in zip(*ins)]).astype(DT[ot])
    if out.dtype.kind == "f":
        same = (out.view(f"u{out.itemsize}") == want.view(f"u{out.itemsize}")) | (np.isnan(out) & np.isnan(want))
        assert same.all(), (ins[0][~same][:4], out[~same][:4], want[~same][:4])
    else:
        np.testing.assert_array_equal(out, want)


def test_cvt_packs_two_halves():
    k = pf.KernelBuilder("pack", target="sm_80", reqntid=32)
    src, dst = k.param_ptr("src", pf.f32), k.param_ptr("dst", pf.u32)
    t = k.tid()
    hi = k.ld(k.add(src, k.mul(t, 8, mode="wide")), type=pf.f32)
    lo = k.ld(k.add(src, k.add(k.mul(t, 8, mode="wide"), 4)), type=pf.f32)
    k.st(k.add(dst, k.mul(t, 4, mode="wide")), k.cvt(hi, "f16x2", b=lo), type=pf.b32)
    x = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    out = poison(np.empty(32, np.uint32))
    interp.run(k.module(), block=32, args=[x, out])
    halves = x.reshape(32, 2).astype(np.float16).view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(out, (halves[:, 0] << 16) | halves[:, 1])


def round_half(x: Fraction, bf16: bool) -> int:
    """Correct round-to-nearest-even of an exact rational to f16 / bf16 bits (finite results)."""
    if bf16:
        grid = np.arange(0, 1 << 16, dtype=np.uint32)
        with np.errstate(invalid="ignore"):
            vals = (grid << 16).view(np.float32).astype(np.float64)
    else:
        grid = np.arange(0, 1 << 16, dtype=np.uint16)
        vals = grid.view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals)
    f = float(x)
    dist = np.where(ok, np.abs(np.where(ok, vals, 0) - f), np.inf)
    cand = np.flatnonzero(dist <= dist.min() * (1 + 1e-9) + 1e-300)
    best = min(cand, key=lambda i: (abs(Fraction(float(vals[i])) - x), int(i) & 1, -int(i)))
    return int(best)


@given(seed=seeds(), op=st.sampled_from(["add", "mul", "fma"]), half=st.sampled_from(["f16", "bf16"]))
def test_half_arithmetic_rounds_once(seed, op, half):
    rng = np.random.default_rng(seed)
    vals = (rng.standard_normal((3, NT)) * 4).astype(np.float32)
    if half == "f16":
        bits = vals.astype(np.float16).view(np.uint16)
    else:
        bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
    build = {"add": lambda k, x, y, z: k.add(x, y), "mul": lambda k, x, y, z: k.mul(x, y),
             "fma": lambda k, x, y, z: k.fma(x, y, z)}[op]
    out = poison(np.empty(NT, np.uint16))
    mod = probe(f"{half}_{op}", (half, half, half), "b16", build, target="sm_90")
    interp.run(mod, block=NT, args=[bits[0].copy(), bits[1].copy(), bits[2].copy(), out])

    def value(b):
        return (np.uint32(b) << np.uint32(16)).view(np.float32) if half == "bf16" else np.uint16(b).view(np.float16)
    for i in range(NT):
        fx, fy, fz = (float(value(bits[j][i])) for j in range(3))
        x, y, z = Fraction(fx), Fraction(fy), Fraction(fz)
        exact = {"add": x + y, "mul": x * y, "fma": x * y + z}[op]
        if exact == 0:  # the sign of an exact zero follows IEEE (float64 computes it exactly here)
            zero = {"add": fx + fy, "mul": fx * fy, "fma": fx * fy + fz}[op]
            want = 0x8000 if np.signbit(zero) else 0
        else:
            want = round_half(exact, half == "bf16")
        assert int(out[i]) == want, (i, op, half)
