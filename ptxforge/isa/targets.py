"""GPU targets, PTX ISA versions and the requirements instruction forms declare.

Every instruction form states the least architecture and PTX ISA version it
needs (a `Requirement`).  A module's `.version` is the least version that
covers its target and everything it contains; a cap (from the assembler or
the driver) bounds it from above.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import TargetError
from .quick_init import quick_init

_PTXFORGE_INTERNAL = True


@dataclass(frozen=True, order=True)  # generated comparisons: the version walk runs once per instruction
class PtxVersion:
    """A PTX ISA version, the number of the ``.version`` directive (ordered: ``V("7.8") < V("8.0")``)."""
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @staticmethod
    def parse(v: "PtxVersion | str | float | tuple") -> "PtxVersion":
        """A PtxVersion from "8.0", 8.0, (8, 0) or a PtxVersion; a TargetError says how to write it otherwise.
        """
        if isinstance(v, PtxVersion):
            return v
        if isinstance(v, tuple):
            return PtxVersion(int(v[0]), int(v[1]))
        m = re.fullmatch(r"(\d+)\.(\d+)", str(v))
        if not m:
            raise TargetError(f"cannot read PTX ISA version {v!r}; write it like '8.0'")
        return PtxVersion(int(m.group(1)), int(m.group(2)))


def V(s: str) -> PtxVersion:
    """Shorthand for `PtxVersion.parse`: ``V("8.0")``."""
    return PtxVersion.parse(s)


#: PTX ISA versions that released assemblers accept (ptxas 13.0 rejects 6.6-6.9, 7.9 and 8.9).
RELEASED_VERSIONS = tuple(V(s) for s in (
    "6.0", "6.1", "6.2", "6.3", "6.4", "6.5",
    "7.0", "7.1", "7.2", "7.3", "7.4", "7.5", "7.6", "7.7", "7.8",
    "8.0", "8.1", "8.2", "8.3", "8.4", "8.5", "8.6", "8.7", "8.8",
    "9.0", "9.1", "9.2",
))

# CUDA release (major*1000 + minor*10, as the driver API reports) -> PTX ISA it speaks.
_CUDA_TO_PTX = {
    11000: "7.0", 11010: "7.1", 11020: "7.2", 11030: "7.3", 11040: "7.4", 11050: "7.5",
    11060: "7.6", 11070: "7.7", 11080: "7.8", 12000: "8.0", 12010: "8.1", 12020: "8.2",
    12030: "8.3", 12040: "8.4", 12050: "8.5", 12060: "8.5", 12080: "8.7", 12090: "8.8",
    13000: "9.0", 13010: "9.1", 13020: "9.2",
}


def ptx_for_cuda(version: int) -> PtxVersion:
    """The newest PTX ISA that a CUDA release (e.g. 13000 from cuDriverGetVersion) accepts."""
    best = None
    for cuda, ptx in sorted(_CUDA_TO_PTX.items()):
        if cuda <= version:
            best = ptx
    if best is None:
        raise TargetError(f"CUDA {version} is older than 11.0; ptxforge needs CUDA 11.0 or newer")
    return V(best)


@dataclass(frozen=True)
class Target:
    """A `.target`: compute capability plus an optional arch-specific 'a' suffix."""

    sm: int
    arch_specific: bool = False

    @property
    def name(self) -> str:
        """The ``.target`` spelling: ``sm_90``, or ``sm_90a`` for the arch-specific target."""
        return f"sm_{self.sm}{'a' if self.arch_specific else ''}"

    def __str__(self) -> str:
        return self.name

    @property
    def min_ptx(self) -> PtxVersion:
        """The least ``.version`` that ptxas accepts for this ``.target`` (sm_80: 7.0, sm_90: 7.8, sm_90a: 8.0
        ...).
        """
        key = self.name if self.name in _TARGET_MIN_PTX else f"sm_{self.sm}"
        return _TARGET_MIN_PTX[key]

    @staticmethod
    def parse(t: "Target | str") -> "Target":
        """A Target from "sm_90", "sm_90a", "compute_80", "90" or a Target; a TargetError lists the supported
        targets otherwise.
        """
        if isinstance(t, Target):
            return t
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(a?)", str(t).strip())
        if not m:
            raise TargetError(f"cannot read target {t!r}; write it like 'sm_90' or 'sm_90a'")
        tgt = Target(int(m.group(1)), m.group(2) == "a")
        if tgt.name not in _TARGET_MIN_PTX:
            raise TargetError(
                f"target {tgt.name} is not supported; supported targets: {', '.join(SUPPORTED_TARGETS)}")
        return tgt

    @property
    def mma_s4_native(self) -> bool:
        """Whether mma.sync with 4-bit integer operands (.s4/.u4) runs on tensor cores.

        True for sm_80, sm_86, sm_87 and sm_89.  From sm_90 on, ptxas still accepts those forms
        but replaces them with a software routine (the builder warns with
        EmulatedInstructionWarning).
        """
        return self.sm < 90

    @property
    def limits(self) -> "DeviceLimits":
        """The device limits of this architecture (shared memory, registers, threads): a `DeviceLimits`.

        The 'a' suffix does not change them; an sm number without its own row takes the row
        of the nearest older architecture.
        """
        row = _DEVICE_LIMITS.get(self.sm)
        if row is None:
            row = _DEVICE_LIMITS[max(s for s in _DEVICE_LIMITS if s <= self.sm)]
        return row


# Least .version that ptxas accepts for each .target.
_TARGET_MIN_PTX = {
    "sm_80": V("7.0"), "sm_86": V("7.1"), "sm_87": V("7.4"), "sm_89": V("7.8"),
    "sm_90": V("7.8"), "sm_90a": V("8.0"),
    "sm_100": V("8.6"), "sm_100a": V("8.6"), "sm_120": V("8.7"), "sm_120a": V("8.7"),
}
SUPPORTED_TARGETS = tuple(_TARGET_MIN_PTX)


#: Shared memory a kernel may declare statically (`.shared` variables), on every architecture.
STATIC_SHARED = 48 * 1024


@dataclass(frozen=True)
class DeviceLimits:
    """What one CTA and one SM of an architecture may use, as the CUDA programming guide's
    "Technical Specifications per Compute Capability" table gives them.

    Read it as `Target.parse("sm_80").limits`.  Sizes are in bytes, registers are 32-bit.

    Fields:
        shared_per_cta: shared memory one CTA may use (static + dynamic) after opting in with
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; the per-SM figure less the 1 KB
            the driver reserves per CTA.
        shared_per_sm: shared memory of one SM, shared by its resident CTAs.
        threads_per_sm: resident threads per SM.
        max_ctas_per_sm: resident CTAs per SM.
        static_shared: the most a kernel may declare statically (48 KB); also what a CTA may use
            without opting in.
        reserved_shared_per_cta: shared memory the driver reserves for each resident CTA.
        registers_per_thread: registers one thread may use (255).
        registers_per_sm: the register file of one SM (65536).
        threads_per_cta: threads in one CTA (1024).
        sm_count: SMs on the largest part of the architecture (a product fact, not an
            architectural one: used only to choose tile shapes).
    """

    shared_per_cta: int
    shared_per_sm: int
    threads_per_sm: int
    max_ctas_per_sm: int
    sm_count: int = 0
    static_shared: int = STATIC_SHARED
    reserved_shared_per_cta: int = 1024
    registers_per_thread: int = 255
    registers_per_sm: int = 65536
    threads_per_cta: int = 1024

    def resident_ctas(self, threads: int, registers: int, shared: int) -> int:
        """CTAs of `threads` threads, `registers` registers per thread and `shared` bytes of shared
        memory that one SM holds at once: the least of what threads, registers (allocated per warp
        in granules of 256), shared memory (plus the per-CTA reservation) and the CTA cap allow."""
        warps = -(-threads // 32)
        per_warp = -(-max(registers, 1) // 8) * 8 * 32
        by_regs = self.registers_per_sm // (per_warp * warps)
        by_smem = (self.shared_per_sm // (shared + self.reserved_shared_per_cta)
                   if shared else self.max_ctas_per_sm)
        by_threads = self.threads_per_sm // threads
        return max(0, min(by_regs, by_smem, by_threads, self.max_ctas_per_sm))


# Per compute capability: (shared per CTA after opt-in, shared per SM, threads per SM, CTAs per SM).
_DEVICE_LIMITS = {
    80: DeviceLimits(166912, 167936, 2048, 32, sm_count=108),   # 163 KB / 164 KB
    86: DeviceLimits(101376, 102400, 1536, 16, sm_count=84),    # 99 KB / 100 KB
    87: DeviceLimits(166912, 167936, 1536, 16, sm_count=16),    # 163 KB / 164 KB
    89: DeviceLimits(101376, 102400, 1536, 24, sm_count=128),   # 99 KB / 100 KB
    90: DeviceLimits(232448, 233472, 2048, 32, sm_count=132),   # 227 KB / 228 KB
    100: DeviceLimits(232448, 233472, 2048, 32, sm_count=148),  # 227 KB / 228 KB
    120: DeviceLimits(101376, 102400, 1536, 24, sm_count=84),   # 99 KB / 100 KB
}


@quick_init
@dataclass(frozen=True)
class Requirement:
    """What an instruction form needs: least sm, least PTX ISA, and whether it is sm_XXa-only."""

    min_sm: int = 80
    min_ptx: PtxVersion = V("7.0")
    arch_specific: bool = False  # e.g. wgmma: only on the exact 'a' target
    feature: str = ""
    #: (sm, PTX ISA) pairs, ascending: from that sm on, the form needs only that version (fp8 cvt: 8.1 on
    #: sm_89, 7.8 on sm_90, which had it first)
    ptx_from: tuple = ()
    #: arch-specific features: the other sm values whose 'a' target has it too (setmaxnreg: sm_100a, sm_120a)
    also_arch: tuple = ()

    def ptx_at(self, sm: int) -> PtxVersion:
        """The least PTX ISA version this form needs on an sm_`sm` target."""
        v = self.min_ptx
        for at, pv in self.ptx_from:
            if sm >= at:
                v = pv
        return v

    def ptx_on(self, target: Target) -> PtxVersion:
        """The least PTX ISA version this form needs on `target`."""
        return self.ptx_at(target.sm) if self.ptx_from else self.min_ptx

    def check(self, target: Target, what: str) -> None:
        """Raise a TargetError unless `target` meets this requirement's sm (and, for arch-specific features, is
        exactly ``sm_XXa``); `what` names the instruction in the message.
        """
        # (an arch-specific feature says so on an older target too: "sm_90 or newer" would send a user to sm_100)
        if self.arch_specific and not (target.arch_specific and target.sm in (self.min_sm, *self.also_arch)):
            archs = " or ".join(f"sm_{sm}a" for sm in (self.min_sm, *self.also_arch))
            raise TargetError(
                f"{what} is an arch-specific feature: it needs .target {archs}; "
                f"the kernel targets {target.name}")
        if target.sm < self.min_sm:
            raise TargetError(
                f"{what} needs sm_{self.min_sm} or newer; the kernel targets {target.name}")

    def merge(self, other: "Requirement") -> "Requirement":
        """The requirement of needing both: the larger sm and PTX ISA, arch-specific if either is."""
        steps = ()
        if self.ptx_from or other.ptx_from:
            sms = sorted({sm for sm, _ in self.ptx_from + other.ptx_from})
            steps = tuple((sm, max(self.ptx_at(sm), other.ptx_at(sm))) for sm in sms)
        least = max(self.min_sm, other.min_sm)
        archs = [set((r.min_sm, *r.also_arch)) for r in (self, other) if r.arch_specific]
        floor = max([r.min_sm for r in (self, other) if not r.arch_specific], default=0)
        both = sorted(sm for sm in set.intersection(*archs) if sm >= floor) if archs else []  # 'a' targets with both
        if archs and both:
            least, also = both[0], tuple(both[1:])
        else:
            also = ()
        return Requirement(least, max(self.min_ptx, other.min_ptx),
                           self.arch_specific or other.arch_specific, self.feature or other.feature, steps, also)


BASE = Requirement()


def least_version(target: Target, requirements, cap: PtxVersion | None = None) -> PtxVersion:
    """The least released PTX ISA version covering the target and all requirements.

    `requirements` is an iterable of (Requirement, what) pairs; the error names the one
    that pushes the version over `cap`.
    """
    need = target.min_ptx
    culprit = f"target {target.name}"
    for req, what in requirements:
        v = req.ptx_on(target)
        if v > need:
            need, culprit = v, what
    version = next((v for v in RELEASED_VERSIONS if v >= need), None)
    if version is None:
        raise TargetError(f"{culprit} needs PTX ISA {need}, newer than any ptxforge knows")
    if cap is not None and version > cap:
        raise TargetError(
            f"{culprit} needs PTX ISA {version}, but the toolchain accepts at most {cap}")
    return version


_VERSION_LINE = re.compile(r"^\s*\.version\s+(\d+\.\d+)", re.M)
_TARGET_LINE = re.compile(r"^\s*\.target\s+(\w+)", re.M)


def ptx_header(text: str) -> tuple:
    """(the `.version` as a PtxVersion or None, the first `.target` name or None) of PTX text.

    Only the header directives are read; whether the target is one ptxforge models is the
    caller's question (`Target.parse` answers it).
    """
    m = _VERSION_LINE.search(text)
    version = PtxVersion.parse(m.group(1)) if m else None
    m = _TARGET_LINE.search(text)
    return version, (m.group(1) if m else None)
