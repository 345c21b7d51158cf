"""DeviceBuffer: a block of GPU memory with an optional numpy shape and dtype."""

from __future__ import annotations

import math
import weakref

import numpy as np

from ..errors import LaunchError
from .arrays import Elem
from . import driver as _drv
from . import faults
from .driver import api, check

_PTXFORGE_INTERNAL = True


def _free(ptr: int) -> None:
    """Finalizer of a collected DeviceBuffer, in ptxforge's context (the caller's given back): nothing to
    report to, so errors are dropped."""
    _drv.quietly_in_ours(lambda d: d.cuMemFree(d.CUdeviceptr(ptr)))


def _host_ptr(array: np.ndarray) -> int:
    return array.ctypes.data


class DeviceBuffer:
    """GPU memory (cuMemAlloc) that kernels take as a pointer argument without copies.

    ``DeviceBuffer.empty((n,), np.float32)``, ``DeviceBuffer.from_host(a)``, ``buf.to_host()``.
    It exposes ``__cuda_array_interface__``, so CuPy/torch/Numba can view it too.  The memory
    is freed with ``free()``, at the end of a ``with`` block, or when the object is collected.
    """

    __slots__ = ("_ptr", "nbytes", "shape", "dtype", "elem", "_finalizer", "__weakref__")

    def __init__(self, nbytes: int | None = None, *, shape=None, dtype=None):
        if shape is not None:
            shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)
            dt = np.dtype(dtype if dtype is not None else np.uint8)
            need = math.prod(shape) * dt.itemsize
            if nbytes is not None and int(nbytes) != need:
                raise LaunchError(f"DeviceBuffer: nbytes={nbytes} disagrees with shape {shape} of {dt} ({need} bytes)")
            nbytes = need
        elif nbytes is None:
            raise LaunchError("DeviceBuffer needs nbytes or a shape")
        else:
            dt = np.dtype(dtype) if dtype is not None else np.dtype(np.uint8)
            if int(nbytes) % dt.itemsize:
                raise LaunchError(f"DeviceBuffer: {nbytes} bytes is not a whole number of {dt} elements")
            shape = (int(nbytes) // dt.itemsize,)
        if int(nbytes) < 0:
            raise LaunchError(f"DeviceBuffer: negative size {nbytes}")
        self.nbytes = int(nbytes)
        self.shape = shape
        self.dtype = dt
        self.elem = Elem.of_dtype(dt)
        self._ptr = 0
        self._finalizer = None
        if self.nbytes:
            prev = _drv.enter()
            try:
                self._ptr = int(check(api().cuMemAlloc(self.nbytes), f"cuMemAlloc({self.nbytes} bytes)"))
            finally:
                _drv.leave(prev)
            self._finalizer = weakref.finalize(self, _free, self._ptr)

    # ------------------------------------------------------------ construction
    @classmethod
    def empty(cls, shape, dtype=np.float32) -> "DeviceBuffer":
        """Uninitialized device memory for an array of `shape` and `dtype`."""
        return cls(shape=shape, dtype=dtype)

    @classmethod
    def from_host(cls, array, stream=None) -> "DeviceBuffer":
        """A device copy of a numpy array (same shape and dtype)."""
        a = np.ascontiguousarray(array)
        buf = cls(shape=a.shape, dtype=a.dtype)
        buf.copy_from_host(a, stream=stream)
        return buf

    # ------------------------------------------------------------ properties
    @property
    def ptr(self) -> int:
        """The device address (0 for an empty buffer)."""
        if not self._ptr and self.nbytes:
            raise LaunchError("this DeviceBuffer was freed")
        return self._ptr

    @property
    def size(self) -> int:
        """The number of elements (the product of the shape)."""
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __int__(self) -> int:
        return self.ptr

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3}

    def __repr__(self) -> str:
        state = "freed" if self._ptr == 0 and self.nbytes else f"0x{self._ptr:x}"
        return f"DeviceBuffer({self.shape}, {self.dtype}, {state})"

    # ------------------------------------------------------------ copies
    def _check_host(self, array: np.ndarray, what: str) -> None:
        if not isinstance(array, np.ndarray):
            raise LaunchError(f"{what} takes a numpy array, got {type(array).__name__}")
        if not array.flags.c_contiguous:
            raise LaunchError(f"{what}: the host array is not C-contiguous; pass np.ascontiguousarray(a)")
        if array.nbytes != self.nbytes:
            raise LaunchError(f"{what}: host array has {array.nbytes} bytes, the buffer {self.nbytes}")

    def copy_from_host(self, array, stream=None) -> "DeviceBuffer":
        """Copy a numpy array (of exactly nbytes) to the device."""
        array = np.asarray(array)
        self._check_host(array, "copy_from_host")
        if self.nbytes:
            from .streams import stream_handle
            s = stream_handle(stream)
            d = api()
            prev = _drv.enter()
            try:
                if s:
                    check(d.cuMemcpyHtoDAsync(d.CUdeviceptr(self.ptr), _host_ptr(array), self.nbytes, d.CUstream(s)),
                          "cuMemcpyHtoDAsync")
                else:
                    check(d.cuMemcpyHtoD(d.CUdeviceptr(self.ptr), _host_ptr(array), self.nbytes), "cuMemcpyHtoD")
            finally:
                _drv.leave(prev)
        return self

    def copy_to_host(self, out: np.ndarray, stream=None) -> np.ndarray:
        """Copy the device memory into `out` (synchronous with respect to `stream`)."""
        self._check_host(out, "copy_to_host")
        if not out.flags.writeable:
            raise LaunchError("copy_to_host: the output array is read-only")
        if self.nbytes:
            from .streams import stream_handle
            s = stream_handle(stream)
            d = api()
            prev = _drv.enter()
            try:
                if s:
                    check(d.cuMemcpyDtoHAsync(_host_ptr(out), d.CUdeviceptr(self.ptr), self.nbytes, d.CUstream(s)),
                          "cuMemcpyDtoHAsync")
                    check(d.cuStreamSynchronize(d.CUstream(s)), "cuStreamSynchronize")
                else:
                    check(d.cuMemcpyDtoH(_host_ptr(out), d.CUdeviceptr(self.ptr), self.nbytes), "cuMemcpyDtoH")
            finally:
                _drv.leave(prev)
            faults.synchronized(s)  # the copy waited for everything queued before it on that stream
        return out

    def to_host(self, stream=None) -> np.ndarray:
        """A new numpy array with the buffer's shape and dtype."""
        return self.copy_to_host(np.empty(self.shape, self.dtype), stream=stream)

    def fill_bytes(self, value: int, stream=None) -> "DeviceBuffer":
        """Set every byte to `value` (cuMemsetD8); 0xFF makes float NaNs, good for poisoning outputs."""
        if self.nbytes:
            from .streams import stream_handle
            s = stream_handle(stream)
            d = api()
            prev = _drv.enter()
            try:
                if s:
                    check(d.cuMemsetD8Async(d.CUdeviceptr(self.ptr), int(value) & 0xFF, self.nbytes, d.CUstream(s)),
                          "cuMemsetD8Async")
                else:
                    check(d.cuMemsetD8(d.CUdeviceptr(self.ptr), int(value) & 0xFF, self.nbytes), "cuMemsetD8")
            finally:
                _drv.leave(prev)
        return self

    # ------------------------------------------------------------ lifetime
    def free(self) -> None:
        """Release the memory now (later use raises)."""
        if self._finalizer is not None and self._finalizer.detach() is not None:
            ptr, self._ptr = self._ptr, 0
            if faults.dead_reason() is not None:
                return  # the context is gone with its memory; nothing to free, nothing more to report
            d = api()
            prev = _drv.enter()
            try:
                check(d.cuMemFree(d.CUdeviceptr(ptr)), "cuMemFree")
            finally:
                _drv.leave(prev)
        self._ptr = 0

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.free()
