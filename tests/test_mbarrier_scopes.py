"""mbarrier operations with their memory semantics and scope written out (`.release.cluster`, `.relaxed.cta`,
`.acquire.cluster`, ...), the one-sided fences, and what each needs; every form as libcu++'s cuda::ptx spells it
for sm_90 is built, assembled, read back from its text, and refused where it does not exist."""

import pytest

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.errors import TargetError, ValidationError
from ptxforge.isa.sync import FENCES


def _forms(k):
    """Every scoped mbarrier form on one barrier of this CTA and one of the cluster's (sm_90)."""
    bar = k.shared("bar", 8, align=8)
    a = k.shared_base(bar)
    n = k.mov(1, type=u32)
    for sem in ("release", "relaxed"):
        for scope in ("cta", "cluster"):
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cta")
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cta", count=n)
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cta", expect_tx=n)
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cluster")
    for scope in ("cta", "cluster"):
        k.mbarrier_expect_tx(a, 128, scope=scope)
    token = k.mbarrier_arrive(a, space="shared::cta")
    for sem in ("acquire", "relaxed"):
        for scope in ("cta", "cluster"):
            k.mbarrier_test_wait(a, 0, sem=sem, scope=scope)
            k.mbarrier_test_wait(a, token, parity=False, sem=sem, scope=scope)
            k.mbarrier_try_wait(a, 1, sem=sem, scope=scope, suspend_ns=1000)
    for kind in sorted(f for f in FENCES if f.startswith(("fence.acquire", "fence.release"))):
        k.fence(kind)


def test_scoped_mbarrier_forms_and_one_sided_fences_assemble_and_read_back():
    k = pf.KernelBuilder("scoped", target="sm_90")
    _forms(k)
    m = k.module()
    text = m.ptx
    for spelled in ("mbarrier.arrive.relaxed.cluster.shared::cta.b64", "mbarrier.arrive.release.cta.shared::cluster.b64",
                    "mbarrier.arrive.expect_tx.release.cluster.shared::cta.b64", "mbarrier.expect_tx.relaxed.cluster",
                    "mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64", "mbarrier.test_wait.acquire.cta",
                    "fence.release.sync_restrict::shared::cta.cluster;", "fence.acquire.gpu;"):
        assert spelled in text, spelled
    assert str(m.version) == "8.6"  # .relaxed and the one-sided fences
    pf.assemble(m)
    again = pf.parse(text)
    assert again.ptx == text


@pytest.mark.parametrize("build,error,match", [
    (lambda k, a: k.mbarrier_arrive(a, sem="relaxed", scope="cta"), TargetError, "sm_90"),
    (lambda k, a: k.mbarrier_arrive(a, sem="release", scope="cluster"), TargetError, "sm_90"),
    (lambda k, a: k.mbarrier_test_wait(a, 0, sem="acquire"), ValidationError, "semantics and scope together"),
    (lambda k, a: k.mbarrier_test_wait(a, 0, sem="release", scope="cta"), ValidationError, "sem one of acquire"),
    (lambda k, a: k.mbarrier_arrive(a, sem="acquire", scope="cta"), ValidationError, "sem one of release"),
    (lambda k, a: k.mbarrier_arrive(a, count=2, no_complete=True, sem="relaxed", scope="cta"), ValidationError,
     "noComplete takes no .relaxed"),
    (lambda k, a: k.fence("fence.release.gpu"), TargetError, "sm_90"),
])
def test_forms_that_do_not_exist_are_refused_by_name(build, error, match):
    k = pf.KernelBuilder("no", target="sm_80")
    a = k.shared_base(k.shared("bar", 8, align=8))
    with pytest.raises(error, match=match):
        build(k, a)


def test_sm80_takes_release_and_acquire_at_cta_scope():
    k = pf.KernelBuilder("ok", target="sm_80")
    a = k.shared_base(k.shared("bar", 8, align=8))
    k.mbarrier_init(a, 1)
    tok = k.mbarrier_arrive(a, sem="release", scope="cta")
    k.mbarrier_test_wait(a, tok, parity=False, sem="acquire", scope="cta")
    m = k.module()
    assert str(m.version) == "8.0"
    pf.assemble(m)


def test_loads_named_as_landing_in_this_cta_need_ptx_8_6_and_take_no_multicast():
    """cp.async.bulk{.tensor} with a .shared::cta destination (PTX 8.6): built, assembled, read back; a
    multicast into .shared::cta is refused as ptxas refuses it, and an sm_90 module without it stays at 8.0."""
    k = pf.KernelBuilder("cta_dst", target="sm_90")
    tmap = k.param("tmap", pf.b8, nbytes=128, align=64)
    src = k.param_ptr("src", u32)
    buf = k.shared_base(k.shared("buf", 1024, align=128))
    bar = k.shared_base(k.shared("bar", 8, align=8))
    k.bulk_copy(buf, src, 16, bar, dst_space="shared::cta")
    k.tensor_load(buf, k.param_address(tmap), (0, 0), bar, dst_space="shared::cta")
    m = k.module()
    text = m.ptx
    assert "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes" in text
    assert "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes" in text
    assert str(m.version) == "8.6"
    pf.assemble(m)
    assert pf.parse(text).ptx == text
    old = pf.KernelBuilder("cluster_dst", target="sm_90")
    t2, s2 = old.param("tmap", pf.b8, nbytes=128, align=64), old.param_ptr("src", u32)
    b2, buf2 = old.shared_base(old.shared("bar", 8, align=8)), old.shared_base(old.shared("buf", 1024, align=128))
    with pytest.raises(ValidationError, match="multicast lands in the cluster's CTAs"):
        old.tensor_load(buf2, old.param_address(t2), (0, 0), b2, multicast=3, dst_space="shared::cta")
    with pytest.raises(ValidationError, match="lands in one of"):
        old.bulk_copy(buf2, s2, 16, b2, dst_space="global")
    old.tensor_load(buf2, old.param_address(t2), (0, 0), b2)
    assert str(old.module().version) == "8.0"


@pytest.mark.parametrize("arrive, wait, fence", [("release", "acquire", None), ("relaxed", "relaxed", "fence.acquire.cta"),
                                                 ("relaxed", "relaxed", None)])
def test_a_bulk_copy_into_shared_cta_with_scoped_arrival_and_wait_runs_on_the_interpreter(arrive, wait, fence):
    """The copy lands where the .shared::cluster form lands (this CTA's shared memory), completing on an
    mbarrier armed by an arrival with .release.cta (or .relaxed.cta) and waited on with .acquire.cta (or
    .relaxed.cta, then a fence.acquire.cta; without the fence the reads of the landed bytes race with the
    copy)."""
    import numpy as np
    k = pf.KernelBuilder("cta_copy", target="sm_90", reqntid=32)
    src, dst = k.param_ptr("src", u32), k.param_ptr("dst", u32)
    bar = k.shared_base(k.shared("bar", 8, align=8))
    buf = k.shared_base(k.shared("buf", 128, align=128))
    t = k.tid()
    first = k.setp("eq", t, 0)
    k.mbarrier_init(bar, 1, space="shared::cta", pred=first)
    k.fence("fence.mbarrier_init.release.cluster", pred=first)
    k.bar_sync(0)
    k.mbarrier_arrive(bar, expect_tx=128, space="shared::cta", sem=arrive, scope="cta", pred=first)
    k.bulk_copy(buf, src, 128, bar, dst_space="shared::cta", pred=first)
    lbl = k.label("wait")
    k.place(lbl)
    done = k.mbarrier_try_wait(bar, 0, sem=wait, scope="cta")
    k.bra(lbl, pred=~done)
    if fence:
        k.fence(fence)
    off = k.shl(t, 2, type=u32)
    k.st(k.add(dst, k.cvt(off, pf.u64)), k.ld(k.add(buf, off), type=u32, space="shared"), type=u32)
    data = np.arange(32, dtype=np.uint32) * 7 + 1
    out = np.zeros(32, np.uint32)
    r = interp.run(k.module(), block=32, args=[data, out], check=False)
    np.testing.assert_array_equal(out, data)
    if wait == "acquire" or fence:
        assert not r.findings, [str(f) for f in r.findings]
    else:
        assert r.findings and r.findings[0].instruction.opcode == "ld", [str(f) for f in r.findings]
    pf.assemble(k.module())


@pytest.mark.parametrize("space", ["shared", "generic", "generic32"])
def test_cp_async_arrival_on_an_mbarrier_named_by_a_generic_address(space):
    """cp.async.mbarrier.arrive.noinc.b64 [generic] (no space written) tracks the thread's cp.asyncs on the
    mbarrier the generic address names, as the .shared form does; given a 32-bit register (as libcu++ spells
    it: the shared offset, which ptxas's SASS arrives at as it is) the same: run on the interpreter,
    assembled, read back."""
    import numpy as np
    k = pf.KernelBuilder("cp_arrive", target="sm_80", reqntid=32)
    src, dst = k.param_ptr("src", u32), k.param_ptr("dst", u32)
    bar = k.shared_base(k.shared("bar", 8, align=8))
    buf = k.shared_base(k.shared("buf", 512, align=16))
    t = k.tid()
    k.mbarrier_init(bar, 32, pred=k.setp("eq", t, 0))
    k.bar_sync(0)
    off = k.mul(t, 16, mode="wide")
    k.cp_async(k.add(buf, k.shl(t, 4)), k.add(src, off), 16)
    named = k.cvta(k.cvt(bar, pf.u64), frm="shared") if space == "generic" else bar
    k.cp_async_mbarrier_arrive(named, noinc=True, space=space.rstrip("32"))
    k.mbarrier_wait(bar, 0)
    k.st(k.add(dst, off), k.ld(k.add(buf, k.shl(k.xor(t, 31), 4)), type=pf.b32, space="shared", vec=4), type=pf.b32)
    m = k.module()
    assert ("cp.async.mbarrier.arrive.noinc.b64" in m.ptx) == space.startswith("generic")
    data = np.arange(128, dtype=np.uint32)
    out = np.zeros(128, np.uint32)
    interp.run(m, block=32, args=[data, out])
    np.testing.assert_array_equal(out.reshape(32, 4), data.reshape(32, 4)[np.arange(32) ^ 31])
    pf.assemble(m)
    assert pf.parse(m.ptx).ptx == m.ptx
