"""The configuration each Hopper GEMM problem gets: `DEFAULTS` per operand for large problems, `SKINNY` per
operand and M bound for decode-sized ones, with the measurements on the H200 that chose them beside each
entry (the side-by-side figures: `tuning`'s docstring), and `configured`, which builds one for a shape.
"""

from __future__ import annotations

from ...errors import ValidationError
from ..operands import check_parameters, check_sizes
from .convert import SCALED_K_LIMIT

_PTXFORGE_INTERNAL = True


#: operand -> the configuration every shape gets today (the measurements: tuning.py's docstring)
DEFAULTS = {
    "s8": dict(block_n=256, wg_m=64, consumers=2, stages=4, pdl=True),
    "bf16": dict(block_n=256, wg_m=64, consumers=2, stages=3),
    "f16": dict(block_n=256, wg_m=64, consumers=2, stages=3),
    "s4": dict(block_n=256, wg_m=64, consumers=2, stages=2, block_k_bytes=256, scaled=True, pdl=True,
               widen_ahead=True),
}

#: s4 problems of M <= 32 (decode): the operands swapped (the weights are the wgmma M side, widened in
#: registers; the few rows of A the wgmma N of 32), consumer warpgroups taking the k-stages in turn (two at
#: first, three now: see the end of this comment), 512 K-values per stage; a programmatic dependent launch,
#: as for every skinny configuration here: a launch of 12-35 us gains 1.4-2 us when its start overlaps the
#: end of the one ahead of it; wgmma groups of 8
#: k-steps (12.07 against 12.19 us with 4, 12.44 with 2: six alternating rounds on the H200); a ring of 6
#: (96 KB of weights on their way instead of 64: 11.70-11.81 against 12.00-12.20 us with 4, two runs of five
#: rounds; 8 stages, room made by one widened B buffer per consumer, 12.08); the first 2 k-stages of weights
#: asked of the L2 before griddepcontrol.wait (`early_prefetch`, as in every skinny default: the DRAM works
#: for the next call during the tail of the one ahead): 11.16-11.27 against 11.36-11.53 us in three runs
#: (1 stage: 11.37, 3: 11.24, 6: 11.84, 16: 13.48: a longer prefetch slows the call ahead); three consumer
#: warpgroups taking every third stage (152 registers each, one widened B buffer each: the shared memory of a
#: second is what the third's takes), so that three chains of shared loads, widening and wgmmas hide each
#: other's latencies where two left the schedulers idle two cycles in three: 11.06-11.19 against 11.28-11.42
#: us for two consumers in two runs of seven and nine rounds (bench/results/skinny_hopper/sweep29_*)
SKINNY_S4_32 = dict(block_n=32, wg_m=64, consumers=3, consumer_regs=152, interleave_k=True, stages=6,
                    block_k_bytes=512, swap_ab=True, scaled=True, pdl=True, a_group=8, early_prefetch=2,
                    convert_buffers=1)

#: s4 problems of 32 < M <= 64: operands swapped, 64 rows of A per tile, 512 K-values per stage in a ring of
#: 4; the two consumer warpgroups split every stage (`split_stage`: each widens and multiplies its half) and
#: widen the next stage's B between this stage's wgmma groups (`widen_ahead`), 2 early k-stages:
#: 13.53 us against 14.02 for alternate stages with the early prefetch and 14.56 without (one run; alternate
#: stages with one widened B buffer each, the default before: 14.67-14.95 in two runs of five rounds)
SKINNY_S4_64 = dict(block_n=64, wg_m=64, consumers=2, split_stage=True, widen_ahead=True, stages=4,
                    block_k_bytes=512, swap_ab=True, scaled=True, pdl=True, early_prefetch=2)

#: s8 problems of M <= 32 / 32 < M <= 64: the operands swapped (the weights the wgmma M side, 64 rows per
#: CTA: N / 64 CTAs), one consumer warpgroup, pdl, 4 early k-stages (M = 32: 18.92 us against 19.54 without,
#: 19.24 with 2).  Up to M = 32 stages of 256 K-bytes (two 128-byte boxes of each weight row) in a ring of 9:
#: through run() at N = K = 8192 (bench/splitk_bench.py --overrides, two runs) M = 1 19.0 us against 21.8-21.9
#: for 128-byte stages in a ring of 8 (bf16: 36.5-36.7 against 42.3-42.4), M = 8 18.5-18.7 against 19.2-19.3
#: (bf16 34.4-34.5 against 35.9-36.0), M = 32 18.2-18.3 against 18.5 (bf16 33.6-33.7 against 34.2-34.4); at
#: 16 x 14336 x 4096 int8 17.7-17.8 against 17.2-17.4 (bf16 32.6-32.7 against 32.9-33.0).  With 64 activation
#: rows such a ring does not fit (32 KB stages).
SKINNY_S8_32 = dict(block_n=32, wg_m=64, consumers=1, swap_ab=True, stages=9, block_k_bytes=256, pdl=True,
                    early_prefetch=4)
SKINNY_S8_64 = dict(block_n=64, wg_m=64, consumers=1, swap_ab=True, stages=8, pdl=True, early_prefetch=4)

#: s8 problems of 64 < M <= 128: 128 x 64 tiles (N / 64 CTAs, no split K), 8 stages, pdl, 2 early k-stages
#: (21.39 us against 21.80)
SKINNY_S8 = dict(block_n=64, wg_m=64, consumers=2, stages=8, pdl=True, early_prefetch=2)

#: s8 problems of 128 < M <= 256: 128 x 128 tiles in a ring of 6, pdl, 2 early k-stages (the large-problem tile
#: leaves most SMs idle there and splits K): through run() (bench/splitk_bench.py --overrides) 256 x 8192 x 8192
#: 29.8-30.2 us against 37.5-37.8 for the large tile, 256 x 4096 x 4096 13.1-13.2 against 20.4-20.5 (128 x 64
#: tiles: 9.4-12.1, but 36.7-36.8 at N = K = 8192), M = 192 38.0 against 37.6, 256 x 14336 x 4096 31.1 against 30.7
SKINNY_S8_256 = dict(block_n=128, wg_m=64, consumers=2, stages=6, pdl=True, early_prefetch=2)

#: s4 problems of few rows (64 < M <= 128, the decode case): 128 x 64 tiles fill the SMs without
#: splitting K (N / 64 tiles), 512 K-values per stage halve the per-stage synchronization; the operand
#: tensor maps promote L2 fetches to 256 bytes (a stage's two 128-byte boxes of a row in
#: one request: 20.63-20.68 against 20.68-20.85 us, three runs); the next stage's B widened while this
#: stage's wgmmas run (`widen_ahead`), with wgmma groups of 4 k-steps: 19.47-19.74 us against 20.70-20.94
#: (groups of 2: 20.90-21.18, of 8: 19.84-20.05); 2 early k-stages: 19.11-19.13 against 19.52-19.79 (two runs)
SKINNY_S4 = dict(block_n=64, wg_m=64, consumers=2, stages=3, block_k_bytes=512, scaled=True, pdl=True,
                 l2_promotion=256, widen_ahead=True, early_prefetch=2)

#: s4 problems of 128 < M <= 256: 128 x 128 tiles (2 x N / 128 of them, one wave at N = 8192), the next stage's
#: B widened while this stage's wgmmas run (30.53-30.83 us against 32.60-32.92), 2 early k-stages (30.21 against 30.58)
SKINNY_S4_256 = dict(block_n=128, wg_m=64, consumers=2, stages=4, block_k_bytes=256, scaled=True, pdl=True,
                     widen_ahead=True, early_prefetch=2)

#: bf16 / f16 problems of few rows: the weights' bytes bound them (128 MB of 16-bit weights at N = K = 8192, about
#: 32 us at 4 TB/s), and the large-problem tile leaves most SMs idle there (N / 256 CTAs, M padded to 128).  Up to
#: M = 64 the swapped one-consumer arrangement of the s8 decode configurations (SKINNY_S8_32, SKINNY_S8_64) streams
#: them from N / 64 CTAs; up to M = 128 the same with the activations a wgmma N of 128 (SKINNY_BF16_128); up to
#: M = 256 128 x 128 tiles in a ring of 6.  On the H200, N = K = 8192, three rounds (bench/bf16_bench.py):
#: M = 32 35.0 us against 45.0 for the large tile and 36.9 for cuBLAS; M = 64 35.7 against 47.6 and 38.9; M = 128
#: 40.7 against 56.8 and 39.4 (128 x 64 tiles, 2 consumers: 41.3); M = 256 56.5 against 71.8 and 56.7 (a ring of 4:
#: 62.5).  12 or 16 stages, or 2 early k-stages, measured level with 8 and 4.
SKINNY_BF16_128 = dict(block_n=128, wg_m=64, consumers=1, swap_ab=True, stages=8, pdl=True, early_prefetch=4)
SKINNY_BF16_256 = dict(block_n=128, wg_m=64, consumers=2, stages=6, pdl=True, early_prefetch=2)

#: the largest K at which the large-problem s8, bf16 and f16 configurations write C through shared memory and
#: TMA stores (epilogue='tma') instead of from registers: where C's writes weigh against the K loop the bulk
#: stores free the consumers sooner.  Through run(), the two in turns in one run (bench/epilogue_bench.py),
#: time with the TMA store over time with the register epilogue, N = 8192 unless said:
#: H200 (h200_lane/tma_store_default): bf16 K = 8192 0.997, 2048 0.973, 1024 0.930, 512 0.899, 256 0.917,
#: 16384^2 x 256 0.927; int8 16384^2 x 256 0.870.  H100, three runs (h100_lane/epilogue_*, final_e78cd2d):
#: int8 8192 0.957-0.981, 2048 0.935-0.991, 1024 0.896-0.918, 512 0.887-0.897, 256 0.909-0.914, 16384^2 x 256
#: 0.939-0.942; bf16 (two runs) 8192 0.981-1.009, 2048 1.000, 1024 0.946-1.002, 512 0.919-0.941, 256
#: 0.919-0.925, 16384^2 x 256 0.912-0.926.  Level at 8192^3, so larger K keeps the register epilogue.  A C
#: whose address is not 16-byte aligned is stored by the registers kernel of the same plan (HopperPlan).
TMA_STORE_MAX_K = 2048

#: operand -> (largest M, configuration) of the skinny problems, smallest first (measurements: the comments above
#: and schedules/hopper/tuning.py); a larger M takes DEFAULTS
_SKINNY_BF16 = ((32, SKINNY_S8_32), (64, SKINNY_S8_64), (128, SKINNY_BF16_128), (256, SKINNY_BF16_256))
SKINNY = {"s4": ((32, SKINNY_S4_32), (64, SKINNY_S4_64), (128, SKINNY_S4), (256, SKINNY_S4_256)),
          "s8": ((32, SKINNY_S8_32), (64, SKINNY_S8_64), (128, SKINNY_S8), (256, SKINNY_S8_256)),
          "bf16": _SKINNY_BF16, "f16": _SKINNY_BF16}


def configured(cls, operand: str, m: int, n: int, k: int, overrides: dict):
    """`cls(operand, ...)` for an M x N x K problem, checked: the measured configuration for the shape
    (`shape_params`), the scaled s4 widening traded for the biased one where K would overflow it, `overrides`
    applied last.  When the overrides do not combine with it, the configuration without the small-K TMA store
    (an epilogue choice the overrides did not make), then the large-problem default, takes them instead."""
    def build(params: dict):
        if params.get("scaled") and k >= SCALED_K_LIMIT:
            params.update(scaled=False, biased=True)  # 256 C would not fit 32 bits
        params.update(overrides)
        return cls(operand, **params)
    check_sizes(m, n, k, who="for_shape: ")
    check_parameters(cls, overrides, "its parameters are block_n, wg_m, consumers, stages, epilogue, ... (HopperGemm's "
                                     "fields; block_m, warps_m, path and the like are the mma.sync schedule's)")
    params = shape_params(operand, m, n, k)
    tries = [params]
    if params.get("epilogue") == "tma" and "epilogue" not in overrides:
        tries.append(dict(params, epilogue="registers"))
    if overrides and shape_params(operand, m) != DEFAULTS[operand]:
        tries.append(dict(DEFAULTS[operand]))
    for i, params in enumerate(tries):
        try:
            g = build(dict(params))
            break
        except ValidationError:
            if i == len(tries) - 1:
                raise  # (what the last, most general configuration says of the overrides)
    g.check_problem(m, n, k)
    return g


def shape_params(operand: str, m: int, n: int | None = None, k: int | None = None) -> dict:
    """The measured configuration (a new dict) for a problem of `m` rows of `operand`: the first SKINNY entry
    whose M bound covers `m`, else DEFAULTS; given N and K, the large-problem s8/bf16/f16 one stores C through
    TMA (epilogue='tma') where K <= TMA_STORE_MAX_K and C's rows are whole 16 bytes."""
    if operand not in DEFAULTS:
        raise ValidationError(f"the Hopper GEMM takes s8, s4, bf16 or f16 operands, not {operand!r}")
    params = dict(next((cfg for most, cfg in SKINNY.get(operand, ()) if m <= most), DEFAULTS[operand]))
    if (params == DEFAULTS[operand] and operand != "s4" and k is not None and n is not None
            and k <= TMA_STORE_MAX_K and n % 4 == 0):  # (32-bit C: 16-byte rows)
        params["epilogue"] = "tma"
    return params
