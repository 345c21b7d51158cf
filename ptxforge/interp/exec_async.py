"""Asynchronous copies: cp.async (with src-size zero-fill and ignore-src), commit/wait groups,
cp.async.mbarrier.arrive, and the sm_90 1-D bulk copy that completes on an mbarrier.

A copy reads its source when it is issued but lands in shared memory as late as the PTX memory
model allows: when its thread waits for its group (wait_group / wait_all), or when an mbarrier
it is tracked by is polled.  Until then its destination bytes are marked in flight, so a read
that a missing wait leaves unordered is reported instead of silently seeing the new data.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.operands import Reg
from ..isa.sync import FENCES_WITH_ADDRESS, ORDERING_FENCES, PROXY_FENCES
from . import global_order
from .access import Part, cluster_address, mark_pending, map_access, shadow_write
from .exec_memory import address_reader
from .findings import InterpUnsupported
from .mbarriers import mbar_lookup, on_fence as mbarrier_fence, on_init_fence
from .memory import SHARED_WINDOW, in_window
from .tensormap_order import make_tensormap_acquire

_PTXFORGE_INTERNAL = True


class CopyRecord:
    """In-flight copies issued by one instruction: one row per issuing thread."""

    __slots__ = ("pc", "thr", "dst", "data", "group", "time", "mbar", "combine")

    def __init__(self, pc, thr, dst, data, group, time, mbar=None, combine=None):
        self.pc = pc
        self.thr = thr  # issuing threads
        self.dst = dst  # flat shared offsets of each row's first byte
        self.data = data  # (rows, nbytes) uint8
        self.group = group  # commit-group number each row belongs to (cp.async)
        self.time = time  # issue step
        self.mbar = mbar  # bulk copies: the mbarrier key they complete on
        self.combine = combine  # bulk reductions: (old bytes, data) -> the bytes that land


def land_rows(S, rec, rows):
    """Write rows of a record into shared memory now and forget them."""
    if not rows.any():
        return
    sel = np.flatnonzero(rows)
    n = rec.data.shape[1]
    at = rec.dst[sel][:, None] + np.arange(n)
    S.smem[at] = rec.data[sel] if rec.combine is None else rec.combine(S.smem[at], rec.data[sel]).reshape(-1, n)
    if S.track:
        from .access import Part
        shadow_write(S, None, Part("shared", sel, rec.dst[sel], rec.thr[sel]), n, pc=rec.pc, landing=True)
    keep = ~rows
    rec.thr, rec.dst, rec.data, rec.group = rec.thr[keep], rec.dst[keep], rec.data[keep], rec.group[keep]


def _prune(S):
    S.cp_records = [r for r in S.cp_records if len(r.thr)]


def land_waited(S, m, keep_newest: int):
    """cp.async.wait_group: land every copy of the threads in `m` except their newest groups."""
    limit = S.cp_committed - keep_newest  # groups numbered below this are complete
    for rec in S.cp_records:
        rows = m[rec.thr] & (rec.group < limit[rec.thr])
        land_rows(S, rec, rows)
    _prune(S)


def land_before(S, thr_mask, time):
    """Land every cp.async issued by the threads in `thr_mask` before step `time`."""
    for rec in S.cp_records:
        if rec.time < time:
            land_rows(S, rec, thr_mask[rec.thr])
    _prune(S)


def _read_source(S, op, src, thr, nsrc, size, align=None, proxy="generic"):
    """Bytes of the source (nsrc per thread, rest zero); reports misaligned / out-of-bounds reads, and
    reads that no chain orders after another CTA's writes or (proxy="async": a bulk copy) after generic
    writes without a proxy fence (`global_order.on_load`)."""
    align = size if align is None else align
    data = np.zeros((len(thr), size), dtype=np.uint8)
    ok = np.ones(len(thr), dtype=bool)
    reading = np.flatnonzero(nsrc > 0)
    if len(reading) == 0:
        return data, ok
    heap = S.launch.heap
    s = src[reading]
    mis = (s % np.uint64(align)) != 0
    if mis.any():
        S.report("misaligned", f"{op.ins.opcode} source address is not {align}-byte aligned (both addresses "
                 f"must be aligned to {align} bytes)", op, thr[reading[mis]])
    k0, off = heap.locate(s, 1)
    k1, _ = heap.locate(s + (nsrc[reading] - 1).astype(np.uint64), 1)
    inb = (k0 >= 0) & (k0 == k1)
    if not inb.all():
        bad = np.flatnonzero(~inb)
        a0 = int(s[bad[0]])
        S.report("oob", f"out-of-bounds cp.async source read of {int(nsrc[reading[bad[0]]])} bytes at {a0:#x}: "
                 f"{heap.describe(a0, int(nsrc[reading[bad[0]]]))}", op, thr[reading[bad]],
                 details={"address": a0, "space": "global"})
    good = inb & ~mis
    ok[reading[~good]] = False
    rows = reading[good]
    if len(rows):
        j = np.arange(size)
        valid = j[None, :] < nsrc[rows][:, None]
        idx = np.where(valid, off[good][:, None] + j, 0)
        data[rows] = np.where(valid, heap.heap[idx], 0)
        global_order.on_load(S, op, Part("global", None, off[good], thr[rows]), nsrc[rows], None, None, proxy)
        if heap.counter is not None:
            heap.counter.add("reads", off[good], nsrc[rows])
    return data, ok


def make_cp_async(P, op):
    """The executor of `cp.async`: reads the global source (zero-filling past `src_size`, or all of it under
    `ignore_src`) and records the copy as in flight; it lands in shared memory when a wait or mbarrier
    completes it, and touching its destination earlier is an "async" finding. Returns ``fn(S, m)``, which
    executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    info = ins.info
    size = info.cp_size
    get_dst = address_reader(P, ins.operands[0], ins, "shared")
    get_src = address_reader(P, ins.operands[1], ins, "global")
    if info.src_size is not None:
        get_n = P.reader(info.src_size, T.u32, ins)
    else:
        get_n = None
    if info.ignore_src is not None:
        get_ignore = P.pred_reader(info.ignore_src, ins)
    else:
        get_ignore = None

    def cp_async(S, m):
        thr = np.flatnonzero(m)
        if get_n is not None:
            nsrc = np.broadcast_to(np.asarray(get_n(S)).astype(np.int64), (S.N,))[thr]
            over = nsrc > size
            if over.any():
                S.report("async", f"cp.async src-size {int(nsrc[over][0])} exceeds cp-size {size} (undefined "
                         "behaviour)", op, thr[over])
                nsrc = np.minimum(nsrc, size)
        else:
            nsrc = np.full(len(thr), size, dtype=np.int64)
        if get_ignore is not None:
            ig = np.broadcast_to(get_ignore(S), (S.N,))[thr]
            nsrc = np.where(ig, 0, nsrc)
        data, _ = _read_source(S, op, get_src(S)[thr], thr, nsrc, size)
        parts = map_access(S, op, "shared", get_dst(S)[thr], thr, size, write=True, what="cp.async destination write")
        for part in parts:
            shadow_write(S, op, part, size, pc=op.pc)
            mark_pending(S, part, size, op.pc)
            S.cp_records.append(CopyRecord(op.pc, part.thr, part.off, data[part.sel],
                                           S.cp_committed[part.thr].copy(), S.step))
    return cp_async


def make_commit(P, op):
    """The executor of `cp.async.commit_group`: closes each thread's pending copies into a group. Returns ``fn(S,
    m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being
    built.
    """
    def commit(S, m):
        S.cp_committed[m] += 1
    return commit


def make_wait_group(P, op):
    """The executor of `cp.async.wait_group n`: lands every group of each thread but the newest `n`. Returns
    ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the
    Op being built.
    """
    n = int(op.ins.info)

    def wait_group(S, m):
        land_waited(S, m, n)
    return wait_group


def make_wait_all(P, op):
    """The executor of `cp.async.wait_all`: lands every copy of each thread. Returns ``fn(S, m)``, which executes
    it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    def wait_all(S, m):
        S.cp_committed[m] += 1
        land_waited(S, m, 0)
    return wait_all


def make_cp_mbarrier_arrive(P, op):
    """The executor of `cp.async.mbarrier.arrive{.noinc}`: queues an arrival on the mbarrier that takes effect
    when the thread's earlier copies land. Returns ``fn(S, m)``, which executes it on Machine `S` for the
    threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    noinc = bool(ins.info)
    base = ins.operands[0].base if hasattr(ins.operands[0], "base") else None
    # no space written: a 64-bit generic address; a 32-bit register is the shared offset, as ptxas takes it
    generic = ".shared" not in ins.mnemonic and not (isinstance(base, Reg) and base.type.bits == 32)
    get_addr = address_reader(P, ins.operands[0], ins, "generic" if generic else "shared")

    def cp_arrive(S, m):
        thr = np.flatnonzero(m)
        addr = get_addr(S)[thr]
        if generic:  # a generic address: the shared window's offset (one outside it names no mbarrier)
            outside = ~in_window(addr, SHARED_WINDOW)
            if outside.any():
                S.report("oob", f"cp.async.mbarrier.arrive on generic address {int(addr[outside][0]):#x}, which is "
                         "not in the shared window: no mbarrier lives there", op, thr[outside])
                thr, addr = thr[~outside], addr[~outside]
            addr = addr - np.uint64(SHARED_WINDOW)
        for key, kthr, state in mbar_lookup(S, op, addr, thr):
            if not noinc:
                state.pending += len(kthr)  # the async arrival is an extra one; the thread still arrives
            mask = np.zeros(S.N, dtype=bool)
            mask[kthr] = True
            state.queue.append(("arrive", S.step, mask))
    return cp_arrive


def make_bulk(P, op):
    """The executor of `cp.async.bulk` global -> shared: checks size and alignment (multiples of 16 bytes) and
    queues the copy on the mbarrier's transaction count; TMA tensor copies are refused. Returns ``fn(S, m)``,
    which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    kind = ins.info.kind
    if kind != "g2s":
        raise InterpUnsupported(f"cp.async.bulk {kind} is not modelled", ins)
    get_dst = address_reader(P, ins.operands[0], ins, "shared")
    get_src = address_reader(P, ins.operands[1], ins, "global")
    get_size = P.reader(ins.operands[2], T.u32, ins)
    get_mbar = address_reader(P, ins.operands[3], ins, "shared")
    get_mask = P.reader(ins.operands[4], T.u16, ins) if ins.info.multicast else None

    def bulk(S, m):
        thr = np.flatnonzero(m)
        sizes = np.broadcast_to(np.asarray(get_size(S)).astype(np.int64), (S.N,))[thr]
        src, dst, mbars = get_src(S)[thr], get_dst(S)[thr], get_mbar(S)[thr]
        masks = None if get_mask is None else np.broadcast_to(np.asarray(get_mask(S)), (S.N,))[thr]
        for i, t in enumerate(thr):
            n = int(sizes[i])
            one = np.array([t])
            if n <= 0 or n % 16:
                S.report("async", f"cp.async.bulk size {n} is not a positive multiple of 16", op, one)
                continue
            data, ok = _read_source(S, op, src[i:i + 1], one, np.array([n]), n, align=16, proxy="async")
            if int(src[i]) % 16 or int(dst[i]) % 16:
                S.report("misaligned", "cp.async.bulk addresses must be 16-byte aligned", op, one)
                continue
            if masks is None:
                queue_landing(S, op, dst[i:i + 1], one, data, mbars[i:i + 1], "cp.async.bulk destination write")
                continue
            ranks = multicast_ranks(S, op, t, int(masks[i]), "cp.async.bulk")
            if ranks is None:
                continue
            for r in ranks:  # each named CTA: the same offsets, as .shared::cluster addresses
                queue_landing(S, op, np.array([cluster_address(int(dst[i]), r)]), one, data,
                              np.array([cluster_address(int(mbars[i]), r)]), "cp.async.bulk multicast write")
    return bulk


def multicast_ranks(S, op, t, mask: int, what: str):
    """The cluster ranks a multicast's 16-bit ctaMask names for thread t, or None, reported, when it names none
    or one beyond the cluster (whose bits name no CTA: what the hardware does with them is undefined)."""
    ranks = [r for r in range(16) if (mask >> r) & 1]
    if not ranks or ranks[-1] >= S.cluster_size:
        S.report("oob", f"{what} multicast mask {mask:#x} names no CTA or one beyond the cluster of "
                 f"{S.cluster_size}", op, np.array([t]))
        return None
    return ranks


def queue_landing(S, op, dst, one, data, mbar, what, combine=None, align=16, atomic=False):
    """Thread one[0]'s bulk transfer of `data` (1 x n bytes) to the shared(::cluster) address dst[0], issued now:
    the destination marked in flight, the bytes queued on the mbarrier at `mbar` (n transaction bytes) to land
    when it is polled, combined into what is there by `combine(old, new)` when given (a bulk reduction).
    align: what the destination address must be a multiple of (16 for bulk copies, the size for st.async);
    atomic: the transfer is an atomic reduction (red.async), which others may make into the same bytes."""
    n = data.shape[1]
    parts = map_access(S, op, "shared", dst, one, n, align=align, write=True, what=what)
    targets = list(mbar_lookup(S, op, mbar, one))
    for part in parts:
        shadow_write(S, op, part, n, pc=op.pc, atomic=atomic)
        mark_pending(S, part, n, op.pc)
        rec = CopyRecord(op.pc, part.thr, part.off, data[part.sel], np.zeros(1, dtype=np.int64), S.step,
                         combine=combine)
        for _, _, state in targets:
            state.queue.append(("bulk", S.step, rec, n))


def make_createpolicy(P, op):
    """The executor of `createpolicy`: writes an opaque .b64 policy value (only cp.async cache hints consume it).
    Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program,
    `op` the Op being built.
    """
    put = P.writer(op.ins.operands[0], T.b64, op.ins)
    policy = np.uint64(0x10E0_0000_0000_0000)  # an opaque value; only cp.async hints consume it
    return lambda S, m: put(S, policy, m)


def make_noop(P, op):
    """The executor of the instructions with no effect the interpreter models (membar, fence, nanosleep,
    prefetch): does nothing. Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask
    `m`; `P` is the Program, `op` the Op being built.
    """
    return lambda S, m: None


def make_fence(P, op):
    """fence.* / membar.*: a no-op for values (the interpreter is sequentially consistent), except that
    the proxy fences (`isa.sync.PROXY_FENCES`) record when each thread made its generic writes visible to
    the async proxy (shared memory: wgmma and TMA / bulk reads of it check it; global memory: TMA and bulk
    loads check it in `global_order`), the tensormap acquire records which maps each thread acquired
    (`tensormap_order`), the ordering fences lend the thread's .relaxed mbarrier arrivals and waits and
    .relaxed barrier.cluster arrivals their release and acquire (`mbarriers.on_fence`), and
    fence.mbarrier_init.release.cluster theirs of the thread's mbarrier.init operations before it and nothing
    else (`mbarriers.on_init_fence`), and those at gpu, sys or cluster scope take part in the release/acquire
    chains that order global memory between CTAs (`global_order`)."""
    kind = str(op.ins.info)
    if kind in FENCES_WITH_ADDRESS:  # fence.proxy.tensormap::generic.acquire.<scope> [map], 128
        return make_tensormap_acquire(P, op)
    if kind == "fence.mbarrier_init.release.cluster":  # releases the thread's inits for a relaxed arrive
        return on_init_fence
    if kind in ORDERING_FENCES:
        order, scope = ORDERING_FENCES[kind]
        gpu = kind in global_order.GPU_FENCES

        def ordering_fence(S, m):
            mbarrier_fence(S, m, order, scope)
            if gpu:
                global_order.on_fence(S, m, kind)
        return ordering_fence
    spaces = PROXY_FENCES.get(kind)
    if spaces is None:
        return make_noop(P, op)
    shared, glob = "shared" in spaces, "global" in spaces

    def proxy_fence(S, m):
        if shared:
            f = getattr(S, "proxy_fence", None)
            if f is None:
                f = S.proxy_fence = np.full(S.N, -1, dtype=np.int64)
            f[m] = S.step
        if glob:
            global_order.on_proxy_fence(S, m)
    return proxy_fence
