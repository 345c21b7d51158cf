"""Clusters on the interpreter: special registers, distributed shared memory through mapa, the cluster
barrier, launch checks, the multicast example; races across CTAs are reported."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.assembler import find_tool
from ptxforge.errors import LaunchError

from support.cluster_probes import (ctarank_probe, exchange_probe, expected_ctarank, expected_exchange, expected_ring,
                                    expected_sregs, multicast_probe, ring_probe, sreg_probe, SREGS)
from support.examples import load_example


@pytest.mark.parametrize("grid, cluster", [((4, 1), (2, 1)), ((4, 4), (2, 2)), ((6, 2), (3, 1)), ((2, 2), (1, 1))])
def test_special_registers(grid, cluster):
    out = np.zeros((grid[0] * grid[1], len(SREGS)), np.uint32)
    interp.run(sreg_probe(cluster), grid=grid, block=32, args=[out])
    np.testing.assert_array_equal(out, expected_sregs(grid, cluster))


@pytest.mark.parametrize("size, grid", [(2, 4), (4, 8), (8, 8)])
def test_distributed_shared_memory_ring(size, grid):
    out = np.zeros((grid, 64), np.uint32)
    interp.run(ring_probe(size), grid=grid, block=64, args=[out])
    np.testing.assert_array_equal(out, expected_ring(grid, size))


def test_a_missing_cluster_barrier_is_a_race_between_ctas():
    out = np.zeros((2, 64), np.uint32)
    with pytest.raises(interp.InterpError, match=r"\[race\]") as info:
        interp.run(ring_probe(2, sync=False), grid=2, block=64, args=[out])
    f = info.value.findings[0]
    assert f.instruction.opcode == "ld" and f.other.opcode == "st"
    assert f.nthreads == 128  # the readers of both CTAs; the writers are the partner CTA's threads


def test_a_store_into_another_cta_before_a_cluster_barrier_is_reported():
    """Another CTA's shared memory may be touched only once a completed cluster barrier showed that CTA running
    (on an H100 the ring without its first barrier failed the launch in some runs): the store is reported, for
    every thread that made it, at the line that emitted it."""
    out = np.zeros((4, 64), np.uint32)
    with pytest.raises(interp.InterpError, match=r"\[barrier\] store of another CTA's shared memory") as info:
        interp.run(ring_probe(4, started=False), grid=4, block=64, args=[out])
    f = info.value.findings[0]
    assert f.instruction.opcode == "st" and f.nthreads == 256 and "cluster_probes.py" in str(f.loc)
    report = interp.run(ring_probe(4), grid=4, block=64, args=[out])
    assert not report.findings


def test_a_multicast_before_a_cluster_barrier_is_reported():
    """A TMA multicast writes into the other CTA's shared memory and completes on its mbarrier: reported when it
    comes before a cluster barrier showed that CTA running; with the barrier both CTAs get the box."""
    src = np.arange(16 * 8, dtype=np.uint8).reshape(8, 16)
    out = np.zeros((2, 32), np.uint32)
    interp.run(multicast_probe(), grid=2, block=32, args=[interp.host_tensor_map(src, (16, 8)), out])
    assert (out == src.reshape(-1).view(np.uint32)).all()
    pf.assemble(multicast_probe().module(), backend="ptxas")
    with pytest.raises(interp.InterpError, match=r"\[barrier\] TMA multicast write of another CTA's shared"):
        interp.run(multicast_probe(started=False), grid=2, block=32, args=[interp.host_tensor_map(src, (16, 8)), out])


def test_a_bulk_copy_multicast_lands_in_every_named_cta():
    """cp.async.bulk ... .multicast::cluster: the 128 bytes land in both CTAs, each completing on its own
    mbarrier; reported when it comes before a cluster barrier; assembled by ptxas; read back from its text."""
    src = np.arange(32, dtype=np.uint32) * 3 + 5
    out = np.zeros((2, 32), np.uint32)
    interp.run(multicast_probe(bulk=True), grid=2, block=32, args=[src, out])
    assert (out == src).all()
    m = multicast_probe(bulk=True).module()
    assert "mbarrier::complete_tx::bytes.multicast::cluster" in m.ptx and pf.parse(m.ptx).ptx == m.ptx
    if find_tool("ptxas"):
        pf.assemble(m, backend="ptxas")
    with pytest.raises(interp.InterpError, match=r"\[barrier\] .*multicast write of another CTA's shared"):
        interp.run(multicast_probe(started=False, bulk=True), grid=2, block=32, args=[src, out])


@pytest.mark.parametrize("bulk", [False, True], ids=["tma", "bulk"])
@pytest.mark.parametrize("mask", [0b111, 0b100, 0])
def test_a_multicast_mask_beyond_the_cluster_is_reported(bulk, mask):
    """A ctaMask bit past the cluster's CTAs (or no bit) names no CTA: held in a register (the builder refuses such
    an immediate), the TMA tile load and the bulk copy report it alike, at the copy's line, instead of landing
    in the CTAs they can name."""
    src = np.arange(32, dtype=np.uint32) * 3 + 5
    arg = src if bulk else interp.host_tensor_map(src.view(np.uint8).reshape(8, 16), (16, 8))
    out = np.zeros((2, 32), np.uint32)
    with pytest.raises(interp.InterpError, match=rf"\[oob\] .*multicast mask {mask:#x} names no CTA or one beyond "
                                                 r"the cluster of 2") as info:
        interp.run(multicast_probe(bulk=bulk, mask=mask, mask_in_register=True), grid=2, block=32, args=[arg, out])
    f = info.value.findings[0]
    assert f.instruction.opcode.startswith("cp.async.bulk") and "cluster_probes.py" in str(f.loc)


def test_a_bulk_copy_into_the_partner_ctas_shared_memory_lands_on_its_mbarrier():
    """cp.async.bulk.shared::cluster.shared::cta: each CTA of a pair copies 128 bytes of its shared memory into
    the other's `inbox`, completing on the other's mbarrier (armed for 128 bytes before a cluster barrier);
    each then writes its inbox out: the partner's words.  Assembled by ptxas, read back from its text."""
    k = exchange_probe()
    got = np.zeros((2, 32), np.uint32)
    interp.run(k.module(), grid=2, block=32, args=[got])
    np.testing.assert_array_equal(got, expected_exchange())
    m = k.module()
    assert pf.parse(m.ptx).ptx == m.ptx
    if find_tool("ptxas"):
        pf.assemble(m, backend="ptxas")


def test_wait_without_arrive_and_mapa_out_of_the_cluster():
    k = pf.KernelBuilder("w", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    k.barrier_cluster_wait()
    with pytest.raises(interp.InterpError, match="without a barrier.cluster.arrive"):
        interp.run(k, grid=2, block=32)
    k = pf.KernelBuilder("m", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    k.mapa(k.shared_base(k.shared("s", 16)), 2)
    with pytest.raises(interp.InterpError, match="rank 2 of a cluster of 2"):
        interp.run(k, grid=2, block=32)


@pytest.mark.parametrize("size, grid", [(1, 2), (2, 4), (4, 8)])
def test_getctarank_inverts_mapa(size, grid):
    """getctarank of a mapa address (shared::cluster and generic) is the rank mapa was given; of a CTA-local
    shared address, the executing CTA's rank."""
    out = np.zeros((grid, 32, 4), np.uint32)
    interp.run(ctarank_probe(size), grid=grid, block=32, args=[out])
    np.testing.assert_array_equal(out, expected_ctarank(grid, size))


def test_getctarank_of_an_address_outside_shared_memory_is_reported():
    k = pf.KernelBuilder("g", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    x = k.param_ptr("x", u32)  # a global address, generic
    k.getctarank(x, space="generic")
    with pytest.raises(interp.InterpError, match=r"getctarank of address 0x[0-9a-f]+, which is no CTA's shared"):
        interp.run(k, grid=2, block=32, args=[np.zeros(4, np.uint32)])


def test_launch_checks():
    k = ring_probe(2)
    with pytest.raises(LaunchError, match="does not divide"):
        interp.run(k, grid=3, block=64, args=[np.zeros((3, 64), np.uint32)])
    with pytest.raises(LaunchError, match="requires clusters of"):
        interp.run(k, grid=4, block=64, args=[np.zeros((4, 64), np.uint32)], cluster=4)
    e = pf.KernelBuilder("e", target="sm_90", explicitcluster=True)
    with pytest.raises(LaunchError, match="explicitcluster"):
        interp.run(e, grid=2, block=32)
    interp.run(e, grid=2, block=32, cluster=2)


def test_cluster_multicast_example():
    ex = load_example("hopper_cluster_multicast")
    d, flags, want = ex.run_cpu()
    np.testing.assert_array_equal(d.astype(np.int64), want)
    np.testing.assert_array_equal(flags, ex.expected_flags(len(flags)))
    pf.assemble(ex.build(256, 1024, 512), backend="ptxas")


def test_probes_assemble():
    for k in (sreg_probe((2, 2)), ring_probe(4)):
        pf.assemble(k.module(), backend="ptxas")


def remote_arrive_probe(remote=True, first_arrive="release", init_fence=True):
    """CTA 0's mbarrier expects 2 arrivals: thread 0 of CTA 0 and (through mapa) thread 0 of CTA 1.
    CTA 1 first writes a word into CTA 0's shared memory; CTA 0 waits, then reads it.  The cluster barrier
    after the init: barrier.cluster.arrive with `first_arrive` ordering, then wait; `init_fence`:
    fence.mbarrier_init.release.cluster between the init and that barrier."""
    k = pf.KernelBuilder("remote_arrive", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", u32)
    bar = k.shared("bar", 8, align=8)
    box = k.shared("box", 16, align=16)
    rank = k.cluster_ctarank()
    lead = k.setp("eq", k.tid(), 0)
    is0 = k.setp("eq", rank, 0)
    k.mbarrier_init(bar, 2, pred=lead)
    if init_fence:
        k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    k.barrier_cluster_arrive(sem=first_arrive, aligned=True)
    k.barrier_cluster_wait(sem="acquire", aligned=True)
    with k.if_(k.setp("ne", rank, 0)):
        with k.if_(lead):
            k.st(k.mapa(k.shared_base(box), 0), 4242, type=u32, space="shared::cluster")
            if remote:
                k.mbarrier_arrive(k.mapa(k.shared_base(bar), 0), space="shared::cluster")
    with k.if_(is0):
        k.mbarrier_arrive(bar, pred=lead)
        k.mbarrier_wait(bar, 0)
        k.st(out, k.ld(box, type=u32, space="shared"), type=u32, pred=lead)
    k.cluster_sync()
    return k


def test_a_remote_mbarrier_arrive_completes_the_partner_phase():
    out = np.zeros(1, np.uint32)
    interp.run(remote_arrive_probe(), grid=2, block=32, args=[out])
    assert out[0] == 4242
    pf.assemble(remote_arrive_probe().module(), backend="ptxas")
    with pytest.raises(interp.InterpError, match="deadlock.*still expects 1 of its 2 arrivals"):
        interp.run(remote_arrive_probe(remote=False), grid=2, block=32, args=[out])


def test_a_relaxed_cluster_arrive_orders_only_what_a_release_fence_covers():
    """mbarrier.init, fence.mbarrier_init.release.cluster, barrier.cluster.arrive.relaxed + wait: the partner
    CTA's remote arrive finds the barrier initialized.  Without the fence the relaxed arrive orders nothing and
    the remote arrive races with the init; with a .release arrive the fence is not needed."""
    out = np.zeros(1, np.uint32)
    for kw in (dict(first_arrive="relaxed"), dict(first_arrive="release", init_fence=False)):
        r = interp.run(remote_arrive_probe(**kw), grid=2, block=32, args=[out], check=False)
        assert not r.findings and out[0] == 4242, (kw, [str(f) for f in r.findings])
    r = interp.run(remote_arrive_probe(first_arrive="relaxed", init_fence=False), grid=2, block=32, args=[out],
                   check=False)
    races = r.by_kind("race")
    assert races and races[0].instruction.opcode.startswith("mbarrier.arrive"), [str(f) for f in r.findings]
    assert races[0].other.opcode.startswith("mbarrier.init")
    if find_tool("ptxas"):
        pf.assemble(remote_arrive_probe(first_arrive="relaxed").module(), backend="ptxas")


def test_isspacep_tells_this_ctas_shared_memory_from_a_peers():
    """isspacep.shared / .shared::cta hold for the executing CTA's shared memory only (a generic address
    of it, or mapa's to its own rank); .shared::cluster for any CTA's of the cluster; neither is global."""
    k = pf.KernelBuilder("scopes", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 128, align=16)
    rank = k.cluster_ctarank()
    own = k.cvta(k.cvt(k.shared_base(buf), pf.u64), frm="shared")
    addrs = (own, k.mapa(own, rank, space="generic"), k.mapa(own, k.xor(rank, 1), space="generic"))
    word = k.mov(0, type=u32)
    for i, a in enumerate(addrs):
        for j, space in enumerate(("shared", "shared::cta", "shared::cluster", "global")):
            word = k.or_(word, k.shl(k.selp(1, 0, k.isspacep(a, space), type=u32), 4 * i + j))
    k.st(k.add(out, k.mul(k.global_index(), 4, mode="wide")), word, type=u32)
    got = np.zeros(64, np.uint32)
    interp.run(k.module(), grid=2, block=32, args=[got])
    # own and mapa to its own rank: shared, shared::cta, shared::cluster; a peer's: shared::cluster only
    assert set(got.tolist()) == {0b0111 | 0b0111 << 4 | 0b0100 << 8}
    if find_tool("ptxas"):
        pf.assemble(k.module())


def _store_around_cluster_arrive(late: bool):
    """CTA 0 of a pair stores into CTA 1's `inbox` before its barrier.cluster.arrive, or after it (`late`) while
    the phase still waits for CTA 1, whose arrive comes later in the program; both wait; CTA 1 reads its
    inbox out."""
    k = pf.KernelBuilder("cluster_late_store", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", u32)
    tid = k.tid()
    slot = k.add(k.shared_base(k.shared("inbox", 128, align=16)), k.shl(tid, 2))
    rank = k.cluster_ctarank()
    k.cluster_sync()  # both CTAs running before CTA 0 writes into CTA 1
    with k.if_(k.setp("eq", rank, 0)):
        if not late:
            k.st(k.mapa(slot, 1), k.add(tid, 100), type=u32, space="shared::cluster")
        k.barrier_cluster_arrive(sem="release", aligned=True)
        if late:
            k.st(k.mapa(slot, 1), k.add(tid, 100), type=u32, space="shared::cluster")
    with k.if_(k.setp("eq", rank, 1)):
        k.barrier_cluster_arrive(sem="release", aligned=True)
    k.barrier_cluster_wait(sem="acquire", aligned=True)
    with k.if_(k.setp("eq", rank, 1)):
        k.st(k.add(out, k.mul(tid, 4, mode="wide")), k.ld(slot, type=u32, space="shared"), type=u32)
    k.cluster_sync()
    return k.module()


def test_a_cluster_barrier_arrive_releases_only_what_came_before_it():
    """barrier.cluster.arrive orders the stores before it before the reads after the partner's wait; a store
    between a CTA's arrive and its wait, while the phase waits for the other CTA, is ordered by nothing."""
    out = np.zeros(32, np.uint32)
    r = interp.run(_store_around_cluster_arrive(False), grid=2, block=32, args=[out], check=False)
    assert not r.findings, [str(f) for f in r.findings]
    np.testing.assert_array_equal(out, np.arange(32) + 100)
    r = interp.run(_store_around_cluster_arrive(True), grid=2, block=32, args=[out], check=False)
    races = r.by_kind("race")
    assert len(races) == 1 and races[0].message.startswith("read-after-write"), [str(f) for f in r.findings]
    assert "an arrival orders only the accesses made before it" in races[0].message
    if find_tool("ptxas"):
        pf.assemble(_store_around_cluster_arrive(True), backend="ptxas")


def _dsmem_after_relaxed_arrive(*steps):
    """Each thread of a CTA pair writes its word of `inbox` ("store") and thread 0 initializes the mbarrier `bar`
    ("init"), in the order `steps` names, with the fences it names ("fence...") between them, made by every
    thread; then barrier.cluster.arrive.relaxed + barrier.cluster.wait; then each thread reads the partner CTA's
    word through distributed shared memory, and (with "init") thread 0 of CTA 1 arrives on CTA 0's barrier, which
    CTA 0 waits for."""
    k = pf.KernelBuilder("dsmem_relaxed_arrive", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", u32)
    tid = k.tid()
    slot = k.add(k.shared_base(k.shared("inbox", 128, align=16)), k.shl(tid, 2))
    bar = k.shared("bar", 8, align=8)
    rank = k.cluster_ctarank()
    lead = k.setp("eq", tid, 0)
    for step in steps:
        if step == "store":
            k.st(slot, k.add(tid, k.mul(rank, 100)), type=u32, space="shared")
        elif step == "init":
            k.mbarrier_init(bar, 2, pred=lead)
        else:
            k.fence(step)
    k.barrier_cluster_arrive(sem="relaxed", aligned=True)
    k.barrier_cluster_wait(sem="acquire", aligned=True)
    got = k.ld(k.mapa(slot, k.xor(rank, 1)), type=u32, space="shared::cluster")
    k.st(k.add(out, k.mul(k.global_index(), 4, mode="wide")), got, type=u32)
    if "init" in steps:
        with k.if_(k.setp("ne", rank, 0)):
            k.mbarrier_arrive(k.mapa(k.shared_base(bar), 0), space="shared::cluster", pred=lead)
        with k.if_(k.setp("eq", rank, 0)):
            k.mbarrier_arrive(bar, pred=lead)
            k.mbarrier_wait(bar, 0)
    k.cluster_sync()
    return k.module()


_INIT_FENCE = "fence.mbarrier_init.release.cluster"


def _opname(ins):
    """"ld", "mbarrier.arrive" ...: an instruction's opcode without its type and space."""
    parts = ins.opcode.split(".")
    return ".".join(parts[:2]) if parts[0] == "mbarrier" else parts[0]


@pytest.mark.parametrize("steps, racy", [
    (("store", _INIT_FENCE), ["ld"]),  # the init fence releases mbarrier inits, not the store
    (("store", "init", _INIT_FENCE), ["ld"]),  # ... though it does release the init beside it
    (("store", "fence.release.cluster"), []),
    (("store", "fence.acq_rel.cluster"), []),
    (("store", "fence.sc.gpu"), []),
    (("store", "fence.release.cta"), ["ld"]),  # a CTA-scoped fence does not reach the partner CTA
    (("init", "store", "fence.release.cluster", _INIT_FENCE), []),
    (("store", _INIT_FENCE, "fence.release.cluster"), []),
    # the real fence releases what came before it, the init fence the inits before it: not the store between
    (("fence.release.cluster", "store", _INIT_FENCE), ["ld"]),
    (("fence.release.cluster", "store", "init", _INIT_FENCE), ["ld"]),
    (("init", "fence.release.cluster", "store", _INIT_FENCE), ["ld"]),
    # an init after the init fence is released by nothing: the partner's remote arrive races with it, and so
    # do the waits of the other threads of its CTA
    (("store", "fence.release.cluster", _INIT_FENCE, "init"), ["mbarrier.arrive", "mbarrier.try_wait"]),
])
def test_fence_mbarrier_init_releases_only_the_mbarrier_inits_before_it(steps, racy):
    """fence.mbarrier_init.release.cluster releases the thread's mbarrier.init operations before it for a later
    barrier.cluster.arrive.relaxed, and nothing else: ordinary shared data written before it and read by the
    partner CTA through distributed shared memory after the cluster wait is a race, which a release fence of
    cluster scope or wider (fence.release / fence.acq_rel / fence.sc) prevents; a thread with both fences has
    the stores before its release fence released and the inits before its init fence.  Assembled by ptxas."""
    m = _dsmem_after_relaxed_arrive(*steps)
    out = np.zeros(64, np.uint32)
    r = interp.run(m, grid=2, block=32, args=[out], check=False)
    np.testing.assert_array_equal(out, np.arange(64) % 32 + 100 * (1 - np.arange(64) // 32))
    races = r.by_kind("race")
    assert [_opname(f.instruction) for f in races] == racy and len(r.findings) == len(races), \
        [str(f) for f in r.findings]
    for f in races:
        assert f.other.opcode.startswith("st" if f.instruction.opcode == "ld" else "mbarrier.init"), str(f)
        assert (_INIT_FENCE in f.message) == (f.instruction.opcode == "ld" and _INIT_FENCE in steps), str(f)
    if find_tool("ptxas"):
        pf.assemble(m, backend="ptxas")
