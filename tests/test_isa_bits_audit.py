"""lop3's (and setp's) `combine=` argument: a pair (boolean op, predicate); any other spelling is refused with a
message showing the pair, not a bare unpacking error or a complaint about the guard."""

import pytest

import ptxforge as pf
from ptxforge import b32, pred, s32
from ptxforge.isa.bits import LOP3_BOOL_OPS
from ptxforge.isa.control import BOOL_OPS
from support.located import assert_located

HERE = __file__


@pytest.mark.parametrize("combine", ["and", "or", ("nand", True), ("and",), ("and", True, 1)])
def test_lop3_combine_that_is_not_a_pair_is_refused_with_the_pair_spelling(combine):
    k = pf.KernelBuilder("t", target="sm_90")
    a, b, c = (k.reg(b32) for _ in range(3))
    with pytest.raises(pf.ValidationError, match=r'lop3 combine= takes a pair \("and"\|"or", q\)') as info:
        k.lop3(a, b, c, 0x96, combine=combine)  # <- lop3-combine
    assert_located(info.value, "<- lop3-combine", HERE)
    assert repr(combine) in str(info.value)


@pytest.mark.parametrize("combine", ["and", "xor", ("nor", None)])
def test_setp_combine_that_is_not_a_pair_is_refused_with_the_pair_spelling(combine):
    k = pf.KernelBuilder("t", target="sm_90")
    with pytest.raises(pf.ValidationError, match=r'combine= takes a pair \("and"\|"or"\|"xor", c\)') as info:
        k.setp("lt", k.reg(s32), k.reg(s32), combine=combine)  # <- setp-combine
    assert_located(info.value, "<- setp-combine", HERE)


def test_every_spelled_pair_is_accepted_and_assembles():
    k = pf.KernelBuilder("t", target="sm_90")
    a, b, c = (k.reg(b32) for _ in range(3))
    p = k.reg(pred)
    for op in LOP3_BOOL_OPS:
        for q in (p, ~p, True):
            k.lop3(a, b, c, 0x96, combine=(op, q))
    for op in BOOL_OPS:
        k.setp("lt", k.reg(s32), k.reg(s32), combine=[op, ~p])
    text = [i.render() for i in k.finish().instructions]
    assert sum(line.startswith("lop3.") for line in text) == 3 * len(LOP3_BOOL_OPS)
    pf.assemble(k.module())
