"""The fast reader behind every kept plan (`schedules.operands._FastReader`): what it trusts a tensor type's
data_ptr() for, and every way an operand falls back to the careful path (no GPU needed: torch-like stand-ins)."""
import numpy as np

from ptxforge.schedules.operands import _FastReader


class TorchLike:
    """The reads the fast path makes of a torch tensor, plus the interface the careful path reads."""

    def __init__(self, shape, ptr=0x7000_0000, device=0, contiguous=True, dtype="int8", shape_type=tuple):
        self.shape, self.dtype, self._ptr = shape_type(shape), dtype, ptr
        self._device, self._contiguous = device, contiguous
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": tuple(shape), "typestr": "|i1",
                                         "version": 2}

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return self._contiguous

    def get_device(self):
        return self._device


class ListShaped(TorchLike):
    """A type whose shape is a list: a plan's key could neither hash it nor compare it with a tuple."""

    def __init__(self, shape, **kw):
        super().__init__(shape, shape_type=list, **kw)


def test_nothing_is_read_fast_before_the_careful_path_taught_the_reader():
    r = _FastReader()
    assert r.read(TorchLike((4, 8))) is None


def test_a_learned_type_is_read_as_address_shape_dtype_and_device():
    r = _FastReader()
    x = TorchLike((4, 8), ptr=0x7000_0100)
    r.learn(x, 0x7000_0100)
    y = TorchLike((16, 2), ptr=0x7100_0000)
    assert r.read(y) == (0x7100_0000, (16, 2), "int8", 0)
    assert r.read(TorchLike((16, 2), dtype="int32")) is None  # each (type, dtype) is learned on its own


def test_a_data_ptr_that_disagrees_with_the_interface_is_never_trusted():
    r = _FastReader()
    x = TorchLike((4, 8), ptr=0x7000_0100)
    r.learn(x, 0x7000_0200)
    assert r.read(x) is None and not r.verified


def test_non_contiguous_and_other_device_operands_go_the_careful_way():
    r = _FastReader()
    r.learn(TorchLike((4, 8)), 0x7000_0000)
    assert r.read(TorchLike((4, 8), contiguous=False)) is None
    assert r.read(TorchLike((4, 8), device=1)) is None
    assert r.read(TorchLike((4, 8), device=-1)) is None  # (torch's answer for a host tensor)


def test_a_type_whose_shape_is_not_a_tuple_is_not_learned():
    r = _FastReader()
    x = ListShaped((4, 8))
    r.learn(x, 0x7000_0000)
    assert r.read(x) is None and not r.verified


def test_numpy_arrays_are_never_read_fast():
    r = _FastReader()
    a = np.zeros((4, 8), np.int8)
    r.learn(a, a.ctypes.data)
    assert r.read(a) is None
