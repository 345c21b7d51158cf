"""Warp fragments: ldmatrix addresses, nibble unpacking and the mma.sync issue of one k-step.

One k-step reads 32 bytes of every tile row.  For `.row.col` integer mma, A and B are
K-contiguous and a thread's register holds 4 consecutive bytes of one row at byte 4*(lane%4) of
a 16-byte chunk, so one ldmatrix pattern feeds every operand width:

* A (16 rows x 32 B) : ldmatrix.x4, lane l addresses row l%16, chunk l/16
  -> {a0, a1, a2, a3} = m16n8k64 .s4/.u4 A, or m16n8k32 .s8/.u8 A;
* B (16 rows x 32 B = two n8 blocks): ldmatrix.x4, lane l addresses row (l%8) + 8*(l/16),
  chunk (l/8)%2 -> {b0, b1} of the first n8 block, {b2, b3} of the second.

Both lane maps are `ptxforge.isa.fragments.ldmatrix_tile_origin` (rows first for A, chunks first
for B), evaluated on numpy arrays to plan the addresses and emitted on the lane register.

4-bit paths that compute in 8 bits split every fragment register into its low and high
nibbles: the low nibbles of A and B form an s8 fragment over the even k, the high nibbles one
over the odd k, with identical register positions, so two m16n8k32 mmas give the k64 product.
"""

from __future__ import annotations

import numpy as np

from ...isa.fragments import ldmatrix_tile_origin
from . import emit as E
from .addressing import AddressFamily, plan_family
from .config import KSTEP_BYTES, ComputePath


NIBBLE_HI = 0xF0F0F0F0
NIBBLE_LO = 0x0F0F0F0F
NIBBLE_SIGN = 0x08080808


def warp_lane_grid(threads: int, warps_m: int):
    """(warp index along M, warp index along N, lane) of every thread of a CTA, as numpy arrays."""
    tid = np.arange(threads)
    warp, lane = tid // 32, tid % 32
    return warp % warps_m, warp // warps_m, lane


def plan_a_fragments(layout, region, threads, warps_m, warp_m, ksteps) -> AddressFamily:
    """ldmatrix.x4 of A: one access per (k-step, m16 block), in that order."""
    wm, _, lane = warp_lane_grid(threads, warps_m)
    row, byte = ldmatrix_tile_origin(4, lane, row_blocks=2, in_bytes=True)
    rows0 = wm * warp_m + row
    bytes0 = byte
    consts = [(16 * i, KSTEP_BYTES * ks) for ks in range(ksteps) for i in range(warp_m // 16)]
    return plan_family(layout, rows0, bytes0, consts, region)


def plan_b_fragments(layout, region, threads, warps_m, warp_n, ksteps) -> AddressFamily:
    """ldmatrix.x4 of B: one access per (k-step, pair of n8 blocks), in that order."""
    _, wn, lane = warp_lane_grid(threads, warps_m)
    row, byte = ldmatrix_tile_origin(4, lane, row_blocks=2, rows_first=False, in_bytes=True)
    rows0 = wn * warp_n + row
    bytes0 = byte
    consts = [(16 * p, KSTEP_BYTES * ks) for ks in range(ksteps) for p in range(warp_n // 16)]
    return plan_family(layout, rows0, bytes0, consts, region)


def emit_a_lane_origin(k, lane, wm_row):
    """(row0, byte0) registers of the A ldmatrix.x4 pattern: wm_row + lane%16, 16*(lane/16)."""
    row, byte = ldmatrix_tile_origin(4, lane, row_blocks=2, in_bytes=True, ops=k)
    return k.add(wm_row, row), byte


def emit_b_lane_origin(k, lane, wn_row):
    """(row0, byte0) of the B ldmatrix.x4 pattern: wn_row + lane%8 + 8*(lane/16), 16*((lane/8)%2)."""
    row, byte = ldmatrix_tile_origin(4, lane, row_blocks=2, rows_first=False, in_bytes=True, ops=k)
    return k.add(wn_row, row), byte


def load_kstep(k, fam: AddressFamily, bases, ks: int, per_step: int):
    """The ldmatrix.x4 loads of one k-step: Vec of 4 b32 per access."""
    from ...isa.operands import Addr
    out = []
    for i in range(per_step):
        acc = fam.accesses[ks * per_step + i]
        out.append(k.ldmatrix(Addr(bases[acc.base], acc.imm), num=4))
    return out


# ---------------------------------------------------------------- unpacking

def unpack_reg(k, x, how: str):
    """(lo, hi) byte registers from a register x of 8 nibbles; hi is computed in x itself (the
    loaded fragment is dead once split), so each register costs one new register."""
    if how == "scaled":
        # 16*value as s8: the low nibble moved up, the high nibble masked in place
        lo = E.shl(k, x, 4)
        E.and_imm(k, lo, NIBBLE_HI, d=lo)
        hi = E.and_imm(k, x, NIBBLE_HI, d=x)
    elif how == "signext":
        # byte = nibble | 0xF0 where the nibble's sign bit is set; 8*0x1E = 0xF0 never carries
        lo = E.and_imm(k, x, NIBBLE_LO)
        sign = E.and_imm(k, x, NIBBLE_SIGN)
        E.mad_u32(k, sign, 0x1E, lo, d=lo)
        h = E.shr_u32(k, x, 4, d=x)
        E.and_imm(k, h, NIBBLE_LO, d=h)
        E.and_imm(k, h, NIBBLE_SIGN, d=sign)
        hi = E.mad_u32(k, sign, 0x1E, h, d=h)
    elif how == "u4":
        lo = E.and_imm(k, x, NIBBLE_LO)
        E.shr_u32(k, x, 4, d=x)
        hi = E.and_imm(k, x, NIBBLE_LO, d=x)
    else:
        raise ValueError(how)
    return lo, hi


def unpack_frag(k, frag, how):
    """(lo registers, hi registers) of a fragment."""
    pairs = [unpack_reg(k, r, how) for r in frag]
    return [p[0] for p in pairs], [p[1] for p in pairs]


# ---------------------------------------------------------------- the k-step

def compute_kstep(k, path: ComputePath, a_frags, b_frags, acc, issue=None):
    """All mmas of one k-step of the warp tile.

    a_frags: per m16 block a Vec of 4; b_frags: per n8-pair a Vec of 4 (two n8 blocks), as
    `WarpFragments.load` gives them; acc: an `AccumulatorTile` (acc[i][j]: Vec of 4 s32 of m16
    block i, n8 block j), updated in place; issue: an `emit.MmaIssuer` for the path.
    """
    issue = issue or E.MmaIssuer(k, path.mma_shape, path.mma_type)
    if path.unpack is None:
        for p, bf in enumerate(b_frags):
            for h in range(2):
                for i, af in enumerate(a_frags):
                    issue(af, bf[2 * h:2 * h + 2], acc[i][2 * p + h])
        return
    a_un = [unpack_frag(k, af, path.unpack) for af in a_frags]
    for p, bf in enumerate(b_frags):
        b_un = unpack_frag(k, bf, path.unpack)
        # the low-nibble mmas of both n8 blocks first, then the high ones: the two mmas into one
        # accumulator are far apart, so they never wait on each other
        for half in (0, 1):
            for h in range(2):
                for i in range(len(a_frags)):
                    issue(a_un[i][half], b_un[half][2 * h:2 * h + 2], acc[i][2 * p + h])


class WarpFragments:
    """The ldmatrix.x4 fragment loads of one warp tile from a `StageLayout`, their addresses hoisted:
    one u32 base register per group of loads, the rest immediates.

    a, b: the `AddressFamily` of the A loads (per k-step and m16 block) and of the B loads (per
    k-step and pair of n8 blocks); a_bases, b_bases: their base registers in stage 0.
    """

    def __init__(self, a: AddressFamily, b: AddressFamily, a_bases, b_bases, m_blocks: int, n_pairs: int):
        self.a, self.b, self.a_bases, self.b_bases = a, b, a_bases, b_bases
        self.m_blocks, self.n_pairs = m_blocks, n_pairs

    @classmethod
    def setup(cls, k, schedule, stage, *, lane, wm_row, wn_row, smem_base) -> "WarpFragments":
        """Plan the loads of `schedule`'s warp tile and emit their base registers.

        lane: u32 lane index; wm_row, wn_row: the warp tile's first row of A and of B in the CTA
        tile (u32 registers, or the int 0); smem_base: u32 shared address of the pipeline.
        """
        s = schedule
        fa = plan_a_fragments(stage.a, stage.a_offset, s.threads, s.warps_m, s.warp_m, s.ksteps)
        fb = plan_b_fragments(stage.b, stage.b_offset, s.threads, s.warps_m, s.warp_n, s.ksteps)
        a_bases = fa.emit_bases(k, *emit_a_lane_origin(k, lane, wm_row), smem_base, name="sa_ld")
        b_bases = fb.emit_bases(k, *emit_b_lane_origin(k, lane, wn_row), smem_base, name="sb_ld")
        return cls(fa, fb, a_bases, b_bases, s.warp_m // 16, s.warp_n // 16)

    def at_stage(self, k, stage_off) -> tuple:
        """(A base registers, B base registers) of the stage at byte `stage_off` (one add.u32 each)."""
        return [k.add(x, stage_off) for x in self.a_bases], [k.add(x, stage_off) for x in self.b_bases]

    def load(self, k, bases, ks: int) -> tuple:
        """(A fragments, B fragments) of k-step `ks` from `at_stage`'s bases: per m16 block and per
        pair of n8 blocks a Vec of 4 b32 (ldmatrix.sync.aligned.m8n8.x4.shared.b16)."""
        return load_kstep(k, self.a, bases[0], ks, self.m_blocks), load_kstep(k, self.b, bases[1], ks, self.n_pairs)
