"""Hypothesis strategies for split-K GEMM schedules: a legal schedule with a drawn split factor.

    from ptxforge.testing.splitk_strategies import splitk_schedules
    @given(splitk_schedules(max_threads=128))
    def test_it(g): ...

Every schedule passes validation; `splits` is drawn from 1..max_splits over a drawn base
schedule (`gemm_schedules`), so the split-K parts meet every tile, copy width and compute path.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from .gemm_strategies import gemm_schedules


@st.composite
def splitk_schedules(draw, *, max_splits: int = 8, targets=("sm_90",), operands=("s4", "u4", "s8", "u8"),
                     max_acc: int = 32, max_threads: int = 128, allow_emulated: bool = False):
    """A legal Int4Gemm / Int8Gemm with `splits` in 1..max_splits, either split-K handshake and any
    cp.async L2 prefetch hint (see `gemm_schedules` for the rest)."""
    g = draw(gemm_schedules(targets=targets, operands=operands, max_acc=max_acc, max_threads=max_threads,
                            allow_emulated=allow_emulated))
    return dataclasses.replace(g, splits=draw(st.integers(1, max_splits)),
                               splitk_sync=draw(st.sampled_from(["all", "leader"])),
                               l2_prefetch=draw(st.sampled_from([None, 64, 128, 256])))
