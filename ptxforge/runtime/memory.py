"""DeviceBuffer: a block of GPU memory with an optional numpy shape and dtype."""

from __future__ import annotations

import math
import weakref

import numpy as np

from ..errors import LaunchError
from ..isa.types import is_integer
from . import dlpack
from .arrays import Elem, big_endian
from . import driver as _drv
from . import faults
from .driver import api, check, driver_error

_PTXFORGE_INTERNAL = True


def _free(ptr: int) -> None:
    """Finalizer of a collected DeviceBuffer, in ptxforge's context (the caller's given back): nothing to
    report to, so errors are dropped."""
    _drv.quietly_in_ours(lambda d: d.cuMemFree(d.CUdeviceptr(ptr)))


def _free_memory(d) -> str:
    """What an allocation the device could not satisfy may still ask for: the bytes free now, of how many."""
    try:
        err, free, total = d.cuMemGetInfo()
    except Exception:
        err = 1
    if err:
        return "free buffers no longer needed (buf.free()) or ask for less"
    return (f"the device has {int(free)} bytes free of {int(total)}; free buffers no longer needed (buf.free()) or "
            "ask for less")


def _host_ptr(array: np.ndarray) -> int:
    return array.ctypes.data


def _on_device(obj) -> bool:
    """Whether `obj` is GPU memory (a DeviceBuffer, a `__cuda_array_interface__` array, a DLPack producer on a CUDA
    device), which the host copies cannot read or write through numpy."""
    if isinstance(obj, DeviceBuffer) or hasattr(obj, "__cuda_array_interface__"):
        return True
    where = getattr(obj, "__dlpack_device__", None)
    if where is None or isinstance(obj, np.ndarray):
        return False
    try:
        return int(where()[0]) in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED)
    except Exception:
        return False


def _refuse_device(obj, what: str, advice: str) -> None:
    """A LaunchError when `obj`, given to `what` as host data, is GPU memory."""
    if _on_device(obj):
        raise LaunchError(f"{what} takes a host (numpy) array; {type(obj).__name__} is GPU memory already: {advice}")


def _size_arg(nbytes):
    """`nbytes` as an int (None stays None); data or a non-integer is a LaunchError saying what to call."""
    if nbytes is None or is_integer(nbytes):
        return None if nbytes is None else int(nbytes)
    if hasattr(nbytes, "__cuda_array_interface__"):
        raise LaunchError(f"DeviceBuffer(nbytes) takes a size; {type(nbytes).__name__} is already device memory: pass "
                          "it to kernels as it is")
    if isinstance(nbytes, np.ndarray) or hasattr(nbytes, "__array_interface__") or hasattr(nbytes, "__array__"):
        shape = getattr(nbytes, "shape", None)
        what = " ".join(str(x) for x in (tuple(shape) if shape is not None else None, getattr(nbytes, "dtype", None),
                                         type(nbytes).__name__) if x is not None)
        raise LaunchError(f"DeviceBuffer(nbytes) takes a size, not data: got a {what}; copy a host array to the GPU with "
                          "DeviceBuffer.from_host(a) (or DeviceBuffer.empty(a.shape, a.dtype) for uninitialized "
                          "memory of its shape)")
    if isinstance(nbytes, (list, tuple, bytes, bytearray, memoryview)):
        raise LaunchError(f"DeviceBuffer(nbytes) takes a size, not data: got a {type(nbytes).__name__}; copy data to "
                          "the GPU with DeviceBuffer.from_host(np.asarray(data)), or give shape= for an empty buffer")
    raise LaunchError(f"DeviceBuffer: nbytes is a number of bytes (a Python or numpy integer), got {nbytes!r} "
                      f"({type(nbytes).__name__})")


def _shape_arg(shape) -> tuple:
    """`shape` (an int or a sequence of ints) as a tuple of ints; anything else is a LaunchError."""
    dims = (shape,) if is_integer(shape) else shape
    if isinstance(dims, (str, bytes)) or not hasattr(dims, "__iter__") or (
            isinstance(dims, np.ndarray) and dims.dtype.kind not in "iu"):
        raise LaunchError(f"DeviceBuffer: shape is an int or a sequence of ints, got {shape!r}")
    dims = tuple(dims)
    if not all(is_integer(n) and n >= 0 for n in dims):
        raise LaunchError(f"DeviceBuffer: shape is an int or a sequence of ints of at least 0, got {shape!r}")
    return tuple(int(n) for n in dims)


#: The bytes a size may not reach: the driver takes sizes as 64-bit unsigned integers.
_SIZE_LIMIT = 1 << 64


def _dtype_problem(dt: np.dtype) -> str | None:
    """Why GPU memory cannot hold elements of `dt`, or None when it can."""
    if dt.hasobject:
        return (f"{dt} holds Python objects (pointers into this process), which GPU memory cannot hold; use a "
                "numeric dtype")
    if dt.itemsize == 0:
        return (f"{dt.str} has no size of its own (a flexible dtype); give one with a size, e.g. 'S16' or "
                "'U4'")
    if big_endian(dt):
        return (f"{dt.str} is big-endian; the GPU reads little-endian memory, so use "
                f"'{dt.newbyteorder('<').str}' (and a.astype('{dt.newbyteorder('<').str}') for the data)")
    return None


def _dtype_arg(dtype) -> np.dtype:
    """`dtype` as a numpy dtype (uint8 when None); one numpy does not know, or whose elements GPU memory cannot
    hold (Python objects, no size, big-endian), is a LaunchError."""
    try:
        dt = np.dtype(dtype if dtype is not None else np.uint8)
    except (TypeError, ValueError) as e:
        raise LaunchError(f"DeviceBuffer: dtype {dtype!r} is not a numpy dtype ({e})") from None
    why = _dtype_problem(dt)
    if why is not None:
        raise LaunchError(f"DeviceBuffer: dtype {why}")
    return dt


class DeviceBuffer:
    """GPU memory (cuMemAlloc) that kernels take as a pointer argument without copies.

    ``DeviceBuffer.empty((n,), np.float32)``, ``DeviceBuffer.from_host(a)``, ``buf.to_host()``, ``buf.copy()``.
    It exposes ``__cuda_array_interface__``, so CuPy/torch/Numba can view it too.  The memory
    is freed with ``free()``, at the end of a ``with`` block, or when the object is collected.
    """

    __slots__ = ("_ptr", "nbytes", "shape", "dtype", "elem", "_finalizer", "__weakref__")

    def __init__(self, nbytes: int | None = None, *, shape=None, dtype=None):
        """Allocate `nbytes` bytes, or an array of `shape` (an int or a sequence of ints) and `dtype` (default
        uint8); with both, they must agree.  Sizes are Python or numpy integers: data is copied in with
        `from_host`, not given here (a LaunchError says so, before any driver call)."""
        nbytes = _size_arg(nbytes)
        dt = _dtype_arg(dtype)
        if shape is not None:
            shape = _shape_arg(shape)
            need = math.prod(shape) * dt.itemsize
            if nbytes is not None and int(nbytes) != need:
                raise LaunchError(f"DeviceBuffer: nbytes={nbytes} disagrees with shape {shape} of {dt} ({need} bytes)")
            nbytes = need
        elif nbytes is None:
            raise LaunchError("DeviceBuffer needs nbytes or a shape")
        else:
            if int(nbytes) % dt.itemsize:
                raise LaunchError(f"DeviceBuffer: {nbytes} bytes is not a whole number of {dt} elements")
            shape = (int(nbytes) // dt.itemsize,)
        if int(nbytes) < 0:
            raise LaunchError(f"DeviceBuffer: negative size {nbytes}")
        if int(nbytes) >= _SIZE_LIMIT:
            raise LaunchError(f"DeviceBuffer: {nbytes} bytes is not a size the driver can allocate (sizes are below "
                              "2**64 bytes, and a GPU holds far less)")
        self.nbytes = int(nbytes)
        self.shape = shape
        self.dtype = dt
        self.elem = Elem.of_dtype(dt)
        self._ptr = 0
        self._finalizer = None
        if self.nbytes:
            prev = _drv.enter()
            try:
                d = api()
                res = d.cuMemAlloc(self.nbytes)
                if res[0] and faults.is_out_of_resources(res[0]):
                    raise driver_error(res[0], f"cuMemAlloc({self.nbytes} bytes)", {int(res[0]): _free_memory(d)})
                self._ptr = int(check(res, f"cuMemAlloc({self.nbytes} bytes)"))
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
        """A device copy of a numpy array (same shape, a 0-d array's too, and dtype); an array of Python objects or
        of big-endian elements is a LaunchError, before any driver call."""
        _refuse_device(array, "DeviceBuffer.from_host", "pass it to kernels as it is (its to_host() or its "
                       "library's own copy gives a host array)")
        a = np.asarray(array)
        a = np.ascontiguousarray(a).reshape(a.shape)  # (ascontiguousarray makes a 0-d array 1-d)
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
        dt = array.dtype
        if dt.hasobject or big_endian(dt):
            raise LaunchError(f"{what}: the host array's dtype {_dtype_problem(dt)}")
        if not array.flags.c_contiguous:
            raise LaunchError(f"{what}: the host array is not C-contiguous; pass np.ascontiguousarray(a)")
        if array.nbytes != self.nbytes:
            raise LaunchError(f"{what}: host array has {array.nbytes} bytes, the buffer {self.nbytes}")
        if dt != self.dtype and self.dtype.itemsize != 1:
            want = self.dtype.str
            raise LaunchError(f"{what}: the host array holds {dt} and the buffer {self.dtype}: a copy moves bytes as "
                              f"they are, so the values would change meaning; convert them (a.astype('{want}')), or "
                              f"pass a.view('{want}') to copy the bits on purpose (a buffer of bytes, "
                              "DeviceBuffer(nbytes), takes any array)")

    def copy_from_host(self, array, stream=None) -> "DeviceBuffer":
        """Copy a numpy array (of exactly nbytes, C-contiguous, not of Python objects nor big-endian) to the
        device; anything else is a LaunchError before any driver call.  Its elements are the buffer's dtype, unless
        the buffer holds bytes (a dtype of one byte, as `DeviceBuffer(nbytes)` makes): a copy never converts."""
        _refuse_device(array, "copy_from_host", "copy GPU memory to GPU memory with a kernel or its library's copy")
        array = np.asarray(array)
        self._check_host(array, "copy_from_host")
        if self.nbytes:
            dst, src, n = self.ptr, _host_ptr(array), self.nbytes
            self._on_stream(stream, lambda d: check(d.cuMemcpyHtoD(d.CUdeviceptr(dst), src, n), "cuMemcpyHtoD"),
                            lambda d, cs: check(d.cuMemcpyHtoDAsync(d.CUdeviceptr(dst), src, n, cs),
                                                "cuMemcpyHtoDAsync"))
        return self

    def copy_to_host(self, out: np.ndarray, stream=None) -> np.ndarray:
        """Copy the device memory into `out`, a writable C-contiguous numpy array of exactly nbytes, neither of
        Python objects nor big-endian, of the buffer's dtype unless the buffer holds bytes (synchronous with respect
        to `stream`)."""
        _refuse_device(out, "copy_to_host", "copy GPU memory to GPU memory with a kernel or its library's copy")
        self._check_host(out, "copy_to_host")
        if not out.flags.writeable:
            raise LaunchError("copy_to_host: the output array is read-only")
        if self.nbytes:
            dst, src, n = _host_ptr(out), self.ptr, self.nbytes

            def on_stream(d, cs):
                check(d.cuMemcpyDtoHAsync(dst, d.CUdeviceptr(src), n, cs), "cuMemcpyDtoHAsync")
                check(d.cuStreamSynchronize(cs), "cuStreamSynchronize")
            s = self._on_stream(stream, lambda d: check(d.cuMemcpyDtoH(dst, d.CUdeviceptr(src), n), "cuMemcpyDtoH"),
                                on_stream)
            faults.synchronized(s)  # the copy waited for everything queued before it on that stream
        return out

    def to_host(self, stream=None) -> np.ndarray:
        """A new numpy array with the buffer's shape and dtype."""
        return self.copy_to_host(np.empty(self.shape, self.dtype), stream=stream)

    def fill_bytes(self, value: int, stream=None) -> "DeviceBuffer":
        """Set every byte to `value`, an int in 0..255 (cuMemsetD8); 0xFF makes float NaNs, good for poisoning
        outputs.  Anything else is a LaunchError: a wider pattern (1.0f is 0x3F800000) would not repeat per
        byte, so fill those through a kernel or `copy_from_host`."""
        if not is_integer(value) or not 0 <= int(value) <= 0xFF:
            raise LaunchError(f"fill_bytes(value) sets each byte, so value is an int in 0..255, got {value!r}")
        value = int(value)
        if self.nbytes:
            dst, n = self.ptr, self.nbytes
            self._on_stream(stream, lambda d: check(d.cuMemsetD8(d.CUdeviceptr(dst), value, n), "cuMemsetD8"),
                            lambda d, cs: check(d.cuMemsetD8Async(d.CUdeviceptr(dst), value, n, cs),
                                                "cuMemsetD8Async"))
        return self

    def copy(self, stream=None) -> "DeviceBuffer":
        """A new buffer of the same shape and dtype holding a copy of this one's bytes (cuMemcpyDtoD, ordered on
        `stream` like a launch).  ``copy.copy`` and ``copy.deepcopy`` make one too: a copy of the object alone
        would share the memory, and freeing either would leave the other pointing at freed memory."""
        src = self.ptr  # a freed buffer raises here, before anything is allocated
        new = DeviceBuffer(shape=self.shape, dtype=self.dtype)
        if self.nbytes:
            dst, n = new.ptr, self.nbytes
            self._on_stream(stream, lambda d: check(d.cuMemcpyDtoD(d.CUdeviceptr(dst), d.CUdeviceptr(src), n),
                                                    "cuMemcpyDtoD"),
                            lambda d, cs: check(d.cuMemcpyDtoDAsync(d.CUdeviceptr(dst), d.CUdeviceptr(src), n, cs),
                                                "cuMemcpyDtoDAsync"))
        return new

    @staticmethod
    def _on_stream(stream, plain, on_stream) -> int:
        """In ptxforge's context, `plain(d)` (the call of the legacy default stream) when `stream` names none, else
        `on_stream(d, cu_stream)` (its ...Async form); returns the stream's handle."""
        from .streams import stream_handle
        s = stream_handle(stream)
        d = api()
        prev = _drv.enter()
        try:
            if s:
                on_stream(d, d.CUstream(s))
            else:
                plain(d)
        finally:
            _drv.leave(prev)
        return s

    def __copy__(self) -> "DeviceBuffer":
        return self.copy()

    def __deepcopy__(self, memo) -> "DeviceBuffer":
        return self.copy()

    def __reduce__(self):
        raise TypeError("a DeviceBuffer is GPU memory of this process and cannot be pickled (another process would "
                        "get a dangling address); pickle buf.to_host() and DeviceBuffer.from_host it there")

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
