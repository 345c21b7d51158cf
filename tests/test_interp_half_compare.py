"""setp and set on packed halves (.f16x2, .bf16x2) and .ftz on f16 comparisons, on the interpreter: against an
oracle that compares Python floats as the PTX ISA's semantics read (p: the low halves, q: the high halves,
each combined with c), and against the H200."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa.control import FLOAT_CMP

NT = 64
HALVES = ("f16x2", "bf16x2")


def _value(bits: int, fmt: str) -> float:
    """A 16-bit pattern's value, decoded from the format's fields."""
    e_bits, m_bits = (5, 10) if fmt.startswith("f16") else (8, 7)
    sign = -1.0 if bits >> 15 else 1.0
    e, m = (bits >> m_bits) & ((1 << e_bits) - 1), bits & ((1 << m_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    if e == (1 << e_bits) - 1:
        return math.nan if m else sign * math.inf
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)


def _holds(cmp: str, x: float, y: float, ftz: bool, fmt: str) -> bool:
    if ftz:
        least = 2.0 ** (-14 if fmt.startswith("f16") else -126)
        x, y = (math.copysign(0.0, v) if abs(v) < least else v for v in (x, y))
    unordered = math.isnan(x) or math.isnan(y)
    if cmp == "num":
        return not unordered
    if cmp == "nan":
        return unordered
    base = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[cmp[:2]]
    return (unordered or base) if cmp.endswith("u") and len(cmp) == 3 else (base and not unordered)


def _edges(fmt):
    if fmt.startswith("f16"):
        return [0x0000, 0x8000, 0x3C00, 0xBC00, 0x0001, 0x03FF, 0x0400, 0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0x8001]
    return [0x0000, 0x8000, 0x3F80, 0xBF80, 0x0001, 0x007F, 0x0080, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0x8001]


def _halves(rng, fmt, n=NT):
    e = np.array(_edges(fmt), np.uint32)
    lanes = np.where(rng.random((n, 2)) < 0.6, e[rng.integers(0, len(e), (n, 2))],
                     rng.integers(0, 1 << 16, (n, 2)).astype(np.uint32))
    return (lanes[:, 0] | (lanes[:, 1] << 16)).astype(np.uint32)


def _kernel(t, cmp, *, ftz=False, boolop=None, nt=NT):
    """Thread i: flags[i] = p | q << 1 (setp), masks[i] = set.u32 d (packed), c from cs[i] & 1."""
    k = pf.KernelBuilder("hc", target="sm_90", reqntid=nt)
    pa, pb, pc, pflags, pmask = (k.param_ptr(n, pf.u32) for n in ("a", "b", "c", "flags", "masks"))
    off = k.mul(k.tid(), 4, mode="wide")
    a, b = (k.ld(k.add(p, off), type=pf.b32) for p in (pa, pb))
    c = k.ld(k.add(pc, off), type=pf.u32)
    cp = k.setp("ne", k.and_(c, 1), 0, type=pf.u32)
    combine = (boolop, cp) if boolop else None
    p, q = k.setp(cmp, a, b, type=t, ftz=ftz, combine=combine)
    flags = k.or_(k.selp(1, 0, p, type=pf.u32), k.selp(2, 0, q, type=pf.u32))
    k.st(k.add(pflags, off), flags, type=pf.u32)
    k.st(k.add(pmask, off), k.set(cmp, a, b, type=t, ftz=ftz, combine=combine), type=pf.u32)
    return k


def _interp(k, a, b, c):
    flags, masks = np.zeros(len(a), np.uint32), np.zeros(len(a), np.uint32)
    interp.run(k.module(), block=len(a), args=[a, b, c, flags, masks])
    return flags, masks


def _want(t, cmp, a, b, c, ftz, boolop):
    flags, masks = [], []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        bits = []
        for lane in (0, 1):
            h = _holds(cmp, _value((x >> 16 * lane) & 0xFFFF, t), _value((y >> 16 * lane) & 0xFFFF, t), ftz, t)
            if boolop:
                h = {"and": h and bool(z & 1), "or": h or bool(z & 1), "xor": h != bool(z & 1)}[boolop]
            bits.append(h)
        flags.append(bits[0] | bits[1] << 1)
        masks.append((0xFFFF if bits[0] else 0) | (0xFFFF0000 if bits[1] else 0))
    return flags, masks


def _cases():
    out = [(t, cmp, False, None) for t in HALVES for cmp in FLOAT_CMP]
    out += [("f16x2", cmp, True, None) for cmp in ("eq", "lt", "geu")]
    out += [(t, "le", False, op) for t in HALVES for op in ("and", "or", "xor")]
    return out


@pytest.mark.parametrize("t, cmp, ftz, boolop", _cases())
def test_packed_halves_compare_as_the_isa_reads(t, cmp, ftz, boolop):
    rng = np.random.default_rng(len(cmp) * 7 + HALVES.index(t) + 3 * ftz)
    a, b, c = _halves(rng, t), _halves(rng, t), rng.integers(0, 2, NT).astype(np.uint32)
    b[:8] = a[:8]  # equal halves, zeros of both signs against each other
    k = _kernel(t, cmp, ftz=ftz, boolop=boolop)
    flags, masks = _interp(k, a, b, c)
    want_flags, want_masks = _want(t, cmp, a, b, c, ftz, boolop)
    assert flags.tolist() == want_flags
    assert masks.tolist() == want_masks


def test_the_kernels_assemble():
    for t, cmp, ftz, boolop in _cases()[::5]:
        pf.assemble(_kernel(t, cmp, ftz=ftz, boolop=boolop).module())


def test_p_is_the_low_half_and_q_the_high_half():
    one, two = 0x3C00, 0x4000  # f16 1.0 and 2.0
    a = np.array([one | two << 16], np.uint32)  # low 1.0, high 2.0
    b = np.array([two | one << 16], np.uint32)  # low 2.0, high 1.0
    flags, masks = _interp(_kernel("f16x2", "lt", nt=1), a, b, np.zeros(1, np.uint32))
    assert flags.tolist() == [1] and masks.tolist() == [0x0000FFFF]  # 1 < 2 in the low half only


def test_ftz_flushes_f16_subnormals_in_scalar_comparisons():
    """setp.ftz.f16 compares f16 subnormals (below 2^-14) as zero; without .ftz they are numbers."""
    k = pf.KernelBuilder("f", target="sm_90", reqntid=1)
    out = k.param_ptr("out", pf.u32)
    tiny = k.mov(0x0001, type=pf.b16)  # 2^-24, f16's least subnormal
    zero = k.mov(0x0000, type=pf.b16)
    r = [k.selp(1, 0, k.setp("eq", tiny, zero, type="f16", ftz=f), type=pf.u32) for f in (True, False)]
    k.st(out, k.or_(r[0], k.shl(r[1], 1)), type=pf.u32)
    got = np.zeros(1, np.uint32)
    interp.run(k.module(), block=1, args=[got])
    assert got.tolist() == [1]  # equal with .ftz, different without


@pytest.mark.gpu
def test_gpu_packed_half_comparisons_match_the_interpreter():
    from ptxforge.runtime import DeviceBuffer
    rng = np.random.default_rng(9)
    for t, cmp, ftz, boolop in _cases():
        a, b, c = _halves(rng, t, 256), _halves(rng, t, 256), rng.integers(0, 2, 256).astype(np.uint32)
        b[:16] = a[:16]
        k = _kernel(t, cmp, ftz=ftz, boolop=boolop, nt=256)
        outs = [DeviceBuffer.from_host(np.zeros(256, np.uint32)) for _ in range(2)]
        pf.load(k.module())[k.name](1, 256, *(DeviceBuffer.from_host(x) for x in (a, b, c)), *outs)
        cpu = _interp(k, a, b, c)
        assert outs[0].to_host().tolist() == cpu[0].tolist(), (t, cmp, ftz, boolop)
        assert outs[1].to_host().tolist() == cpu[1].tolist(), (t, cmp, ftz, boolop)
