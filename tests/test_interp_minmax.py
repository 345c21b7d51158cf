"""min and max where the PTX ISA text leaves the answer to the hardware: signed zeros and NaN operands.

Every ordered pair of +-0, +-NaN, +-1 and +-inf goes through the min/max instructions (f16, bf16, f32, f64,
with and without .NaN), the vector half-precision atomics and the 1-D bulk reductions into global memory.  On
the CPU the interpreter's result bits must equal a reference written here from the rule the H200 showed
(`ptxforge/interp/minmax.py`); on a GPU they must equal the GPU's.  A failure lists each pair that differs."""

import math
import struct

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T

from support.reduce_kernels import half_atom_kernel, one_d_kernel

VALUES = (0.0, -0.0, float("nan"), -float("nan"), 1.0, -1.0, float("inf"), -float("inf"))
NAMES = ("+0", "-0", "+nan", "-nan", "+1", "-1", "+inf", "-inf")


def special_pairs(tname):
    """(x, y): the raw bits of every ordered pair of VALUES as `tname` (f16 and bf16 as uint16, f32 as uint32, f64
    as uint64), x running slowest."""
    if tname == "f64":
        x = np.repeat(np.array(VALUES, np.float64), len(VALUES))
        return x.view(np.uint64).copy(), np.tile(np.array(VALUES, np.float64), len(VALUES)).view(np.uint64).copy()
    x = np.repeat(np.array(VALUES, np.float32), len(VALUES))
    y = np.tile(np.array(VALUES, np.float32), len(VALUES))
    if tname == "f32":
        return x.view(np.uint32).copy(), y.view(np.uint32).copy()
    if tname == "bf16":
        return tuple((v.view(np.uint32) >> 16).astype(np.uint16) for v in (x, y))
    return x.astype(np.float16).view(np.uint16), y.astype(np.float16).view(np.uint16)


def differences(want, cpu, gpu_side: bool = True) -> str:
    """One line per pair whose result bits differ between `want` (the GPU's, or the reference's) and the
    interpreter's."""
    return "\n".join(f"({NAMES[i // len(VALUES)]}, {NAMES[i % len(VALUES)]}): {'GPU' if gpu_side else 'reference'} "
                     f"{int(w):#x}, interpreter {int(c):#x}" for i, (w, c) in enumerate(zip(want, cpu)) if w != c)


def minmax_kernel(op, tname, n, nan):
    """Thread i: out[i] = op(x[i], y[i]) through the min or max instruction of type `tname` (.NaN with `nan`)."""
    tt = T.lookup(tname)
    bt = T.lookup(f"b{tt.bits}")
    k = pf.KernelBuilder("minmax", target="sm_90", reqntid=n)
    xp, yp, out = (k.param_ptr(s, bt) for s in ("x", "y", "out"))
    off = k.mul(k.tid(), tt.bits // 8, mode="wide")
    a = k.ld(k.add(xp, off), type=bt, dst=k.reg(bt))
    b = k.ld(k.add(yp, off), type=bt, dst=k.reg(bt))
    r = getattr(k, op)(a, b, type=tt, flags=("NaN",) if nan else ())
    k.st(k.add(out, off), r, type=bt)
    return k.module()


def memory_kernel(path, op, tname, n):
    """(module, kernel, block, extra arguments) combining n values of `y` into the n values of `x` in global
    memory: the vector half atomics (atom.global.v8, eight values a thread) or a 1-D bulk reduction."""
    if path == "atom":
        return half_atom_kernel(tname, op, n // 8, vec=8, collide=False).module(), "h", n // 8, 1
    return one_d_kernel(op, tname, n), "reduce_1d", 32, 0


#: (op, type, .NaN) of the instructions (min.f64 takes no .NaN), and (op, type, path) of the memory forms
INSTRUCTIONS = [(op, t, nan) for op in ("min", "max") for t in ("f16", "bf16", "f32", "f64") for nan in (False, True)
                if not (nan and t == "f64")]
MEMORY = [(op, t, path) for op in ("min", "max") for t in ("f16", "bf16") for path in ("atom", "bulk")]


def interpreted_instruction(op, tname, nan):
    """(module, x, y, the interpreter's result bits) of the instruction over every special pair."""
    x, y = special_pairs(tname)
    m = minmax_kernel(op, tname, len(x), nan)
    out = np.zeros_like(x)
    interp.run(m, block=len(x), args=[x.copy(), y.copy(), out])
    return m, x, y, out


def interpreted_memory(op, tname, path):
    """(module, kernel, block, extra arguments, x, y, the interpreter's memory after) of an atomic or bulk form."""
    x, y = special_pairs(tname)
    m, name, block, olds = memory_kernel(path, op, tname, len(x))
    out = x.copy()
    interp.run(m, block=block, args=[out, y.copy()] + [np.zeros_like(y)] * olds)
    return m, name, block, olds, x, y, out


def _decode(tname, bits: int) -> float:
    if tname == "f16":
        return struct.unpack("<e", struct.pack("<H", bits))[0]
    if tname == "bf16":
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    return struct.unpack("<f" if tname == "f32" else "<d", struct.pack("<I" if tname == "f32" else "<Q", bits))[0]


def reference(op, tname, x, y, nan=False) -> list:
    """The H200's min/max of each pair of raw bits, written out one pair at a time: -0 below +0, a NaN losing to
    a number (winning with .NaN), a NaN result canonical (0x7FFF, 0x7FFFFFFF) except f64, whose min/max of two
    NaNs return the second operand."""
    canonical = {"f16": 0x7FFF, "bf16": 0x7FFF, "f32": 0x7FFFFFFF}
    out = []
    for xb, yb in zip(x.tolist(), y.tolist()):
        a, b = _decode(tname, xb), _decode(tname, yb)
        if math.isnan(a) or math.isnan(b):
            if nan or (math.isnan(a) and math.isnan(b)):
                out.append(canonical.get(tname, yb))
            else:
                out.append(yb if math.isnan(a) else xb)
        elif a == b:  # the same value; zeros may differ in sign
            a_below = math.copysign(1.0, a) < 0 <= math.copysign(1.0, b)
            out.append(xb if a_below == (op == "min") else yb)
        else:
            out.append(xb if (a < b) == (op == "min") else yb)
    return out


@pytest.mark.parametrize("op, tname, nan", INSTRUCTIONS)
def test_min_max_instructions_follow_the_hardware_rule(op, tname, nan):
    _, x, y, cpu = interpreted_instruction(op, tname, nan)
    diff = differences(reference(op, tname, x, y, nan), cpu, gpu_side=False)
    assert not diff, f"{op}{'.NaN' if nan else ''}.{tname}:\n{diff}"


@pytest.mark.parametrize("op, tname, path", MEMORY)
def test_atomics_and_bulk_reductions_follow_the_hardware_rule(op, tname, path):
    """Memory holds x; each element is combined with its y by the atomic or the bulk reduction."""
    *_, x, y, cpu = interpreted_memory(op, tname, path)
    diff = differences(reference(op, tname, x, y), cpu, gpu_side=False)
    assert not diff, f"{path} {op}.{tname}:\n{diff}"


@pytest.mark.gpu
@pytest.mark.parametrize("op, tname, nan", INSTRUCTIONS)
def test_gpu_min_max_instructions_match_the_interpreter(op, tname, nan):
    from ptxforge.runtime import DeviceBuffer
    m, x, y, cpu = interpreted_instruction(op, tname, nan)
    gpu = DeviceBuffer.from_host(np.zeros_like(x))
    pf.load(m)["minmax"](1, len(x), DeviceBuffer.from_host(x), DeviceBuffer.from_host(y), gpu)
    diff = differences(gpu.to_host(), cpu)
    assert not diff, f"{op}{'.NaN' if nan else ''}.{tname}:\n{diff}"


@pytest.mark.gpu
@pytest.mark.parametrize("op, tname, path", MEMORY)
def test_gpu_atomics_and_bulk_reductions_match_the_interpreter(op, tname, path):
    from ptxforge.runtime import DeviceBuffer
    m, name, block, olds, x, y, cpu = interpreted_memory(op, tname, path)
    gpu = DeviceBuffer.from_host(x)
    pf.load(m)[name](1, block, gpu, DeviceBuffer.from_host(y), *[DeviceBuffer.from_host(np.zeros_like(y))] * olds)
    diff = differences(gpu.to_host(), cpu)
    assert not diff, f"{path} {op}.{tname}:\n{diff}"
