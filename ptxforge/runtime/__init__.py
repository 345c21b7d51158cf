"""Run ptxforge modules on the GPU through the CUDA driver API (cuda-python's `cuda.bindings`).

    import ptxforge as pf
    fn = pf.load(module)["saxpy"]          # JIT through the driver, cached in-process and on disk
    fn(grid, block, x, y, n, a)            # numpy arrays (In/Out/InOut), DeviceBuffers, torch/CuPy arrays
    print(pf.benchmark(fn, grid, block, x_dev, y_dev, n, a))

Importing this package does not touch the driver; the first load or allocation does.
"""

from .arrays import In, InOut, Out
from .cache import (CacheStats, cache_dir, clear_cache, clear_memory_cache, disk_cache_enabled, set_cache_dir,
                    set_disk_cache)
from .cache import stats as cache_stats
from .device import gpu_available, gpu_skip_reason, native_target, offline_summary
from .driver import DeviceInfo, LaunchLimits, device_info, select_device, synchronize
from .kernel import BoundLaunch, KernelFunction
from .loader import JitWarning, LoadedModule, load
from .memory import DeviceBuffer
from .streams import Stream, query
from .cluster import launch_cluster
from .dependent import launch_dependent
from .tensormap import Im2colTensorMap, TensorMap
from .timing import EventTimer, Timing, benchmark

__all__ = [
    "load", "LoadedModule", "KernelFunction", "BoundLaunch", "In", "Out", "InOut", "DeviceBuffer", "Stream",
    "benchmark", "Timing", "EventTimer", "device_info", "DeviceInfo", "select_device", "synchronize",
    "LaunchLimits", "JitWarning", "cache_dir", "set_cache_dir", "set_disk_cache", "disk_cache_enabled",
    "clear_cache", "clear_memory_cache", "cache_stats", "CacheStats", "TensorMap", "Im2colTensorMap", "query",
    "gpu_available", "gpu_skip_reason", "native_target", "offline_summary", "launch_cluster",
    "launch_dependent",
]
