"""Clusters: directives, barrier.cluster, mapa, .shared::cluster accesses and mbarrier arrives, TMA
multicast; what ptxforge accepts assembles with ptxas 13.0 and what it refuses ptxas refuses."""

import pytest

import ptxforge as pf
from ptxforge import b16, u32
from ptxforge.errors import LaunchError
from ptxforge.runtime.cluster import check_cluster_shape
from support.ptx_text import assembler_verdict, raw_kernel


def _cluster_kernel(**kw):
    k = pf.KernelBuilder("cl", target="sm_90a", reqntid=128, **kw)
    tm = k.param_tensormap("tm")
    buf = k.shared("buf", 4096, align=1024)
    mb = k.shared("mb", 8, align=8)
    r = k.cluster_ctarank()
    peer = k.xor(r, 1)
    other = k.mapa(k.shared_base(buf), peer)
    v = k.ld(other, type=u32, space="shared::cluster")
    k.st(other, v, type=u32, space="shared::cluster", offset=4)
    k.mbarrier_arrive(k.mapa(k.shared_base(mb), 0), space="shared::cluster")
    k.tensor_load(buf, tm, (0, 0), mb, multicast=0b11)
    k.tensor_load(buf, tm, (0, 0), mb, multicast=k.mov(3, type=b16))
    k.cluster_sync()
    k.barrier_cluster_arrive(sem="relaxed", aligned=True)
    k.barrier_cluster_wait(aligned=True)
    for name in ("clusterid.x", "nclusterid.y", "cluster_ctaid.x", "cluster_nctaid.z", "cluster_nctarank"):
        k.sreg(name)
    return k


def test_cluster_kernel_renders_and_assembles():
    k = _cluster_kernel(reqnctapercluster=(2, 1), explicitcluster=True)
    text = k.module().ptx
    for line in (".explicitcluster", ".reqnctapercluster 2, 1, 1", "mapa.shared::cluster.u32",
                 "ld.shared::cluster.u32", "st.shared::cluster.u32",
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _,",
                 ".mbarrier::complete_tx::bytes.multicast::cluster [buf], [%tm, {0, 0}], [mb], 3;",
                 "barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;",
                 "barrier.cluster.arrive.relaxed.aligned;"):
        assert line in text, line
    assert str(k.module().version) == "8.0"
    pf.assemble(k.module(), backend="ptxas")
    k2 = _cluster_kernel(maxclusterrank=8)
    assert ".maxclusterrank 8" in k2.module().ptx
    pf.assemble(k2.module(), backend="ptxas")


def test_cluster_directives_need_sm90_and_sane_shapes():
    with pytest.raises(pf.TargetError, match="sm_90"):
        pf.KernelBuilder("c", target="sm_80", reqnctapercluster=2)
    with pytest.raises(pf.ValidationError, match="at most 16"):
        pf.KernelBuilder("c", target="sm_90", reqnctapercluster=(4, 4, 2))
    with pytest.raises(pf.ValidationError, match="1..16"):
        pf.KernelBuilder("c", target="sm_90", maxclusterrank=17)


def test_refusals_agree_with_ptxas():
    k = pf.KernelBuilder("c", target="sm_90a")
    with pytest.raises(pf.ValidationError, match="must be '_'"):
        k.mbarrier_arrive(k.reg(u32), space="shared::cluster", state=k.reg(pf.b64))
    assert assembler_verdict(raw_kernel("mbarrier.arrive.release.cluster.shared::cluster.b64 %rd2, [%r1];",
                                        "sm_90a")) is not None
    with pytest.raises(pf.ValidationError, match="barrier.cluster.wait takes"):
        k.barrier_cluster_wait(sem="relaxed")
    assert assembler_verdict(raw_kernel("barrier.cluster.wait.relaxed;", "sm_90a")) is not None
    with pytest.raises(pf.ValidationError, match="16-bit mask"):
        k.tensor_load(k.shared("b", 1024, align=1024), k.reg(pf.u64), (0,), k.shared("m", 8, align=8),
                      multicast=1 << 16)
    with pytest.raises(pf.ValidationError, match="not .shared"):
        k.mapa(k.reg(u32), 1, space="shared")


def test_relaxed_arrive_raises_the_version():
    for sem, version in ((None, "7.8"), ("release", "8.0"), ("relaxed", "8.0")):
        k = pf.KernelBuilder("c", target="sm_90")
        k.barrier_cluster_arrive(sem=sem)
        k.barrier_cluster_wait()
        assert str(k.module().version) == version
        pf.assemble(k.module(), backend="ptxas")


def test_cluster_shape_checks():
    assert check_cluster_shape((4, 2, 1), (2, 1), kernel="k") == (2, 1, 1)
    with pytest.raises(LaunchError, match="does not divide"):
        check_cluster_shape((3, 1, 1), (2, 1, 1), kernel="k")
    with pytest.raises(LaunchError, match="requires clusters of"):
        check_cluster_shape((4, 1, 1), (4, 1, 1), kernel="k", required=(2, 1, 1))
    with pytest.raises(LaunchError, match="at most 8"):
        check_cluster_shape((16, 1, 1), (16, 1, 1), kernel="k")
    assert check_cluster_shape((16, 1, 1), (16, 1, 1), kernel="k", max_ctas=16) == (16, 1, 1)


def test_getctarank_and_the_bulk_l2_prefetch():
    """getctarank (the inverse of mapa) and cp.async.bulk.prefetch.L2 (sm_90): the spellings ptxas
    takes, the near misses it refuses refused here too, and the reader reads them back."""
    import ptxforge as pf
    from ptxforge.isa import types as T
    from ptxforge.parse import parse
    k = pf.KernelBuilder("rank", target="sm_90")
    g = k.param_ptr("g")
    s = k.shared_base(k.shared("buf", 256, align=16))
    r = k.getctarank(s)
    k.getctarank(k.cvta(g, frm="global", dst=k.reg(T.u64)), space="generic")
    k.bulk_prefetch(g, 256)
    k.bulk_prefetch(g, 256, policy=k.createpolicy())
    k.st(g, r, type=T.u32)
    text = k.module().ptx
    for line in ("getctarank.shared::cluster.u32", "getctarank.u64", "cp.async.bulk.prefetch.L2.global [%",
                 "cp.async.bulk.prefetch.L2.global.L2::cache_hint [%"):
        assert line in text, line
    if "ptxas" in pf.assembler.available_backends():
        pf.assemble(k.module(), backend="ptxas")
    assert parse(text).ptx == text
    with pytest.raises(pf.ValidationError, match="64-bit register"):
        k.getctarank(s, space="generic")  # ptxas: Arguments mismatch
    with pytest.raises(pf.ValidationError, match="shared::cluster or generic"):
        k.getctarank(s, space="shared::cta")  # ptxas: expected '::cluster'
    with pytest.raises(pf.ValidationError, match="multiple of 16"):
        k.bulk_prefetch(g, 100)  # ptxas: expected to be a multiple of 16
    old = pf.KernelBuilder("old", target="sm_80")
    with pytest.raises(pf.PtxforgeError, match="sm_90"):
        old.bulk_prefetch(old.param_ptr("g"), 256)


def test_the_tensor_l2_prefetch():
    """cp.async.bulk.prefetch.tensor.Nd.L2.global.tile (sm_90): 1 to 5 .s32 coordinates, guarded or not;
    ptxas takes what is built, the reader reads it back, the interpreter runs it as the hint it is (no
    value changes), and the near misses are refused with the reason."""
    import numpy as np
    from ptxforge import interp
    from ptxforge.isa import types as T
    from ptxforge.parse import parse
    k = pf.KernelBuilder("pf", target="sm_90a", reqntid=32)
    tm = k.param_tensormap("tm")
    out = k.param_ptr("out", u32)
    x = k.mov(7, type=T.s32)
    k.tensor_prefetch(tm, (x, 0))
    k.tensor_prefetch(tm, (0, x, 1, 2, 3), pred=k.setp("eq", k.tid(), 0))
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.tid(), type=u32)
    text = k.module().ptx
    for line in ("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%", "cp.async.bulk.prefetch.tensor.5d.L2.global.tile"):
        assert line in text, line
    if "ptxas" in pf.assembler.available_backends():
        assert "UTMAPF" in " ".join(pf.assemble(k.module(), backend="ptxas").sass_opcodes())
    assert parse(text).ptx == text
    got = np.zeros(32, np.uint32)
    tmap = interp.host_tensor_map(np.zeros((8, 128), np.uint8), (128, 8), dtype="u8", swizzle=128)
    assert interp.run(k.module(), block=32, args=[tmap, got]).ok
    np.testing.assert_array_equal(got, np.arange(32))
    k = pf.KernelBuilder("bad", target="sm_90a")
    tm = k.param_tensormap("tm")
    with pytest.raises(pf.ValidationError, match="1 to 5 coordinates"):
        k.tensor_prefetch(tm, ())
    with pytest.raises(pf.ValidationError, match="1 to 5 coordinates"):
        k.tensor_prefetch(tm, (0,) * 6)
    with pytest.raises(pf.ValidationError, match="tensor coordinate 0"):
        k.tensor_prefetch(tm, (k.mov(1, type=T.u64), 0))
    old = pf.KernelBuilder("old", target="sm_80")
    with pytest.raises(pf.PtxforgeError, match="sm_90"):
        old.tensor_prefetch(old.param_tensormap("tm"), (0, 0))
