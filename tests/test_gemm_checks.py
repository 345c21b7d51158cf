"""The GEMM schedules refuse what they cannot compute, when they are made or called, before any
kernel runs: unpacked int8 values passed as packed 4-bit bytes, odd K for 4-bit operands,
sizes that are not positive integers."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.schedules import Int4Gemm, Int8Gemm


def test_packed_operands_must_be_uint8():
    g = Int4Gemm.for_shape(64, 64, 64, target="sm_80", hopper=False)
    unpacked = np.zeros((64, 32), np.int8)  # int8: one value per byte, the wrong format
    with pytest.raises(pf.ValidationError, match="packed .s4 operands are uint8"):
        g.run(unpacked, unpacked)
    packed = pf.int4.pack_int4(np.zeros((64, 64), np.int8)) if hasattr(pf, "int4") else None
    if packed is not None:
        assert packed.dtype == np.uint8


@pytest.mark.parametrize("shape", [(-5, 8, 8), (8, 0, 8), (8, 8, 0), (8.0, 8, 8), (True, 8, 8)])
def test_for_shape_refuses_sizes_that_are_not_positive_ints(shape):
    with pytest.raises(pf.ValidationError, match="must be an int"):
        Int8Gemm.for_shape(*shape, target="sm_80", hopper=False)


def test_for_problem_checks_k():
    g = Int4Gemm.for_shape(64, 64, 64, target="sm_80", hopper=False)
    with pytest.raises(pf.ValidationError, match="K=7 is odd"):
        g.for_problem(7)
    with pytest.raises(pf.ValidationError, match="K must be an int"):
        g.for_problem(-2)
    with pytest.raises(pf.ValidationError, match="K=7 is odd"):
        Int4Gemm.for_shape(64, 64, 7, target="sm_80", hopper=False)
    assert g.for_problem(64) is not None
    Int8Gemm.for_shape(64, 64, 7, target="sm_80", hopper=False)  # 8-bit operands: any K
