"""Split-K for the Hopper GEMM: choosing the split count and the deterministic reduction kernel.

A skinny problem (few C tiles) leaves most SMs idle; splitting K over S work units per tile fills
them.  Each split writes its partial C to slice s of a workspace W [S, M, N]; `splitk_reduce`
then adds the S slices in order 0, 1, ..., S-1 for every element, so the result is the same on
every run (bit-identical for f32 too; exact for s32).
"""

from __future__ import annotations

import functools

from ...isa import types as T

_PTXFORGE_INTERNAL = True

#: threads per CTA of the reduction
REDUCE_THREADS = 256


def nonempty_splits(ktiles: int, splits: int) -> int:
    """The split count a launch uses for `splits` asked over `ktiles` k-stages: each split takes
    ceil(ktiles / splits) stages, so a count whose last splits would be empty is lowered."""
    kper = -(-ktiles // max(1, int(splits)))
    return -(-ktiles // kper)


#: the least bytes one tile's k-stages must bring in (TMA, both operands) before K is split: below it the
#: second launch (the reduction) costs more than the idle SMs it fills give back.  On the H200, back to back:
#: 16 x 4096 x 4096 int4 (0.2 MB a tile) 6.4 us whole against 14.7 split in two, int8 7.2 against 15.4;
#: 16 x 4096 x 14336 int4 (0.7 MB) 14.4 against 15.1, int8 (1.4 MB) 19.9 against 19.7.
MIN_SPLIT_TILE_BYTES = 1 << 20


def choose_splits(tiles: int, ktiles: int, sms: int, max_splits: int = 8, tile_bytes: int | None = None) -> int:
    """Splits so that tiles x splits about fills the SMs, every split non-empty (1: no split).  `tile_bytes`:
    what one tile streams over the whole K; under MIN_SPLIT_TILE_BYTES K stays whole."""
    if tiles * 2 > sms or ktiles < 2 or (tile_bytes is not None and tile_bytes < MIN_SPLIT_TILE_BYTES):
        return 1
    return nonempty_splits(ktiles, max(1, min(max_splits, ktiles, sms // tiles)))


def auto_splits(cfg, m: int, n: int, k: int, sms: int) -> int:
    """The K splits a launch of HopperGemm `cfg` takes by itself for an M x N x K problem on `sms` SMs:
    `choose_splits` over its work units (whole clusters; M and N exchanged by swap_ab, as the kernel sees
    them), each tile's bytes counted over the whole K."""
    km, kn = (n, m) if cfg.swap_ab else (m, n)
    ktiles = cfg.tile_counts(km, kn, k)[2]
    return choose_splits(cfg.cluster_tiles(km, kn), ktiles, sms // cfg.cluster_size,
                         tile_bytes=ktiles * cfg.stage_bytes)


def emit_reduce(c_type: str):
    """Kernel `splitk_reduce_<t>(w, c, count, splits)`: c[i] = sum over s of w[s * count + i], in order."""
    from ...builder import KernelBuilder
    t = T.lookup(c_type)
    k = KernelBuilder(f"splitk_reduce_{t.name}", target="sm_90", maxntid=REDUCE_THREADS)
    w = k.param_ptr("w", t)
    c = k.param_ptr("c", t)
    count = k.param_value("count", T.u32)
    splits = k.param_value("splits", T.u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, count, type=T.u32)):
        stride = k.mul(count, 4, type=T.u32, mode="wide")
        p = k.mad(i, 4, w, mode="wide", type=T.u32)
        acc = k.ld(p, type=t)
        with k.for_range(1, splits):
            k.add(p, stride, dst=p, type=T.u64)
            k.add(acc, k.ld(p, type=t), dst=acc, type=t)
        k.st(k.mad(i, 4, c, mode="wide", type=T.u32), acc, type=t)
    return k


@functools.lru_cache(maxsize=4)
def reduce_module(c_type: str):
    """The Module of the reduction for C type `c_type` ('s32' or 'f32')."""
    return emit_reduce(c_type).module()
