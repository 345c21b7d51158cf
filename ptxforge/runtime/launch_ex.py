"""Prepared launches: the per-call launch of a packed argument block (`block_launcher`, plain or with launch
attributes), and cuLaunchKernelEx for the launches that carry attributes (clusters, programmatic dependent
launches).

One config builder (`launch_config`) and one launch (`block_launcher`; `PreparedLaunch`, the base of the
dependent and cluster launches, packs the arguments for it under the kernel's lock, as a plain launch does),
so that every launch is made the same way: the module checked loaded, a failure raised with the kernel's
name and shape, and the launch remembered for the fault reports (`faults.record_launch`) that name the
kernels behind a later asynchronous error.  The launcher resolves everything but the argument block once:
it is the per-call path of prepared launchers such as the GEMM plans.
"""

from __future__ import annotations

from . import faults
from .driver import api, driver_error, launched_in_ours

_PTXFORGE_INTERNAL = True


def launch_config(d, cfg: tuple, stream: int, attrs: list):
    """A cuLaunchKernelEx CUlaunchConfig: cfg = (gx, gy, gz, bx, by, bz, dynamic shared bytes) on raw stream
    handle `stream`, with the launch attributes `attrs`."""
    c = d.CUlaunchConfig()
    c.gridDimX, c.gridDimY, c.gridDimZ = cfg[0], cfg[1], cfg[2]
    c.blockDimX, c.blockDimY, c.blockDimZ = cfg[3], cfg[4], cfg[5]
    c.sharedMemBytes = cfg[6]
    c.hStream = d.CUstream(stream)
    c.attrs = list(attrs)
    c.numAttrs = len(c.attrs)
    return c


class PreparedLaunch:
    """One kernel's cuLaunchKernelEx launch with its configuration built once (the base of `DependentLaunch` and
    `ClusterLaunch`): `launch(blob, values)` packs `values` (in the kernel's parameter order) into `blob`, an
    `_ArgBlob` of the kernel, under the kernel's lock and launches; `launch(blob)` launches a block that was
    packed once and is never refilled (a prepared launcher's own) as it is, without the lock.  A failure raises
    LaunchError naming the kernel, its shape and `what` kind of launch it was."""

    __slots__ = ("fn", "config", "cfg", "stream", "go")

    def __init__(self, fn, config, cfg: tuple, stream: int, what: str):
        self.fn, self.config, self.cfg, self.stream = fn, config, cfg, stream
        #: go(blob): the launch of a block as it is (`block_launcher`), for launchers that keep their blocks
        self.go = block_launcher(fn, cfg, stream, config, what)

    def launch(self, blob, values=None) -> None:
        """Fill `blob` with `values` and launch; values=None launches `blob` as it is."""
        if values is None:
            self.go(blob)
            return
        with self.fn._lock:
            blob.fill(values)
            self.go(blob)


def stream_words(stream: int) -> str:
    """A raw stream handle as an error names it."""
    return "the legacy default stream" if not stream else f"stream 0x{stream:x}"


def launch_advice(stream: int) -> dict:
    """What to do when the driver refuses a launch on `stream` with a code that blames a handle or the context
    (CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_CONTEXT): code -> sentence, for `driver.driver_error`."""
    if not stream:
        return {}
    said = (f"{stream_words(stream)} may have been destroyed, or belong to another CUDA context: ptxforge launches in "
            "the device's primary context, so pass a stream made there and still alive (a ptxforge Stream, torch's "
            "or CuPy's on this device), or None for the legacy default stream")
    return {400: said, 201: said}


def block_launcher(fn, cfg: tuple, stream: int, config=None, what: str = "launch"):
    """A function `go(blob)` that launches KernelFunction `fn` with the argument block `blob` as it is (filled
    once, never refilled): with `config` (a CUlaunchConfig from `launch_config`) through cuLaunchKernelEx,
    without it through cuLaunchKernel on cfg = (gx, gy, gz, bx, by, bz, dynamic shared bytes) and raw stream
    handle `stream`.  Per call: the module checked loaded, one driver call (made again in ptxforge's context
    when it failed in another's), a failure raised by name, the launch recorded; the driver's function, the
    kernel's handle and the stream object are looked up once here."""
    d = api()
    func, module, name = fn._func, fn.module, fn.name
    record = faults.record_launch

    def failed(err, *args) -> None:
        err = launched_in_ours(err, launch, *args)  # perhaps not in ptxforge's context: once more in ours
        if err:
            raise driver_error(err, f"{said} with grid {cfg[0:3]}, block {cfg[3:6]}, {cfg[6]} B dynamic shared memory "
                                    f"on {stream_words(stream)}", launch_advice(stream))

    # (each `go` spells the driver's arguments out: a call through *args costs about as much again)
    if config is None:  # cuLaunchKernel(f, grid x, y, z, block x, y, z, shared bytes, stream, params, extra)
        launch, cu_stream = d.cuLaunchKernel, d.CUstream(stream)
        gx, gy, gz, bx, by, bz, shared = cfg
        said = f"cuLaunchKernel of '{name}'"

        def go(blob) -> None:
            if module._handle is None:
                fn._check_loaded()
            err, = launch(func, gx, gy, gz, bx, by, bz, shared, cu_stream, blob.addr, 0)
            if err:
                failed(err, func, gx, gy, gz, bx, by, bz, shared, cu_stream, blob.addr, 0)
            record(stream, name, cfg)
    else:  # cuLaunchKernelEx(config, f, params, extra)
        launch = d.cuLaunchKernelEx
        said = f"cuLaunchKernelEx of '{name}' ({what})"

        def go(blob) -> None:
            if module._handle is None:
                fn._check_loaded()
            err, = launch(config, func, blob.addr, 0)
            if err:
                failed(err, config, func, blob.addr, 0)
            record(stream, name, cfg)
    return go
