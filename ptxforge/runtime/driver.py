"""The CUDA driver, reached lazily: checked calls, the primary context, device facts.

Nothing here runs at import time, so `import ptxforge` works on machines without
a driver; the first call that needs the GPU initializes it.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass

from ..errors import DriverError, ToolchainMissing
from ..isa.targets import STATIC_SHARED, PtxVersion, ptx_for_cuda

_PTXFORGE_INTERNAL = True

#: Environment variable choosing the device ordinal (default 0).
DEVICE_ENV = "PTXFORGE_DEVICE"

_api = None


def api():
    """`cuda.bindings.driver`, imported on first use."""
    global _api
    if _api is None:
        try:
            from cuda.bindings import driver
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise ToolchainMissing("running kernels needs cuda-python's driver bindings: "
                                   "pip install cuda-bindings") from e
        _api = driver
    return _api


def check(result, what: str):
    """Unpack a cuda.bindings result `(err, *values)`; raise DriverError unless err is CUDA_SUCCESS.

    Returns None, the single value, or the tuple of values.
    """
    err = result[0]
    if err:  # CUresult is an int enum and CUDA_SUCCESS is 0
        raise driver_error(err, what)
    if len(result) == 1:
        return None
    if len(result) == 2:
        return result[1]
    return tuple(result[1:])


def driver_error(err, what: str) -> DriverError:
    """A DriverError quoting the driver's own name and description of `err`."""
    d = api()
    code = int(err)
    name = getattr(err, "name", None) or str(code)
    desc = ""
    try:
        e1, s = d.cuGetErrorName(err)
        if not e1 and s:
            name = s.decode(errors="replace")
        e2, s = d.cuGetErrorString(err)
        if not e2 and s:
            desc = s.decode(errors="replace")
    except Exception:  # the error itself may be that the driver is gone
        pass
    return DriverError(f"{what} failed: {name} ({code})" + (f": {desc}" if desc else ""), code=code, name=name)


@dataclass(frozen=True)
class LaunchLimits:
    """Device limits a launch is checked against (defaults: every sm_80+ GPU)."""

    max_threads_per_block: int = 1024
    max_block: tuple = (1024, 1024, 64)
    max_grid: tuple = (2**31 - 1, 65535, 65535)
    max_shared_default: int = STATIC_SHARED  # dynamic + static without opting in
    max_shared_optin: int = STATIC_SHARED  # after raising CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


@dataclass(frozen=True)
class DeviceInfo:
    """What ptxforge needs to know about the GPU it launches on."""

    ordinal: int
    name: str
    compute_capability: tuple
    sm_count: int
    total_memory: int
    driver_version: int  # e.g. 13000 for CUDA 13.0
    limits: LaunchLimits

    @property
    def sm(self) -> int:
        """Compute capability as one number: 90 for 9.0."""
        major, minor = self.compute_capability
        return major * 10 + minor

    @property
    def arch(self) -> str:
        """The device's ``sm_XX`` (from its compute capability), the target to assemble for."""
        return f"sm_{self.sm}"

    @functools.cached_property
    def ptx_cap(self) -> PtxVersion:
        """The newest PTX ISA this driver's JIT accepts."""
        return ptx_for_cuda(self.driver_version)

    def __str__(self) -> str:
        major, minor = self.compute_capability
        dv = self.driver_version
        return (f"{self.name} (device {self.ordinal}, sm_{major}{minor}, {self.sm_count} SMs, "
                f"{self.total_memory / 2**30:.0f} GiB), driver CUDA {dv // 1000}.{dv % 1000 // 10} "
                f"(PTX ISA <= {self.ptx_cap})")


class _Context:
    __slots__ = ("device", "ctx", "info", "null_stream")

    def __init__(self, device, ctx, info, null_stream):
        self.device = device
        self.ctx = ctx
        self.info = info
        self.null_stream = null_stream


_lock = threading.Lock()
_state: _Context | None = None
_tls = threading.local()
_requested_ordinal: int | None = None


def select_device(ordinal: int) -> None:
    """Choose the GPU before first use (default: $PTXFORGE_DEVICE or 0)."""
    global _requested_ordinal
    if _state is not None and _state.info.ordinal != int(ordinal):
        raise DriverError(f"ptxforge already uses device {_state.info.ordinal}; select_device() must come "
                          "before the first load or allocation")
    _requested_ordinal = int(ordinal)


def _attr(d, dev, name: str) -> int:
    return check(d.cuDeviceGetAttribute(getattr(d.CUdevice_attribute, name), dev), f"cuDeviceGetAttribute({name})")


def _init() -> _Context:
    global _state
    with _lock:
        if _state is not None:
            return _state
        d = api()
        try:
            res = d.cuInit(0)
        except Exception as e:  # no libcuda on this machine
            raise ToolchainMissing(f"the CUDA driver library is not loadable: {e}") from e
        check(res, "cuInit")
        ordinal = _requested_ordinal
        if ordinal is None:
            ordinal = int(os.environ.get(DEVICE_ENV, "0") or 0)
        count = check(d.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= ordinal < count:
            raise DriverError(f"device {ordinal} requested, but the driver sees {count} device(s)")
        dev = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        # The primary context is the one torch, CuPy and the runtime API share, so arrays
        # they allocate are valid in our launches and ours in theirs.
        ctx = check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        name = check(d.cuDeviceGetName(256, dev), "cuDeviceGetName")
        name = name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(name, bytes) else str(name)
        a = lambda n: _attr(d, dev, n)  # noqa: E731
        limits = LaunchLimits(
            max_threads_per_block=a("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
            max_block=(a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X"), a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y"),
                       a("CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z")),
            max_grid=(a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X"), a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y"),
                      a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z")),
            max_shared_default=a("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
            max_shared_optin=a("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        )
        info = DeviceInfo(
            ordinal=ordinal,
            name=name,
            compute_capability=(a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
                                a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")),
            sm_count=a("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            total_memory=int(check(d.cuDeviceTotalMem(dev), "cuDeviceTotalMem")),
            driver_version=int(check(d.cuDriverGetVersion(), "cuDriverGetVersion")),
            limits=limits,
        )
        _state = _Context(dev, ctx, info, d.CUstream(0))
        _tls.bound = True
        return _state


def context() -> _Context:
    """The initialized driver state, with the primary context current on this thread."""
    st = _state if _state is not None else _init()
    if not getattr(_tls, "bound", False):
        check(api().cuCtxSetCurrent(st.ctx), "cuCtxSetCurrent")
        _tls.bound = True
    return st


def device_info() -> DeviceInfo:
    """Facts about the GPU ptxforge launches on (initializes the driver on first call)."""
    return context().info


def synchronize() -> None:
    """Wait for all work on the device (cuCtxSynchronize)."""
    context()
    check(api().cuCtxSynchronize(), "cuCtxSynchronize")
