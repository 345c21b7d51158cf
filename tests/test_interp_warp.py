"""shfl.sync in every mode (lane/offset, clamp and segment mask drawn at random), vote, redux, elect,
activemask, and the reports for warp-collective misuse."""

import numpy as np
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import b32, u32
from ptxforge import interp
from ptxforge.testing.interp_strategies import poison, seeds

from support.interp_probes import shfl_probe


def shfl_model(vals, mode, b, c):
    """The PTX ISA pseudo-code, lane by lane."""
    out, preds = [], []
    for t, _ in enumerate(vals):
        lane = t % 32
        bval, cval, seg = b & 0x1F, c & 0x1F, (c >> 8) & 0x1F
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j, ok = lane - bval, lane - bval >= max_lane
        elif mode == "down":
            j, ok = lane + bval, lane + bval <= max_lane
        elif mode == "bfly":
            j, ok = lane ^ bval, (lane ^ bval) <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        if not ok:
            j = lane
        out.append(vals[t - lane + j])
        preds.append(int(ok))
    return np.array(out, dtype=np.uint32), np.array(preds, dtype=np.uint32)


@given(mode=st.sampled_from(["up", "down", "bfly", "idx"]), b=st.integers(0, 31),
       width=st.sampled_from([1, 2, 4, 8, 16, 32]), clamp=st.integers(0, 31), pred=st.booleans(), seed=seeds())
def test_shfl_modes(mode, b, width, clamp, pred, seed):
    c = ((32 - width) << 8) | clamp
    vals = np.random.default_rng(seed).integers(0, 2 ** 32, 64, dtype=np.uint32)
    out, outp = poison(np.empty(64, np.uint32)), poison(np.empty(64, np.uint32))
    interp.run(shfl_probe(mode, b, c, pred), block=64, args=[vals, out, outp])
    want, wantp = shfl_model(vals, mode, b, c)
    np.testing.assert_array_equal(out, want)
    if pred:
        np.testing.assert_array_equal(outp, wantp)


def test_butterfly_reduction_and_lane_dependent_offsets():
    k = pf.KernelBuilder("reduce", target="sm_80", reqntid=32)
    src, out = k.param_ptr("src", u32), k.param_ptr("out", u32)
    t = k.tid()
    v = k.ld(k.add(src, k.mul(t, 4, mode="wide")), type=u32)
    for s in (16, 8, 4, 2, 1):
        k.add(v, k.shfl("bfly", v, s), dst=v)
    rot = k.shfl("idx", v, k.and_(k.add(t, 5), 31, type=b32))  # register lane operand
    k.st(k.add(out, k.mul(t, 4, mode="wide")), k.add(v, rot), type=u32)
    x = np.random.default_rng(3).integers(0, 2 ** 20, 32, dtype=np.uint32)
    out = poison(np.empty(32, np.uint32))
    interp.run(k.module(), block=32, args=[x, out])
    assert (out == np.uint32(2 * x.sum())).all()


def votes_probe():
    k = pf.KernelBuilder("votes", target="sm_90", reqntid=64)
    src, out = k.param_ptr("src", u32), k.param_ptr("out", u32)
    t = k.tid()
    v = k.ld(k.add(src, k.mul(t, 4, mode="wide")), type=u32)
    p = k.setp("ne", k.and_(v, 1, type=b32), 0)
    res = [k.vote("ballot", p), k.selp(1, 0, k.vote("all", p), type=u32), k.selp(1, 0, k.vote("any", p), type=u32),
           k.selp(1, 0, k.vote("uni", p), type=u32), k.redux("add", v), k.redux("max", v, type=pf.s32),
           k.redux("xor", v), k.selp(1, 0, k.elect_sync(), type=u32)]
    base = k.add(out, k.mul(t, 4 * len(res), mode="wide"))
    k.st(base, res[:4], type=u32)
    k.st(k.add(base, 16), res[4:], type=u32)
    return k.module()


@given(seed=seeds(), allsame=st.booleans())
def test_vote_redux_elect(seed, allsame):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2 ** 32, 64, dtype=np.uint32)
    if allsame:
        x[:32] |= 1
    out = poison(np.empty((64, 8), np.uint32))
    interp.run(votes_probe(), block=64, args=[x, out])
    for w in range(2):
        xs = x[32 * w:32 * w + 32]
        bits = (xs & 1).astype(bool)
        o = out[32 * w:32 * w + 32]
        assert (o[:, 0] == sum(1 << i for i in range(32) if bits[i])).all()
        assert (o[:, 1] == int(bits.all())).all() and (o[:, 2] == int(bits.any())).all()
        assert (o[:, 3] == int(bits.all() or not bits.any())).all()
        assert (o[:, 4] == np.uint32(int(xs.astype(np.uint64).sum()) % 2 ** 32)).all()
        assert (o[:, 5] == xs.view(np.int32).max().view(np.uint32)).all()
        assert (o[:, 6] == np.bitwise_xor.reduce(xs)).all()
        assert o[:, 7].tolist() == [1] + [0] * 31


def test_activemask_and_partial_member_mask_under_divergence():
    k = pf.KernelBuilder("partial", target="sm_80", reqntid=32)
    out = k.param_ptr("out", u32)
    t = k.tid()
    low = k.setp("lt", t, 12)
    res = k.mov(0, type=u32)
    with k.if_(low):
        am = k.activemask()
        k.shfl("idx", t, 3, mask=0xFFF, dst=res)
        k.add(res, am, dst=res)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), res, type=u32)
    out = poison(np.empty(32, np.uint32))
    interp.run(k.module(), block=32, args=[out])
    np.testing.assert_array_equal(out, [3 + 0xFFF] * 12 + [0] * 20)


def test_full_mask_shuffle_in_divergent_code_is_reported():
    k = pf.KernelBuilder("diverged_shfl", target="sm_80", reqntid=32)
    out = k.param_ptr("out", u32)
    t = k.tid()
    res = k.mov(0, type=u32)
    with k.if_(k.setp("lt", t, 12)):
        k.shfl("idx", t, 20, dst=res)  # mask = all lanes, but lanes 12..31 are elsewhere
    k.st(k.add(out, k.mul(t, 4, mode="wide")), res, type=u32)
    r = interp.run(k.module(), block=32, args=[np.empty(32, np.uint32)], check=False)
    kinds = [f.kind for f in r.findings]
    assert "collective" in kinds
    msg = str(r.findings[0])
    assert "shfl.sync" in msg and "test_interp_warp.py" in msg and "12" in msg


def test_mma_reached_by_part_of_a_warp_is_reported():
    k = pf.KernelBuilder("partial_mma", target="sm_80", reqntid=64)
    t = k.tid()
    a = k.regs(b32, 4)
    b = k.regs(b32, 2)
    for r in list(a) + list(b):
        k.mov(0, dst=r)
    with k.if_(k.setp("lt", t, 40)):  # warp 0 whole, warp 1 only lanes 0..7
        k.mma(a, b, 0, shape="m16n8k32", a_type="s8")
    r = interp.run(k.module(), block=64, args=[], check=False)
    assert [f.kind for f in r.findings] == ["collective"]
    f = r.findings[0]
    assert "warp 1" in f.message and "8-31" in f.message and f.nthreads == 8
    assert "mma.sync" in str(f) and f.loc is not None and f.loc.lineno > 0


def test_full_mask_in_a_partial_last_warp_is_fine():
    """A 48-thread CTA: warp 1 has 16 lanes; naming the missing lanes in the mask is harmless."""
    k = pf.KernelBuilder("partial_warp", target="sm_80", maxntid=64)
    out = k.param_ptr("out", u32)
    t = k.tid()
    v = k.shfl("bfly", t, 1)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), k.add(v, k.redux("add", t)), type=u32)
    out = poison(np.empty(48, np.uint32))
    r = interp.run(k.module(), block=48, args=[out])
    assert r.ok
    t = np.arange(48)
    sums = np.where(t < 32, sum(range(32)), sum(range(32, 48)))
    np.testing.assert_array_equal(out, (t ^ 1) + sums)
