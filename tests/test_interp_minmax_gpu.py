"""min and max where the PTX ISA text leaves the answer to the hardware: signed zeros and NaN operands.

Every ordered pair of +-0, +-NaN, +-1 and +-inf goes through the min/max instructions (f16, bf16, f32, with and
without .NaN), the vector half-precision atomics and the 1-D bulk reductions into global memory, and the GPU's
result bits must equal the interpreter's.  A failure lists each pair whose bits differ."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T

from support.reduce_kernels import half_atom_kernel, one_d_kernel

pytestmark = pytest.mark.gpu

VALUES = (0.0, -0.0, float("nan"), -float("nan"), 1.0, -1.0, float("inf"), -float("inf"))
NAMES = ("+0", "-0", "+nan", "-nan", "+1", "-1", "+inf", "-inf")


def special_pairs(tname):
    """(x, y): the raw bits of every ordered pair of VALUES as `tname` (f16 and bf16 as uint16, f32 as uint32),
    x running slowest."""
    x = np.repeat(np.array(VALUES, np.float32), len(VALUES))
    y = np.tile(np.array(VALUES, np.float32), len(VALUES))
    if tname == "f32":
        return x.view(np.uint32).copy(), y.view(np.uint32).copy()
    if tname == "bf16":
        return tuple((v.view(np.uint32) >> 16).astype(np.uint16) for v in (x, y))
    return x.astype(np.float16).view(np.uint16), y.astype(np.float16).view(np.uint16)


def differences(gpu, cpu) -> str:
    """One line per pair whose result bits differ between the GPU and the interpreter."""
    return "\n".join(f"({NAMES[i // len(VALUES)]}, {NAMES[i % len(VALUES)]}): GPU {int(g):#x}, interpreter "
                     f"{int(c):#x}" for i, (g, c) in enumerate(zip(gpu, cpu)) if g != c)


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


@pytest.mark.parametrize("nan", [False, True], ids=["plain", "NaN"])
@pytest.mark.parametrize("tname", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_instructions_match_the_interpreter(op, tname, nan):
    from ptxforge.runtime import DeviceBuffer
    x, y = special_pairs(tname)
    m = minmax_kernel(op, tname, len(x), nan)
    cpu = np.zeros_like(x)
    interp.run(m, block=len(x), args=[x.copy(), y.copy(), cpu])
    gpu = DeviceBuffer.from_host(np.zeros_like(x))
    pf.load(m)["minmax"](1, len(x), DeviceBuffer.from_host(x), DeviceBuffer.from_host(y), gpu)
    diff = differences(gpu.to_host(), cpu)
    assert not diff, f"{op}{'.NaN' if nan else ''}.{tname}:\n{diff}"


def memory_kernel(path, op, tname, n):
    """(module, kernel, block, extra arguments) combining n values of `y` into the n values of `x` in global
    memory: the vector half atomics (atom.global.v8, eight values a thread) or a 1-D bulk reduction."""
    if path == "atom":
        return half_atom_kernel(tname, op, n // 8, vec=8, collide=False).module(), "h", n // 8, 1
    return one_d_kernel(op, tname, n), "reduce_1d", 32, 0


@pytest.mark.parametrize("path", ["atom", "bulk"])
@pytest.mark.parametrize("tname", ["f16", "bf16"])
@pytest.mark.parametrize("op", ["min", "max"])
def test_atomics_and_bulk_reductions_match_the_interpreter(op, tname, path):
    """Memory holds x; each element is combined with its y by the atomic or the bulk reduction."""
    from ptxforge.runtime import DeviceBuffer
    x, y = special_pairs(tname)
    m, name, block, olds = memory_kernel(path, op, tname, len(x))
    cpu = x.copy()
    interp.run(m, block=block, args=[cpu, y.copy()] + [np.zeros_like(y)] * olds)
    gpu = DeviceBuffer.from_host(x)
    pf.load(m)[name](1, block, gpu, DeviceBuffer.from_host(y), *[DeviceBuffer.from_host(np.zeros_like(y))] * olds)
    diff = differences(gpu.to_host(), cpu)
    assert not diff, f"{path} {op}.{tname}:\n{diff}"
