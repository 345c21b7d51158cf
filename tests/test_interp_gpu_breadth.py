"""GPU differential, in breadth: one instruction form per kernel, the same rows of operands on the GPU and in the
interpreter, results compared bit for bit.

Each case is a few lines of PTX between a fixed prologue and epilogue (`module_text`): thread i reads the 64-bit
words a[i], b[i], c[i] and writes the 64-bit word d[i].  The prologue splits each word into its halves (%ra/%rah,
%ha ...), so a case reads operands of 16, 32 or 64 bits; the epilogue stores %d.  The rows (`rows`) are every
pair of the width's corner values (0, 1, -1, the least and greatest signed values, shift counts at and past the
width, NaN, infinities, signed zeros, subnormals, rounding ties) and then random words.

Integer results must be identical.  Float results must be identical except that any NaN equals any NaN (the
interpreter does not model NaN payloads outside min/max), and `.approx` forms agree within their ulp bound.
Integer division by zero is left out (its result is unspecified in the PTX ISA).  tests/test_interp_review.py
assembles every kernel with ptxas for sm_90a and runs it on the interpreter here, so CI checks the same kernels
without a GPU."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.testing.interp_strategies import poison

N = 2048  # rows (threads): 16 CTAs of 128
BLOCK = 128


def module_text(body: str) -> str:
    """A module with one kernel `k(a, b, c, d)`: before `body`, %a %b %c hold this thread's 64-bit words,
    %ra/%rah their low/high 32 bits (%rb/%rbh, %rc/%rch), %ha %hb %hc their low 16 bits, %dp the global address
    of its word of d and %sp the shared address of its 8-byte slot of `sbuf`; %d starts at zero and is stored to
    d after `body`."""
    return f""".version 8.3
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd)
{{
.reg .pred %p<8>;
.reg .b16 %ha, %hb, %hc, %hd, %hx, %hy;
.reg .b32 %ra, %rb, %rc, %rah, %rbh, %rch, %rd, %re, %rx, %ry, %rz, %i, %n;
.reg .b64 %a, %b, %c, %d, %e, %x, %off, %dp;
.reg .u32 %sp;
.shared .align 8 .b64 sbuf[{BLOCK}];
mov.u32 %i, %ctaid.x;
mov.u32 %n, %ntid.x;
mov.u32 %rx, %tid.x;
mad.lo.u32 %i, %i, %n, %rx;
mul.wide.u32 %off, %i, 8;
ld.param.u64 %x, [pa];
cvta.to.global.u64 %x, %x;
add.u64 %x, %x, %off;
ld.global.b64 %a, [%x];
ld.param.u64 %x, [pb];
cvta.to.global.u64 %x, %x;
add.u64 %x, %x, %off;
ld.global.b64 %b, [%x];
ld.param.u64 %x, [pc];
cvta.to.global.u64 %x, %x;
add.u64 %x, %x, %off;
ld.global.b64 %c, [%x];
mov.b64 {{%ra, %rah}}, %a;
mov.b64 {{%rb, %rbh}}, %b;
mov.b64 {{%rc, %rch}}, %c;
mov.b32 {{%ha, %hx}}, %ra;
mov.b32 {{%hb, %hx}}, %rb;
mov.b32 {{%hc, %hx}}, %rc;
ld.param.u64 %dp, [pd];
cvta.to.global.u64 %dp, %dp;
add.u64 %dp, %dp, %off;
mov.u32 %sp, sbuf;
mov.u32 %rx, %tid.x;
mad.lo.u32 %sp, %rx, 8, %sp;
mov.b64 %d, 0;
{body}
st.global.b64 [%dp], %d;
ret;
}}
"""


# ---------------------------------------------------------------- operand rows

F32 = np.float32
_F32_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, 0.49999997, 1e-45, -1e-45, 1.1754942e-38,
                1.1754944e-38, -1.1754944e-38, 3e-39, 2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 128, 2.0 ** 32, 2.0 ** 63,
                -2.0 ** 63, 2.0 ** 64, 2.0 ** 15, 32767.5, -32768.5, 255.5, 65535.5, 1e10, -1e10, 3.4028235e38,
                -3.4028235e38, np.inf, -np.inf, np.nan, 100.0, 0.1, -7.25, 65504.0, 65520.0, 6e-8, 3e-8, 1e-5]
_F64_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 5e-324, -5e-324, 2.2250738585072014e-308,
                1e-310, 2.0 ** 31 - 0.5, -2.0 ** 31 - 0.5, 2.0 ** 31, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 1e300,
                -1e300, 3.4028235677973366e38, 3.4028235677973366e38 * (1 + 2.0 ** -25), 1e-40, 1.401298464324817e-45,
                7.006492321624085e-46, np.inf, -np.inf, np.nan, 0.1, -7.25, 1.0 + 2.0 ** -24, 1.0 + 3 * 2.0 ** -25]
_NEG_NAN32 = 0xFFC00001  # a NaN with a payload and the sign set
_SNAN32 = 0x7F800001


def int_corners(bits: int) -> list[int]:
    """Corner words of a `bits`-wide integer (as unsigned): small values, all ones, the signed extremes, the
    shift counts around the width, alternating bit patterns."""
    m = (1 << bits) - 1
    vals = [0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 257,
            m, m - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << (bits - 1)) + 1,
            0x5555555555555555 & m, 0xAAAAAAAAAAAAAAAA & m, 0x80 * 0x0101010101010101 & m, 0x12345678ABCDEF01 & m]
    return sorted({v & m for v in vals})


def f32_corners() -> list[int]:
    """f32 corner values as bits: signed zeros, subnormals, the normal boundary, ties, the integer ranges' edges,
    the largest finite, infinities and NaNs (a quiet one, a signalling one, a negative one with a payload)."""
    bits = [int(np.array(v, F32).view(np.uint32)) for v in _F32_SPECIAL]
    return sorted(set(bits + [_NEG_NAN32, _SNAN32]))


def f64_corners() -> list[int]:
    bits = [int(np.array(v, np.float64).view(np.uint64)) for v in _F64_SPECIAL]
    return sorted(set(bits + [0xFFF8000000000001]))


def f16_corners() -> list[int]:
    """f16 corners as bits: zeros, the least subnormal and normal, ties of the conversions, 65504, infinities,
    NaNs."""
    return sorted({0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3800, 0x3E00, 0x4100,
                   0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE01, 0x7C01, 0x5640, 0x1234})


def bf16_corners() -> list[int]:
    return sorted({0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x3F80, 0xBF80, 0x3F00, 0x3FC0, 0x4020,
                   0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x4F00, 0x1234})


CORNERS = {"i8": lambda: int_corners(8), "i16": lambda: int_corners(16), "i32": lambda: int_corners(32),
           "i64": lambda: int_corners(64), "f32": f32_corners, "f64": f64_corners, "f16": f16_corners,
           "bf16": bf16_corners}


def rows(kinds: tuple, seed: int = 0) -> list[np.ndarray]:
    """The operand words a, b, c (uint64 arrays of N): for the first two operands every pair of their kinds'
    corners (a drawn three quarters of N of them where there are more; the third operand drawn from its
    corners), then random words; `kinds` names each operand's corner set ("i32", "f32", "f16" ...)."""
    rng = np.random.default_rng(seed)
    kinds = tuple(kinds) + ("i64",) * (3 - len(kinds))
    corner = [np.array(CORNERS[k](), dtype=np.uint64) for k in kinds]
    first = np.repeat(corner[0], len(corner[1]))
    second = np.tile(corner[1], len(corner[0]))
    if len(first) > 3 * N // 4:
        pick = np.sort(rng.choice(len(first), 3 * N // 4, replace=False))
        first, second = first[pick], second[pick]
    out = []
    for i, pairs in enumerate((first, second, None)):
        rand = rng.integers(0, 2 ** 63, N, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, N, dtype=np.uint64)
        col = rng.choice(corner[i], N) if pairs is None else np.concatenate([pairs, rand[len(pairs):]])
        # a quarter of the random rows take a corner value, so corners meet random operands as well
        mix = rng.random(N) < 0.25
        mix[:len(first)] = False
        col = np.where(mix, rng.choice(corner[i], N), col)
        out.append(col.astype(np.uint64))
    return out


# ---------------------------------------------------------------- the cases

@dataclass(frozen=True)
class Case:
    """One kernel: its body, the corner sets of a b c, how results compare ("int": bits; "f32"/"f64"/"f16"/
    "bf16"/"f16x2": bits with NaN equal to NaN; "approx32"/"approx64"/"approx16": equal, both NaN, or within
    `rtol` relative plus `atol` absolute plus `atol_per_a` times |a|), and the rows left out (`skip(a, b, c)` ->
    bool array)."""
    body: str
    kinds: tuple = ("i32", "i32", "i32")
    compare: str = "int"
    rtol: float = 0.0
    atol: float = 0.0
    skip: object = None
    atol_per_a: float = 0.0


def _b_zero(bits):
    return lambda a, b, c: (b & np.uint64((1 << bits) - 1)) == 0


def _zx32(r="%rd"):
    return f"cvt.u64.u32 %d, {r};"


def _zx16(r="%hd"):
    return f"cvt.u64.u16 %d, {r};"


def _pred(p="%p1"):
    return f"selp.u32 %rd, 1, 0, {p};\n" + _zx32()


CASES: dict[str, Case] = {}


def _add(name, body, **kw):
    CASES[name] = Case(body, **kw)


# shifts: counts 0..width and beyond (the count is a .u32 register)
for t, w, r, z in (("b32", 32, "r", _zx32), ("s32", 32, "r", _zx32), ("u32", 32, "r", _zx32),
                   ("b16", 16, "h", _zx16), ("s16", 16, "h", _zx16), ("u16", 16, "h", _zx16)):
    for op in ("shl", "shr"):
        if op == "shl" and t[0] != "b":
            continue
        _add(f"{op}.{t}", f"{op}.{t} %{r}d, %{r}a, %rb;\n{z()}", kinds=(f"i{w}", "i32"))
for t in ("b64", "s64", "u64"):
    for op in ("shl", "shr"):
        if op == "shl" and t != "b64":
            continue
        _add(f"{op}.{t}", f"{op}.{t} %d, %a, %rb;", kinds=("i64", "i32"))

# bit fields: bfe (pos b, len c), bfi (insert a into b at pos c, len c's high word), with values past the width
for t in ("u32", "s32"):
    _add(f"bfe.{t}", f"bfe.{t} %rd, %ra, %rb, %rc;\n{_zx32()}", kinds=("i32", "i32", "i32"))
for t in ("u64", "s64"):
    _add(f"bfe.{t}", f"bfe.{t} %d, %a, %rb, %rc;", kinds=("i64", "i32", "i32"))
_add("bfi.b32", f"bfi.b32 %rd, %ra, %rah, %rb, %rc;\n{_zx32()}", kinds=("i64", "i32", "i32"))
_add("bfi.b64", "bfi.b64 %d, %a, %c, %rb, %rbh;", kinds=("i64", "i64", "i64"))

# prmt: the generic selector and every mode
_add("prmt.b32", f"prmt.b32 %rd, %ra, %rah, %rb;\n{_zx32()}", kinds=("i64", "i32"))
for mode in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16"):
    _add(f"prmt.b32.{mode}", f"prmt.b32.{mode} %rd, %ra, %rah, %rb;\n{_zx32()}", kinds=("i64", "i32"))

# funnel shifts
for d in ("l", "r"):
    for mode in ("wrap", "clamp"):
        _add(f"shf.{d}.{mode}.b32", f"shf.{d}.{mode}.b32 %rd, %ra, %rah, %rb;\n{_zx32()}", kinds=("i64", "i32"))

# bit counts
for op in ("popc", "clz"):
    _add(f"{op}.b32", f"{op}.b32 %rd, %ra;\n{_zx32()}", kinds=("i32", "i32"))
    _add(f"{op}.b64", f"{op}.b64 %rd, %a;\n{_zx32()}", kinds=("i64", "i32"))
_add("brev.b32", f"brev.b32 %rd, %ra;\n{_zx32()}", kinds=("i32", "i32"))
_add("brev.b64", "brev.b64 %d, %a;", kinds=("i64", "i32"))
for t in ("u32", "s32"):
    for sa in ("", ".shiftamt"):
        _add(f"bfind{sa}.{t}", f"bfind{sa}.{t} %rd, %ra;\n{_zx32()}", kinds=("i32", "i32"))
for t in ("u64", "s64"):
    for sa in ("", ".shiftamt"):
        _add(f"bfind{sa}.{t}", f"bfind{sa}.{t} %rd, %a;\n{_zx32()}", kinds=("i64", "i32"))
# fns: base 0..31, offset a small signed number (c's low byte as s8)
_add("fns.b32", f"and.b32 %rx, %rb, 31;\ncvt.s32.s8 %ry, %rc;\nfns.b32 %rd, %ra, %rx, %ry;\n{_zx32()}",
     kinds=("i32", "i32", "i8"))
for mode in ("clamp", "wrap"):
    _add(f"bmsk.{mode}.b32", f"bmsk.{mode}.b32 %rd, %ra, %rb;\n{_zx32()}", kinds=("i32", "i32"))
    for t in ("s32", "u32"):
        _add(f"szext.{mode}.{t}", f"szext.{mode}.{t} %rd, %ra, %rb;\n{_zx32()}", kinds=("i32", "i32"))
for lut in (0x00, 0xFF, 0x96, 0xE8, 0xCA, 0x1E, 0x80, 0x7F, 0x6A):
    _add(f"lop3.b32.{lut:#04x}", f"lop3.b32 %rd, %ra, %rb, %rc, {lut:#04x};\n{_zx32()}", kinds=("i32", "i32", "i32"))
_add("cnot.b32", f"cnot.b32 %rd, %ra;\n{_zx32()}")
_add("cnot.b16", f"cnot.b16 %hd, %ha;\n{_zx16()}", kinds=("i16", "i16"))

# integer arithmetic
for t, w in (("u32", 32), ("s32", 32), ("u16", 16), ("s16", 16), ("u64", 64), ("s64", 64)):
    r = {32: ("%rd", "%ra", "%rb"), 16: ("%hd", "%ha", "%hb"), 64: ("%d", "%a", "%b")}[w]
    z = {32: _zx32(), 16: _zx16(), 64: ""}[w]
    for op in ("div", "rem"):
        _add(f"{op}.{t}", f"{op}.{t} {r[0]}, {r[1]}, {r[2]};\n{z}", kinds=(f"i{w}", f"i{w}"), skip=_b_zero(w))
    for mode in ("hi", "lo"):
        _add(f"mul.{mode}.{t}", f"mul.{mode}.{t} {r[0]}, {r[1]}, {r[2]};\n{z}", kinds=(f"i{w}", f"i{w}"))
    for op in ("min", "max"):
        _add(f"{op}.{t}", f"{op}.{t} {r[0]}, {r[1]}, {r[2]};\n{z}", kinds=(f"i{w}", f"i{w}"))
    if t[0] == "s":
        for op in ("abs", "neg"):
            _add(f"{op}.{t}", f"{op}.{t} {r[0]}, {r[1]};\n{z}", kinds=(f"i{w}", f"i{w}"))
for t in ("u32", "s32"):
    _add(f"mul.wide.{t}", f"mul.wide.{t} %d, %ra, %rb;", kinds=("i32", "i32"))
    _add(f"mad.wide.{t}", f"mad.wide.{t} %d, %ra, %rb, %c;", kinds=("i32", "i32", "i64"))
    for mode in ("hi", "lo"):
        _add(f"mad.{mode}.{t}", f"mad.{mode}.{t} %rd, %ra, %rb, %rc;\n{_zx32()}")
        _add(f"mad24.{mode}.{t}", f"mad24.{mode}.{t} %rd, %ra, %rb, %rc;\n{_zx32()}")
for t in ("u16", "s16"):
    _add(f"mul.wide.{t}", f"mul.wide.{t} %rd, %ha, %hb;\n{_zx32()}", kinds=("i16", "i16"))
for t in ("u64", "s64"):
    _add(f"mad.hi.{t}", f"mad.hi.{t} %d, %a, %b, %c;", kinds=("i64", "i64", "i64"))
_add("mad.hi.sat.s32", f"mad.hi.sat.s32 %rd, %ra, %rb, %rc;\n{_zx32()}")
_add("mad24.hi.sat.s32", f"mad24.hi.sat.s32 %rd, %ra, %rb, %rc;\n{_zx32()}")
for op in ("add", "sub"):
    _add(f"{op}.sat.s32", f"{op}.sat.s32 %rd, %ra, %rb;\n{_zx32()}")
for op in ("min", "max"):
    _add(f"{op}.relu.s32", f"{op}.relu.s32 %rd, %ra, %rb;\n{_zx32()}")

# carry chains: 64- and 96-bit sums and differences built from 32-bit words
_add("add.cc.addc", "add.cc.u32 %rx, %ra, %rb;\naddc.cc.u32 %ry, %rah, %rbh;\naddc.u32 %rz, %rc, %rch;\n"
     "mov.b64 %d, {%rx, %ry};\nmov.b64 %e, {%rz, %rz};\nxor.b64 %d, %d, %e;", kinds=("i64", "i64", "i64"))
_add("sub.cc.subc", "sub.cc.u32 %rx, %ra, %rb;\nsubc.cc.u32 %ry, %rah, %rbh;\nsubc.u32 %rz, %rc, %rch;\n"
     "mov.b64 %d, {%rx, %ry};\nmov.b64 %e, {%rz, %rz};\nxor.b64 %d, %d, %e;", kinds=("i64", "i64", "i64"))
_add("mad.cc.madc", "mad.lo.cc.u32 %rx, %ra, %rb, %rc;\nmadc.hi.cc.u32 %ry, %ra, %rb, %rch;\naddc.u32 %rz, 0, 0;\n"
     "mov.b64 %d, {%rx, %ry};\nmov.b64 %e, {%rz, %rz};\nxor.b64 %d, %d, %e;", kinds=("i64", "i64", "i64"))
_add("mad.cc.s32", "mad.hi.cc.s32 %rx, %ra, %rb, %rc;\nmadc.lo.cc.s32 %ry, %rah, %rbh, %rch;\naddc.s32 %rz, 0, 0;\n"
     "mov.b64 %d, {%rx, %ry};\nmov.b64 %e, {%rz, %rz};\nxor.b64 %d, %d, %e;", kinds=("i32", "i32", "i32"))
_add("add.cc.u64", "add.cc.u64 %d, %a, %b;\naddc.u32 %rz, 0, 0;\ncvt.u64.u32 %e, %rz;\nxor.b64 %d, %d, %e;",
     kinds=("i64", "i64"))
_add("sub.cc.u64", "sub.cc.u64 %d, %a, %b;\nsubc.u32 %rz, 0, 0;\ncvt.u64.u32 %e, %rz;\nxor.b64 %d, %d, %e;",
     kinds=("i64", "i64"))

# dp4a / dp2a
for ta in ("u32", "s32"):
    for tb in ("u32", "s32"):
        _add(f"dp4a.{ta}.{tb}", f"dp4a.{ta}.{tb} %rd, %ra, %rb, %rc;\n{_zx32()}")
        for mode in ("lo", "hi"):
            _add(f"dp2a.{mode}.{ta}.{tb}", f"dp2a.{mode}.{ta}.{tb} %rd, %ra, %rb, %rc;\n{_zx32()}")

def _fits(src: str, dst: str) -> bool:
    """Whether every value of integer type `src` fits `dst` (ptxas then refuses .sat)."""
    lo = (lambda t: -(1 << (int(t[1:]) - 1)) if t[0] == "s" else 0)
    hi = (lambda t: (1 << (int(t[1:]) - (t[0] == "s"))) - 1)
    return lo(dst) <= lo(src) and hi(src) <= hi(dst)


# cvt: integer to integer (truncation, sign extension, saturation)
for dst, src, w in (("s8", "s32", 32), ("u8", "s32", 32), ("s16", "u32", 32), ("u16", "s32", 32), ("s32", "s8", 32),
                    ("u32", "s8", 32), ("s32", "s16", 32), ("u32", "u16", 32), ("s8", "u32", 32)):
    for sat in ("", ".sat") if not _fits(src, dst) else ("",):
        _add(f"cvt{sat}.{dst}.{src}", f"cvt{sat}.{dst}.{src} %rd, %ra;\n{_zx32()}", kinds=("i32", "i32"))
for dst, src in (("s32", "s64"), ("u32", "s64"), ("u32", "u64"), ("s32", "u64")):
    for sat in ("", ".sat"):
        _add(f"cvt{sat}.{dst}.{src}", f"cvt{sat}.{dst}.{src} %rd, %a;\n{_zx32()}", kinds=("i64", "i32"))
for dst, src in (("s64", "s32"), ("u64", "s32"), ("s64", "u32"), ("u64", "s64"), ("s64", "u64")):
    for sat in ("", ".sat") if not _fits(src, dst) else ("",):
        reg = "%a" if src.endswith("64") else "%ra"
        _add(f"cvt{sat}.{dst}.{src}", f"cvt{sat}.{dst}.{src} %d, {reg};", kinds=("i64", "i32"))

# cvt: float to integer in every integer rounding mode (NaN, infinities and out-of-range values saturate)
for src, kind, reg in (("f32", "f32", "%ra"), ("f64", "f64", "%a"), ("f16", "f16", "%ha")):
    for dst in ("s32", "u32", "s64", "u64", "s16", "u16", "s8", "u8"):
        for rnd in ("rni", "rzi", "rmi", "rpi"):
            if dst.endswith("64"):
                out, z = "%d", ""
            elif dst.endswith("16"):
                out, z = "%hd", _zx16()
            else:
                out, z = "%rd", _zx32()
            if dst.endswith("8"):
                out, z = "%rd", _zx32()
            _add(f"cvt.{rnd}.{dst}.{src}", f"cvt.{rnd}.{dst}.{src} {out}, {reg};\n{z}", kinds=(kind, "i32"))
for dst in ("s32", "u32"):
    _add(f"cvt.rni.ftz.{dst}.f32", f"cvt.rni.ftz.{dst}.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"))
    _add(f"cvt.rzi.sat.{dst}.f32", f"cvt.rzi.sat.{dst}.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"))

# cvt: integer to float
for dst, dreg, z, cmp in (("f32", "%rd", _zx32(), "f32"), ("f16", "%hd", _zx16(), "f16"), ("f64", "%d", "", "f64")):
    for src, sreg, kind in (("s32", "%ra", "i32"), ("u32", "%ra", "i32"), ("s64", "%a", "i64"), ("u64", "%a", "i64"),
                            ("s16", "%ha", "i16"), ("u16", "%ha", "i16")):
        for rnd in ("rn", "rz"):
            _add(f"cvt.{rnd}.{dst}.{src}", f"cvt.{rnd}.{dst}.{src} {dreg}, {sreg};\n{z}", kinds=(kind, "i32"),
                 compare=cmp)
_add("cvt.rn.sat.f32.s32", f"cvt.rn.sat.f32.s32 %rd, %ra;\n{_zx32()}", compare="f32")

# cvt: float to float, narrowing (every rounding mode), widening, rounding to an integer value, .sat, .ftz
for dst, dreg, z in (("f16", "%hd", _zx16()), ("bf16", "%hd", _zx16())):
    for rnd in ("rn", "rz", "rm", "rp"):
        if dst == "bf16" and rnd in ("rm", "rp"):
            continue
        _add(f"cvt.{rnd}.{dst}.f32", f"cvt.{rnd}.{dst}.f32 {dreg}, %ra;\n{z}", kinds=("f32", "i32"), compare=dst)
    _add(f"cvt.rn.{dst}.f64", f"cvt.rn.{dst}.f64 {dreg}, %a;\n{z}", kinds=("f64", "i32"), compare=dst)
    _add(f"cvt.rn.relu.{dst}.f32", f"cvt.rn.relu.{dst}.f32 {dreg}, %ra;\n{z}", kinds=("f32", "i32"), compare=dst)
_add("cvt.rn.f16x2.f32", f"cvt.rn.f16x2.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="f16x2")
_add("cvt.rn.bf16x2.f32", f"cvt.rn.bf16x2.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="bf16x2")
_add("cvt.rn.satfinite.f16x2.f32", f"cvt.rn.satfinite.f16x2.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"),
     compare="f16x2")
for rnd in ("rn", "rz", "rm", "rp"):
    _add(f"cvt.{rnd}.f32.f64", f"cvt.{rnd}.f32.f64 %rd, %a;\n{_zx32()}", kinds=("f64", "i32"), compare="f32")
    _add(f"cvt.{rnd}.ftz.f32.f64", f"cvt.{rnd}.ftz.f32.f64 %rd, %a;\n{_zx32()}", kinds=("f64", "i32"), compare="f32")
_add("cvt.rn.relu.f16x2.f32", f"cvt.rn.relu.f16x2.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="f16x2")
_add("cvt.rz.relu.satfinite.bf16x2.f32", f"cvt.rz.relu.satfinite.bf16x2.f32 %rd, %ra, %rb;\n{_zx32()}",
     kinds=("f32", "f32"), compare="bf16x2")
_add("cvt.rz.f16x2.f32", f"cvt.rz.f16x2.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="f16x2")

# narrow formats: fp8 pairs from f32 and f16x2 and back, tf32, cvt.pack (fp8 and NaN bits compare exactly)
for fmt in ("e4m3x2", "e5m2x2"):
    for relu in ("", ".relu"):
        _add(f"cvt.rn.satfinite{relu}.{fmt}.f32", f"cvt.rn.satfinite{relu}.{fmt}.f32 %hd, %ra, %rb;\n{_zx16()}",
             kinds=("f32", "f32"))
        _add(f"cvt.rn.satfinite{relu}.{fmt}.f16x2", f"cvt.rn.satfinite{relu}.{fmt}.f16x2 %hd, %ra;\n{_zx16()}",
             kinds=("i32", "i32"))
        _add(f"cvt.rn{relu}.f16x2.{fmt}", f"cvt.rn{relu}.f16x2.{fmt} %rd, %ha;\n{_zx32()}", kinds=("i16", "i32"),
             compare="f16x2")
for form in ("rna", "rna.satfinite", "rn", "rz", "rn.relu", "rz.relu"):
    _add(f"cvt.{form}.tf32.f32", f"cvt.{form}.tf32.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"))
for t in ("u8", "s8"):
    _add(f"cvt.pack.sat.{t}.s32.b32", f"cvt.pack.sat.{t}.s32.b32 %rd, %ra, %rb, %rc;\n{_zx32()}")
for t in ("u16", "s16"):
    _add(f"cvt.pack.sat.{t}.s32", f"cvt.pack.sat.{t}.s32 %rd, %ra, %rb;\n{_zx32()}")
# bf16 to and from the other types (sm_90)
for rnd in ("rn", "rz", "rm", "rp"):
    _add(f"cvt.{rnd}.bf16.f16", f"cvt.{rnd}.bf16.f16 %hd, %ha;\n{_zx16()}", kinds=("f16", "i32"), compare="bf16")
    _add(f"cvt.{rnd}.f16.bf16", f"cvt.{rnd}.f16.bf16 %hd, %ha;\n{_zx16()}", kinds=("bf16", "i32"), compare="f16")
    _add(f"cvt.{rnd}.bf16.s32", f"cvt.{rnd}.bf16.s32 %hd, %ra;\n{_zx16()}", kinds=("i32", "i32"), compare="bf16")
    _add(f"cvt.{rnd}.bf16.u64", f"cvt.{rnd}.bf16.u64 %hd, %a;\n{_zx16()}", kinds=("i64", "i32"), compare="bf16")
for rnd in ("rni", "rzi", "rmi", "rpi"):
    _add(f"cvt.{rnd}.s16.bf16", f"cvt.{rnd}.s16.bf16 %hd, %ha;\n{_zx16()}", kinds=("bf16", "i32"))
    _add(f"cvt.{rnd}.u32.bf16", f"cvt.{rnd}.u32.bf16 %rd, %ha;\n{_zx32()}", kinds=("bf16", "i32"))
    _add(f"cvt.{rnd}.bf16.bf16", f"cvt.{rnd}.bf16.bf16 %hd, %ha;\n{_zx16()}", kinds=("bf16", "i32"), compare="bf16")
_add("cvt.f64.bf16", "cvt.f64.bf16 %d, %ha;", kinds=("bf16", "i32"), compare="f64")
_add("cvt.f32.f16", f"cvt.f32.f16 %rd, %ha;\n{_zx32()}", kinds=("f16", "i32"), compare="f32")
_add("cvt.ftz.f32.f16", f"cvt.ftz.f32.f16 %rd, %ha;\n{_zx32()}", kinds=("f16", "i32"), compare="f32")
_add("cvt.f32.bf16", f"cvt.f32.bf16 %rd, %ha;\n{_zx32()}", kinds=("bf16", "i32"), compare="f32")
_add("cvt.f64.f32", "cvt.f64.f32 %d, %ra;", kinds=("f32", "i32"), compare="f64")
_add("cvt.ftz.f64.f32", "cvt.ftz.f64.f32 %d, %ra;", kinds=("f32", "i32"), compare="f64")
_add("cvt.f64.f16", "cvt.f64.f16 %d, %ha;", kinds=("f16", "i32"), compare="f64")
for rnd in ("rni", "rzi", "rmi", "rpi"):
    _add(f"cvt.{rnd}.f32.f32", f"cvt.{rnd}.f32.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"), compare="f32")
    _add(f"cvt.{rnd}.ftz.f32.f32", f"cvt.{rnd}.ftz.f32.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"),
         compare="f32")
    _add(f"cvt.{rnd}.f64.f64", f"cvt.{rnd}.f64.f64 %d, %a;", kinds=("f64", "i32"), compare="f64")
    _add(f"cvt.{rnd}.f16.f16", f"cvt.{rnd}.f16.f16 %hd, %ha;\n{_zx16()}", kinds=("f16", "i32"), compare="f16")
_add("cvt.sat.f32.f32", f"cvt.sat.f32.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"), compare="f32")
_add("cvt.ftz.sat.f32.f32", f"cvt.ftz.sat.f32.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "i32"), compare="f32")
_add("cvt.rn.sat.f16.f32", f"cvt.rn.sat.f16.f32 %hd, %ra;\n{_zx16()}", kinds=("f32", "i32"), compare="f16")
_add("cvt.rn.sat.f32.f64", f"cvt.rn.sat.f32.f64 %rd, %a;\n{_zx32()}", kinds=("f64", "i32"), compare="f32")

# float comparisons: every comparison, with .ftz, on f32 / f64 / f16 / bf16, and set / slct / selp on them
_FCMP = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
for cmp in _FCMP:
    _add(f"setp.{cmp}.f32", f"setp.{cmp}.f32 %p1, %ra, %rb;\n{_pred()}", kinds=("f32", "f32"))
    _add(f"setp.{cmp}.ftz.f32", f"setp.{cmp}.ftz.f32 %p1, %ra, %rb;\n{_pred()}", kinds=("f32", "f32"))
    _add(f"setp.{cmp}.f64", f"setp.{cmp}.f64 %p1, %a, %b;\n{_pred()}", kinds=("f64", "f64"))
    _add(f"setp.{cmp}.f16", f"setp.{cmp}.f16 %p1, %ha, %hb;\n{_pred()}", kinds=("f16", "f16"))
    _add(f"setp.{cmp}.bf16", f"setp.{cmp}.bf16 %p1, %ha, %hb;\n{_pred()}", kinds=("bf16", "bf16"))
for cmp in ("lt", "geu", "nan"):
    _add(f"set.{cmp}.u32.f32", f"set.{cmp}.u32.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"))
    _add(f"set.{cmp}.f32.f32", f"set.{cmp}.f32.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"))
    _add(f"set.{cmp}.ftz.s32.f32", f"set.{cmp}.ftz.s32.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"))
# set into half-precision and 16-bit destinations, and from scalar halves (1.0 of the destination's format, or all
# ones, per half for pairs)
for cmp in ("lt", "nan"):
    for dt, st, kinds in (("f16", "f16", ("f16", "f16")), ("u16", "f16", ("f16", "f16")), ("s16", "bf16", ("bf16", "bf16")),
                          ("bf16", "f16", ("f16", "f16")), ("bf16", "bf16", ("bf16", "bf16"))):
        _add(f"set.{cmp}.{dt}.{st}", f"set.{cmp}.{dt}.{st} %hd, %ha, %hb;\n{_zx16()}", kinds=kinds)
    _add(f"set.{cmp}.u32.f16", f"set.{cmp}.u32.f16 %rd, %ha, %hb;\n{_zx32()}", kinds=("f16", "f16"))
    _add(f"set.{cmp}.ftz.f16.f32", f"set.{cmp}.ftz.f16.f32 %hd, %ra, %rb;\n{_zx16()}", kinds=("f32", "f32"))
    _add(f"set.{cmp}.bf16.f64", f"set.{cmp}.bf16.f64 %hd, %a, %b;\n{_zx16()}", kinds=("f64", "f64"))
    _add(f"set.{cmp}.f16.s32", f"set.{cmp if cmp != 'nan' else 'ge'}.f16.s32 %hd, %ra, %rb;\n{_zx16()}",
         kinds=("i32", "i32"))
    _add(f"set.{cmp}.f16x2.f16x2", f"set.{cmp}.f16x2.f16x2 %rd, %ra, %rb;\n{_zx32()}", kinds=("f16", "f16"))
    _add(f"set.{cmp}.bf16x2.bf16x2", f"set.{cmp}.bf16x2.bf16x2 %rd, %ra, %rb;\n{_zx32()}", kinds=("bf16", "bf16"))
_add("setp.lt.and.f32", "setp.gt.s32 %p2, %rc, 0;\nsetp.lt.and.f32 %p1|%p3, %ra, %rb, %p2;\n"
     "selp.u32 %rd, 2, 0, %p3;\nselp.u32 %rx, 1, 0, %p1;\nor.b32 %rd, %rd, %rx;\n" + _zx32(), kinds=("f32", "f32", "i32"))
_add("setp.equ.xor.f32", "setp.gt.s32 %p2, %rc, 0;\nsetp.equ.xor.f32 %p1|%p3, %ra, %rb, %p2;\n"
     "selp.u32 %rd, 2, 0, %p3;\nselp.u32 %rx, 1, 0, %p1;\nor.b32 %rd, %rd, %rx;\n" + _zx32(), kinds=("f32", "f32", "i32"))
for cmp in ("lo", "ls", "hi", "hs", "lt", "ge"):
    t = "u32" if cmp in ("lo", "ls", "hi", "hs") else "s32"
    _add(f"setp.{cmp}.{t}", f"setp.{cmp}.{t} %p1, %ra, %rb;\n{_pred()}")
_add("slct.s32.f32", f"slct.s32.f32 %rd, %ra, %rb, %rc;\n{_zx32()}", kinds=("i32", "i32", "f32"))
_add("slct.ftz.s32.f32", f"slct.ftz.s32.f32 %rd, %ra, %rb, %rc;\n{_zx32()}", kinds=("i32", "i32", "f32"))
_add("slct.f32.s32", f"slct.f32.s32 %rd, %ra, %rb, %rc;\n{_zx32()}", kinds=("f32", "f32", "i32"), compare="f32")
for test in ("finite", "infinite", "number", "notanumber", "normal", "subnormal"):
    _add(f"testp.{test}.f32", f"testp.{test}.f32 %p1, %ra;\n{_pred()}", kinds=("f32", "i32"))
    _add(f"testp.{test}.f64", f"testp.{test}.f64 %p1, %a;\n{_pred()}", kinds=("f64", "i32"))

# float bit operations and exactly rounded arithmetic on the corners
_add("copysign.f32", f"copysign.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"))
_add("copysign.f64", "copysign.f64 %d, %a, %b;", kinds=("f64", "f64"))
for t, r, z, kind in (("f32", ("%rd", "%ra", "%rb", "%rc"), _zx32(), "f32"), ("f64", ("%d", "%a", "%b", "%c"), "", "f64")):
    for op in ("abs", "neg"):
        _add(f"{op}.{t}", f"{op}.{t} {r[0]}, {r[1]};\n{z}", kinds=(kind, kind), compare=t)
    for op in ("add", "sub", "mul"):
        _add(f"{op}.{t}", f"{op}.{t} {r[0]}, {r[1]}, {r[2]};\n{z}", kinds=(kind, kind), compare=t)
    _add(f"fma.rn.{t}", f"fma.rn.{t} {r[0]}, {r[1]}, {r[2]}, {r[3]};\n{z}", kinds=(kind, kind, kind), compare=t)
    _add(f"div.rn.{t}", f"div.rn.{t} {r[0]}, {r[1]}, {r[2]};\n{z}", kinds=(kind, kind), compare=t)
    _add(f"sqrt.rn.{t}", f"sqrt.rn.{t} {r[0]}, {r[1]};\n{z}", kinds=(kind, kind), compare=t)
    _add(f"rcp.rn.{t}", f"rcp.rn.{t} {r[0]}, {r[1]};\n{z}", kinds=(kind, kind), compare=t)
for op in ("abs", "neg"):
    _add(f"{op}.ftz.f32", f"{op}.ftz.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
for op in ("add", "sub", "mul"):
    _add(f"{op}.ftz.f32", f"{op}.ftz.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
    _add(f"{op}.sat.f32", f"{op}.sat.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
_add("fma.rn.ftz.sat.f32", f"fma.rn.ftz.sat.f32 %rd, %ra, %rb, %rc;\n{_zx32()}", kinds=("f32", "f32", "f32"),
     compare="f32")
_add("div.rn.ftz.f32", f"div.rn.ftz.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
_add("sqrt.rn.ftz.f32", f"sqrt.rn.ftz.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
_add("rcp.rn.ftz.f32", f"rcp.rn.ftz.f32 %rd, %ra;\n{_zx32()}", kinds=("f32", "f32"), compare="f32")

# half precision arithmetic on the corners (scalar and packed)
for t, kind in (("f16", "f16"), ("bf16", "bf16")):
    for op in ("add", "sub", "mul"):
        _add(f"{op}.rn.{t}", f"{op}.rn.{t} %hd, %ha, %hb;\n{_zx16()}", kinds=(kind, kind), compare=t)
    _add(f"fma.rn.{t}", f"fma.rn.{t} %hd, %ha, %hb, %hc;\n{_zx16()}", kinds=(kind, kind, kind), compare=t)
    _add(f"fma.rn.relu.{t}", f"fma.rn.relu.{t} %hd, %ha, %hb, %hc;\n{_zx16()}", kinds=(kind, kind, kind), compare=t)
    _add(f"neg.{t}", f"neg.{t} %hd, %ha;\n{_zx16()}", kinds=(kind, kind), compare=t)
    _add(f"abs.{t}", f"abs.{t} %hd, %ha;\n{_zx16()}", kinds=(kind, kind), compare=t)
for op in ("add", "mul"):
    _add(f"{op}.ftz.f16", f"{op}.ftz.f16 %hd, %ha, %hb;\n{_zx16()}", kinds=("f16", "f16"), compare="f16")
    _add(f"{op}.sat.f16", f"{op}.sat.f16 %hd, %ha, %hb;\n{_zx16()}", kinds=("f16", "f16"), compare="f16")
_add("fma.rn.f16x2", "mov.b32 %rx, {%ha, %hb};\nmov.b32 %ry, {%hb, %hc};\n"
     f"fma.rn.f16x2 %rd, %rx, %ry, %rx;\n{_zx32()}", kinds=("f16", "f16", "f16"), compare="f16x2")

# approximate functions: within their error bound, with the special values exact
#: relative bound, absolute bound of each approximate function (the PTX ISA's, rounded up); sin and cos are
#: compared for |a| <= 128 only, and their bound grows with |a| (`_SINCOS_PER_A`)
_APPROX = {"rcp": (2.0 ** -20, 0.0), "sqrt": (2.0 ** -20, 0.0), "rsqrt": (2.0 ** -20, 0.0), "ex2": (2.0 ** -20, 0.0),
           "lg2": (2.0 ** -20, 2.0 ** -20), "sin": (0.0, 2.0 ** -18), "cos": (0.0, 2.0 ** -18),
           "tanh": (2.0 ** -10, 2.0 ** -20)}


#: sin/cos.approx reduce a to turns through an f32 product with 1/(2 pi), whose rounding (and the constant's)
#: moves the angle by up to about |a| * 2^-24 radians each: an H100 (sm_90) gives sin(100) and cos(100) 6.9e-6
#: and 4.1e-6 from the exact values, past 2^-18; so the bound adds |a| * 2^-23 (1.2e-5 at 100)
_SINCOS_PER_A = 2.0 ** -23


def _beyond_128(a, b, c):
    return ~(np.abs((a & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)) <= 128)


for op, (rtol, atol) in _APPROX.items():
    forms = [f"{op}.approx.f32", f"{op}.approx.ftz.f32"] if op != "tanh" else ["tanh.approx.f32"]
    for form in forms:
        sincos = op in ("sin", "cos")
        _add(form, f"{form} %rd, %ra;\n{_zx32()}", kinds=("f32", "f32"), compare="approx32", rtol=rtol, atol=atol,
             skip=_beyond_128 if sincos else None, atol_per_a=_SINCOS_PER_A if sincos else 0.0)
_add("rcp.approx.ftz.f64", "rcp.approx.ftz.f64 %d, %a;", kinds=("f64", "f64"), compare="approx64", rtol=2.0 ** -12)
_add("rsqrt.approx.f64", "rsqrt.approx.f64 %d, %a;", kinds=("f64", "f64"), compare="approx64", rtol=2.0 ** -12)
_add("div.approx.f32", f"div.approx.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="approx32",
     rtol=2.0 ** -20)
_add("div.full.f32", f"div.full.f32 %rd, %ra, %rb;\n{_zx32()}", kinds=("f32", "f32"), compare="approx32",
     rtol=2.0 ** -20)
_add("ex2.approx.f16", f"ex2.approx.f16 %hd, %ha;\n{_zx16()}", kinds=("f16", "f16"), compare="approx16", rtol=2.0 ** -9)


# warp-wide: every lane of every warp takes part (full member mask); the values come from the rows
_BIT0 = "and.b32 %rx, %ra, 1;\nsetp.ne.u32 %p1, %rx, 0;\n"
_add("vote.sync.ballot.b32", _BIT0 + f"vote.sync.ballot.b32 %rd, %p1, 0xffffffff;\n{_zx32()}")
for mode in ("all", "any", "uni"):
    # even CTAs vote on a bit that is the same in every lane, odd CTAs on a random one
    _add(f"vote.sync.{mode}.pred", "mov.u32 %ry, %ctaid.x;\nand.b32 %ry, %ry, 1;\nand.b32 %rx, %ra, %ry;\n"
         f"setp.ne.u32 %p1, %rx, 0;\nvote.sync.{mode}.pred %p2, %p1, 0xffffffff;\n{_pred('%p2')}")
for op, t in (("add", "u32"), ("add", "s32"), ("min", "u32"), ("min", "s32"), ("max", "u32"), ("max", "s32"),
              ("and", "b32"), ("or", "b32"), ("xor", "b32")):
    _add(f"redux.sync.{op}.{t}", f"redux.sync.{op}.{t} %rd, %ra, 0xffffffff;\n{_zx32()}")
_add("match.any.sync.b32", f"and.b32 %rx, %ra, 3;\nmatch.any.sync.b32 %rd, %rx, 0xffffffff;\n{_zx32()}")
_add("match.any.sync.b64", "and.b64 %x, %a, 3;\nmatch.any.sync.b64 %rd, %x, 0xffffffff;\n" + _zx32(),
     kinds=("i64", "i32"))
_add("match.all.sync.b32", "mov.u32 %ry, %ctaid.x;\nand.b32 %ry, %ry, 1;\nand.b32 %rx, %ra, %ry;\n"
     "match.all.sync.b32 %rd|%p1, %rx, 0xffffffff;\nselp.u32 %ry, 1, 0, %p1;\nmov.b64 %d, {%rd, %ry};")

# the same over the even lanes only (member mask 0x55555555), the odd lanes branching around the instruction
_EVEN = "mov.u32 %rd, 0;\nmov.u32 %rx, %laneid;\nand.b32 %rx, %rx, 1;\nsetp.ne.u32 %p3, %rx, 0;\n@%p3 bra SKIP;\n"
_add("even.redux.sync.add.u32", _EVEN + "redux.sync.add.u32 %rd, %ra, 0x55555555;\nSKIP:\n" + _zx32())
_add("even.redux.sync.max.s32", _EVEN + "redux.sync.max.s32 %rd, %ra, 0x55555555;\nSKIP:\n" + _zx32())
_add("even.vote.sync.ballot.b32", _EVEN + _BIT0 + "vote.sync.ballot.b32 %rd, %p1, 0x55555555;\nSKIP:\n" + _zx32())
_add("even.match.any.sync.b32", _EVEN + "and.b32 %ry, %ra, 3;\nmatch.any.sync.b32 %rd, %ry, 0x55555555;\nSKIP:\n"
     + _zx32())
_add("even.elect.sync", _EVEN + "elect.sync %rz|%p1, 0x55555555;\nselp.u32 %ry, 256, 0, %p1;\nor.b32 %rd, %rz, %ry;\n"
     "SKIP:\n" + _zx32())


# special registers that a launch of 16 CTAs of 128 threads (no cluster: each CTA a cluster of one) determines
for sreg in ("%laneid", "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge", "%ntid.x",
             "%ntid.y", "%nctaid.x", "%nctaid.z", "%tid.y", "%ctaid.y", "%dynamic_smem_size", "%clusterid.x",
             "%nclusterid.x", "%cluster_ctaid.x", "%cluster_nctaid.x", "%cluster_ctarank", "%cluster_nctarank",
             "%is_explicit_cluster"):
    _add(f"mov.{sreg[1:]}", f"mov.u32 %rd, {sreg};\n{_zx32()}" if sreg != "%is_explicit_cluster" else
         f"mov.pred %p1, {sreg};\n{_pred()}")


# scalar video instructions on whole words (the SIMD ones have their own GPU test)
for op in ("vadd", "vsub", "vabsdiff", "vmin", "vmax"):
    for dt, at, bt in (("u32", "u32", "u32"), ("s32", "s32", "s32"), ("s32", "u32", "s32"), ("u32", "s32", "u32")):
        for sat in ("", ".sat"):
            _add(f"{op}.{dt}.{at}.{bt}{sat}", f"{op}.{dt}.{at}.{bt}{sat} %rd, %ra, %rb;\n{_zx32()}")
        for op2 in ("add", "min", "max"):
            _add(f"{op}.{dt}.{at}.{bt}.{op2}", f"{op}.{dt}.{at}.{bt}.{op2} %rd, %ra, %rb, %rc;\n{_zx32()}")
for op in ("vshl", "vshr"):
    for dt, at in (("u32", "u32"), ("s32", "s32"), ("u32", "s32"), ("s32", "u32")):
        for mode in ("clamp", "wrap"):
            for sat in ("", ".sat"):
                _add(f"{op}.{dt}.{at}.u32{sat}.{mode}", f"{op}.{dt}.{at}.u32{sat}.{mode} %rd, %ra, %rb;\n{_zx32()}")
for dt, at, bt in (("u32", "u32", "u32"), ("s32", "s32", "s32"), ("s32", "u32", "s32"), ("u32", "s32", "s32")):
    for mods in ("", ".sat", ".shr7", ".shr15", ".sat.shr15"):
        _add(f"vmad.{dt}.{at}.{bt}{mods}", f"vmad.{dt}.{at}.{bt}{mods} %rd, %ra, %rb, %rc;\n{_zx32()}")
for at, bt in (("u32", "u32"), ("s32", "s32"), ("s32", "u32")):
    for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
        _add(f"vset.{at}.{bt}.{cmp}", f"vset.{at}.{bt}.{cmp} %rd, %ra, %rb;\n{_zx32()}")
    _add(f"vset.{at}.{bt}.lt.add", f"vset.{at}.{bt}.lt.add %rd, %ra, %rb, %rc;\n{_zx32()}")


# loads narrower than their register: .s types sign-extend, .u / .b zero-extend; stores keep the low bits
for t in ("s8", "u8", "b8", "s16", "u16", "b16", "s32", "u32"):
    _add(f"ld.global.{t}.to.b32" if t[1:] != "32" else f"ld.global.{t}.to.b64",
         f"st.global.b64 [%dp], %a;\nld.global.{t} %rd, [%dp];\n{_zx32()}" if t[1:] != "32" else
         f"st.global.b64 [%dp], %a;\nld.global.{t} %d, [%dp];", kinds=("i64", "i32"))
for t in ("s8", "u8", "s16"):
    _add(f"ld.shared.{t}.to.b64", f"st.shared.b64 [%sp], %a;\nld.shared.{t} %d, [%sp];", kinds=("i64", "i32"))
_add("st.global.b8.from.b32", "st.global.b64 [%dp], %b;\nst.global.b8 [%dp+1], %ra;\nld.global.b64 %d, [%dp];",
     kinds=("i64", "i64"))
_add("st.global.b16.from.b32", "st.global.b64 [%dp], %b;\nst.global.b16 [%dp+2], %ra;\nld.global.b64 %d, [%dp];",
     kinds=("i64", "i64"))


# atomics on this thread's own word (no two threads share one, so the result is determined): memory starts at a;
# d holds the old value and the new memory value (the new one only for floats)
for op, t in (("inc", "u32"), ("dec", "u32"), ("add", "u32"), ("exch", "b32"), ("min", "s32"), ("max", "s32"),
              ("min", "u32"), ("max", "u32"), ("and", "b32"), ("or", "b32"), ("xor", "b32")):
    for space, addr in (("global", "%dp"), ("shared", "%sp")):
        _add(f"atom.{space}.{op}.{t}", f"st.{space}.b32 [{addr}], %ra;\natom.{space}.{op}.{t} %rx, [{addr}], %rb;\n"
             f"ld.{space}.b32 %ry, [{addr}];\nmov.b64 %d, {{%rx, %ry}};")
_add("atom.global.cas.b32", "st.global.b32 [%dp], %ra;\natom.global.cas.b32 %rx, [%dp], %rb, %rc;\n"
     "ld.global.b32 %ry, [%dp];\nmov.b64 %d, {%rx, %ry};", kinds=("i32", "i32", "i32"))
_add("atom.global.cas.b64", "st.global.b64 [%dp], %a;\natom.global.cas.b64 %x, [%dp], %b, %c;\n"
     "ld.global.b64 %d, [%dp];\nxor.b64 %d, %d, %x;", kinds=("i64", "i64", "i64"))
for op, t in (("add", "u64"), ("min", "s64"), ("max", "u64"), ("and", "b64"), ("exch", "b64")):
    _add(f"atom.global.{op}.{t}", f"st.global.b64 [%dp], %a;\natom.global.{op}.{t} %x, [%dp], %b;\n"
         "ld.global.b64 %d, [%dp];\nxor.b64 %d, %d, %x;", kinds=("i64", "i64"))
for space, addr in (("global", "%dp"), ("shared", "%sp")):
    _add(f"atom.{space}.add.f32", f"st.{space}.b32 [{addr}], %ra;\natom.{space}.add.f32 %rx, [{addr}], %rb;\n"
         f"ld.{space}.b32 %rd, [{addr}];\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
    _add(f"red.{space}.add.f32", f"st.{space}.b32 [{addr}], %ra;\nred.{space}.add.f32 [{addr}], %rb;\n"
         f"ld.{space}.b32 %rd, [{addr}];\n{_zx32()}", kinds=("f32", "f32"), compare="f32")
    _add(f"atom.{space}.add.f64", f"st.{space}.b64 [{addr}], %a;\natom.{space}.add.f64 %x, [{addr}], %b;\n"
         f"ld.{space}.b64 %d, [{addr}];", kinds=("f64", "f64"), compare="f64")
    for t, kind in (("f16", "f16"), ("bf16", "bf16")):
        _add(f"atom.{space}.add.noftz.{t}", f"st.{space}.b16 [{addr}], %ha;\n"
             f"atom.{space}.add.noftz.{t} %hx, [{addr}], %hb;\nld.{space}.b16 %hd, [{addr}];\n{_zx16()}",
             kinds=(kind, kind), compare=t)


# .relu gives the canonical NaN (0x7FFF) for a NaN result and +0 for a negative one: these compare bit for bit
for _name in [n for n in CASES if ".relu." in n and n.split(".")[0] in ("fma", "cvt")]:
    CASES[_name] = Case(CASES[_name].body, CASES[_name].kinds, "int")


# ---------------------------------------------------------------- running and comparing

def module(name: str):
    """The parsed module of case `name`."""
    return pf.parse(module_text(CASES[name].body))


def interpret(name: str, args, check: bool = False) -> np.ndarray:
    """The interpreter's d over operand rows `args` = [a, b, c] (copies are taken); `check` raises on a finding
    (the rows of division by zero are one)."""
    d = poison(np.empty(N, np.uint64))
    interp.run(module(name), "k", grid=N // BLOCK, block=BLOCK, args=[*(x.copy() for x in args), d], check=check)
    return d


def on_gpu(name: str, args) -> np.ndarray:
    d = poison(np.empty(N, np.uint64))
    pf.load(module(name))["k"](N // BLOCK, BLOCK, *(x.copy() for x in args), d)
    return d


_FLOAT_VIEW = {"f32": (np.uint32, np.float32, 1), "f64": (np.uint64, np.float64, 1), "f16": (np.uint16, np.float16, 1),
               "f16x2": (np.uint16, np.float16, 2), "bf16": (np.uint16, None, 1), "bf16x2": (np.uint16, None, 2)}


def _float_lanes(words, compare):
    """The result words as (rows, lanes) float64 values of the compared format."""
    ut, ft, lanes = _FLOAT_VIEW[compare]
    bits = np.asarray(words, np.uint64)
    width = np.dtype(ut).itemsize * 8
    cols = [((bits >> np.uint64(width * i)) & np.uint64((1 << width) - 1)).astype(ut) for i in range(lanes)]
    if ft is None:  # bf16: the high half of an f32
        vals = [(c.astype(np.uint32) << np.uint32(16)).view(np.float32) for c in cols]
    else:
        vals = [c.view(ft) for c in cols]
    return np.stack([v.astype(np.float64) for v in vals], axis=1)


def differences(name: str, args, want, got) -> list[str]:
    """The rows where `got` (the interpreter's words) differs from `want` (the GPU's), as readable lines."""
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and infinite results are compared, not errors
        return _differences(name, args, want, got)


def _differences(name: str, args, want, got) -> list[str]:
    case = CASES[name]
    keep = np.ones(N, bool) if case.skip is None else ~case.skip(*args)
    want, got = np.asarray(want, np.uint64), np.asarray(got, np.uint64)
    if case.compare == "int":
        bad = (want != got) & keep
    elif case.compare.startswith("approx"):
        fmt = {"approx32": "f32", "approx64": "f64", "approx16": "f16"}[case.compare]
        w, g = _float_lanes(want, fmt)[:, 0], _float_lanes(got, fmt)[:, 0]
        both_nan = np.isnan(w) & np.isnan(g)
        same_special = (w == g) | both_nan
        tiny = {"f32": 2.0 ** -126, "f64": 2.0 ** -1022, "f16": 2.0 ** -14}[fmt]
        bound = case.rtol * np.abs(w) + case.atol + tiny
        if case.atol_per_a:
            bound = bound + case.atol_per_a * np.abs(_float_lanes(np.asarray(args[0], np.uint64), fmt)[:, 0])
        close = np.isfinite(w) & np.isfinite(g) & (np.abs(w - g) <= bound)
        bad = ~(same_special | close) & keep
    else:
        w, g = _float_lanes(want, case.compare), _float_lanes(got, case.compare)
        same_bits = want == got
        nan_ok = np.all((np.isnan(w) & np.isnan(g)) | (w == g) & (np.signbit(w) == np.signbit(g)), axis=1)
        bad = ~(same_bits | nan_ok) & keep
    return [f"row {i}: a={int(args[0][i]):#x} b={int(args[1][i]):#x} c={int(args[2][i]):#x}: GPU {int(want[i]):#x}, "
            f"interpreter {int(got[i]):#x}" for i in np.flatnonzero(bad)]


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_instruction_matches_the_interpreter(name):
    """Each form over its corner rows and random rows: the GPU's result words equal the interpreter's."""
    args = rows(CASES[name].kinds, seed=len(name))
    want, got = on_gpu(name, args), interpret(name, args)
    bad = differences(name, args, want, got)
    assert not bad, f"{name}: {len(bad)} rows differ\n" + "\n".join(bad[:20])
