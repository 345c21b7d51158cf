"""`HopperGemm`: parameters of the warp-specialized persistent TMA + wgmma GEMM (sm_90a).

C[M, N] = A[M, K] . B[N, K]^T, both operands K-contiguous ("NT", like Int4Gemm/Int8Gemm):

* operand "s8": s8 x s8 -> s32, exact.
* operand "bf16" / "f16": 16-bit floats -> f32 accumulation and f32 C.
* operand "s4": packed signed nibbles (two per byte, even k in the low nibble) in global memory
  and in the TMA-fed shared tiles.  wgmma has no 4-bit form: with `a_registers` (default) each
  consumer loads its A rows from the packed stage and widens them in registers (a register-sourced
  wgmma), while B is widened into an s8 shared tile by the consumers together (then
  `fence.proxy.async` and a named barrier); without it both operands are widened in shared memory.

One CTA per SM loops over C tiles (persistent grid, grouped raster for L2 reuse).  Warpgroup 0
is the producer (one thread issues the TMA copies into a `stages`-deep ring of full/empty
mbarriers, setmaxnreg.dec to 40); `consumers` warpgroups (setmaxnreg.inc) each own `wg_m` rows
of the block_m x block_n tile and issue m64 x block_n wgmmas from shared memory.  Ragged M/N/K:
the tensor maps zero-fill out-of-bounds boxes, and edge tiles store C under masks.

Options (off by default; tuning.CANDIDATES lists them for the bench): `cluster_m=2` / `cluster_n=2`
run 2-CTA clusters that share the B / A tile through TMA multicast; `epilogue='tma'` writes C
through swizzled shared sub-tiles and TMA tile stores, clipped at the edges by the tensor map.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ...errors import ValidationError
from ...isa.targets import Target
from ...hopper.layout import SmemTile
from ...hopper.pipeline import register_split
from ..operands import check_sizes
from . import operands as _operands
from . import run as _run
from .convert import CONVERTER_WARPS, SCALED_K_LIMIT

_PTXFORGE_INTERNAL = True

#: operand -> (shared element type the wgmma reads, bits per stored element, C element type)
OPERANDS = {"s8": ("s8", 8, "s32"), "bf16": ("bf16", 16, "f32"), "f16": ("f16", 16, "f32"),
            "s4": ("s8", 4, "s32")}

#: dynamic shared memory an sm_90a CTA may take (227 KB)
SMEM_LIMIT = Target.parse("sm_90a").limits.shared_per_cta

#: bytes one TMA copy / one swizzle atom spans along K
ATOM_BYTES = 128

#: how the C tile leaves the consumers (see HopperGemm)
EPILOGUES = ("registers", "tma")
#: shared bytes of the in-kernel reduction's verdict words: one per storing warp, at most 8
FIXUP_FLAG_BYTES = 32
#: how the partial sums of a K split meet: in the GEMM's launch, or in a second launch (HopperGemm.split_reduce)
SPLIT_REDUCES = ("kernel", "launch")

#: C columns of one TMA-store sub-tile: 128 bytes of 32-bit C, one 128-byte swizzle span
STORE_COLS = 32

#: rows of one TMA-store sub-tile (one m64 wgmma's accumulator rows)
STORE_ROWS = 64

#: registers per consumer thread held back from the accumulators (and s4's A fragments) for addresses,
#: counters, barrier phases and the widening; ptxas 13.0 over s4, s8 and bf16 configurations at 104 to 232
#: consumer registers: with 56 left none spilled or serialized a wgmma, with 40 or fewer some did
CONSUMER_HEADROOM_REGS = 56
#: the most accumulator (and A-fragment) registers per consumer thread with the full 232
ACC_REGS_LIMIT = 160

@dataclass(frozen=True)
class HopperGemm:
    """One warp-specialized TMA + wgmma GEMM kernel configuration (see the module docstring).

    operand: 's8', 's4', 'bf16', 'f16'; block_n: C tile columns (wgmma N, 64..256); wg_m: rows
    per consumer warpgroup (64 or 128: one or two m64 wgmmas per k-step); consumers: 1 or 2 consumer
    warpgroups (block_m = wg_m x consumers; 3 or 4 with interleave_k); block_k_bytes: K bytes per stage of the wgmma
    operand (a multiple of 128: one 128-byte swizzle atom per TMA copy); stages: ring depth;
    raster_group: tile rows walked together for L2 reuse; consumer_regs: setmaxnreg.inc target;
    a_registers (s4 only): A widened in registers and fed to wgmma from registers;
    a_group (s4 with a_registers): k-steps per group of wgmmas (2, 4 or 8; an even number of groups per
    stage): the next group's A is widened while a group runs, and the last group of a stage is what
    the tensor cores have to work on while the next stage's B is widened;
    converter (s4 with a_registers): B is widened by warps 2-3 of the producer warpgroup into two
    s8 buffers handed over through mbarriers, so the consumers only widen A and multiply;
    biased (s4 with a_registers): the nibbles are widened to v + 8 (u8, 3 operations per word
    instead of 7) and multiplied as u8 x u8; the epilogue subtracts 8 (rowsum A + colsum B) and
    adds 128 K - 64 Kpad (Kpad: K rounded up to the stage; the zero-filled tail multiplies as
    8 x 8), with the biased row sums of A and B computed by a small kernel first (`sums_module`);
    scaled (s4): the nibbles are widened to 16 v (s8; 3 operations per word, no row sums) and the
    epilogue shifts C = acc >> 8 (exact for K < 131072, which `check_problem` enforces);
    convert_buffers (s4 with a_registers): the ring of widened B buffers (1..4; 2..4 with the converter), filled by the
    converter warps ahead of the consumers, or by the consumers themselves; with 3 or more the
    consumers skip the barrier that guards a buffer's reuse two stages on; with 1 (consumers only)
    each stage waits for every wgmma of the stage before it (`wgmma.wait_group 0`) before widening
    B into the one buffer, which leaves the shared memory of a buffer to the ring;
    widen_ahead (s4 with A in registers, B widened by the consumers into two buffers, not interleave_k):
    the next stage's B is widened while this stage's wgmmas run, a 16-byte chunk after each group
    is issued, instead of between the stages; the wgmmas of a stage then wait only for the barrier
    that ends the stage before it, not for its widening too;
    acc_sets (s4 with A in registers): accumulator sets per consumer warpgroup; with 2 the k-steps
    alternate between them (even k-steps into one, odd into the other), so two wgmma chains that do
    not wait for each other's sums share the tensor cores where a stage's wgmmas are small (a narrow
    block_n), and the second set is added into the first when the unit's wgmmas have retired;
    interleave_k (s4 with A in registers, 2 to 4 consumers): the consumers share the tile's rows
    (block_m = wg_m) and take the k-stages in turn, each with its own accumulators and its own B
    widening; at the end of a tile the others add their sums into the first's through shared
    memory (fixed order: exact, deterministic) and the first stores C.  Independent pipelines per
    SM hide each other's latencies where the tile is small (skinny problems); the ring is a
    multiple of the consumers, and with 3 or 4 the register split must fit the registers 512 or
    640 threads start with (consumer_regs=152 or 104 beside the producer's 40);
    split_stage (s4 with A in registers, 2 consumers, B widened by the consumers): the consumers share the
    tile's rows (block_m = wg_m) and split every stage's k-steps, consumer c widening the A and B of half
    c of the stage (under its own named barrier) and issuing their wgmmas; at the end of a tile
    the second adds its sums into the first's through shared memory, as with interleave_k.  Each
    stage then takes half a consumer's chain, and so does the last one, which nothing hides;
    odd_n (epilogue='registers', not swap_ab): the kernel for C rows of an odd number of values, whose
    stores are single 4-byte values (rows of an even count start 8-byte aligned and take pair stores);
    a plan, and `for_c_columns`, pick the variant from N, so a kernel carries only the stores it uses;
    wide_c (epilogue='registers'): C's element offsets in 64 bits, for a C of 2^32 or more elements (the
    32-bit offsets of the other kernels would wrap onto its first rows); `for_launch` turns it on from M x N;
    rotate_k: each work unit walks its k-stages starting at stage (tile mod stages) and wraps, so
    CTAs streaming operand row blocks at the same moment read different columns (the order of an
    integer sum does not matter; on the H200 many CTAs reading the same columns of 4 KB-strided
    rows at once reach about 2.6 TB/s);
    l2_prefetch: k-stages ahead of the one the producer loads whose weight boxes (the problem's B: the
    kernel's A with swap_ab) it also asks the L2 for (`cp.async.bulk.prefetch.tensor`, 0: none), so
    more of the weights are on their way from DRAM than the shared ring holds; a hint, the results
    do not depend on it;
    early_prefetch (with pdl): k-stages of the CTA's first unit whose weight boxes (as for l2_prefetch)
    one thread asks the L2 for before `griddepcontrol.wait`, while the kernel ahead in the stream
    still finishes, so the first loads after the wait find them there.  A prefetch moves no data into
    the kernel and the L2 is where every SM's writes meet, so a weight the kernel ahead writes is
    still read as written (the loads themselves come after the wait);
    l2_promotion: the L2 promotion of the operand tensor maps (0, 64, 128 or 256 bytes: what the L2
    fetches around each TMA request; 256 brings a 128-byte box row's neighbour along);
    pdl: a programmatic dependent launch: every thread executes `griddepcontrol.wait` after the
    prologue (barriers initialized, tensor maps prefetched) and before any global access, then
    `griddepcontrol.launch_dependents`; plans launch it with the programmatic-serialization
    attribute, so its prologue and launch overlap the end of the kernel ahead of it in the stream
    (``ptxforge.runtime.dependent``);
    swap_ab: the kernel computes B . A^T and stores it transposed into C, so the operand with many
    rows (the weights B of a skinny problem) is the wgmma M side, widened in registers, and the
    few rows of A are the wgmma N (block_n down to 32).  `run`/`plan` take A, B, C as always;
    the kernel's own M and N (its parameters, `tile_counts`) are then the problem's N and M.
    cluster_m / cluster_n (one of them 2, or both 1): two CTAs of a cluster take neighbouring C
    tiles along M (cluster_m=2: they need the same B tile) or along N (cluster_n=2: the same A
    tile); each loads half of the shared tile and multicasts it into both CTAs' shared memory
    (`cp.async.bulk.tensor ... .multicast::cluster`), so that operand crosses L2 once per pair.
    The kernel requires clusters of (2, 1, 1) (`.reqnctapercluster`); see `HopperGemm.cluster`.
    epilogue: 'registers' (default: each thread stores its accumulator pairs to global memory,
    masked at the edges) or 'tma' (each consumer warpgroup writes 64 x 32 sub-tiles of C into a
    128-byte-swizzled shared buffer, two buffers in turn, and one thread stores each with a TMA
    tile store; the tensor map clips the ragged edges).  32-bit C (s32, f32) is written to the
    staging buffers with st.shared.v2; c16 (bf16/f16 operands with epilogue='tma'): C in the
    operands' 16-bit type, the f32 accumulators rounded to nearest-even in pairs
    (cvt.rn.bf16x2.f32 / f16x2) and written with stmatrix.x4 as 64 x 64 sub-tiles.
    split_reduce: how the partial sums of a K split meet. 'kernel' (default): in the GEMM's own launch, each
    work unit writes its tile's partial sums to a workspace, counts itself in at its tile's counter
    (`atom.add.acq_rel.gpu`), and the unit that counts last adds the splits' sums in split order and stores
    C through the epilogue (`splitk.emit_fixup`): one launch, the same sum every run, and 16-bit C (c16)
    rounded from the whole sum.  'launch': every split stores its partial C into slice s of a workspace
    [S, M, N] and a second launch adds them (`splitk.emit_reduce`; not with c16).  A launch that does not
    split K takes the kernel without either (`for_launch`).
    """

    operand: str = "s8"
    block_n: int = 256
    wg_m: int = 64
    consumers: int = 2
    block_k_bytes: int = 128
    stages: int = 4
    raster_group: int = 8
    consumer_regs: int = 232
    producer_regs: int = 40
    a_registers: bool = True
    converter: bool = False
    biased: bool = False
    swap_ab: bool = False
    scaled: bool = False
    convert_buffers: int = 2
    interleave_k: bool = False
    rotate_k: bool = False
    l2_promotion: int = 128
    l2_prefetch: int = 0
    pdl: bool = False
    cluster_m: int = 1
    cluster_n: int = 1
    epilogue: str = "registers"
    c16: bool = False
    a_group: int = 4
    widen_ahead: bool = False
    acc_sets: int = 1
    early_prefetch: int = 0
    split_stage: bool = False
    odd_n: bool = False
    wide_c: bool = False
    split_reduce: str = "kernel"

    def __post_init__(self):
        for check in (self._check_types, self._check_tile, self._check_s4_path, self._check_stores, self._check_prefetch,
                      self._check_ring_and_epilogue, self._check_resources):
            check()

    def _check_types(self) -> None:
        """Every field of the type its annotation names (an int field takes a numpy integer, kept as an int; a
        bool is no int here), so that the checks after it compare numbers and the kernel's name and cache key
        see one spelling of each configuration."""
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "int" and isinstance(v, np.integer):
                object.__setattr__(self, f.name, int(v))
            elif not (isinstance(v, bool) if f.type == "bool" else
                      isinstance(v, int) and not isinstance(v, bool) if f.type == "int" else
                      isinstance(v, str) if f.type == "str" else True):
                want = {"int": "an int", "bool": "True or False", "str": "a str"}[f.type]
                raise ValidationError(f"HopperGemm {f.name} must be {want}, got {v!r}")

    def _check_tile(self) -> None:
        """The tile: operand, warpgroup rows and count, block_n, the K bytes of a stage."""
        if self.operand not in OPERANDS:
            raise ValidationError(f"HopperGemm operand must be one of {', '.join(OPERANDS)}, got {self.operand!r}")
        if self.wg_m not in (64, 128):
            raise ValidationError(f"wg_m (rows per consumer warpgroup) is 64 or 128, got {self.wg_m}")
        if self.consumers not in (1, 2, 3, 4):
            raise ValidationError(f"consumers is 1 or 2 warpgroups (3 or 4 with interleave_k), got {self.consumers}")
        if self.consumers > 2 and not (self.interleave_k and not self.converter):
            raise ValidationError(f"consumers={self.consumers} is for interleave_k (the warpgroups taking the k-stages "
                                  "in turn, B widened by the consumers); the other arrangements take 1 or 2")
        if self.block_n % 16 or not 32 <= self.block_n <= 256:
            raise ValidationError(f"block_n must be a multiple of 16 in 32..256 (a wgmma N), got {self.block_n}")
        if self.block_k_bytes % ATOM_BYTES or self.block_k_bytes <= 0:
            raise ValidationError(f"block_k_bytes must be a multiple of {ATOM_BYTES}, got {self.block_k_bytes}")
        if self.operand == "s4" and self.block_k_bytes % 256:
            raise ValidationError(f"s4 needs block_k_bytes a multiple of 256 (its packed tiles are whole 128-byte "
                                  f"atoms), got {self.block_k_bytes}; the measured configurations: "
                                  "HopperGemm('s4', **hopper.defaults.DEFAULTS['s4']) for large problems, "
                                  "Int4Gemm.for_shape(m, n, k) for each shape")

    def _check_s4_path(self) -> None:
        """The options of the s4 widening and of its register-sourced path (converter, biased, scaled, B buffers,
        interleave_k, wgmma groups, accumulator sets, widen_ahead, split_stage) and what each needs."""
        if self.converter and not self.a_in_registers:
            raise ValidationError("converter=True is the s4 register-sourced path (operand='s4', a_registers=True)")
        if self.biased and not self.a_in_registers:
            raise ValidationError("biased=True is the s4 register-sourced path (operand='s4', a_registers=True)")
        if self.scaled and self.operand != "s4":
            raise ValidationError("scaled=True widens packed 4-bit operands: operand='s4'")
        if self.scaled and self.biased:
            raise ValidationError("scaled and biased are two widenings of s4: choose one")
        if not 1 <= self.convert_buffers <= 4:
            raise ValidationError(f"convert_buffers is 1..4 widened B buffers, got {self.convert_buffers}")
        if self.convert_buffers == 1 and self.converter:
            raise ValidationError("convert_buffers=1 is for B widened by the consumers: the converter warps fill one "
                                  "buffer while the consumers read another (2..4)")
        if self.convert_buffers != 2 and not self.a_in_registers:
            raise ValidationError("convert_buffers sets the ring of widened B tiles of the register-sourced s4 path "
                                  "(operand='s4', a_registers=True)")
        if self.interleave_k and not (self.a_in_registers and self.consumers >= 2):
            raise ValidationError("interleave_k (the consumers taking the k-stages in turn) is the register-sourced s4 "
                                  "path with consumers=2, 3 or 4")
        if self.a_group not in (2, 4, 8):
            raise ValidationError(f"a_group (k-steps per group of register-sourced wgmmas) is 2, 4 or 8, got "
                                  f"{self.a_group}")
        if self.a_group != 4 and not self.a_in_registers:
            raise ValidationError("a_group sets the register-sourced s4 path's wgmma groups (operand='s4')")
        if self.a_in_registers and (self.block_k // 32) % (2 * self.a_group):
            raise ValidationError(f"a_group={self.a_group}: a stage's {self.block_k // 32} k-steps must make an even "
                                  f"number of groups (block_k_bytes a multiple of {64 * self.a_group})")
        if self.operand == "s4":  # each pass of the widening covers widen_threads / 4 rows of a tile
            per = self.widen_threads // 4
            for what, rows in (("block_n", self.block_n),) + ((("block_m", self.block_m),)
                                                               if not self.a_registers else ()):
                if rows % per:
                    raise ValidationError(f"{what}={rows}: the s4 tiles are widened by {self.widen_threads} threads "
                                          f"in passes of {per} rows, so {what} must be a multiple of {per} "
                                          "(fewer widening threads: consumers=1, interleave_k, split_stage or "
                                          "converter)")
        if self.acc_sets not in (1, 2):
            raise ValidationError(f"acc_sets (accumulator sets per consumer warpgroup) is 1 or 2, got "
                                  f"{self.acc_sets!r}")
        if self.acc_sets == 2 and not self.a_in_registers:
            raise ValidationError("acc_sets=2 (k-steps alternating between two accumulator sets) is the "
                                  "register-sourced s4 path (operand='s4', a_registers=True)")
        if self.widen_ahead and not (self.a_in_registers and not self.converter
                                     and not self.interleave_k and self.convert_buffers == 2):
            raise ValidationError("widen_ahead is the register-sourced s4 path with B widened by the consumers into "
                                  "two buffers (converter=False, interleave_k=False, convert_buffers=2)")
        if self.split_stage and not (self.a_in_registers and self.consumers == 2
                                     and not self.converter and not self.interleave_k):
            raise ValidationError("split_stage (two consumers on the halves of every stage) is the register-sourced s4 "
                                  "path with consumers=2, B widened by the consumers (converter=False), not "
                                  "interleave_k")
        half = self.block_k // 64  # k-steps of a consumer's half of a stage
        if self.split_stage and (half % 8 or half % (2 * self.a_group)):
            raise ValidationError(f"split_stage: each consumer's half of a stage ({half} k-steps) must be whole "
                                  f"256-value atoms in an even number of groups of {self.a_group} (block_k_bytes a "
                                  "multiple of 512, and of 1024 with a_group=8)")

    def _check_stores(self) -> None:
        """C's stores (odd_n, wide_c) and the arrangements that store C through registers without clusters."""
        if self.odd_n and (self.swap_ab or self.epilogue != "registers"):
            raise ValidationError("odd_n selects the 4-byte C stores of the registers epilogue (epilogue='registers', "
                                  "swap_ab=False: swapped tiles and TMA stores take any N)")
        if self.wide_c and self.epilogue != "registers":
            raise ValidationError("wide_c selects 64-bit C offsets in the registers epilogue (epilogue='registers'; "
                                  "TMA stores address C by coordinates)")
        if self.split_stage and (self.cluster_size > 1 or self.epilogue != "registers"):
            raise ValidationError("split_stage stores C through registers, without clusters")
        if self.interleave_k and self.stages % self.consumers:
            raise ValidationError(f"interleave_k with {self.consumers} consumers needs a multiple of {self.consumers} "
                                  f"stages, got {self.stages}: the consumer warpgroups take the stages in turn, and "
                                  "otherwise a slot serves several of them, so a warpgroup a use or more ahead would "
                                  "find the slot's barrier in another's phase and its parity wait would pass before "
                                  "its own bytes landed")
        if self.interleave_k and self.converter and self.convert_buffers != 4:
            raise ValidationError("interleave_k with the converter needs convert_buffers=4: with 2 a consumer would "
                                  "wait for the buffer it frees only after its next stage (two stages on), and with "
                                  "an odd count each buffer would serve both consumers in turn (a parity wait could "
                                  "pass on the other consumer's phase)")
        if self.interleave_k and (self.cluster_size > 1 or self.epilogue != "registers"):
            raise ValidationError("interleave_k stores C through registers, without clusters")

    def _check_prefetch(self) -> None:
        """L2 prefetches and promotion, and the programmatic dependent launch they may need."""
        if not isinstance(self.l2_prefetch, int) or not 0 <= self.l2_prefetch <= 32:
            raise ValidationError(f"l2_prefetch is 0..32 k-stages ahead, got {self.l2_prefetch!r}")
        if not isinstance(self.early_prefetch, int) or not 0 <= self.early_prefetch <= 64:
            raise ValidationError(f"early_prefetch is 0..64 k-stages, got {self.early_prefetch!r}")
        if self.early_prefetch and not self.pdl:
            raise ValidationError("early_prefetch asks the L2 for weights while the kernel ahead still runs: it needs "
                                  "pdl=True (without a programmatic launch nothing runs before the kernel ahead ends)")
        if self.early_prefetch and (self.rotate_k or self.cluster_size > 1):
            raise ValidationError("early_prefetch walks the first unit's k-stages in order, one CTA per unit: not with "
                                  "rotate_k or clusters")
        if self.l2_prefetch and self.rotate_k:
            raise ValidationError("l2_prefetch walks the k-stages in order; rotate_k reorders them: choose one")
        if self.l2_promotion not in (0, 64, 128, 256):
            raise ValidationError(f"l2_promotion is 0, 64, 128 or 256 bytes, got {self.l2_promotion}")

    def _check_ring_and_epilogue(self) -> None:
        """The ring depth, the cluster shape, the epilogue and how a K split's sums meet."""
        if self.stages < 2:
            raise ValidationError(f"stages must be at least 2, got {self.stages}")
        if (self.cluster_m, self.cluster_n) not in ((1, 1), (2, 1), (1, 2)):
            raise ValidationError(f"cluster_m x cluster_n is 1 x 1, 2 x 1 (two CTAs along M share B) or 1 x 2 "
                                  f"(two along N share A), got {self.cluster_m} x {self.cluster_n}")
        if self.epilogue not in EPILOGUES:
            raise ValidationError(f"epilogue is one of {', '.join(EPILOGUES)}, got {self.epilogue!r}")
        if self.epilogue == "tma" and self.swap_ab:
            raise ValidationError("epilogue='tma' stores C tiles as the kernel computes them; swap_ab stores them "
                                  "transposed: use epilogue='registers' with swap_ab")
        if self.split_reduce not in SPLIT_REDUCES:
            raise ValidationError(f"split_reduce is one of {', '.join(SPLIT_REDUCES)}, got {self.split_reduce!r}")
        if self.c16 and not (self.operand in ("bf16", "f16") and self.epilogue == "tma"):
            raise ValidationError("c16 (16-bit C through stmatrix) takes bf16/f16 operands and epilogue='tma'")
        if self.epilogue == "tma" and self.block_n % self.store_box[0]:
            raise ValidationError(f"epilogue='tma' stores C in {self.store_box[0]}-column sub-tiles: block_n must "
                                  f"be a multiple of {self.store_box[0]}, got {self.block_n}")

    def _check_resources(self) -> None:
        """Registers per thread and shared memory per CTA."""
        register_split(self.threads, 1, self.consumers, self.producer_regs, self.consumer_regs)
        fragments = self.a_in_registers  # (A widened in registers holds its fragments too)
        held = self.acc_sets * self.acc_regs + (self.a_fragment_regs if fragments else 0)
        room = min(ACC_REGS_LIMIT, self.consumer_regs - CONSUMER_HEADROOM_REGS)
        if held > room:
            what = (f"{self.acc_sets * self.acc_regs} accumulator and {self.a_fragment_regs} A-fragment registers"
                    if fragments else f"{held} accumulator registers")
            fix = "wg_m=64 or a narrower block_n" + (", acc_sets=1" if self.acc_sets == 2 else "") + (
                ", a smaller a_group" if fragments and self.a_group > 2 else "")
            if self.consumer_regs - CONSUMER_HEADROOM_REGS < ACC_REGS_LIMIT:
                fix += f", or more than {self.consumer_regs} consumer_regs where the register split allows"
            raise ValidationError(f"{what} per consumer thread (wg_m {self.wg_m} x block_n {self.block_n}) leave too "
                                  f"few of its {self.consumer_regs} for addressing: at most {room} fit without "
                                  f"spilling or serialized wgmmas; {fix}")
        if self.smem_bytes > SMEM_LIMIT:
            raise ValidationError(f"{self.stages} stages of {self.stage_bytes} B"
                                  + (f" and {self.store_bytes} B of C staging" if self.store_bytes else "")
                                  + f" = {self.smem_bytes} B exceed the {SMEM_LIMIT} B of shared memory: fewer "
                                  "stages or a smaller tile")

    # ------------------------------------------------------------ derived facts
    @property
    def mma_type(self) -> str:
        """Element type the wgmma reads from shared memory."""
        return OPERANDS[self.operand][0]

    @property
    def bits(self) -> int:
        """Bits per operand element in global memory."""
        return OPERANDS[self.operand][1]

    @property
    def c_type(self) -> str:
        """Element type of C (the operand type with c16, else s32 or f32)."""
        return self.operand if self.c16 else OPERANDS[self.operand][2]

    @property
    def c_bytes(self) -> int:
        """Bytes per element of C."""
        return 2 if self.c16 else 4

    @property
    def block_m(self) -> int:
        """Rows of the C tile (the consumers' rows side by side, or with interleave_k / split_stage the same wg_m
        rows)."""
        return self.wg_m * (1 if self.shared_rows else self.consumers)

    @property
    def shared_rows(self) -> bool:
        """Whether the consumers share the tile's rows (interleave_k, split_stage) and add their sums at the end."""
        return self.interleave_k or self.split_stage

    @property
    def widen_threads(self) -> int:
        """Threads that widen a stage's packed s4 B tile (and A's, without a_registers): the converter warps,
        one consumer warpgroup (interleave_k: each widens its own stages; split_stage: each its half of every
        stage), or all consumers."""
        if self.converter:
            return 32 * CONVERTER_WARPS
        return 128 * (1 if self.shared_rows else self.consumers)

    @property
    def block_k(self) -> int:
        """K elements per stage."""
        return self.block_k_bytes * 8 // (8 if self.operand == "s4" else self.bits)

    @property
    def threads(self) -> int:
        """Threads per CTA: the producer warpgroup and the consumers."""
        return 128 * (1 + self.consumers)

    @property
    def acc_regs(self) -> int:
        """Accumulator registers per consumer thread."""
        return (self.wg_m // 64) * self.block_n // 2

    @property
    def a_fragment_regs(self) -> int:
        """A-fragment registers per consumer thread of the register-sourced s4 path: two groups of k-steps
        (one widened while the other's wgmmas run) x 4 per k-step and m64 block."""
        return (self.wg_m // 64) * 4 * 2 * self.a_group

    @property
    def widen(self) -> str:
        """How s4 nibbles become wgmma bytes: 'scaled' (16 v), 'biased' (v + 8, u8) or 'signext' (v)."""
        return "scaled" if self.scaled else "biased" if self.biased else "signext"

    @property
    def tiles(self) -> tuple:
        """(A tile, B tile) that wgmma reads: SmemTiles of the mma element type, 128-byte swizzle."""
        cols = self.block_k
        return SmemTile(self.mma_type, self.block_m, cols), SmemTile(self.mma_type, self.block_n, cols)

    @property
    def packed_tiles(self) -> tuple:
        """(A, B) tiles TMA lands for s4: the packed bytes (u8, half the K bytes); None otherwise."""
        if self.operand != "s4":
            return None
        cols = self.block_k // 2
        return SmemTile("u8", self.block_m, cols), SmemTile("u8", self.block_n, cols)

    @property
    def load_tiles(self) -> tuple:
        """The tiles the TMA copies fill (packed ones for s4)."""
        return self.packed_tiles or self.tiles

    @property
    def cluster(self) -> tuple:
        """The cluster shape the kernel is launched with: (2, 1, 1) when two CTAs share an operand, else (1, 1, 1)."""
        return (self.cluster_size, 1, 1)

    @property
    def cluster_size(self) -> int:
        """CTAs per cluster (1 or 2)."""
        return self.cluster_m * self.cluster_n

    @property
    def multicast(self) -> tuple:
        """(A multicast, B multicast): whether each operand's tile is shared by the cluster's two CTAs."""
        return self.cluster_n == 2, self.cluster_m == 2

    @property
    def load_boxes(self) -> tuple:
        """(A box, B box) of one TMA copy, innermost first: a multicast operand's box has half the rows."""
        out = []
        for tile, mc in zip(self.load_tiles, self.multicast):
            x, rows = tile.tma_box
            out.append((x, rows // 2) if mc else (x, rows))
        return tuple(out)

    @property
    def store_box(self) -> tuple:
        """(columns, rows) of one TMA-store sub-tile of C (epilogue='tma'): 128 bytes of C (32 columns of
        32-bit C, 64 of 16-bit) x 64 rows."""
        return STORE_COLS * 4 // self.c_bytes, STORE_ROWS

    @property
    def store_bytes(self) -> int:
        """Shared bytes of the TMA-store staging buffers: two 64 x 32 sub-tiles of C per consumer warpgroup."""
        if self.epilogue != "tma":
            return 0
        return self.consumers * 2 * STORE_ROWS * STORE_COLS * 4

    @property
    def stage_bytes(self) -> int:
        """Shared bytes of one ring stage (what TMA brings: the expect_tx count)."""
        a, b = self.load_tiles
        return a.nbytes + b.nbytes

    @property
    def convert_bytes(self) -> int:
        """Shared bytes of the widened s8 tiles (s4 only: one set per consumer-side buffer)."""
        if self.operand != "s4":
            return 0
        a, b = self.tiles
        sets = self.consumers if self.interleave_k and not self.converter else 1  # interleave_k: B per consumer
        return sets * self.convert_buffers * (b.nbytes + (0 if self.a_registers else a.nbytes))

    @property
    def reduce_in_buffers(self) -> bool:
        """interleave_k with consumer-widened B: the second consumer hands its accumulators over through its own
        widened B buffers (idle once its last wgmmas have retired) when they hold them, so no shared memory
        is set aside for the hand-over."""
        return (self.interleave_k and not self.converter
                and 128 * self.acc_regs * 4 <= self.convert_buffers * self.tiles[1].nbytes)

    @property
    def reduce_bytes(self) -> int:
        """Shared bytes set aside through which interleave_k's second consumer hands its accumulators to the
        first (0 when its widened B buffers serve: `reduce_in_buffers`)."""
        if not self.shared_rows or self.reduce_in_buffers:
            return 0
        return (self.consumers - 1) * self.hand_over_stride  # every consumer but the first hands its sums over

    @property
    def hand_over_stride(self) -> int:
        """Bytes between the places consumers 1, 2, ... hand their sums to consumer 0 through (shared rows): their
        own widened B buffers (`reduce_in_buffers`), or 16 bytes per accumulator register of each of 128 threads."""
        return self.convert_buffers * self.tiles[1].nbytes if self.reduce_in_buffers else 128 * self.acc_regs * 4

    @property
    def widened_a(self) -> bool:
        """Whether A is widened into shared memory (s4 without a_registers)."""
        return self.operand == "s4" and not self.a_registers

    @property
    def a_in_registers(self) -> bool:
        """Whether A is widened in registers and fed to wgmma from them (s4 with a_registers): the path the
        options a_group, converter, biased, convert_buffers, interleave_k, acc_sets, widen_ahead and
        split_stage belong to."""
        return self.operand == "s4" and self.a_registers

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory to request: 1024 alignment slack, the ring, converted tiles, the barriers and,
        after them, the in-kernel reduction's verdict words."""
        return (1024 + self.stages * self.stage_bytes + self.convert_bytes + self.store_bytes + self.reduce_bytes
                + self.fixup_flag_offset + (FIXUP_FLAG_BYTES if self.reduces_in_kernel else 0))

    @property
    def kernel_name(self) -> str:
        """The entry's name: every parameter that changes the code."""
        return (f"hgemm_{self.operand}_{self.block_m}x{self.block_n}x{self.block_k}_w{self.wg_m}c{self.consumers}"
                f"_s{self.stages}_g{self.raster_group}_r{self.consumer_regs}"
                + (f"_p{self.producer_regs}" if self.producer_regs != 40 else "")
                + ("_rs" if self.a_in_registers else "") + ("_cv" if self.converter else "")
                + ((f"{self.convert_buffers}" if self.converter else f"_wb{self.convert_buffers}")
                   if self.convert_buffers != 2 else "") + ("_b" if self.biased else "")
                + ("_sc" if self.scaled else "") + ("_ik" if self.interleave_k else "")
                + (f"_ag{self.a_group}" if self.a_group != 4 else "") + ("_wa" if self.widen_ahead else "")
                + ("_as2" if self.acc_sets == 2 else "") + ("_ss" if self.split_stage else "")
                + ("_on" if self.odd_n else "") + ("_wc" if self.wide_c else "")
                + ("_rk" if self.rotate_k else "") + (f"_l{self.l2_promotion}" if self.l2_promotion != 128 else "")
                + (f"_pf{self.l2_prefetch}" if self.l2_prefetch else "")
                + (f"_ep{self.early_prefetch}" if self.early_prefetch else "")
                + ("_t" if self.swap_ab else "") + ("_dl" if self.pdl else "")
                + (f"_cl{self.cluster_m}x{self.cluster_n}" if self.cluster_size > 1 else "")
                + ("_tmast" if self.epilogue == "tma" else "") + ("_c16" if self.c16 else "")
                + ("_kr" if self.split_reduce == "kernel" else ""))

    def tile_counts(self, m: int, n: int, k: int) -> tuple:
        """(tiles along M, tiles along N, k-stages) of the kernel's problem (M and N exchanged by swap_ab)."""
        return -(-m // self.block_m), -(-n // self.block_n), -(-k // self.block_k)

    def cluster_tiles(self, m: int, n: int) -> int:
        """Work units per K split: C tiles, or with a cluster, pairs of neighbouring tiles (the grid's
        last pair may hang over the edge: that CTA loads zeros, stores nothing and still takes part)."""
        tm, tn, _ = self.tile_counts(m, n, 1)
        return -(-tm // self.cluster_m) * -(-tn // self.cluster_n)

    @property
    def c_store_bytes(self) -> int:
        """The widest store this kernel makes into C, and so the alignment C's address needs: 16 with
        epilogue='tma' (C's tensor map), 4 with swap_ab or odd_n (single values), else 8 (value pairs)."""
        if self.epilogue == "tma":
            return 16
        return 4 if self.swap_ab or self.odd_n else 8

    def for_c_columns(self, n: int) -> "HopperGemm":
        """This configuration with the C stores for rows of `n` values (the problem's N): itself, or with `odd_n`
        set or cleared where the registers epilogue stores pairs (a plan launches this one)."""
        if self.swap_ab or self.epilogue != "registers" or self.odd_n == bool(n % 2):
            return self
        from dataclasses import replace
        return replace(self, odd_n=bool(n % 2))

    def for_launch(self, n: int, splits: int, c_elements: int | None = None) -> "HopperGemm":
        """The kernel a launch of `splits` K splits over rows of `n` C values runs (the kernel's N: the problem's
        M with swap_ab): `for_c_columns`; without a split the kernel without the in-kernel reduction
        (split_reduce='launch': it has nothing to add, and both store the same C); and given C's size
        (`c_elements`, M x N), 64-bit C offsets (`wide_c`) where the registers epilogue needs them."""
        from dataclasses import replace
        cfg = self.for_c_columns(n)
        if splits <= 1 and cfg.split_reduce == "kernel":
            cfg = replace(cfg, split_reduce="launch")
        if c_elements is not None and c_elements >= 1 << 32 and cfg.epilogue == "registers" and not cfg.wide_c:
            cfg = replace(cfg, wide_c=True)
        return cfg

    @property
    def reduces_in_kernel(self) -> bool:
        """Whether this kernel adds the partial sums of a K split itself (split_reduce='kernel'): it then takes the
        `ws` and `counters` parameters, and C is the problem's C whatever the split."""
        return self.split_reduce == "kernel"

    @property
    def fixup_flag_offset(self) -> int:
        """Byte offset, from the barriers, of the shared words (one per storing warp) through which the in-kernel
        reduction tells the storing threads whether their unit counted last (after the ring's and the
        converter's barriers)."""
        return 16 * self.stages + 16 * self.convert_buffers + 16

    def check_problem(self, m: int, n: int, k: int) -> None:
        """Raise ValidationError unless the kernel computes an M x N x K problem exactly: every operand row a
        multiple of 16 bytes (the tensor maps), M, N, K < 2^31, K within the scaled s4 bound, and with
        epilogue='tma' 16-byte rows of C.  (A C of 2^32 or more elements takes the `wide_c` kernel; a K split
        of it must be added in the kernel: `splitk.check_reduce`.)"""
        check_sizes(m, n, k)
        row_bytes = k * self.bits // 8
        if (k * self.bits) % 8 or row_bytes % 16:
            raise ValidationError(f"K={k} gives {k * self.bits / 8:g}-byte operand rows; the tensor maps need a "
                                  f"multiple of 16 bytes (K % {128 // self.bits} == 0): pad K with zeros"
                                  + (" or use the mma.sync schedules" if self.operand in ("s8", "s4") else ""))
        if m >= 1 << 31 or n >= 1 << 31 or k >= 1 << 31:
            raise ValidationError("M, N, K must be < 2^31")
        if self.scaled and k >= SCALED_K_LIMIT:
            raise ValidationError(f"K={k}: the scaled s4 widening holds 256 C in 32 bits, exact for K < "
                                  f"{SCALED_K_LIMIT}; use scaled=False (biased or sign-extended widening)")
        if self.epilogue == "tma" and (n * self.c_bytes) % 16:
            raise ValidationError(f"N={n} gives {self.c_bytes * n}-byte rows of C; the TMA-store epilogue's tensor "
                                  f"map needs a multiple of 16 bytes (N % {16 // self.c_bytes} == 0): use "
                                  "epilogue='registers'" + (" (f32 C)" if self.c16 else ""))

    # ------------------------------------------------------------ the schedule interface
    @property
    def target(self) -> str:
        """The PTX target: wgmma and setmaxnreg need the Hopper-specific sm_90a."""
        return "sm_90a"

    @property
    def path_name(self) -> str:
        """The compute path: 'wgmma_<operand>'."""
        return f"wgmma_{self.operand}"

    @property
    def path_reason(self) -> str:
        """Why this path and how this configuration runs it: the operands swapped or not, and for s4 the widening
        and where each operand is widened (`tuning.hopper_reason` gives the measurements behind a shape's choice)."""
        why = "sm_90a: TMA loads into an mbarrier ring, warp-specialized producer/consumer warpgroups, wgmma "
        if self.operand == "s4":
            widened = {"scaled": "16 v as s8", "biased": "v + 8 as u8", "signext": "s8"}[self.widen]
            if self.a_registers:
                held, other = ("B (the weights)", "A") if self.swap_ab else ("A", "B")
                why += f"(s4 widened to {widened}: {held} in registers, {other} in shared memory)"
            else:
                why += f"(s4 widened to {widened}: both operands in shared memory)"
        else:
            why += f"on .{self.mma_type}"
        if self.swap_ab:
            why += ("; operands swapped for a skinny problem (the weights are the wgmma M side, the few rows of A its "
                    "N; C stored transposed)")
        return why

    def describe(self) -> str:
        """One line: tile, pipeline, threads, shared memory, path."""
        return (f"HopperGemm {self.block_m}x{self.block_n}x{self.block_k} .{self.operand}, {self.consumers} consumer "
                f"warpgroup(s) of {self.wg_m} rows, {self.stages} stages, {self.threads} threads, {self.smem_bytes} B "
                f"shared, sm_90a, path {self.path_name}"
                + (f", clusters of 2 along {'M sharing B' if self.cluster_m == 2 else 'N sharing A'} (TMA multicast)"
                   if self.cluster_size > 1 else "")
                + (", C through shared memory and TMA stores" if self.epilogue == "tma" else "")
                + (f" (C in .{self.operand} through stmatrix)" if self.c16 else ""))

    def assemble(self):
        """AssemblyResult of the kernel (whole-program ptxas when present)."""
        from .plan import assembled
        r = assembled(self)
        if r is None:
            from ...assembler import assemble
            r = assemble(self.module, "sm_90a")
        return r

    def run(self, a, b, c=None, *, k: int | None = None, splits: int | None = None, stream=None):
        """C = A . B^T on the GPU (A [M, K(/2)], B [N, K(/2)], as Int8Gemm/Int4Gemm take them).

        numpy operands (or host-side DLPack arrays such as CPU torch tensors, read as numpy): copied in,
        C returned as numpy (int32 for s8/s4; float32 for bf16/f16, whose operands are their 16-bit bit patterns
        or float16 values; with c16 the operands' 16-bit type: `operands.c_numpy_type`), or written into `c`
        when given, in order on `stream` (C is whole when run() returns).  GPU arrays: used in place, C
        allocated on the device when None (a DeviceBuffer), the launch asynchronous on `stream`.

        The first call of a problem kind on GPU operands (shapes, dtypes, K, splits, stream) makes a
        plan and keeps it when no operand's array interface named a producer stream other than the
        launch stream; later calls of that kind read three addresses and launch, without asking the
        interfaces again.  A call whose operands' interfaces name another stream waits for it and
        keeps no plan.  Given no `stream`, torch tensors launch on torch's current stream on their device
        (inside ``with torch.cuda.stream(s):`` on `s`: `runtime.streams.current_stream_of`), other arrays on
        the legacy default stream.
        """
        if c is not None and _run.launch_kept(self, a, b, c, k, splits, stream):  # a plan of this kind exists
            return c
        if stream is None:  # torch operands: torch's current stream (runtime.streams.current_stream_of)
            from ...runtime.streams import current_stream_of
            stream = current_stream_of((a, b, c))
        from ..operands import host_array, interpreter_hint
        a, b = host_array(a), host_array(b)
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            with interpreter_hint(self):
                out = _run.run(self, a, b, None if c is None else host_array(c), k=k, splits=splits, stream=stream)
            return out if c is None else c
        if c is None:
            from ...runtime import DeviceBuffer
            shapes = [getattr(x, "shape", None) for x in (a, b)]
            if not all(sh is not None and len(sh) == 2 for sh in shapes):  # the reader names what is wrong
                shapes = [_operands.gpu_view(x, what)[1] for x, what in ((a, "A"), (b, "B"))]
                if not all(len(sh) == 2 for sh in shapes):
                    raise ValidationError(f"A [M, K{'/2' if self.bits == 4 else ''}] and B [N, same] must be 2-D, "
                                          f"got {tuple(shapes[0])} and {tuple(shapes[1])}")
            m, n = shapes[0][0], shapes[1][0]
            c = DeviceBuffer.empty((m, n), _operands.c_numpy_type(self))
            if _run.launch_kept(self, a, b, c, k, splits, stream):
                return c
        _run.run_device(self, a, b, c, k=k, splits=splits, stream=stream)
        return c

    def reference(self, a, b, k: int | None = None) -> np.ndarray:
        """The exact product A . B^T of numpy operands in this schedule's format (as `run` and `interpret` take
        them), int64 for s8 and s4, float64 for bf16 and f16 (the kernel accumulates in f32): what to compare
        a result with, as `GemmSchedule.reference` is for the mma.sync schedules.  The operands are checked as
        `interpret` checks them."""
        from .operands import host_problem, reference
        host_problem(self, a, b, k)
        return reference(self, a, b)

    def interpret(self, a, b, c=None, *, k: int | None = None, splits: int = 1, order: str = "lowest-pc",
                  check: bool = True):
        """(C, report): C = A . B^T run by this kernel on the CPU interpreter, no GPU needed.

        Numpy operands (or CPU tensors: their memory read as numpy) as `run` takes them; C comes back as numpy
        (into `c` when given).  The launch is the
        one a plan makes (host tensor maps over the operands, the grid, the shared memory; with `splits` the
        K split and its reduction), and the report holds what the interpreter checked: check=True raises
        `interp.InterpError` at the first race, early read or missing fence.  order: the interpreter's
        thread order ("last-warpgroup-first" lets each consumer warpgroup run ahead of the others).  Small
        shapes: the interpreter runs every thread of every CTA (about a second per tile of K = 1024).
        """
        from ..operands import host_array
        from .interp_launch import interpret
        return interpret(self, host_array(a), host_array(b), None if c is None else host_array(c), k=k, splits=splits,
                         order=order, check=check)

    def plan(self, m: int, n: int, k: int, *, splits: int | None = None, stream=None):
        """A `HopperPlan`: this GEMM resolved once for an M x N x K problem on `stream`.

        ``plan(a, b, c)`` then checks shapes and alignment and launches (row sums, GEMM,
        split-K reduction as the configuration needs), encoding each buffer's tensor map once.
        It launches on `stream` without asking which stream produced the operands (no event, no
        sync, so it can be captured into a CUDA graph): produce them in order on that stream.
        """
        from ..operands import interpreter_hint
        from .plan import HopperPlan
        with interpreter_hint(self):
            return HopperPlan(self, m, n, k, splits=splits, stream=stream)

    @property
    def sums_module(self):
        """The row-sum kernel of the biased s4 path (`biased_row_sums`), or None."""
        if not self.biased:
            return None
        from .convert import sums_module
        return sums_module()

    @property
    def module(self):
        """The PTX module (cached per configuration)."""
        from .emit import module_for
        return module_for(self)

    def listing(self) -> str:
        """The PTX text."""
        return self.module.render().text


class Bf16Gemm(HopperGemm):
    """bf16 (or operand='f16') GEMM with f32 accumulation and f32 C, on sm_90a (TMA + wgmma).

    A [M, K], B [N, K] of 16-bit floats (torch bfloat16/float16 tensors, or numpy uint16 bit
    patterns).  `Bf16Gemm.for_shape(m, n, k)` gives the measured configuration.
    """

    def __init__(self, operand: str = "bf16", **kw):
        if operand not in ("bf16", "f16"):
            raise ValidationError(f"Bf16Gemm takes operand 'bf16' or 'f16', got {operand!r}; use Int8Gemm/Int4Gemm")
        super().__init__(operand, **kw)

    @classmethod
    def for_shape(cls, m: int, n: int, k: int, operand: str = "bf16", target=None, **overrides) -> "Bf16Gemm":
        """A configuration for an M x N x K problem (`configured`: the skinny ones for M <= 256, the large one
        where the overrides need it); overrides win.  target: None or "sm_90a" (the TMA + wgmma kernel's only
        target; another is refused), as `Int8Gemm.for_shape` takes one."""
        from .defaults import configured
        if target is not None and Target.parse(target).name != "sm_90a":
            raise ValidationError(f"Bf16Gemm is the TMA + wgmma kernel of sm_90a (H100/H200); "
                                  f"{Target.parse(target).name} has no wgmma, and the mma.sync schedules take integer "
                                  "operands only")
        return configured(cls, operand, m, n, k, overrides)  # (an integer operand: the constructor says what to use)
