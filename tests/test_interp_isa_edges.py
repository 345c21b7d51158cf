"""Interpreter results at the edges of the PTX ISA's definitions, each expected value worked out from the ISA's
text or pseudo-code in Python integers and IEEE bit patterns (not from the interpreter's code): carry chains
whose sources are all immediates, vmad's saturation by the signedness of the computation, div.approx.f32 for
divisors above 2^126, neg/abs .ftz on subnormals, the flush of atom/red .add.f32 on global memory, and
redux.sync / match.sync / elect.sync over each lane's own member mask."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.testing.interp_strategies import poison

from support.ptx_text import assembler_verdict, raw_kernel

needs_ptxas = pytest.mark.skipif(not pf.assembler.find_tool("ptxas"), reason="ptxas not installed")

M32 = 0xFFFFFFFF


def module_text(body: str, decls: str = "", target: str = "sm_90") -> str:
    """A module with one kernel `k(.param .u64 out, .param .u64 aux)`: before `body`, `%out` holds the global
    address of this thread's row of `out` (16 words a thread), `%aux` the global address of `aux`, `%t` the
    thread index (u32)."""
    return f""".version 8.3
.target {target}
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 aux)
{{
.reg .pred %p<8>;
.reg .b16 %h<8>;
.reg .b32 %r<16>;
.reg .b64 %rd<8>;
.reg .f32 %f<8>;
.reg .u64 %out, %aux, %off;
.reg .u32 %t;
{decls}
ld.param.u64 %out, [out];
cvta.to.global.u64 %out, %out;
ld.param.u64 %aux, [aux];
cvta.to.global.u64 %aux, %aux;
mov.u32 %t, %tid.x;
mul.wide.u32 %off, %t, 64;
add.u64 %out, %out, %off;
{body}
ret;
}}
"""


def run_rows(body: str, block: int = 1, aux=None, decls: str = "", target: str = "sm_90", check: bool = True):
    """Run `body` (see `module_text`) on one CTA of `block` threads; returns (out as (block, 16) uint32 words,
    the aux buffer after the run, the interpreter's report)."""
    module = pf.parse(module_text(body, decls, target))
    out = poison(np.empty((block, 16), np.uint32))
    aux = np.zeros(8, np.uint32) if aux is None else aux
    report = interp.run(module, "k", grid=1, block=block, args=[out, aux], check=check)
    return out, aux, report


def store(*regs: str) -> str:
    """st.global lines writing b32 registers `regs` to words 0, 1, ... of this thread's row."""
    return "\n".join(f"st.global.b32 [%out+{4 * i}], {r};" for i, r in enumerate(regs))


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# ---------------------------------------------------------------- carry chains with immediate sources

#: (line, d as u32 words, CC.CF after it), worked out from the ISA: add.cc d = a + b with the carry out;
#: sub.cc d = a - b with the borrow out; subc d = a - (b + CF); addc d = a + b + CF; mad.lo/hi.cc d = the
#: product's half + c with the carry out, madc adding CF as well.  Each line's sources are all immediates.
IMMEDIATE_CHAIN = [
    ("sub.cc.u32 %r1, 0, 1;", (0 - 1) & M32),              # borrow out: 0 < 1
    ("subc.u32 %r2, 0, 0;", (0 - (0 + 1)) & M32),          # reads the borrow: 0 - (0 + 1)
    ("add.cc.u32 %r3, 0xffffffff, 1;", (M32 + 1) & M32),   # carry out: 2^32
    ("addc.cc.u32 %r4, 0, 0;", 0 + 0 + 1),                 # reads the carry, carries nothing out
    ("mad.lo.cc.u32 %r5, 65536, 65536, 4294967295;", ((65536 * 65536) & M32) + M32),  # lo half 0: no carry
    ("madc.hi.cc.u32 %r6, 3, 4, 5;", ((3 * 4) >> 32) + 5 + 0),
    ("subc.cc.s32 %r7, 5, 7;", (5 - (7 + 0)) & M32),       # borrow out
    ("mad.hi.cc.s32 %r8, -1, 2, 3;", ((((-1 * 2) & 0xFFFFFFFFFFFFFFFF) >> 32) + 3) & M32),  # carry out
    ("addc.u32 %r9, 0, 0;", 0 + 0 + 1),
]


@needs_ptxas
def test_ptxas_accepts_carry_chains_with_only_immediate_sources():
    assert assembler_verdict(raw_kernel("\n".join(line for line, _ in IMMEDIATE_CHAIN), "sm_90")) is None


def test_carry_chain_with_only_immediate_sources_read_from_ptx():
    body = "\n".join(line for line, _ in IMMEDIATE_CHAIN)
    out, _, _ = run_rows(body + "\n" + store(*(f"%r{i}" for i in range(1, 10))))
    assert [int(x) for x in out[0, :9]] == [want for _, want in IMMEDIATE_CHAIN]


def test_carry_chain_with_only_immediate_sources_from_the_builder():
    """The builder emits the same forms the PTX reader reads, and they run the same."""
    k = pf.KernelBuilder("cc_imm", target="sm_90", reqntid=1)
    out = k.param_ptr("out", u32)
    d = [k.sub_cc(0, 1, type=u32), k.subc(0, 0, type=u32), k.add_cc(0xFFFFFFFF, 1, type=u32),
         k.addc(0, 0, cc=True, type=u32), k.mad_cc(65536, 65536, 0xFFFFFFFF, type=u32)]
    k.st(out, d[:4], type=u32)
    k.st(k.add(out, 16), d[4], type=u32)
    ptx = k.module().ptx
    assert "sub.cc.u32" in ptx and ", 0, 1;" in ptx
    words = poison(np.empty(5, np.uint32))
    interp.run(k.module(), block=1, args=[words])
    assert words.tolist() == [want for _, want in IMMEDIATE_CHAIN[:5]]


# ---------------------------------------------------------------- vmad .sat

def _ext(v: int, t: str) -> int:
    """partSelectSignExtend of a whole word: .s32 sign-extended, .u32 zero-extended."""
    return v - (1 << 32) if t == "s32" and v >> 31 else v


def vmad_model(at: str, bt: str, scale: str | None, a: int, b: int, c: int) -> int:
    """vmad.dtype.atype.btype.sat{.scale} d, a, b, c as an H100 (sm_90) computes it (no operand negated): d as a
    u32 word.  The destination type takes no part.  Where the ISA's pseudo-code extends .u32 sources and c by
    zero for an unsigned computation, the hardware extends a, b and c by sign whatever their types; the
    computation's signedness (signedFinal: unless both sources are .u32) still picks the shift (arithmetic, or
    logical on the 64-bit word) and the saturation range."""
    signed_final = at == "s32" or bt == "s32"
    tmp = _ext(a, "s32") * _ext(b, "s32") + _ext(c, "s32")
    if scale is not None:
        k = 7 if scale == "shr7" else 15
        tmp = tmp >> k if signed_final else (tmp % (1 << 64)) >> k
    lo, hi = (-(1 << 31), (1 << 31) - 1) if signed_final else (0, M32)
    return min(max(tmp, lo), hi) & M32


VMAD_CASES = [(M32, 5, 0), (0x10000, 0x10000, 0), (0x7FFFFFFF, 2, 1), (0x80000000, 0x80000000, M32),
              (M32, M32, M32), (3, 4, 0x80000000), (0x12345678, 0x9ABCDEF0, 0x0F0F0F0F), (0, 0, 0xFFFFFFF0)]
VMAD_FORMS = [(dt, at, bt, scale) for dt in ("u32", "s32") for at in ("u32", "s32") for bt in ("u32", "s32")
              for scale in (None, "shr7")]


def test_vmad_saturates_by_the_signedness_of_the_computation_not_the_destination():
    lines = ["mul.wide.u32 %rd1, %t, 12;", "add.u64 %rd1, %aux, %rd1;", "ld.global.b32 %r1, [%rd1];",
             "ld.global.b32 %r2, [%rd1+4];", "ld.global.b32 %r3, [%rd1+8];"]
    for i, (dt, at, bt, scale) in enumerate(VMAD_FORMS):
        lines.append(f"vmad.{dt}.{at}.{bt}.sat{'.' + scale if scale else ''} %v{i}, %r1, %r2, %r3;")
    lines.append(store(*(f"%v{i}" for i in range(len(VMAD_FORMS)))))
    aux = np.array(VMAD_CASES, np.uint32).ravel()
    out, _, _ = run_rows("\n".join(lines), block=len(VMAD_CASES), aux=aux, decls=".reg .b32 %v<16>;")
    for row, (a, b, c) in zip(out, VMAD_CASES):
        want = [vmad_model(at, bt, scale, a, b, c) for _, at, bt, scale in VMAD_FORMS]
        assert [int(x) for x in row] == want, (hex(a), hex(b), hex(c))
    # the two cases that tell the destination type from the computation's signedness
    assert vmad_model("s32", "s32", None, M32, 5, 0) == (-5) & M32  # vmad.u32.s32.s32.sat: -5 stays -5
    assert vmad_model("u32", "u32", None, 0x10000, 0x10000, 0) == M32  # vmad.s32.u32.u32.sat: clamps to U32_MAX


# ---------------------------------------------------------------- neg / abs .ftz

#: words read as one f32 and as two f16 halves: subnormals of either sign (smallest, largest, between), zeros,
#: the least normals, ordinary numbers and f16 infinities (no NaN: neg and abs of a NaN is an unspecified NaN)
SIGN_WORDS = [0x00000001, 0x00000100, 0x007FFFFF, 0x80000001, 0x807FFFFF, 0x00800000, 0x80800000, 0x00000000,
              0x80000000, 0x3F800000, 0xC0000000, 0x80018001, 0x000103FF, 0x83FF0400, 0x84008000, 0x7C00FC00,
              0x3C000200, 0xBC008200]


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _f16(bits: int) -> float:
    return float(np.array([bits], np.uint16).view(np.float16)[0])


def _f16_bits(x: float) -> int:
    return int(np.array([x], np.float16).view(np.uint16)[0])


def sign_op_model(op: str, x: float, ftz: bool, least_normal: float) -> float:
    """neg / abs of value `x`; with .ftz a subnormal input is first a zero of its sign (the ISA: ".ftz flushes
    subnormal inputs and results to sign-preserving zero")."""
    if ftz and 0 < abs(x) < least_normal:
        x = math.copysign(0.0, x)
    return -x if op == "neg" else abs(x)


def test_neg_and_abs_ftz_flush_subnormal_inputs_to_signed_zero():
    ops = [("neg", True), ("abs", True), ("neg", False), ("abs", False)]
    lines = ["mul.wide.u32 %rd1, %t, 4;", "add.u64 %rd1, %aux, %rd1;", "ld.global.b32 %r1, [%rd1];",
             "mov.b32 %f1, %r1;", "mov.b32 {%h1, %h2}, %r1;"]
    regs = []
    for i, (op, ftz) in enumerate(ops):
        mod = ".ftz" if ftz else ""
        lines += [f"{op}{mod}.f32 %f{2 + i}, %f1;", f"mov.b32 %v{i}, %f{2 + i};",
                  f"{op}{mod}.f16 %h{3 + i}, %h1;", f"cvt.u32.u16 %v{4 + i}, %h{3 + i};",
                  f"{op}{mod}.f16x2 %v{8 + i}, %r1;"]
    regs = [f"%v{i}" for i in range(12)]
    out, _, _ = run_rows("\n".join(lines) + "\n" + store(*regs), block=len(SIGN_WORDS),
                         aux=np.array(SIGN_WORDS, np.uint32), decls=".reg .b32 %v<12>;")
    for row, word in zip(out, SIGN_WORDS):
        halves = (word & 0xFFFF, word >> 16)
        for i, (op, ftz) in enumerate(ops):
            assert int(row[i]) == f32_bits(sign_op_model(op, _f32(word), ftz, 2.0 ** -126)), (op, ftz, hex(word))
            lo = sign_op_model(op, _f16(halves[0]), ftz, 2.0 ** -14)
            assert int(row[4 + i]) == _f16_bits(lo), (op, ftz, "f16", hex(word))
            pair = [_f16_bits(sign_op_model(op, _f16(h), ftz, 2.0 ** -14)) for h in halves]
            assert int(row[8 + i]) == pair[0] | pair[1] << 16, (op, ftz, "f16x2", hex(word))


# ---------------------------------------------------------------- div.approx.f32 / div.full.f32 for |b| > 2^126

def _ordered(bits: int) -> int:
    """An f32 bit pattern as an integer that counts representable values (-0 and +0 both 0)."""
    return bits if bits < 0x80000000 else -(bits & 0x7FFFFFFF)


def _quotient_f32(a: float, b: float, ftz: bool) -> float:
    """a / b rounded to f32 (through float64: within half an ulp, ample for a 2-ulp check); .ftz makes a subnormal
    quotient a zero of its sign."""
    q = float(np.float32(np.float64(a) / np.float64(b)))
    return math.copysign(0.0, q) if ftz and 0 < abs(q) < 2.0 ** -126 else q


DIVIDENDS = [1.0, -3.0, 2.0 ** 100, _f32(0x7F7FFFFF), 0.0, -0.0, math.inf, -math.inf]
DIVISORS = [2.0 ** 126, 1.5 * 2.0 ** 126, -(2.0 ** 127), _f32(0x7F7FFFFF), -_f32(0x7F7FFFFF), 2.0 ** 126 * 1.0000001]


def test_div_approx_f32_is_zero_or_nan_for_divisors_past_2_to_126_and_div_full_is_not():
    pairs = [(_f32(f32_bits(a)), _f32(f32_bits(b))) for a in DIVIDENDS for b in DIVISORS]  # the f32 values
    aux = np.array([[f32_bits(a), f32_bits(b)] for a, b in pairs], np.uint32).ravel()
    forms = ["div.approx.f32", "div.approx.ftz.f32", "div.full.f32", "div.full.ftz.f32"]
    lines = ["mul.wide.u32 %rd1, %t, 8;", "add.u64 %rd1, %aux, %rd1;", "ld.global.f32 %f1, [%rd1];",
             "ld.global.f32 %f2, [%rd1+4];"]
    lines += [f"{form} %f{3 + i}, %f1, %f2;" for i, form in enumerate(forms)]
    out, _, _ = run_rows("\n".join(lines) + "\n" + store("%f3", "%f4", "%f5", "%f6"), block=len(pairs),
                         aux=aux)
    for row, (a, b) in zip(out, pairs):
        for i, form in enumerate(forms):
            got = int(row[i])
            if "approx" in form and 2.0 ** 126 < abs(b) < 2.0 ** 128:
                # the ISA: "if a is infinity, div.approx.f32 returns NaN, otherwise it returns a sign-preserving
                # zero" (the zero of a * (1/b): sign a XOR sign b)
                if math.isinf(a):
                    assert math.isnan(_f32(got)), (form, a, b)
                else:
                    want = math.copysign(0.0, -1.0 if (math.copysign(1, a) < 0) != (b < 0) else 1.0)
                    assert got == f32_bits(want), (form, a, b, hex(got))
                continue
            want = _quotient_f32(a, b, ftz=".ftz" in form)  # the quotient within 2 ulp, as the ISA bounds it
            if math.isnan(want):
                assert math.isnan(_f32(got)), (form, a, b)
            else:
                assert abs(_ordered(got) - _ordered(f32_bits(want))) <= 2, (form, a, b, hex(got))


# ---------------------------------------------------------------- atom / red .add.f32: global flushes, shared not

def _ftz(v: float) -> float:
    return math.copysign(0.0, v) if 0 < abs(v) < 2.0 ** -126 else v


def add_f32_model(x_bits: int, y_bits: int, flush: bool) -> int:
    """The bits of x + y rounded to nearest even (IEEE), with subnormal inputs and result first made zeros of their
    sign when `flush` (the ISA: atom/red .add.f32 on global memory flush, on shared memory they do not)."""
    x, y = _f32(x_bits), _f32(y_bits)
    if flush:
        x, y = _ftz(x), _ftz(y)
    r = float(np.float32(x) + np.float32(y))
    return f32_bits(_ftz(r) if flush else r)


#: (memory word, added word): subnormal sums, subnormals that sum to a normal, a subnormal sum of normals, signed
#: zeros out of flushed subnormals, and ordinary numbers that must not change
ADD_CASES = [(0x00000100, 0x00000100), (0x00800001, 0x80800000), (0x80000001, 0x00000000), (0x80000001, 0x80000001),
             (0x00400000, 0x00400000), (0x3F800000, 0x00000001), (0x3F800000, 0x40000000), (0x007FFFFF, 0x00000001)]

ATOM_ADD_BODY = """
mul.wide.u32 %rd1, %t, 64;
add.u64 %rd1, %aux, %rd1;
ld.param.u64 %rd2, [aux];
mul.wide.u32 %rd3, %t, 64;
add.u64 %rd2, %rd2, %rd3;
ld.global.f32 %f1, [%rd1+32];
atom.global.add.f32 %f2, [%rd1], %f1;
red.global.add.f32 [%rd1+4], %f1;
atom.add.f32 %f3, [%rd2+8], %f1;
red.global.add.v2.f32 [%rd1+16], {%f1, %f1};
mov.u32 %r1, sm;
mul.lo.u32 %r2, %t, 16;
add.u32 %r1, %r1, %r2;
ld.global.f32 %f5, [%rd1+36];
st.shared.f32 [%r1], %f5;
st.shared.f32 [%r1+4], %f5;
st.shared.f32 [%r1+8], %f5;
atom.shared.add.f32 %f6, [%r1], %f1;
red.shared.add.f32 [%r1+4], %f1;
mov.u64 %rd4, sm;
cvta.shared.u64 %rd4, %rd4;
cvt.u64.u32 %rd5, %r2;
add.u64 %rd4, %rd4, %rd5;
atom.add.f32 %f7, [%rd4+8], %f1;
ld.shared.b32 %r3, [%r1];
ld.shared.b32 %r4, [%r1+4];
ld.shared.b32 %r5, [%r1+8];
mov.b32 %r6, %f2;
mov.b32 %r7, %f3;
mov.b32 %r8, %f6;
mov.b32 %r9, %f7;
""" + store("%r3", "%r4", "%r5", "%r6", "%r7", "%r8", "%r9")


def test_atom_and_red_add_f32_flush_subnormals_on_global_memory_only():
    n = len(ADD_CASES)
    aux = np.zeros((n, 16), np.uint32)
    for i, (x, y) in enumerate(ADD_CASES):
        aux[i, [0, 1, 2, 4, 5]] = x  # the global words: atom, red, generic atom, a red.v2 pair
        aux[i, 8] = y  # the addend
        aux[i, 9] = x  # the shared words' first value
    out, aux, _ = run_rows(ATOM_ADD_BODY, block=n, aux=aux.ravel(),
                           decls=".shared .align 16 .b32 sm[64];")
    aux = aux.reshape(n, 16)
    for i, (x, y) in enumerate(ADD_CASES):
        on_global, on_shared = add_f32_model(x, y, True), add_f32_model(x, y, False)
        assert [int(v) for v in aux[i, [0, 1, 2, 4, 5]]] == [on_global] * 5, (hex(x), hex(y))  # global and generic
        assert [int(v) for v in out[i, :3]] == [on_shared] * 3, (hex(x), hex(y))  # shared, by .shared and generic
        assert [int(v) for v in out[i, 3:7]] == [x] * 4, (hex(x), hex(y))  # d: the memory's original bits


def test_atom_add_f64_keeps_subnormals_on_global_memory():
    tiny = np.array([5e-324, 2.5e-308], np.float64)  # the least subnormal and one near the top
    aux = np.zeros(8, np.uint32)
    aux[:4] = tiny.view(np.uint32)
    body = "ld.global.f64 %fd1, [%aux];\nld.global.f64 %fd2, [%aux+8];\natom.global.add.f64 %fd3, [%aux], %fd1;\n" \
           "red.global.add.f64 [%aux+8], %fd2;"
    _, aux, _ = run_rows(body, aux=aux, decls=".reg .f64 %fd<4>;")
    assert aux[:4].view(np.float64).tolist() == [2 * 5e-324, 2 * 2.5e-308]


# ---------------------------------------------------------------- redux.sync / match.sync over each lane's mask

def group_model(vals, masks, executing):
    """For each executing lane of one warp, the lanes it computes over as the ISA defines redux.sync and
    match.sync ("across all non-exited threads in the membermask"): the executing lanes its mask names."""
    return {lane: [j for j in range(32) if masks[lane] >> j & 1 and executing[j]] for lane in range(32)
            if executing[lane]}


def _s32(v: int) -> int:
    return v - (1 << 32) if v >> 31 else v


def warp_ops_model(vals, masks, executing):
    """Per executing lane: redux add.u32, min.s32, max.u32, and, or, xor; match.any.b32, match.all.b32 d and p;
    match.any.b64 of (v, v) — Python integers from the ISA's definitions."""
    out = {}
    for lane, group in group_model(vals, masks, executing).items():
        g = [vals[j] for j in group]
        bits = sum(1 << j for j in group)
        anym = sum(1 << j for j in group if vals[j] == vals[lane])
        alls = all(v == vals[lane] for v in g)
        out[lane] = [sum(g) & M32, min(g, key=_s32), max(g), _fold(g, lambda x, y: x & y, M32),
                     _fold(g, lambda x, y: x | y, 0), _fold(g, lambda x, y: x ^ y, 0), anym,
                     bits if alls else 0, int(alls), anym]
    return out


def _fold(values, fn, start):
    for v in values:
        start = fn(start, v)
    return start


WARP_OPS_BODY = """
mul.wide.u32 %rd1, %t, 8;
add.u64 %rd1, %aux, %rd1;
ld.global.b32 %r1, [%rd1];
ld.global.b32 %r2, [%rd1+4];
redux.sync.add.u32 %v0, %r1, %r2;
redux.sync.min.s32 %v1, %r1, %r2;
redux.sync.max.u32 %v2, %r1, %r2;
redux.sync.and.b32 %v3, %r1, %r2;
redux.sync.or.b32 %v4, %r1, %r2;
redux.sync.xor.b32 %v5, %r1, %r2;
match.any.sync.b32 %v6, %r1, %r2;
match.all.sync.b32 %v7|%p1, %r1, %r2;
selp.u32 %v8, 1, 0, %p1;
mov.b64 %rd2, {%r1, %r1};
match.any.sync.b64 %v9, %rd2, %r2;
""" + store(*(f"%v{i}" for i in range(10)))


def tile_masks(width: int):
    """The member mask of each lane of a warp split into tiles of `width` lanes (what a thread_block_tile<width>
    collective passes)."""
    return [((1 << width) - 1) << (lane // width * width) for lane in range(32)]


def test_redux_and_match_compute_over_each_lanes_member_mask():
    rng = np.random.default_rng(7)
    # warp 0 in tiles of 16, warp 1 in tiles of 8; values from a small set, so tiles agree, disagree and match
    masks = tile_masks(16) + tile_masks(8)
    vals = [int(v) for v in rng.choice([0, 1, 7, 0x80000000, M32, 12345], 64)]
    vals[40:48] = [7] * 8  # one tile of warp 1 all equal: match.all sets p there
    aux = np.array([[v, k] for v, k in zip(vals, masks)], np.uint32).ravel()
    out, _, report = run_rows(WARP_OPS_BODY, block=64, aux=aux, decls=".reg .b32 %v<12>;")
    assert report.ok and not report.findings
    for w in range(2):
        want = warp_ops_model(vals[32 * w:32 * w + 32], masks[32 * w:32 * w + 32], [True] * 32)
        for lane in range(32):
            assert [int(x) for x in out[32 * w + lane, :10]] == want[lane], (w, lane)
    assert out[40, 8] == 1 and out[0, 0] == sum(vals[:16]) & M32 and out[16, 0] == sum(vals[16:32]) & M32


def test_redux_and_match_in_divergent_code_over_a_partial_mask():
    """Lanes 0..11 execute, the rest branch around; lanes 0..5 pass mask 0x3F and lanes 6..11 mask 0xFC0: each
    group sees itself only, and nothing is reported."""
    vals = [3 * lane + 1 if lane % 3 else 5 for lane in range(32)]
    body = "setp.ge.u32 %p2, %t, 12;\n@%p2 bra SKIP;\n" + WARP_OPS_BODY + "\nSKIP:"
    masks = [0x3F if lane < 6 else 0xFC0 for lane in range(32)]
    aux = np.array([[v, k] for v, k in zip(vals, masks)], np.uint32).ravel()
    out, _, report = run_rows(body, block=32, aux=aux, decls=".reg .b32 %v<12>;")
    assert report.ok and not report.findings
    want = warp_ops_model(vals, masks, [lane < 12 for lane in range(32)])
    for lane in range(12):
        assert [int(x) for x in out[lane, :10]] == want[lane], lane


@pytest.mark.parametrize("line", ["redux.sync.add.u32 %v0, %r1, %r2;", "match.any.sync.b32 %v0, %r1, %r2;",
                                  "match.all.sync.b32 %v0|%p1, %r1, %r2;"])
def test_redux_and_match_report_masks_the_isa_leaves_undefined(line):
    """The warp-collective checks vote.sync and shfl.sync make: a lane outside its own member mask, and a mask
    naming a lane that does not execute the instruction, are "collective" findings."""
    swapped = "setp.lt.u32 %p3, %t, 16;\nselp.b32 %r2, 0xFFFF0000, 0x0000FFFF, %p3;\nmov.b32 %r1, 1;\n"
    _, _, report = run_rows(swapped + line, block=32, check=False, decls=".reg .b32 %v<2>;")
    assert [f.kind for f in report.findings] == ["collective"]
    assert "is not in its own member mask" in report.findings[0].message
    diverged = "mov.b32 %r1, 1;\nmov.b32 %r2, 0xFFFFFFFF;\nsetp.ge.u32 %p3, %t, 12;\n@%p3 bra DONE;\n"
    diverged += line + "\nDONE:"
    _, _, report = run_rows(diverged, block=32, check=False, decls=".reg .b32 %v<2>;")
    assert [f.kind for f in report.findings] == ["collective"]
    assert "did not execute it" in report.findings[0].message


@pytest.mark.parametrize("line", ["redux.sync.add.u32 %v0, %r1, %r2;", "match.any.sync.b32 %v0, %r1, %r2;",
                                  "vote.sync.ballot.b32 %v0, %p1, %r2;", "shfl.sync.idx.b32 %v0, %r1, 0, 31, %r2;",
                                  "bar.warp.sync %r2;"])
def test_lanes_of_one_member_mask_that_pass_different_masks_are_reported(line):
    """The ISA has each warp-level .sync instruction wait for the lanes of its member mask executing it with the
    same mask value: lanes 16..31 naming the whole warp while lanes 0..15 name their half is a "collective"
    finding, while two halves each naming only themselves are not."""
    overlap = "setp.lt.u32 %p3, %t, 16;\nselp.b32 %r2, 0x0000FFFF, 0xFFFFFFFF, %p3;\nmov.b32 %r1, 1;\n"
    overlap += "setp.lt.u32 %p1, %t, 8;\n"
    _, _, report = run_rows(overlap + line, block=32, check=False, decls=".reg .b32 %v<2>;")
    assert [f.kind for f in report.findings] == ["collective"]
    assert "lane 16 executes it with member mask 0xffffffff, which names lane 0, whose mask is 0x0000ffff" in \
        report.findings[0].message
    halves = overlap.replace("0x0000FFFF, 0xFFFFFFFF", "0x0000FFFF, 0xFFFF0000")
    _, _, report = run_rows(halves + line, block=32, check=False, decls=".reg .b32 %v<2>;")
    assert report.ok and not report.findings


def test_elect_elects_a_leader_inside_each_lanes_member_mask():
    """The ISA: elect.sync elects one leader from the threads of membermask, d is its laneid and p is true in it
    alone; the same mask elects the same leader.  Warp 0 runs it as two 16-lane tiles, warp 1 as four 8-lane
    tiles, and in warp 1 only lanes 3..29 execute (each tile's mask names its executing lanes)."""
    masks = tile_masks(16) + [m & 0x3FFFFFF8 for m in tile_masks(8)]
    executing = [True] * 32 + [3 <= lane <= 29 for lane in range(32)]
    aux = np.array([[0, k] for k in masks], np.uint32).ravel()
    body = """and.b32 %r1, %t, 31;
setp.lt.u32 %p2, %r1, 3;
setp.gt.u32 %p3, %r1, 29;
or.pred %p2, %p2, %p3;
setp.ge.u32 %p3, %t, 32;
and.pred %p2, %p2, %p3;
@%p2 bra SKIP;
mul.wide.u32 %rd1, %t, 8;
add.u64 %rd1, %aux, %rd1;
ld.global.b32 %r2, [%rd1+4];
elect.sync %r3|%p1, %r2;
selp.u32 %r4, 1, 0, %p1;
""" + store("%r3", "%r4") + "\nSKIP:"
    out, _, report = run_rows(body, block=64, aux=aux)
    assert report.ok and not report.findings
    for w in range(2):
        groups = {}
        for lane in range(32):
            t = 32 * w + lane
            if not executing[t]:
                continue
            leader, is_leader = int(out[t, 0]), int(out[t, 1])
            assert masks[t] >> leader & 1 and executing[32 * w + leader], (w, lane, leader)  # a member
            assert is_leader == int(leader == lane), (w, lane)
            groups.setdefault(masks[t], set()).add(leader)
        assert all(len(leaders) == 1 for leaders in groups.values()), groups  # one leader a mask
    assert len({int(out[t, 0]) for t in range(16, 32)}) == 1 and int(out[16, 0]) >= 16
