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


class _View:
    """GPU memory described through the CUDA array interface, with whatever shape the caller claims."""

    def __init__(self, ptr, n):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": "<f4", "version": 3}


def test_gpu_an_array_interface_claiming_more_than_its_allocation_is_refused():
    """A view whose elements run past the allocation that holds its address (here 64 MB claimed over a 4 KB
    buffer) is refused before the launch, naming the argument; views inside it, and torch tensors, launch."""
    k = pf.KernelBuilder("touch_first", target="sm_80")
    p = k.param_ptr("x", pf.f32)
    k.st(p, 1.0, type=pf.f32)
    k.ret()
    fn = pf.load(k)["touch_first"]
    buf = pf.DeviceBuffer.empty((1024,), np.float32)
    fn(1, 1, _View(buf.ptr, 1024))
    fn(1, 1, _View(buf.ptr + 2048, 512))
    pf.synchronize()
    with pytest.raises(pf.LaunchError, match=r"argument 0 \(x\).* past the allocation"):
        fn(1, 1, _View(buf.ptr, 16 << 20))
    torch = pytest.importorskip("torch")
    t = torch.zeros(4096, dtype=torch.float32, device="cuda")
    fn(1, 1, t[1024:])
    torch.cuda.synchronize()
    assert float(t[1024]) == 1.0
