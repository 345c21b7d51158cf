"""Read a DLPack capsule with ctypes: data pointer, device, dtype, shape and strides.

Only the legacy (unversioned) `DLManagedTensor` is read, which every producer still
returns from a plain `__dlpack__()` call.  The capsule is *not* consumed: it keeps
its name, so its own destructor calls the producer's deleter when it is collected.
DLPack lets a consumer rely on the memory only until that deleter runs, and a producer
may export a temporary (a converted copy) that the deleter frees, so a launch keeps the
capsule itself (`arrays.DeviceView.owner`, then the launch's `Resolved.keep`, and a
`BoundLaunch` as long as it can launch) until it is done with the memory.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

_PTXFORGE_INTERNAL = True

# DLDeviceType values (dlpack.h)
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
#: device types whose memory the host reads: a producer on one is read as numpy (copied like a host array)
HOST_TYPES = (KDL_CPU, KDL_CUDA_HOST)
DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
                10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}

# DLDataTypeCode -> element kind ("i", "u", "f" as numpy spells them; "bf" for bfloat)
_CODES = {0: "i", 1: "u", 2: "f", 4: "bf", 5: "c", 6: "b"}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


@dataclass(frozen=True)
class DLPackInfo:
    """The facts of one DLPack tensor (strides in elements, as DLPack gives them; None = compact row-major)."""

    ptr: int
    device_type: int
    device_id: int
    kind: str
    bits: int
    lanes: int
    shape: tuple
    strides: tuple | None

    @property
    def device(self) -> str:
        """The DLPack device type in words ("cuda", "cpu", "cuda_managed" ...)."""
        return DEVICE_NAMES.get(self.device_type, f"device type {self.device_type}")


def read_capsule(capsule) -> DLPackInfo:
    """Parse a 'dltensor' capsule without consuming it."""
    if not _is_valid(capsule, b"dltensor"):
        raise ValueError("not a DLPack 'dltensor' capsule (already consumed, or a versioned capsule)")
    addr = _get_pointer(capsule, b"dltensor")
    t = _DLManagedTensor.from_address(addr).dl_tensor
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    strides = tuple(int(t.strides[i]) for i in range(ndim)) if t.strides else None
    code = int(t.dtype.code)
    return DLPackInfo(
        ptr=(t.data or 0) + int(t.byte_offset),
        device_type=int(t.device.device_type),
        device_id=int(t.device.device_id),
        kind=_CODES.get(code, f"code{code}"),
        bits=int(t.dtype.bits),
        lanes=int(t.dtype.lanes),
        shape=shape,
        strides=strides,
    )
