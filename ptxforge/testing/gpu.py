"""Is there a CUDA GPU here?  Used by the `gpu` pytest marker (tests/conftest.py)."""

from __future__ import annotations

import functools
import os

#: Set to 1 to turn "no GPU, skipped" into a failure (run GPU lanes this way).
REQUIRE_GPU_ENV = "PTXFORGE_REQUIRE_GPU"


@functools.lru_cache(maxsize=None)
def gpu_skip_reason() -> str | None:
    """None when a CUDA device is usable, else why not."""
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
    return gpu_skip_reason() is None


def gpu_required() -> bool:
    return os.environ.get(REQUIRE_GPU_ENV, "") not in ("", "0")


def offline_summary(module, reason: str) -> str:
    """What a script can still say without a GPU: why, and the offline assembler's resource report."""
    from ..assembler import assemble
    from ..errors import ToolchainMissing
    try:
        report = assemble(module).report()
    except ToolchainMissing as e:
        report = f"(no offline assembler either: {e})"
    return f"no GPU here ({reason}); assembling offline instead of running\n{report}"
