"""The CUDA driver, reached lazily: checked calls, the primary context, device facts.

Nothing here runs at import time, so `import ptxforge` works on machines without
a driver; the first call that needs the GPU initializes it.

Every entry point makes ptxforge's context (the device's primary context) current on the
calling thread for the duration of the call and gives the caller's back afterwards
(`enter` / `leave`); when it is current already, that costs one cuCtxGetCurrent.  Errors
go through `faults`, so a kernel fault is reported once with the launches it may come from,
and every later call says that the context is unusable.
"""

from __future__ import annotations

import functools
import operator
import os
import re
import threading
from dataclasses import dataclass

from ..errors import ContextLost, DriverError, LaunchError, SyncTimeout, ToolchainMissing
from ..isa.targets import STATIC_SHARED, PtxVersion, ptx_for_cuda
from . import faults

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


def driver_error(err, what: str, advice=None) -> DriverError:
    """A DriverError quoting the driver's own name and description of `err`.

    A sticky code (a kernel fault) gives ContextLost naming the launches since the last
    successful synchronization and marks the context dead; once it is dead, any failure
    gives ContextLost with that one sentence.  A call refused during a CUDA graph capture says what to do
    (`faults.CAPTURE_ADVICE`); `advice` (code -> sentence) adds what to do for other codes of this call.
    """
    code = int(err)
    dead = faults.dead_reason()
    if dead is not None:
        return ContextLost(dead, code=code, name=faults.code_name(code, getattr(err, "name", "")))
    name = getattr(err, "name", None) or faults.code_name(code)
    desc = ""
    try:
        d = api()
        e1, s = d.cuGetErrorName(err)
        if not e1 and s:
            name = s.decode(errors="replace")
        e2, s = d.cuGetErrorString(err)
        if not e2 and s:
            desc = s.decode(errors="replace")
    except Exception:  # the error itself may be that the driver is gone
        pass
    if faults.is_sticky(code):
        return faults.context_lost(code, name, what, desc)
    said = faults.CAPTURE_ADVICE if code in faults.CAPTURE_REFUSED else (advice or {}).get(code)
    tail = (f": {desc}" if desc else "") + (f"; {said}" if said else "")
    return DriverError(f"{what} failed: {name} ({code}){tail}", code=code, name=name)


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
    driver_build: str = ""  # the kernel driver's own version, e.g. "570.133.20" ("" where unknown)

    @property
    def driver_id(self) -> str:
        """The driver's full version as one string (CUDA version and driver build): part of cache keys."""
        return f"cuda-{self.driver_version}/{self.driver_build or 'unknown-build'}"

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
    __slots__ = ("device", "ctx", "handle", "info", "null_stream")

    def __init__(self, device, ctx, info, null_stream):
        self.device = device
        self.ctx = ctx
        self.handle = int(ctx)
        self.info = info
        self.null_stream = null_stream


_BUILD = re.compile(r"Kernel Module(?: for [\w-]+)?\s+(\d+(?:\.\d+)+)")


def driver_build(version_file: str = "/proc/driver/nvidia/version", maps_file: str = "/proc/self/maps") -> str:
    """The installed kernel driver's version (Linux: /proc/driver/nvidia/version).  Where that file is missing (WSL,
    where the driver is Windows'), a fingerprint of the libcuda this process loaded (its path, size and modification
    time), which a driver update changes too; "" where neither is known.  Part of the cubin cache's keys: the JIT
    is the driver's, so a cubin is only reused by the driver that made it."""
    try:
        with open(version_file) as f:
            m = _BUILD.search(f.read(4096))
        if m:
            return m.group(1)
    except OSError:
        pass
    return _libcuda_fingerprint(maps_file)


def _libcuda_fingerprint(maps_file: str) -> str:
    """"libcuda <path> <size> <mtime>" of the first libcuda mapped into this process (from `maps_file`), or ""."""
    try:
        with open(maps_file) as f:
            for line in f:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if os.path.basename(path).startswith("libcuda.so"):
                    st = os.stat(path)
                    return f"libcuda {path} {st.st_size} {st.st_mtime_ns}"
    except OSError:
        pass
    return ""


_lock = threading.Lock()
_state: _Context | None = None
_requested_ordinal: int | None = None

#: What every call says in a child made by fork() after the parent had initialized the driver.
FORKED = ("the CUDA context is unusable in this process: it was made by the parent process, and a child made by "
          "fork() cannot use its parent's CUDA state; start children with multiprocessing's 'spawn' or 'forkserver' "
          "method (multiprocessing.get_context('spawn')), or use the GPU only in the children")


def _after_fork_in_child() -> None:
    """In a child made by fork(): when the parent had initialized the driver, every later call raises ContextLost
    with `FORKED` (the driver would answer with a bare CUDA_ERROR_NOT_INITIALIZED, or worse), and the finalizers
    of inherited DeviceBuffers and Streams free nothing."""
    global _lock
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork
    if _state is not None:
        faults.mark_unusable_after_fork(FORKED)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def select_device(ordinal: int) -> None:
    """Choose the GPU before first use (default: $PTXFORGE_DEVICE or 0): `ordinal` is an int >= 0 (Python or numpy;
    a float, bool or string is a DriverError, not rounded or parsed)."""
    global _requested_ordinal
    try:
        ok = not isinstance(ordinal, bool) and operator.index(ordinal) >= 0
    except TypeError:
        ok = False
    if not ok:
        raise DriverError(f"select_device() takes a device ordinal, an int >= 0 (the driver's numbering of the GPUs), "
                          f"got {ordinal!r}")
    ordinal = operator.index(ordinal)
    if _state is not None and _state.info.ordinal != ordinal:
        raise DriverError(f"ptxforge already uses device {_state.info.ordinal}; select_device() must come "
                          "before the first load or allocation")
    _requested_ordinal = int(ordinal)


def _env_ordinal() -> int:
    """The device ordinal $PTXFORGE_DEVICE names (0 when unset or blank); anything but a decimal int is a
    DriverError naming the variable."""
    raw = os.environ.get(DEVICE_ENV, "").strip()
    try:
        return int(raw, 10) if raw else 0
    except ValueError:
        raise DriverError(f"{DEVICE_ENV}={raw!r} is not a device ordinal; set it to a decimal int such as 0 or 1 "
                          "(the driver's numbering of the GPUs), or unset it for device 0") from None


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
            ordinal = _env_ordinal()
        count = check(d.cuDeviceGetCount(), "cuDeviceGetCount")
        if not 0 <= ordinal < count:
            raise DriverError(f"device {ordinal} requested, but the driver sees {count} device(s)")
        dev = check(d.cuDeviceGet(ordinal), "cuDeviceGet")
        # The primary context is the one torch, CuPy and the runtime API share, so arrays
        # they allocate are valid in our launches and ours in theirs.
        # (not made current here: the entry points do that, and give the caller's context back)
        ctx = check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
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
            driver_build=driver_build(),
        )
        _state = _Context(dev, ctx, info, d.CUstream(0))
        return _state


def context() -> _Context:
    """The initialized driver state, with the primary context current on this thread.

    Raises ContextLost once a fault has made the context unusable.
    """
    if faults._dead is not None:
        faults.raise_if_dead()
    st = _state if _state is not None else _init()
    err, cur = api().cuCtxGetCurrent()
    if err:
        raise driver_error(err, "cuCtxGetCurrent")
    if int(cur) != st.handle:
        check(api().cuCtxSetCurrent(st.ctx), "cuCtxSetCurrent")
    return st


def enter():
    """Make ptxforge's context current for one call; returns the caller's context to give back, or None.

    None when ours was current already or no context was (then ours simply stays current).
    """
    if faults._dead is not None:
        faults.raise_if_dead()
    st = _state if _state is not None else _init()
    d = api()
    err, cur = d.cuCtxGetCurrent()
    if err:
        raise driver_error(err, "cuCtxGetCurrent")
    h = int(cur)
    if h == st.handle:
        return None
    check(d.cuCtxSetCurrent(st.ctx), "cuCtxSetCurrent")
    return cur if h else None


def launched_in_ours(err, launch, *args):
    """The error code of a driver launch `launch(*args)` (returning (err,)) that failed with `err`: when
    ptxforge's context was not current (another library's, or none, as in a thread that has not used ptxforge
    before), the launch is made again with ours current and its code returned; the caller's context is current
    again after (a thread that had none keeps ours, as `enter` leaves it).  The launch paths call this only on
    a failure, so a launch in ours costs nothing more."""
    st = _state
    if st is None:
        return err
    d = api()
    got, cur = d.cuCtxGetCurrent()
    if got or int(cur) == st.handle:
        return err
    check(d.cuCtxSetCurrent(st.ctx), "cuCtxSetCurrent")
    try:
        err, = launch(*args)
    finally:
        if int(cur):
            check(d.cuCtxSetCurrent(cur), "cuCtxSetCurrent (restoring the caller's context)")
    return err


def leave(previous) -> None:
    """Give the caller's context back (the value `enter` returned)."""
    if previous is not None:
        check(api().cuCtxSetCurrent(previous), "cuCtxSetCurrent (restoring the caller's context)")


def quietly_in_ours(call) -> None:
    """`call(driver module)` with ptxforge's context current and the caller's given back, every error dropped:
    for finalizers, which have no one to report to (at interpreter exit the driver may be gone, and after a
    fault the context's resources went with it)."""
    try:
        prev = enter()
    except Exception:
        return
    try:
        call(api())
    except Exception:
        pass
    finally:
        try:
            leave(prev)
        except Exception:
            pass


def device_info() -> DeviceInfo:
    """Facts about the GPU ptxforge launches on (initializes the driver on first call)."""
    prev = enter()
    try:
        return _state.info
    finally:
        leave(prev)


def synchronize(timeout: float | None = None) -> None:
    """Wait for all work on the device (cuCtxSynchronize).

    timeout: seconds to wait at most; past it SyncTimeout is raised (naming the kernels launched
    since the last successful synchronization) and the GPU work goes on.
    """
    prev = enter()
    try:
        if timeout is None:
            check(api().cuCtxSynchronize(), "cuCtxSynchronize")
        else:
            _synchronize_within(float(timeout))
        faults.synchronized(None)
    finally:
        leave(prev)


def _synchronize_within(timeout: float) -> None:
    """cuCtxSynchronize on a helper thread, waited for at most `timeout` seconds."""
    if not timeout >= 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout}")
    st = _state
    d = api()
    box = []

    def wait():
        try:
            d.cuCtxSetCurrent(st.ctx)
            box.append(d.cuCtxSynchronize())
        except BaseException as e:  # handed to the waiting thread
            box.append(e)

    t = threading.Thread(target=wait, name="ptxforge-synchronize", daemon=True)
    t.start()
    t.join(timeout)
    if not box:
        items = faults.pending()
        what = faults._describe_pending(items) if items else "  (no launches by ptxforge are pending)"
        raise SyncTimeout(f"the GPU did not finish within {timeout:g} s; kernels launched since the last successful "
                          f"synchronization:\n{what}")
    got = box[0]
    if isinstance(got, BaseException):
        raise got
    check(got, "cuCtxSynchronize")


def check_pointer(ptr: int, what: str, span: tuple | None = None) -> None:
    """Refuse a foreign array's address unless it lives in ptxforge's context and device, and (given `span`, the
    (lowest, highest + 1) byte offsets from `ptr` its elements cover, `arrays.byte_span`) unless its elements lie
    inside the allocation that holds `ptr`.

    Asks the driver (cuPointerGetAttributes: context, device ordinal, memory type, the address range of the
    allocation); `what` names the argument in the error.  An allocation of torch's expandable segments is one range
    over the whole reservation, so a tensor in it passes.
    """
    if not ptr:
        return
    if _state is None:  # the first call: the driver initialized (ours current where no context was)
        leave(enter())
    st = _state
    d = api()
    A = d.CUpointer_attribute
    attrs = [A.CU_POINTER_ATTRIBUTE_CONTEXT, A.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
             A.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, A.CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
             A.CU_POINTER_ATTRIBUTE_RANGE_SIZE]
    err, vals = d.cuPointerGetAttributes(len(attrs), attrs, ptr)
    if err and int(err) == 1:  # CUDA_ERROR_INVALID_VALUE: an address no context with UVA knows
        raise LaunchError(f"{what}: address 0x{ptr:x} is not memory the CUDA driver knows (not allocated, mapped "
                          "or registered by any context)")
    if err:
        raise driver_error(err, f"cuPointerGetAttributes of {what}")
    ctx, dev, mtype, start, size = (int(v) for v in vals)
    ours = st.info.ordinal
    if ctx == 0 and mtype == 0:
        raise LaunchError(f"{what}: address 0x{ptr:x} is not memory the CUDA driver knows (not allocated, mapped "
                          "or registered by any context)")
    if ctx and ctx != st.handle:
        raise LaunchError(f"{what}: address 0x{ptr:x} belongs to another CUDA context (device {dev}); ptxforge "
                          f"launches in the primary context of device {ours}, which cannot use it")
    if mtype == int(d.CUmemorytype.CU_MEMORYTYPE_DEVICE) and dev >= 0 and dev != ours:
        raise LaunchError(f"{what}: address 0x{ptr:x} is memory of device {dev}; ptxforge launches on device {ours}")
    if span is not None and size and (ptr + span[0] < start or ptr + span[1] > start + size):
        raise LaunchError(f"{what}: its elements cover bytes 0x{ptr + span[0]:x} to 0x{ptr + span[1]:x}, past the "
                          f"allocation that holds 0x{ptr:x} (0x{start:x}, {size} bytes): the array describes more "
                          "memory than was allocated, and a kernel would read or write someone else's")
