"""GPU checks of runtime behaviour the CPU tests (`test_runtime_review.py`) can only show through the driver
stand-in: what benchmark() times on a non-blocking stream, and device-to-device copies of a DeviceBuffer."""

import copy

import numpy as np
import pytest

import ptxforge as pf
from support.spin import spin_module

pytestmark = pytest.mark.gpu


def test_gpu_benchmark_of_a_launch_on_a_non_blocking_stream_times_the_kernel():
    """A kernel of about a millisecond, bound to a ptxforge Stream (non-blocking): events recorded on the legacy
    default stream would not wait for it and time a few microseconds; benchmark() records them on the launch's
    stream, so every sample holds the kernel."""
    fn = pf.load(spin_module("review_spin"))["review_spin"]
    out = pf.DeviceBuffer.empty((32,), np.float32)
    with pf.Stream() as s:
        bound = fn.bind(1, 32, out, 400_000, stream=s)
        t = pf.runtime.benchmark(bound, warmup=1, repeat=3)
        s.synchronize()
    assert t.min_us > 100, t


def test_gpu_device_buffer_copies_hold_the_same_bytes_in_new_memory():
    a = pf.DeviceBuffer.from_host(np.arange(1000, dtype=np.float32))
    with pf.Stream() as s:
        on_stream = a.copy(stream=s)
        s.synchronize()
    for b in (copy.copy(a), copy.deepcopy(a), a.copy(), on_stream):
        assert b.ptr != a.ptr
        np.testing.assert_array_equal(b.to_host(), np.arange(1000, dtype=np.float32))
        b.free()
    np.testing.assert_array_equal(a.to_host(), np.arange(1000, dtype=np.float32))
