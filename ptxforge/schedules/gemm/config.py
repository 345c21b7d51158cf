"""The parameter space of the integer GEMM schedules: compute paths and validation (device limits: `Target.limits`).

A compute path says which tensor-core instruction the kernel issues and how packed operands
reach it:

* ``native_s4`` / ``native_u4``: mma.sync m16n8k64 on 4-bit operands straight from ldmatrix.
  Native on sm_80..sm_89 (twice the int8 rate); on sm_90+ ptxas swaps in a software routine.
* ``s8_scaled``: each 4-bit nibble becomes 16*value as an s8 byte (3 ALU ops per register),
  two m16n8k32.s8 mmas per k64 step; the accumulators hold 256*C and one arithmetic shift
  at the end gives C.  Exact while |C| < 2**23, which holds for K < 131072.
* ``s8_signext``: exact sign extension of each nibble into a byte (7 ops per register); no
  range limit beyond int32.
* ``u8``: unsigned nibbles to bytes (3 ops per register), m16n8k32.u8.  For 8-bit u8 operands
  the same name means mma.sync m16n8k32.u8 straight from ldmatrix.
* ``s8``: 8-bit signed operands, mma.sync m16n8k32.s8 straight from ldmatrix.
"""

from __future__ import annotations

from dataclasses import dataclass

from ... import fold as F
from ...errors import ValidationError
from ...isa.targets import Target
from ...isa.tensor import S4_EMULATION_COST

# errors about the caller's parameters and arrays name the caller's line, not this file's
_PTXFORGE_INTERNAL = True


#: Largest K for which the scaled path is exact: |C| <= 64*K must stay below 2**23.
SCALED_K_LIMIT = 131072

#: The most bytes of each B row a pdl kernel asks L2 for before waiting on the previous kernel.
PDL_PREFETCH_MAX = 1 << 20

#: Bytes of one k-step of every path: ldmatrix reads 16 rows x 32 bytes for A (one m16n8k64 of
#: 4-bit values, or one m16n8k32 of 8-bit values).
KSTEP_BYTES = 32


@dataclass(frozen=True)
class ComputePath:
    """One way of computing the GEMM on tensor cores: the mma.sync shape and A/B type, how packed
    operands are unpacked for it, the final shift and the K limit (see the module docstring)."""
    name: str
    operand: str  # "s4", "u4", "s8", "u8"
    mma_shape: str
    mma_type: str  # A/B type of the mma instruction
    unpack: str | None  # None (operands go to the mma as loaded), "scaled", "signext", "u4"
    result_shift: int = 0  # arithmetic right shift applied to the accumulators at the end
    k_limit: int | None = None  # K must stay below this for exact results
    summary: str = ""

    @property
    def mmas_per_kstep(self) -> int:
        """mma instructions per 32-byte k-step for one m16 x n8 accumulator block."""
        return 2 if self.unpack else 1

    def native_on(self, target: Target) -> bool:
        """True when `target` runs this path's mma.sync in tensor-core hardware (not a ptxas routine)."""
        return self.mma_type not in ("s4", "u4") or target.mma_s4_native


PATHS = {
    ("s4", "native_s4"): ComputePath(
        "native_s4", "s4", "m16n8k64", "s4", None,
        summary="mma.sync m16n8k64.s4 straight from ldmatrix"),
    ("s4", "s8_scaled"): ComputePath(
        "s8_scaled", "s4", "m16n8k32", "s8", "scaled", result_shift=8, k_limit=SCALED_K_LIMIT,
        summary="nibbles unpacked to 16*value bytes (3 ops/register), 2x mma.sync m16n8k32.s8, "
                "C = acc >> 8 (exact for K < 131072)"),
    ("s4", "s8_signext"): ComputePath(
        "s8_signext", "s4", "m16n8k32", "s8", "signext",
        summary="nibbles sign-extended to bytes (7 ops/register), 2x mma.sync m16n8k32.s8"),
    ("u4", "native_u4"): ComputePath(
        "native_u4", "u4", "m16n8k64", "u4", None,
        summary="mma.sync m16n8k64.u4 straight from ldmatrix"),
    ("u4", "u8"): ComputePath(
        "u8", "u4", "m16n8k32", "u8", "u4",
        summary="nibbles zero-extended to bytes (3 ops/register), 2x mma.sync m16n8k32.u8"),
    ("s8", "s8"): ComputePath(
        "s8", "s8", "m16n8k32", "s8", None,
        summary="mma.sync m16n8k32.s8 straight from ldmatrix"),
    ("u8", "u8"): ComputePath(
        "u8", "u8", "m16n8k32", "u8", None,
        summary="mma.sync m16n8k32.u8 straight from ldmatrix"),
}

OPERANDS = ("s4", "u4", "s8", "u8")
SMEM_LAYOUTS = ("swizzle", "padded")


def operand_bits(operand: str) -> int:
    """Bits of one operand element: 4 for s4/u4, 8 for s8/u8."""
    return 4 if operand in ("s4", "u4") else 8


def paths_for(operand: str) -> tuple:
    """Names of the compute paths that take `operand` elements."""
    return tuple(name for (op, name) in PATHS if op == operand)


def default_path(operand: str, target: Target, k: int | None = None) -> tuple:
    """(path name, why) for an operand type on a target (and, when known, a K)."""
    if operand == "s4":
        if target.mma_s4_native:
            return "native_s4", f"{target.name} has native 4-bit tensor cores (IMMA.16864.S4, twice the int8 rate)"
        why = (f"{target.name} has no 4-bit tensor-core instruction (ptxas emulates mma.sync .s4 in software, "
               f"{S4_EMULATION_COST}), so nibbles are unpacked in registers and fed to m16n8k32.s8")
        if k is not None and k >= SCALED_K_LIMIT:
            return "s8_signext", why + f"; exact sign extension because K={k} >= {SCALED_K_LIMIT} " \
                                       "would overflow the scaled accumulators"
        return "s8_scaled", why + "; scaled unpack (3 ops/register, one shift at the end)"
    if operand == "u4":
        if target.mma_s4_native:
            return "native_u4", f"{target.name} has native 4-bit tensor cores (IMMA.16864.U4)"
        return "u8", (f"{target.name} has no 4-bit tensor-core instruction, so nibbles are zero-extended to "
                      "bytes in registers and fed to m16n8k32.u8")
    return operand, "8-bit operands go to mma.sync m16n8k32 straight from ldmatrix"


def resolve_path(operand: str, path: str | None, target: Target) -> ComputePath:
    """The `ComputePath` named `path` for `operand` (None: the target's default); raises
    ValidationError naming the paths that exist and those the operand takes."""
    if operand not in OPERANDS:
        raise ValidationError(f"operand type must be one of {OPERANDS}, got {operand!r}")
    if path is None:
        path = default_path(operand, target)[0]
    info = PATHS.get((operand, path))
    if info is None:
        known = sorted({name for (_, name) in PATHS})
        if path not in known:
            raise ValidationError(f"unknown compute path {path!r}; paths: {', '.join(known)}")
        raise ValidationError(f"compute path {path!r} does not take .{operand} operands; "
                              f".{operand} takes: {', '.join(paths_for(operand))}")
    return info


def _pow2(n) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and F.is_pow2(n)


def _int(name, v, least=1):
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
        raise ValidationError(f"{name} must be an int >= {least}, got {v!r}")


#: Accumulator registers one thread may hold (a 64x64 warp tile holds 128): beyond this ptxas
#: cannot keep the fragments and addresses in the 255 registers a thread has.
MAX_ACC_REGS = 128
#: Registers a thread needs besides its accumulators: fragments of one k-step, addresses, predicates.
REG_MARGIN = 56


def validate(s) -> None:
    """Check a schedule's parameters; raise ValidationError naming the first problem and a fix."""
    for name in ("block_m", "block_n", "block_k", "warps_m", "warps_n", "stages", "raster_group"):
        _int(name, getattr(s, name))
    target = s.target
    resolve_path(s.operand, s.path, target)  # raises for a path the operand type does not take
    bits = operand_bits(s.operand)
    if s.smem_layout not in SMEM_LAYOUTS:
        raise ValidationError(f"smem_layout must be one of {SMEM_LAYOUTS}, got {s.smem_layout!r}")
    if s.stages < 2:
        raise ValidationError(f"stages={s.stages}: the cp.async pipeline needs at least 2 stages "
                              "(one being computed while the next loads)")
    if s.stages > 8:
        raise ValidationError(f"stages={s.stages}: at most 8 pipeline stages")
    for name in ("warps_m", "warps_n"):
        if not _pow2(getattr(s, name)):
            raise ValidationError(f"{name}={getattr(s, name)} must be a power of two (1, 2, 4, 8)")
    threads = 32 * s.warps_m * s.warps_n
    if threads > 1024:
        raise ValidationError(f"warps_m*warps_n = {s.warps_m * s.warps_n} warps = {threads} threads; "
                              "a CTA has at most 1024 threads (32 warps)")
    kstep = KSTEP_BYTES * 8 // bits  # elements per k-step: 64 int4, 32 int8
    if s.block_k % kstep or not _pow2(s.block_k):
        raise ValidationError(
            f"block_k={s.block_k} must be a power of two and a multiple of {kstep} .{s.operand} elements "
            f"(one mma k-step reads {KSTEP_BYTES} bytes per row): e.g. {kstep}, {2 * kstep}, {4 * kstep}")
    if s.block_k * bits // 8 > 512:
        raise ValidationError(f"block_k={s.block_k} .{s.operand} is {s.block_k * bits // 8} bytes per row; "
                              "at most 512 bytes per row per stage")
    if s.block_m % s.warps_m or s.block_n % s.warps_n:
        raise ValidationError(f"block {s.block_m}x{s.block_n} does not split into a {s.warps_m}x{s.warps_n} "
                              "grid of warp tiles")
    wm, wn = s.block_m // s.warps_m, s.block_n // s.warps_n
    if wm % 16:
        raise ValidationError(f"warp tile M = block_m/warps_m = {wm} is not a multiple of 16 (the mma M); "
                              f"make block_m a multiple of {16 * s.warps_m}")
    if wn % 16:
        raise ValidationError(f"warp tile N = block_n/warps_n = {wn} is not a multiple of 16 (ldmatrix.x4 loads "
                              f"two n8 mma blocks); make block_n a multiple of {16 * s.warps_n}")
    acc = wm * wn // 32
    budget = min(255, 65536 // threads // 8 * 8)  # a CTA of `threads` must fit one SM's registers
    most = min(MAX_ACC_REGS, budget - REG_MARGIN)
    if acc > most:
        raise ValidationError(f"warp tile {wm}x{wn} needs {acc} s32 accumulator registers per thread; with "
                              f"{threads} threads a thread has {budget} registers, so at most {max(most, 0)} "
                              f"accumulators fit beside fragments and addresses: use a smaller warp tile")
    if s.copy_bytes not in (16, 8, 4, 2, 1):
        raise ValidationError(f"copy_bytes must be 16, 8, 4, 2 or 1, got {s.copy_bytes!r}")
    if s.c_vector not in (1, 2):
        raise ValidationError(f"c_vector must be 2 (pairs of C values, N even) or 1 (any N), got {s.c_vector!r}")
    from .splitk import MAX_SPLITS
    if not isinstance(s.splits, int) or isinstance(s.splits, bool) or not 1 <= s.splits <= MAX_SPLITS:
        raise ValidationError(f"splits must be an int in 1..{MAX_SPLITS} (CTAs per C tile along K), got {s.splits!r}")
    if s.splitk_sync not in ("all", "leader"):
        raise ValidationError(f"splitk_sync must be 'all' (every thread fences) or 'leader' (thread 0 fences), "
                              f"got {s.splitk_sync!r}")
    if s.l2_prefetch not in (None, 64, 128, 256):
        raise ValidationError(f"l2_prefetch must be None, 64, 128 or 256 (the cp.async .L2::<n>B hint), "
                              f"got {s.l2_prefetch!r}")
    if not isinstance(s.pdl, bool):
        raise ValidationError(f"pdl must be True or False, got {s.pdl!r}")
    if s.pdl and target.sm < 90:
        raise ValidationError(f"pdl=True (programmatic dependent launch: griddepcontrol) needs sm_90 or newer; "
                              f"the target is {target.name}")
    p = s.pdl_prefetch
    if not isinstance(p, int) or isinstance(p, bool) or p < 0 or p % 16 or p > PDL_PREFETCH_MAX:
        raise ValidationError(f"pdl_prefetch must be a multiple of 16 bytes in 0..{PDL_PREFETCH_MAX}, got {p!r}")
    if p and not s.pdl:
        raise ValidationError("pdl_prefetch asks L2 for B before the wait on the previous kernel: it needs pdl=True")
    if s.max_registers is not None and not (isinstance(s.max_registers, int) and 16 <= s.max_registers <= 255):
        raise ValidationError(f"max_registers must be an int in 16..255 or None, got {s.max_registers!r}")
    lim = target.limits
    smem = s.shared_bytes
    if smem > lim.shared_per_cta:
        raise ValidationError(
            f"{s.stages} stages of {s.block_m}x{s.block_k} + {s.block_n}x{s.block_k} .{s.operand} tiles need "
            f"{smem} bytes of shared memory; {target.name} allows at most {lim.shared_per_cta} per CTA: "
            "use fewer stages or smaller tiles")
