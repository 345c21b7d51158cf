"""The project's schedules under the interpreter on drawn configurations and small ragged shapes:
Int4Gemm / Int8Gemm (every compute path, layout, copy width) and TileCopy (cp.async groups and
mbarrier producer/consumer completion) must match their numpy references bit for bit, with no
race, missing wait, out-of-bounds access or partial-warp collective."""

import warnings

import numpy as np
from hypothesis import given

from ptxforge.int4 import pack_int4
from ptxforge.isa.tensor import EmulatedInstructionWarning
from ptxforge.testing.copy_strategies import tile_copy_schedules
from ptxforge.testing.gemm_strategies import gemm_problems, gemm_schedules
from ptxforge.testing.interp_strategies import check_against_reference, poison, seeds


@given(schedule=gemm_schedules(allow_emulated=True, max_acc=32, max_threads=128),
       problem=gemm_problems(max_m=96, max_n=96, max_k=256), seed=seeds())
def test_gemm_schedules_on_the_interpreter(schedule, problem, seed):
    m, n, k = problem
    if schedule.bits == 8:
        k = max(1, k // 2)
    s = schedule.for_problem(k, n)
    rng = np.random.default_rng(seed)
    if s.bits == 4:
        signed = s.operand == "s4"
        lo, hi = (-8, 8) if signed else (0, 16)
        a = pack_int4(rng.integers(lo, hi, (m, k)), signed=signed)
        b = pack_int4(rng.integers(lo, hi, (n, k)), signed=signed)
    else:
        dt = np.int8 if s.operand == "s8" else np.uint8
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max + 1, (m, k)).astype(dt)
        b = rng.integers(info.min, info.max + 1, (n, k)).astype(dt)
    c = poison(np.empty((m, n), np.int32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmulatedInstructionWarning)
        module = s.module
    check_against_reference(module, grid=s.grid(m, n), block=s.block, args=[a, b, c, m, n, k],
                            shared=s.shared_bytes, expected={2: s.reference(a, b, k)})


@given(tc=tile_copy_schedules(max_tiles=6), seed=seeds())
def test_tile_copy_schedules_on_the_interpreter(tc, seed):
    src = tc.random_source(seed)
    dst = tc.poisoned_destination()
    want = tc.reference(src, dst)
    check_against_reference(tc.emit(), grid=tc.grid(sm_count=2), block=tc.block, args=list(tc.args(src, dst)),
                            shared=tc.shared_bytes if tc.uses_dynamic_shared else 0, expected={1: want})
