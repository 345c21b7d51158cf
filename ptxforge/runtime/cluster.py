"""Cluster launches: `cuLaunchKernelEx` with the cluster-dimension attribute, checked first.

    fn = pf.load(module)["kernel"]
    launch_cluster(fn, (4, 1), 128, (2, 1), *args)   # grid, block, cluster: positional, before the arguments
    cl = cluster_launch_config(fn, (4, 1), 128, (2, 1))   # checked once; cl.launch(blob, values) per call

Checks, each with a message that says what is legal, before the driver is called: the device
supports cluster launches (CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, sm_90+); the cluster shape has
1..3 positive sizes and divides the grid in every dimension; it matches the kernel's
`.reqnctapercluster` when there is one; it has at most 8 CTAs (16 after allowing non-portable
sizes, which `allow_non_portable=True` does) and no more than the driver's
`cuOccupancyMaxPotentialClusterSize` for this kernel, block and shared memory.
"""

from __future__ import annotations

from ..errors import LaunchError
from ..isa.cluster import MAX_CLUSTER_CTAS, PORTABLE_CLUSTER_CTAS, cluster_dims
from .dependent import programmatic_attribute
from .driver import api, check
from .launch_ex import PreparedLaunch, launch_config

_PTXFORGE_INTERNAL = True


def check_cluster_shape(grid: tuple, cluster: tuple, *, kernel: str, required=None, max_ctas=PORTABLE_CLUSTER_CTAS):
    """Raise LaunchError unless `cluster` (x, y, z) can tile `grid` (x, y, z) under the limits."""
    try:
        cl = cluster_dims(cluster, "cluster")
    except Exception as e:
        raise LaunchError(f"kernel {kernel}: {e}") from None
    if required is not None and tuple(required) != cl:
        raise LaunchError(f"kernel {kernel} requires clusters of {tuple(required)} (.reqnctapercluster); "
                          f"launched with {cl}")
    for g, c, axis in zip(grid, cl, "xyz"):
        if g % c:
            raise LaunchError(f"kernel {kernel}: the cluster's {axis} size {c} does not divide the grid's {g}; "
                              "the grid must be a whole number of clusters in every dimension")
    n = cl[0] * cl[1] * cl[2]
    if n > max_ctas:
        raise LaunchError(f"kernel {kernel}: a cluster of {cl} has {n} CTAs; at most {max_ctas} here "
                          f"({PORTABLE_CLUSTER_CTAS} portable, {MAX_CLUSTER_CTAS} with allow_non_portable=True)")
    return cl


def required_cluster(fn):
    """The kernel's .reqnctapercluster shape as the driver reports it, or None."""
    d = api()
    A = d.CUfunction_attribute
    dims = tuple(int(check(d.cuFuncGetAttribute(a, fn._func), f"cuFuncGetAttribute({a.name}) of '{fn.name}'"))
                 for a in (A.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, A.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                           A.CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH))
    return dims if all(x > 0 for x in dims) else None


def _config(d, cfg, stream, cluster, dependent=False):
    a = d.CUlaunchAttribute()
    a.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster
    # dependent: also a programmatic dependent launch (runtime.dependent)
    return launch_config(d, cfg, stream, [a, programmatic_attribute(d)] if dependent else [a])


class ClusterLaunch(PreparedLaunch):
    """A cluster launch configuration checked once (see `cluster_launch_config`): `launch(blob, values)`
    packs the argument values into an `_ArgBlob` of the kernel and calls cuLaunchKernelEx (`PreparedLaunch`)."""

    __slots__ = ("cluster",)

    def __init__(self, fn, config, cluster, cfg, stream):
        super().__init__(fn, config, cfg, stream, f"clusters of {cluster}")
        self.cluster = cluster

    def max_active_clusters(self) -> int:
        """Clusters of this shape, block and shared memory the device runs at once
        (cuOccupancyMaxActiveClusters): the most a persistent grid should launch."""
        from . import driver as _drv
        prev = _drv.enter()
        try:
            return int(check(api().cuOccupancyMaxActiveClusters(self.fn._func, self.config),
                             f"cuOccupancyMaxActiveClusters of '{self.fn.name}'"))
        finally:
            _drv.leave(prev)


def cluster_launch_config(fn, grid, block, cluster, *, shared: int = 0, stream=None, allow_non_portable=False,
                          dependent: bool = False):
    """A `ClusterLaunch` of `fn` on `grid` x `block` in clusters of `cluster` CTAs on `stream`, with every
    check of `launch_cluster` done now, for launchers that issue the same launch many times.
    dependent: also a programmatic dependent launch (see `ptxforge.runtime.dependent`)."""
    from .streams import stream_handle
    s = stream_handle(stream) if stream is not None else 0
    config, cl, cfg = _checked(fn, grid, block, cluster, shared, s, allow_non_portable, dependent)
    return ClusterLaunch(fn, config, cl, cfg, s)


def _checked(fn, grid, block, cluster, shared, s, allow_non_portable, dependent=False):
    """(CUlaunchConfig, cluster shape, (grid, block, shared) tuple) after the checks the module docstring lists."""
    from . import driver as _drv
    prev = _drv.enter()  # the attribute and occupancy queries run in ptxforge's context; the caller's comes back
    try:
        return _checked_in_ours(_drv._state, fn, grid, block, cluster, shared, s, allow_non_portable, dependent)
    finally:
        _drv.leave(prev)


def _checked_in_ours(ctx, fn, grid, block, cluster, shared, s, allow_non_portable, dependent):
    d = api()
    info = ctx.info
    if info.sm < 90:
        raise LaunchError(f"cluster launches need sm_90 or newer; the device is {info.arch}")
    ok = check(d.cuDeviceGetAttribute(d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, ctx.device),
               "cuDeviceGetAttribute(CLUSTER_LAUNCH)")
    if not ok:
        raise LaunchError(f"{info.name} does not support cluster launches")
    cfg = fn._config(grid, block, shared)
    max_ctas = MAX_CLUSTER_CTAS if allow_non_portable else PORTABLE_CLUSTER_CTAS
    if allow_non_portable:
        check(d.cuFuncSetAttribute(fn._func, d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                                   1), f"cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) of '{fn.name}'")
    required = required_cluster(fn)
    cl = check_cluster_shape(cfg[0:3], cluster, kernel=fn.name, required=required, max_ctas=max_ctas)
    config = _config(d, cfg, s, cl, dependent)
    most = check(d.cuOccupancyMaxPotentialClusterSize(fn._func, config),
                 f"cuOccupancyMaxPotentialClusterSize of '{fn.name}'")
    n = cl[0] * cl[1] * cl[2]
    if most and n > int(most):
        raise LaunchError(f"kernel {fn.name}: clusters of {n} CTAs do not fit on the device with block {cfg[3:6]} "
                          f"and {cfg[6]} B dynamic shared memory; the driver allows at most {int(most)}")
    return config, cl, cfg


def launch_cluster(fn, grid, block, cluster, *args, shared: int = 0, stream=None, allow_non_portable=False):
    """Launch KernelFunction `fn` on `grid` x `block` in clusters of `cluster` CTAs (cuLaunchKernelEx).

    Arguments are those of a plain launch (GPU memory, scalars, TensorMaps; host arrays are not
    staged here: pass DeviceBuffers), and so is the stream (None: torch's current stream for torch tensors).  Synchronous only in the sense of a CUDA launch.
    """
    from .kernel import launch_gpu_args
    from .streams import current_stream_of
    if stream is None:  # torch operands: torch's current stream, as for a plain launch
        stream = current_stream_of(args)
    launch_gpu_args(fn, lambda: cluster_launch_config(fn, grid, block, cluster, shared=shared, stream=stream,
                                                      allow_non_portable=allow_non_portable), args, "launch_cluster")
