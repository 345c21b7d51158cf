"""Shared-memory race detection: an access by one thread to bytes another thread accessed, with no
barrier that both took part in between, is reported (read-after-write, write-after-read,
write-after-write); bar.sync, bar.warp.sync and mbarrier phases order accesses."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import b32, u32
from ptxforge import interp


def exchange(sync=None, threads=64, partner=lambda k, t: k.xor(t, 1, type=b32)):
    """Each thread writes its slot, synchronizes with `sync`, reads its partner's slot."""
    k = pf.KernelBuilder("exchange", target="sm_80", reqntid=threads)
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 4 * threads, align=16)
    t = k.tid()
    base = k.shared_base(buf)
    k.st(k.add(base, k.shl(t, 2)), k.mul(t, 3, type=u32), type=u32, space="shared")
    if sync == "bar":
        k.bar_sync(0)
    elif sync == "warp":
        k.bar_warp_sync()
    v = k.ld(k.add(base, k.shl(partner(k, t), 2, type=b32)), type=u32, space="shared")
    k.st(k.add(out, k.mul(t, 4, mode="wide")), v, type=u32)
    return k.module()


def run(mod, threads=64):
    out = np.zeros(threads, np.uint32)
    return interp.run(mod, block=threads, args=[out], check=False), out


def test_raw_without_barrier_is_a_race():
    r, _ = run(exchange(None))
    assert [f.kind for f in r.findings] == ["race"]
    f = r.findings[0]
    assert "read-after-write" in f.message and f.other is not None and f.other.opcode == "st"
    assert "test_interp_races.py" in str(f)


def test_bar_sync_orders_the_exchange():
    r, out = run(exchange("bar"))
    assert r.ok
    np.testing.assert_array_equal(out, 3 * (np.arange(64) ^ 1))


def test_bar_warp_sync_orders_within_a_warp_only():
    r, _ = run(exchange("warp"))  # partner = t ^ 1: same warp
    assert r.ok
    r, _ = run(exchange("warp", partner=lambda k, t: k.xor(t, 32, type=b32)))  # other warp
    assert [f.kind for f in r.findings] == ["race"]


def test_own_writes_need_no_barrier():
    r, _ = run(exchange(None, partner=lambda k, t: k.mov(t, type=u32)))
    assert r.ok


def test_write_after_read_without_barrier():
    k = pf.KernelBuilder("war", target="sm_80", reqntid=64)
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 256, align=16)
    t = k.tid()
    base = k.shared_base(buf)
    slot = k.add(base, k.shl(t, 2))
    k.st(slot, t, type=u32, space="shared")
    k.bar_sync(0)
    v = k.ld(k.add(base, k.shl(k.xor(t, 3, type=b32), 2, type=b32)), type=u32, space="shared")
    k.st(slot, 7, type=u32, space="shared")  # overwrites a slot the partner may not have read yet
    k.st(k.add(out, k.mul(t, 4, mode="wide")), v, type=u32)
    r = interp.run(k.module(), block=64, args=[np.zeros(64, np.uint32)], check=False)
    assert [f.kind for f in r.findings] == ["race"] and "write-after-read" in r.findings[0].message


def test_write_after_write_and_same_instruction_collisions():
    k = pf.KernelBuilder("waw", target="sm_80", reqntid=64)
    buf = k.shared("buf", 256, align=16)
    t = k.tid()
    base = k.shared_base(buf)
    k.st(k.add(base, k.shl(k.shr(t, 1), 2)), t, type=u32, space="shared")  # two threads per slot
    r = interp.run(k.module(), block=64, args=[], check=False)
    assert [f.kind for f in r.findings] == ["race"] and "in one instruction" in r.findings[0].message


def test_mbarrier_phase_orders_producer_and_consumer():
    """Warp 0 fills a buffer and arrives; warp 1 waits on the phase, then reads: no race.  Without the
    wait the same read is a race."""
    def kernel(wait):
        k = pf.KernelBuilder("pc", target="sm_90", reqntid=64)
        out = k.param_ptr("out", u32)
        buf = k.shared("buf", 128, align=16)
        bar = k.shared("bar", 8, align=8)
        t = k.tid()
        rb, base = k.shared_base(bar), k.shared_base(buf)
        k.mbarrier_init(rb, 32, pred=k.setp("eq", t, 0))
        k.bar_sync(0)
        lane = k.and_(t, 31, type=b32)
        with k.if_(k.setp("lt", t, 32)):
            k.st(k.add(base, k.shl(lane, 2)), k.add(lane, 100), type=u32, space="shared")
            k.mbarrier_arrive(rb)
        with k.if_(k.setp("ge", t, 32)):
            if wait:
                k.mbarrier_wait(rb, 0)
            v = k.ld(k.add(base, k.shl(k.xor(lane, 5, type=b32), 2, type=b32)), type=u32, space="shared")
            k.st(k.add(out, k.mul(lane, 4, mode="wide")), v, type=u32)
        return k.module()
    out = np.zeros(32, np.uint32)
    r = interp.run(kernel(True), block=64, args=[out])
    assert r.ok
    np.testing.assert_array_equal(out, (np.arange(32) ^ 5) + 100)
    r = interp.run(kernel(False), block=64, args=[out], check=False)
    assert "race" in [f.kind for f in r.findings]


def _relaxed_handoff(arrive_sem, before_arrive, wait_sem, after_wait, scope="cta"):
    """Warp 0 writes a buffer, makes the fence `before_arrive` (or none) and arrives with `arrive_sem`;
    warp 1 waits with `wait_sem`, makes the fence `after_wait` (or none) and reads the buffer."""
    k = pf.KernelBuilder("handoff", target="sm_90", reqntid=64)
    out = k.param_ptr("out", u32)
    base, rb = k.shared_base(k.shared("buf", 128, align=16)), k.shared_base(k.shared("bar", 8, align=8))
    t = k.tid()
    k.mbarrier_init(rb, 32, pred=k.setp("eq", t, 0))
    k.bar_sync(0)
    lane = k.and_(t, 31, type=b32)
    with k.if_(k.setp("lt", t, 32)):
        k.st(k.add(base, k.shl(lane, 2)), k.add(lane, 100), type=u32, space="shared")
        if before_arrive:
            k.fence(before_arrive)
        k.mbarrier_arrive(rb, sem=arrive_sem, scope=scope)
    with k.if_(k.setp("ge", t, 32)):
        spin = k.label("spin")
        k.place(spin)
        k.bra(spin, pred=~k.mbarrier_try_wait(rb, 0, sem=wait_sem, scope=scope))
        if after_wait:
            k.fence(after_wait)
        v = k.ld(k.add(base, k.shl(k.xor(lane, 5, type=b32), 2, type=b32)), type=u32, space="shared")
        k.st(k.add(out, k.mul(lane, 4, mode="wide")), v, type=u32)
    return k.module()


@pytest.mark.parametrize("arrive, before, wait, after, orders", [
    ("release", None, "acquire", None, True),
    ("relaxed", None, "acquire", None, False),  # a relaxed arrival releases nothing
    ("relaxed", "fence.release.cta", "acquire", None, True),
    ("relaxed", "fence.acq_rel.cta", "acquire", None, True),
    ("relaxed", "fence.acquire.cta", "acquire", None, False),  # an acquire fence releases nothing
    ("relaxed", "fence.mbarrier_init.release.cluster", "acquire", None, False),  # it releases mbarrier inits only
    ("release", None, "relaxed", None, False),  # a relaxed wait acquires nothing
    ("release", None, "relaxed", "fence.acquire.cta", True),
    ("release", None, "relaxed", "membar.cta", True),
    ("release", None, "relaxed", "fence.release.cta", False),  # a release fence acquires nothing
    ("relaxed", "fence.release.cta", "relaxed", "fence.acquire.cta", True),
])
def test_relaxed_mbarrier_operations_order_through_fences(arrive, before, wait, after, orders):
    """A .relaxed arrival releases the writes before it only after a fence that releases; a .relaxed wait
    acquires them only with a fence that acquires after it; otherwise the read is a race.  Assembled by ptxas."""
    m = _relaxed_handoff(arrive, before, wait, after)
    out = np.zeros(32, np.uint32)
    r = interp.run(m, block=64, args=[out], check=False)
    np.testing.assert_array_equal(out, (np.arange(32) ^ 5) + 100)
    races = [f for f in r.findings if f.kind == "race"]
    assert not r.findings if orders else races, [str(f) for f in r.findings]
    if races:
        assert races[0].instruction.opcode == "ld" and races[0].other.opcode == "st"
    pf.assemble(m)


def _one_fence_two_arrivals(write_after_fence: bool):
    """Warp 0 writes the buffer, makes fence.release.cta, arrives (.relaxed) on mbarrier A and then on B; with
    `write_after_fence` it writes the buffer between the fence and the arrivals instead.  Warp 1 waits on B
    and reads the buffer."""
    k = pf.KernelBuilder("one_fence", target="sm_90", reqntid=64)
    out = k.param_ptr("out", u32)
    base = k.shared_base(k.shared("buf", 128, align=16))
    ra, rb = k.shared_base(k.shared("bar_a", 8, align=8)), k.shared_base(k.shared("bar_b", 8, align=8))
    t = k.tid()
    with k.if_(k.setp("eq", t, 0)):
        k.mbarrier_init(ra, 32)
        k.mbarrier_init(rb, 32)
    k.bar_sync(0)
    lane = k.and_(t, 31, type=b32)
    with k.if_(k.setp("lt", t, 32)):
        if not write_after_fence:
            k.st(k.add(base, k.shl(lane, 2)), k.add(lane, 100), type=u32, space="shared")
        k.fence("fence.release.cta")
        if write_after_fence:
            k.st(k.add(base, k.shl(lane, 2)), k.add(lane, 100), type=u32, space="shared")
        k.mbarrier_arrive(ra, sem="relaxed", scope="cta")
        k.mbarrier_arrive(rb, sem="relaxed", scope="cta")
    with k.if_(k.setp("ge", t, 32)):
        k.mbarrier_wait(rb, 0)
        v = k.ld(k.add(base, k.shl(k.xor(lane, 5, type=b32), 2, type=b32)), type=u32, space="shared")
        k.st(k.add(out, k.mul(lane, 4, mode="wide")), v, type=u32)
    return k.module()


def test_one_release_fence_serves_every_later_relaxed_arrival():
    """fence.release then two .relaxed arrivals: each forms a release pattern with the fence, so the second
    barrier's waiter reads the writes before the fence in order; a write after the fence is released by neither."""
    out = np.zeros(32, np.uint32)
    r = interp.run(_one_fence_two_arrivals(False), block=64, args=[out], check=False)
    assert not r.findings, [str(f) for f in r.findings]
    np.testing.assert_array_equal(out, (np.arange(32) ^ 5) + 100)
    r = interp.run(_one_fence_two_arrivals(True), block=64, args=[out], check=False)
    assert [f.kind for f in r.findings] == ["race"], [str(f) for f in r.findings]
    pf.assemble(_one_fence_two_arrivals(False))


def test_a_cta_scoped_fence_does_not_release_a_cluster_scoped_relaxed_arrival():
    """The fence must reach as far as the arrival (and the acquiring fence as far as the wait)."""
    out = np.zeros(32, np.uint32)
    ok = interp.run(_relaxed_handoff("relaxed", "fence.release.cluster", "relaxed", "fence.acquire.cluster",
                                     scope="cluster"), block=64, args=[out], check=False)
    assert not ok.findings, [str(f) for f in ok.findings]
    for before, after in (("fence.release.cta", "fence.acquire.cluster"), ("fence.release.cluster", "fence.acquire.cta")):
        r = interp.run(_relaxed_handoff("relaxed", before, "relaxed", after, scope="cluster"), block=64, args=[out],
                       check=False)
        assert [f.kind for f in r.findings] and all(f.kind == "race" for f in r.findings), (before, after)


def _init_handed_over(steps):
    """Thread 0 makes `steps` ("init": mbarrier.init of `bar_b`, for the 32 threads of warp 1; otherwise a
    fence by name), then a .relaxed.cta arrival on `bar_a`, which warp 1 waits for before it arrives on `bar_b`
    and waits for its phase."""
    k = pf.KernelBuilder("init_handover", target="sm_90", reqntid=64)
    ra, rb = k.shared_base(k.shared("bar_a", 8, align=8)), k.shared_base(k.shared("bar_b", 8, align=8))
    t = k.tid()
    lead = k.setp("eq", t, 0)
    k.mbarrier_init(ra, 1, pred=lead)
    k.bar_sync(0)
    with k.if_(lead):
        for step in steps:
            if step == "init":
                k.mbarrier_init(rb, 32)
            else:
                k.fence(step)
        k.mbarrier_arrive(ra, sem="relaxed", scope="cta")
    with k.if_(k.setp("ge", t, 32)):
        k.mbarrier_wait(ra, 0)
        k.mbarrier_arrive(rb)
        k.mbarrier_wait(rb, 0)
    return k.module()


@pytest.mark.parametrize("steps, racy", [
    (("init", "fence.mbarrier_init.release.cluster"), False),
    (("init", "fence.release.cta"), False),
    (("init",), True),  # a relaxed arrival releases nothing by itself
    (("fence.mbarrier_init.release.cluster", "init"), True),  # the fence releases only the inits before it
    (("init", "fence.mbarrier_init.release.cluster", "fence.release.cta"), False),
    (("fence.release.cta", "init", "fence.mbarrier_init.release.cluster"), False),
])
def test_fence_mbarrier_init_lets_a_relaxed_mbarrier_arrival_release_the_inits_before_it(steps, racy):
    """The mbarrier.init a thread made before fence.mbarrier_init.release.cluster is released by its later
    .relaxed mbarrier arrival: the threads that observe that phase may use the barrier; an init after the
    fence is not released by it.  Assembled by ptxas."""
    m = _init_handed_over(steps)
    r = interp.run(m, block=64, args=[], check=False)
    races = r.by_kind("race")
    assert len(races) == len(r.findings) and bool(races) == racy, [str(f) for f in r.findings]
    for f in races:
        assert f.instruction.opcode.startswith("mbarrier.") and f.other.opcode.startswith("mbarrier.init"), str(f)
    pf.assemble(m)


def _access_around_arrival(where: str, war: bool, fence=None, waits=True):
    """An mbarrier of 64 arrivals: warp 1 arrives first and accesses a buffer `where` ("before" its arrival,
    "after" it while the phase still waits for warp 2, whose arrival comes later in the program: the
    interpreter runs the lowest instructions first; with a `fence`, warp 1's arrival is .relaxed and comes
    after the fence, and "between" puts the access after the fence and before the arrival).  RAW (`war`
    False): warp 1 writes, warp 2 waits for the phase and reads.  WAR: warp 1 reads, warp 0 waits for the
    phase and overwrites (a consumer freeing a ring slot it still reads).  `waits` False: warp 2 reads
    right after its own arrival, which completes the phase, without waiting for it."""
    k = pf.KernelBuilder("around", target="sm_90", reqntid=96)
    out = k.param_ptr("out", u32)
    base, rb = k.shared_base(k.shared("buf", 128, align=16)), k.shared_base(k.shared("bar", 8, align=8))
    t = k.tid()
    warp = k.shr(t, 5, type=u32)
    lane = k.and_(t, 31, type=b32)
    slot = k.add(base, k.shl(lane, 2))
    k.mbarrier_init(rb, 64, pred=k.setp("eq", t, 0))
    k.bar_sync(0)

    def access():
        if war:
            k.st(k.add(out, k.mul(lane, 4, mode="wide")), k.ld(slot, type=u32, space="shared"), type=u32)
        else:
            k.st(slot, k.add(lane, 100), type=u32, space="shared")

    with k.if_(k.setp("eq", warp, 1)):
        if where == "before":
            access()
        if fence:
            k.fence(fence)
        if where == "between":
            access()
        k.mbarrier_arrive(rb, sem="relaxed" if fence else None, scope="cta" if fence else None)
        if where == "after":
            access()
    with k.if_(k.setp("eq", warp, 2)):
        k.mbarrier_arrive(rb)
        if not war:
            if waits:
                k.mbarrier_wait(rb, 0)
            v = k.ld(k.add(base, k.shl(k.xor(lane, 5, type=b32), 2, type=b32)), type=u32, space="shared")
            k.st(k.add(out, k.mul(lane, 4, mode="wide")), v, type=u32)
    if war:
        with k.if_(k.setp("eq", warp, 0)):
            k.mbarrier_wait(rb, 0)
            k.st(slot, 7, type=u32, space="shared")
    return k.module()


@pytest.mark.parametrize("war", [False, True], ids=["read-after-write", "write-after-read"])
@pytest.mark.parametrize("fence, late", [(None, "after"), ("fence.release.cta", "after"),
                                         ("fence.release.cta", "between")])
def test_an_arrival_orders_only_the_accesses_made_before_it(war, fence, late):
    """Accesses a thread makes after its arrival, while the phase waits for other arrivals, are not ordered
    before the threads that observe the phase (nor, for a .relaxed arrival, those after its fence); the
    finding says so.  The same accesses before the arrival (and the fence) are ordered.  Assembled by ptxas."""
    out = np.zeros(32, np.uint32)
    early = _access_around_arrival("before", war, fence)
    r = interp.run(early, block=96, args=[out], check=False)
    assert not r.findings, [str(f) for f in r.findings]
    bad = _access_around_arrival(late, war, fence)
    r = interp.run(bad, block=96, args=[out], check=False)
    races = r.by_kind("race")
    assert len(races) == 1 and races[0].message.startswith("write-after-read" if war else "read-after-write")
    assert "an arrival orders only the accesses made before it" in races[0].message
    assert races[0].instruction.opcode == "st" if war else races[0].other.opcode == "st"
    for m in (early, bad):
        pf.assemble(m)


@pytest.mark.parametrize("war", [False, True], ids=["read-after-write", "write-after-read"])
def test_the_early_arrival_mutant_is_a_race(war):
    """testing.mutants.early_mbarrier_arrive moves warp 1's arrival above its access (warp 2's arrival has no
    shared access before it in its straight-line code, so it is no site): the clean kernel becomes the racy one."""
    from ptxforge.testing.mutants import mutants_of
    k = _access_around_arrival("before", war).kernel("around")
    sites = mutants_of(k, ["early_mbarrier_arrive"])
    assert len(sites) == 1 and "mbarrier.arrive" in sites[0].instruction, [str(m) for m in sites]
    bad = sites[0].apply(k)
    body = bad.instructions
    moved = [i.opcode for i in body].index("mbarrier.arrive")  # (warp 1's block comes first)
    after = body[moved + 1]
    assert after.opcode == ("ld" if war else "st") and after.info.space == "shared", after.render()
    r = interp.run(pf.Module([bad]), block=96, args=[np.zeros(32, np.uint32)], check=False)
    races = r.by_kind("race")
    assert len(races) == 1 and "an arrival orders only the accesses made before it" in races[0].message
    pf.assemble(pf.Module([bad]))


def test_an_arrival_alone_acquires_nothing():
    """A thread that arrives on an mbarrier, even with the arrival that completes the phase, and reads without
    waiting for the phase is not ordered after the other arrivals: a race, whose finding says so."""
    r = interp.run(_access_around_arrival("before", False, waits=False), block=96, args=[np.zeros(32, np.uint32)],
                   check=False)
    races = r.by_kind("race")
    assert len(races) == 1 and races[0].message.startswith("read-after-write"), [str(f) for f in r.findings]
    assert "did not wait for the phase to complete: an arrival alone acquires nothing" in races[0].message


def _named_barrier_handoff(producer_writes: bool, late: bool):
    """Warp 0 arrives on named barrier 1 with bar.arrive, warp 1 waits there with bar.sync (64 threads).
    `producer_writes`: warp 0 writes the buffer and warp 1 reads it after the barrier; else warp 0 reads it
    (frees it by arriving) and warp 1 overwrites it after the barrier.  Warp 0's access comes before its
    bar.arrive, or after it when `late`."""
    k = pf.KernelBuilder("named", target="sm_80", reqntid=64)
    out = k.param_ptr("out", u32)
    base = k.shared_base(k.shared("buf", 128, align=16))
    t = k.tid()
    lane = k.and_(t, 31, type=b32)
    slot = k.add(base, k.shl(lane, 2))
    dst = k.add(out, k.mul(lane, 4, mode="wide"))

    def producer_access():
        if producer_writes:
            k.st(slot, k.add(lane, 100), type=u32, space="shared")
        else:
            k.st(dst, k.ld(slot, type=u32, space="shared"), type=u32)

    with k.if_(k.setp("lt", t, 32)):
        if not late:
            producer_access()
        k.bar_arrive(1, 64)
        if late:
            producer_access()
    with k.if_(k.setp("ge", t, 32)):
        k.bar_sync(1, 64)
        if producer_writes:
            k.st(dst, k.ld(slot, type=u32, space="shared"), type=u32)
        else:
            k.st(slot, k.add(lane, 200), type=u32, space="shared")
    return k.module()


@pytest.mark.parametrize("producer_writes", [True, False], ids=["bar.arrive side writes", "bar.arrive side reads"])
def test_bar_arrive_releases_what_came_before_it_and_acquires_nothing(producer_writes):
    """bar.arrive orders the accesses before it before the bar.sync side's accesses after the barrier; an access
    after bar.arrive, while the barrier still waits for the bar.sync side, is ordered by nothing: written there
    it races with the bar.sync side's read, read there with its write."""
    out = np.zeros(32, np.uint32)
    r = interp.run(_named_barrier_handoff(producer_writes, False), block=64, args=[out], check=False)
    assert r.ok, [str(f) for f in r.findings]
    if producer_writes:
        np.testing.assert_array_equal(out, np.arange(32) + 100)
    r = interp.run(_named_barrier_handoff(producer_writes, True), block=64, args=[out], check=False)
    races = r.by_kind("race")
    assert len(races) == 1, [str(f) for f in r.findings]
    assert races[0].message.startswith("read-after-write" if producer_writes else "write-after-read")
    assert "an arrival orders only the accesses made before it" in races[0].message


def test_mbarrier_used_without_init_barrier_is_a_race():
    k = pf.KernelBuilder("init_race", target="sm_90", reqntid=64)
    bar = k.shared("bar", 8, align=8)
    t = k.tid()
    rb = k.shared_base(bar)
    k.mbarrier_init(rb, 64, pred=k.setp("eq", t, 0))
    k.mbarrier_arrive(rb)  # no bar.sync after the init: other threads may see it uninitialized
    r = interp.run(k.module(), block=64, args=[], check=False)
    assert "race" in [f.kind for f in r.findings]


def test_races_can_be_turned_off():
    r, _ = run(exchange(None))
    assert r.findings
    out = np.zeros(64, np.uint32)
    r = interp.run(exchange(None), block=64, args=[out], races=False)
    assert r.ok


def test_uninitialized_shared_reads_on_request():
    k = pf.KernelBuilder("uninit", target="sm_80", reqntid=32)
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 256, align=16)
    t = k.tid()
    v = k.ld(k.add(k.shared_base(buf), k.shl(t, 2)), type=u32, space="shared")
    k.st(k.add(out, k.mul(t, 4, mode="wide")), v, type=u32)
    out = np.zeros(32, np.uint32)
    assert interp.run(k.module(), block=32, args=[out]).ok  # off by default
    assert (out == 0xA5A5A5A5).all()  # shared memory starts poisoned, as garbage would on a GPU
    with pytest.raises(interp.InterpError, match="nothing has written"):
        interp.run(k.module(), block=32, args=[out], checks=interp.DEFAULT_CHECKS | {"uninit"})


def two_readers_then_a_write(writer: int, sync: bool = False):
    """Thread 1 reads a shared word, then thread 0 reads it, then thread `writer` overwrites it."""
    k = pf.KernelBuilder("two_readers", target="sm_80", reqntid=32)
    k.param_ptr("out", u32)
    base = k.shared_base(k.shared("x", 16))
    t = k.tid()
    for reader in (1, 0):
        with k.if_(k.setp("eq", t, reader)):
            k.ld(base, type=u32, space="shared")
    if sync:
        k.bar_sync(0)
    with k.if_(k.setp("eq", t, writer)):
        k.st(base, 7, type=u32, space="shared")
    return k.module()


@pytest.mark.parametrize("writer", [1, 0, 2], ids=["the first reader", "the second reader", "a third thread"])
def test_a_write_after_two_reads_races_with_the_reader_it_is_not(writer):
    report = interp.run(two_readers_then_a_write(writer), block=32, args=[np.zeros(4, np.uint32)], check=False)
    races = report.by_kind("race")
    assert len(races) == 1 and "write-after-read" in races[0].message
    others = {t.tid[0] for t in races[0].other_threads}
    assert others == {0, 1} - {writer}
    clean = interp.run(two_readers_then_a_write(writer, sync=True), block=32, args=[np.zeros(4, np.uint32)],
                       check=False)
    assert clean.ok, str(clean)
