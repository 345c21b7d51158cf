"""Barriers, fences and mbarriers."""

import pytest

import ptxforge as pf
from ptxforge import b64, u32
from ptxforge.isa.sync import FENCES
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__


def kernel(target="sm_80"):
    k = pf.KernelBuilder("t", target=target)
    mbar = k.shared("mbar", 8, align=8)
    return k, mbar, k.shared_base(mbar)


def emitted(k, skip=1):
    return [i.render() for i in k.finish().instructions[skip:-1]]


# ---------------------------------------------------------------- bar / barrier

def test_barrier_forms():
    k, _, _ = kernel()
    bid, n = k.reg(u32, "id"), k.reg(u32, "n")
    k.bar_sync()
    k.bar_sync(1, 64)
    k.bar_sync(bid, n)
    k.barrier_sync(0)
    k.bar_arrive(2, 128)
    k.bar_warp_sync()
    k.bar_warp_sync(0x0000FFFF)
    assert emitted(k) == [
        "bar.sync        0;",
        "bar.sync        1, 64;",
        "bar.sync        %id, %n;",
        "barrier.sync    0;",
        "bar.arrive      2, 128;",
        "bar.warp.sync   0xFFFFFFFF;",
        "bar.warp.sync   0xFFFF;",
    ]
    pf.assemble(k.module())


def test_barrier_sync_is_not_the_aligned_bar_sync():
    # ptxas compiles them differently (BAR.SYNC vs BAR.SYNC.DEFER_BLOCKING): keep both spellings
    k, _, _ = kernel()
    k.bar_sync(0)
    k.barrier_sync(0)
    a, b = k.finish().instructions[1:3]
    assert a.info.aligned and not b.info.aligned
    assert a.mnemonic == "bar.sync" and b.mnemonic == "barrier.sync"


def test_barrier_id_out_of_range_is_refused_at_the_users_line():
    k, _, _ = kernel()
    with pytest.raises(pf.ValidationError) as info:
        k.bar_sync(16)  # <- barrier-16
    assert "barrier id 16 is out of range: a CTA has barriers 0..15" in str(info.value)
    assert_located(info.value, "<- barrier-16", HERE)
    assert "out of range" in assembler_verdict(raw_kernel("bar.sync 16;"))
    assert assembler_verdict(raw_kernel("bar.sync 15;")) is None


@pytest.mark.parametrize("count", [100, 0, 1056])
def test_barrier_thread_count_must_be_a_multiple_of_32_up_to_1024(count):
    k, _, _ = kernel()
    with pytest.raises(pf.ValidationError):
        k.bar_sync(1, count)


def test_ptxas_refuses_a_thread_count_that_is_not_a_multiple_of_32():
    assert "multiple of warp size" in assembler_verdict(raw_kernel("bar.sync 1, 100;"))


def test_bar_arrive_needs_a_count():
    k, _, _ = kernel()
    with pytest.raises(pf.ValidationError, match="needs a thread count"):
        k.bar_arrive(1, None)


# ---------------------------------------------------------------- fences

def test_fences_and_their_targets():
    k, _, _ = kernel("sm_90")
    for kind in FENCES:
        k.fence(kind)
    k.membar("cta")
    assert emitted(k) == [f"{kind};" for kind in FENCES] + ["membar.cta;"]
    m = k.module()
    assert m.version == max(r.min_ptx for r in FENCES.values())  # the async-generic fences are 8.6
    pf.assemble(m)
    k80, _, _ = kernel("sm_80")
    with pytest.raises(pf.TargetError):
        k80.fence("fence.proxy.async.shared::cta")
    with pytest.raises(pf.ValidationError, match="unknown fence"):
        k80.fence("fence.sc.warp")
    assert assembler_verdict(raw_kernel("fence.proxy.async.shared::cta;", "sm_80")) is not None


# ---------------------------------------------------------------- mbarrier

def test_mbarrier_forms_on_sm80():
    k, sym, mb = kernel("sm_80")
    state = k.reg(b64, "state")
    k.mbarrier_init(mb, 32)
    k.mbarrier_init(sym, 1, space="shared::cta")
    k.mbarrier_arrive(mb, state=state)
    k.mbarrier_arrive(mb, state="_")
    k.mbarrier_test_wait(mb, 0, dst=k.reg(pf.pred, "done"))
    k.mbarrier_test_wait(mb, state, parity=False, dst=k.reg(pf.pred, "done2"))
    k.mbarrier_inval(mb)
    assert emitted(k) == [
        "mbarrier.init.shared.b64 [%mbar_base], 32;",
        "mbarrier.init.shared::cta.b64 [mbar], 1;",
        "mbarrier.arrive.shared.b64 %state, [%mbar_base];",
        "mbarrier.arrive.shared.b64 _, [%mbar_base];",
        "mbarrier.test_wait.parity.shared.b64 %done, [%mbar_base], 0;",
        "mbarrier.test_wait.shared.b64 %done2, [%mbar_base], %state;",
        "mbarrier.inval.shared.b64 [%mbar_base];",
    ]
    m = k.module()
    assert str(m.version) == "7.8"  # shared::cta spelling and the `_` sink
    pf.assemble(m)


def test_mbarrier_forms_on_sm90():
    k, _, mb = kernel("sm_90")
    n = k.reg(u32, "n")
    k.mbarrier_arrive(mb, expect_tx=4096, space="shared::cta")
    k.mbarrier_arrive(mb, expect_tx=n, space="shared::cta")
    k.mbarrier_expect_tx(mb, 64)
    k.mbarrier_try_wait(mb, 1, dst=k.reg(pf.pred, "ok"))
    k.mbarrier_arrive(mb, count=2, state=k.reg(b64, "tok"))
    assert emitted(k) == [
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%mbar_base], 0x1000;",
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%mbar_base], %n;",
        "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%mbar_base], 64;",
        "mbarrier.try_wait.parity.shared::cta.b64 %ok, [%mbar_base], 1;",
        "mbarrier.arrive.shared.b64 %tok, [%mbar_base], 2;",
    ]
    pf.assemble(k.module())


def test_try_wait_is_refused_on_sm80_at_the_users_line():
    k, _, mb = kernel("sm_80")
    with pytest.raises(pf.TargetError) as info:
        k.mbarrier_try_wait(mb, 0)  # <- try-wait-on-sm80
    assert "needs sm_90 or newer; the kernel targets sm_80" in str(info.value)
    assert_located(info.value, "<- try-wait-on-sm80", HERE)
    line = "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;"
    assert "requires .target sm_90" in assembler_verdict(raw_kernel(line, "sm_80"))
    assert assembler_verdict(raw_kernel(line, "sm_90")) is None


def test_arrive_with_a_count_needs_sm90_as_ptxas_says():
    k, _, mb = kernel("sm_80")
    with pytest.raises(pf.TargetError):
        k.mbarrier_arrive(mb, count=2)
    with pytest.raises(pf.TargetError):
        k.mbarrier_arrive(mb, expect_tx=16)
    assert assembler_verdict(raw_kernel("mbarrier.arrive.shared.b64 %rd1, [%r1], 2;", "sm_80")) is not None


def test_mbarrier_wait_loops_on_the_right_test_for_the_target():
    for target, op in (("sm_80", "mbarrier.test_wait.parity.shared.b64"),
                       ("sm_90", "mbarrier.try_wait.parity.shared::cta.b64")):
        k, _, mb = kernel(target)
        k.mbarrier_wait(mb, 1)
        m = k.module()
        text = str(m)
        assert f"{op} " in text
        lines = [ln.strip() for ln in text.splitlines()]
        loop = next(ln for ln in lines if ln.startswith("$L_mbar_wait"))
        wait = lines.index(loop)
        assert lines[wait + 1].startswith(op)
        assert lines[wait + 2] == f"@!%p0 bra       {loop[:-1]};"
        pf.assemble(m)


@pytest.mark.parametrize("call, match", [
    (lambda k, mb: k.mbarrier_init(mb, 0), "outside 1.."),
    (lambda k, mb: k.mbarrier_init(mb, 1 << 20), "outside 1.."),
    (lambda k, mb: k.mbarrier_test_wait(mb, 2), "parity of 0 or 1"),
    (lambda k, mb: k.mbarrier_init(mb, 1, space="global"), "shared memory"),
])
def test_mbarrier_refusals(call, match):
    k, _, mb = kernel()
    with pytest.raises(pf.ValidationError, match=match):
        call(k, mb)


def test_nanosleep():
    k, _, _ = kernel()
    k.nanosleep(100)
    k.nanosleep(k.reg(u32, "ns"))
    assert emitted(k) == ["nanosleep.u32   100;", "nanosleep.u32   %ns;"]
    pf.assemble(k.module())


def test_tensormap_acquire_fence_names_the_map():
    """fence.proxy.tensormap::generic.acquire.scope [addr], 128 (sm_90, PTX 8.3): the acquire half
    takes the tensor map's generic address; without one it is refused with the spelling."""
    import ptxforge as pf
    from ptxforge.isa import types as T
    from ptxforge.parse import parse
    k = pf.KernelBuilder("acq", target="sm_90")
    g = k.param_ptr("g")
    k.fence("fence.proxy.tensormap::generic.release.gpu")
    k.fence("fence.proxy.tensormap::generic.acquire.gpu", addr=k.cvta(g, frm="global", dst=k.reg(T.u64)))
    text = k.module().ptx
    assert "fence.proxy.tensormap::generic.acquire.gpu [%" in text and "], 128;" in text
    assert parse(text).ptx == text
    pf.assemble(k.module())
    with pytest.raises(pf.ValidationError, match=r"pass addr="):
        k.fence("fence.proxy.tensormap::generic.acquire.cta")
    with pytest.raises(pf.ValidationError, match="takes no operands"):
        k.fence("fence.proxy.tensormap::generic.release.cta", addr=g)
    old = pf.KernelBuilder("acq80", target="sm_80")
    with pytest.raises(pf.PtxforgeError, match="sm_90"):
        old.fence("fence.proxy.tensormap::generic.acquire.gpu", addr=old.param_ptr("g"))


def test_mbarrier_arrives_into_the_sink_need_the_versions_ptxas_takes():
    """ptxas 13 takes `mbarrier.arrive.shared.b64 _, [mbar]` from PTX 7.1 on (7.0 refuses it), and
    `mbarrier.arrive_drop.shared.b64 _, [mbar]` at 7.0 already."""
    from ptxforge.isa.targets import V
    from ptxforge.isa.operands import DISCARD
    from ptxforge.isa.sync import mbarrier_arrive, mbarrier_arrive_drop
    k = pf.KernelBuilder("sink", target="sm_80")
    mb = k.shared("mb", 8, align=8)
    for make, want in ((mbarrier_arrive, V("7.1")), (mbarrier_arrive_drop, V("7.0"))):
        ins = make(DISCARD, k._addr(mb))
        assert ins.req.min_ptx == want, make.__name__
