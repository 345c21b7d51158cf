"""Rounding on the interpreter: the directed modes (.rz/.rm/.rp) of arithmetic and conversions, the fused f64
multiply-add, and conversions of 64-bit integers, each against an oracle that knows only exact rationals and
the formats' neighbours (it never calls the code under test)."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.interp.rounding import fma_f64, round_rational
from ptxforge.isa import types as T
from ptxforge.testing.interp_strategies import exact_rationals, float_arrays, rounding_modes

NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


# ---------------------------------------------------------------- the oracle

def _neighbours(q: Fraction, fmt: str):
    """(largest value of `fmt` <= q, smallest >= q), infinities past the largest finite value."""
    dt = NP[fmt]
    with np.errstate(over="ignore"):
        try:
            c = dt(float(q))
        except OverflowError:  # beyond float64
            c = dt(math.inf if q > 0 else -math.inf)
        while math.isinf(c) and c > 0 or (math.isfinite(c) and Fraction(float(c)) > q):
            c = np.nextafter(c, dt(-np.inf))
        while True:
            nxt = np.nextafter(c, dt(np.inf))
            if math.isfinite(nxt) and Fraction(float(nxt)) <= q:
                c = nxt
            else:
                break
        if math.isfinite(c) and Fraction(float(c)) == q:
            return c, c
        return c, np.nextafter(c, dt(np.inf))


def oracle(q: Fraction, fmt: str, mode: str) -> float:
    """q rounded to fmt in mode, from its two neighbours (q != 0)."""
    lo, hi = _neighbours(q, fmt)
    if lo == hi:
        return float(lo)
    if mode == "rm":
        return float(lo)
    if mode == "rp":
        return float(hi)
    if mode == "rz":
        return float(lo) if q > 0 else float(hi)
    if math.isinf(hi):  # nearest: past the largest value by half a unit or more, infinity
        top = Fraction(float(lo))
        return float(hi) if q >= top + (top - Fraction(float(np.nextafter(lo, NP[fmt](0))))) / 2 else float(lo)
    if math.isinf(lo):
        bottom = Fraction(float(hi))
        return float(lo) if q <= bottom - (Fraction(float(np.nextafter(hi, NP[fmt](0)))) - bottom) / 2 else float(hi)
    dl, dh = q - Fraction(float(lo)), Fraction(float(hi)) - q
    if dl != dh:
        return float(lo) if dl < dh else float(hi)
    even = int(np.array(lo).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(NP[fmt]).itemsize])) % 2 == 0
    return float(lo) if even else float(hi)


def same(a, b) -> bool:
    """Equal bit for bit, NaN equal to NaN."""
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all((a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))))


# ---------------------------------------------------------------- round_rational

@given(exact_rationals(), st.sampled_from(["f16", "f32", "f64"]), rounding_modes())
def test_round_rational_matches_the_oracle(q, fmt, mode):
    assert same(round_rational(q, fmt, mode), oracle(q, fmt, mode)), (q, fmt, mode)


def test_overflow_and_underflow_follow_each_mode():
    big, tiny = Fraction(2) ** 200, Fraction(2) ** -200
    top = float(np.finfo(np.float32).max)
    assert [round_rational(big, "f32", m) for m in ("rn", "rz", "rm", "rp")] == [math.inf, top, top, math.inf]
    assert [round_rational(-big, "f32", m) for m in ("rn", "rz", "rm", "rp")] == [-math.inf, -top, -math.inf, -top]
    least = 2.0 ** -149
    assert [round_rational(tiny, "f32", m) for m in ("rn", "rz", "rm", "rp")] == [0.0, 0.0, 0.0, least]
    assert same(round_rational(-tiny, "f32", "rz"), -0.0) and round_rational(-tiny, "f32", "rm") == -least


# ---------------------------------------------------------------- fused f64 multiply-add

def _fma_reference(a, b, c):
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:
        p_neg = math.copysign(1, a) * math.copysign(1, b) < 0
        c_neg = math.copysign(1, c) < 0
        return -0.0 if (p_neg and c_neg) else 0.0
    return oracle(q, "f64", "rn")


@given(float_arrays("f64", 3, 3))
def test_fma_f64_is_fused_and_rounded_once(abc):
    a, b, c = (float(v) for v in abc)
    got = fma_f64(np.array([a]), np.array([b]), np.array([c]))[0]
    if all(math.isfinite(v) for v in (a, b, c)):
        assert same(got, _fma_reference(a, b, c)), (a, b, c, got)
    elif math.isfinite(a) and math.isfinite(b):  # a . b exact and finite: an infinite or NaN c is the result
        assert same(got, c), (a, b, c, got)
    else:  # NaN and infinities: IEEE 754's exact results
        with np.errstate(all="ignore"):
            assert same(got, np.float64(a) * np.float64(b) + np.float64(c)), (a, b, c, got)


@pytest.mark.parametrize("a, b, c", [
    (1 + 2**-52, 1 - 2**-52, -1.0),          # a * b = 1 - 2^-104: unfused, 0
    (1 + 2**-30, 1 + 2**-30, -1.0),          # the low bits of the product survive the cancellation
    (3.0, 1 / 3, -1.0),                       # the product's error is the whole result
    (2.0**-600, 2.0**-500, 2.0**-1074),       # product below the subnormals: exactly, through rationals
    (2.0**600, 2.0**500, -math.inf),          # an infinity: IEEE 754
    (-0.0, 5.0, -0.0), (0.0, -5.0, 0.0),      # signed zeros
    (1e308, 10.0, -9e308),                    # the product overflows float64, the fused result does not
])
def test_fma_f64_edge_cases(a, b, c):
    got = fma_f64(np.array([a]), np.array([b]), np.array([c]))[0]
    if math.isfinite(a) and math.isfinite(b) and not math.isfinite(c):
        assert same(got, c)  # a . b is exact, so finite however large: 1e308 * 10 - inf is -inf, not NaN
    elif not all(math.isfinite(v) for v in (a, b, c)):
        assert same(got, a * b + c)
    else:
        assert same(got, _fma_reference(a, b, c)), (a, b, c, got)


# ---------------------------------------------------------------- arithmetic kernels on the interpreter

def _kernel(opname, tname, mode, nsrc, mods=()):
    t = T.lookup(tname)
    k = pf.KernelBuilder(f"{opname}_{mode}", target="sm_80", reqntid=32)
    srcs = [k.param_ptr(f"x{i}", t) for i in range(nsrc)]
    out = k.param_ptr("out", t)
    off = k.mul(k.tid(), t.bits // 8, mode="wide")
    vals = [k.ld(k.add(p, off), type=t) for p in srcs]
    kw = dict(mode=mode) if mode != "rn" else {}
    r = getattr(k, opname)(*vals, flags=tuple(mods), **kw)
    k.st(k.add(out, off), r, type=t)
    return k


OPS = {"add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b), "mul": (2, lambda a, b: a * b),
       "fma": (3, lambda a, b, c: a * b + c), "div": (2, lambda a, b: a / b)}


def _values(rng, dt, n):
    """Random magnitudes over many binades and both signs, with zeros, and ties for add."""
    e = rng.integers(-40, 40, n).astype(np.float64)
    x = (rng.standard_normal(n) * 2.0 ** e).astype(dt)
    x[:3] = (0.0, -0.0, 1.0)
    return x


@pytest.mark.parametrize("tname", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
@pytest.mark.parametrize("opname", sorted(OPS))
def test_directed_arithmetic_matches_the_oracle(opname, tname, mode):
    nsrc, exact = OPS[opname]
    dt = NP[tname]
    rng = np.random.default_rng(hash((opname, tname, mode)) % 2**32)
    xs = [_values(rng, dt, 32) for _ in range(nsrc)]
    out = np.zeros(32, dt)
    interp.run(_kernel(opname, tname, mode, nsrc), block=32, args=[*xs, out])
    for i in range(32):
        args = [float(x[i]) for x in xs]
        if opname == "div" and args[1] == 0:  # a signed infinity (0 / 0: NaN) in every mode
            want = math.nan if args[0] == 0 else math.copysign(math.inf, args[0]) * math.copysign(1.0, args[1])
            assert same(out[i], want), (args, out[i])
            continue
        q = exact(*[Fraction(v) for v in args])
        if q == 0:
            continue  # the signs of exact zeros: test_the_sign_of_an_exact_zero
        assert same(out[i], oracle(q, tname, mode)), (opname, tname, mode, args, out[i])


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_directed_sqrt_and_rcp_match_the_oracle(mode):
    rng = np.random.default_rng(7)
    for tname in ("f32", "f64"):
        dt = NP[tname]
        x = np.abs(_values(rng, dt, 32))
        x[:3] = (2.0, 0.25, 3.0)
        for opname in ("sqrt", "rcp"):
            out = np.zeros(32, dt)
            interp.run(_kernel(opname, tname, mode, 1), block=32, args=[x, out])
            for i in range(3, 32):
                v = Fraction(float(x[i]))
                if opname == "rcp":
                    want = oracle(1 / v, tname, mode)
                else:  # the neighbours of sqrt(v): squares compared exactly
                    lo, hi = _neighbours(Fraction(float(np.sqrt(x[i].astype(np.float64)))), tname)
                    while Fraction(float(lo)) ** 2 > v:
                        lo = np.nextafter(lo, dt(0))
                    while Fraction(float(np.nextafter(lo, dt(np.inf)))) ** 2 <= v:
                        lo = np.nextafter(lo, dt(np.inf))
                    up = lo if Fraction(float(lo)) ** 2 == v else np.nextafter(lo, dt(np.inf))
                    want = float(up) if mode == "rp" else float(lo)
                assert same(out[i], want), (opname, tname, mode, x[i], out[i], want)


@pytest.mark.parametrize("mode, sign", [("rn", 1.0), ("rz", 1.0), ("rp", 1.0), ("rm", -1.0)])
def test_the_sign_of_an_exact_zero(mode, sign):
    """x - x is +0 in every mode but .rm, where it is -0 (IEEE 754 6.3); -0 + -0 stays -0 in every mode."""
    x = np.array([1.5, -0.0] + [2.0] * 30, np.float32)
    y = np.array([1.5, 0.0] + [2.0] * 30, np.float32)
    out = np.zeros(32, np.float32)
    interp.run(_kernel("sub", "f32", mode, 2), block=32, args=[x, y, out])
    assert math.copysign(1.0, out[0]) == sign and out[0] == 0
    assert math.copysign(1.0, out[1]) == -1.0  # -0 - (+0) = -0 in every mode


def test_ftz_and_sat_apply_around_the_directed_rounding():
    k = pf.KernelBuilder("ftz_sat", target="sm_80", reqntid=32)
    x, y, out = k.param_ptr("x", T.f32), k.param_ptr("y", T.f32), k.param_ptr("out", T.f32)
    off = k.mul(k.tid(), 4, mode="wide")
    a, b = k.ld(k.add(x, off), type=T.f32), k.ld(k.add(y, off), type=T.f32)
    k.st(k.add(out, off), k.mul(a, b, mode="rp", flags=("ftz",)), type=T.f32)
    k.st(k.add(out, off), k.add(a, b, mode="rz", flags=("sat",)), type=T.f32, offset=128)
    xs = np.full(32, 2.0 ** -70, np.float32)
    ys = np.full(32, 2.0 ** -70, np.float32)
    xs[1], ys[1] = 0.75, 0.5  # add: 1.25 clamps to 1
    o = np.zeros(64, np.float32)
    interp.run(k, block=32, args=[xs, ys, o])
    assert o[0] == 0.0  # 2^-140 rounds up to the least subnormal, which .ftz flushes
    assert o[32 + 1] == 1.0


def test_fma_rn_f64_on_the_interpreter_is_fused():
    k = pf.KernelBuilder("fma64", target="sm_80", reqntid=1)
    x = k.param_ptr("x", T.f64)
    a, b, c = (k.ld(x, type=T.f64, offset=8 * i) for i in range(3))
    k.st(x, k.fma(a, b, c), type=T.f64, offset=24)
    xs = np.array([1 + 2**-52, 1 - 2**-52, -1.0, 0.0])
    interp.run(k, block=1, args=[xs])
    assert xs[3] == -2.0 ** -104  # unfused it was 0


def test_bf16_fma_in_a_directed_mode():
    from ptxforge.bfloat16 import from_bf16, to_bf16
    k = pf.KernelBuilder("fma_bf16", target="sm_80", reqntid=32)
    x, out = k.param_ptr("x", T.b16), k.param_ptr("out", T.b16)
    off = k.mul(k.tid(), 6, mode="wide")
    a, b, c = (k.ld(k.add(x, off), type=T.b16, offset=2 * i, dst=k.reg(T.bf16)) for i in range(3))
    r = k.fma(a, b, c, type="bf16", mode="rz")
    k.st(k.add(out, k.mul(k.tid(), 2, mode="wide")), r, type=T.b16)
    rng = np.random.default_rng(3)
    v = to_bf16(rng.standard_normal((32, 3)).astype(np.float32))
    o = np.zeros(32, np.uint16)
    interp.run(k, block=32, args=[v, o])
    f = from_bf16(v).astype(np.float64)
    for i in range(32):
        q = Fraction(f[i, 0]) * Fraction(f[i, 1]) + Fraction(f[i, 2])
        # toward zero at bf16's 8 bits: the f32 result toward zero with its low 16 bits dropped (toward zero too)
        want = np.uint16(int(np.float32(oracle(q, "f32", "rz")).view(np.uint32)) >> 16)
        assert o[i] == want, (i, hex(o[i]), hex(want))


# ---------------------------------------------------------------- conversions

def _cvt_kernel(dt, st_, mode, n=32):
    k = pf.KernelBuilder(f"cvt_{mode}", target="sm_80", reqntid=n)
    x, out = k.param_ptr("x", st_), k.param_ptr("out", dt)
    v = k.ld(k.add(x, k.mul(k.tid(), st_.bits // 8, mode="wide")), type=st_)
    r = k.cvt(v, dt, rnd=mode)
    k.st(k.add(out, k.mul(k.tid(), dt.bits // 8, mode="wide")), r, type=dt)
    return k


def test_a_64_bit_integer_is_rounded_once_to_f32():
    """2^53 + 2^29 + 1 lies just above the halfway point between two floats: through float64 it lands on the
    halfway point and rounds down to even; rounded once it rounds up."""
    x = np.array([2**53 + 2**29 + 1] * 32, np.int64)
    out = np.zeros(32, np.float32)
    interp.run(_cvt_kernel(T.f32, T.s64, "rn"), block=32, args=[x, out])
    assert out[0] == np.float32(2.0**53 + 2.0**30)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("dst, src", [("f32", "s64"), ("f32", "u64"), ("f16", "s32"), ("f64", "u64"),
                                      ("f32", "f64"), ("f16", "f32"), ("f16", "f64")])
def test_conversions_round_once_in_every_mode(dst, src, mode):
    rng = np.random.default_rng(len(dst + src + mode))
    sdt = T.lookup(src)
    if sdt.is_int:
        lo, hi = (-2**(sdt.bits - 1), 2**(sdt.bits - 1) - 1) if sdt.kind == "s" else (0, 2**sdt.bits - 1)
        x = np.array([int(v) for v in rng.integers(lo, hi, 32, endpoint=True, dtype=np.int64 if sdt.kind == "s"
                                                             else np.uint64)],
                     dtype={"s64": np.int64, "u64": np.uint64, "s32": np.int32}[src])
        exact = [Fraction(int(v)) for v in x]
    else:
        x = _values(rng, NP[src], 32) * NP[src](1e3)
        exact = [Fraction(float(v)) for v in x]
    out = np.zeros(32, NP[dst])
    interp.run(_cvt_kernel(T.lookup(dst), sdt, mode), block=32, args=[x, out])
    for i, q in enumerate(exact):
        if q == 0:
            assert out[i] == 0
            continue
        assert same(out[i], oracle(q, dst, mode)), (dst, src, mode, x[i], out[i])


@pytest.mark.gpu
def test_gpu_directed_rounding_matches_the_interpreter():
    """The same kernels on the H200: every op x type x mode above, and the conversions, bit for bit."""
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(21)
    for opname, (nsrc, _) in OPS.items():
        for tname in ("f32", "f64"):
            for mode in ("rn", "rz", "rm", "rp"):
                xs = [_values(rng, NP[tname], 32) for _ in range(nsrc)]
                k = _kernel(opname, tname, mode, nsrc)
                cpu = np.zeros(32, NP[tname])
                interp.run(k, block=32, args=[*xs, cpu])
                gpu = DeviceBuffer.from_host(np.zeros(32, NP[tname]))
                pf.load(k.module())[k.name](1, 32, *[DeviceBuffer.from_host(x) for x in xs], gpu)
                assert same(gpu.to_host(), cpu), (opname, tname, mode)
    for dst, src in (("f32", "s64"), ("f16", "f32"), ("f32", "f64")):
        for mode in ("rn", "rz", "rm", "rp"):
            x = (rng.integers(-2**62, 2**62, 32) if src == "s64" else _values(rng, NP[src], 32)).astype(
                {"s64": np.int64, "f32": np.float32, "f64": np.float64}[src])
            k = _cvt_kernel(T.lookup(dst), T.lookup(src), mode)
            cpu = np.zeros(32, NP[dst])
            interp.run(k, block=32, args=[x, cpu])
            gpu = DeviceBuffer.from_host(np.zeros(32, NP[dst]))
            pf.load(k.module())[k.name](1, 32, DeviceBuffer.from_host(x), gpu)
            assert same(gpu.to_host(), cpu), (dst, src, mode)


@pytest.mark.parametrize("mode", ["rn", "rz"])
def test_rcp_ftz_f64_flushes_its_subnormal_input_and_result(mode):
    """rcp.{rn,rz}.ftz.f64: a subnormal input is taken as zero (1/+-0: +-inf), and a result below the normal range
    becomes zero of its sign."""
    k = pf.KernelBuilder("rcp_ftz", target="sm_80", reqntid=32)
    x, out = k.param_ptr("x", T.f64), k.param_ptr("out", T.f64)
    off = k.mul(k.tid(), 8, mode="wide")
    k.st(k.add(out, off), k.rcp(k.ld(k.add(x, off), type=T.f64), mode=mode, flags=("ftz",)), type=T.f64)
    xs = np.full(32, 4.0)
    xs[0], xs[1], xs[2] = 2.0 ** -1060, -(2.0 ** -1060), 2.0 ** 1023
    o = np.zeros(32)
    interp.run(k, block=32, args=[xs, o])
    assert o[0] == math.inf and o[1] == -math.inf and same(o[2], 0.0) and o[3] == 0.25


def test_bf16_results_in_the_subnormal_range_round_to_nearest_even():
    """cvt.rn.bf16.f32 of f32 subnormals: bf16's subnormals keep fewer bits than its normals, so 1.5 and 1.75
    units of 2^-133 round to 2 units (ties to even, and up), not down to 1."""
    k = pf.KernelBuilder("bf16_sub", target="sm_80", reqntid=32)
    x, out = k.param_ptr("x", T.f32), k.param_ptr("out", T.b16)
    v = k.ld(k.add(x, k.mul(k.tid(), 4, mode="wide")), type=T.f32)
    r = k.cvt(v, "bf16", rnd="rn")
    k.st(k.add(out, k.mul(k.tid(), 2, mode="wide")), r, type=T.b16)
    xs = np.full(32, 1.0, np.float32)
    xs[:5] = (1.5 * 2.0**-133, 2.5 * 2.0**-133, 1.75 * 2.0**-133, -1.5 * 2.0**-133, 2.0**-127 * 1.00390625)
    o = np.zeros(32, np.uint16)
    interp.run(k, block=32, args=[xs, o])
    assert [hex(int(v)) for v in o[:5]] == ["0x2", "0x2", "0x2", "0x8002", "0x40"]
    from ptxforge.bfloat16 import to_bf16
    np.testing.assert_array_equal(o, to_bf16(xs))  # the bit-pattern rounding of float32 agrees


@given(st.sampled_from(sorted(OPS)), st.sampled_from(["f32", "f64"]), rounding_modes(), st.data())
def test_drawn_operands_round_like_the_oracle_on_the_interpreter(opname, tname, mode, data):
    """Operands over every bit pattern (subnormals, zeros, huge and tiny magnitudes): the interpreter's result of
    each finite, nonzero exact result equals the oracle's, in every mode."""
    nsrc, exact = OPS[opname]
    xs = [data.draw(float_arrays(tname, 32, 32)) for _ in range(nsrc)]
    out = np.zeros(32, NP[tname])
    with np.errstate(all="ignore"):
        interp.run(_kernel(opname, tname, mode, nsrc), block=32, args=[*xs, out])
    for i in range(32):
        args = [float(x[i]) for x in xs]
        if not all(math.isfinite(v) for v in args) or (opname == "div" and args[1] == 0):
            continue
        q = exact(*[Fraction(v) for v in args])
        if q != 0:
            assert same(out[i], oracle(q, tname, mode)), (opname, tname, mode, args, out[i])


def test_f16_ftz_flushes_f16_subnormals():
    """add.ftz.f16: .ftz flushes the 16-bit format's subnormals (below 2^-14), in the inputs and
    in the result, to zero of their sign; without .ftz they are kept."""
    def kernel(ftz):
        k = pf.KernelBuilder("h_ftz", target="sm_80", reqntid=32)
        x, y, out = k.param_ptr("x", T.b16), k.param_ptr("y", T.b16), k.param_ptr("out", T.b16)
        off = k.mul(k.tid(), 2, mode="wide")
        a, b = (k.ld(k.add(p, off), type=T.b16, dst=k.reg(T.f16)) for p in (x, y))
        k.st(k.add(out, off), k.add(a, b, flags=("ftz",) if ftz else ()), type=T.b16)
        return k
    xs = np.full(32, 1.0, np.float16)
    ys = np.full(32, 1.0, np.float16)
    xs[0], ys[0] = 2.0 ** -20, 0.0            # a subnormal input
    xs[1], ys[1] = 2.0 ** -13, -1.5 * 2.0 ** -14  # a result of 2^-15: subnormal
    xs[2], ys[2] = -(2.0 ** -20), -0.0
    got = {}
    for ftz in (False, True):
        o = np.zeros(32, np.float16)
        interp.run(kernel(ftz), block=32, args=[xs, ys, o])
        got[ftz] = o
    assert got[False][0] == np.float16(2.0 ** -20) and got[False][1] == np.float16(2.0 ** -15)
    assert same(got[True][0], np.float16(0.0)) and same(got[True][1], np.float16(0.0))
    assert same(got[True][2], np.float16(-0.0)) and got[True][3] == 2.0
