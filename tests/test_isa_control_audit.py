"""Constants moved into 16-bit float registers.  PTX has no 16-bit float literal: ptxas refuses
`mov.b16 %h, 0f00000000`, and `mov.b32 %hh, 0f3F800000` puts f32 1.0's bits in an f16 pair (halves 0.0 and
1.875).  A number moved as .f16 / .bf16 is written as its bit pattern (rounded to nearest even), into both
halves for .f16x2 / .bf16x2, and the interpreter reads the same bits."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import bf16, bf16x2, f16, f16x2, interp
from ptxforge.isa import types as T
from ptxforge.isa.operands import half_bits
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__

# numbers exactly representable in f32, so the references below round once (from the f32 bits)
VALUES = [0, 1, 0.0, -0.0, 1.0, -2.5, 0.1, 1 / 3, 65504.0, 65519.0, 6e-8, 3e-5, 1e-30, 3.0e38, float("inf"),
          -float("inf"), 7]
VALUES = [v if isinstance(v, int) else float(np.float32(v)) for v in VALUES]


def _f16_ref(v):
    with np.errstate(over="ignore"):
        return int(np.array(v, np.float64).astype(np.float16).view(np.uint16))


def _bf16_ref(v):
    b = int(np.array(v, np.float32).view(np.uint32))  # v is an f32 value: one rounding from its bits
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def _fits(v, t):
    ref = (_f16_ref if t.name.startswith("f16") else _bf16_ref)(v)
    return (ref & 0x7FFF) != (0x7C00 if t.name.startswith("f16") else 0x7F80) or np.isinf(v)


def _run(pairs, target="sm_90"):
    """Each (value, type) moved with k.mov(value, type=t) and stored as bits; returns the module's mov lines and
    the words the interpreter stored."""
    k = pf.KernelBuilder("t", target=target, reqntid=1)
    out = k.param_ptr("out", pf.b8)
    for i, (v, t) in enumerate(pairs):
        r = k.mov(v, type=t)
        assert r.type is T.decl_type(t)
        k.st(out, r, type=T.lookup(f"b{t.bits}"), offset=4 * i)
    mod = k.module()
    pf.assemble(mod)
    words = np.full(len(pairs), 0xDEADBEEF, np.uint32)
    interp.run(mod, block=1, args=[words])
    return ([i.render() for i in k.finish().instructions if i.opcode == "mov"],
            [int(w) & ((1 << t.bits) - 1) for w, (_, t) in zip(words, pairs)])


@pytest.mark.parametrize("t", [f16, bf16, f16x2, bf16x2], ids=lambda t: t.name)
def test_constants_into_half_registers_assemble_and_run_bit_for_bit(t):
    pairs = [(v, t) for v in VALUES if _fits(v, t)]
    assert len(pairs) >= 12
    lines, words = _run(pairs)
    ref = _f16_ref if t.name.startswith("f16") else _bf16_ref
    for (v, _), line, word in zip(pairs, lines, words):
        half = ref(v)
        want = half | half << 16 if t.lanes == 2 else half
        assert word == want, (v, line, hex(word), hex(want))
        assert line.startswith(f"mov.b{t.bits} ") and "0f" not in line, line
        assert line.endswith(f", {want:#X};".replace("0X", "0x") if want >= 4096 else f", {want};"), line


def test_the_reported_spellings():
    lines, words = _run([(0, f16), (0, bf16), (1, f16x2), (1.0, f16), (0.0, f16x2)])
    assert [ln.split(None, 1)[0] for ln in lines] == ["mov.b16", "mov.b16", "mov.b32", "mov.b16", "mov.b32"]
    one = _f16_ref(1.0)
    assert words == [0, 0, one | one << 16, one, 0]
    k = pf.KernelBuilder("t", target="sm_90")
    k.mov(0, dst=k.reg(f16))
    assert k.finish().instructions[0].render().split()[0] == "mov.b16"


def test_what_was_emitted_before_is_what_ptxas_refuses():
    assert "mismatch" in assembler_verdict(raw_kernel("mov.b16 %h1, 0f00000000;"))
    assert assembler_verdict(raw_kernel("mov.b16 %h1, 0x3C00;")) is None


@pytest.mark.parametrize("v, t", [(1e6, f16), (100000, f16), (70000, f16x2), (4e38, bf16)])
def test_a_number_beyond_the_half_range_is_refused_with_the_bits_spelling(v, t):
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=rf"beyond the range of \.{t.name}; for a raw bit pattern write "
                                                 rf'type="b{t.bits}"') as info:
        k.mov(v, type=t)  # <- half-range
    assert_located(info.value, "<- half-range", HERE)


def test_raw_bits_still_move_as_bits():
    k = pf.KernelBuilder("t", target="sm_90")
    h = k.reg(f16, "h")
    k.mov(0x3C00, type="b16", dst=h)
    assert k.finish().instructions[0].render() == "mov.b16         %h, 0x3C00;"


def test_half_bits_is_the_one_rounding():
    assert half_bits(float("nan"), f16) & 0x7C00 == 0x7C00 and half_bits(float("nan"), f16) & 0x3FF
    assert half_bits(65520.0, f16) is None and half_bits(65519.0, f16) == _f16_ref(65519.0)
    assert half_bits(-0.0, bf16x2) == _bf16_ref(-0.0) * 0x10001


def test_a_constant_f16_mma_accumulator_is_the_value_in_every_half():
    """mma(c=1) with .f16 accumulators: C's registers are f16 pairs, so the constant goes in both halves."""
    k = pf.KernelBuilder("t", target="sm_80")
    k.mma(k.regs(T.b32, 4), k.regs(T.b32, 2), 1, shape="m16n8k16", a_type="f16", acc="f16")
    movs = [i.render() for i in k.finish().instructions if i.opcode == "mov"]
    one = _f16_ref(1.0)
    assert movs and all(m.endswith(f", {one | one << 16:#X};".replace("0X", "0x")) for m in movs), movs
    pf.assemble(k.module())
