"""Loads, stores, atomics and the warp-collective matrix loads/stores (ldmatrix, stmatrix).

Sub-word loads widen into the destination register (sign-extended for .s types), stores take
the low bits of a wider register.  Vector accesses must be aligned to their whole size.
Atomics whose addresses collide within one instruction are applied one thread after another
in thread order, so every thread gets a distinct old value, as on hardware.
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.operands import Reg, Symbol
from . import global_order
from .access import GLOBAL, SHARED, gather, map_access, scatter, shadow_read, shadow_write
from .findings import InterpUnsupported
from ..isa.fragments import matrix_layout
from .memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW
from .minmax import canonical_nan, min_max
from .ops import address_parts
from .values import (UINT, as_words128, flush_subnormal, from_words128, half_bits, half_lane, pack_lanes,
                     view_dtype)

_PTXFORGE_INTERNAL = True


def address_reader(P, addr, ins, space):
    """S -> uint64 addresses (full thread width) of a memory operand in `space`."""
    base, off = address_parts(addr)
    if isinstance(base, Reg):
        r = P.reader(base, T.u64 if base.type.bits == 64 else T.u32, ins)
        if off == 0:
            return lambda S: np.asarray(r(S)).astype(np.uint64)
        return lambda S: (np.asarray(r(S)).astype(np.int64) + off).astype(np.uint64)
    if isinstance(base, Symbol):
        name, sym_space = base.name, base.space

        def sym(S):
            a = S.launch.symbol_address(name, sym_space) + off
            if space in ("generic", "", None):
                a += {"shared": SHARED_WINDOW, "param": PARAM_WINDOW, "local": LOCAL_WINDOW}.get(sym_space, 0)
            return np.full(S.N, a, dtype=np.uint64)
        return sym
    if isinstance(base, int):
        return lambda S: np.full(S.N, base + off, dtype=np.uint64)
    raise InterpUnsupported(f"address {addr} is not modelled", ins)


def _width(t):
    return 16 if t is T.b128 else t.bits // 8


def spread(S, thr, values, dtype):
    """Values for threads `thr` (one row each, any trailing shape) -> a full-width array plus the mask of those
    threads: what a register writer takes."""
    values = np.asarray(values)
    full = np.zeros((S.N,) + values.shape[1:], dtype=dtype)
    full[thr] = values
    mask = np.zeros(S.N, dtype=bool)
    mask[thr] = True
    return full, mask


def make_ld(P, op):
    """The executor of `ld` (scalar and vector, every space): reads memory with bounds, alignment, race and
    in-flight-copy checks. Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`;
    `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    info = ins.info
    t, vec, space = info.type, info.vec, info.space
    width = _width(t)
    get_addr = address_reader(P, ins.operands[1], ins, space)
    dsts = P.regs_of(ins.operands[0])
    ext = "sign" if t.kind == "s" else "zero"
    puts = [P.writer(d, t, ins, extend=ext) for d in dsts]
    nbytes = width * vec
    if t is T.b128:  # one 16-byte access, read as two 64-bit words
        return _ld128(get_addr, space, puts[0], op, info)
    udt = UINT[t.bits]
    vdt = view_dtype(t)

    def ld(S, m):
        thr = np.flatnonzero(m)
        parts = map_access(S, op, space, get_addr(S)[thr], thr, nbytes, what="load")
        for part in parts:
            vals = gather(S, part, width, vec)
            observe_load(S, op, part, nbytes, info.sem, info.scope)
            for i, put in enumerate(puts):
                full, mask = spread(S, part.thr, vals[:, i].astype(udt), udt)
                put(S, full.view(vdt), mask)
    return ld


def observe_load(S, op, part, nbytes, sem=None, scope=None):
    """What a load of `nbytes` per thread of `part` tells the race and ordering checks (`sem`, `scope`: its memory
    order, None for a weak load).  The memory order counts for global memory only (`global_order`): in shared
    memory, this CTA's or another's through .shared::cluster, an ld.acquire / ld.volatile is a plain read for the
    race check, which learns of ordering there from barriers, fences and mbarriers alone."""
    if part.space == SHARED:
        shadow_read(S, op, part, nbytes)
    elif part.space == GLOBAL:
        global_order.on_load(S, op, part, nbytes, sem, scope)


def observe_store(S, op, part, nbytes, sem=None, scope=None):
    """What a store of `nbytes` per thread of `part` tells the race and ordering checks; as for `observe_load`, an
    st.release / st.volatile into shared memory (.shared::cluster included) is a plain write for the race check."""
    if part.space == SHARED:
        shadow_write(S, op, part, nbytes, pc=op.pc)
    elif part.space == GLOBAL:
        global_order.on_store(S, op, part, nbytes, sem, scope)


def _ld128(get_addr, space, put, op, info):
    def ld(S, m):
        thr = np.flatnonzero(m)
        for part in map_access(S, op, space, get_addr(S)[thr], thr, 16, what="load"):
            observe_load(S, op, part, 16, info.sem, info.scope)
            full, mask = spread(S, part.thr, gather(S, part, 8, 2), np.uint64)
            put(S, from_words128(full), mask)
    return ld


def make_st(P, op):
    """The executor of `st` (scalar and vector): writes memory with the same checks as `make_ld`. Returns ``fn(S,
    m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being
    built.
    """
    ins = op.ins
    info = ins.info
    t, vec, space = info.type, info.vec, info.space
    width = _width(t)
    get_addr = address_reader(P, ins.operands[0], ins, space)
    srcs = P.regs_of(ins.operands[1])
    bt = T.lookup(f"b{t.bits}")
    readers = [P.reader(s, bt, ins) for s in srcs]
    nbytes = width * vec
    if t is T.b128:  # one 16-byte access, written as two 64-bit words
        def read(S):
            return as_words128(np.broadcast_to(readers[0](S), (S.N,)))
        width, vec = 8, 2
    else:
        udt = UINT[t.bits]

        def read(S):
            return np.stack([np.broadcast_to(np.asarray(r(S)).astype(udt), (S.N,)) for r in readers], axis=1)

    def st(S, m):
        thr = np.flatnonzero(m)
        parts = map_access(S, op, space, get_addr(S)[thr], thr, nbytes, write=True, what="store")
        if not parts:
            return
        cols = read(S)
        for part in parts:
            observe_store(S, op, part, nbytes, info.sem, info.scope)
            scatter(S, part, width, cols[part.thr])
    return st


# ---------------------------------------------------------------- atomics

def _atom_apply(opname, t, old, b, c):
    """New memory value for atom op (vectorized over threads; values in t's view dtype)."""
    if opname == "add":
        return old + b
    if opname == "min":
        return np.minimum(old, b)
    if opname == "max":
        return np.maximum(old, b)
    if opname == "and":
        return old & b
    if opname == "or":
        return old | b
    if opname == "xor":
        return old ^ b
    if opname == "exch":
        return np.broadcast_to(b, np.shape(old)).copy() if np.ndim(b) == 0 else b
    if opname == "cas":
        return np.where(old == b, c, old)
    if opname == "inc":
        return np.where(old >= b, old.dtype.type(0), old + old.dtype.type(1))
    if opname == "dec":
        return np.where((old == 0) | (old > b), b, old - old.dtype.type(1))
    raise AssertionError(opname)


_HALF_ATOM = {T.f16: False, T.f16x2: False, T.bf16: True, T.bf16x2: True}  # type -> is bf16


def _half_atom(opname, t, old, b):
    """add / min / max of packed half-precision bits (uint16 or uint32) lane by lane: exact in float64, rounded
    once to the half format (.noftz: subnormals kept); min/max as the min/max instructions (`minmax.py`)."""
    is_bf16 = _HALF_ATOM[t]
    lanes = []
    for lane in range(t.lanes):
        x, y = (half_lane(v, lane, is_bf16).astype(np.float64) for v in (old, b))
        if opname == "add":
            lanes.append(half_bits(x + y, is_bf16))
        else:
            r = min_max(opname, x, y)
            lanes.append(canonical_nan(half_bits(r, is_bf16), r))
    return pack_lanes(lanes)


def _atom_bits(opname, t, old, b, c, space):
    """New memory bits for one atom element in memory `space` (GLOBAL / SHARED, as the address resolved): raw
    unsigned words in, raw words out ((n, 2) uint64 for .b128)."""
    if t in _HALF_ATOM:
        return _half_atom(opname, t, old, b)
    if t is T.b128:
        if opname == "exch":
            return np.broadcast_to(b, old.shape).copy()
        return np.where((old == b).all(axis=1)[:, None], c, old)
    vdt = view_dtype(t)
    x, y = old.view(vdt), b.view(vdt)
    # The ISA (atom and red): "Current implementation of atom.add.f32 on global memory flushes subnormal inputs
    # and results to sign-preserving zero; whereas atom.add.f32 on shared memory supports subnormal inputs and
    # results and doesn't flush them to zero."  So by where the address lands (generic addresses too), not by
    # the instruction's state space; f64 add and the .noftz half types keep subnormals everywhere.  d still
    # receives the original memory value.
    flush = opname == "add" and t is T.f32 and space == GLOBAL
    if flush:
        x, y = flush_subnormal(x), flush_subnormal(y)
    new = _atom_apply(opname, t, x, y, None if c is None else c.view(vdt))
    if flush:
        new = flush_subnormal(np.asarray(new, dtype=vdt))
    return np.asarray(new).astype(vdt).view(UINT[t.bits])


def make_atom(P, op):
    """The executor of `atom` / `red`: a read-modify-write applied in thread order, so the results are those of
    one legal serialization; a vector atom is one atomic per element.  Half types add (and min/max) lane by
    lane, rounded once; .add.f32 on global memory flushes subnormal inputs and results to zero of their sign,
    on shared memory it keeps them; .b128 exchanges and compares 16 bytes.  On shared memory (another CTA's too, through
    .shared::cluster) the memory order and scope change nothing: the update is applied as it is issued.
    Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op`
    the Op being built.
    """
    ins = op.ins
    info = ins.info
    t, space, opname, vec = info.type, info.space, info.op, info.vec
    width = 16 if t is T.b128 else t.bits // 8
    is_red = ins.opcode == "red"
    k = 0 if is_red else 1
    get_addr = address_reader(P, ins.operands[k], ins, space)
    bt = T.lookup(f"b{t.bits}")
    rbs = [P.reader(r, bt, ins) for r in P.regs_of(ins.operands[k + 1])]
    rc = P.reader(ins.operands[k + 2], bt, ins) if opname == "cas" else None
    puts = [] if is_red else [P.writer(r, bt, ins) for r in P.regs_of(ins.operands[0])]
    udt = UINT[64] if t is T.b128 else UINT[t.bits]

    def words(S, r):
        v = np.broadcast_to(np.asarray(r(S)), (S.N,))
        return as_words128(v) if t is T.b128 else v.astype(udt)

    def atom(S, m):
        thr = np.flatnonzero(m)
        parts = map_access(S, op, space, get_addr(S)[thr], thr, width * vec, write=True, what=ins.opcode)
        bs = [words(S, r) for r in rbs]
        cfull = words(S, rc) if rc is not None else None
        for part in parts:
            for e in range(vec):
                elem = type(part)(part.space, part.sel, part.off + e * width, part.thr)
                old = _atom_element(S, elem, width, bs[e][part.thr], None if cfull is None else cfull[part.thr])
                if puts:
                    full, mask = spread(S, part.thr, old, udt)
                    puts[e](S, from_words128(full) if t is T.b128 else full, mask)
            if part.space == GLOBAL:
                global_order.on_atomic(S, op, part, width * vec, info.sem, info.scope)

    def _atom_element(S, part, width, b, c):
        """Apply the atomic to one element of each thread of `part`; returns the old values."""
        count = 2 if t is T.b128 else 1
        w = 8 if t is T.b128 else width
        if len(np.unique(part.off)) == len(part.off):
            old = gather(S, part, w, count)
            old = old if t is T.b128 else old[:, 0]
            new = _atom_bits(opname, t, old, b, c, part.space)
            scatter(S, part, w, new if t is T.b128 else new[:, None])
            return old
        olds = []
        for i in range(len(part.thr)):  # colliding addresses: one thread after another
            one = type(part)(part.space, part.sel[i:i + 1], part.off[i:i + 1], part.thr[i:i + 1])
            o = gather(S, one, w, count)
            o = o if t is T.b128 else o[:, 0]
            n = _atom_bits(opname, t, o, b[i:i + 1], None if c is None else c[i:i + 1], one.space)
            scatter(S, one, w, n if t is T.b128 else n[:, None])
            olds.append(o)
        return np.concatenate(olds)
    return atom


# ---------------------------------------------------------------- ldmatrix / stmatrix

class _MatrixOp:
    """What ldmatrix and stmatrix share: the m8n8 .b16 form, its fragment layout, the row addresses."""

    def __init__(self, P, op, addr_operand):
        ins = op.ins
        form = ins.info
        if form.shape != "m8n8" or form.type is not T.b16:
            raise InterpUnsupported(f"{ins.opcode}.{form.shape}...{form.type.name} is not modelled (only m8n8 .b16: "
                                    "the 8-bit m16n16 layouts are given only as figures)", ins)
        self.num = form.num
        self.lay = matrix_layout(form.num, form.trans)
        self.space = ins.mods[0] if ins.mods else "shared"
        self.get_addr = address_reader(P, ins.operands[addr_operand], ins, self.space)
        self.jidx = np.broadcast_to(np.arange(form.num)[None, :, None], self.lay.rows.shape)
        self.nlanes = 8 * form.num  # lanes 0..nlanes-1 of a warp give one row address each
        self.op = op

    def warps(self, S, m):
        """(warps, every thread of them, the address-supplying threads, their row addresses) for the
        threads in `m`, after reporting warps that only part of reached the instruction."""
        S.check_full_warps(self.op, m, self.op.ins.opcode)
        warps = S.warps_touched(m)
        thr = (warps[:, None] * 32 + np.arange(32)).ravel()
        lanes = (warps[:, None] * 32 + np.arange(self.nlanes)).ravel()
        return warps, thr, lanes, self.get_addr(S)[lanes]


def make_ldmatrix(P, op):
    """The executor of `ldmatrix`: each lane supplies a row address and receives its fragment words as PTX lays
    them out (transposed with .trans). Returns ``fn(S, m)``, which executes it on Machine `S` for the threads
    of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    mx = _MatrixOp(P, op, 1)
    num, lay, space, jidx, nlanes = mx.num, mx.lay, mx.space, mx.jidx, mx.nlanes
    puts = [P.writer(d, T.b32, ins) for d in P.regs_of(ins.operands[0])]

    def ldmatrix(S, m):
        warps, thr, lanes, addr = mx.warps(S, m)
        nw = len(warps)
        tiles = np.zeros((nw * nlanes, 8), dtype=np.uint16)  # row r of matrix j for each warp
        for part in map_access(S, op, space, addr, lanes, 16, what="ldmatrix row read"):
            tiles[part.sel] = gather(S, part, 2, 8)
            if part.space == SHARED:
                shadow_read(S, op, part, 16)
        tiles = tiles.reshape(nw, num, 8, 8)
        halves = tiles[:, jidx, lay.rows, lay.cols].astype(np.uint32)  # (nw, 32, num, 2)
        words = halves[..., 0] | (halves[..., 1] << np.uint32(16))
        keep = m[thr]
        for j, put in enumerate(puts):
            full, mask = spread(S, thr[keep], words[:, :, j].ravel()[keep], np.uint32)
            put(S, full, mask)
    return ldmatrix


def make_stmatrix(P, op):
    """The executor of `stmatrix`: the inverse of `make_ldmatrix`, fragment words to the rows the lanes address.
    Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the Program,
    `op` the Op being built.
    """
    ins = op.ins
    mx = _MatrixOp(P, op, 0)
    num, lay, space, jidx, nlanes = mx.num, mx.lay, mx.space, mx.jidx, mx.nlanes
    readers = [P.reader(r, T.b32, ins) for r in P.regs_of(ins.operands[1])]

    def stmatrix(S, m):
        warps, thr, lanes, addr = mx.warps(S, m)
        nw = len(warps)
        words = np.stack([np.broadcast_to(np.asarray(r(S)), (S.N,))[thr] for r in readers], axis=1)
        words = words.reshape(nw, 32, num).astype(np.uint32)
        halves = np.stack([words & np.uint32(0xFFFF), words >> np.uint32(16)], axis=-1).astype(np.uint16)
        tiles = np.zeros((nw, num, 8, 8), dtype=np.uint16)
        w_idx = np.arange(nw)[:, None, None, None]
        tiles[w_idx, jidx[None], lay.rows[None], lay.cols[None]] = halves
        rows = tiles.reshape(nw * nlanes, 8)
        for part in map_access(S, op, space, addr, lanes, 16, write=True, what="stmatrix row write"):
            if part.space == SHARED:
                shadow_write(S, op, part, 16, pc=op.pc)
            scatter(S, part, 2, rows[part.sel])
    return stmatrix
