"""Global memory between the CTAs of one launch (`interp.global_order`): a read of another CTA's writes needs a
release/acquire chain, and the interpreter reports the read that has none ("order" findings)."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T
from ptxforge.isa.operands import Addr

THREADS = 32


def last_arriver(*, first_barrier=True, sem="acq_rel", scope="gpu", fences=False, strong_data=False, sc=None,
                 cluster=False):
    """Two CTAs: every thread writes its value to data[cta][i]; a barrier; thread 0 counts the CTA in at a counter
    (atom.add with `sem`/`scope`, or relaxed between fence.acq_rel.gpu pairs with `fences`) and hands the verdict
    to its CTA through shared memory; the CTA that counted second copies the other CTA's values into out.
    sc: the SC-fence pattern instead (a relaxed count): "both" - every thread membar.gl after its write and
    before its read; "writers" - after the write only.  cluster: the two CTAs form one cluster."""
    extra = dict(reqnctapercluster=(2, 1, 1)) if cluster else {}
    k = pf.KernelBuilder("last_arriver", target="sm_90", maxntid=THREADS, **extra)
    data, counter, out = k.param_ptr("data", T.u32), k.param_ptr("counter", T.u32), k.param_ptr("out", T.u32)
    flag = k.shared("flag", 4, align=4)
    tid, cta = k.tid(), k.ctaid()
    mine = k.mad(k.mad(cta, THREADS, tid, type=T.u32), 4, data, type=T.u32, mode="wide")
    value = k.add(k.mul(cta, 1000, type=T.u32), tid, type=T.u32)
    if strong_data:
        k.st(mine, value, type=T.u32, sem="relaxed", scope="gpu")
    else:
        k.st(mine, value, type=T.u32)
    if sc:
        k.membar("gl")
        sem = scope = None
    if first_barrier:
        k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 0, type=T.u32)):
        if fences:
            kind = fences if isinstance(fences, str) else "fence.acq_rel.gpu"
            k.fence(kind)
            old = k.atom("add", counter, 1, type=T.u32)
            k.fence(kind)
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
    assert run(last_arriver(sem="acq_rel", scope="sys")).ok
    assert run(last_arriver(sc="both")).ok  # membar.gl by every writer and every reader, a relaxed count
    assert run(last_arriver(sem="acq_rel", scope="cluster", cluster=True)).ok  # cluster scope inside a cluster


@pytest.mark.parametrize("kw, why", [
    (dict(first_barrier=False), "the writers do not reach the releasing thread through a barrier"),
    (dict(sem=None, scope=None), "a relaxed atomic neither releases nor acquires"),
    (dict(sem="release"), "released but not acquired"),
    (dict(sem="acquire"), "acquired but not released"),
    (dict(sem="acq_rel", scope="cta"), "CTA scope does not reach the other CTA"),
    (dict(sem="acq_rel", scope="cta", cluster=True), "CTA scope does not reach the other CTA of its cluster"),
    (dict(sc="writers"), "the readers' side has no SC fence before the read"),
    (dict(fences="fence.cta"), "CTA-scoped fences around a relaxed count order nothing for the other CTA"),
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


def tma_last_arriver(first_barrier):
    """As `last_arriver`, but the CTA that counts second loads the other CTA's row with a TMA tile load (through
    a tensor map over the same array the threads wrote with st.global) and copies it out."""
    k = pf.KernelBuilder("tma_last_arriver", target="sm_90a", reqntid=128)
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
    if first_barrier:
        k.bar_sync(0)
    with k.if_(lead):
        old = k.atom("add", counter, 1, type=T.u32, sem="acq_rel", scope="gpu")
        k.st(k.shared_base(flag), old, type=T.u32, space="shared")
    k.bar_sync(0)
    second = k.setp("eq", k.ld(k.shared_base(flag), type=T.u32, space="shared"), 1, type=T.u32)
    with k.if_(second):
        with k.if_(lead):
            k.mbarrier_arrive(bar, expect_tx=128)
            k.tensor_load(tile, tm, [0, k.sub(1, cta, type=T.u32)], bar)
        k.mbarrier_wait(bar, 0)
        with k.if_(k.setp("lt", tid, THREADS, type=T.u32)):
            v = k.ld(k.add(k.shared_base(tile), k.shl(tid, 2, type=T.b32), type=T.u32), type=T.u32, space="shared")
            k.st(k.mad(tid, 4, out, type=T.u32, mode="wide"), v, type=T.u32)
    return k.module()


@pytest.mark.parametrize("first_barrier", [True, False])
def test_a_tma_load_of_another_ctas_writes_needs_the_chain_too(first_barrier):
    data = np.zeros((2, THREADS), np.uint32)
    out = np.full(THREADS, 7, np.uint32)
    r = interp.run(tma_last_arriver(first_barrier), grid=2, block=128, check=False,
                   args=[interp.host_tensor_map(data, (THREADS, 1)), data, np.zeros(1, np.uint32), out])
    assert np.array_equal(out, np.arange(THREADS)), out
    found = r.by_kind("order")
    assert bool(found) != first_barrier, str(r)
    if found:
        assert found[0].instruction.opcode.startswith("cp.async.bulk.tensor"), str(found[0])


def test_the_ordering_fences_are_fences_the_isa_knows():
    from ptxforge.isa.sync import FENCES, ORDERING_FENCES
    assert set(ORDERING_FENCES) <= set(FENCES)
    assert ORDERING_FENCES["fence.gpu"] == ("acq_rel", "gpu") and ORDERING_FENCES["membar.gl"] == ("sc", "gpu")
