"""Errors about what a caller passed name the caller's line, not a line inside ptxforge; the instructions a
schedule emits still name the schedule's emitting lines in its listing."""

import re

import numpy as np
import pytest

from ptxforge.bfloat16 import from_bf16, to_bf16
from ptxforge.errors import ValidationError
from ptxforge.int4 import pack_int4, unpack_int4
from ptxforge.schedules import TileCopy
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
from ptxforge.schedules.hopper import HopperGemm

I8 = np.int8

MISTAKES = {
    "a GEMM tile that does not split into warps": lambda: Int8Gemm(target="sm_80", block_m=7),
    "a GEMM of no stages": lambda: Int8Gemm(target="sm_80", stages=0),
    "GEMM rows of two lengths": lambda: Int8Gemm(target="sm_80").run(np.zeros((16, 64), I8), np.zeros((32, 48), I8)),
    "16-bit operands of an int8 GEMM": lambda: Int8Gemm(target="sm_80").interpret(np.zeros((16, 64), np.int16),
                                                                                np.zeros((32, 64), I8)),
    "a GEMM of no rows": lambda: Int4Gemm(target="sm_80").interpret(np.zeros((0, 32), np.uint8),
                                                                    np.zeros((32, 32), np.uint8)),
    "a GEMM plan of no rows": lambda: Int8Gemm(target="sm_80").plan(0, 16, 64),
    "a Hopper tile of a width wgmma has not": lambda: HopperGemm("s8", block_n=72),
    "Hopper rows of two lengths": lambda: HopperGemm("s8").interpret(np.zeros((16, 64), I8), np.zeros((32, 48), I8)),
    "a tile copy of no rows": lambda: TileCopy(rows=0, cols=64, dtype="f32"),
    "a tile copy source of another shape": lambda: TileCopy(rows=64, cols=64, dtype="f32").interpret(
        np.zeros((3, 3), np.float32)),
    "an odd count of int4 values": lambda: pack_int4(np.zeros(3, I8)),
    "int4 bytes of a wide type": lambda: unpack_int4(np.zeros(4, np.int32)),
    "integers rounded to bf16": lambda: to_bf16(np.zeros(4, np.int32)),
    "bf16 patterns of a wide type": lambda: from_bf16(np.zeros(4, np.int32)),
}


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_an_error_about_what_the_caller_passed_names_the_callers_line(mistake):
    with pytest.raises(ValidationError) as e:
        MISTAKES[mistake]()
    assert e.value.loc is not None and e.value.loc.filename == __file__, (mistake, str(e.value))


@pytest.mark.parametrize("module, emitters", [
    (lambda: TileCopy(rows=77, cols=301, dtype="s4", src_row_stride_bytes=160, dst_row_stride_bytes=160).emit(), {"tile_copy_emit.py"}),
    (lambda: Int4Gemm(target="sm_80").module, {"kernel.py", "copy.py", "epilogue.py", "fragments.py", "addressing.py"}),
])
def test_a_schedules_listing_names_the_lines_that_emitted_each_instruction(module, emitters):
    located = [(m.group(1).rsplit("/", 1)[-1], line) for line in module().listing().splitlines()
               for m in [re.search(r"// ([\w/.]+):\d+\s*$", line)] if m]
    # (a module is built once per schedule: the test that built it first is the caller its `ret` names)
    assert {name for name, _ in located if not name.startswith("test_")} == emitters
    # the caller's line is named only by the `ret` the module adds after the schedule's last instruction
    assert all("ret;" in line for name, line in located if name not in emitters)
