"""Memory accesses of one instruction by many threads: address mapping with bounds and alignment
checks, typed gathers and scatters, and the shared-memory shadow that catches races and reads of
in-flight asynchronous copies.

Shadow state per shared byte (per CTA): the last writer thread, the step it wrote at and the
instruction; the last reader (or -2 for "several threads") and its step; and, while a cp.async
or bulk copy targeting the byte is in flight, that copy's instruction.  Two accesses by different
threads are ordered when a synchronization event (bar.sync, bar.warp.sync, an mbarrier phase)
that both took part in happened between them; CTA-wide barriers are kept as one timestamp per
CTA so the common check costs one comparison.
"""

from __future__ import annotations

import numpy as np

from .machine import event_orders, released_before
from .memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, in_window

_PTXFORGE_INTERNAL = True

GLOBAL, SHARED, PARAM, LOCAL = "global", "shared", "param", "local"
#: A .shared::cluster address names CTA r of the cluster with (r + 1) in the bits from here up.
CLUSTER_RANK_SHIFT = 24


def cluster_address(addr, rank):
    """The .shared::cluster address of shared offset `addr` (its rank field, if any, dropped) in the shared memory
    of cluster CTA `rank` (ints or arrays, as `mapa` makes it)."""
    return (addr & ((1 << CLUSTER_RANK_SHIFT) - 1)) + ((rank + 1) << CLUSTER_RANK_SHIFT)


class Part:
    """The threads of one access that fall in one space, with their offsets in that space's array."""

    __slots__ = ("space", "sel", "off", "thr")

    def __init__(self, space, sel, off, thr):
        self.space = space
        self.sel = sel  # positions into the instruction's active-thread arrays
        self.off = off  # heap offset (global), flat CTA-shared offset (shared), param offset
        self.thr = thr  # global thread indices


def _space_of(space: str) -> str:
    if space in ("shared", "shared::cta", "shared::cluster"):
        return SHARED
    if space in ("global", "param", "local"):
        return space
    if space == "const":  # module .const variables live in the global heap (memory.py)
        return GLOBAL
    if space in ("generic", "", None):
        return "generic"
    return space


def map_access(S, op, space, addr, thr, nbytes, *, align=None, write=False, what=None):
    """Map per-thread addresses to Parts; report and drop misaligned and out-of-bounds accesses.

    `addr`: uint64 addresses (window offsets for .shared/.param), `thr`: thread indices.
    """
    space = _space_of(space)
    align = nbytes if align is None else align
    what = what or ("write" if write else "read")
    n = len(thr)
    if n == 0:
        return []
    addr = np.asarray(addr, dtype=np.uint64)
    pos = np.arange(n)
    if align > 1:
        mis = (addr % np.uint64(align)) != 0
        if mis.any():
            bad = np.flatnonzero(mis)
            S.report("misaligned", f"{what} of {nbytes} bytes at {_fmt_space(space, int(addr[bad[0]]))} is not "
                     f"{align}-byte aligned", op, thr[bad], details={"address": int(addr[bad[0]])})
            keep = ~mis
            addr, thr, pos = addr[keep], thr[keep], pos[keep]
            if len(thr) == 0:
                return []
    if space == "generic":
        parts = []
        in_sh, in_pa, in_lo = (in_window(addr, w) for w in (SHARED_WINDOW, PARAM_WINDOW, LOCAL_WINDOW))
        in_gl = ~(in_sh | in_pa | in_lo)
        for sp, sel, base in ((GLOBAL, in_gl, 0), (SHARED, in_sh, SHARED_WINDOW), (PARAM, in_pa, PARAM_WINDOW),
                              (LOCAL, in_lo, LOCAL_WINDOW)):
            if sel.all():
                parts += _map_space(S, op, sp, addr - np.uint64(base), thr, pos, nbytes, write, what, generic=True)
                break
            if sel.any():
                parts += _map_space(S, op, sp, addr[sel] - np.uint64(base), thr[sel], pos[sel], nbytes, write, what,
                                    generic=True)
        return parts
    return _map_space(S, op, space, addr, thr, pos, nbytes, write, what)


def _fmt_space(space, a):
    return f"{space} address {a:#x}" if space != "generic" else f"address {a:#x}"


def _map_space(S, op, space, addr, thr, pos, nbytes, write, what, generic=False):
    L = S.launch
    if space == GLOBAL:
        k, off = L.heap.locate(addr, nbytes)
        ok = k >= 0
        if write and L.heap.readonly is not None:
            _check_readonly(S, op, L.heap, k, ok, thr, what)
    elif space == SHARED:
        off = addr.astype(np.int64)
        rank = off >> CLUSTER_RANK_SHIFT  # 0: this CTA; r + 1: CTA r of the cluster (an address from mapa)
        off = off & ((1 << CLUSTER_RANK_SHIFT) - 1)
        big = (off >= L.smem.size) | (rank > S.cluster_size)
        off = np.where(big, -1, off)
        ok = L.smem.check(off, nbytes)
        own = S.cta_local[thr]
        cta = np.where(rank > 0, own - S.cluster_rank_of_cta[own] + rank - 1, own)
        if (rank > 0).any():
            check_peer_started(S, op, thr, cta != own, what)
        off = off + cta * L.smem.size
    elif space == PARAM:
        if write:
            S.report("oob", f"{what} into the .param space, which is read-only in a kernel", op, thr)
            return []
        off = np.where(addr >= np.uint64(L.params.size), -1, addr.astype(np.int64))
        ok = L.params.check(off, nbytes)
    elif space == LOCAL:  # per thread: thread n's local memory is its own slice
        off = np.where(addr >= np.uint64(max(L.local.size, 1)), -1, addr.astype(np.int64))
        ok = L.local.check(off, nbytes)
        if L.local.stack_bytes:  # stack bytes below the thread's stack pointer hold no allocation
            ok &= ~((off >= L.local.stack_base) & (off < S.sp[thr]))
        off = off + thr.astype(np.int64) * L.local.size
    else:
        raise AssertionError(space)
    if not ok.all():
        bad = np.flatnonzero(~ok)
        a0 = int(addr[bad[0]])
        if space == GLOBAL:
            where = L.heap.describe(a0, nbytes)
            msg = f"out-of-bounds global {what} of {nbytes} bytes at {a0:#x}: {where}"
        elif space == SHARED:
            msg = f"out-of-bounds shared {what} of {nbytes} bytes: {L.smem.describe(a0, nbytes)}"
        elif space == LOCAL:
            msg = f"out-of-bounds .local {what} of {nbytes} bytes: {L.local.describe(a0, nbytes)}"
        else:
            msg = f"out-of-bounds .param {what} of {nbytes} bytes at offset {a0}"
        if generic:
            msg += " (generic address)"
        S.report("oob", msg, op, thr[bad], details={"address": a0, "space": space})
        addr, thr, pos, off = addr[ok], thr[ok], pos[ok], off[ok]
        if len(thr) == 0:
            return []
    return [Part(space, pos, off, thr)]


def _check_readonly(S, op, heap, k, ok, thr, what):
    """Report the threads whose global `what` lands in a buffer of a read-only array passed as it is."""
    hit = ok & heap.readonly[np.where(ok, k, 0)]
    if hit.any():
        name = heap.bufs[int(k[hit][0])].name
        S.report("readonly", f"{what} into {name}, whose numpy array is read-only: the launch takes it as input "
                 f"only (as a GPU launch does), so this result never reaches it; pass a writeable array, or wrap "
                 "it in In(...) to say the kernel only uses it as scratch", op, thr[hit])


def check_peer_started(S, op, thr, peer, what):
    """Report the threads among `thr` whose access (`peer`: to another CTA's shared memory) comes before they came
    out of a barrier.cluster.wait: only a completed cluster barrier shows every CTA of the cluster running."""
    st = getattr(S, "cluster_bar", None)
    early = peer if st is None else peer & ~st.seen_all[thr]
    if early.any():
        S.report("barrier", f"{what} of another CTA's shared memory (distributed shared memory) before a "
                 "barrier.cluster.wait showed every CTA of the cluster running: that CTA may not have started "
                 "yet (barrier.cluster.arrive and wait first)", op, thr[early])


# ---------------------------------------------------------------- typed data movement

def _views(S, space):
    if space == GLOBAL:
        return S.launch.heap.views
    if space == SHARED:
        return S.smem_views
    if space == LOCAL:
        return S.local_views
    return S.launch.params.views


def _count(S, part, kind, nbytes):
    """Count a global access when the launch counts accesses (see traffic.py)."""
    counter = S.launch.heap.counter
    if counter is not None and part.space == GLOBAL:
        counter.add(kind, part.off, nbytes)


def gather(S, part, width, count):
    """(n, count) unsigned values of `width` bytes (1, 2, 4, 8 or 16 -> two uint64) at part.off."""
    if width == 16:
        width, count = 8, 2 * count
    _count(S, part, "reads", width * count)
    view = _views(S, part.space)[width]
    idx = part.off // width
    if count == 1:
        return view[idx][:, None]
    return view[idx[:, None] + np.arange(count)]


def scatter(S, part, width, values):
    """Store (n, count) unsigned values of `width` bytes at part.off (later threads win ties)."""
    if width == 16:
        width = 8
    count = values.shape[1]
    _count(S, part, "writes", width * count)
    view = _views(S, part.space)[width]
    idx = part.off // width
    if count == 1:
        view[idx] = values[:, 0]
    else:
        view[idx[:, None] + np.arange(count)] = values


# ---------------------------------------------------------------- the shared-memory shadow

def where_shared(S, flat: int) -> str:
    """'var'+offset of a flat shared byte index, for messages."""
    sm = S.launch.smem
    off = int(flat) % sm.size
    i = int(sm.owner[off])
    if i < 0:
        return f"shared {off:#x}"
    v = sm.vars[i]
    return f"'{v.name}'+{off - v.offset}"


def _bytes(part, nbytes):
    b = (part.off[:, None] + np.arange(nbytes)).ravel()
    t = np.repeat(part.thr, nbytes)
    return b, t


def ordered(S, first_tid, first_time, second_tid):
    """Mask: the earlier access (first_tid at first_time) happens before second_tid's access now."""
    cta = S.cta_local[second_tid]
    ok = (first_tid == second_tid) | (S.last_full[cta] > first_time)
    if ok.all() or not S.events:
        return ok
    rem = np.flatnonzero(~ok)
    t0 = first_time[rem].min()
    for event in reversed(S.events):
        time, groups, _ = event
        if time <= t0:
            break
        hit = event_orders(event, first_tid[rem], first_time[rem], second_tid[rem])
        if hit.any():
            ok[rem[hit]] = True
            rem = rem[~hit]
            if len(rem) == 0:
                break
    return ok


def _after_arrival(S, first_tid: int, first_time: int, second_tid: int) -> str:
    """For a race finding between two threads' accesses: a note when a barrier phase between them would have
    ordered them but for the sides its threads took: the first access came after its thread arrived (an
    arrival orders only what came before it), or the second thread arrived without waiting for the phase
    (an arrival alone acquires nothing), or the fence before a .relaxed arrival was fence.mbarrier_init, which
    releases mbarrier inits only."""
    if first_tid < 0:
        return ""
    init_fence = getattr(S, "mbar_init_fence_at", None)
    init_fence = -1 if init_fence is None else int(init_fence[first_tid])
    for event in reversed(S.events):
        time, groups, cut = event
        if time <= first_time:
            break
        if cut is None:
            continue
        first, second = released_before(cut, np.array([first_tid, second_tid]))
        if first <= first_time < init_fence < time and groups[second_tid] >= 0:
            return ("; the other thread made fence.mbarrier_init.release.cluster after its access and before a "
                    "barrier phase this thread then observed, but that fence lets a .relaxed arrival release only "
                    "the thread's mbarrier.init operations: a fence.release or fence.acq_rel of the arrival's "
                    "scope (or a .release arrival) orders the access")
        if first >= 0 and first <= first_time and groups[second_tid] >= 0:
            return ("; the other thread made its access after its arrival on a barrier whose phase this thread "
                    "then observed (or, for a .relaxed mbarrier arrival, after the fence that let it release), and "
                    "an arrival orders only the accesses made before it")
        if first > first_time and second >= 0 and groups[second_tid] < 0:
            return ("; this thread arrived on a barrier the other thread arrived on after its access, but did not "
                    "wait for the phase to complete: an arrival alone acquires nothing")
    return ""


def _offset(S, flat):
    return {"shared_offset": int(flat % S.launch.smem.size)}


def _check_in_flight(S, op, b, t, message):
    """Report bytes `b` (accessed now by threads `t`) that an issued async copy has not landed in yet."""
    pend = S.pend_pc[b]
    if (pend >= 0).any():
        i = np.flatnonzero(pend >= 0)
        other = S.prog.instructions[int(pend[i[0]])]
        S.report("async", message.format(where=where_shared(S, b[i[0]])), op, np.unique(t[i]), other=other,
                 other_threads=np.unique(S.pend_tid[b[i]]), details=_offset(S, b[i[0]]))


def _check_unordered_write(S, op, b, t, w, message):
    """Report bytes `b` (accessed now by threads `t`) whose last writer `w`, another thread, is not
    ordered before this access by any synchronization."""
    conflict = (w >= 0) & (w != t)
    if conflict.any():
        c = np.flatnonzero(conflict)
        ok = ordered(S, w[c], S.w_time[b[c]], t[c])
        if not ok.all():
            bad = c[~ok]
            other = S.prog.instructions[int(S.w_pc[b[bad[0]]])]
            i = bad[0]
            note = _after_arrival(S, int(w[i]), int(S.w_time[b[i]]), int(t[i]))
            S.report("race", message.format(where=where_shared(S, b[i])) + note, op, np.unique(t[bad]), other=other,
                     other_threads=np.unique(w[bad]), details=_offset(S, b[bad[0]]))


def shadow_read(S, op, part, nbytes, *, record=True):
    """Check a shared read against in-flight copies and unordered writes, then record the reader."""
    if not S.track:
        return
    b, t = _bytes(part, nbytes)
    _check_in_flight(S, op, b, t, "reads shared memory ({where}) that an asynchronous copy has not finished writing: "
                     "the copy's group (cp.async.wait_group / wait_all) or mbarrier was not waited for before this "
                     "read")
    w = S.w_tid[b]
    _check_unordered_write(S, op, b, t, w, "read-after-write race on shared memory ({where}): the bytes were written "
                           "by another thread with no barrier (bar.sync / bar.warp.sync / mbarrier wait) in between")
    if S.check_uninit and (w == -1).any():
        i = np.flatnonzero(w == -1)
        S.report("uninit", "reads shared memory that nothing has written", op, np.unique(t[i]),
                 details=_offset(S, b[i[0]]))
    if not record:
        return
    rt = S.r_tid[b]
    cta = S.cta_local[t]
    single = (rt == -1) | (rt == t) | (S.r_time[b] <= S.last_full[cta])
    # a second reader is kept by name too (r2): the two consumer warpgroups of a pipeline; a third is "several"
    r2 = S.r2_tid[b]
    r2_free = (r2 == -1) | (r2 == t) | (S.r2_time[b] <= S.last_full[cta])
    second = ~single & (rt != -2) & r2_free
    S.r2_tid[b] = np.where(single, -1, np.where(second, t, r2))
    S.r2_time[b] = np.where(second, S.step, S.r2_time[b])
    S.r_tid[b] = np.where(single, t, np.where(second, rt, -2))
    if len(part.thr) > 1:
        again = S.r_tid[b]
        dup = ((again != t) & (again != -2) & ~second) | (second & (S.r2_tid[b] != t))
        if dup.any():
            S.r_tid[b[dup]] = -2
    S.r_time[b] = np.where(second, S.r_time[b], S.step)


#: the asynchronous atomic reductions into shared memory: many of them may be in flight into the same bytes
ATOMIC_ASYNC = frozenset({"red.async"})


def _atomic_pcs(S) -> np.ndarray:
    """Per pc of the program: whether its instruction is an asynchronous atomic reduction (`ATOMIC_ASYNC`)."""
    flags = getattr(S.prog, "atomic_async_pcs", None)
    if flags is None:
        flags = S.prog.atomic_async_pcs = np.array([i.opcode in ATOMIC_ASYNC for i in S.prog.instructions] + [False])
    return flags


def shadow_write(S, op, part, nbytes, *, pc, landing=False, atomic=False):
    """Check a shared write (or the issue of an async copy) for WAR/WAW races, then record it.

    `landing`: an async copy arriving; it was checked when issued, so it is only recorded.  `atomic`: an
    asynchronous atomic reduction (red.async) issued: others in flight into the same bytes, or landed there
    before, are no conflict (each combines atomically); plain accesses still are.
    """
    if not S.track:
        return
    b, t = _bytes(part, nbytes)
    if landing:
        S.w_tid[b] = t
        S.w_time[b] = S.step
        S.w_pc[b] = pc
        S.r_tid[b] = -1
        S.r2_tid[b] = -1
        S.pend_pc[b] = -1
        return
    if atomic:
        flags = _atomic_pcs(S)
        plain = ~flags[S.pend_pc[b]] & ~flags[S.w_pc[b]]  # (pc -1 reads the trailing False)
        b, t = b[plain], t[plain]
    _check_in_flight(S, op, b, t, "writes shared memory ({where}) that an asynchronous copy in flight will also write")
    wg = getattr(S, "wg_src_pc", None)
    if wg is not None and (wg[b] >= 0).any():
        i = np.flatnonzero(wg[b] >= 0)
        S.report("async", f"writes shared memory ({where_shared(S, b[i[0]])}) that a wgmma.mma_async may still be "
                 "reading: wgmma.wait_group must retire its group before the operand is rewritten", op,
                 np.unique(t[i]), other=S.prog.instructions[int(wg[b[i[0]]])], details=_offset(S, b[i[0]]))
    held = getattr(S, "bulk_src_pc", None)
    if held is not None and (held[b] >= 0).any():
        i = np.flatnonzero(held[b] >= 0)
        S.report("async", f"writes shared memory ({where_shared(S, b[i[0]])}) that a TMA store is still reading: "
                 "cp.async.bulk.wait_group.read must retire the store's group before its source is rewritten", op,
                 np.unique(t[i]), other=S.prog.instructions[int(held[b[i[0]]])], details=_offset(S, b[i[0]]))
    r = S.r_tid[b]
    cta = S.cta_local[t]
    war = (r != -1) & (r != t) & (S.r_time[b] > S.last_full[cta])
    # the writer may be the first named reader while the second is another thread: that read needs ordering too
    r2w = S.r2_tid[b]
    war |= (r == t) & (r2w >= 0) & (r2w != t) & (S.r2_time[b] > S.last_full[cta])
    if war.any():
        c = np.flatnonzero(war)
        rc = r[c]
        several = rc == -2
        ok = np.zeros(len(c), dtype=bool)
        if (~several).any():
            k = np.flatnonzero(~several)
            ok[k] = ordered(S, rc[k], S.r_time[b[c[k]]], t[c[k]])
            r2 = S.r2_tid[b[c[k]]]
            two = (r2 >= 0) & (r2 != t[c[k]]) & (S.r2_time[b[c[k]]] > S.last_full[cta[c[k]]])
            if two.any():  # the second named reader must be ordered before the write too
                kk = k[two]
                ok[kk] &= ordered(S, S.r2_tid[b[c[kk]]], S.r2_time[b[c[kk]]], t[c[kk]])
        if not ok.all():
            bad = c[~ok]
            i = bad[0]
            note = _after_arrival(S, int(r[i]), int(S.r_time[b[i]]), int(t[i]))
            S.report("race", f"write-after-read race on shared memory ({where_shared(S, b[i])}): other threads "
                     "read these bytes and no barrier separates their reads from this write" + note, op,
                     np.unique(t[bad]),
                     other_threads=_other_readers(r[bad], r2w[bad], t[bad]), details=_offset(S, b[bad[0]]))
    _check_unordered_write(S, op, b, t, S.w_tid[b], "write-after-write race on shared memory ({where}): another "
                           "thread wrote these bytes with no barrier in between")
    S.w_tid[b] = t
    if len(part.thr) > 1:
        again = S.w_tid[b]
        dup = again != t
        if dup.any():
            S.report("race", f"several threads write the same shared bytes ({where_shared(S, b[dup][0])}) in one "
                     "instruction", op,
                     np.unique(np.concatenate([t[dup], again[dup]])))
    S.w_time[b] = S.step
    S.w_pc[b] = pc
    S.r_tid[b] = -1
    S.r2_tid[b] = -1


def _other_readers(first, second, writer):
    """The named readers (first and second) of the racing bytes other than their writers."""
    both = np.concatenate([first[first != writer], second[(second >= 0) & (second != writer)]])
    return np.unique(both[both >= 0])


def mark_pending(S, part, nbytes, pc):
    """An async copy was issued into these bytes: reads before it lands are errors."""
    if not S.track:
        return
    b, t = _bytes(part, nbytes)
    S.pend_pc[b] = pc
    S.pend_tid[b] = t
