"""Programmatic dependent launch (sm_90): a kernel that may start before the one ahead of it ends.

    fn = pf.load(module)["kernel"]            # a kernel that executes griddepcontrol.wait
    launch_dependent(fn, grid, block, *args)  # cuLaunchKernelEx + PROGRAMMATIC_STREAM_SERIALIZATION
    dl = dependent_launch_config(fn, grid, block, shared=smem)   # checked once
    dl.launch(blob, values)                                      # per call: one cuLaunchKernelEx
    dl.go(blob)                                                  # a block packed once, launched as it is

Launched with the `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` attribute, a kernel's
CTAs may be scheduled once every CTA of the kernel ahead of it in the stream has executed
`griddepcontrol.launch_dependents` or exited, instead of after that kernel has finished.  What it
does before its `griddepcontrol.wait` overlaps the earlier kernel's last instructions; the wait
returns once the earlier kernel has completed and its memory operations are visible.  So a kernel
meant for this launch waits before its first read of anything an earlier kernel may write and
before its first write; what it may do before the wait is work that touches no such memory (its
setup, barrier initialization, L2 prefetches, which are hints and never return stale data).

A kernel without `griddepcontrol.wait` must not be launched this way: it could read what the
kernel ahead of it has not written yet.  The launch cannot check that; `launch_dependent` checks
the device (sm_90 or newer) and everything a plain launch checks.
"""

from __future__ import annotations

from ..errors import LaunchError
from .driver import api
from .launch_ex import PreparedLaunch, launch_config

_PTXFORGE_INTERNAL = True


def programmatic_attribute(d):
    """The launch attribute that lets a kernel start before the previous one in its stream completes."""
    a = d.CUlaunchAttribute()
    a.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    a.value.programmaticStreamSerializationAllowed = 1
    return a


class DependentLaunch(PreparedLaunch):
    """A programmatic dependent launch of one kernel, checked once: `launch(blob, values)` packs the
    argument values into an `_ArgBlob` of the kernel and calls cuLaunchKernelEx (`PreparedLaunch`)."""

    __slots__ = ()

    def __init__(self, fn, cfg: tuple, stream: int):
        d = api()
        super().__init__(fn, launch_config(d, cfg, stream, [programmatic_attribute(d)]), cfg, stream,
                         "programmatic dependent launch")


def dependent_launch_config(fn, grid, block, *, shared: int = 0, stream=None) -> DependentLaunch:
    """A `DependentLaunch` of KernelFunction `fn` on `grid` x `block` with `shared` bytes of dynamic shared
    memory on `stream`, after the checks of a plain launch and of the device (sm_90 or newer)."""
    from . import driver as _drv
    from .streams import stream_handle
    info = _drv.device_info()
    if info.sm < 90:
        raise LaunchError(f"programmatic dependent launch needs sm_90 or newer; the device is {info.arch}")
    cfg = fn._config(grid, block, shared)
    return DependentLaunch(fn, cfg, stream_handle(stream) if stream is not None else 0)


def launch_dependent(fn, grid, block, *args, shared: int = 0, stream=None) -> None:
    """Launch `fn` as a programmatic dependent launch (see the module docstring): GPU memory and scalars
    only (host arrays are not staged here: pass DeviceBuffers); the stream as a plain launch's (None: torch's
    current stream for torch tensors)."""
    from .kernel import launch_gpu_args
    from .streams import current_stream_of
    if stream is None:  # torch operands: torch's current stream, as for a plain launch
        stream = current_stream_of(args)
    launch_gpu_args(fn, lambda: dependent_launch_config(fn, grid, block, shared=shared, stream=stream), args,
                    "launch_dependent")
