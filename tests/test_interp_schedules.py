"""The project's schedules under the interpreter on drawn configurations and small ragged shapes:
Int4Gemm / Int8Gemm (every compute path, layout, copy width) and TileCopy (cp.async groups and
mbarrier producer/consumer completion) must match their numpy references bit for bit, with no
race, missing wait, out-of-bounds access, partial-warp collective or write outside the output
(testing.check_schedules draws a schedule, then a problem from its space)."""

import warnings

from ptxforge.isa.tensor import EmulatedInstructionWarning
from ptxforge.testing import check_schedules
from ptxforge.testing.copy_strategies import tile_copy_schedules
from ptxforge.testing.gemm_strategies import gemm_schedules


def test_gemm_schedules_on_the_interpreter():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmulatedInstructionWarning)
        check_schedules(gemm_schedules(allow_emulated=True, max_acc=32, max_threads=128),
                        space_options=dict(max_m=96, max_n=96, max_k=256), backends=("interp",))


def test_tile_copy_schedules_on_the_interpreter():
    check_schedules(tile_copy_schedules(max_tiles=6), space_options=dict(max_tiles=2), backends=("interp",))
