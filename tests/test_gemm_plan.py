"""The fast operand reader behind the schedules' plans and run() fast paths, on the CPU (no driver needed)."""

import numpy as np

from ptxforge.schedules import operands
from ptxforge.schedules.gemm import plan as plan_mod


class FakeTensor:
    """A GPU-array stand-in with the torch-like accessors the fast path reads."""

    def __init__(self, ptr, shape, dtype="int8", device=0, contiguous=True, cai_ptr=None, requires_grad=False):
        self.ptr, self.shape, self.dtype, self.device = ptr, tuple(shape), dtype, device
        self.contiguous, self.requires_grad = contiguous, requires_grad
        self.cai_ptr = ptr if cai_ptr is None else cai_ptr

    def data_ptr(self):
        return self.ptr

    def is_contiguous(self):
        return self.contiguous

    def get_device(self):
        return self.device

    @property
    def __cuda_array_interface__(self):
        return {"data": (self.cai_ptr, False), "shape": self.shape, "typestr": "|i1", "version": 3, "stream": 1}


def test_align_class():
    assert operands.align_class(0x1000) == 256
    assert operands.align_class(0x1010) == 16
    assert operands.align_class(0x1001) == 1
    assert operands.align_class(None) == 256


def test_a_type_is_trusted_only_after_its_data_ptr_agreed_with_the_interface():
    r = operands._FastReader()
    x = FakeTensor(0x7000, (4, 8))
    assert r.read(x) is None  # unknown type: careful path
    r.learn(FakeTensor(0x9000, (2, 2), cai_ptr=0x9100), 0x9100)  # data_ptr disagrees: not trusted
    assert r.read(x) is None
    r.learn(x, 0x7000)
    assert r.read(x) == (0x7000, (4, 8), "int8", 0)


def test_non_contiguous_and_host_tensors_take_the_careful_path():
    r = operands._FastReader()
    x = FakeTensor(0x7000, (4, 8))
    r.learn(x, 0x7000)
    assert r.read(FakeTensor(0x7000, (4, 8), contiguous=False)) is None
    assert r.read(FakeTensor(0x7000, (4, 8), device=-1)) is None
    assert r.read(FakeTensor(0x7000, (4, 8), dtype="int32")) is None  # a dtype not seen yet for this type


def test_a_tensor_that_requires_grad_is_never_read_fast():
    """torch refuses to describe a tensor that requires grad (its array interface and DLPack raise), so the
    careful path refuses it by name; the fast path must not launch on one after its type was learned from a
    detached tensor, nor learn a type from one."""
    r = operands._FastReader()
    r.learn(FakeTensor(0x7000, (4, 8)), 0x7000)
    assert r.read(FakeTensor(0x7000, (4, 8))) is not None
    assert r.read(FakeTensor(0x7000, (4, 8), requires_grad=True)) is None
    fresh = operands._FastReader()
    fresh.learn(FakeTensor(0x7000, (4, 8), requires_grad=True), 0x7000)
    assert fresh.read(FakeTensor(0x7000, (4, 8))) is None


def test_a_type_whose_shape_is_not_a_tuple_is_never_read_fast():
    """A plan's key hashes and compares the shape as the reader returns it: a type whose shape is a list is
    not learned (torch.Size is a tuple), so its arrays always take the careful path."""
    class ListShaped(FakeTensor):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.shape = list(self.shape)
    r = operands._FastReader()
    x = ListShaped(0x7000, (4, 8))
    r.learn(x, 0x7000)
    assert r.read(x) is None and not r.verified


def test_numpy_arrays_are_never_read_fast():
    r = operands._FastReader()
    a = np.zeros((4, 8), np.int8)
    r.learn(a, a.ctypes.data)
    assert r.read(a) is None and not r.verified


def test_only_arrays_on_the_learned_device_are_read_fast():
    """An array on another device than the one the careful path verified goes the careful way (where the
    driver's answer refuses it by name); so does one learned from another device, whose type stays untrusted."""
    r = operands._FastReader()
    r.learn(FakeTensor(0x7000, (4, 8), device=1), 0x7000)  # the first verified array pins the device
    assert r.read(FakeTensor(0x7000, (4, 8), device=1)) == (0x7000, (4, 8), "int8", 1)
    assert r.read(FakeTensor(0x7000, (4, 8), device=0)) is None
    assert r.read(FakeTensor(0x7000, (4, 8), device=-1)) is None

    class Other(FakeTensor):
        pass
    r.learn(Other(0x8000, (4, 8), device=2), 0x8000)
    assert (Other, "int8") not in r.verified and r.read(Other(0x8000, (4, 8), device=2)) is None
    assert r.device == 1


def test_producer_streams():
    x = FakeTensor(0x7000, (4, 8))
    assert operands.producers_ok(0, x)  # legacy default stream on both sides

    class OnStream(FakeTensor):
        @property
        def __cuda_array_interface__(self):
            return {"data": (self.ptr, False), "shape": self.shape, "typestr": "|i1", "version": 3,
                    "stream": 0xABC}

    assert not operands.producers_ok(0, OnStream(0x7000, (4, 8)))
    assert operands.producers_ok(0xABC, OnStream(0x7000, (4, 8)))


def test_dtype_checks_accept_numpy_and_framework_names():
    assert plan_mod._is_byte(np.dtype(np.int8)) and plan_mod._is_byte(np.dtype(np.uint8))
    assert not plan_mod._is_byte(np.dtype(np.int16))
    assert plan_mod._is_int32(np.dtype(np.int32)) and not plan_mod._is_int32(np.dtype(np.uint32))

    class FrameworkDtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"framework.{self.name}"

    assert plan_mod._is_byte(FrameworkDtype("int8")) and plan_mod._is_int32(FrameworkDtype("int32"))
    assert not plan_mod._is_int32(FrameworkDtype("float32"))


def test_hopper_operand_element_checks():
    """What a HopperGemm takes, as the array interfaces describe it (torch's bfloat16 arrives as '<V2')."""
    import pytest
    from ptxforge.errors import ValidationError
    from ptxforge.runtime.arrays import Elem
    from ptxforge.schedules.hopper import HopperGemm
    from ptxforge.schedules.hopper.operands import check_elems

    def views(a, c):
        return [(0, (), a), (0, (), a), (0, (), c)]
    bf16, s8 = HopperGemm("bf16"), HopperGemm("s8")
    for a in (Elem("bf", 16), Elem("V", 16), Elem("u", 16)):
        check_elems(bf16, views(a, Elem("f", 32)))
    check_elems(s8, views(Elem("i", 8), Elem("i", 32)))
    with pytest.raises(ValidationError, match="bfloat16"):
        check_elems(bf16, views(Elem("f", 32), Elem("f", 32)))
    with pytest.raises(ValidationError, match="int32"):
        check_elems(s8, views(Elem("i", 8), Elem("f", 32)))
    with pytest.raises(ValidationError, match="8-bit"):
        check_elems(s8, views(Elem("f", 16), Elem("i", 32)))


def test_hopper_s4_takes_packed_uint8_only():
    """An s4 HopperGemm refuses int8 operands (almost always one unpacked value per byte, which the kernel would
    read as two: K doubled and every result wrong), by name, through the element check and a whole interpreter
    run, as the mma.sync schedules do; packed uint8 bytes pass."""
    import numpy as np
    import pytest
    from ptxforge.errors import ValidationError
    from ptxforge.int4 import pack_int4
    from ptxforge.runtime.arrays import Elem
    from ptxforge.schedules.gemm import Int4Gemm
    from ptxforge.schedules.hopper import HopperGemm
    from ptxforge.schedules.hopper.operands import check_elems

    s4 = Int4Gemm.for_shape(40, 72, 256, target="sm_90a")
    assert isinstance(s4, HopperGemm)
    check_elems(s4, [(0, (), Elem("u", 8)), (0, (), Elem("u", 8)), (0, (), Elem("i", 32))])
    with pytest.raises(ValidationError, match="B holds int8, but packed .s4 operands are uint8"):
        check_elems(s4, [(0, (), Elem("u", 8)), (0, (), Elem("i", 8)), (0, (), Elem("i", 32))])
    rng = np.random.default_rng(3)
    a, b = rng.integers(-8, 8, (40, 256)).astype(np.int8), rng.integers(-8, 8, (72, 256)).astype(np.int8)
    with pytest.raises(ValidationError, match="A holds int8"):
        s4.interpret(a, b)
    got, rep = s4.interpret(pack_int4(a), pack_int4(b))
    assert rep.ok and np.array_equal(got, a.astype(np.int64) @ b.T.astype(np.int64))
