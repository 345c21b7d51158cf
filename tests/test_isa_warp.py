"""Warp-level exchange and votes: shfl.sync, vote.sync, redux.sync, elect.sync, activemask."""

import pytest

import ptxforge as pf
from ptxforge import b32, f32, pred, s32, u32
from support.ptx_text import assembler_verdict, raw_kernel


def rendered(k):
    return [i.render() for i in k.finish().instructions[:-1]]


def test_shfl_forms():
    k = pf.KernelBuilder("t", target="sm_80")
    v, lane, mask = k.reg(u32, "v"), k.reg(u32, "lane"), k.reg(b32, "mask")
    d = k.reg(b32, "d")
    k.shfl("idx", v, lane, dst=d)
    k.shfl("up", v, 1, dst=d)
    k.shfl("down", k.reg(f32, "x"), 16, in_range=k.reg(pred, "ok"), dst=d)
    k.shfl("bfly", v, 1, clamp=0x1F, mask=mask, dst=d)
    assert rendered(k) == [
        "shfl.sync.idx.b32 %d, %v, %lane, 31, 0xFFFFFFFF;",
        "shfl.sync.up.b32 %d, %v, 1, 0, 0xFFFFFFFF;",
        "shfl.sync.down.b32 %d|%ok, %x, 16, 31, 0xFFFFFFFF;",
        "shfl.sync.bfly.b32 %d, %v, 1, 31, %mask;",
    ]
    pf.assemble(k.module())


def test_shfl_refusals():
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match="outside 0..31"):
        k.shfl("down", k.reg(u32), 32)
    with pytest.raises(pf.ValidationError, match="shfl mode"):
        k.shfl("rotate", k.reg(u32), 1)
    with pytest.raises(pf.ValidationError, match="non-zero"):
        k.shfl("idx", k.reg(u32), 1, mask=0)
    with pytest.raises(pf.ValidationError):
        k.shfl("idx", k.reg(pf.u64), 1)


def test_votes_take_a_possibly_negated_predicate():
    k = pf.KernelBuilder("t", target="sm_80")
    p = k.reg(pred, "p")
    k.vote("ballot", p, dst=k.reg(b32, "bits"))
    k.vote("any", ~p, dst=k.reg(pred, "some"))
    k.vote("all", p, mask=0xFF, dst=k.reg(pred, "every"))
    k.vote("uni", p, dst=k.reg(pred, "same"))
    assert rendered(k) == [
        "vote.sync.ballot.b32 %bits, %p, 0xFFFFFFFF;",
        "vote.sync.any.pred %some, !%p, 0xFFFFFFFF;",
        "vote.sync.all.pred %every, %p, 255;",
        "vote.sync.uni.pred %same, %p, 0xFFFFFFFF;",
    ]
    pf.assemble(k.module())
    assert assembler_verdict(raw_kernel("vote.sync.any.pred %p2, !%p1, 0xffffffff;")) is None
    with pytest.raises(pf.ValidationError, match="guard must be a .pred"):
        k2 = pf.KernelBuilder("t", target="sm_80")
        k2.vote("any", k2.reg(u32))


def test_redux_elect_activemask():
    k = pf.KernelBuilder("t", target="sm_90")
    k.redux("add", k.reg(u32, "a"), dst=k.reg(u32, "sum"))
    k.redux("max", k.reg(s32, "m"), dst=k.reg(s32, "top"))
    k.redux("xor", k.reg(u32, "x"), dst=k.reg(b32, "par"))
    p = k.elect_sync()
    k.activemask(dst=k.reg(b32, "active"))
    assert rendered(k) == [
        "redux.sync.add.u32 %sum, %a, 0xFFFFFFFF;",
        "redux.sync.max.s32 %top, %m, 0xFFFFFFFF;",
        "redux.sync.xor.b32 %par, %x, 0xFFFFFFFF;",
        f"elect.sync      _|%{p.name}, 0xFFFFFFFF;",
        "activemask.b32  %active;",
    ]
    pf.assemble(k.module())


def test_redux_and_elect_refusals():
    k = pf.KernelBuilder("t", target="sm_80")
    with pytest.raises(pf.ValidationError, match="redux.sync.add takes .u32, .s32"):
        k.redux("add", k.reg(f32))
    with pytest.raises(pf.TargetError):
        k.elect_sync()
    assert "requires .target sm_90" in assembler_verdict(raw_kernel("elect.sync _|%p1, 0xffffffff;", "sm_80"))
