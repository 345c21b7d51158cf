"""Cluster probe kernels shared by the CPU and GPU cluster tests."""

from __future__ import annotations

import numpy as np

import ptxforge as pf
from ptxforge import b16, u32

SREGS = ("cluster_ctarank", "cluster_nctarank", "cluster_ctaid.x", "cluster_ctaid.y", "cluster_nctaid.x",
         "cluster_nctaid.y", "clusterid.x", "clusterid.y", "nclusterid.x", "nclusterid.y")


def sreg_probe(cluster):
    """Thread 0 of every CTA writes the cluster special registers to out[cta, :]."""
    k = pf.KernelBuilder("cluster_sregs", target="sm_90", reqntid=32, reqnctapercluster=cluster)
    out = k.param_ptr("out", u32)
    cta = k.mad(k.ctaid("y"), k.nctaid("x"), k.ctaid("x"), mode="lo")
    row = k.add(out, k.mul(cta, 4 * len(SREGS), mode="wide"))
    lead = k.setp("eq", k.tid(), 0)
    for i, name in enumerate(SREGS):
        k.st(row, k.sreg(name), type=u32, offset=4 * i, pred=lead)
    return k


def expected_sregs(grid, cluster):
    gx, gy = grid
    cx, cy = cluster
    rows = []
    for y in range(gy):
        for x in range(gx):
            rx, ry = x % cx, y % cy
            rows.append([rx + cx * ry, cx * cy, rx, ry, cx, cy, x // cx, y // cy, gx // cx, gy // cy])
    return np.array(rows, dtype=np.uint32)


def ring_probe(size, *, sync=True, started=True):
    """Each CTA writes 64 words into the next CTA's `inbox` (mapa + st.shared::cluster), then after a
    cluster barrier copies its own inbox to out[ctaid]: word i = 1000 * sender rank + i.  A cluster barrier
    comes first (`started`): a CTA may write into another's shared memory only once that one is running.
    `sync=False` leaves out the barriers after the stores (a race); `started=False` the first one."""
    k = pf.KernelBuilder("cluster_ring", target="sm_90", reqntid=64, reqnctapercluster=(size, 1, 1))
    out = k.param_ptr("out", u32)
    inbox = k.shared("inbox", 256, align=16)
    tid = k.tid()
    rank = k.cluster_ctarank()
    nxt = k.rem(k.add(rank, 1), size)
    slot = k.add(k.shared_base(inbox), k.shl(tid, 2))
    if started:
        k.cluster_sync()  # every CTA of the cluster running before any writes into another's shared memory
    k.st(k.mapa(slot, nxt), k.mad(rank, 1000, tid, mode="lo"), type=u32, space="shared::cluster")
    if sync:
        k.cluster_sync()
    v = k.ld(slot, type=u32, space="shared")
    k.st(k.add(out, k.mul(k.mad(k.ctaid(), 64, tid, mode="lo"), 4, mode="wide")), v, type=u32)
    if sync:
        k.cluster_sync()  # nobody exits while a partner may still write into it
    return k


def expected_ring(grid, size):
    out = np.zeros((grid, 64), np.uint32)
    for c in range(grid):
        sender = (c % size - 1) % size
        out[c] = 1000 * sender + np.arange(64)
    return out


def ctarank_probe(size):
    """Thread t of every CTA asks getctarank of shared addresses and writes out[cta, t, :]: the rank of the
    mapa address of rank t % size (shared::cluster, then generic), and of its own CTA-local address (as a
    shared::cluster address, then generic)."""
    k = pf.KernelBuilder("cluster_ctarank_probe", target="sm_90", reqntid=32, reqnctapercluster=(size, 1, 1))
    out = k.param_ptr("out", u32)
    box = k.shared("box", 16, align=16)
    tid = k.tid()
    r = k.rem(tid, size)
    local = k.shared_base(box)
    generic = k.cvta(k.cvt(local, pf.u64), frm="shared")
    row = k.add(out, k.mul(k.mad(k.ctaid(), 32, tid, mode="lo"), 16, mode="wide"))
    k.st(row, k.getctarank(k.mapa(local, r)), type=u32)
    k.st(row, k.getctarank(k.mapa(generic, r, space="generic"), space="generic"), type=u32, offset=4)
    k.st(row, k.getctarank(local), type=u32, offset=8)
    k.st(row, k.getctarank(generic, space="generic"), type=u32, offset=12)
    k.cluster_sync()  # no CTA exits while a partner could still name its shared memory
    return k


def expected_ctarank(grid, size):
    """What ctarank_probe writes: out[cta, t] = (t % size, t % size, rank, rank), rank = cta % size."""
    out = np.zeros((grid, 32, 4), np.uint32)
    for c in range(grid):
        for t in range(32):
            out[c, t] = (t % size, t % size, c % size, c % size)
    return out


def multicast_probe(started=True, bulk=False, mask=0b11, mask_in_register=False):
    """CTA 0 of a 2-CTA cluster loads an 8 x 16 byte box by TMA into both CTAs' `tile` (multicast), each CTA's own
    mbarrier expecting the bytes; every CTA then copies its tile to out[rank].  A cluster barrier after the
    mbarriers' init shows both CTAs running before the multicast (`started`).  `bulk`: the same 128 bytes by
    a 1-D bulk copy from a global pointer, multicast.  `mask`: the ctaMask the copy names, an immediate (which
    the builder checks against the declared cluster) or, with `mask_in_register`, moved into a .b16 register."""
    k = pf.KernelBuilder("multicast_probe", target="sm_90a", reqntid=32, reqnctapercluster=(2, 1, 1))
    tmap = k.param_ptr("src", u32) if bulk else k.param_tensormap("src")
    out = k.param_ptr("out", u32)
    tile = k.shared("tile", 128, align=128)
    bar = k.shared("bar", 8, align=8)
    rank = k.cluster_ctarank()
    lead = k.setp("eq", k.tid(), 0)
    with k.if_(lead):
        k.mbarrier_init(bar, 1)
        k.fence("fence.mbarrier_init.release.cluster")
        k.mbarrier_arrive(bar, expect_tx=128)
    if started:
        k.cluster_sync()
    else:
        k.bar_sync()  # (the CTA's own threads see its mbarrier initialized: only the cluster is left unsynchronized)
    if mask_in_register:
        mask = k.mov(mask, type=b16)
    with k.if_(k.setp("eq", k.add(rank, k.tid()), 0)):  # thread 0 of rank 0
        if bulk:
            k.bulk_copy(k.shared_base(tile), tmap, 128, k.shared_base(bar), multicast=mask)
        else:
            k.tensor_load(k.shared_base(tile), tmap, (0, 0), k.shared_base(bar), multicast=mask)
    k.mbarrier_wait(bar, 0)
    word = k.ld(k.add(k.shared_base(tile), k.shl(k.tid(), 2)), type=u32, space="shared")
    k.st(k.add(out, k.mul(k.mad(rank, 32, k.tid(), mode="lo"), 4, mode="wide")), word, type=u32)
    k.cluster_sync()
    return k


def exchange_probe():
    """Each CTA of a pair copies 128 bytes of its shared memory (word i = 1000 * rank + i) into the other's
    `inbox` by cp.async.bulk.shared::cluster.shared::cta, completing on the other's mbarrier (armed for 128
    bytes before a cluster barrier); each then writes its inbox to out[rank]."""
    k = pf.KernelBuilder("s2s", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", u32)
    mine = k.shared_base(k.shared("mine", 128, align=128))
    inbox = k.shared_base(k.shared("inbox", 128, align=128))
    bar = k.shared_base(k.shared("bar", 8, align=8))
    rank, tid = k.cluster_ctarank(), k.tid()
    k.st(k.add(mine, k.shl(tid, 2)), k.mad(rank, 1000, tid, mode="lo"), type=u32, space="shared")
    lead = k.setp("eq", tid, 0)
    with k.if_(lead):
        k.mbarrier_init(bar, 1)
        k.fence("fence.mbarrier_init.release.cluster")
        k.mbarrier_arrive(bar, expect_tx=128)
    k.fence("fence.proxy.async.shared::cta")  # (the words written above, read by the async proxy)
    k.cluster_sync()
    peer = k.xor(rank, 1)
    with k.if_(lead):
        k.bulk_copy_to_cluster(k.mapa(inbox, peer), mine, 128, k.mapa(bar, peer))
    k.mbarrier_wait(bar, 0)
    word = k.ld(k.add(inbox, k.shl(tid, 2)), type=u32, space="shared")
    k.st(k.add(out, k.mul(k.mad(rank, 32, tid, mode="lo"), 4, mode="wide")), word, type=u32)
    k.cluster_sync()
    return k


def expected_exchange():
    """out of `exchange_probe`: each CTA holds its partner's words."""
    return np.stack([1000 * 1 + np.arange(32), 1000 * 0 + np.arange(32)]).astype(np.uint32)
