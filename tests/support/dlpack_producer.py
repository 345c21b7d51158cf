"""A hand-made DLPack producer: `__dlpack__` returns a real legacy 'dltensor' capsule over any address, whose
destructor (run when the capsule is collected unconsumed, as a producer's would call its deleter) is logged."""

import ctypes

from ptxforge.runtime import dlpack as DL

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# (a prototype of its own: the destructor gets the capsule as a bare pointer, during its deallocation)
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

#: the addresses of the DLManagedTensors whose capsule destructor has run (a capsule may outlive its producer,
#: so the destructor is one function for all and records here)
DELETED: set = set()


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destructor(capsule):
    DELETED.add(_capsule_pointer(capsule, b"dltensor"))


class Producer:
    """A DLPack producer of a tensor at `data` on (device type, id) `device`: dtype `code`/`bits`/`lanes` (DLPack's
    codes: 0 int, 1 uint, 2 float), `shape`.  `deleted` counts its capsules whose destructor has run."""

    def __init__(self, data=0x10000, shape=(4,), code=2, bits=32, lanes=1, device=(2, 0)):
        self.data, self.shape, self.code, self.bits, self.lanes, self.device = data, shape, code, bits, lanes, device
        self._alive = []  # the C structures behind every capsule handed out
        self._handed = []  # their addresses

    @property
    def deleted(self) -> int:
        """How many of the capsules this producer handed out were destroyed."""
        return sum(a in DELETED for a in self._handed)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kw):
        mt = DL._DLManagedTensor()
        t = mt.dl_tensor
        t.data = self.data
        t.device.device_type, t.device.device_id = self.device
        t.ndim = len(self.shape)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = self.code, self.bits, self.lanes
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        self._alive.extend([mt, shape])
        self._handed.append(ctypes.addressof(mt))
        return _new_capsule(ctypes.addressof(mt), b"dltensor", ctypes.cast(_destructor, ctypes.c_void_p))
