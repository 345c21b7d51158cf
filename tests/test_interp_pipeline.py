"""A warp-specialized mbarrier ring (ptxforge.hopper) on the interpreter: a producer warpgroup feeds
TMA boxes through a 3-stage ring to two consumer warpgroups (setmaxnreg dec/inc, expect_tx,
try_wait with a suspend hint, releases); results against numpy, and a consumer that forgets to
release deadlocks with the barrier named.

Every consumer thread reads its own word and arrives on the empty barrier itself: the race check
orders a read before the producer's refill only through a synchronization both took part in (it
does not chain a warp barrier and one lane's arrival)."""

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.builder import KernelBuilder
from ptxforge.hopper import MbarrierRing, WarpSpecialized
from ptxforge.isa import types as T

BOXES, STAGES = 8, 3


def ring_kernel(release=True):
    k = KernelBuilder("ring", target="sm_90a", maxntid=384, minnctapersm=1)
    tmap = k.param_tensormap("tmap")
    out = k.param_ptr("out", T.u32)
    smem = k.dynamic_shared("smem", align=1024)
    base = k.shared_base(smem)
    bars = k.add(base, STAGES * 4096, type=T.u32)
    ws = WarpSpecialized(k, consumer_groups=2)
    ring = MbarrierRing(k, STAGES, bars, consumer_arrivals=256, suspend_ns=1000)
    ring.init(pred=k.setp("eq", ws.tid, 0, type=T.u32))
    k.bar_sync(0)
    with ws.producer():
        st = ring.producer_state()
        lead = k.setp("eq", ws.tid, 0, type=T.u32)
        with k.for_range(0, BOXES) as i:
            ring.acquire(st)
            ring.expect_tx(st, 4096, pred=lead)
            dst = k.mad(st.stage, 4096, base, mode="lo", type=T.u32)
            k.tensor_load(dst, tmap, (k.mul(i, 64, type=T.u32, mode="lo"), 0), ring.full(st), pred=lead)
            st.advance()
    with ws.consumer():
        st = ring.consumer_state()
        acc = k.mov(0, type=T.u32)
        word = k.shl(k.sub(ws.tid, 128), 2)
        with k.for_range(0, BOXES):
            ring.wait_full(st)
            v = k.ld(k.add(k.mad(st.stage, 4096, base, mode="lo", type=T.u32), word), type=T.u32, space="shared")
            k.add(acc, v, dst=acc)
            if release:
                ring.release(st)
            st.advance()
        k.st(k.mad(k.tid(), 4, out, mode="wide", type=T.u32), acc, type=T.u32)
    return k


def _args(rng):
    a = rng.integers(0, 1000, (16, 64 * BOXES)).astype(np.uint32)  # box (64, 16) of u32 = 4096 bytes
    return a, interp.host_tensor_map(a, (64, 16))


def test_ring_feeds_the_consumers():
    a, tm = _args(np.random.default_rng(0))
    out = np.zeros(384, np.uint32)
    interp.run(ring_kernel(), block=384, args=[tm, out], shared=STAGES * 4096 + MbarrierRing.nbytes(STAGES))
    boxes = a.reshape(16, BOXES, 64).transpose(1, 0, 2).reshape(BOXES, -1)  # box i, dense row-major
    want = boxes[:, :256].sum(axis=0).astype(np.uint32)
    np.testing.assert_array_equal(out[128:], want)


def test_a_consumer_that_never_releases_deadlocks_the_producer():
    a, tm = _args(np.random.default_rng(1))
    with pytest.raises(interp.InterpError, match=r"deadlock.*nothing has arrived in its current one"):
        interp.run(ring_kernel(release=False), block=384, args=[tm, np.zeros(384, np.uint32)],
                   shared=STAGES * 4096 + MbarrierRing.nbytes(STAGES))
