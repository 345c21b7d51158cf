"""Epilogue: accumulators -> C (s32, row-major M x N), masked at ragged edges.

An m16n8 accumulator block gives thread (g = lane/4, t = lane%4) the pairs (row g, cols 2t, 2t+1)
and (row g+8, same cols).  When N is even each pair is one aligned 8-byte store (st.global.v2);
when N is odd a pair may straddle an 8-byte boundary, so those kernels store single values
(the schedule's `c_vector`; `run` picks the variant from N).  Rows past M are skipped with a
branch per row, columns past N with a predicate per store.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...isa import types as T
from . import emit as E


@dataclass(frozen=True)
class GemmOutput:
    """What an epilogue gets besides the accumulators: where this thread's C elements go.

    schedule: the GemmSchedule; c: the u64 address of C (the kernel's `c` parameter); m, n: u32
    registers of the problem's rows and columns; row0, col0: u32 registers of the thread's origin
    in C, so `AccumulatorTile.elements()` register r with offsets (dr, dc) holds
    C[row0 + dr, col0 + dc].  Elements with row >= m or col >= n lie past the matrix.
    """

    schedule: object
    c: object
    m: object
    n: object
    row0: object
    col0: object


def store_c(k, acc, out: GemmOutput) -> None:
    """The default epilogue: store the s32 accumulators to C, masked at ragged edges (`store_tile`
    with the schedule's `c_vector`)."""
    store_tile(k, acc, c_ptr=out.c, m=out.m, n=out.n, row0=out.row0, col0=out.col0, vector=out.schedule.c_vector)



def scale_back(k, acc, shift: int) -> None:
    """Undo the scaled unpacking: every accumulator holds (1 << shift) * C exactly."""
    E.shr_s32_in_place(k, [r for row in acc for v in row for r in v], shift)


def store_tile(k, acc, *, c_ptr, m, n, row0, col0, vector: int = 2):
    """Store acc[i][j] (an `AccumulatorTile` or nested lists of Vecs) (m16 block i, n8 block j) at C[row0 + 16i + {g, g+8}, col0 + 8j + {2t, 2t+1}].

    row0/col0: u32 registers of this thread's first row (... + g) and column (... + 2t).
    vector=2 stores each pair with one st.global.v2 (needs N even: rows then start 8-byte
    aligned); vector=1 stores every value alone (any N).
    """
    mi, nj = len(acc), len(acc[0])
    rowrem = k.sub(m, row0, type=T.s32)
    colrem = k.sub(n, col0, type=T.s32)
    # byte address of C[row0, col0] (64-bit: M*N may exceed 2**32) and the step of eight rows
    base = k.add(k.shl(k.mul(row0, n, mode="wide"), 2), c_ptr)
    base = k.add(base, k.mul(col0, 4, mode="wide"), dst=base)
    down8 = k.mul(n, 32, mode="wide")
    col_ok = [k.setp("gt", colrem, 8 * j, type=T.s32) for j in range(nj)]
    if vector == 2:
        # N even: col0 + 8j is even, so "col < N" implies "col + 1 < N" and the pair is aligned
        _rows(k, acc, mi, nj, base, down8, rowrem,
              lambda ptr, j, pair: E.st_global_b32(k, ptr, 32 * j, pair, col_ok[j]))
        return
    col_ok1 = [k.setp("gt", colrem, 8 * j + 1, type=T.s32) for j in range(nj)]

    def scalar(ptr, j, pair):
        E.st_global_b32(k, ptr, 32 * j, pair[:1], col_ok[j])
        E.st_global_b32(k, ptr, 32 * j + 4, pair[1:], col_ok1[j])
    _rows(k, acc, mi, nj, base, down8, rowrem, scalar)


def _rows(k, acc, mi, nj, base, down8, rowrem, store):
    ptr = base
    for i in range(mi):
        for h in range(2):
            r = 16 * i + 8 * h
            if r:
                ptr = k.add(ptr, down8)
            with k.if_(k.setp("gt", rowrem, r, type=T.s32)):
                for j in range(nj):
                    v = acc[i][j]
                    store(ptr, j, [v[2 * h], v[2 * h + 1]])
