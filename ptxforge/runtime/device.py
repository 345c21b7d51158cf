"""Is there a usable CUDA GPU here, and what can a script say without one?

These checks never raise: they are for deciding whether to run on the GPU (the CLI, the
examples, the test suite's `gpu` marker) and for explaining why not.
"""

from __future__ import annotations

import functools

from ..assembler import assemble
from ..errors import ToolchainMissing

_PTXFORGE_INTERNAL = True


@functools.lru_cache(maxsize=None)
def gpu_skip_reason() -> str | None:
    """None when a CUDA device is usable (`cuInit` succeeds and counts at least one device),
    else a sentence saying why not (no cuda-bindings, no driver library, no device)."""
    try:
        from cuda.bindings import driver
    except Exception as e:  # pragma: no cover - depends on the machine
        return f"cuda-bindings is not importable ({e})"
    try:
        err, = driver.cuInit(0)
    except Exception as e:  # libcuda missing
        return f"the CUDA driver library is not loadable ({e})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"cuInit failed: {err.name}"
    err, n = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or n == 0:
        return "no CUDA device found"
    return None


def gpu_available() -> bool:
    """True when a CUDA device is usable (see `gpu_skip_reason`)."""
    return gpu_skip_reason() is None


def native_target(default: str = "sm_90"):
    """The `Target` to build for this machine's GPU, with its architecture-specific features
    (sm_90 hardware gets sm_90a: wgmma and setmaxnreg run on it); `default` without a GPU."""
    from ..isa.targets import Target
    if not gpu_available():
        return Target.parse(default)
    from .driver import device_info
    arch = device_info().arch
    try:
        return Target.parse(arch + "a")
    except Exception:  # no arch-specific variant of this GPU's architecture
        return Target.parse(arch)


def offline_summary(module, reason: str) -> str:
    """What a script can still say without a GPU: `reason`, then the offline assembler's resource
    report for `module` (registers, shared memory, spills), or why no assembler is available."""
    try:
        report = assemble(module).report()
    except ToolchainMissing as e:
        report = f"(no offline assembler either: {e})"
    return f"no GPU here ({reason}); assembling offline instead of running\n{report}"
