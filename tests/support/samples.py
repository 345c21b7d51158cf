"""Sample kernels that exercise the interpreter end to end, with switches that plant the bugs it
is meant to catch.

`int4_gemm` is a small but complete int4 GEMM (C[M,N] int32 = A[M,K] . B[N,K]^T, packed signed
int4, even k in the low nibble): a 2-stage cp.async pipeline with zero-filled ragged edges,
ldmatrix fragments, and either native m16n8k64.s4 mma or the sm_90 path (nibbles unpacked to
s8, scaled by 16, two m16n8k32.s8 mma per k64 step, shifted back at the end).  It is a test
and benchmark subject for the interpreter, not a tuned schedule.

Planted bugs (`bugs=`): "no_wait" waits for one cp.async group too few (`loosen_wait_group`:
with two stages that is no wait at all), "no_barrier" drops the bar.sync between the wait and
the fragment loads (`drop_bar_sync`), "tail_off_by_one" accepts row M in the copy guard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ptxforge.builder import KernelBuilder
from ptxforge.int4 import unpack_int4
from ptxforge.isa import types as T
from ptxforge.isa.fragments import MATRIX_ROW_BYTES, acc_lane_origin, acc_offset, ldmatrix_tile_origin
from ptxforge.module import Module
from ptxforge.testing.mutants import drop_bar_sync, loosen_wait_group

BUGS = ("no_wait", "no_barrier", "tail_off_by_one")


@dataclass(frozen=True)
class Int4GemmSample:
    """The sample GEMM's tile shape, compute path, target and planted bugs."""

    block_m: int = 64
    block_n: int = 64
    block_k: int = 128  # int4 elements per k-tile (64 bytes per row)
    path: str = "s8"  # "s8": unpack to s8 (sm_90 friendly); "s4": native m16n8k64.s4
    target: str = "sm_80"
    bugs: tuple = ()

    threads = 128  # 4 warps, 2 x 2, each a 32 x 32 warp tile
    stages = 2

    def grid(self, m, n):
        """The launch grid for an M x N output: one CTA per block_m x block_n tile."""
        return (-(-n // self.block_n), -(-m // self.block_m))

    def module(self):
        """The kernel `int4_gemm` (params a, b, c, m, n, k) in a module, with the planted bugs."""
        unknown = set(self.bugs) - set(BUGS)
        if unknown:
            raise ValueError(f"unknown planted bugs {sorted(unknown)}; known: {', '.join(BUGS)}")
        kernel = int4_gemm_kernel(self).finish()
        if "no_wait" in self.bugs:
            kernel = loosen_wait_group(kernel, by=1)
        if "no_barrier" in self.bugs:
            kernel = drop_bar_sync(kernel, nth=0)  # the one between the wait and the ldmatrix loads
        return Module([kernel])

    @staticmethod
    def reference(a_packed, b_packed, k):
        """C = A . B^T in int32 from the packed operands."""
        a = unpack_int4(a_packed, k).astype(np.int64)
        b = unpack_int4(b_packed, k).astype(np.int64)
        return (a @ b.T).astype(np.int32)


def int4_gemm_kernel(cfg: Int4GemmSample) -> KernelBuilder:
    """Build the sample GEMM (without the planted synchronization bugs; see `Int4GemmSample.module`)."""
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    assert (BM, BN) == (64, 64) and BK % 64 == 0
    row_bytes = BK // 2  # bytes of one tile row
    chunks = row_bytes // 16
    a_bytes = BM * row_bytes
    stage_bytes = a_bytes + BN * row_bytes
    bugs = set(cfg.bugs)
    u32, s32, b32 = T.u32, T.s32, T.b32

    k = KernelBuilder("int4_gemm", target=cfg.target, reqntid=cfg.threads)
    A = k.param_ptr("a", T.u8)
    B = k.param_ptr("b", T.u8)
    C = k.param_ptr("c", T.s32)
    M = k.param_value("m", u32)
    N = k.param_value("n", u32)
    K = k.param_value("k", u32)
    smem = k.shared("tiles", cfg.stages * stage_bytes, align=128)

    tid = k.tid()
    lane = k.laneid()
    warp = k.shr(tid, 5)
    wm = k.shr(warp, 1)
    wn = k.and_(warp, 1, type=b32)
    m0 = k.mul(k.ctaid("y"), BM, type=u32)
    n0 = k.mul(k.ctaid("x"), BN, type=u32)
    kb = k.shr(K, 1)  # bytes per matrix row
    ktiles = k.div(k.add(K, BK - 1), BK, type=u32)
    sbase = k.shared_base(smem)

    with k.section("copy plan"):
        # each thread copies `per_thread` 16-byte chunks of A and of B per stage
        per_thread = BM * chunks // cfg.threads
        plan = []
        for i in range(per_thread):
            c = k.add(tid, i * cfg.threads, type=u32)
            row = k.shr(c, chunks.bit_length() - 1)
            col = k.mul(k.and_(c, chunks - 1, type=b32), 16, type=u32)
            soff = k.mad(row, row_bytes, col, type=u32)
            for which, base, rows0, limit in (("a", A, m0, M), ("b", B, n0, N)):
                grow = k.add(rows0, row, type=u32)
                inside = k.setp("le" if "tail_off_by_one" in bugs else "lt", grow, limit)
                goff = k.add(k.mul(grow, kb, mode="wide"), k.cvt(col, "u64"))
                plan.append((which, soff, k.add(base, goff), inside, col))

    def issue(kt, stage_off):
        koff = k.mul(kt, row_bytes, type=u32)
        for which, soff, gaddr, inside, col in plan:
            kcol = k.add(koff, col, type=u32)
            ok = k.setp("lt", kcol, kb, combine=("and", inside))
            nbytes = k.selp(16, 0, ok, type=u32)
            dst = k.add(k.add(sbase, stage_off, type=u32), soff, type=u32)
            if which == "b":
                dst = k.add(dst, a_bytes, type=u32)
            k.cp_async(dst, k.add(gaddr, k.cvt(koff, "u64")), 16, src_size=nbytes)

    g, col2t = acc_lane_origin(lane, ops=k)
    # A: one x4 over 16 rows x 2 chunks, rows first; B: one x4 over two n8 blocks, chunks first
    a_row, a_chunk = ldmatrix_tile_origin(4, lane, row_blocks=2, rows_first=True, ops=k)
    b_row, b_chunk = ldmatrix_tile_origin(4, lane, row_blocks=2, rows_first=False, ops=k)
    a_lane = k.mad(a_row, row_bytes, k.mul(a_chunk, MATRIX_ROW_BYTES, type=u32), type=u32)
    b_lane = k.mad(b_row, row_bytes, k.mul(b_chunk, MATRIX_ROW_BYTES, type=u32), type=u32)
    a_warp = k.mad(wm, 32 * row_bytes, a_lane, type=u32)
    b_warp = k.add(k.mad(wn, 32 * row_bytes, b_lane, type=u32), a_bytes, type=u32)

    acc = [[k.regs(s32, 4, name=f"acc{mi}{ni}_") for ni in range(4)] for mi in range(2)]
    for row_ in acc:
        for v in row_:
            for r in v:
                k.mov(0, dst=r, type=s32)

    with k.section("prologue"):
        issue(k.mov(0, type=u32), k.mov(0, type=u32))
        k.cp_async_commit()

    with k.for_range(0, ktiles, name="kt") as kt:
        nxt = k.add(kt, 1, type=u32)
        more = k.setp("lt", nxt, ktiles)
        stage_next = k.mul(k.and_(nxt, 1, type=b32), stage_bytes, type=u32)
        with k.if_(more):
            issue(nxt, stage_next)
        k.cp_async_commit()
        k.cp_async_wait(1)
        k.bar_sync()
        stage = k.add(sbase, k.mul(k.and_(kt, 1, type=b32), stage_bytes, type=u32), type=u32)
        sa = k.add(stage, a_warp, type=u32)
        sb = k.add(stage, b_warp, type=u32)
        for ks in range(BK // 64):
            afr = [k.ldmatrix(k.add(sa, mi * 16 * row_bytes + ks * 32, type=u32), num=4) for mi in range(2)]
            bfr = []
            for nj in range(2):
                v = k.ldmatrix(k.add(sb, nj * 16 * row_bytes + ks * 32, type=u32), num=4)
                bfr += [(v[0], v[1]), (v[2], v[3])]
            if cfg.path == "s4":
                for mi in range(2):
                    for ni in range(4):
                        k.mma(afr[mi], list(bfr[ni]), acc[mi][ni], shape="m16n8k64", a_type="s4", dst=acc[mi][ni])
                continue
            lo = lambda x: k.and_(k.shl(x, 4), 0xF0F0F0F0, type=b32)  # noqa: E731 - nibble unpack
            hi = lambda x: k.and_(x, 0xF0F0F0F0, type=b32)  # noqa: E731
            a_lo = [[lo(x) for x in afr[mi]] for mi in range(2)]
            a_hi = [[hi(x) for x in afr[mi]] for mi in range(2)]
            b_lo = [[lo(x) for x in bfr[ni]] for ni in range(4)]
            b_hi = [[hi(x) for x in bfr[ni]] for ni in range(4)]
            for mi in range(2):
                for ni in range(4):
                    k.mma(a_lo[mi], b_lo[ni], acc[mi][ni], shape="m16n8k32", a_type="s8", dst=acc[mi][ni])
                    k.mma(a_hi[mi], b_hi[ni], acc[mi][ni], shape="m16n8k32", a_type="s8", dst=acc[mi][ni])
        k.bar_sync()

    with k.section("epilogue"):
        row_w = k.add(m0, k.mad(wm, 32, g, type=u32), type=u32)
        col_w = k.add(n0, k.mad(wn, 32, col2t, type=u32), type=u32)
        for mi in range(2):
            for ni in range(4):
                for r in range(4):
                    val = acc[mi][ni][r]
                    if cfg.path == "s8":
                        val = k.shr(val, 8, type=s32)  # exact: the sum is 256 * D
                    dr, dc = acc_offset(r)
                    row = k.add(row_w, mi * 16 + dr, type=u32)
                    col = k.add(col_w, ni * 8 + dc, type=u32)
                    ok = k.setp("lt", col, N, combine=("and", k.setp("lt", row, M)))
                    off = k.mul(k.mad(row, N, col, type=u32), 4, mode="wide")
                    k.st(k.add(C, off), val, type=s32, pred=ok)
    return k
