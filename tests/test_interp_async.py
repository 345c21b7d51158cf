"""cp.async zero-fill (src-size) and ignore-src, commit/wait groups, mbarrier phases; copies land
late, so a missing wait is reported."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import b32, u8, u32
from ptxforge import interp
from ptxforge.testing.interp_strategies import poison, seeds

from support.interp_probes import zero_fill_probe


@given(size=st.sampled_from([4, 8, 16]), mode=st.sampled_from(["reg", "imm3", "ignore"]), seed=seeds())
def test_zero_fill_and_ignore_src(size, mode, seed):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, 64 * size, dtype=np.uint8)
    ns = rng.integers(0, size + 1, 64).astype(np.uint32)
    dst = poison(np.empty(64 * size, np.uint8))
    interp.run(zero_fill_probe(size, mode), block=64, args=[src, dst, ns])
    s, d = src.reshape(64, size), dst.reshape(64, size)
    for t in range(64):
        n = {"reg": int(ns[t]), "imm3": 3, "ignore": 0 if ns[t] & 1 else size}[mode]
        np.testing.assert_array_equal(d[t, :n], s[t, :n])
        assert (d[t, n:] == 0).all()


def test_zero_fill_does_not_read_past_the_end():
    """src-size 0 touches nothing: the last threads' sources lie past the buffer, and that is fine."""
    src = np.arange(16 * 40, dtype=np.uint8)  # only 40 of 64 rows exist
    ns = np.where(np.arange(64) < 40, 16, 0).astype(np.uint32)
    dst = poison(np.empty(64 * 16, np.uint8))
    interp.run(zero_fill_probe(16, "reg"), block=64, args=[src, dst, ns])
    assert (dst[40 * 16:] == 0).all()
    ns[45] = 1  # reading one byte past the end is an error
    with pytest.raises(interp.InterpError, match="out-of-bounds cp.async source"):
        interp.run(zero_fill_probe(16, "reg"), block=64, args=[src, dst, ns])


def group_probe(wait):
    """Three groups; wait_group `wait`; then read each group's destination (own bytes only)."""
    k = pf.KernelBuilder("groups", target="sm_80", reqntid=32)
    src, dst = k.param_ptr("src", u8), k.param_ptr("dst", u8)
    sbuf = k.shared("sbuf", 3 * 512, align=16)
    t = k.tid()
    off = k.shl(t, 4)
    for g in range(3):
        k.cp_async(k.add(k.shared_base(sbuf), k.add(off, 512 * g)), k.add(src, k.cvt(k.add(off, 512 * g), "u64")),
                   16)
        k.cp_async_commit()
    k.cp_async_wait(wait)
    for g in range(3):
        v = k.ld(k.add(k.shared_base(sbuf), k.add(off, 512 * g)), type=b32, space="shared", vec=4)
        k.st(k.add(dst, k.cvt(k.add(off, 512 * g), "u64")), list(v), type=b32)
    return k.module()


def test_wait_group_leaves_the_newest_groups_in_flight():
    src = np.random.default_rng(0).integers(0, 256, 1536, dtype=np.uint8)
    dst = np.zeros(1536, np.uint8)
    assert interp.run(group_probe(0), block=32, args=[src, dst]).ok
    np.testing.assert_array_equal(dst, src)
    r = interp.run(group_probe(1), block=32, args=[src, dst], check=False)
    [f] = r.findings
    assert f.kind == "async" and f.other.opcode == "cp.async"
    assert f.instruction.opcode == "ld" and "v4" in f.instruction.mnemonic
    # the newest group (the third) is still in flight: the reported read is the third load
    assert f.pc == max(p for p, i in enumerate(interp.compile_kernel(group_probe(1).kernels[0]).instructions)
                       if i.opcode == "ld")


def mbarrier_pingpong(phases):
    """Warp 0 produces `phases` rounds into one slot, warp 1 consumes; two mbarriers (full, empty)
    with parity flipping each round, as producer/consumer pipelines do."""
    k = pf.KernelBuilder("pingpong", target="sm_90", reqntid=64)
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 128, align=16)
    bars = k.shared("bars", 16, align=8)
    t = k.tid()
    base, full = k.shared_base(buf), k.shared_base(bars)
    empty = k.add(full, 8)
    with k.if_(k.setp("eq", t, 0)):
        k.mbarrier_init(full, 32)
        k.mbarrier_init(empty, 32)
    k.bar_sync(0)
    lane = k.and_(t, 31, type=b32)
    slot = k.add(base, k.shl(lane, 2))
    acc = k.mov(0, type=u32)
    with k.for_range(0, phases, name="round", uniform=False) as r:
        parity = k.and_(r, 1, type=b32)
        with k.if_(k.setp("lt", t, 32)):
            k.mbarrier_wait(empty, k.xor(parity, 1, type=b32))  # first round passes: the "previous" phase
            k.st(slot, k.mad(r, 1000, lane, type=u32), type=u32, space="shared")
            k.mbarrier_arrive(full)
        with k.if_(k.setp("ge", t, 32)):
            k.mbarrier_wait(full, parity)
            v = k.ld(k.add(base, k.shl(k.xor(lane, 1, type=b32), 2, type=b32)), type=u32, space="shared")
            k.add(acc, v, dst=acc)
            k.mbarrier_arrive(empty)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), acc, type=u32)
    return k.module()


@pytest.mark.parametrize("phases", [1, 2, 5])
def test_mbarrier_phases_pingpong(phases):
    out = poison(np.empty(64, np.uint32))
    r = interp.run(mbarrier_pingpong(phases), block=64, args=[out])
    assert r.ok
    lanes = np.arange(32)
    np.testing.assert_array_equal(out[32:], sum(1000 * i for i in range(phases)) + phases * (lanes ^ 1))
    assert (out[:32] == 0).all()


def test_too_many_mbarrier_arrivals_are_reported():
    k = pf.KernelBuilder("over", target="sm_90", reqntid=64)
    bars = k.shared("bars", 8, align=8)
    t = k.tid()
    rb = k.shared_base(bars)
    k.mbarrier_init(rb, 32, pred=k.setp("eq", t, 0))
    k.bar_sync(0)
    k.mbarrier_arrive(rb, count=2, pred=k.setp("lt", t, 32))  # 64 arrivals for a 32-count phase
    r = interp.run(k.module(), block=64, args=[], check=False)
    assert [f.kind for f in r.findings] == ["barrier"] and "more arrivals" in r.findings[0].message


def test_wait_on_an_mbarrier_nobody_arrives_on_is_a_deadlock():
    k = pf.KernelBuilder("never", target="sm_90", reqntid=32)
    bars = k.shared("bars", 8, align=8)
    t = k.tid()
    rb = k.shared_base(bars)
    k.mbarrier_init(rb, 32, pred=k.setp("eq", t, 0))
    k.bar_sync(0)
    k.mbarrier_wait(rb, 0)
    with pytest.raises(interp.InterpError, match="deadlock"):
        interp.run(k.module(), block=32, args=[])
