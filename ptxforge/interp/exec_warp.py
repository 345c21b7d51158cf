"""Warp-level exchange and votes: shfl.sync, vote.sync, redux.sync, match.sync, elect.sync, activemask.

Every lane named in a member mask must execute the instruction together with the lane (the
.sync contract); a shuffle that reads a lane which did not execute it is reported, since its
value is undefined on hardware.  vote, redux and match compute, for each lane, over the
executing lanes of that lane's own member mask (`_members`).
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.operands import PairDst
from .exec_sync import check_members
from .values import view_dtype

_PTXFORGE_INTERNAL = True


def _mask_reader(P, op, ins):
    return P.reader(op, T.b32, ins)


def make_shfl(P, op):
    """The executor of `shfl.sync` (up, down, bfly, idx with clamp and segment mask); reading an inactive or
    non-member lane is a "collective" finding. Returns ``fn(S, m)``, which executes it on Machine `S` for the
    threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    mode = ins.info.mode
    dst = ins.operands[0]
    put = P.writer(dst.reg if isinstance(dst, PairDst) else dst, T.b32, ins)
    put_p = P.writer(dst.pred, T.pred, ins) if isinstance(dst, PairDst) else None
    ra = P.reader(ins.operands[1], T.b32, ins)
    rb = P.reader(ins.operands[2], T.u32, ins)
    rc = P.reader(ins.operands[3], T.u32, ins)
    rmask = _mask_reader(P, ins.operands[4], ins)

    def shfl(S, m):
        N = S.N
        check_members(S, op, m, rmask(S), "shfl.sync")
        a = np.broadcast_to(np.asarray(ra(S)), (N,))
        lane = S.laneid.astype(np.int64)
        b = np.broadcast_to(np.asarray(rb(S)).astype(np.int64), (N,)) & 0x1F
        c = np.broadcast_to(np.asarray(rc(S)).astype(np.int64), (N,))
        cval = c & 0x1F
        seg = (c >> 8) & 0x1F
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - b
            ok = j >= max_lane
        elif mode == "down":
            j = lane + b
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            ok = j <= max_lane
        else:
            j = min_lane | (b & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = np.arange(N) - lane + j
        inactive = m & ~m[src]
        if inactive.any():
            t = int(np.flatnonzero(inactive)[0])
            S.report("collective", f"shfl.sync.{mode} in {S.warp_of(t)}: lanes read lanes that did not execute the "
                     f"shuffle (lane {int(lane[t])} reads lane {int(j[t])}); the value is undefined",
                     op, np.flatnonzero(inactive))
        put(S, a[src], m)
        if put_p is not None:
            put_p(S, ok, m)
    return shfl


def _per_warp(m):
    return m.reshape(-1, 32)


_LANE_BITS = np.arange(32, dtype=np.uint64)
_WEIGHTS = np.uint64(1) << _LANE_BITS


def _members(S, op, m, rmask, what):
    """The member masks of a warp-collective instruction, read and checked (`check_members`: each lane executing it
    is in its own mask, and every lane a mask names executes it with it), as booleans (warps, lane, member):
    whether `member` executes the instruction and is in `lane`'s member mask.  Each lane computes over its own
    row, so lanes that split a warp by their masks (the tiles of a thread_block_tile) each see their own group."""
    masks = np.broadcast_to(np.asarray(rmask(S)).astype(np.uint64), (S.N,))
    check_members(S, op, m, masks, what)
    inmask = ((masks.reshape(-1, 32)[:, :, None] >> _LANE_BITS) & np.uint64(1)).astype(bool)
    return inmask & _per_warp(m)[:, None, :]


def make_vote(P, op):
    """The executor of `vote.sync` all/any/uni/ballot over the member mask. Returns ``fn(S, m)``, which executes
    it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    mode = ins.mods[0]
    rp = P.pred_reader(ins.operands[1], ins)
    rmask = _mask_reader(P, ins.operands[2], ins)
    put = P.writer(ins.operands[0], T.b32 if mode == "ballot" else T.pred, ins)

    def vote(S, m):
        voters = _members(S, op, m, rmask, f"vote.sync.{mode}")  # (warps, lane, voter)
        p = np.broadcast_to(rp(S), (S.N,))
        pv = _per_warp(p)[:, None, :]
        if mode == "ballot":
            bits = ((voters & pv) * _WEIGHTS).sum(axis=2).astype(np.uint32)
            put(S, bits.ravel(), m)
            return
        if mode == "all":
            r = ~(voters & ~pv).any(axis=2)
        elif mode == "any":
            r = (voters & pv).any(axis=2)
        else:  # uni
            r = ~((voters & pv).any(axis=2) & (voters & ~pv).any(axis=2))
        put(S, r.ravel(), m)
    return vote


def make_redux(P, op):
    """The executor of `redux.sync` add/min/max/and/or/xor: each lane reduces over the executing lanes of its own
    member mask. Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`; `P` is the
    Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    opname = ins.mods[0]
    ra = P.reader(ins.operands[1], t, ins)
    rmask = _mask_reader(P, ins.operands[2], ins)
    put = P.writer(ins.operands[0], t, ins)
    dt = view_dtype(t)

    def redux(S, m):
        members = _members(S, op, m, rmask, f"redux.sync.{opname}")  # (warps, lane, member)
        a = np.broadcast_to(np.asarray(ra(S)), (S.N,)).reshape(-1, 32)[:, None, :]
        if opname == "add":
            r = np.where(members, a.astype(np.int64), 0).sum(axis=2)
            r = (r & 0xFFFFFFFF).astype(np.uint32).view(dt)
        elif opname in ("min", "max"):
            info = np.iinfo(dt)
            fill = info.max if opname == "min" else info.min
            f = np.min if opname == "min" else np.max
            r = f(np.where(members, a, dt.type(fill)), axis=2)
        else:
            ident = {"and": dt.type(0xFFFFFFFF), "or": dt.type(0), "xor": dt.type(0)}[opname]
            uf = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[opname]
            r = uf.reduce(np.where(members, a, ident), axis=2)
        put(S, r.ravel(), m)
    return redux


def make_elect(P, op):
    """The executor of `elect.sync`: each lane's leader is the lowest executing lane of its member mask (d), and p
    is true in the leader. Returns ``fn(S, m)``, which executes it on Machine `S` for the threads of mask `m`;
    `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    dst = ins.operands[0]
    put_d = P.writer(dst.reg, T.b32, ins) if isinstance(dst, PairDst) else None
    put_p = P.writer(dst.pred, T.pred, ins)
    rmask = _mask_reader(P, ins.operands[1], ins)

    def elect(S, m):
        members = _members(S, op, m, rmask, "elect.sync")
        lead = np.argmax(members, axis=2).ravel()  # the lowest executing lane of each lane's mask
        if put_d is not None:
            put_d(S, lead.astype(np.uint32), m)
        put_p(S, S.laneid == lead, m)
    return elect


def make_match(P, op):
    """The executor of `match.sync`; each lane compares over the executing lanes of its own member mask.
    match.any: the mask of those lanes holding the lane's value; match.all: the mask of those lanes when they all
    hold one value (and p true), else 0 (p false). Returns ``fn(S, m)``, which executes it on Machine `S` for the
    threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    t = ins.type
    mode = ins.mods[0]
    dst = ins.operands[0]
    put = P.writer(dst.reg if isinstance(dst, PairDst) else dst, T.b32, ins)
    put_p = P.writer(dst.pred, T.pred, ins) if isinstance(dst, PairDst) else None
    ra = P.reader(ins.operands[1], T.lookup(f"u{t.bits}"), ins)
    rmask = _mask_reader(P, ins.operands[2], ins)

    def match(S, m):
        members = _members(S, op, m, rmask, f"match.{mode}.sync")  # (warps, lane, member)
        a = np.broadcast_to(np.asarray(ra(S)), (S.N,)).reshape(-1, 32)
        same = (a[:, :, None] == a[:, None, :]) & members
        anym = (same * _WEIGHTS).sum(axis=2).astype(np.uint32)
        if mode == "any":
            put(S, anym.ravel(), m)
            return
        full = (members * _WEIGHTS).sum(axis=2).astype(np.uint32)
        agree = anym == full
        put(S, np.where(agree, full, np.uint32(0)).astype(np.uint32).ravel(), m)
        if put_p is not None:
            put_p(S, agree.ravel(), m)
    return match


def make_movmatrix(P, op):
    """movmatrix: lane t holds row t//4, columns 2(t%4) and 2(t%4)+1 (low half first) of an 8x8 b16
    matrix; afterwards it holds those positions of the transposed matrix."""
    ins = op.ins
    ra = P.reader(ins.operands[1], T.u32, ins)
    put = P.writer(ins.operands[0], T.b32, ins)
    lane = np.arange(32)
    # element (r, c) of the source sits in lane 4r + c//2, half c%2
    src_lane_lo = 4 * (2 * (lane % 4)) + lane // 4 // 2
    src_half_lo = (lane // 4) % 2
    src_lane_hi = 4 * (2 * (lane % 4) + 1) + lane // 4 // 2

    def movmatrix(S, m):
        check_members(S, op, m, np.full(S.N, 0xFFFFFFFF, dtype=np.uint64), "movmatrix")
        a = np.broadcast_to(np.asarray(ra(S)), (S.N,)).astype(np.uint32).reshape(-1, 32)
        sh = (src_half_lo * 16).astype(np.uint32)
        lo = (a[:, src_lane_lo] >> sh) & np.uint32(0xFFFF)
        hi = (a[:, src_lane_hi] >> sh) & np.uint32(0xFFFF)
        put(S, (lo | (hi << np.uint32(16))).ravel(), m)
    return movmatrix


def make_activemask(P, op):
    """The executor of `activemask`: the mask of the lanes executing it, per warp. Returns ``fn(S, m)``, which
    executes it on Machine `S` for the threads of mask `m`; `P` is the Program, `op` the Op being built.
    """
    ins = op.ins
    put = P.writer(ins.operands[0], T.b32, ins)

    def activemask(S, m):
        bits = (_per_warp(m) * _WEIGHTS).sum(axis=1).astype(np.uint32)
        put(S, np.repeat(bits, 32), m)
    return activemask
