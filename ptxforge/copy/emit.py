"""Emit a planned tile copy: global -> shared (cp.async or ld/st) and shared -> global (vector st).

Both follow `TileCopyPlan.copies(tid)`: copy q = tid + j*threads moves `width_bytes` bytes at
tile row q // copies_per_row, byte column (q % copies_per_row) * width_bytes.

Ragged edges: with `rows_total`/`cols_total` given, every copy is clipped to the matrix.  A
cp.async reads only the bytes inside the matrix (src-size) and zero-fills the rest of its
shared bytes; a copy wholly outside reads nothing (src-size 0) and its source address is
replaced by the matrix's first element, so no address outside the matrix is ever formed.
Stores write only the bytes inside the matrix.  Leave both as None for tiles known to be
inside: the copies then carry no bounds arithmetic at all.

Registers: each copy's addresses are made right before its instructions.  Copies are unrolled
up to 64 per thread and beyond that run as a loop of small batches, and stores load a few
copies' shared bytes ahead of their global stores, so every plan the planner accepts assembles
without spills.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from ..isa import types as T
from ..isa.operands import Addr, Guard, Reg, Symbol
from .. import fold as F
from .elems import emit_elems_to_bytes
from .layout import SmemLayout
from .plan import TileCopyPlan, lowbit

_PTXFORGE_INTERNAL = True

_LDST_TYPE = {1: T.u8, 2: T.u16, 4: T.b32, 8: T.b32, 16: T.b32}
_MAX_IMM_OFFSET = 1 << 31
#: A store loads this many registers of shared bytes ahead of its global stores (a few copies in
#: flight for latency, few enough that hundreds of copies per thread do not spill).
_STORE_BATCH_REGS = 16
#: Plain (1 or 2-byte) global loads issued ahead of their shared stores; also the copies of one
#: trip of a looped global -> shared copy.
_LDST_BATCH = 16
#: Copies per thread up to which copies are unrolled; beyond it they are a run-time loop of one
#: batch a trip (ptxas would otherwise hoist hundreds of loads, or keep hundreds of addresses, and
#: spill).
_MAX_UNROLLED = 64


@dataclass
class _Slot:
    j: int
    row: object  # tile row: int or u32 register
    cb: object  # byte column inside the tile row
    gaddr: Addr  # global address of the copy's first byte
    saddr: Addr  # shared address of the copy's first byte
    guard: object  # None, or a pred register: this thread has copy j
    valid: object  # True, or a pred register: the copy overlaps the matrix
    nbytes: object  # bytes of the copy inside the matrix (int or u32 register; meaningful when valid)


def _lt(k, a, b):
    if not F.is_reg(a) and not F.is_reg(b):
        return a < b
    return k.setp("lt", a, b, type=T.u32)


def _and(k, p, q):
    if p is True:
        return q
    if q is True:
        return p
    if p is False or q is False:
        return False
    return k.and_(p, q)


def _as_pred(k, pred):
    if pred is None:
        return None
    if isinstance(pred, Guard):
        return k.not_(pred.reg) if pred.negate else pred.reg
    if isinstance(pred, Reg) and pred.type.is_pred:
        return pred
    raise ValidationError(f"pred must be a .pred register or ~register, got {pred!r}")


def _materialize(k, a: Addr):
    return a.base if a.offset == 0 else k.add(a.base, a.offset)


def _layout_of(plan: TileCopyPlan, layout):
    if not isinstance(plan, TileCopyPlan):
        raise ValidationError(f"expected a TileCopyPlan from plan_tile_copy/plan_tile_store, got {plan!r}")
    if layout is None:
        return plan.smem_layout
    if not isinstance(layout, SmemLayout):
        raise ValidationError(f"layout must be a SmemLayout, got {layout!r}")
    if plan.layout is not None and layout != plan.layout:
        raise ValidationError(f"layout {layout.describe()} differs from the one the plan was made for "
                              f"({plan.layout.describe()}); plan with the layout you emit with")
    if (layout.rows, layout.row_bytes) != (plan.rows, plan.row_bytes):
        raise ValidationError(f"layout is {layout.rows}x{layout.row_bytes} B but the plan's tile is "
                              f"{plan.rows}x{plan.row_bytes} B")
    if layout.row_stride % plan.width_bytes:
        raise ValidationError(f"layout rows are {layout.row_stride} bytes apart, which breaks the plan's "
                              f"{plan.width_bytes}-byte alignment; plan with this layout")
    return layout


def _check_static(plan, stride, col0_bytes, what):
    w = plan.width_bytes
    if isinstance(stride, int) and lowbit(stride) < w:
        raise ValidationError(f"{what} row stride {stride} bytes is only {lowbit(stride)}-byte aligned, but the plan "
                              f"uses {w}-byte copies; plan with row_stride_bytes={stride}")
    if isinstance(col0_bytes, int) and col0_bytes % w:
        raise ValidationError(f"tile origin column starts at byte {col0_bytes}, not a multiple of the plan's "
                              f"{w}-byte copies; tile origins must sit at multiples of the copy width")


def _shared_base(k, dst, plan):
    if isinstance(dst, Symbol):
        if dst.align < plan.width_bytes:
            raise ValidationError(f"shared variable {dst.name} is declared {dst.align}-byte aligned, but the plan "
                                  f"moves {plan.width_bytes} bytes at a time, which needs {plan.width_bytes}-byte "
                                  f"aligned shared addresses; declare it with align={max(plan.width_bytes, 16)}")
        return k.shared_base(dst)
    if isinstance(dst, Reg) and not dst.type.is_pred and dst.type.bits == 32:
        return dst
    raise ValidationError(f"the shared tile address must be a u32 shared-window register or a shared variable, "
                          f"got {dst!r}")


def _global_base(gbase, what):
    if not isinstance(gbase, Reg) or gbase.type.bits != 64 or gbase.type.is_float:
        raise ValidationError(f"{what} must be a u64 register holding a global address, got {gbase!r}")
    return gbase


def _slots(k, plan, layout, *, gbase, gstride, row0, col0_bytes, rows_total, row_len, sbase, tid, pred,
           per_trip=None):
    """Per copy j of this thread: addresses, guard, and (when bounded) overlap with the matrix.

    A generator: each copy's registers are made when the emitter asks for that copy, right before
    its instructions, so no more of them are live at once than the emitter holds (a plan may have
    hundreds of copies per thread).  With `per_trip` (an int), the copies are a run-time loop
    instead: the generator opens the loop, yields the `per_trip` copies of one trip (copy index
    trip * per_trip + u) inside its body, and closes it when asked for the next copy; the consumer
    emits each trip's instructions after taking exactly `per_trip` slots."""
    w, cpr, nthreads, total = plan.width_bytes, plan.copies_per_row, plan.threads, plan.total_copies
    tid = F.as_u32(k, tid)
    user = _as_pred(k, pred)
    tile_g = F.add64(k, gbase, F.wide(k, row0, gstride)) if F.is_reg(row0) or row0 else gbase
    tile_g = F.add64(k, tile_g, col0_bytes)
    fixed = nthreads % cpr == 0
    bounded_rows, bounded_cols = rows_total is not None, row_len is not None

    def guard_for(j):
        g = True
        if (j + 1) * nthreads > total:  # the last round leaves some threads without a copy
            g = _lt(k, tid, total - j * nthreads)
        g = _and(k, user, g) if user is not None else g
        return None if g is True else g

    def col_bounds(cb):
        """(inside, bytes inside) for byte column cb of the tile."""
        if not bounded_cols:
            return True, w
        g_cb = F.add(k, col0_bytes, cb)
        inside = _lt(k, g_cb, row_len)
        left = F.sub(k, row_len, g_cb)
        n = min(left, w) if not F.is_reg(left) else k.min(left, w)
        return inside, n

    def row_inside(row):
        if not bounded_rows:
            return True
        return _lt(k, F.add(k, row0, row), rows_total)

    def any_slot(j, q, guard):
        """Copy q (= tid + j * threads, an int or a register) by the general formula."""
        row = F.div(k, q, cpr)
        cb = F.mul(k, F.rem(k, q, cpr), w)
        g = F.add64(k, F.add64(k, tile_g, F.wide(k, row, gstride)), cb)
        saddr = Addr(F.add(k, sbase, layout.emit_byte_offset(k, row, cb)))
        col_in, col_n = col_bounds(cb)
        valid = _and(k, row_inside(row), col_in)
        return _Slot(j, row, cb, Addr(g), saddr, guard, valid, col_n)

    if per_trip is not None:
        trips = -(-plan.copies_per_thread // per_trip)
        guarded = trips * per_trip * nthreads > total  # some copy indices of the last trip are past the tile
        with k.for_range(0, trips, name="trip") as trip:
            first = F.mad(k, trip, per_trip * nthreads, tid)  # copy index of this trip's first copy
            for u in range(per_trip):
                q = F.add(k, first, u * nthreads)
                g = _lt(k, q, total) if guarded else True
                g = _and(k, user, g) if user is not None else g
                yield any_slot(None, q, None if g is True else g)
        return
    if fixed:
        step_rows = nthreads // cpr
        r_t = F.div(k, tid, cpr)
        cb = F.mul(k, F.rem(k, tid, cpr), w)
        g0 = F.add64(k, tile_g, F.wide(k, r_t, gstride))
        g0 = F.add64(k, g0, cb)
        s_off = layout.emit_byte_offset(k, r_t, cb)
        s0 = F.add(k, sbase, s_off)
        # the swizzle repeats every 8 rows: with a step that is a multiple of 8, later rows are
        # the first one plus a constant
        s_const = layout.kind != "swizzle" or step_rows % 8 == 0
        g_step = (F.wide(k, step_rows, gstride) if not isinstance(gstride, int) and plan.copies_per_thread > 1
                  else None)
        col_in, col_n = col_bounds(cb)
        g_cur = g0
        for j in range(plan.copies_per_thread):
            rows_on = j * step_rows
            row = r_t if j == 0 else None  # made only where needed: bounds or a row-dependent swizzle
            if isinstance(gstride, int):
                off = rows_on * gstride
                gaddr = Addr(g0, off) if off < _MAX_IMM_OFFSET else Addr(F.add64(k, g0, off))
            else:
                if j > 0:
                    g_cur = F.add64(k, g_cur, g_step)
                gaddr = Addr(g_cur)
            if s_const:
                saddr = Addr(s0, rows_on * layout.row_stride)
            else:
                row = F.add(k, r_t, rows_on)
                saddr = Addr(F.add(k, sbase, layout.emit_byte_offset(k, row, cb)))
            if bounded_rows:
                row = row if row is not None else F.add(k, r_t, rows_on)
                valid = _and(k, row_inside(row), col_in)
            else:
                valid = col_in
            guard = guard_for(j)
            if guard is not False:  # False: a thread index known to have no copy j
                yield _Slot(j, row, cb, gaddr, saddr, guard, valid, col_n)
    else:
        for j in range(plan.copies_per_thread):
            guard = guard_for(j)
            if guard is not False:
                yield any_slot(j, F.add(k, tid, j * nthreads), guard)



def _count(v, name, least):
    """An integer register as it is; a Python or numpy integer of at least `least` as an int."""
    if isinstance(v, Reg) and not v.type.is_pred and not v.type.is_float:
        return v
    if T.is_integer(v) and v >= least:
        return int(v)
    raise ValidationError(f"{name} must be an integer register or an int of at least {least}, got {v!r}")


def _bounds_args(k, plan, rows_total, cols_total):
    rows_total = F.as_u32(k, rows_total) if rows_total is not None else None
    row_len = (emit_elems_to_bytes(k, F.as_u32(k, cols_total), plan.elem_type, round_up=True)
               if cols_total is not None else None)
    return rows_total, row_len


# what each direction calls its global side, and the planner that makes its plans
_DIRECTIONS = {
    "g2s": ("emit_tile_copy", "global -> shared", "plan_tile_copy", "src", "source"),
    "s2g": ("emit_tile_store", "shared -> global", "plan_tile_store", "dst", "destination"),
}


def _prepare(k, plan, direction, *, layout, gbase, gstride, row0, col0, rows_total, cols_total, shared, tid, pred,
             per_trip=None):
    """The checks and per-copy slots of both directions: (global base, bounded?, slots).

    per_trip: None to unroll every copy; else the copies are a run-time loop of `per_trip` copies a
    trip when the plan has more than `_MAX_UNROLLED` copies per thread (see `_slots`)."""
    layout = _layout_of(plan, layout)
    fn, arrow, planner, gname, side = _DIRECTIONS[direction]
    if plan.direction != direction:
        raise ValidationError(f"{fn} needs a {arrow} plan from {planner}")
    gbase = _global_base(gbase, gname)
    tid = _count(tid, "tid", 0)
    if isinstance(tid, int) and tid >= plan.threads:
        raise ValidationError(f"tid {tid} is not one of the plan's threads 0..{plan.threads - 1}")
    row0, col0, gstride = (_count(v, name, least) for v, name, least in
                           ((row0, "row0", 0), (col0, "col0", 0), (gstride, f"{gname}_row_stride", 1)))
    if isinstance(gstride, int) and gstride >= 2**32:
        raise ValidationError(f"{gname}_row_stride {gstride} does not fit 32 bits as an int; pass it in a u64 "
                              "register")
    rows_total, cols_total = (None if v is None else _count(v, name, 0)
                              for v, name in ((rows_total, "rows_total"), (cols_total, "cols_total")))
    col0_bytes = emit_elems_to_bytes(k, F.as_u32(k, col0), plan.elem_type)
    _check_static(plan, gstride, col0_bytes, side)
    rows_total, row_len = _bounds_args(k, plan, rows_total, cols_total)
    bounded = rows_total is not None or row_len is not None
    sbase = _shared_base(k, shared, plan)
    if per_trip is not None and plan.copies_per_thread <= _MAX_UNROLLED:
        per_trip = None
    slots = _slots(k, plan, layout, gbase=gbase, gstride=gstride, row0=row0, col0_bytes=col0_bytes,
                   rows_total=rows_total, row_len=row_len, sbase=sbase, tid=tid, pred=pred, per_trip=per_trip)
    return gbase, bounded, slots


def emit_tile_copy(k, plan, *, src, src_row_stride, row0, col0, rows_total, cols_total, dst, tid, layout=None,
                   pred=None):
    """Copy one tile global -> shared as `plan` says (cp.async, or ld/st where the plan fell back).

    src: u64 global address of element (0, 0) of the matrix; src_row_stride: bytes between rows
    (an int below 2**32, a u32 or u64 register); row0, col0: the tile's origin in elements (ints or u32
    registers; col0 times the element size must be a multiple of the copy width); rows_total,
    cols_total: the matrix's size in elements for ragged edges (None: the tile is inside).  Byte
    columns are u32: a row's bytes plus the tile row's must not pass 2**32.  A
    packed row of odd length (s4/u4) counts its last, half-used byte as inside; the row stride
    is whole bytes, so that byte belongs to the row.  dst: u32 shared address (or shared
    variable, declared aligned to at least the plan's width: align=16 fits every plan) of the
    tile; tid: this thread's index among plan.threads participating threads;
    pred: an extra guard for all copies (e.g. producer warps only).

    Completion is the caller's: commit a group, or arrive on an mbarrier (see
    ptxforge.copy.completion).  Returns the plan.
    """
    gbase, bounded, slots = _prepare(k, plan, "g2s", layout=layout, gbase=src, gstride=src_row_stride, row0=row0,
                                     col0=col0, rows_total=rows_total, cols_total=cols_total, shared=dst, tid=tid,
                                     pred=pred, per_trip=_LDST_BATCH)
    w = plan.width_bytes
    if plan.method == "cp.async":
        cache = plan.cache.lstrip(".")
        for s in slots:
            src_size, gaddr = None, s.gaddr
            if bounded:
                if s.valid is False:
                    src_size, gaddr = 0, Addr(gbase)
                elif s.valid is not True:
                    src_size = k.selp(s.nbytes, 0, s.valid, type=T.u32)
                    gaddr = Addr(k.selp(_materialize(k, s.gaddr), gbase, s.valid))
                elif s.nbytes != w:
                    src_size = s.nbytes
            k.cp_async(s.saddr, gaddr, w, cache=cache, src_size=src_size, pred=s.guard)
        return plan
    # plain loads and stores: 1 or 2 bytes per copy, a batch of loads ahead of its stores
    for batch in _batches(slots, _LDST_BATCH):
        values = [_plain_load(k, s, w, bounded) for s in batch]
        for s, v in zip(batch, values):
            k.st(s.saddr, v, type=_LDST_TYPE[w], space="shared", pred=s.guard)
    return plan


def _plain_load(k, s, w, bounded):
    """The register holding the `w` (1 or 2) source bytes of copy `s`: zeros where the copy is outside
    the matrix, the last byte alone where a 2-byte copy holds the row's end."""
    t = _LDST_TYPE[w]
    if not bounded:
        return k.ld(s.gaddr, type=t, space="global", pred=s.guard)
    v = k.mov(0, type=T.u32)
    ok = _and(k, s.valid, s.guard) if s.guard is not None else s.valid
    if w == 1:
        full, half = ok, False
    elif not F.is_reg(s.nbytes):
        full, half = (ok, False) if s.nbytes >= 2 else (False, ok)
    else:
        # a 2-byte copy that holds the row's last byte: read that byte alone
        full = _and(k, ok, k.setp("ge", s.nbytes, 2, type=T.u32))
        half = _and(k, ok, k.setp("eq", s.nbytes, 1, type=T.u32))
    if full is not False:
        k.ld(s.gaddr, type=t, space="global", dst=v, pred=None if full is True else full)
    if half is not False:
        k.ld(s.gaddr, type=T.u8, space="global", dst=v, pred=None if half is True else half)
    return v


def _vec_load(k, saddr, w, guard):
    t = _LDST_TYPE[w]
    if w >= 8:
        return list(k.ld(saddr, type=t, space="shared", vec=w // 4, pred=guard))
    return [k.ld(saddr, type=t, space="shared", pred=guard)]


def _vec_store(k, gaddr, regs, w, guard):
    t = _LDST_TYPE[w]
    if w >= 8:
        k.st(gaddr, regs, type=t, space="global", pred=guard)
    else:
        k.st(gaddr, regs[0], type=t, space="global", pred=guard)


def emit_tile_store(k, plan, *, src, dst, dst_row_stride, row0, col0, rows_total, cols_total, tid, layout=None,
                    pred=None):
    """Store one shared tile to global memory as `plan` (from plan_tile_store) says.

    src: u32 shared address (or shared variable) of the tile in `layout`; dst: u64 global
    address of element (0, 0) of the destination matrix; the rest as in emit_tile_copy.  With
    bounds, only bytes inside the matrix are written: whole copies with one vector store, the
    copy that holds a row's end byte by byte (behind a branch, so inner tiles do not pay).
    """
    w = plan.width_bytes
    batch_size = max(1, _STORE_BATCH_REGS // -(-w // 4))
    _, bounded, slots = _prepare(k, plan, "s2g", layout=layout, gbase=dst, gstride=dst_row_stride, row0=row0,
                                 col0=col0, rows_total=rows_total, cols_total=cols_total, shared=src, tid=tid,
                                 pred=pred, per_trip=batch_size)
    for batch in _batches(slots, batch_size):
        loaded = [_vec_load(k, s.saddr, w, s.guard) for s in batch]
        _store_batch(k, batch, loaded, w, bounded)
    return plan


def _batches(items, n):
    """Lists of up to n consecutive items."""
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _store_batch(k, slots, loaded, w, bounded):
    """The global stores of copies whose shared bytes are loaded (`loaded[i]`: the registers of slots[i])."""
    for s, regs in zip(slots, loaded):
        if not bounded:
            _vec_store(k, s.gaddr, regs, w, s.guard)
            continue
        ok = _and(k, s.valid, s.guard) if s.guard is not None else s.valid
        if ok is False:
            continue
        if not F.is_reg(s.nbytes):
            if s.nbytes == w:
                _vec_store(k, s.gaddr, regs, w, None if ok is True else ok)
            else:
                _store_bytes(k, s.gaddr, regs, w, s.nbytes, ok)
            continue
        full = _and(k, ok, k.setp("ge", s.nbytes, w, type=T.u32))
        _vec_store(k, s.gaddr, regs, w, full)
        if w > 1:
            part = _and(k, ok, k.setp("lt", s.nbytes, w, type=T.u32))
            with k.if_(part):
                _store_bytes(k, s.gaddr, regs, w, s.nbytes, True)


def _store_bytes(k, gaddr, regs, w, nbytes, ok):
    """Store the first `nbytes` bytes of a w-byte copy held in regs, one byte at a time.

    nbytes is an int, or a register known to be in 1..w-1 where `ok` holds."""
    known = not F.is_reg(nbytes)
    for b in range(nbytes if known else w - 1):
        reg = regs[b // 4]
        byte = reg if b % 4 == 0 else k.shr(reg, 8 * (b % 4), type=T.u32)
        p = ok
        if not known and b > 0:
            p = _and(k, ok, k.setp("gt", nbytes, b, type=T.u32))
        k.st(gaddr + b, byte, type=T.u8, space="global", pred=None if p is True else p)
