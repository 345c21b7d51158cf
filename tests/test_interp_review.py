"""The breadth kernels of tests/test_interp_gpu_breadth.py without a GPU: every one assembles with ptxas for
sm_90a and runs on the interpreter over its corner rows, and for the integer, conversion and comparison forms the
interpreter's words equal a reference written here from the PTX ISA's definitions in Python integers and floats
(not from the interpreter's code), or from what an H100 (sm_90) computes where the hardware and the ISA's text
differ (each such reference says so)."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.testing.interp_strategies import POISON_BYTE

from support.ptx_text import assembler_verdict
from test_interp_gpu_breadth import CASES, N, interpret, module, rows

needs_ptxas = pytest.mark.skipif(not pf.assembler.find_tool("ptxas"), reason="ptxas not installed")

POISON_WORD = int.from_bytes(bytes([POISON_BYTE]) * 8, "little")


@needs_ptxas
def test_every_breadth_kernel_assembles_for_sm_90a():
    """ptxas accepts each case's module, as ptxforge renders it for the driver, for sm_90a (the GPU test would
    otherwise fail on the assembler)."""
    refused = {}
    for name in sorted(CASES):
        verdict = assembler_verdict(module(name).ptx, "sm_90a")
        if verdict is not None:
            refused[name] = verdict
    assert not refused, refused


@pytest.mark.parametrize("name", sorted(CASES))
def test_breadth_kernel_runs_on_the_interpreter(name):
    """Each case runs over its rows on the interpreter without a finding (but division by zero) and writes every
    row's result word."""
    d = interpret(name, rows(CASES[name].kinds, seed=len(name)), check=CASES[name].skip is None)
    assert not (d == np.uint64(POISON_WORD)).any(), f"{name}: rows left unwritten"


# ---------------------------------------------------------------- references from the ISA's text

def mask(bits):
    return (1 << bits) - 1


def signed(v, bits):
    v &= mask(bits)
    return v - (1 << bits) if v >> (bits - 1) else v


def bit(v, i):
    return (v >> i) & 1


def f32(word) -> float:
    return struct.unpack("<f", struct.pack("<I", int(word) & 0xFFFFFFFF))[0]


def f64(word) -> float:
    return struct.unpack("<d", struct.pack("<Q", int(word)))[0]


def shift(op, t):
    """shl / shr: amounts greater than the width are clamped to the width (shr.s fills with the sign)."""
    w = int(t[1:])

    def ref(a, b, c):
        n = min(b & 0xFFFFFFFF, w)
        if op == "shl":
            return (a << n) & mask(w)
        if t[0] == "s":
            return (signed(a, w) >> n) & mask(w)
        return ((a & mask(w)) >> n) & mask(w)
    return ref


def field_operand(w):
    """The bits of bfe's and bfi's position and length that count: the ISA's low byte for 32-bit forms, the
    whole 32-bit operand for 64-bit ones (what an H100 (sm_90) computes: 256 is beyond the msb, not 0)."""
    return 0xFF if w == 32 else M32


def bfe(t):
    """bfe, from the ISA's pseudo-code: pos = b[7:0], len = c[7:0] (whole words for 64-bit forms:
    `field_operand`); d[i] = a[pos+i] for i < len and pos+i <= msb, else the sign bit a[min(pos+len-1, msb)]
    (0 for unsigned types); a zero length gives zero."""
    w = int(t[1:])
    msb = w - 1

    def ref(a, b, c):
        pos, ln = b & field_operand(w), c & field_operand(w)
        if ln == 0:
            return 0
        sbit = bit(a, min(pos + ln - 1, msb)) if t[0] == "s" else 0
        return sum((bit(a, pos + i) if i < ln and pos + i <= msb else sbit) << i for i in range(w))
    return ref


def bfi(w):
    """bfi d, f, b, pos, len: b with bits pos .. pos+len-1 (those at or below the msb) taken from f's low bits;
    pos and len are their operands' low bytes (whole words for bfi.b64: `field_operand`)."""
    def ref(f, b, pos, ln):
        pos, ln = pos & field_operand(w), ln & field_operand(w)
        out = b & mask(w)
        for i in range(min(ln, w)):
            if pos + i <= w - 1:
                out = (out & ~(1 << (pos + i))) | (bit(f, i) << (pos + i))
        return out
    return ref


#: the ISA's prmt mode tables: selector c[1:0] -> the source bytes of d.b3 d.b2 d.b1 d.b0, as printed there
PRMT_TABLES = {
    "f4e": ("3210", "4321", "5432", "6543"), "b4e": ("5670", "6701", "7012", "0123"),
    "rc8": ("0000", "1111", "2222", "3333"), "ecl": ("3210", "3211", "3222", "3333"),
    "ecr": ("0000", "1110", "2210", "3210"), "rc16": ("1010", "3232", "1010", "3232"),
}


def prmt(mode):
    def ref(a, b, c):
        src = ((b & 0xFFFFFFFF) << 32) | (a & 0xFFFFFFFF)
        out = 0
        for i in range(4):
            if mode is None:
                sel = (c >> (4 * i)) & 0xF
                byte = (src >> (8 * (sel & 7))) & 0xFF
                if sel & 8:  # replicate the byte's sign
                    byte = 0xFF if byte & 0x80 else 0
            else:
                byte = (src >> (8 * int(PRMT_TABLES[mode][c & 3][3 - i]))) & 0xFF
            out |= byte << (8 * i)
        return out
    return ref


def shf(direction, mode):
    """shf: the 64-bit pair b:a shifted by n (.clamp: min(n, 32); .wrap: n mod 32), d its high (.l) or low (.r)
    word."""
    def ref(lo, hi, n):
        n = min(n, 32) if mode == "clamp" else n & 31
        v = (hi << 32) | lo
        return ((v << n) >> 32) & M32 if direction == "l" else (v >> n) & M32
    return ref


def divrem(op, t):
    """Truncating division; INT_MIN / -1 wraps to INT_MIN (remainder 0); the remainder takes the dividend's
    sign."""
    w = int(t[1:])

    def ref(a, b, c):
        x, y = (signed(a, w), signed(b, w)) if t[0] == "s" else (a & mask(w), b & mask(w))
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return (q if op == "div" else x - q * y) & mask(w)
    return ref


def mulhi(t):
    w = int(t[1:])

    def ref(a, b, c):
        x, y = (signed(a, w), signed(b, w)) if t[0] == "s" else (a & mask(w), b & mask(w))
        return ((x * y) >> w) & mask(w)
    return ref


def f2i(rnd, dst, src):
    """cvt to an integer from a float: other values are rounded in the mode and clamped to the destination's
    range (saturation is the default for float-to-integer conversions). NaN gives 0 from f16/bf16/f32 to at most
    32 bits, and the pattern 1 << (w - 1) (signed: the minimum) from f64 or to 64 bits: the ISA says 0, this is
    what an H100 (sm_90) computes."""
    w = int(dst[1:])
    lo, hi = (-(1 << (w - 1)), (1 << (w - 1)) - 1) if dst[0] == "s" else (0, (1 << w) - 1)
    reg = 64 if w == 64 else 16 if w == 16 else 32  # the destination register's width
    nan = 0 if src != "f64" and w <= 32 else (lo if dst[0] == "s" else 1 << (w - 1)) & mask(reg)

    def ref(a, b, c):
        x = source_value(a, src)
        if math.isnan(x):
            return nan
        if math.isinf(x):
            v = hi if x > 0 else lo
        else:
            v = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}[rnd](x)
        v = min(max(v, lo), hi)
        return (v if dst[0] == "s" else v) & mask(reg)
    return ref


def i2i(dst, src, sat):
    """cvt between integers: the source's low bits read as its type, then saturated (.sat) or truncated to the
    destination's width, then extended by the destination's signedness to the 32-bit register."""
    ws, wd = int(src[1:]), int(dst[1:])

    def ref(a, b, c):
        x = signed(a, ws) if src[0] == "s" else a & mask(ws)
        if sat:
            lo, hi = (-(1 << (wd - 1)), (1 << (wd - 1)) - 1) if dst[0] == "s" else (0, (1 << wd) - 1)
            x = min(max(x, lo), hi)
        x = signed(x, wd) if dst[0] == "s" else x & mask(wd)
        return x & mask(max(wd, 32))
    return ref


def fcmp(cmp, ftz):
    """setp on f32: ordered comparisons are false with a NaN operand, the unordered (…u) ones true; num / nan
    test for NaN; .ftz compares subnormal operands as zero of their sign."""
    def ref(a, b, c):
        x, y = f32(a), f32(b)
        if ftz:
            x, y = (math.copysign(0.0, v) if 0 < abs(v) < 2.0 ** -126 else v for v in (x, y))
        nan = math.isnan(x) or math.isnan(y)
        if cmp == "num":
            return int(not nan)
        if cmp == "nan":
            return int(nan)
        base = cmp[:2]
        r = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[base]
        if nan:
            return int(len(cmp) == 3)
        return int(r)
    return ref


def isa_testp(test, bits):
    """testp: .normal is true for ±0 as well as for normal numbers (what an H100 (sm_90) computes; zero is not a
    normal number in IEEE 754's sense)."""
    def ref(a, b, c):
        x = f32(a) if bits == 32 else f64(a)
        tiny = 2.0 ** -126 if bits == 32 else 2.0 ** -1022
        return int({"finite": math.isfinite(x), "infinite": math.isinf(x), "number": not math.isnan(x),
                    "notanumber": math.isnan(x), "normal": math.isfinite(x) and (abs(x) >= tiny or x == 0),
                    "subnormal": 0 < abs(x) < tiny}[test])
    return ref


def bitcount(op, w):
    def ref(a, b, c):
        a &= mask(w)
        if op == "popc":
            return bin(a).count("1")
        if op == "clz":
            return w - a.bit_length()
        return int(f"{a:0{w}b}"[::-1], 2)  # brev
    return ref


def bfind(t, shiftamt):
    """bfind: the position of the most significant bit that is not a sign bit (.s) or set (.u); 0xffffffff when
    there is none; .shiftamt gives the left shift that would bring it to the msb."""
    w = int(t[1:])

    def ref(a, b, c):
        v = a & mask(w)
        if t[0] == "s" and bit(v, w - 1):
            v = ~v & mask(w)
        if v == 0:
            return M32
        pos = v.bit_length() - 1
        return (w - 1 - pos) if shiftamt else pos
    return ref


M32 = 0xFFFFFFFF


def _low32(ref):
    """A reference over the rows' low 32-bit words."""
    return lambda a, b, c: ref(a & M32, b & M32, c & M32)


REFERENCES = {}
for _t in ("b32", "s32", "u32", "b16", "s16", "u16", "b64", "s64", "u64"):
    for _op in ("shl", "shr"):
        if f"{_op}.{_t}" in CASES:
            REFERENCES[f"{_op}.{_t}"] = (lambda r: (lambda a, b, c: r(a, b & M32, c)))(shift(_op, _t))
for _t in ("u32", "s32"):
    REFERENCES[f"bfe.{_t}"] = _low32(bfe(_t))
for _t in ("u64", "s64"):
    REFERENCES[f"bfe.{_t}"] = (lambda r: (lambda a, b, c: r(a, b & M32, c & M32)))(bfe(_t))
REFERENCES["bfi.b32"] = lambda a, b, c: bfi(32)(a & M32, a >> 32, b & M32, c & M32)
REFERENCES["bfi.b64"] = lambda a, b, c: bfi(64)(a, c, b & M32, b >> 32)
REFERENCES["prmt.b32"] = lambda a, b, c: prmt(None)(a & M32, a >> 32, b & M32)
for _m in PRMT_TABLES:
    REFERENCES[f"prmt.b32.{_m}"] = (lambda r: (lambda a, b, c: r(a & M32, a >> 32, b & M32)))(prmt(_m))
for _d in ("l", "r"):
    for _m in ("wrap", "clamp"):
        REFERENCES[f"shf.{_d}.{_m}.b32"] = (lambda r: (lambda a, b, c: r(a & M32, a >> 32, b & M32)))(shf(_d, _m))
for _t in ("u32", "s32", "u16", "s16", "u64", "s64"):
    for _op in ("div", "rem"):
        REFERENCES[f"{_op}.{_t}"] = divrem(_op, _t)
    REFERENCES[f"mul.hi.{_t}"] = mulhi(_t)
for _dst in ("s32", "u32", "s64", "u64", "s16", "u16", "s8", "u8"):
    for _rnd in ("rni", "rzi", "rmi", "rpi"):
        for _src in ("f32", "f64", "f16"):
            REFERENCES[f"cvt.{_rnd}.{_dst}.{_src}"] = f2i(_rnd, _dst, _src)
for _rnd in ("rni", "rzi", "rmi", "rpi"):
    REFERENCES[f"cvt.{_rnd}.s16.bf16"] = f2i(_rnd, "s16", "bf16")
    REFERENCES[f"cvt.{_rnd}.u32.bf16"] = f2i(_rnd, "u32", "bf16")
for _name in CASES:
    _parts = _name.split(".")
    if _parts[0] == "cvt" and len(_parts) in (3, 4) and all(p[0] in "su" and p[1:].isdigit() for p in _parts[-2:]) \
            and _parts[-1].endswith("32"):
        REFERENCES[_name] = _low32(i2i(_parts[-2], _parts[-1], "sat" in _parts))
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan"):
    REFERENCES[f"setp.{_cmp}.f32"] = fcmp(_cmp, False)
    REFERENCES[f"setp.{_cmp}.ftz.f32"] = fcmp(_cmp, True)
for _test in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"):
    REFERENCES[f"testp.{_test}.f32"] = isa_testp(_test, 32)
    REFERENCES[f"testp.{_test}.f64"] = isa_testp(_test, 64)
for _op in ("popc", "clz", "brev"):
    REFERENCES[f"{_op}.b32"] = bitcount(_op, 32)
    REFERENCES[f"{_op}.b64"] = bitcount(_op, 64)
for _t in ("u32", "s32", "u64", "s64"):
    for _sa in (False, True):
        REFERENCES[f"bfind{'.shiftamt' if _sa else ''}.{_t}"] = bfind(_t, _sa)


# ---------------------------------------------------------------- conversions that round, from exact rationals

#: precision (significand bits), least and greatest exponent of the formats a conversion rounds to
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023)}


def round_exact(q, fmt: str, mode: str) -> float:
    """The exact rational `q` rounded to `fmt` in `mode` (rn: nearest, ties to even; rz; rm; rp), with IEEE 754's
    overflow rule (rn and the modes rounding away from zero go to infinity, the others stop at the largest finite
    value); zero keeps no sign here."""
    from fractions import Fraction
    p, emin, emax = FORMATS[fmt]
    if q == 0:
        return 0.0
    sign = -1 if q < 0 else 1
    a = abs(Fraction(q))
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    n = a / ulp
    whole = n.numerator // n.denominator
    rest = n - whole
    up = {"rn": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1), "rz": False,
          "rp": rest > 0 and sign > 0, "rm": rest > 0 and sign < 0}[mode]
    v = (whole + up) * ulp
    top = (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax
    if v > top:
        to_inf = mode == "rn" or (mode == "rp" and sign > 0) or (mode == "rm" and sign < 0)
        return sign * math.inf if to_inf else sign * float(top)
    return sign * float(v)


def float_bits(x: float, fmt: str) -> int:
    """The bits of value `x`, exact in `fmt`."""
    if fmt == "f16":
        return int(np.array(x, np.float16).view(np.uint16))
    if fmt == "bf16":
        return int(np.array(x, np.float32).view(np.uint32)) >> 16
    if fmt == "f32":
        return int(np.array(x, np.float32).view(np.uint32))
    return int(np.array(x, np.float64).view(np.uint64))


def source_value(word: int, src: str):
    """The exact value (int, or float which Fraction takes exactly) of a row's word read as `src`."""
    if src[0] in "su":
        w = int(src[1:])
        return signed(word, w) if src[0] == "s" else word & mask(w)
    if src == "bf16":
        return f32((word & 0xFFFF) << 16)
    return {"f32": f32, "f64": f64}[src](word) if src in ("f32", "f64") else \
        float(np.array(word & 0xFFFF, np.uint16).view(np.float16))


def convert(dst: str, src: str, mode: str, ftz: bool = False):
    """cvt.mode.dst.src rounding once from the exact source value; NaN stays NaN and infinities stay infinite;
    a zero result keeps the source's sign; .ftz flushes an f32 source or result below 2^-126 to zero of its sign."""
    from fractions import Fraction

    def ref(a, b, c):
        x = source_value(a, src)
        if isinstance(x, float):
            if ftz and src == "f32" and 0 < abs(x) < 2.0 ** -126:
                x = math.copysign(0.0, x)
            if math.isnan(x):
                return float_bits(math.nan, dst)
            if math.isinf(x):
                return float_bits(x, dst)
        r = round_exact(Fraction(x), dst, mode)
        if r == 0:
            r = math.copysign(0.0, x) if isinstance(x, float) else 0.0
        if ftz and dst == "f32" and 0 < abs(r) < 2.0 ** -126:
            r = math.copysign(0.0, r)
        return float_bits(r, dst)
    return ref


def _is_nan_bits(v: int, fmt: str) -> bool:
    p = FORMATS[fmt][0]
    width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[fmt]
    exp = ((v & mask(width - 1)) >> (p - 1))
    return exp == mask(width - p) and v & mask(p - 1) != 0


FLOAT_REFERENCES = {}
for _rnd in ("rn", "rz", "rm", "rp"):
    FLOAT_REFERENCES[f"cvt.{_rnd}.f16.f32"] = ("f16", convert("f16", "f32", _rnd))
    FLOAT_REFERENCES[f"cvt.{_rnd}.f32.f64"] = ("f32", convert("f32", "f64", _rnd))
    FLOAT_REFERENCES[f"cvt.{_rnd}.ftz.f32.f64"] = ("f32", convert("f32", "f64", _rnd, ftz=True))
for _rnd in ("rn", "rz"):
    FLOAT_REFERENCES[f"cvt.{_rnd}.bf16.f32"] = ("bf16", convert("bf16", "f32", _rnd))
    for _dst in ("f32", "f16", "f64"):
        for _src in ("s32", "u32", "s64", "u64", "s16", "u16"):
            FLOAT_REFERENCES[f"cvt.{_rnd}.{_dst}.{_src}"] = (_dst, convert(_dst, _src, _rnd))
FLOAT_REFERENCES["cvt.rn.f16.f64"] = ("f16", convert("f16", "f64", "rn"))
FLOAT_REFERENCES["cvt.rn.bf16.f64"] = ("bf16", convert("bf16", "f64", "rn"))
FLOAT_REFERENCES["cvt.f32.f16"] = ("f32", convert("f32", "f16", "rn"))
FLOAT_REFERENCES["cvt.f64.f32"] = ("f64", convert("f64", "f32", "rn"))
FLOAT_REFERENCES["cvt.ftz.f64.f32"] = ("f64", convert("f64", "f32", "rn", ftz=True))
FLOAT_REFERENCES["cvt.f64.f16"] = ("f64", convert("f64", "f16", "rn"))
FLOAT_REFERENCES["cvt.f64.bf16"] = ("f64", convert("f64", "bf16", "rn"))
for _rnd in ("rn", "rz", "rm", "rp"):
    FLOAT_REFERENCES[f"cvt.{_rnd}.bf16.f16"] = ("bf16", convert("bf16", "f16", _rnd))
    FLOAT_REFERENCES[f"cvt.{_rnd}.f16.bf16"] = ("f16", convert("f16", "bf16", _rnd))
    FLOAT_REFERENCES[f"cvt.{_rnd}.bf16.s32"] = ("bf16", convert("bf16", "s32", _rnd))
    FLOAT_REFERENCES[f"cvt.{_rnd}.bf16.u64"] = ("bf16", convert("bf16", "u64", _rnd))


def round_to_integer(rnd: str, fmt: str):
    """cvt.rni/rzi/rmi/rpi between equal float types: the value rounded to an integer in the mode, the sign of a
    zero result kept; NaN and infinities pass."""
    def ref(a, b, c):
        x = source_value(a, fmt)
        if math.isnan(x) or math.isinf(x):
            return float_bits(x, fmt)
        v = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}[rnd](x)
        return float_bits(math.copysign(float(v), x), fmt)
    return ref


for _rnd in ("rni", "rzi", "rmi", "rpi"):
    FLOAT_REFERENCES[f"cvt.{_rnd}.bf16.bf16"] = ("bf16", round_to_integer(_rnd, "bf16"))
    FLOAT_REFERENCES[f"cvt.{_rnd}.f16.f16"] = ("f16", round_to_integer(_rnd, "f16"))
    FLOAT_REFERENCES[f"cvt.{_rnd}.f32.f32"] = ("f32", round_to_integer(_rnd, "f32"))
    FLOAT_REFERENCES[f"cvt.{_rnd}.f64.f64"] = ("f64", round_to_integer(_rnd, "f64"))


# ---------------------------------------------------------------- IEEE arithmetic, from exact rationals

def _flushed(x: float, fmt: str) -> float:
    """.ftz: a subnormal of `fmt` as zero of its sign."""
    tiny = 2.0 ** FORMATS[fmt][1]
    return math.copysign(0.0, x) if 0 < abs(x) < tiny else x


def _special(op: str, xs):
    """The IEEE result where an operand is NaN or infinite or a division by zero, as a Python float (None when
    the operands are finite and the operation is exact-rational)."""
    if any(math.isnan(x) for x in xs):
        return math.nan
    if op in ("div", "rcp"):
        a, b = xs if op == "div" else (1.0, xs[0])
        if b == 0:
            return math.nan if a == 0 else math.copysign(math.inf, a) * math.copysign(1.0, b)
        if math.isinf(a) and math.isinf(b):
            return math.nan
        if math.isinf(a) or math.isinf(b):
            return a / b if math.isinf(b) else math.copysign(math.inf, a) * math.copysign(1.0, b)
        return None
    if op == "sqrt":
        x = xs[0]
        if x < 0:
            return math.nan
        return x if math.isinf(x) or x == 0 else None
    if not any(math.isinf(x) for x in xs):
        return None
    if op == "fma":
        a, b, c = xs
        if (math.isinf(a) or math.isinf(b)) and (a == 0 or b == 0):
            return math.nan
        if math.isfinite(a) and math.isfinite(b):
            return c  # c infinite: the exact product is finite, though a * b in floats may overflow
        return a * b + c  # an infinite product: Python's float arithmetic follows IEEE here
    a, b = xs
    return {"add": a + b, "sub": a - b, "mul": a * b}[op]


def _exact_zero_sign(op: str, xs) -> float:
    """The sign IEEE 754 gives an exact zero result in round-to-nearest."""
    if op == "mul":
        return math.copysign(1.0, xs[0]) * math.copysign(1.0, xs[1])
    if op in ("div",):
        return math.copysign(1.0, xs[0]) * math.copysign(1.0, xs[1])
    if op == "sqrt":
        return math.copysign(1.0, xs[0])
    terms = {"add": (xs[0], xs[1]), "sub": (xs[0], -xs[1])}.get(op)
    if op == "fma":
        terms = (math.copysign(1.0, xs[0]) * math.copysign(1.0, xs[1]) * 0.0 if xs[0] * xs[1] == 0 else xs[0] * xs[1],
                 xs[2])
    if all(t == 0 for t in terms) and all(math.copysign(1.0, t) < 0 for t in terms):
        return -1.0
    return 1.0


def _sqrt_exact(q, fmt: str) -> float:
    """sqrt of a positive rational rounded to nearest even in `fmt`: an integer square root of the value scaled
    far past the format's precision, with a sticky bit."""
    from fractions import Fraction
    shift = 2 * (FORMATS[fmt][0] + 1100)
    scaled = q * Fraction(2) ** shift
    n = scaled.numerator // scaled.denominator
    root = math.isqrt(n)
    exact = root * root == n and scaled.denominator == 1
    value = Fraction(root) + (0 if exact else Fraction(1, 2 ** 40))  # below the root's next integer: a sticky bit
    return round_exact(value / Fraction(2) ** (shift // 2), fmt, "rn")


def ieee(op: str, fmt: str, ftz: bool = False):
    """add/sub/mul/fma/div/sqrt/rcp .rn on `fmt` words: the exact result rounded once to nearest even (.ftz:
    subnormal operands and results as zeros of their sign)."""
    from fractions import Fraction
    n = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "rcp": 1}[op]
    dec = f32 if fmt == "f32" else f64

    def ref(*words):
        xs = [dec(w) for w in words[:n]]
        if ftz:
            xs = [_flushed(x, fmt) for x in xs]
        r = _special(op, xs)
        if r is None:
            q = [Fraction(x) for x in xs]
            if op == "sqrt":
                r = _sqrt_exact(q[0], fmt)
            else:
                exact = {"add": lambda: q[0] + q[1], "sub": lambda: q[0] - q[1], "mul": lambda: q[0] * q[1],
                         "div": lambda: q[0] / q[1], "rcp": lambda: 1 / q[0],
                         "fma": lambda: q[0] * q[1] + q[2]}[op]()
                r = round_exact(exact, fmt, "rn")
                if exact == 0:
                    r = math.copysign(0.0, _exact_zero_sign(op, xs))
                elif r == 0:
                    r = math.copysign(0.0, exact)
        if ftz:
            r = _flushed(r, fmt)
        return float_bits(r, fmt)
    return ref


for _fmt in ("f32", "f64"):
    for _op in ("add", "sub", "mul"):
        FLOAT_REFERENCES[f"{_op}.{_fmt}"] = (_fmt, ieee(_op, _fmt))
    for _op in ("fma", "div", "sqrt", "rcp"):
        FLOAT_REFERENCES[f"{_op}.rn.{_fmt}"] = (_fmt, ieee(_op, _fmt))
for _op in ("add", "sub", "mul"):
    FLOAT_REFERENCES[f"{_op}.ftz.f32"] = ("f32", ieee(_op, "f32", ftz=True))
for _op in ("div", "sqrt", "rcp"):
    FLOAT_REFERENCES[f"{_op}.rn.ftz.f32"] = ("f32", ieee(_op, "f32", ftz=True))


# ---------------------------------------------------------------- memory: widths, extension, atomics

def load_extend(t: str, reg: int):
    """ld of type t into a wider register: the low bits of the stored word, sign-extended for .s types and
    zero-extended otherwise."""
    w = int(t[1:])
    return lambda a, b, c: (signed(a, w) if t[0] == "s" else a & mask(w)) & mask(reg)


def atom32(op: str, t: str):
    """atom on a 32-bit word that starts at a: d = old | new << 32 (inc wraps to 0 past b; dec wraps to b at 0 or
    above b)."""
    def ref(a, b, c):
        old, v = a & M32, b & M32
        x, y = (signed(old, 32), signed(v, 32)) if t[0] == "s" else (old, v)
        new = {"inc": 0 if old >= v else old + 1, "dec": v if old == 0 or old > v else old - 1, "add": old + v,
               "exch": v, "min": min(x, y), "max": max(x, y), "and": old & v, "or": old | v, "xor": old ^ v,
               "cas": (c & M32) if old == v else old}[op]
        return old | ((new & M32) << 32)
    return ref


def atom64(op: str, t: str):
    """atom on a 64-bit word that starts at a: d = new ^ old."""
    def ref(a, b, c):
        x, y = (signed(a, 64), signed(b, 64)) if t[0] == "s" else (a, b)
        new = {"add": a + b, "min": min(x, y), "max": max(x, y), "and": a & b, "exch": b,
               "cas": c if a == b else a}[op]
        return (new & mask(64)) ^ a
    return ref


for _t in ("s8", "u8", "b8", "s16", "u16", "b16"):
    REFERENCES[f"ld.global.{_t}.to.b32"] = load_extend(_t, 32)
for _t in ("s32", "u32"):
    REFERENCES[f"ld.global.{_t}.to.b64"] = load_extend(_t, 64)
for _t in ("s8", "u8", "s16"):
    REFERENCES[f"ld.shared.{_t}.to.b64"] = load_extend(_t, 64)
REFERENCES["st.global.b8.from.b32"] = lambda a, b, c: (b & ~(0xFF << 8)) | ((a & 0xFF) << 8)
REFERENCES["st.global.b16.from.b32"] = lambda a, b, c: (b & ~(0xFFFF << 16)) | ((a & 0xFFFF) << 16)
for _name in CASES:
    _p = _name.split(".")
    if _p[0] == "atom" and _p[-1] in ("u32", "s32", "b32"):
        REFERENCES[_name] = atom32(_p[2], _p[3])
    elif _p[0] == "atom" and _p[-1] in ("u64", "s64", "b64"):
        REFERENCES[_name] = atom64(_p[2], _p[3])


# ---------------------------------------------------------------- scalar video instructions

def _ext(word: int, t: str) -> int:
    return signed(word, 32) if t == "s32" else word & M32


def _sat(v: int, t: str) -> int:
    lo, hi = (-(1 << 31), (1 << 31) - 1) if t == "s32" else (0, M32)
    return min(max(v, lo), hi)


def video_ref(name: str):
    """Scalar video instructions as an H100 (sm_90) computes them (measured; the ISA's stages differ where noted):
    the sources extended by their types and the operation exact, except vmad, which sign-extends a, b and c
    whatever their types (its product and sum exact, .shr7/.shr15 an arithmetic shift, or a logical one of the
    64-bit two's complement word when both sources are .u32, .sat clamping to the range of that signedness).
    .sat: vshl/vshr keep the ISA's 34-bit signed result and clamp it to the destination type; the others clamp to
    .s32, or for .u32 give 0 below zero and the low 32 bits from 2^32 up. The .min/.max secondary operation
    compares a key of the result with c extended by the destination type, signed for .s32 and unsigned for .u32:
    vadd/vsub's low 32 bits with bit 31 copied into bit 32, vmin/vmax/vabsdiff's 34-bit result; .add adds c.
    vshl/vshr: the count clamped to 32 (.clamp) or taken mod 32 (.wrap)."""
    p = name.split(".")
    op = p[0]

    def ref(a, b, c):
        if op == "vset":
            at, bt, cmp = p[1], p[2], p[3]
            x, y = _ext(a, at), _ext(b, bt)
            r = int({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[cmp])
            return (r + (c & M32)) & M32 if name.endswith(".add") else r
        dt, at, bt = p[1], p[2], p[3]
        mods = p[4:]
        if op == "vmad":
            signed_final = not (at == bt == "u32")
            r = signed(a, 32) * signed(b, 32) + signed(c, 32)
            if "shr7" in mods or "shr15" in mods:
                n = 7 if "shr7" in mods else 15
                r = r >> n if signed_final else (r & mask(64)) >> n
            return (_sat(r, "s32" if signed_final else "u32") if "sat" in mods else r) & M32
        x, y = _ext(a, at), _ext(b, bt)
        if op in ("vshl", "vshr"):
            n = min(b & M32, 32) if "clamp" in mods else b & 31
            r = x << n if op == "vshl" else x >> n
            if "sat" in mods:
                r = _sat(signed(r, 34), dt)
        else:
            r = {"vadd": x + y, "vsub": x - y, "vabsdiff": abs(x - y), "vmin": min(x, y), "vmax": max(x, y)}[op]
            if "sat" in mods:
                r = _sat(r, dt) if dt == "s32" else (0 if r < 0 else r & M32)
        op2 = next((m for m in mods if m in ("add", "min", "max")), None)
        if op2 == "add":
            r += _ext(c, dt)
        elif op2 is not None:
            if op in ("vadd", "vsub"):
                key = (r & M32) | (bit(r, 31) << 32)
                key = signed(key, 33) if dt == "s32" else key
            else:
                key = signed(r, 34) if dt == "s32" else r & mask(34)
            z = _ext(c, dt)
            r = r if (key >= z if op2 == "max" else key <= z) else z
        return r & M32
    return ref


for _name in CASES:
    if _name.split(".")[0] in ("vadd", "vsub", "vabsdiff", "vmin", "vmax", "vshl", "vshr", "vmad", "vset"):
        REFERENCES[_name] = video_ref(_name)


# ---------------------------------------------------------------- warp-wide forms, a warp of rows at a time

def _warps(x):
    return np.asarray([None if v is None else int(v) for v in x], dtype=object).reshape(-1, 32)


def _bits_of(flags) -> int:
    return sum(int(bool(f)) << i for i, f in enumerate(flags))


def warp_reference(name: str, a, b, c) -> list[int]:
    """The words the warp-wide forms give each row, from their ISA definitions over the 32 lanes of its warp
    (every lane takes part): ballot of bit 0; all/any/uni of a lane bit that is a's bit 0 in odd CTAs and 0 in
    even ones; redux over the lanes' low words; match.any the lanes holding the same value; match.all the whole
    mask and true when every lane holds one value (0 and false otherwise)."""
    out = []
    cta_odd = [(w * 32 // 128) & 1 for w in range(N // 32)]
    if name.startswith("even."):  # the even lanes' result over the even lanes, 0 in the odd ones
        even = warp_reference(name[5:], *([v if i % 2 == 0 else None for i, v in enumerate(x)] for x in (a, b, c)))
        return [v if i % 2 == 0 else 0 for i, v in enumerate(even)]
    for w, lanes in enumerate(_warps(a)):
        members = [i for i, v in enumerate(lanes) if v is not None]
        low = [v & M32 for v in lanes if v is not None]
        kind = name.split(".")
        if name == "elect.sync":  # the lowest member leads: d its lane number, p (bit 8 here) true there
            out += [members[0] | (256 if i == members[0] else 0) for i in range(32)]
        elif name == "vote.sync.ballot.b32":
            out += [sum((lanes[i] & 1) << i for i in members)] * 32
        elif kind[0] == "vote":
            bits = [v & cta_odd[w] for v in low]
            r = {"all": all(bits), "any": any(bits), "uni": len(set(bits)) == 1}[kind[2]]
            out += [int(r)] * 32
        elif kind[0] == "redux":
            vals = [signed(v, 32) for v in low] if kind[3] == "s32" else low
            r = {"add": sum(vals), "min": min(vals), "max": max(vals)}.get(kind[2])
            if r is None:
                r = low[0]
                for v in low[1:]:
                    r = {"and": r & v, "or": r | v, "xor": r ^ v}[kind[2]]
            out += [r & M32] * 32
        elif name.startswith("match.any"):
            vals = [None if v is None else v & 3 for v in lanes] if kind[-1] == "b64" else \
                [None if v is None else v & M32 & 3 for v in lanes]
            out += [_bits_of(u is not None and u == v for u in vals) for v in vals]
        else:  # match.all
            vals = [v & cta_odd[w] for v in low]
            same = len(set(vals)) == 1
            out += [(M32 if same else 0) | (int(same) << 32)] * 32
    return out


WARP_CASES = sorted(n for n in CASES if n.split(".")[0] in ("vote", "redux", "match", "even"))


@pytest.mark.parametrize("name", WARP_CASES)
def test_breadth_warp_form_matches_the_isa_reference(name):
    """vote / redux / match over full warps: every row's word equals the ISA's result for its warp."""
    args = rows(CASES[name].kinds, seed=len(name))
    got = [int(v) for v in interpret(name, args)]
    want = warp_reference(name, *args)
    bad = [f"row {i}: interpreter {g:#x}, ISA {w:#x}" for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, f"{name}: {len(bad)} rows differ\n" + "\n".join(bad[:10])


# ---------------------------------------------------------------- the comparison with the references

def test_every_reference_names_a_case():
    assert set(REFERENCES) <= set(CASES), sorted(set(REFERENCES) - set(CASES))
    assert len(REFERENCES) > 150


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_breadth_kernel_matches_the_isa_reference(name):
    """The interpreter's word of every row equals the reference (the ISA's definition, or what an H100 computes
    where the two differ; division by zero left out)."""
    case = CASES[name]
    args = rows(case.kinds, seed=len(name))
    got = interpret(name, args)
    keep = np.ones(N, bool) if case.skip is None else ~case.skip(*args)
    ref = REFERENCES[name]
    bad = [f"row {i}: a={int(args[0][i]):#x} b={int(args[1][i]):#x} c={int(args[2][i]):#x}: "
           f"interpreter {int(got[i]):#x}, ISA {ref(*(int(x[i]) for x in args)):#x}"
           for i in np.flatnonzero(keep) if int(got[i]) != ref(*(int(x[i]) for x in args))]
    assert not bad, f"{name}: {len(bad)} rows differ\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("name", sorted(FLOAT_REFERENCES))
def test_breadth_conversion_rounds_once_from_the_exact_value(name):
    """The conversions that round: the interpreter's bits equal the exact source value rounded once in the
    instruction's mode (any NaN for a NaN)."""
    fmt, ref = FLOAT_REFERENCES[name]
    args = rows(CASES[name].kinds, seed=len(name))
    got = interpret(name, args)
    width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[fmt]
    bad = []
    for i in range(N):
        want, have = ref(*(int(x[i]) for x in args)), int(got[i]) & mask(width)
        if want != have and not (_is_nan_bits(want, fmt) and _is_nan_bits(have, fmt)):
            bad.append(f"row {i}: a={int(args[0][i]):#x}: interpreter {have:#x}, exact rounding {want:#x}")
    assert not bad, f"{name}: {len(bad)} rows differ\n" + "\n".join(bad[:10])


def half_pair(fmt: str, mode: str, relu: bool = False, satfinite: bool = False):
    """cvt.mode{.relu}{.satfinite}.{fmt}x2.f32 d, a, b: a converted into the high half, b into the low half, each
    rounded once; .satfinite turns an infinite or overflowing result into the largest finite value of its sign
    (NaN stays NaN); .relu turns a negative result into zero and a NaN into the canonical NaN 0x7FFF."""
    one = convert(fmt, "f32", mode)
    top = 0x7BFF if fmt == "f16" else 0x7F7F
    inf = 0x7C00 if fmt == "f16" else 0x7F80

    def lane(word):
        bits = one(word, 0, 0)
        nan = _is_nan_bits(bits, fmt)
        if satfinite and not nan and bits & 0x7FFF == inf:
            bits = (bits & 0x8000) | top
        if relu:
            bits = 0x7FFF if nan else (0 if bits & 0x8000 else bits)
        return bits

    return lambda a, b, c: (lane(a & M32) << 16) | lane(b & M32)


PAIRS = {"cvt.rn.f16x2.f32": half_pair("f16", "rn"), "cvt.rz.f16x2.f32": half_pair("f16", "rz"),
         "cvt.rn.bf16x2.f32": half_pair("bf16", "rn"), "cvt.rn.relu.f16x2.f32": half_pair("f16", "rn", relu=True),
         "cvt.rn.satfinite.f16x2.f32": half_pair("f16", "rn", satfinite=True),
         "cvt.rz.relu.satfinite.bf16x2.f32": half_pair("bf16", "rz", relu=True, satfinite=True)}


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_breadth_pair_conversion_rounds_each_half_once(name):
    """The f32-pair conversions: each half is its f32 operand rounded once (a high, b low), with .relu and
    .satfinite applied as the ISA states; a NaN equals any NaN unless .relu fixes it to the canonical one."""
    fmt = "bf16" if "bf16" in name else "f16"
    args = rows(CASES[name].kinds, seed=len(name))
    got = interpret(name, args)
    bad = []
    for i in range(N):
        want, have = PAIRS[name](*(int(x[i]) for x in args)), int(got[i]) & M32
        halves = [(want >> s & 0xFFFF, have >> s & 0xFFFF) for s in (0, 16)]
        if not all(w == h or (_is_nan_bits(w, fmt) and _is_nan_bits(h, fmt)) for w, h in halves):
            bad.append(f"row {i}: a={int(args[0][i]):#x} b={int(args[1][i]):#x}: interpreter {have:#x}, ISA {want:#x}")
    assert not bad, f"{name}: {len(bad)} rows differ\n" + "\n".join(bad[:10])


def special_register(name: str, row: int) -> int:
    """What the special register of case `name` holds in thread `row` of the breadth launch (16 CTAs of 128 along
    x, no cluster: the ISA makes each CTA a cluster of one, so the cluster ids are the CTA's)."""
    lane, cta, block = row % 32, row // 128, 128
    return {"laneid": lane, "lanemask_eq": 1 << lane, "lanemask_lt": (1 << lane) - 1,
            "lanemask_le": (1 << (lane + 1)) - 1, "lanemask_gt": M32 & ~((1 << (lane + 1)) - 1),
            "lanemask_ge": M32 & ~((1 << lane) - 1), "ntid.x": block, "ntid.y": 1, "nctaid.x": N // block,
            "nctaid.z": 1, "tid.y": 0, "ctaid.y": 0, "dynamic_smem_size": 0, "clusterid.x": cta,
            "nclusterid.x": N // block, "cluster_ctaid.x": 0, "cluster_nctaid.x": 1, "cluster_ctarank": 0,
            "cluster_nctarank": 1, "is_explicit_cluster": 0}[name[4:]]


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.startswith("mov.")))
def test_breadth_special_register_holds_what_the_launch_gives(name):
    """Lane masks, sizes and cluster registers of a launch without clusters, in every thread."""
    args = rows(CASES[name].kinds)
    got = [int(v) for v in interpret(name, args)]
    bad = [f"row {i}: interpreter {g:#x}, launch {special_register(name, i):#x}" for i, g in enumerate(got)
           if g != special_register(name, i)]
    assert not bad, f"{name}: {len(bad)} rows differ\n" + "\n".join(bad[:10])


# ---------------------------------------------------------------- defects: each test states the ISA rule it checks

def _run_rows(name: str, *cols) -> np.ndarray:
    """The interpreter's words for case `name` on the given leading rows of a, b, c (the other rows zero)."""
    args = [np.zeros(N, np.uint64) for _ in range(3)]
    for arg, col in zip(args, cols):
        arg[:len(col)] = np.array(col, dtype=np.uint64)
    return interpret(name, args)[:len(cols[0])]


def _f32_words(*xs) -> list[int]:
    return [int(np.array(x, np.float32).view(np.uint32)) for x in xs]


def test_div_approx_f32_of_a_subnormal_divisor_is_the_quotient():
    """PTX ISA, div: div.approx.f32 computes d = a * (1/b), and for |b| = 2^-149 the f32 reciprocal would
    overflow to an infinity. Measured on an H100 (sm_90), it does not: the result is the quotient (the words
    below are the GPU's, from rows the breadth test ran), 2^-149 / 2^-149 is 1 and 0 / -2^-149 is -0."""
    tiny = 0x00000001  # 2^-149
    a = [0x00000001, 0x80000001, 0x0020AAC8, 0x00000000, 0x3380D959, 0x3F800000]
    b = [tiny, tiny, tiny, tiny | 0x80000000, tiny | 0x80000000, 0x00800000 << 1]  # the last: 2^-125
    got = [int(w) & M32 for w in _run_rows("div.approx.f32", a, b)]
    assert got == [0x3F800000, 0xBF800000, 0x4A02AB20, 0x80000000, 0xFE00D959, 0x7E000000], [hex(w) for w in got]


@pytest.mark.parametrize("name, nans, one", [("fma.rn.relu.f16", (0x7E00, 0xFE01, 0x7C01), 0x3C00),
                                             ("fma.rn.relu.bf16", (0x7FC0, 0xFFC1, 0x7F81), 0x3F80)])
def test_fma_relu_makes_a_nan_result_the_canonical_nan(name, nans, one):
    """PTX ISA, half precision fma (and CUDA's __hfma_relu, which it implements): .relu clamps a negative result
    to 0, and a NaN result is converted to the canonical NaN (0x7FFF), whatever NaN the inputs held; inf * 0 is
    such a NaN result too."""
    inf = 0x7F80 if "bf16" in name else 0x7C00
    a = [*nans, inf, one]
    b = [one, one, one, 0, one]
    c = [0, 0, 0, 0, nans[1]]
    got = [int(w) for w in _run_rows(name, a, b, c)]
    assert got == [0x7FFF] * 5, [hex(w) for w in got]


def test_the_gpu_comparison_passes_equal_words_and_catches_a_changed_bit():
    """The GPU test's comparison, run here with the interpreter's words on both sides: no case reports a row,
    and a flipped high bit in one row of an exactly compared case is reported."""
    from test_interp_gpu_breadth import differences
    reported, missed = {}, []
    for name in sorted(CASES):
        args = rows(CASES[name].kinds, seed=len(name))
        d = interpret(name, args)
        if differences(name, args, d, d.copy()):
            reported[name] = differences(name, args, d, d.copy())[:2]
        changed = d.copy()
        changed[7] ^= np.uint64(1 << 30)
        if CASES[name].compare == "int" and not differences(name, args, d, changed):
            missed.append(name)
    assert not reported and not missed, (reported, missed)


#: rows whose exact result is -0, from the GPU breadth run on an H100 (sm_90): (case, a, b, c)
NEGATIVE_ZERO_ROWS = [
    ("cvt.sat.f32.f32", 0x80000000, 0, 0), ("cvt.ftz.sat.f32.f32", 0x80000000, 0, 0),
    ("cvt.rn.sat.f16.f32", 0x80000000, 0, 0), ("cvt.rn.sat.f32.f64", 0x8000000000000000, 0, 0),
    ("mul.sat.f32", 0, 0x80000001, 0), ("sub.sat.f32", 0x80000000, 0, 0), ("add.sat.f16", 0x8000, 0x8000, 1),
    ("mul.sat.f16", 0, 0x8000, 0), ("fma.rn.ftz.sat.f32", 0, 0xDF000000, 0x80000001),
    ("fma.rn.relu.f16", 1, 0x8000, 0x8000), ("fma.rn.relu.bf16", 0, 0x8080, 0x8000),
]


@pytest.mark.parametrize("name, a, b, c", NEGATIVE_ZERO_ROWS)
def test_sat_and_relu_make_negative_zero_positive(name, a, b, c):
    """.sat clamps to [0, 1] and .relu clamps negative results to 0; the ISA does not say what -0 gives, and an
    H100 (sm_90) gives +0 (the word 0) in every one of these forms, whose exact result is -0."""
    assert int(_run_rows(name, [a], [b], [c])[0]) == 0


@pytest.mark.parametrize("name, want", [
    ("cvt.rn.tf32.f32", [0x7FFFE000] * 4), ("cvt.rz.tf32.f32", [0x7FFFE000] * 4),
    ("cvt.rn.relu.tf32.f32", [0x7FFFE000] * 4), ("cvt.rz.relu.tf32.f32", [0x7FFFE000] * 4),
    ("cvt.rna.tf32.f32", [0x7F800000, 0x7FC00000, 0xFFC00000, 0xFFB6A000]),
    ("cvt.rna.satfinite.tf32.f32", [0x7F7FE000, 0x7FBFE000, 0xFFBFE000, 0xFFB68000, 0x7F9F6000, 0xFF806000,
                                    0x7F7FE000])])
def test_tf32_conversion_of_a_nan(name, want):
    """cvt.tf32.f32 of NaN (the ISA names no result): an H100 (sm_90) gives 0x7FFFE000 for .rn and .rz, with or
    without .relu, and rounds the bits as for a number with .rna, so 0x7F800001 becomes the infinity 0x7F800000;
    with .rna.satfinite an infinite or NaN source gives its bits truncated less one tf32 unit (0x7F800001 ->
    0x7F7FE000, the largest finite value; 0x7F9F906A -> 0x7F9F6000, not its rounding less one unit), and a
    finite one rounded to infinity the largest finite value."""
    words = [0x7F800001, 0x7FC00000, 0xFFC00001, 0xFFB6A0D0, 0x7F9F906A, 0xFF809FB6, 0x7F7FF000]
    got = [int(w) & M32 for w in _run_rows(name, words)][:len(want)]
    assert got == want, [hex(w) for w in got]


@pytest.mark.parametrize("name, gpu_word", [("sin.approx.f32", 0xBF01A1A1), ("cos.approx.f32", 0x3F5CC0AA),
                                            ("sin.approx.ftz.f32", 0xBF01A1A1), ("cos.approx.ftz.f32", 0x3F5CC0AA)])
def test_the_gpu_comparison_allows_sin_cos_their_range_reduction_error(name, gpu_word):
    """The words an H100 (sm_90) gave for sin/cos.approx.f32 of 100.0 (6.9e-6 and 4.1e-6 from the exact values,
    from reducing 100 to turns in f32) pass the GPU test's comparison; a word 2^-15 further off does not."""
    from test_interp_gpu_breadth import differences
    args = [np.zeros(N, np.uint64) for _ in range(3)]
    args[0][:] = 0x42C80000  # 100.0
    d = interpret(name, args)
    want = np.full(N, gpu_word, np.uint64)
    assert not differences(name, args, want, d)
    off = np.full(N, _f32_words(f32(gpu_word) - 2.0 ** -15)[0], np.uint64)
    assert len(differences(name, args, off, d)) == N
