"""The entry of a `pdl` GEMM kernel (GemmSchedule.pdl): B asked of L2, then the wait on the kernel ahead.

Launched as a programmatic dependent launch (``ptxforge.runtime.dependent``), the kernel's CTAs
may start while the kernel ahead of it in the stream is still finishing.  Until its
`griddepcontrol.wait` returns, a CTA touches no memory that kernel may write: it only computes
its addresses and, with `pdl_prefetch`, asks L2 for the first bytes of each of its B rows (a
hint: L2 is where every write lands, so a prefetch never returns stale data, and the loads that
use the bytes come after the wait).  In a loop of launches over weights that change from call to
call (B), the next call's weights start to stream while the current call's last CTAs finish.
"""

from __future__ import annotations

from ...isa import types as T

_PTXFORGE_INTERNAL = True


def prefetch_b_rows(k, s, b, n, tile_n0, row_bytes, tid, window=None) -> None:
    """Thread t asks L2 for `s.pdl_prefetch` bytes of B row tile_n0 + t (rows past N skipped), from the
    CTA's first byte of K (`window` = (first byte, bytes) with split-K), 16-byte aligned, within the row."""
    want = s.pdl_prefetch
    if not want:
        return
    byte0, span = window if window is not None else (0, row_bytes)
    last = k.min(n, k.add(tile_n0, s.block_n, type=T.u32), type=T.u32)  # one past the CTA's last B row
    for r0 in range(0, s.block_n, s.threads):
        row = k.add(tile_n0, tid if r0 == 0 else k.add(tid, r0, type=T.u32), type=T.u32)
        with k.if_(k.setp("lt", row, last, type=T.u32)):
            start = k.add(b, k.mul(row, row_bytes, mode="wide"))
            if window is not None:
                start = k.add(start, k.cvt(byte0, T.u64, frm=T.u32))
            # up to the next 16-byte boundary: the bulk prefetch takes aligned addresses and sizes
            skip = k.and_(k.sub(0, k.cvt(start, T.u32, frm=T.u64), type=T.u32), 15, type=T.b32)
            first = k.add(start, k.cvt(skip, T.u64, frm=T.u32))
            avail = k.sub(span, skip, type=T.s32)
            size = k.and_(k.min(avail, want, type=T.s32), 0xFFFFFFF0, type=T.b32)
            with k.if_(k.setp("gt", size, 0, type=T.s32)):
                k.bulk_prefetch(first, k.mov(size, type=T.u32))


def wait_for_previous_kernel(k) -> None:
    """`griddepcontrol.wait` (the kernel ahead has completed and its writes are visible), then
    `griddepcontrol.launch_dependents` (the next kernel's CTAs may be scheduled).  Signalling only after
    the wait keeps a chain of such launches ordered: a kernel that starts early is only ever ahead of
    one that has already waited for everything before it."""
    k.griddepcontrol("wait")
    k.griddepcontrol("launch_dependents")
