"""Bit logic: and/or/xor/not, shifts, lop3, prmt, shf, bit fields."""

import random

import pytest

import ptxforge as pf
from ptxforge import b16, b32, b64, f32, pred, s32, s64, u32, u64
from ptxforge.isa.bits import lut_of
from support.ptx_text import assembler_verdict, raw_kernel


def build(fn, target="sm_80"):
    k = pf.KernelBuilder("t", target=target)
    fn(k)
    return k, [i.render() for i in k.finish().instructions[:-1]]


def test_logic_on_integer_registers_uses_the_bit_types():
    def body(k):
        x, y = k.reg(u32, "x"), k.reg(u32, "y")
        w = k.reg(s64, "w")
        p, q = k.reg(pred, "p"), k.reg(pred, "q")
        k.and_(x, 0xF0F0F0F0, dst=x)
        k.or_(x, y, dst=x)
        k.xor(w, 1, dst=w)
        k.not_(x, dst=y)
        k.cnot(k.reg(b16, "c"), dst=k.reg(b16, "cn"))
        k.and_(p, q, dst=p)
        k.xor(p, q, dst=q)
    k, body = build(body)
    assert body == [
        "and.b32         %x, %x, 0xF0F0F0F0;",
        "or.b32          %x, %x, %y;",
        "xor.b64         %w, %w, 1;",
        "not.b32         %y, %x;",
        "cnot.b16        %cn, %c;",
        "and.pred        %p, %p, %q;",
        "xor.pred        %q, %p, %q;",
    ]
    pf.assemble(k.module())


def test_shifts():
    def body(k):
        x, n = k.reg(u32, "x"), k.reg(u32, "n")
        a = k.reg(s32, "a")
        k.shl(x, 4, dst=x)
        k.shl(k.reg(u64, "w"), n, dst=k.reg(u64, "v"))
        k.shr(x, n, dst=x)                      # logical for unsigned
        k.shr(a, 8, dst=a)                      # arithmetic for signed
        k.shr(k.reg(b32, "bits"), 3, dst=x)
    k, body = build(body)
    assert body == ["shl.b32         %x, %x, 4;", "shl.b64         %v, %w, %n;", "shr.u32         %x, %x, %n;",
                    "shr.s32         %a, %a, 8;", "shr.b32         %x, %bits, 3;"]
    pf.assemble(k.module())


def test_shl_has_only_bit_types_in_ptxas():
    assert "Unexpected instruction types" in assembler_verdict(raw_kernel("shl.u32 %r1, %r2, 3;"))


def test_lop3_table_from_a_function_matches_its_truth_table():
    rng = random.Random(7)
    for fn in (lambda a, b, c: a ^ b ^ c, lambda a, b, c: (a & b) | c, lambda a, b, c: a & ~b,
               lambda a, b, c: (a | b) & ~c):
        lut = lut_of(fn)
        for _ in range(64):
            a, b, c = (rng.getrandbits(32) for _ in range(3))
            # bit i of the result is lut[(a_i << 2) | (b_i << 1) | c_i]
            expect = 0
            for i in range(32):
                idx = ((a >> i & 1) << 2) | ((b >> i & 1) << 1) | (c >> i & 1)
                expect |= (lut >> idx & 1) << i
            assert fn(a, b, c) & 0xFFFFFFFF == expect
    assert lut_of(lambda a, b, c: a ^ b ^ c) == 0x96


def test_lop3_prmt_shf_and_bit_fields():
    def body(k):
        a, b, c = (k.reg(b32, n) for n in "abc")
        n = k.reg(u32, "n")
        k.lop3(a, b, c, lambda x, y, z: (x & y) | z, dst=a)
        k.lop3(a, 0x0F0F0F0F, c, 0x6A, dst=b)
        k.prmt(a, b, 0x5410, dst=c)
        k.prmt(a, b, n, mode="f4e", dst=c)
        k.shf("l", a, b, n, dst=c)
        k.shf("r", a, b, 8, mode="clamp", dst=c)
        k.bfe(k.reg(u32, "u"), 4, 8, dst=n)
        k.bfe(k.reg(s32, "s"), n, 4, dst=k.reg(s32, "se"))
        k.bfi(a, b, 8, 4, dst=c)
        k.popc(k.reg(b64, "w"), dst=n)
        k.clz(a, dst=n)
        k.brev(a, dst=c)
        k.bfind(k.reg(s32, "x"), dst=n)
    k, body = build(body)
    assert body == [
        "lop3.b32        %a, %a, %b, %c, 234;",
        "lop3.b32        %b, %a, 0xF0F0F0F, %c, 106;",
        "prmt.b32        %c, %a, %b, 0x5410;",
        "prmt.b32.f4e    %c, %a, %b, %n;",
        "shf.l.wrap.b32  %c, %a, %b, %n;",
        "shf.r.clamp.b32 %c, %a, %b, 8;",
        "bfe.u32         %n, %u, 4, 8;",
        "bfe.s32         %se, %s, %n, 4;",
        "bfi.b32         %c, %a, %b, 8, 4;",
        "popc.b64        %n, %w;",
        "clz.b32         %n, %a;",
        "brev.b32        %c, %a;",
        "bfind.s32       %n, %x;",
    ]
    pf.assemble(k.module())


@pytest.mark.parametrize("call, match", [
    (lambda k: k.lop3(k.reg(b32), k.reg(b32), k.reg(b32), 256), "0..255"),
    (lambda k: k.prmt(k.reg(b32), k.reg(b32), 0, mode="zzz"), "prmt mode"),
    (lambda k: k.shf("x", k.reg(b32), k.reg(b32), 1), "direction"),
    (lambda k: k.shr(k.reg(f32), 1), "shr takes"),
    (lambda k: k.and_(k.reg(f32), k.reg(f32)), "and takes"),
    (lambda k: k.cnot(k.reg(pred)), "no .pred form"),
    (lambda k: k.bfe(k.reg(pf.b16), 1, 2), "bfe takes"),
    (lambda k: k.lop3(k.reg(u64), k.reg(b32), k.reg(b32), 0x96), "cannot be used as .b32"),
])
def test_refusals(call, match):
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match=match):
        call(k)


def test_ptxas_refuses_cnot_pred():
    assert "Unexpected instruction types" in assembler_verdict(raw_kernel("cnot.pred %p1, %p2;"))
    assert assembler_verdict(raw_kernel("not.pred %p1, %p2;")) is None
