"""DeviceBuffer's constructor takes a size (nbytes, or shape and dtype), not data: a host array or
anything else of the wrong type is refused with a LaunchError before any driver call (no GPU needed)."""

import numpy as np
import pytest

import ptxforge as pf
import ptxforge.runtime.memory as memory
from ptxforge.errors import LaunchError
from ptxforge.runtime import DeviceBuffer


@pytest.fixture(autouse=True)
def no_driver(monkeypatch):
    """Any driver call fails the test: the checks must come first."""
    def refuse(*a, **k):
        raise AssertionError("the driver was called")
    monkeypatch.setattr(memory, "api", refuse)
    monkeypatch.setattr(memory._drv, "enter", refuse)


@pytest.mark.parametrize("data", [np.zeros(4, np.float32), np.arange(6, dtype=np.int16).reshape(2, 3),
                                  np.zeros((), np.float64)])
def test_a_numpy_array_points_at_from_host(data):
    with pytest.raises(LaunchError) as info:
        pf.DeviceBuffer(data)
    msg = str(info.value)
    assert "DeviceBuffer.from_host" in msg and str(data.shape) in msg and str(data.dtype) in msg


@pytest.mark.parametrize("data", [[1.0, 2.0], (1, 2, 3), b"\x00" * 8, bytearray(4), memoryview(b"ab")])
def test_host_data_of_other_kinds_points_at_from_host(data):
    with pytest.raises(LaunchError, match="DeviceBuffer.from_host"):
        DeviceBuffer(data)


def test_a_device_array_is_not_copied_through_the_constructor():
    class Dev:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False), "version": 3}
    with pytest.raises(LaunchError, match="already device memory"):
        DeviceBuffer(Dev())


@pytest.mark.parametrize("bad", [1.5, 16.0, "16", True, np.bool_(True), None.__class__])
def test_nbytes_must_be_an_integer(bad):
    with pytest.raises(LaunchError, match="nbytes"):
        DeviceBuffer(bad)


@pytest.mark.parametrize("shape", [(2.5,), 3.0, ("2",), (True, 2), np.zeros(2), (-1, 2), "ab"])
def test_shapes_must_be_integers(shape):
    with pytest.raises(LaunchError, match="shape"):
        DeviceBuffer(shape=shape, dtype=np.float32)


@pytest.mark.parametrize("dtype", ["not-a-dtype", object()])
def test_an_unknown_dtype_is_a_launch_error(dtype):
    with pytest.raises(LaunchError, match="dtype"):
        DeviceBuffer(shape=(0,), dtype=dtype)


def test_empty_buffers_of_numpy_sizes_still_need_no_gpu():
    assert DeviceBuffer(np.int64(0)).nbytes == 0
    b = DeviceBuffer(shape=(np.int64(0), 3), dtype=np.float32)
    assert b.shape == (0, 3) and all(type(n) is int for n in b.shape)
    assert DeviceBuffer(shape=np.array([0, 2]), dtype=np.int8).shape == (0, 2)
