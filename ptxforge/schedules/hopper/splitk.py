"""Split-K for the Hopper GEMM: choosing the split count and the two deterministic reductions.

A skinny problem (few C tiles) leaves most SMs idle; splitting K over S work units per tile fills
them.  The partial sums meet in one of two ways (`HopperGemm.split_reduce`), both adding the S
partials of every element in the order 0, 1, ..., S-1, so the result is the same on every run
(bit-identical for f32 too; exact for s32):

* 'kernel' (`emit_fixup`, in the GEMM's own launch): each unit writes its tile's partial sums to a
  workspace in the consumers' register order, counts itself in at the tile's counter, and the unit
  that counts last adds the S partials and stores C through the kernel's epilogue;
* 'launch' (`emit_reduce`, a second launch): each split writes its partial C to slice s of a
  workspace W [S, M, N], and `splitk_reduce` adds the slices element by element.
"""

from __future__ import annotations

import functools

from ...errors import ValidationError
from ...isa import types as T
from ...isa.operands import Addr

_PTXFORGE_INTERNAL = True
_PTXFORGE_EMITTER = True  # its instructions name its lines (errors.emitter_locations)

#: threads per CTA of the reduction
REDUCE_THREADS = 256


def check_splits(splits, *, auto: bool = True):
    """`splits` as a launch takes it: an int >= 1 (a numpy integer becomes an int), or None where `auto` (the
    launch chooses); anything else (0, a bool, a float, a string) is a ValidationError."""
    if splits is None and auto:
        return None
    if not T.is_integer(splits) or splits < 1:
        raise ValidationError("splits must be an int >= 1 (K split that many ways)"
                              + (", or None to let the launch choose" if auto else "") + f", got {splits!r}")
    return int(splits)


def nonempty_splits(ktiles: int, splits: int) -> int:
    """The split count a launch uses for `splits` asked over `ktiles` k-stages: each split takes
    ceil(ktiles / splits) stages, so a count whose last splits would be empty is lowered."""
    kper = -(-ktiles // max(1, int(splits)))
    return -(-ktiles // kper)


#: the least bytes one tile's k-stages must bring in (TMA, both operands) before K is split, per reduction
#: (`HopperGemm.split_reduce`): below it the reduction costs more than the idle SMs it fills give back.  On the
#: H200, through run() back to back: with a second launch ('launch'), 16 x 4096 x 4096 int4 (0.2 MB a tile)
#: 6.4 us whole against 14.7 split in two, int8 7.2 against 15.4, 16 x 4096 x 14336 int4 (0.7 MB) 14.4 against
#: 15.1, int8 (1.4 MB) 19.9 against 19.7; in the kernel ('kernel', one launch; `bench/splitk_bench.py`),
#: 16 x 4096 x 4096 int4 (0.2 MB) 9.2 whole and 9.2 in two, int8 (0.4 MB) 9.2 and 9.2, bf16 (0.8 MB) 12.3
#: and 11.1, 16 x 4096 x 14336 int4 (0.7 MB) 14.4 and 11.5, 256 x 4096 x 4096 int4 (0.5 MB) 16.1 and 14.4.
MIN_SPLIT_TILE_BYTES = {"kernel": 256 << 10, "launch": 1 << 20}


def choose_splits(tiles: int, ktiles: int, sms: int, max_splits: int = 8, tile_bytes: int | None = None,
                  reduce: str = "kernel") -> int:
    """Splits so that tiles x splits about fills the SMs, every split non-empty (1: no split).  `tile_bytes`:
    what one tile streams over the whole K; under MIN_SPLIT_TILE_BYTES[reduce] K stays whole."""
    if tiles * 2 > sms or ktiles < 2 or (tile_bytes is not None and tile_bytes < MIN_SPLIT_TILE_BYTES[reduce]):
        return 1
    return nonempty_splits(ktiles, max(1, min(max_splits, ktiles, sms // tiles)))


def auto_splits(cfg, m: int, n: int, k: int, sms: int) -> int:
    """The K splits a launch of HopperGemm `cfg` takes by itself for an M x N x K problem on `sms` SMs:
    `choose_splits` over its work units (whole clusters; M and N exchanged by swap_ab, as the kernel sees
    them), each tile's bytes counted over the whole K, against the threshold of its reduction."""
    km, kn = (n, m) if cfg.swap_ab else (m, n)
    ktiles = cfg.tile_counts(km, kn, k)[2]
    return choose_splits(cfg.cluster_tiles(km, kn), ktiles, sms // cfg.cluster_size,
                         tile_bytes=ktiles * cfg.stage_bytes, reduce=cfg.split_reduce)


def check_reduce(cfg, splits: int, c_elements: int = 0) -> None:
    """Refuse a K split the configuration's reduction cannot add: 16-bit C (c16) is rounded once from the whole
    f32 sum, which the in-kernel reduction makes and a second launch, adding rounded partial C, could not; and
    the second launch counts C's `c_elements` (M x N) in 32 bits."""
    if splits > 1 and cfg.c16 and not cfg.reduces_in_kernel:
        raise ValidationError("c16 (16-bit C) rounds the whole sum once: with split_reduce='launch' K cannot be "
                              "split; use split_reduce='kernel' or f32 C")
    if splits > 1 and not cfg.reduces_in_kernel and c_elements >= 1 << 32:
        raise ValidationError(f"C of {c_elements} elements: the reduction launch of split_reduce='launch' counts them "
                              "in 32 bits (< 2^32); use split_reduce='kernel' or splits=1")


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


#: the named barrier of the in-kernel reduction (ids 0..8 serve the ring, the widening and the hand-overs)
FIXUP_BARRIER = 15
#: accumulator registers summed per pass over the splits (bounds the registers the loads take)
FIXUP_CHUNK = 32


class SplitFixup:
    """What the in-kernel reduction of one kernel reads: the `ws` and `counters` parameters, the shared verdict
    words (an Addr), the split count, the tile rows of the counter grid, and the storing thread's index `ctid` among
    the `threads` that store a tile (their accumulator registers together hold it)."""

    def __init__(self, ws, counters, flag, splits, tiles_n, tiles, ctid, threads: int):
        self.ws, self.counters, self.flag, self.splits = ws, counters, flag, splits
        self.tiles_n, self.tiles, self.ctid, self.threads = tiles_n, tiles, ctid, threads


def workspace_bytes(cfg, m: int, n: int, splits: int) -> tuple:
    """(workspace bytes, counters) of an in-kernel reduction over the kernel's M x N: every split's partial sums
    of every tile (whole tiles, a cluster's pairs included), and one 32-bit counter per tile."""
    tiles = cfg.cluster_tiles(m, n) * cfg.cluster_size
    return splits * tiles * cfg.block_m * cfg.block_n * 4, tiles


def emit_fixup(k, fix: SplitFixup, accs, split, tm, tn):
    """The in-kernel reduction of a unit's sums (`accs`, this thread's accumulator registers) for tile (tm, tn):
    returns the .pred under which the epilogue stores C (no split, or this unit counted last; every storing
    thread of the CTA gets the same value).

    Each thread writes its registers, four to a 16-byte store, at ws + (split x tiles + tile) x tile bytes
    + (q x threads + ctid) x 16 (consecutive threads, consecutive bytes); a barrier of the storing threads;
    one thread adds 1 to the tile's counter (`atom.add.acq_rel.gpu`: it releases the CTA's partial sums and
    acquires those of the units counted before it) and, when it counted last, sets the counter back to 0
    for the next launch; a barrier hands its verdict to every thread through the shared flag.  The last
    unit then sums slices 0, 1, ..., S-1 of its tile into its registers (`ld.global.cg`: from the L2, where
    the other SMs' writes are), in passes of FIXUP_CHUNK registers.  The verdict travels through a shared word
    per warp, read by its first lane and passed on with `shfl` (a word read by one thread, so the barrier
    that orders its next write orders every read of it).
    """
    regs = [r for acc in accs for r in acc]
    acc_t = regs[0].type
    nthr = fix.threads
    tile_bytes = len(regs) * 4 * nthr
    last = k.reg(T.pred, "store_c")
    k.setp("eq", fix.splits, 1, type=T.u32, dst=last)
    with k.if_(~last):
        tile = k.mad(tm, fix.tiles_n, tn, type=T.u32)
        unit = k.mad(split, fix.tiles, tile, type=T.u32)
        mine = k.mad(fix.ctid, 16, fix.ws, type=T.u32, mode="wide")
        own = k.mad(unit, tile_bytes, mine, type=T.u32, mode="wide")
        for q in range(len(regs) // 4):
            k.st(Addr(own, q * nthr * 16), regs[4 * q:4 * q + 4], type=acc_t, vec=4)
        k.bar_sync(FIXUP_BARRIER, nthr)
        first = k.setp("eq", fix.ctid, 0, type=T.u32)
        with k.if_(first):
            counter = k.mad(tile, 4, fix.counters, type=T.u32, mode="wide")
            old = k.atom("add", counter, 1, type=T.u32, sem="acq_rel", scope="gpu")
            done = k.setp("eq", old, k.sub(fix.splits, 1, type=T.u32), type=T.u32)
            verdict = k.selp(1, 0, done, type=T.u32)
            for wi in range(nthr // 32):  # a word per storing warp, each read by one lane
                k.st(Addr(fix.flag.base, fix.flag.offset + 4 * wi), verdict, type=T.u32, space="shared")
            k.st(counter, 0, type=T.u32, pred=done)  # the next launch finds it at 0
        k.bar_sync(FIXUP_BARRIER, nthr)
        lane = k.and_(fix.ctid, 31, type=T.b32)
        word = k.reg(T.u32, "verdict")
        k.mov(0, type=T.u32, dst=word)
        with k.if_(k.setp("eq", lane, 0, type=T.u32)):
            at = k.add(fix.flag.base, k.shl(k.shr(fix.ctid, 5, type=T.u32), 2, type=T.b32), type=T.u32)
            k.ld(Addr(at, fix.flag.offset), type=T.u32, space="shared", dst=word)
        k.setp("ne", k.shfl("idx", word, 0), 0, type=T.u32, dst=last)
        with k.if_(last):
            first_slice = k.mad(tile, tile_bytes, mine, type=T.u32, mode="wide")
            stride = k.mul(fix.tiles, tile_bytes, type=T.u32, mode="wide")  # bytes of one split's partial sums
            for c0 in range(0, len(regs), FIXUP_CHUNK):
                part = range(c0 // 4, min(len(regs), c0 + FIXUP_CHUNK) // 4)
                for q in part:  # slice 0 straight into the registers (this unit's own sums are in the slices)
                    k.ld(Addr(first_slice, q * nthr * 16), type=acc_t, vec=4, cop="cg", dst=regs[4 * q:4 * q + 4])
                at = k.mov(first_slice, type=T.u64)
                with k.for_range(1, fix.splits, name="split"):
                    k.add(at, stride, type=T.u64, dst=at)
                    for q in part:
                        got = k.ld(Addr(at, q * nthr * 16), type=acc_t, vec=4, cop="cg")
                        for r, x in zip(regs[4 * q:4 * q + 4], got):
                            k.add(r, x, type=acc_t, dst=r)
    return last
