"""Hypothesis strategies for the problem shapes a HopperGemm accepts (ptxforge.schedules.hopper).

    @given(hopper_gemm_shapes(cfg))
    def test(shape): m, n, k = shape ...

M and N start at 1 and reach past two tiles (two pairs of tiles with a cluster) so ragged edges,
a cluster partner past the edge and the persistent loop all come up; K is a positive multiple of
what the tensor maps need (16-byte operand rows) and reaches past two stages.  With the TMA-store
epilogue N is a multiple of 4 (8 with 16-bit C): 16-byte rows of C; `check_problem` refuses the rest.
"""

from __future__ import annotations

from hypothesis import strategies as st

_PTXFORGE_INTERNAL = True


@st.composite
def hopper_gemm_shapes(draw, cfg, *, max_m: int | None = None, max_n: int | None = None,
                       max_k: int | None = None):
    """(M, N, K) that `cfg.check_problem` accepts, drawn over ragged sizes up to about two (pairs of) tiles."""
    step = 128 // cfg.bits  # K values per 16 bytes of operand row
    max_m = max_m or 2 * cfg.block_m * cfg.cluster_m + 1
    max_n = max_n or 2 * cfg.block_n * cfg.cluster_n + 1
    max_k = max_k or 2 * cfg.block_k + step
    m = draw(st.integers(1, max_m))
    n_step = 16 // cfg.c_bytes if cfg.epilogue == "tma" else 1
    n = draw(st.integers(1, max(1, max_n // n_step))) * n_step
    k = draw(st.integers(1, max(1, max_k // step))) * step
    return m, n, k
