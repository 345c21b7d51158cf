"""Running an mma.sync GemmSchedule on the interpreter for the tests: operands in the schedule's format,
the split-K workspace and counters, C poisoned, numpy's C beside it."""

import warnings

import numpy as np

from ptxforge.int4 import pack_int4
from ptxforge.isa.tensor import EmulatedInstructionWarning
from ptxforge.testing.interp_strategies import check_against_reference, poison


def operands(s, m, n, k, rng):
    """Random A, B in the format of schedule `s` (packed 4-bit, or int8/uint8)."""
    if s.bits == 4:
        signed = s.operand == "s4"
        lo, hi = (-8, 8) if signed else (0, 16)
        return (pack_int4(rng.integers(lo, hi, (m, k)), signed=signed),
                pack_int4(rng.integers(lo, hi, (n, k)), signed=signed))
    dt = np.int8 if s.operand == "s8" else np.uint8
    info = np.iinfo(dt)
    return (rng.integers(info.min, info.max + 1, (m, k)).astype(dt),
            rng.integers(info.min, info.max + 1, (n, k)).astype(dt))


def run_split(g, m, n, k, seed):
    """Interpret schedule `g` (any splits) on an M x N x K problem; C and the counters are checked."""
    s = g.for_problem(k, n)
    rng = np.random.default_rng(seed)
    a, b = operands(s, m, n, k, rng)
    c = poison(np.empty((m, n), np.int32))
    args = [a, b, c, m, n, k]
    expected = {2: s.reference(a, b, k)}
    if s.splits > 1:
        tiles = -(-m // s.block_m) * -(-n // s.block_n)
        args += [poison(np.empty(s.splits * m * n, np.int32)), np.zeros(tiles, np.uint32)]
        expected[7] = np.zeros(tiles, np.uint32)  # every tile's counter back at zero
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmulatedInstructionWarning)
        module = s.module
    check_against_reference(module, grid=s.grid(m, n), block=s.block, args=args, shared=s.shared_bytes,
                            expected=expected)
