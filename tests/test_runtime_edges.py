"""The runtime at its edges, without a GPU: what DeviceBuffer and its copies refuse, how host arrays are staged
around a launch, scalar parameters of every width, foreign arrays' interfaces, streams and modules after their
end, and the assembler's toolchain errors.  GPU paths run on the driver stand-in of tests/support."""

import gc
import math
import os
import weakref

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.errors import LaunchError
from ptxforge.runtime import DeviceBuffer

pytest.importorskip("cuda.bindings.driver")

from support.driver_standin import OURS, drv, kernel_of, mem_drv  # noqa: E402,F401  (fixtures)


def _driver_calls(sd):
    return [n for n in sd.names() if n not in ("cuCtxGetCurrent", "cuCtxSetCurrent")]


# ---------------------------------------------------------------- DeviceBuffer and its copies

@pytest.mark.parametrize("dtype", [object, np.dtype([("a", np.float32), ("b", object)])])
def test_object_dtypes_are_refused_before_the_driver(mem_drv, dtype):
    with pytest.raises(LaunchError, match="Python objects"):
        DeviceBuffer(shape=(2,), dtype=dtype)
    with pytest.raises(LaunchError, match="Python objects"):
        DeviceBuffer.from_host(np.array([None, 1], dtype=object))
    buf = DeviceBuffer(16)
    mem_drv.calls.clear()
    host = np.empty(2, dtype=object)
    with pytest.raises(LaunchError, match="copy_to_host: .*Python objects"):
        buf.copy_to_host(host)
    with pytest.raises(LaunchError, match="copy_from_host: .*Python objects"):
        buf.copy_from_host(host)
    assert _driver_calls(mem_drv) == []
    assert host[0] is None  # untouched


@pytest.mark.parametrize("dtype", [">f4", ">i2", np.dtype([("a", ">f4"), ("b", "<i4")])])
def test_big_endian_dtypes_are_refused_by_device_buffers_and_copies(mem_drv, dtype):
    with pytest.raises(LaunchError, match="big-endian"):
        DeviceBuffer(shape=(2,), dtype=dtype)
    with pytest.raises(LaunchError, match="big-endian"):
        DeviceBuffer.from_host(np.zeros(2, dtype))
    buf = DeviceBuffer(shape=(2,), dtype=np.dtype(dtype).newbyteorder("<"))
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="copy_from_host: .*big-endian"):
        buf.copy_from_host(np.ones(2, dtype))
    with pytest.raises(LaunchError, match="copy_to_host: .*big-endian"):
        buf.copy_to_host(np.zeros(2, dtype))
    assert _driver_calls(mem_drv) == []
    DeviceBuffer.from_host(np.ones(2, np.dtype(dtype).newbyteorder("<")))  # little-endian is fine
    DeviceBuffer.from_host(np.ones(2, "|u1"))  # as are single bytes, which have no order


@pytest.mark.parametrize("dtype", [str, bytes, "S", "U", "V"])
def test_dtypes_without_a_size_are_launch_errors(mem_drv, dtype):
    with pytest.raises(LaunchError, match="no size of its own"):
        DeviceBuffer(16, dtype=dtype)
    assert _driver_calls(mem_drv) == []


@pytest.mark.parametrize("kw", [dict(shape=(1 << 40, 1 << 40), dtype=np.float32), dict(nbytes=1 << 64),
                                dict(shape=(1 << 61,), dtype=np.float64)])
def test_sizes_of_2_to_the_64_bytes_and_more_are_launch_errors(mem_drv, kw):
    with pytest.raises(LaunchError, match="2\\*\\*64"):
        DeviceBuffer(**kw)
    assert _driver_calls(mem_drv) == []


@pytest.mark.parametrize("value", [256, -1, 0x3F800000, 1.0, "1", True, None])
def test_fill_bytes_takes_one_byte(mem_drv, value):
    buf = DeviceBuffer(16)
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="fill_bytes.*0..255"):
        buf.fill_bytes(value)
    assert _driver_calls(mem_drv) == []
    buf.fill_bytes(np.uint8(0x7F))
    assert bytes(mem_drv.mem[buf.ptr]) == b"\x7f" * 16


@pytest.mark.parametrize("value", [np.array(3.0, np.float32), np.float64(2.5), 7])
def test_from_host_keeps_a_0d_shape(mem_drv, value):
    buf = DeviceBuffer.from_host(value)
    assert buf.shape == () and buf.to_host().shape == ()
    assert buf.to_host()[()] == np.asarray(value)[()]
