"""Global memory between the CTAs of one launch (`interp.global_order`): a read of another CTA's writes needs a
release/acquire chain, and the interpreter reports the read that has none ("order" findings)."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T

THREADS = 32


def last_arriver(*, first_barrier=True, sem="acq_rel", scope="gpu", fences=False, strong_data=False, sc=None,
                 cluster=False, arrival=None):
    """Two CTAs: every thread writes its value to data[cta][i]; a barrier; thread 0 counts the CTA in at a counter
    (atom.add with `sem`/`scope`, or relaxed between fence.acq_rel.gpu pairs with `fences`, or between the two
    fences fences=(before, after) names) and hands the verdict to its CTA through shared memory; the CTA that
    counted second copies the other CTA's values into out.
    arrival: an mbarrier instead of the first barrier, on which every thread arrives "after" its write (or
    "before" it), and thread 0 once more after the writes, then waits for the phase before counting.
    sc: the SC-fence pattern instead (a relaxed count): "both" - every thread membar.gl after its write and
    before its read; "writers" - after the write only.  cluster: the two CTAs form one cluster."""
    extra = dict(reqnctapercluster=(2, 1, 1)) if cluster else {}
    k = pf.KernelBuilder("last_arriver", target="sm_90", maxntid=THREADS, **extra)
    data, counter, out = k.param_ptr("data", T.u32), k.param_ptr("counter", T.u32), k.param_ptr("out", T.u32)
    flag = k.shared("flag", 4, align=4)
    tid, cta = k.tid(), k.ctaid()
    mine = k.mad(k.mad(cta, THREADS, tid, type=T.u32), 4, data, type=T.u32, mode="wide")
    value = k.add(k.mul(cta, 1000, type=T.u32), tid, type=T.u32)
    if arrival:
        first_barrier = False
        bar = k.shared_base(k.shared("bar", 8, align=8))
        k.mbarrier_init(bar, THREADS + 1, pred=k.setp("eq", tid, 0, type=T.u32))
        k.bar_sync(0)
        if arrival == "before":
            k.mbarrier_arrive(bar)
    if strong_data:
        k.st(mine, value, type=T.u32, sem="relaxed", scope="gpu")
    else:
        k.st(mine, value, type=T.u32)
    if sc:
        k.membar("gl")
        sem = scope = None
    if first_barrier:
        k.bar_sync(0)
    if arrival == "after":
        k.mbarrier_arrive(bar)
    with k.if_(k.setp("eq", tid, 0, type=T.u32)):
        if arrival:  # the phase completes here, after every thread's write
            k.mbarrier_arrive(bar)
            k.mbarrier_wait(bar, 0)
        if fences:
            kind = fences if isinstance(fences, (str, tuple)) else "fence.acq_rel.gpu"
            before, after = kind if isinstance(kind, tuple) else (kind, kind)
            k.fence(before)
            old = k.atom("add", counter, 1, type=T.u32)
            k.fence(after)
        else:
            old = k.atom("add", counter, 1, type=T.u32, sem=sem, scope=scope)
        k.st(k.shared_base(flag), old, type=T.u32, space="shared")
    k.bar_sync(0)
    second = k.setp("eq", k.ld(k.shared_base(flag), type=T.u32, space="shared"), 1, type=T.u32)
    with k.if_(second):
        if sc == "both":
            k.membar("gl")
        other = k.mad(k.mad(k.sub(1, cta, type=T.u32), THREADS, tid, type=T.u32), 4, data, type=T.u32, mode="wide")
        got = (k.ld(other, type=T.u32, sem="relaxed", scope="gpu") if strong_data else k.ld(other, type=T.u32))
        k.st(k.mad(tid, 4, out, type=T.u32, mode="wide"), got, type=T.u32)
    return k.module()


def run(module):
    data = np.zeros(2 * THREADS, np.uint32)
    out = np.full(THREADS, 7, np.uint32)
    r = interp.run(module, grid=2, block=THREADS, args=[data, np.zeros(1, np.uint32), out], check=False)
    assert np.array_equal(out, np.arange(THREADS)), out  # CTA 1 counts second in the interpreter's order
    return r


def test_a_release_acquire_chain_orders_the_other_ctas_writes():
    assert run(last_arriver()).ok
    assert run(last_arriver(fences=True)).ok  # relaxed atomics between fences: the fence pattern
    assert run(last_arriver(fences="fence.gpu")).ok  # fence.gpu is fence.acq_rel.gpu
    assert run(last_arriver(fences="membar.gl")).ok
    assert run(last_arriver(fences=("fence.release.gpu", "fence.acquire.gpu"))).ok  # the one-sided halves
    for fences in (("fence.release.cluster", "fence.acquire.cluster"), ("fence.release.cluster", "fence.acquire.gpu")):
        assert run(last_arriver(fences=fences, cluster=True)).ok  # cluster-scoped releases inside a cluster
    assert run(last_arriver(sem="acq_rel", scope="sys")).ok
    assert run(last_arriver(sc="both")).ok  # membar.gl by every writer and every reader, a relaxed count
    assert run(last_arriver(sem="acq_rel", scope="cluster", cluster=True)).ok  # cluster scope inside a cluster
    assert run(last_arriver(arrival="after")).ok  # an mbarrier phase carries the writes to the counting thread


@pytest.mark.parametrize("kw, why", [
    (dict(first_barrier=False), "the writers do not reach the releasing thread through a barrier"),
    (dict(sem=None, scope=None), "a relaxed atomic neither releases nor acquires"),
    (dict(sem="release"), "released but not acquired"),
    (dict(sem="acquire"), "acquired but not released"),
    (dict(sem="acq_rel", scope="cta"), "CTA scope does not reach the other CTA"),
    (dict(sem="acq_rel", scope="cta", cluster=True), "CTA scope does not reach the other CTA of its cluster"),
    (dict(sc="writers"), "the readers' side has no SC fence before the read"),
    (dict(fences="fence.cta"), "CTA-scoped fences around a relaxed count order nothing for the other CTA"),
    (dict(fences=("fence.acquire.gpu", "fence.release.gpu")), "an acquire fence releases nothing, and a release "
                                                              "fence acquires nothing"),
    (dict(fences="fence.release.gpu"), "release fences on both sides: the count is never acquired"),
    (dict(fences=("fence.release.cluster", "fence.acquire.gpu")), "a release at cluster scope does not reach a CTA "
                                                                  "of another cluster, however far the acquire reaches"),
    (dict(fences=("fence.release.gpu", "fence.acquire.cluster")), "nor does an acquire at cluster scope"),
    (dict(fences="fence.acquire.gpu"), "acquire fences on both sides: the writes are never released"),
    (dict(arrival="before"), "an mbarrier arrival carries only the writes made before it, though the phase "
                             "completes after them"),
])
def test_a_missing_link_is_reported_at_the_read_with_the_write(kw, why):
    r = run(last_arriver(**kw))
    found = r.by_kind("order")
    assert found, why
    f = found[0]
    assert f.instruction.opcode == "ld" and f.other.opcode == "st", str(f)
    assert "bytes" in f.message and "'data'" in f.message and "release" in f.message


def test_strong_accesses_on_both_sides_do_not_race():
    """ld.relaxed.gpu of a word written with st.relaxed.gpu: morally strong, so no data race to report."""
    assert run(last_arriver(first_barrier=False, sem=None, scope=None, strong_data=True)).ok


def test_the_check_is_a_finding_kind_that_can_be_left_out():
    assert "order" in interp.KINDS and "order" in interp.DEFAULT_CHECKS
    module = last_arriver(first_barrier=False)
    data, out = np.zeros(2 * THREADS, np.uint32), np.zeros(THREADS, np.uint32)
    r = interp.run(module, grid=2, block=THREADS, args=[data, np.zeros(1, np.uint32), out], check=False,
                   checks=interp.DEFAULT_CHECKS - {"order"})
    assert r.ok


def copy_last_arriver(read="tma", first_barrier=True, proxy_fence=None):
    """As `last_arriver`, but the CTA that counts second copies the other CTA's row into shared memory before
    copying it out: with a TMA tile load (read="tma", through a tensor map over the array the threads wrote
    with st.global), a bulk copy ("bulk") or cp.async ("cp.async", 4 bytes a thread).  proxy_fence: where a
    proxy fence stands between the generic writes and an async-proxy read: "writer" (every writing thread,
    fence.proxy.async.global after its store), "writer_any" (the same with fence.proxy.async), "reader" (the
    copying thread after its count acquired the other CTA's writes), "reader_early" (the copying thread
    before its count), "writer_shared" (fence.proxy.async.shared::cta, which does not cover global memory)."""
    k = pf.KernelBuilder(f"{read.replace('.', '_')}_last_arriver", target="sm_90a", reqntid=128)
    tm = k.param_tensormap("tm")
    data, counter, out = k.param_ptr("data", T.u32), k.param_ptr("counter", T.u32), k.param_ptr("out", T.u32)
    tile = k.shared("tile", 128, align=1024)
    bar = k.shared("bar", 8, align=8)
    flag = k.shared("flag", 4, align=4)
    tid, cta = k.tid(), k.ctaid()
    lead = k.setp("eq", tid, 0, type=T.u32)
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    mine = k.mad(k.mad(cta, THREADS, tid, type=T.u32), 4, data, type=T.u32, mode="wide")
    with k.if_(k.setp("lt", tid, THREADS, type=T.u32)):
        k.st(mine, k.add(k.mul(cta, 1000, type=T.u32), tid, type=T.u32), type=T.u32)
        kind = {"writer": "fence.proxy.async.global", "writer_any": "fence.proxy.async",
                "writer_shared": "fence.proxy.async.shared::cta"}.get(proxy_fence)
        if kind:
            k.fence(kind)
    if first_barrier:
        k.bar_sync(0)
    with k.if_(lead):
        if proxy_fence == "reader_early":
            k.fence("fence.proxy.async.global")
        old = k.atom("add", counter, 1, type=T.u32, sem="acq_rel", scope="gpu")
        k.st(k.shared_base(flag), old, type=T.u32, space="shared")
    k.bar_sync(0)
    second = k.setp("eq", k.ld(k.shared_base(flag), type=T.u32, space="shared"), 1, type=T.u32)
    other = k.mad(k.sub(1, cta, type=T.u32), THREADS * 4, data, type=T.u32, mode="wide")
    with k.if_(second):
        if read == "cp.async":
            with k.if_(k.setp("lt", tid, THREADS, type=T.u32)):
                k.cp_async(k.add(k.shared_base(tile), k.shl(tid, 2, type=T.b32), type=T.u32),
                           k.mad(tid, 4, other, type=T.u32, mode="wide"), 4)
                k.cp_async_wait_all()
            k.bar_sync(0)
        else:
            with k.if_(lead):
                if proxy_fence == "reader":
                    k.fence("fence.proxy.async.global")
                k.mbarrier_arrive(bar, expect_tx=128)
                if read == "tma":
                    k.tensor_load(tile, tm, [0, k.sub(1, cta, type=T.u32)], bar)
                else:
                    k.bulk_copy(tile, other, 128, bar)
            k.mbarrier_wait(bar, 0)
        with k.if_(k.setp("lt", tid, THREADS, type=T.u32)):
            v = k.ld(k.add(k.shared_base(tile), k.shl(tid, 2, type=T.b32), type=T.u32), type=T.u32, space="shared")
            k.st(k.mad(tid, 4, out, type=T.u32, mode="wide"), v, type=T.u32)
    return k.module()


def run_copy(module):
    data = np.zeros((2, THREADS), np.uint32)
    out = np.full(THREADS, 7, np.uint32)
    r = interp.run(module, grid=2, block=128, check=False,
                   args=[interp.host_tensor_map(data, (THREADS, 1)), data, np.zeros(1, np.uint32), out])
    assert np.array_equal(out, np.arange(THREADS)), out
    return r


@pytest.mark.parametrize("read", ["tma", "bulk", "cp.async"])
@pytest.mark.parametrize("first_barrier", [True, False])
def test_a_copy_of_another_ctas_writes_needs_the_chain_too(read, first_barrier):
    """TMA, bulk and cp.async reads are checked like loads: by the issuing thread when it issues them."""
    r = run_copy(copy_last_arriver(read, first_barrier, proxy_fence="writer" if read != "cp.async" else None))
    found = r.by_kind("order")
    assert bool(found) != first_barrier, str(r)
    if found:
        assert found[0].instruction.opcode.startswith("cp.async"), str(found[0])
        assert found[0].other.opcode == "st" and "uint32[2, 32]" in found[0].message
    assert not r.by_kind("proxy"), str(r)


@pytest.mark.parametrize("read", ["tma", "bulk"])
@pytest.mark.parametrize("proxy_fence", ["writer", "writer_any", "reader"])
def test_an_async_proxy_read_of_generic_writes_passes_with_a_proxy_fence_on_either_side(read, proxy_fence):
    assert run_copy(copy_last_arriver(read, proxy_fence=proxy_fence)).ok


@pytest.mark.parametrize("read", ["tma", "bulk"])
@pytest.mark.parametrize("proxy_fence, why", [
    (None, "no proxy fence at all"),
    ("writer_shared", "fence.proxy.async.shared::cta does not cover global memory"),
    ("reader_early", "the reader's fence comes before its count acquired the writes"),
])
def test_an_async_proxy_read_of_generic_writes_without_a_proxy_fence_is_reported(read, proxy_fence, why):
    r = run_copy(copy_last_arriver(read, proxy_fence=proxy_fence))
    found = r.by_kind("proxy")
    assert found and not r.by_kind("order"), why
    f = found[0]
    assert f.instruction.opcode.startswith("cp.async.bulk") and f.other.opcode == "st", str(f)
    assert "global memory" in f.message and "uint32[2, 32]" in f.message and "fence.proxy.async.global" in f.message


def test_cp_async_reads_through_the_generic_proxy():
    """cp.async is not an async-proxy copy: no proxy fence is asked of it."""
    assert run_copy(copy_last_arriver("cp.async")).ok


def test_a_copy_of_the_threads_own_generic_writes_needs_a_proxy_fence_too():
    """One CTA: a thread stores a row with st.global and reads it back with a bulk copy; fence.proxy.async.global
    between them makes it visible to the async proxy, fence.proxy.async.shared::cta does not."""
    def kernel(fence):
        k = pf.KernelBuilder("own_row", target="sm_90a", reqntid=32)
        data, out = k.param_ptr("data", T.u32), k.param_ptr("out", T.u32)
        tile, bar = k.shared("tile", 128, align=128), k.shared("bar", 8, align=8)
        tid = k.tid()
        lead = k.setp("eq", tid, 0, type=T.u32)
        k.mbarrier_init(bar, 1, pred=lead)
        k.fence("fence.mbarrier_init.release.cluster", pred=lead)
        k.st(k.mad(tid, 4, data, type=T.u32, mode="wide"), k.add(tid, 5, type=T.u32), type=T.u32)
        if fence:
            k.fence(fence)
        k.bar_sync(0)
        with k.if_(lead):
            k.mbarrier_arrive(bar, expect_tx=128)
            k.bulk_copy(tile, data, 128, bar)
        k.mbarrier_wait(bar, 0)
        v = k.ld(k.add(k.shared_base(tile), k.shl(tid, 2, type=T.b32), type=T.u32), type=T.u32, space="shared")
        k.st(k.mad(tid, 4, out, type=T.u32, mode="wide"), v, type=T.u32)
        return k.module()

    for fence, ok in ((None, False), ("fence.proxy.async.shared::cta", False), ("fence.proxy.async.global", True)):
        out = np.zeros(THREADS, np.uint32)
        r = interp.run(kernel(fence), block=THREADS, args=[np.zeros(THREADS, np.uint32), out], check=False)
        assert np.array_equal(out, np.arange(THREADS) + 5)
        assert r.ok == ok and bool(r.by_kind("proxy")) != ok, (fence, str(r))


def test_the_proxy_fences_are_fences_the_isa_knows():
    from ptxforge.isa.sync import FENCES, PROXY_FENCES
    assert set(PROXY_FENCES) <= set(FENCES)
    assert PROXY_FENCES["fence.proxy.async"] == {"shared", "global"}
    assert "global" not in PROXY_FENCES["fence.proxy.async.shared::cta"]
    assert not any(name.startswith("fence.proxy.async::generic.acquire") for name in PROXY_FENCES)


def test_the_ordering_fences_are_fences_the_isa_knows():
    from ptxforge.isa.sync import FENCES, ORDERING_FENCES
    assert set(ORDERING_FENCES) <= set(FENCES)
    assert ORDERING_FENCES["fence.gpu"] == ("acq_rel", "gpu") and ORDERING_FENCES["membar.gl"] == ("sc", "gpu")
