"""Choosing GEMM configurations: a rule per problem shape, and the candidate space for sweeps.

The rule aims at the H200-class parts (132 SMs) and holds for the others: keep at least about
one wave of CTAs busy, prefer the largest tiles that do (they read the fewest bytes per
operation), and give the pipeline enough bytes in flight to cover memory latency.
"""

from __future__ import annotations

import itertools

from ...isa.targets import Target
from .config import SMEM_LAYOUTS, operand_bits

# errors about the caller's parameters and arrays name the caller's line, not this file's
_PTXFORGE_INTERNAL = True


#: (block_m, block_n, warps_m, warps_n), largest first: warp tiles of 64x64 where the block allows.
TILES = (
    (256, 128, 4, 2),
    (128, 256, 2, 4),
    (128, 128, 2, 2),
    (128, 64, 2, 2),
    (64, 128, 2, 2),
    (64, 64, 2, 2),
)


#: What choose_config tries for large problems, in order: the first that fills about one wave of CTAs.
PREFERRED = ((128, 128, 2, 2), (128, 64, 2, 2), (64, 64, 2, 2))


def _row_bytes(block_k: int, bits: int) -> int:
    return block_k * bits // 8


def _fit_stages(block_m, block_n, block_k, bits, target, want, least=2, layout="swizzle") -> int:
    lim = target.limits.shared_per_cta
    pad = 16 if layout == "padded" else 0
    per_stage = (block_m + block_n) * (_row_bytes(block_k, bits) + pad)
    return max(least, min(want, lim // per_stage))


#: On sm_90+, problems of at most this many rows get `pdl=True`: their launches are short, and overlapping each
#: launch with the end of the one ahead of it pays (H200, M = 32, N = K = 8192, back-to-back calls over changing
#: weights: 13.9 us -> 12.5 us; asking L2 for each B row's first bytes before the wait did not help: 12.6 us with
#: 512 bytes, 14.4 us with 2048).  At M = 64 it cost (19.6 us -> 25.0 us): two tile rows make 256 CTAs, three fit
#: an SM, and the next launch's CTAs, placed early beside the running ones, leave the SMs unevenly loaded.
PDL_MAX_M = 32


def choose_config(m: int, n: int, k: int, target: Target, operand: str = "s4", path: str | None = None) -> dict:
    """Schedule parameters for an M x N x K problem: the tiles (`choose_tiles`) and, for skinny problems on
    sm_90+, a programmatic dependent launch (`PDL_MAX_M`)."""
    params = choose_tiles(m, n, k, target, operand, path)
    if target.sm >= 90 and m <= PDL_MAX_M:
        params["pdl"] = True
    return params


def choose_tiles(m: int, n: int, k: int, target: Target, operand: str = "s4", path: str | None = None) -> dict:
    """Tile parameters for an M x N x K problem (see the module docstring).

    A native 4-bit path on a target that emulates it gets 64x32 warp tiles: the emulation
    routine needs registers of its own, and 64x64 tiles would spill.
    """
    bits = operand_bits(operand)
    emulated = path in ("native_s4", "native_u4") and not target.mma_s4_native
    sms = target.limits.sm_count or 132
    row_bytes = k * bits // 8
    # k-tiles of 128 bytes per row when K is long enough to fill a few of them, else 64 or 32
    tile_bytes = 128 if row_bytes >= 512 else 64 if row_bytes >= 128 else 32
    block_k = tile_bytes * 8 // bits
    if m <= 64:
        # skinny: the whole M in one tile row; many narrow column tiles keep every SM streaming B
        block_m = 32 if m > 16 else 16
        # 16-column warp tiles: four warps per CTA keep more copies in flight per SM (H200, M=32,
        # N=K=8192: 32x64 with 4 warps and 4 stages ran 267 TOPS, with 2 warps and 6 stages 196)
        block_n = 64 if -(-n // 64) >= sms * 3 // 4 else 32
        warps_n = block_n // 16
        # k-tiles of 256 bytes per row when K is long: half the barriers per byte of B, and each row
        # read in 256-byte pieces (H200, M=32, N=K=8192: 13.8 us against 14.6 for 128-byte k-tiles
        # with 4 stages; 3 stages of 256 bytes beat 4 and 6)
        skinny_k = bits == 4 and row_bytes >= 2048 and not emulated
        if skinny_k:
            block_k = 256 * 8 // bits
        return dict(block_m=block_m, block_n=block_n, block_k=block_k, warps_m=1, warps_n=warps_n,
                    stages=_fit_stages(block_m, block_n, block_k, bits, target, 3 if skinny_k else 4),
                    operand=operand, raster_group=1)
    if m <= 128 and bits == 4 and not emulated and -(-m // 64) * -(-n // 64) >= 2 * sms * 9 // 10:
        # decode-sized M: 64x64 tiles give two CTAs per SM where 128x64 gives one (H200, M=128,
        # N=K=8192: 27.7 us against 29.5 for 128x64; split-K measured slower, see splitk_space)
        return dict(block_m=64, block_n=64, block_k=block_k, warps_m=2, warps_n=2,
                    stages=_fit_stages(64, 64, block_k, bits, target, 3), operand=operand, raster_group=1)
    tiles_by_size = ((128, 64, 2, 2), (64, 64, 2, 2)) if emulated else PREFERRED
    chosen = tiles_by_size[-1]
    for t in tiles_by_size:
        tiles = -(-m // t[0]) * -(-n // t[1])
        if tiles >= sms * 9 // 10:
            chosen = t
            break
    bm, bn, wm, wn = chosen
    # 3 stages of 128-byte rows let two 128x128 CTAs share an SM; on the H200 that beat every
    # 256-thread tile (8192^3: 901 TOPS against 855 for 256x128 with 4 stages)
    return dict(block_m=bm, block_n=bn, block_k=block_k, warps_m=wm, warps_n=wn,
                stages=_fit_stages(bm, bn, block_k, bits, target, 3), operand=operand,
                raster_group=8 if -(-m // bm) * -(-n // bn) > 2 * sms else 1)


def sweep_space(m: int, n: int, k: int, target: Target, operand: str = "s4", *, quick: bool = False):
    """Candidate parameter dicts for tuning one shape (the rule's choice first)."""
    bits = operand_bits(operand)
    base = choose_config(m, n, k, target, operand)
    out = [base]
    tiles = list(TILES) + [(32, 64, 1, 2), (32, 64, 1, 4), (32, 32, 1, 2), (32, 32, 1, 1), (16, 64, 1, 4),
                           (32, 128, 1, 4), (64, 64, 1, 2)]
    kstep = 256 // bits
    block_ks = [kstep * f for f in (2, 4, 8)] if not quick else [kstep * 4]
    stages_opts = (3, 4, 6) if not quick else (3, 4)
    layouts = SMEM_LAYOUTS if not quick else ("swizzle",)
    for (bm, bn, wm, wn), bk, st, lay in itertools.product(tiles, block_ks, stages_opts, layouts):
        if (bm > 64 and m <= 64) or -(-m // bm) * -(-n // bn) < 16:
            continue
        cand = dict(block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=wn, stages=st, smem_layout=lay,
                    operand=operand, raster_group=base.get("raster_group", 8))
        per_stage = (bm + bn) * (bk * bits // 8 + (16 if lay == "padded" else 0))
        if st * per_stage > target.limits.shared_per_cta:
            continue
        if cand not in out:
            out.append(cand)
    return out


#: Skinny tiles (block_m, block_n, warps_m, warps_n) the skinny sweep tries, by the largest M they serve.
SKINNY_TILES = {
    32: ((32, 64, 1, 4), (32, 128, 1, 4), (32, 128, 1, 8)),
    128: ((64, 64, 2, 2), (128, 64, 2, 2), (64, 128, 2, 2)),
    256: ((128, 64, 2, 2), (128, 128, 2, 2)),
}


def splitk_space(m: int, n: int, k: int, target: Target, operand: str = "s4") -> list:
    """Candidate parameter dicts for a skinny problem (M <= 256), the rule's choice first.

    Tiles x k-tile bytes per row x stages x the cp.async L2 prefetch hint x splits.  The first H200
    sweep (bench/results/skinny_h200.md) found split-K with every thread's membar.gl slower at
    every M and 256-byte k-tiles best at M = 32; this space follows up: 512-byte k-tiles, the
    `.L2::256B` hint, and split-K only with the leader handshake (splits 2 and 4).  Every candidate
    fits shared memory and leaves each split at least two k-tiles.
    """
    bits = operand_bits(operand)
    base = choose_config(m, n, k, target, operand)
    out = [base]
    tiles = next(v for lim, v in sorted(SKINNY_TILES.items()) if m <= lim or lim == 256)
    row_bytes = k * bits // 8
    kbytes = (256, 512) if m <= 64 else (128, 256)
    stage_opts = (3, 4) if m <= 64 else (3,)
    for (bm, bn, wm, wn) in tiles:
        for kb in kbytes:
            bk = kb * 8 // bits
            for st in stage_opts:
                if (bm + bn) * kb * st > target.limits.shared_per_cta:
                    continue
                for pf in (None, 256):
                    for sp in (1, 2, 4):
                        if sp > 1 and -(-row_bytes // kb) < 2 * sp:
                            continue
                        cand = dict(block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=wn, stages=st,
                                    operand=operand, raster_group=1, splits=sp, l2_prefetch=pf,
                                    splitk_sync="leader" if sp > 1 else "all")
                        if cand not in out:
                            out.append(cand)
    return out
