"""Cluster probe kernels shared by the CPU and GPU cluster tests."""

from __future__ import annotations

import numpy as np

import ptxforge as pf
from ptxforge import u32

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
