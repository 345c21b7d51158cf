"""Tensor (TMA) copies: `cp.async.bulk.tensor` tile loads (with .multicast::cluster) and stores,
`cp.async.bulk.commit_group` / `wait_group{.read}`.

The tensor map is the `TensorMap` a launch bound to the parameter (see tensormaps.py); its
fields decide everything, as the encoded CUtensorMap does on a GPU:

* Load: the box at the coordinates (elements, innermost first, may be negative) is gathered
  from global memory; elements outside `global_dims` are filled with zeros (or NaN with
  oob_fill='nan').  With element strides e, dimension i moves ceil(box[i] / e[i]) elements,
  at coordinates c, c + e[i], ... (out of bounds judged per element).  An interleaved map
  (16/32 bytes) is a tensor whose dimension 0 is the channel slice: each box row is one slice
  and must fill the interleave width.  The box lands densely (innermost dimension fastest) at the destination,
  each 16-byte chunk moved by the swizzle (`isa.descriptors.apply_swizzle` of the absolute
  shared address, the layout wgmma descriptors name).  It completes `box_bytes` transaction
  bytes on the mbarrier (full boxes count whole, out-of-bounds parts included).  With
  .multicast::cluster it lands at the same offset in every CTA of the mask, completing on each
  CTA's mbarrier at the mbarrier's offset.  Data lands when a thread polls the mbarrier
  (as late as allowed); reading it before is reported.
* Store: the box is read from shared memory (through the swizzle) when issued and written to
  the in-bounds part of the global box; out-of-bounds elements are not written.  Until the
  issuing thread's `cp.async.bulk.wait_group.read` retires the group, the source bytes belong
  to the copy: a write to them is reported ("async").  Bytes the async proxy reads must not be
  last written by a generic store not followed by `fence.proxy.async` ("proxy").

* im2col load (`.im2col`, an `Im2colTensorMap`): pixels_per_column pixels x channels_per_pixel
  channels land pixel by pixel (`im2col_geometry`), swizzled as a tile; out-of-bounds pixels and
  channels are filled; a filter base that is not a bounding-box position is reported ("oob").

Refused (InterpUnsupported): an interleaved box reaching outside the tensor (the H200 does not
clip it like a tiled box: measured), 32-byte interleave and interleave with element strides
(probes of both faulted on the H200), an interleaved map whose box row (box[0] / element_strides[0]
elements) is not exactly the interleave width, a swizzled map whose inner box row is not
exactly the swizzle span, tensor maps in global memory (only `param_tensormap` parameters are
modelled), im2col maps with interleave.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.descriptors import apply_swizzle, swizzle_mode
from ..isa.operands import TensorAddr
from ..runtime.tensormap import IM2COL_OFFSET_RANGE, Im2colTensorMap
from . import global_order
from .access import Part, check_peer_started, mark_pending, shadow_read, shadow_write
from .exec_async import CopyRecord, make_bulk, multicast_ranks, queue_landing
from .exec_memory import address_reader
from .findings import InterpUnsupported
from .mbarriers import mbar_lookup
from .memory import PARAM_WINDOW, in_window
from .proxy import proxy_check
from .tensormaps import TENSORMAP_MAGIC
from .tensormap_order import check_acquired

_PTXFORGE_INTERNAL = True


def _tensormap(S, op, addr, thread=None):
    """The TensorMap a tensor-map operand (the generic address of a parameter, or of a map in global memory: one
    copied there and edited by tensormap.replace) names; a map this launch wrote into global memory must have
    been acquired by `thread` since (`exec_tensormap.check_acquired`)."""
    L = S.launch
    a = int(addr)
    if in_window(a, PARAM_WINDOW):
        off = a - PARAM_WINDOW
        word = int(L.params.data[off:off + 8].view(np.uint64)[0]) if off + 8 <= L.params.size else 0
    else:
        k, off = L.heap.locate(np.array([a], dtype=np.uint64), 128)
        word = int(L.heap.heap[int(off[0]):int(off[0]) + 8].view(np.uint64)[0]) if k[0] >= 0 else 0
        if k[0] >= 0 and thread is not None:
            check_acquired(S, op, int(off[0]), thread)
    idx = word >> 32
    if (word & 0xFFFFFFFF) != TENSORMAP_MAGIC or idx >= len(getattr(L, "tensormaps", ())):
        S.fail("oob", f"{op.ins.opcode}: the tensor-map operand does not point at a tensor map bound to this "
               "launch (pass interp.host_tensor_map(...) for a param_tensormap() parameter, or copy one to global "
               "memory)", op)
    tm = L.tensormaps[idx]
    row = box_extents(tm)[0] * tm.element_bytes
    if tm.interleave == 32:
        raise InterpUnsupported("32-byte interleaved tensor maps are not modelled (a probe of one faulted on the "
                                "H200)", op.ins)
    if tm.interleave and any(e != 1 for e in tm.element_strides):
        raise InterpUnsupported("an interleaved tensor map with element strides is not modelled (a probe of "
                                "one faulted on the H200)", op.ins)
    if tm.interleave and row != tm.interleave:
        raise InterpUnsupported(f"a {tm.interleave}-byte interleaved tensor map whose box row is {row} bytes (not "
                                f"{tm.interleave}: box[0] / element_strides[0] elements) is not modelled", op.ins)
    if tm.swizzle and row != tm.swizzle:
        raise InterpUnsupported(f"a {tm.swizzle}-byte swizzled tensor map whose inner box is "
                                f"{row} bytes (not {tm.swizzle}) is not modelled", op.ins)
    return tm


def _interleaved_in_bounds(tm, inb, op) -> None:
    """Refuse an interleaved box that reaches outside the tensor: the H200 does not clip such a box
    the way it clips tiled ones (a box past the second dimension read the next plane's rows), and
    that behaviour is not modelled."""
    if tm.interleave and not inb.all():
        raise InterpUnsupported(f"a {tm.interleave}-byte interleaved box reaching outside the tensor is not "
                                "modelled (the H200 does not clip it the way it clips tiled boxes)", op.ins)


def box_extents(tm) -> tuple:
    """Elements one copy moves along each dimension (innermost first): ceil(box / element stride)."""
    return tuple(-(-b // e) for b, e in zip(tm.box, tm.element_strides))


def box_geometry(tm, coords):
    """(global byte offsets from the base, in-bounds mask) of every element of the box at `coords`,
    in shared-memory order (innermost dimension fastest)."""
    r = tm.rank
    strides = (tm.element_bytes,) + tuple(tm.global_strides)
    ext = box_extents(tm)
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) * e + int(c)
                          for n, e, c in zip(ext[::-1], tm.element_strides[::-1], coords[::-1])],
                        indexing="ij")  # outermost first
    off = np.zeros(grids[0].shape, dtype=np.int64)
    inb = np.ones(grids[0].shape, dtype=bool)
    for i in range(r):
        g = grids[r - 1 - i]
        inb &= (g >= 0) & (g < tm.global_dims[i])
        off += g * strides[i]
    return off.ravel(), inb.ravel()


def im2col_geometry(tm, coords, offsets):
    """(global byte offsets, in-bounds mask) of every element an im2col load moves, in shared-memory
    order (pixel by pixel, channels fastest), or a string saying why the coordinates are illegal.

    coords (c, w, (h, (d,)) n): the channel start, the filter base and the image.  The base must be
    one of the bounding box's positions (`Im2colTensorMap.box_positions`); from it,
    pixels_per_column positions follow in the box's order (W fastest, then H, D, then the next
    image), each read at position + offsets; a pixel outside the image, an image past N and a
    channel past C are out of bounds (filled)."""
    sp = tm.rank - 2
    c0, base, n0 = int(coords[0]), [int(x) for x in coords[1:1 + sp]], int(coords[-1])
    limit = IM2COL_OFFSET_RANGE[tm.rank]
    if any(not 0 <= int(o) <= limit for o in offsets):
        return f"im2col offsets {list(offsets)} must each be in 0..{limit} for a rank-{tm.rank} map"
    positions = [tm.box_positions(j) for j in range(sp)]
    lin = n0
    for j in reversed(range(sp)):
        if base[j] not in positions[j]:
            return (f"the filter base {base[j]} in dimension {j + 1} is not a position of the im2col bounding box "
                    f"({positions[j].start}..{positions[j].stop - 1} step {positions[j].step})")
        lin = lin * len(positions[j]) + positions[j].index(base[j])
    L = lin + np.arange(tm.pixels_per_column, dtype=np.int64)
    strides = (tm.element_bytes,) + tuple(tm.global_strides)
    pix_off = np.zeros(len(L), dtype=np.int64)
    pix_in = np.ones(len(L), dtype=bool)
    for j in range(sp):
        k = L % len(positions[j])
        L = L // len(positions[j])
        pos = positions[j].start + k * positions[j].step + int(offsets[j])
        pix_in &= (pos >= 0) & (pos < tm.global_dims[j + 1])
        pix_off += pos * strides[j + 1]
    pix_in &= (L >= 0) & (L < tm.global_dims[-1])
    pix_off += L * strides[-1]
    ch = c0 + np.arange(tm.channels_per_pixel, dtype=np.int64)
    ch_in = (ch >= 0) & (ch < tm.global_dims[0])
    off = (pix_off[:, None] + ch[None, :] * tm.element_bytes).ravel()
    return off, (pix_in[:, None] & ch_in[None, :]).ravel()


#: the bytes of the out-of-bounds fill with oob_fill='nan': the H200 writes the 16-bit pattern 0x7FF7 over every two
#: bytes, a NaN at every float width (f16, bf16, f32 0x7FF77FF7, f64; tests/test_tensormap_edit.py on the GPU)
NAN_FILL = np.array([0xF7, 0x7F], dtype=np.uint8)


def _fill_bytes(tm) -> np.ndarray:
    eb = tm.element_bytes
    if tm.oob_fill == "nan":
        return np.tile(NAN_FILL, eb // 2)
    return np.zeros(eb, dtype=np.uint8)


def _global_check(S, op, tm, off, inb, thr0, what):
    """In-bounds elements must lie inside the buffer the map's base belongs to."""
    heap = S.launch.heap
    if not inb.any():
        return np.zeros(0, dtype=np.int64), True
    addr = np.uint64(tm.base) + off[inb].astype(np.uint64)
    k, hoff = heap.locate(addr, tm.element_bytes)
    if (k < 0).any():
        a0 = int(addr[np.flatnonzero(k < 0)[0]])
        S.report("oob", f"{what}: the tensor map's box reaches global memory outside its buffer: "
                 f"{heap.describe(a0, tm.element_bytes)} (global_dims/strides larger than the array?)", op,
                 np.array([thr0]), details={"address": a0, "space": "global"})
        return hoff, False
    return hoff, True


def _smem_targets(S, op, dst_local, nbytes, thr0, what, swizzle=0):
    """Shared flat offsets of each 16-byte chunk of a dense box at `dst_local` (swizzled), or None.

    A box's shared address must be 128-byte aligned, and a swizzled box's 1024-byte aligned: on
    the H200 swizzled boxes (32-, 64- and 128-byte swizzle) loaded 128, 384 and 768 bytes past a
    1024-byte boundary did not land at their address, so such a copy is reported, not modelled."""
    align = 1024 if swizzle_mode(swizzle).xor_bits else 128
    if dst_local % align:
        why = f" (a {swizzle}-byte swizzled box)" if align > 128 else ""
        S.report("misaligned", f"{what}: shared address {dst_local:#x} is not {align}-byte aligned{why}", op,
                 np.array([thr0]))
        return None
    return np.arange(0, nbytes, 16, dtype=np.int64) + dst_local


def _chunks_ok(S, op, local, thr0, what):
    L = S.launch
    ok = (local >= 0) & (local + 16 <= L.smem.size)
    ok &= L.smem.check(np.where(ok, local, 0), 16)
    if not ok.all():
        a0 = int(local[np.flatnonzero(~ok)[0]])
        S.report("oob", f"out-of-bounds shared {what} of a tensor box: {L.smem.describe(a0, 16)}", op,
                 np.array([thr0]), details={"address": a0, "space": "shared"})
        return False
    return True


def _cluster_targets(S, op, thr0, mask):
    """Batch-local CTA indices of the CTAs of thr0's cluster named by a multicast mask, or None, reported, when
    the mask names none or one beyond the cluster (`multicast_ranks`)."""
    ranks = multicast_ranks(S, op, thr0, mask, "TMA tensor load")
    if ranks is None:
        return None
    first = int(S.cta_local[thr0]) - int(S.cluster_rank_of_cta[S.cta_local[thr0]])
    return [first + r for r in ranks]


def make_tensor_load(P, op):
    """Executor of the TMA tile load (global -> shared, optionally multicast), completing on mbarriers."""
    ins = op.ins
    info = ins.info
    dst_op, taddr, mbar_op = ins.operands[:3]
    assert isinstance(taddr, TensorAddr)
    get_dst = address_reader(P, dst_op, ins, "shared")
    get_tm = P.reader(taddr.tmap, T.u64, ins)
    get_c = [P.reader(c, T.s32, ins) for c in taddr.coords]
    get_mbar = address_reader(P, mbar_op, ins, "shared")
    im2col = getattr(info, "im2col", False)
    get_offs = [P.reader(o, T.u16, ins) for o in ins.operands[3]] if im2col else []
    mask_op = ins.operands[4 if im2col else 3] if info.multicast else None
    get_mask = P.reader(mask_op, T.u16, ins) if mask_op is not None else None

    def tensor_load(S, m):
        L = S.launch
        thr = np.flatnonzero(m)
        tmaddr = np.broadcast_to(np.asarray(get_tm(S)), (S.N,))[thr]
        cs = [np.broadcast_to(np.asarray(g(S)), (S.N,))[thr] for g in get_c]
        dsts = np.broadcast_to(np.asarray(get_dst(S)), (S.N,))[thr]
        mbars = np.broadcast_to(np.asarray(get_mbar(S)), (S.N,))[thr]
        masks = np.broadcast_to(np.asarray(get_mask(S)), (S.N,))[thr] if get_mask is not None else None
        offs = [np.broadcast_to(np.asarray(g(S)), (S.N,))[thr] for g in get_offs]
        for i, t in enumerate(thr):
            t = int(t)
            tm = _tensormap(S, op, tmaddr[i], t)
            if len(cs) != tm.rank:
                S.report("oob", f"{ins.opcode}: {len(cs)} coordinates for a rank-{tm.rank} tensor map", op,
                         np.array([t]))
                continue
            if im2col != isinstance(tm, Im2colTensorMap):
                S.report("oob", f"{ins.opcode}: {'an im2col' if im2col else 'a tile'} copy needs "
                         f"{'an im2col' if im2col else 'a tiled'} tensor map (interp.host_"
                         f"{'im2col_map' if im2col else 'tensor_map'})", op, np.array([t]))
                continue
            if im2col:
                if tm.interleave:
                    raise InterpUnsupported("im2col tensor maps with interleave are not modelled", op.ins)
                geo = im2col_geometry(tm, [int(c[i]) for c in cs], [int(o[i]) for o in offs])
                if isinstance(geo, str):
                    S.report("oob", f"{ins.opcode}: {geo}", op, np.array([t]))
                    continue
                off, inb = geo
            else:
                off, inb = box_geometry(tm, [int(c[i]) for c in cs])
                _interleaved_in_bounds(tm, inb, op)
            hoff, ok = _global_check(S, op, tm, off, inb, t, "TMA load")
            if not ok:
                continue
            eb = tm.element_bytes
            data = np.broadcast_to(_fill_bytes(tm), (len(off), eb)).copy()
            if len(hoff):
                global_order.on_load(S, op, Part("global", None, hoff, np.full(len(hoff), t)), eb, None, None,
                                     "async")
                data[inb] = L.heap.heap[hoff[:, None] + np.arange(eb)]
                if L.heap.counter is not None:
                    L.heap.counter.add("reads", hoff, eb)
            nbytes = data.size
            chunks = _smem_targets(S, op, int(dsts[i]), nbytes, t, "TMA load destination", tm.swizzle)
            if chunks is None:
                continue
            phys = apply_swizzle(chunks, tm.swizzle)
            rows = data.reshape(-1, 16)
            targets = [int(S.cta_local[t])] if masks is None else _cluster_targets(S, op, t, int(masks[i]))
            if targets is None:
                continue
            if any(cta != int(S.cta_local[t]) for cta in targets):
                check_peer_started(S, op, np.array([t]), np.array([True]), "TMA multicast write")
            for cta in targets:
                if not _chunks_ok(S, op, phys, t, "write"):
                    break
                base = cta * L.smem.size
                flat = phys + base
                who = np.full(len(flat), t)
                part = Part("shared", np.arange(len(flat)), flat, who)
                shadow_write(S, op, part, 16, pc=op.pc)
                mark_pending(S, part, 16, op.pc)
                rec = CopyRecord(op.pc, who, flat, rows.copy(), np.zeros(len(flat), dtype=np.int64), S.step)
                mb = np.array([int(mbars[i])], dtype=np.uint64)  # the same offset in the target CTA
                owner = np.array([cta * S.Tp])  # any thread of the target CTA: its mbarrier
                for key, _, state in mbar_lookup(S, op, mb, owner):
                    state.queue.append(("bulk", S.step, rec, nbytes))
    return tensor_load


class BulkStores:
    """Per batch: each thread's bulk-group counter and the shared bytes its TMA stores still read."""

    def __init__(self, S):
        self.committed = np.zeros(S.N, dtype=np.int64)
        self.records = []  # (issuing thread, group, flat shared bytes)


def bulk_state(S) -> BulkStores:
    """The batch's BulkStores (created on first use, with the per-byte held-source map)."""
    st = getattr(S, "bulk", None)
    if st is None:
        st = S.bulk = BulkStores(S)
        S.bulk_src_pc = np.full(len(S.smem), -1, dtype=np.int32)
    return st


def make_tensor_store(P, op, land=None, what="TMA store"):
    """Executor of the TMA tile store (shared -> global, in-bounds part only).  `land(tm, old, new)`, when given,
    makes the bytes that land from the global bytes there and the box's (a TMA reduction: exec_reduce)."""
    ins = op.ins
    taddr, src_op = ins.operands[:2]
    get_tm = P.reader(taddr.tmap, T.u64, ins)
    get_c = [P.reader(c, T.s32, ins) for c in taddr.coords]
    get_src = address_reader(P, src_op, ins, "shared")

    def tensor_store(S, m):
        L = S.launch
        st = bulk_state(S)
        thr = np.flatnonzero(m)
        tmaddr = np.broadcast_to(np.asarray(get_tm(S)), (S.N,))[thr]
        cs = [np.broadcast_to(np.asarray(g(S)), (S.N,))[thr] for g in get_c]
        srcs = np.broadcast_to(np.asarray(get_src(S)), (S.N,))[thr]
        for i, t in enumerate(thr):
            t = int(t)
            tm = _tensormap(S, op, tmaddr[i], t)
            if isinstance(tm, Im2colTensorMap):
                S.report("oob", f"{ins.opcode}: a {what} needs a tiled tensor map, not an im2col one", op,
                         np.array([t]))
                continue
            if len(cs) != tm.rank:
                S.report("oob", f"{ins.opcode}: {len(cs)} coordinates for a rank-{tm.rank} tensor map", op,
                         np.array([t]))
                continue
            off, inb = box_geometry(tm, [int(c[i]) for c in cs])
            _interleaved_in_bounds(tm, inb, op)
            hoff, ok = _global_check(S, op, tm, off, inb, t, what)
            if not ok:
                continue
            eb = tm.element_bytes
            nbytes = len(off) * eb
            chunks = _smem_targets(S, op, int(srcs[i]), nbytes, t, f"{what} source", tm.swizzle)
            if chunks is None:
                continue
            phys = apply_swizzle(chunks, tm.swizzle)
            if not _chunks_ok(S, op, phys, t, "read"):
                continue
            flat = _read_held(S, op, st, t, phys)
            data = S.smem[flat].reshape(-1, eb)
            if len(hoff):
                _global_write(S, op, Part("global", None, hoff, np.full(len(hoff), t)), eb, land is not None)
                at = hoff[:, None] + np.arange(eb)
                L.heap.heap[at] = data[inb] if land is None else land(tm, L.heap.heap[at], data[inb])
                if L.heap.counter is not None:
                    L.heap.counter.add("writes", hoff, eb)
    return tensor_store


def _global_write(S, op, part, nbytes, reduction: bool) -> None:
    """A TMA or bulk write of global memory, for the cross-CTA order (`global_order`).  A reduction is an atomic
    read-modify-write through the async proxy: its read is checked as a strong async-proxy read (another CTA's
    plain writes need a release/acquire chain, generic writes a proxy fence) and its write is strong, so
    reductions of any CTAs into the same words do not race with each other."""
    if reduction:
        global_order.on_load(S, op, part, nbytes, "relaxed", "gpu", "async")
        global_order.on_store(S, op, part, nbytes, "relaxed", "gpu", "async")
    else:
        global_order.on_store(S, op, part, nbytes, None, None, "async")


def read_chunks(S, op, t, local):
    """The flat shared bytes of thread t's 16-byte chunks at CTA offsets `local` that an async-proxy copy reads,
    the read checked (races, the async proxy)."""
    flat = ((local + int(S.smem_base[t]))[:, None] + np.arange(16)).ravel()
    if S.track:
        shadow_read(S, op, Part("shared", np.arange(len(flat)), flat, np.full(len(flat), t)), 1)
        proxy_check(S, op, flat, t)
    return flat


def _read_held(S, op, st, t, local):
    """`read_chunks` for a bulk store, the bytes held until wait_group.read retires the group."""
    flat = read_chunks(S, op, t, local)
    S.bulk_src_pc[flat] = op.pc
    st.records.append((t, int(st.committed[t]), flat))
    return flat


def make_bulk_store(P, op, land=None, what="cp.async.bulk store"):
    """cp.async.bulk.global.shared::cta.bulk_group: `size` bytes shared -> global, read when issued; the
    source stays held until wait_group.read retires the group (like a tensor store).  `land(old, new)`, when
    given, makes the bytes that land from the global bytes there and the source's (a bulk reduction)."""
    ins = op.ins
    get_dst = address_reader(P, ins.operands[0], ins, "global")
    get_src = address_reader(P, ins.operands[1], ins, "shared")
    get_size = P.reader(ins.operands[2], T.u32, ins)

    def bulk_store(S, m):
        L = S.launch
        st = bulk_state(S)
        for t, n, dst, local in bulk_sources(S, op, what, m, get_size, get_dst, get_src):
            k0, hoff = L.heap.locate(np.array([dst], dtype=np.uint64), n)
            if k0[0] < 0:
                S.report("oob", f"{what} of {n} bytes at {dst:#x}: {L.heap.describe(dst, n)}", op, np.array([t]))
                continue
            flat = _read_held(S, op, st, t, local)
            _global_write(S, op, Part("global", None, hoff[:1], np.array([t])), n, land is not None)
            at = slice(int(hoff[0]), int(hoff[0]) + n)
            L.heap.heap[at] = S.smem[flat] if land is None else land(L.heap.heap[at], S.smem[flat])
            if L.heap.counter is not None:
                L.heap.counter.add("writes", hoff, n)
    return bulk_store


def bulk_sources(S, op, what, m, get_size, get_dst, get_src):
    """Each thread of mask `m` issuing a 1-D bulk transfer out of shared memory: (thread, size, destination
    address, the CTA offsets of its source's 16-byte chunks), for the threads whose size and addresses pass
    `_bulk_source` (the others are reported and left out)."""
    thr = np.flatnonzero(m)
    sizes = np.broadcast_to(np.asarray(get_size(S)).astype(np.int64), (S.N,))[thr]
    dsts = np.broadcast_to(np.asarray(get_dst(S)), (S.N,))[thr]
    srcs = np.broadcast_to(np.asarray(get_src(S)), (S.N,))[thr]
    for i, t in enumerate(thr):
        t, n, dst = int(t), int(sizes[i]), int(dsts[i])
        local = _bulk_source(S, op, what, n, dst, int(srcs[i]), t)
        if local is not None:
            yield t, n, dst, local


def _bulk_source(S, op, what, n, dst, src, t):
    """The CTA offsets of the 16-byte chunks a 1-D bulk store or reduction of `n` bytes reads at `src`, checked
    (size and both addresses, the shared window), or None after reporting what is wrong."""
    if n <= 0 or n % 16 or dst % 16 or src % 16:
        S.report("misaligned", f"{what} of {n} bytes: the size must be a positive multiple of 16 and both addresses "
                 "16-byte aligned", op, np.array([t]))
        return None
    local = np.arange(0, n, 16, dtype=np.int64) + src
    return local if _chunks_ok(S, op, local, t, "read") else None


def make_bulk_copy(P, op):
    """Dispatch for cp.async.bulk: the 1-D load (exec_async), the 1-D store or the copy into a cluster CTA's
    shared memory (here)."""
    kind = op.ins.info.kind
    if kind == "s2g":
        return make_bulk_store(P, op)
    if kind == "s2s":
        return make_bulk_to_cluster(P, op, "cp.async.bulk destination write")
    return make_bulk(P, op)


def make_bulk_to_cluster(P, op, what, combine=None):
    """Executor of a 1-D bulk transfer of this CTA's shared memory into a cluster CTA's ([dst], [src], size,
    [mbar]: the copy, or with `combine(old, new)` the reduction): the source read at issue, the bytes landing
    in the destination CTA when its mbarrier (at the .shared::cluster address `mbar`) is polled."""
    ins = op.ins
    get_dst = address_reader(P, ins.operands[0], ins, "shared")
    get_src = address_reader(P, ins.operands[1], ins, "shared")
    get_size = P.reader(ins.operands[2], T.u32, ins)
    get_mbar = address_reader(P, ins.operands[3], ins, "shared")

    def to_cluster(S, m):
        for t, n, dst, local in bulk_sources(S, op, ins.opcode, m, get_size, get_dst, get_src):
            one = np.array([t])
            data = S.smem[read_chunks(S, op, t, local)][None, :]
            queue_landing(S, op, np.array([dst], dtype=np.uint64), one, data, get_mbar(S)[one], what, combine)
    return to_cluster


def make_bulk_commit(P, op):
    """Executor of cp.async.bulk.commit_group."""
    def commit(S, m):
        bulk_state(S).committed[m] += 1
    return commit


def make_bulk_wait(P, op):
    """Executor of cp.async.bulk.wait_group{.read} n: release the sources of all but the n newest groups."""
    keep = int(op.ins.info)

    def wait(S, m):
        st = bulk_state(S)
        left = []
        for t, g, flat in st.records:
            if m[t] and g < st.committed[t] - keep:
                S.bulk_src_pc[flat] = -1
            else:
                left.append((t, g, flat))
        st.records = left
    return wait


def make_tensor(P, op):
    """Dispatch for cp.async.bulk.tensor: load (global -> shared) or store (shared -> global)."""
    kind = op.ins.info.kind
    if kind == "tensor_g2s":
        return make_tensor_load(P, op)
    if kind == "tensor_s2g":
        return make_tensor_store(P, op)
    raise InterpUnsupported(f"cp.async.bulk.tensor {kind} is not modelled", op.ins)
