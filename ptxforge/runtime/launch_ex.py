"""cuLaunchKernelEx for the launches that carry attributes (clusters, programmatic dependent launches).

One config builder (`launch_config`) and one launch (`launch_ex`), so that every such launch is made
the way a plain launch is: the module checked loaded, the arguments packed under the kernel's lock,
a failure raised with the kernel's name and shape, and the launch remembered for the fault reports
(`faults.record_launch`) that name the kernels behind a later asynchronous error.
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


def launch_ex(fn, config, cfg: tuple, stream: int, blob, values, what: str) -> None:
    """Fill `blob` with `values` (in KernelFunction `fn`'s parameter order) and launch with `config` (built by
    `launch_config` from `cfg` on `stream`); a failure raises LaunchError naming the kernel, its shape and
    `what` kind of launch it was.  values=None: `blob` was filled once and is never refilled (a prepared
    launch's own argument block), so it is launched as it is, without the kernel's lock."""
    if fn.module._handle is None:
        fn._check_loaded()
    d = api()
    if values is None:
        err, = d.cuLaunchKernelEx(config, fn._func, blob.addr, 0)
        if err:  # perhaps not in ptxforge's context (another library's current, or a new thread's none)
            err = launched_in_ours(err, d.cuLaunchKernelEx, config, fn._func, blob.addr, 0)
    else:
        with fn._lock:
            blob.fill(values)
            err, = d.cuLaunchKernelEx(config, fn._func, blob.addr, 0)
            if err:
                err = launched_in_ours(err, d.cuLaunchKernelEx, config, fn._func, blob.addr, 0)
    if err:
        raise driver_error(err, f"cuLaunchKernelEx of '{fn.name}' ({what}) with grid {cfg[0:3]}, block {cfg[3:6]}, "
                                f"{cfg[6]} B dynamic shared memory")
    faults.record_launch(stream, fn.name, cfg)
