"""Integer GEMM schedules: C[M, N] (s32) = A[M, K] . B[N, K]^T with both operands K-contiguous ("NT").

`Int4Gemm` takes packed 4-bit operands (two per byte, even k in the low nibble; s4 by default,
u4 too), `Int8Gemm` 8-bit ones through the same machinery, so the two compare on equal footing.

    g = Int4Gemm()                          # 128x128x64 tiles, 3 stages, 4 warps of 64x64, sm_90
    g.path, g.path_reason                   # 's8_scaled', why
    print(g.listing())                      # the PTX, each line with the Python line that wrote it
    print(g.assemble())                     # registers, spills, shared memory, CTAs per SM (sm_90)
    print(g.retarget("sm_80").assemble())   # the same tiles re-emitted for another target
    c = g.run(a_packed, b_packed)           # numpy or GPU arrays; exact int32 result
    Int4Gemm.for_shape(32, 8192, 8192)      # a configuration chosen for a problem shape

One kernel serves every M, N and K of one alignment class: they are kernel parameters.  K whose
packed rows are a multiple of 16 bytes (K % 32 == 0 for 4-bit) use 16-byte cp.async; other K
get a kernel with narrower copies (`copy_bytes`), chosen by `run` and `for_problem`.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ...copy.layout import SmemLayout
from ...errors import ValidationError
from ...isa.targets import Target
from ...isa.types import is_integer
from ...isa.tensor import S4_EMULATION_COST, EmulatedInstructionWarning
from ..operands import check_parameters, check_sizes
from . import run as _run
from .config import (KSTEP_BYTES, SCALED_K_LIMIT, ComputePath, default_path, operand_bits,
                          resolve_path, validate)

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True)
class GemmSchedule:
    """Parameters of the tiled integer GEMM kernel (see the module docstring).

    block_m, block_n: the CTA's C tile; block_k: k-tile in operand elements (int4 values for
    4-bit operands); warps_m x warps_n warps each own a (block_m/warps_m) x (block_n/warps_n)
    warp tile; stages: depth of the cp.async pipeline; path: compute path (None: the target's
    default, see `path_reason`); smem_layout: "swizzle" (XOR of 16-byte chunks, no waste) or
    "padded" (16 bytes after each row); target: the PTX target (a `Target`; a string such as
    "sm_90" is parsed once, here); operand: "s4"/"u4" (Int4Gemm),
    "s8"/"u8" (Int8Gemm); raster_group: CTAs walk groups of this many tile rows for L2 reuse (1:
    a plain 2-D grid); copy_bytes: widest global->shared copy (16 unless K forbids it);
    c_vector: 2 stores C in aligned pairs (N even), 1 value by value (any N); max_registers:
    optional .maxnreg cap; splits: CTAs per C tile along K (grid z), each a K range, the last to
    finish summing the partials (``schedules.gemm.splitk``; needs the `splitk_workspace`);
    splitk_sync: how the split CTAs hand over their partials, "all" (every thread's membar.gl) or
    "leader" (thread 0 alone: fence.acq_rel.gpu around a relaxed atomic); l2_prefetch: None, 64, 128
    or 256, the cp.async `.L2::<n>B` hint (L2 fetches that many bytes around each copy); pdl:
    a programmatic dependent launch (sm_90+: the kernel executes `griddepcontrol.wait` before its
    first global access and `griddepcontrol.launch_dependents` after it, and plans launch it with
    the programmatic-serialization attribute, so its start overlaps the end of the kernel ahead of
    it in the stream; see ``ptxforge.runtime.dependent``); pdl_prefetch: bytes of each of the
    CTA's B rows (from its first k) to ask L2 for before the wait (0: none; a multiple of 16;
    needs pdl).  `run` and `for_problem` pick copy_bytes and c_vector for a problem.
    """

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 3
    path: str | None = None
    smem_layout: str = "swizzle"
    target: Target | str = "sm_90"
    operand: str = "s4"
    raster_group: int = 8
    copy_bytes: int = 16
    c_vector: int = 2
    max_registers: int | None = None
    splits: int = 1
    splitk_sync: str = "all"
    l2_prefetch: int | None = None
    pdl: bool = False
    pdl_prefetch: int = 0

    #: operands this class takes, and the sibling to point to for the others (set by subclasses)
    OPERANDS: ClassVar[tuple] = ()
    SIBLING: ClassVar[str] = ""

    def __post_init__(self):
        self._check_operand(self.operand)
        object.__setattr__(self, "target", Target.parse(self.target))
        for f in dataclasses.fields(self):  # a numpy integer is kept as the int it is (as HopperGemm keeps it)
            v = getattr(self, f.name)
            if isinstance(v, np.integer):
                object.__setattr__(self, f.name, int(v))
        validate(self)

    @classmethod
    def _check_operand(cls, operand) -> None:
        """Raise a ValidationError unless this class takes `operand` (naming the sibling class that does)."""
        if cls.OPERANDS and operand not in cls.OPERANDS:
            raise ValidationError(f"{cls.__name__} takes operand {' or '.join(repr(o) for o in cls.OPERANDS)}, got "
                                  f"{operand!r}; use {cls.SIBLING}")

    # ------------------------------------------------------------ derived geometry
    @property
    def bits(self) -> int:
        """Bits of one operand element (4 or 8)."""
        return operand_bits(self.operand)

    @property
    def threads(self) -> int:
        """Threads of one CTA (32 per warp)."""
        return 32 * self.warps_m * self.warps_n

    @property
    def block(self) -> tuple:
        """The CTA shape, (threads, 1, 1)."""
        return (self.threads, 1, 1)

    @property
    def warp_m(self) -> int:
        """Rows of one warp's C tile."""
        return self.block_m // self.warps_m

    @property
    def warp_n(self) -> int:
        """Columns of one warp's C tile."""
        return self.block_n // self.warps_n

    @property
    def row_bytes_k(self) -> int:
        """Bytes of one tile row per k-tile."""
        return self.block_k * self.bits // 8

    @property
    def ksteps(self) -> int:
        """mma k-steps (32 bytes of every tile row each) per k-tile."""
        return self.row_bytes_k // KSTEP_BYTES

    @property
    def layouts(self) -> tuple:
        """SmemLayout of the A tile and of the B tile of one stage."""
        return (SmemLayout(self.block_m, self.row_bytes_k, self.smem_layout),
                SmemLayout(self.block_n, self.row_bytes_k, self.smem_layout))

    @property
    def stage_layout(self):
        """The pipeline's shared memory as a `StageLayout` (region offsets of the A and B tiles)."""
        from .stage import StageLayout
        return StageLayout.of(self)

    @property
    def stage_bytes(self) -> int:
        """Shared memory of one pipeline stage (A tile + B tile)."""
        return self.stage_layout.stage_bytes

    @property
    def shared_bytes(self) -> int:
        """Dynamic shared memory of one CTA (all stages)."""
        return self.stage_layout.total_bytes

    @property
    def accumulators(self) -> int:
        """s32 accumulator registers per thread."""
        return self.warp_m * self.warp_n // 32

    @property
    def mma_count(self) -> int:
        """mma.sync instructions in the kernel (the main loop's body appears once): per k-step,
        one per (m16 block, n8 block) of the warp tile, times the path's mmas per k-step."""
        return self.ksteps * (self.warp_m // 16) * (self.warp_n // 8) * self.compute_path.mmas_per_kstep

    def grid(self, m: int, n: int) -> tuple:
        """The launch grid for an M x N problem: 2-D, or 1-D for raster groups."""
        tm, tn = -(-m // self.block_m), -(-n // self.block_n)
        if self.raster_group == 1:
            return (tn, tm, self.splits)
        return (tm * tn, 1, self.splits)

    def splitk_workspace(self, m: int, n: int, stream: int = 0):
        """The extra kernel arguments of an M x N launch: () without split-K, else the (partials,
        counters) DeviceBuffers of a `SplitKWorkspace` kept for (this tiling, M, N, stream)."""
        if self.splits == 1:
            return ()
        from .splitk import workspace_for
        return workspace_for(self, m, n, stream).args

    # ------------------------------------------------------------ the compute path
    @property
    def compute_path(self) -> ComputePath:
        """The `ComputePath` this schedule emits (the target's default when `path` is None)."""
        return resolve_path(self.operand, self.path, self.target)

    @property
    def path_name(self) -> str:
        """The compute path's name."""
        return self.compute_path.name

    @property
    def path_reason(self) -> str:
        """Why this compute path: the default's reason on this target (for the K that chose it), or the caller's
        choice; and where `for_shape` gave an sm_90a problem this schedule rather than the TMA + wgmma one, why."""
        why = self._path_why()
        not_hopper = self.__dict__.get("_not_hopper")  # (set by for_shape; equality and hashing ignore it)
        return why if not_hopper is None else f"{why}; not the TMA + wgmma path: {not_hopper}"

    def _path_why(self) -> str:
        t = self.target
        p = self.compute_path
        if self.path is None:
            return default_path(self.operand, t)[1]
        k = self.__dict__.get("_path_for_k")  # the K for_problem chose this path for
        if k is not None:
            return default_path(self.operand, t, k)[1]
        if not p.native_on(t):
            return (f"chosen by the caller; on {t.name} mma.sync .{p.mma_type} is emulated by ptxas "
                    f"(a software routine per mma, {S4_EMULATION_COST})")
        return "chosen by the caller"

    @property
    def kernel_name(self) -> str:
        """The kernel's entry name, spelling out every parameter that changes its code."""
        lay = "swz" if self.smem_layout == "swizzle" else "pad"
        name = (f"gemm_{self.operand}_{self.path_name}_{self.block_m}x{self.block_n}x{self.block_k}"
                f"_w{self.warps_m}x{self.warps_n}_s{self.stages}_{lay}_c{self.copy_bytes}v{self.c_vector}"
                f"_g{self.raster_group}")
        if self.max_registers:
            name += f"_r{self.max_registers}"
        if self.splits > 1:
            name += f"_k{self.splits}" + ("l" if self.splitk_sync == "leader" else "")
        if self.l2_prefetch:
            name += f"_p{self.l2_prefetch}"
        if self.pdl:
            name += f"_dl{self.pdl_prefetch or ''}"
        return name

    # ------------------------------------------------------------ emission
    def emit(self, *, epilogue=None):
        """Build the kernel: a Module with one entry, `kernel_name`.

        Parameters: a, b (packed operands, u64), c (s32 output), m, n, k (u32, k in elements).
        Launch with `grid(m, n)`, `block` and `shared_bytes` of dynamic shared memory.
        epilogue: what the kernel does with its finished accumulators (see
        `ptxforge.schedules.gemm.kernel.build_kernel`; default: `store_c`, the s32 C store).  A
        custom epilogue may add its own kernel parameters after these; `module`, `run` and
        `kernel` always use the default one.
        """
        from ...module import Module
        from .kernel import build_kernel
        kernel = build_kernel(self, epilogue=epilogue).finish()
        p = self.compute_path
        if not p.native_on(self.target):
            n = self.mma_count
            warnings.warn(EmulatedInstructionWarning(
                f"{self.kernel_name}: its {n} mma.sync.{p.mma_shape}.{p.mma_type} instructions run as a ptxas "
                f"software routine on {self.target} ({S4_EMULATION_COST}); the default path there is "
                f"{default_path(self.operand, self.target)[0]}"), stacklevel=2)
        return Module([kernel])

    @property
    def module(self):
        """The emitted Module, built once per schedule."""
        return _module_for(self)

    def ptx(self) -> str:
        """The PTX text of `module`."""
        return str(self.module)

    def listing(self, **kwargs) -> str:
        """The PTX with each line's Python source (see `Module.listing`)."""
        return self.module.listing(**kwargs)

    def instruction_mix(self) -> dict:
        """{opcode: count} over the kernel's instructions (each appears once, loops not unrolled)."""
        mix: dict = {}
        for ins in self.module.kernels[0].instructions:
            mix[ins.opcode] = mix.get(ins.opcode, 0) + 1
        return dict(sorted(mix.items(), key=lambda kv: -kv[1]))

    def assemble(self, *, backend: str = "auto") -> "GemmReport":
        """Assemble this schedule's kernel offline for its own target and report the resources.

        For another target, re-emit first: `schedule.retarget("sm_80").assemble()` (the default
        compute path follows the target).  `ptxforge.assemble(module, arch)` is the other
        meaning of an arch: existing text assembled as it is.
        """
        from ...assembler import assemble
        return GemmReport(self, assemble(self.module, backend=backend))

    def retarget(self, target) -> "GemmSchedule":
        """The same tiles for another target (a `Target` or a name such as "sm_80"), re-validated
        against its limits; emission then follows that target (default path, instruction checks)."""
        return dataclasses.replace(self, target=Target.parse(target))

    # ------------------------------------------------------------ problems
    def _check_sizes(self, m, n, k) -> None:
        check_sizes(m, n, k, least_k=0)
        if self.bits == 4 and k % 2:
            raise ValidationError(f"K={k} is odd: packed 4-bit rows must be whole bytes (two values per byte); "
                                  f"pad K to {k + 1} with zeros")

    def check_problem(self, m: int, n: int, k: int) -> None:
        """Raise ValidationError when this kernel cannot compute an M x N x K problem exactly."""
        self._check_sizes(m, n, k)
        p = self.compute_path
        if p.k_limit is not None and k >= p.k_limit:
            raise ValidationError(f"path {p.name} is exact only for K < {p.k_limit} (the scaled accumulators "
                                  f"hold 256*C); K={k}: use path='s8_signext'")
        if max(m, n, k) >= 2 ** 31:
            raise ValidationError("M, N and K must be below 2**31")
        if self.raster_group == 1 and -(-m // self.block_m) > 65535:
            raise ValidationError(f"M={m} needs {-(-m // self.block_m)} tile rows, more than a grid's y dimension "
                                  "holds (65535): use raster_group > 1 (a 1-D grid)")

    def for_problem(self, k: int, n: int | None = None, *, align: int = 16, c_align: int = 16) -> "GemmSchedule":
        """The variant of this schedule that runs a problem with this K (and N).

        align: alignment (bytes) of the A and B base addresses; c_align: of C.  Keeps this
        schedule's copy width and C pair stores where the problem allows them and narrows them
        where it does not (packed rows not a multiple of the width, odd N, misaligned bases);
        when the path is the default, takes the exact sign-extension path for K too large for
        the scaled one.
        """
        self._check_sizes(1, 1 if n is None else n, k)
        for name, v in (("align", align), ("c_align", c_align)):
            if not is_integer(v) or v < 1 or v & (v - 1):
                raise ValidationError(f"{name} is the alignment in bytes the addresses will have, a power of two "
                                      f"(1, 2, 4, 8, 16, ...), got {v!r}")
        row_bytes = k * self.bits // 8
        w = self.copy_bytes
        while w > 1 and (row_bytes % w or align % w):
            w //= 2
        changes = {}
        if w != self.copy_bytes:
            changes["copy_bytes"] = w
        if n is not None:
            vec = 2 if n % 2 == 0 and c_align % 8 == 0 and self.c_vector == 2 else 1
            if vec != self.c_vector:
                changes["c_vector"] = vec
        k_path = self.path is None and self.operand == "s4" and k >= SCALED_K_LIMIT and not self.target.mma_s4_native
        if k_path:
            changes["path"] = "s8_signext"
        v = dataclasses.replace(self, **changes) if changes else self
        if k_path:  # (path_reason says why; an attribute beside the fields, so equality and hashing ignore it)
            object.__setattr__(v, "_path_for_k", k)
        return v

    @classmethod
    def for_shape(cls, m: int, n: int, k: int, target=None, *, hopper=None, **overrides) -> "GemmSchedule":
        """A configuration for an M x N x K problem (see `choose_config`); `overrides` win.

        target: a `Target` or name; None means this machine's GPU with its architecture-specific
        features (`runtime.native_target`: sm_90a on an H100/H200), or sm_90 without a GPU.

        On target sm_90a (H100/H200) with no other overrides than `operand`, an s8 or s4 problem
        whose operand rows are a multiple of 16 bytes gets the TMA + wgmma schedule
        (`schedules.hopper.HopperGemm`, about 1.7x the mma.sync path at 8192^3 for s8; its
        `path_reason` says why); `hopper=False` keeps mma.sync, `hopper=True` asks for the Hopper
        path on any sm_90 target and raises when the problem does not fit it (or the target is not sm_90:
        wgmma is sm_90a's); its `overrides` are then HopperGemm parameters (an mma.sync one is refused by name).
        An `operand` this class does not take is refused, whichever path the target gets.
        """
        from .tuning import choose_config
        check_sizes(m, n, k, who="for_shape: ")
        operand = overrides.get("operand", cls.__dataclass_fields__["operand"].default)
        cls._check_operand(operand)
        if target is None:
            from ...runtime.device import native_target
            target = native_target()
        t = Target.parse(target)
        if hopper or (hopper is None and t.name == "sm_90a" and set(overrides) <= {"operand"}):
            from ..hopper.tuning import choose_hopper, hopper_reason
            if hopper:
                if t.sm != 90:
                    raise ValidationError(f"hopper=True: the TMA + wgmma path runs on sm_90a (H100/H200) only, not "
                                          f"{t.name}; leave hopper out (or False) for {t.name}'s mma.sync kernels")
                options = {name: v for name, v in overrides.items() if name != "operand"}
                from ..hopper import HopperGemm
                check_parameters(HopperGemm, options, "hopper=True builds a HopperGemm: pass its parameters "
                                 "(block_n, stages, epilogue, ...), or hopper=False for the mma.sync schedule")
                try:
                    return choose_hopper(m, n, k, operand, **options)
                except ValidationError as e:
                    raise ValidationError(f"the Hopper TMA + wgmma path cannot take this problem: {e.message}") from None
            wgmma, not_hopper = hopper_reason(m, n, k, operand)
            if wgmma:
                return choose_hopper(m, n, k, operand)
        else:
            not_hopper = None
        check_parameters(cls, overrides, "the TMA + wgmma schedule's options are HopperGemm's (hopper=True on sm_90a)")
        params = choose_config(m, n, k, Target.parse(target), operand, overrides.get("path"))
        params.update(overrides)
        params["target"] = Target.parse(target)
        g = cls(**params).for_problem(k, n)
        if not_hopper is not None:  # (path_reason says why an sm_90a problem got this schedule)
            object.__setattr__(g, "_not_hopper", not_hopper)
        return g

    # ------------------------------------------------------------ reference and running
    def reference(self, a, b, k: int | None = None) -> np.ndarray:
        """The exact product (int64) of numpy operands in this schedule's format, read as the kernel reads them
        (8-bit bytes as .s8 or .u8 values whatever the arrays' signedness); the operands are checked as
        `interpret` checks them."""
        from ...int4 import exact_matmul_nt, reference_gemm
        _, _, k = _run.host_problem(self, a, b, k, "for the numpy reference")
        if self.bits == 4:
            return reference_gemm(a, b, k, signed=self.operand == "s4")
        as_read = np.int8 if self.operand == "s8" else np.uint8
        return exact_matmul_nt(a.view(as_read), b.view(as_read))

    def run(self, a, b, c=None, *, k: int | None = None, stream=None):
        """C = A . B^T on the GPU.  a: [M, K/2] packed bytes (4-bit) or [M, K] (8-bit); b: [N, ...].

        Numpy inputs are copied to the device and the result comes back as a numpy int32 array
        (into `c` when given).  GPU arrays (DeviceBuffer, __cuda_array_interface__, DLPack) are
        used in place; `c` is then a GPU int32 [M, N] array (allocated when None) and the launch is
        asynchronous on `stream` (None: torch's current stream for torch tensors, else the legacy default
        stream).  `k` is the logical K (default: from the row length).

        With GPU operands and `c` given, the first call of a problem kind (shapes, dtypes,
        alignment class, device, stream) resolves a `GemmPlan` and keeps it; later calls of that
        kind only read the three addresses and launch (see ``ptxforge.schedules.gemm.plan`` for
        how operands are read quickly and when stream ordering sends a call the careful way).
        """
        return _run.run_gemm(self, a, b, c, k=k, stream=stream)

    def interpret(self, a, b, c=None, *, k: int | None = None, order: str = "lowest-pc", check: bool = True):
        """(C, report): C = A . B^T run by this schedule's kernel on the CPU interpreter, no GPU needed.

        Numpy operands (or CPU tensors: their memory read as numpy) as `run` takes them (checked the same way);
        C comes back as a numpy int32 array
        (into `c` when given, else a new one poisoned so that an element the kernel leaves shows).  The
        kernel is the variant `run` would launch (`for_problem`), on the same grid and shared memory; a
        split-K schedule gets its workspace as zeroed host arrays.  check=True raises `interp.InterpError`
        at the first finding (a race, a read of cp.async data before its wait, an out-of-bounds access);
        check=False collects them in the report.  order: the interpreter's thread order (`interp.run`).
        """
        from ..operands import host_array
        return _run.interpret_gemm(self, host_array(a), host_array(b), None if c is None else host_array(c), k=k,
                                   order=order, check=check)

    def plan(self, m: int, n: int, k: int, *, align: int = 16, c_align: int = 16, stream=None):
        """A `GemmPlan`: this GEMM resolved once for an M x N x K problem on GPU operands.

        The plan picks the variant for the problem (``for_problem``), loads its kernel and packs
        the launch; ``plan(a, b, c)`` then checks the operands' shapes, dtypes and alignment
        class cheaply and issues one ``cuLaunchKernel`` on `stream` (no allocation, no sync:
        it can be captured into a CUDA graph; nor does it ask which stream produced the operands:
        produce them in order on `stream`).  align / c_align: the least alignment in bytes the
        A/B and C base addresses will have, a power of two (16 lets the widest copies and C pair stores
        run).  Without a GPU the error says that `interpret` runs the same kernel on the CPU.
        """
        from ..operands import interpreter_hint
        from .plan import GemmPlan
        with interpreter_hint(self):
            return GemmPlan(self, m, n, k, align=align, c_align=c_align, stream=stream)

    def kernel(self):
        """This schedule's kernel loaded on the GPU (a KernelFunction; see `emit` for its parameters)."""
        from ..operands import interpreter_hint
        from .run import load_kernel
        with interpreter_hint(self):
            return load_kernel(self)

    def describe(self) -> str:
        """One line: tiles, warps, stages, layout, shared memory, target and compute path."""
        p = self.compute_path
        return (f"{type(self).__name__} {self.block_m}x{self.block_n}x{self.block_k} .{self.operand}, "
                f"{self.warps_m}x{self.warps_n} warps ({self.warp_m}x{self.warp_n} each, {self.threads} threads), "
                f"{self.stages} stages, {self.smem_layout}, {self.shared_bytes} B shared, {self.target}, "
                f"path {p.name} ({p.summary})")


@dataclass(frozen=True)
class Int4Gemm(GemmSchedule):
    """Packed 4-bit GEMM on mma.sync (s4 by default; operand='u4' for unsigned): A is M x K, B is N x K, both
    two values per byte (`ptxforge.int4.pack_int4`), C = A . B^T in int32.

    The parameters are `GemmSchedule`'s (tile, warps, stages, path, layout, target, split K, pdl ...).  Start
    from `Int4Gemm.for_shape(m, n, k, target=...)`, which picks them for a problem (on sm_90a a `HopperGemm`,
    the fast path there, and says why); then `run(a, b, c)`, or `plan(m, n, k)` once for loops and graphs."""

    OPERANDS: ClassVar[tuple] = ("s4", "u4")
    SIBLING: ClassVar[str] = "Int8Gemm for 8-bit operands"
    operand: str = "s4"


@dataclass(frozen=True)
class Int8Gemm(GemmSchedule):
    """8-bit GEMM on mma.sync (s8 by default; operand='u8' for unsigned): A is M x K, B is N x K, C = A . B^T
    in int32.

    The parameters are `GemmSchedule`'s (tile, warps, stages, path, layout, target, split K, pdl ...).  Start
    from `Int8Gemm.for_shape(m, n, k, target=...)`, which picks them for a problem (on sm_90a a `HopperGemm`,
    the fast path there, and says why); then `run(a, b, c)`, or `plan(m, n, k)` once for loops and graphs."""

    OPERANDS: ClassVar[tuple] = ("s8", "u8")
    SIBLING: ClassVar[str] = "Int4Gemm for packed 4-bit operands"
    operand: str = "s8"


@functools.lru_cache(maxsize=64)
def _module_for(s: GemmSchedule):
    return s.emit()


@dataclass(frozen=True)
class GemmReport:
    """What the assembler says about one schedule's kernel."""

    schedule: GemmSchedule
    assembly: object  # AssemblyResult

    @property
    def arch(self) -> str:
        """The arch the kernel was assembled for."""
        return self.assembly.arch

    @property
    def resources(self):
        """The assembler's `KernelResources` of the kernel."""
        return self.assembly.resources(self.schedule.kernel_name)

    @property
    def registers(self) -> int:
        """Registers per thread."""
        return self.resources.registers

    @property
    def spills(self) -> int:
        """Bytes spilled (stores + loads)."""
        return self.resources.spills

    @property
    def ctas_per_sm(self) -> int:
        """CTAs one SM holds at once with these registers and this shared memory (`DeviceLimits.resident_ctas`)."""
        s = self.schedule
        return Target.parse(self.arch).limits.resident_ctas(s.threads, self.registers, s.shared_bytes)

    def sass_opcodes(self):
        """Counter of the kernel's SASS opcodes with their modifiers (e.g. 'IMMA.16832.S8.S8')."""
        return self.assembly.sass_opcodes(self.schedule.kernel_name)

    def __str__(self) -> str:
        r, s = self.resources, self.schedule
        return (f"{self.arch}: {r.registers} registers, spills {r.spill_stores} B stored / {r.spill_loads} B loaded, "
                f"{r.stack} B stack, {s.shared_bytes} B dynamic shared memory, {s.threads} threads, "
                f"{self.ctas_per_sm} CTA(s)/SM, path {s.path_name}")

