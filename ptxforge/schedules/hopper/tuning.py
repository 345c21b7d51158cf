"""Which Hopper GEMM configuration a problem shape gets, and why: measured on the H200 (bench/hopper_gemm_bench.py);
the tables themselves are `defaults`'s.

At 8192^3, side by side in one run (bench/results/hopper_gemm_h200.md):
* s8 128x256x128, 4 stages, 2 consumer warpgroups: 1555 TOPS (cuBLAS int8 895, Triton int8 1069);
* bf16 128x256x64, 3 stages: 750 TFLOPS (cuBLAS 681, Triton 575);
* s4 128x256x256, 2 stages (the widened B buffers take the shared memory a third would need),
  A widened in registers and pipelined against the wgmmas, the scaled widening (16 v, 3 operations
  per word, C = acc >> 8, one launch): 1275 TOPS, against 1179 for the biased u8 widening with its
  row-sum launch in the same run (cuBLAS int8 961; bench/results/skinny_hopper_h200.md); with the
  next stage's B widened between this stage's wgmma groups (`widen_ahead`) 1302 against 1279 TOPS
  in a later run (1024 x 8192 x 8192: 1233 against 1202).
* s4 skinny problems (the decode case), each a programmatic dependent launch (`pdl`: its prologue
  overlaps the end of the launch ahead of it; 1.4-2 us per call at these sizes), N = K = 8192,
  back-to-back calls over five weight sets:
  Every skinny default also asks the L2 for the first k-stages of its weights before griddepcontrol.wait
  (`early_prefetch`: 2 stages for s4, 4 for s8 at M <= 64), so the DRAM starts on the next call during
  the tail of the one ahead: 1-4 % per call (longer prefetches slow the call ahead: M = 32 11.8 us with 6
  stages, 13.5 with 16; the activations prefetched too: slower).
  - M <= 32: `SKINNY_S4_32` (operands swapped, three consumers taking every third k-stage, wgmma groups
    of 8 k-steps, a ring of 6, one widened B buffer per consumer): 10.9-11.1 us, 2.14-2.16x cuBLAS int8
    on two starts of the GPU machine (two consumers on alternate stages, the default before: 11.05-11.28
    in the same runs, 11.1-11.3 in earlier ones; the mma.sync schedule 12.6 with pdl).  With two consumers
    the kernel's consumers only waiting and releasing stream the weights in 10.1 us (without the prefetch),
    and its consumers fed without any copy (timing only) finish in 9.2-9.3 us: neither is the bound alone,
    their overlap is;
    a third consumer chain (9.5 us alone) makes the overlap cost less.  Tried and slower or level with
    two consumers: the halves of every stage (12.0; with `widen_ahead` 11.2-11.3), the last stage alone
    split between them (11.3-11.4), two accumulator sets, 1, 3 or 4 early k-stages;
  - 32 < M <= 64: `SKINNY_S4_64` (512 K-values per stage in a ring of 4, the two consumers on the halves
    of every stage with the next stage's B widened between the groups: `split_stage`, `widen_ahead`):
    13.4-14.1 us, 1.71-1.80x (alternate stages with one widened B buffer each, the default before:
    14.5-14.6; the mma.sync schedule 19.7);
  - 64 < M <= 128: `SKINNY_S4`, 128 x 64 tiles, 512 K-values per stage, L2 promotion 256, the next
    stage's B widened while this stage's wgmmas run (`widen_ahead`), groups of 4: 19.0-19.1 us,
    2.15-2.23x (19.5-19.8 without the early prefetch; B widened between the stages: 20.6-20.9; the
    mma.sync schedule 27.6);
  - 128 < M <= 256: `SKINNY_S4_256`, 128 x 128 tiles, `widen_ahead`: 30.2 us, 1.39x (30.6 without the
    early prefetch, 32.6-32.9 without `widen_ahead`).
  L2 prefetches of the weights ahead of the ring (`l2_prefetch`) made every one slower (M = 32 13.7-15.3 us
  for 4-16 stages ahead), so none of them asks for any.
* pdl on the large-problem defaults: 8192^3 s8 1493 against 1448 TOPS, s4 1268 against 1270.
* s8 skinny problems, same conditions: M <= 32 `SKINNY_S8_32` (operands swapped, one consumer, 8 stages):
  18.8-18.9 us, 1.26x cuBLAS int8 (19.5 without the early prefetch; the mma.sync schedule 24.2); M <= 64
  `SKINNY_S8_64`: 19.3 us, 1.26x (mma.sync 28.0); M <= 128 `SKINNY_S8` (128 x 64 tiles, 8 stages): 21.4-21.8
  us, 1.94x, one launch (the large tile split K four ways: 35.0 us, two launches); M <= 256 `SKINNY_S8_256`
  (128 x 128 tiles, a ring of 6): 29.8-30.2 us through run() against 37.5-37.8 for the large tile.  Up to
  M = 32 the swapped stages carry 256 K-bytes (a ring of 9): M = 1 19.0 us against 21.8 with 128.
* bf16 / f16 skinny problems (`defaults.SKINNY`, bench/bf16_bench.py), same conditions: the operands
  swapped with one consumer and a ring of 8 up to M = 128 (M = 32 35.0 us, 1.05x cuBLAS bf16; M = 64 35.7,
  1.09x; M = 128 40.7, 0.97x), 128 x 128 tiles in a ring of 6 up to M = 256 (56.5 us, 1.00x); the 128 x 256
  large-problem tile took 45.0 / 47.6 / 56.8 / 71.8 us there (0.69-0.82x).
For K >= 131072 the scaled widening would overflow: the biased one takes its place.
Other skinny problems (few C tiles) split K so that tiles x splits about fills the SMs
(`splitk.choose_splits`, per launch), when each tile streams at least 256 KB over the whole K (1 MB with
split_reduce='launch'): the partial sums meet in the same launch, the last unit of each tile adding them
(bench/splitk_bench.py: 16 x 4096 x 14336 int4 11.4-11.5 us split in two against 14.3-14.4 whole and
15.9-17.7 with the second launch; 16 x 4096 x 4096 bf16 10.9-11.1 against 12.2-12.3).  Before the reduction
moved into the kernel, the second launch made a split cost more than the idle SMs gave back at such shapes
(16 x 4096 x 4096 int4 7.2 us whole against 16.2 split in two, bench/gemm_table_bench.py).
"""

from __future__ import annotations

from ...errors import ValidationError
from .config import HopperGemm
from .defaults import DEFAULTS, TMA_STORE_MAX_K, configured

_PTXFORGE_INTERNAL = True


def _variants(base: dict, *extra: dict) -> list:
    """`base` then `base` updated by each of `extra`, in that order."""
    return [dict(base)] + [{**base, **e} for e in extra]


#: operand -> configurations worth measuring side by side (bench/hopper_gemm_bench.py --variants): the
#: default first, then 2-CTA clusters sharing B (cluster_m=2) or A (cluster_n=2) through TMA multicast,
#: and the shared-memory + TMA-store epilogue (for bf16/f16 also with 16-bit C through stmatrix, c16: the
#: output cuBLAS's bf16 matmul gives); for s4 also B widened between the stages (widen_ahead=False, the
#: arrangement the default replaced).  None of them is a default until the H200 says so.
CANDIDATES = {
    "s8": _variants(DEFAULTS["s8"], dict(cluster_m=2), dict(cluster_n=2), dict(epilogue="tma"),
                    dict(cluster_m=2, epilogue="tma")),
    "bf16": _variants(DEFAULTS["bf16"], dict(cluster_m=2), dict(cluster_n=2), dict(epilogue="tma"),
                      dict(cluster_m=2, epilogue="tma"), dict(epilogue="tma", c16=True),
                      dict(cluster_m=2, epilogue="tma", c16=True)),
    "f16": _variants(DEFAULTS["f16"], dict(cluster_m=2), dict(epilogue="tma"), dict(epilogue="tma", c16=True)),
    # the default s4 tile leaves no room for C staging: the TMA-store variant takes a narrower tile
    "s4": _variants(DEFAULTS["s4"], dict(widen_ahead=False),  # B widened between the stages: the default before
                    dict(cluster_m=2), dict(cluster_n=2),
                    dict(block_n=128, stages=3, epilogue="tma"), dict(block_n=128, stages=3, epilogue="tma",
                                                                    cluster_m=2)),
}


def choose_hopper(m: int, n: int, k: int, operand: str, **overrides) -> HopperGemm:
    """The HopperGemm for an M x N x K problem of `operand` ('s8', 's4', 'bf16', 'f16'); overrides win (with
    the large-problem configuration where a skinny one does not take them: see `configured`).

    Raises ValidationError when the problem does not fit the TMA path (operand rows not a
    multiple of 16 bytes); `hopper_reason` says so in words.
    """
    return configured(HopperGemm, operand, m, n, k, overrides)


#: operand -> M ranges (lo, hi] the mma.sync schedule keeps on the H200.  None today: with the operands swapped
#: and a programmatic dependent launch the Hopper kernel's skinny configurations are ahead at every M measured
#: (N = K = 8192): s4 M = 32 10.9-11.1 us against 12.6 for the mma.sync schedule (also with pdl), M = 64
#: 13.4-14.1 against 19.7; s8 M = 32 18.8-18.9 against 24.2, M = 64 19.3 against 28.0.
MMA_SYNC_M: dict = {"s4": (), "s8": ()}


def hopper_reason(m: int, n: int, k: int, operand: str) -> tuple:
    """(True, why) when the TMA + wgmma path should take the problem, (False, why not) otherwise."""
    if operand not in DEFAULTS:
        return False, (f".{operand} operands have no Hopper path (the TMA + wgmma GEMM takes s8, s4 widened to s8, "
                       "bf16 and f16): the mma.sync schedule runs them")
    for lo, hi in MMA_SYNC_M.get(operand, ()):
        if lo < m <= hi:
            return False, (f"{lo} < M={m} <= {hi}: for such skinny .{operand} problems the mma.sync schedule "
                           "measured level with or faster than the TMA + wgmma one on the H200 (see "
                           "schedules.hopper.tuning.MMA_SYNC_M)")
    try:
        choose_hopper(m, n, k, operand)
    except ValidationError as e:
        return False, f"{e.message if hasattr(e, 'message') else e}"
    if operand == "s4" and m <= 64:
        return True, ("sm_90a: TMA + wgmma with the operands swapped for a decode-sized M (the weights are the wgmma M "
                      "side, widened in registers while the wgmmas run; three (M <= 32) or two consumer warpgroups "
                      "sharing the k-stages) and a programmatic dependent launch; measured 2.14-2.16x cuBLAS int8 "
                      "at M = 32 (10.9-11.1 us against 12.6 for the mma.sync schedule) and 1.7-1.8x at M = 64 "
                      "(13.4-14.1 against 19.7), N = K = 8192")
    if operand == "s8" and m <= 256:
        return True, ("sm_90a: TMA + wgmma with decode-sized tiles that stream the weights from every SM (operands "
                      "swapped for M <= 64, 128 x 64 tiles up to 128, 128 x 128 up to 256) and a programmatic "
                      "dependent launch; measured 1.26x cuBLAS int8 at M = 32 and M = 64, 1.94x at M = 128 "
                      "(N = K = 8192), and 30 against 38 us for the large-problem tile at M = 256")
    if operand in ("bf16", "f16") and m <= 256:
        return True, ("sm_90a: TMA + wgmma with decode-sized tiles that stream the weights from every SM (operands "
                      "swapped, one consumer warpgroup, for M <= 128; 128 x 128 tiles above) and a programmatic "
                      "dependent launch; measured 1.05x cuBLAS bf16 at M = 32, 1.09x at M = 64, 0.97x at M = 128 and "
                      "1.00x at M = 256 (N = K = 8192), where the large-problem tile gave 0.69-0.82x")
    if operand == "s4" and m <= 256:
        return True, ("sm_90a: TMA + wgmma with 128 x 64 (M <= 128) or 128 x 128 tiles for a decode-sized M (the "
                      "weights stream once, without splitting K at N = 8192; A widened in registers while the wgmmas "
                      "run, and the next stage's B in shared memory too) and a programmatic dependent launch; measured 2.2x cuBLAS int8 at M = 128 and 1.39x at "
                      "M = 256 (N = K = 8192)")
    why = ("sm_90a: TMA + wgmma, warp-specialized and persistent (wgmma s8 reaches 1940 TOPS on an H200, "
           "mma.sync about 1300); measured 1.5x cuBLAS int8 at 8192^3 for s8")
    if choose_hopper(m, n, k, operand).epilogue == "tma":
        why += (f"; C written through shared memory and TMA stores at K = {k} <= {TMA_STORE_MAX_K}, where C's "
                "writes weigh (up to 13 % less time than the register epilogue on the H200 and H100, never "
                "measurably more)")
    return True, why
