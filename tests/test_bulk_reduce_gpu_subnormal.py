"""`cp.reduce.async.bulk ... .add.f32` and subnormals.

The PTX ISA's cp.reduce.async.bulk section says that the current implementation of `.add.f32` flushes subnormal
inputs and results to sign-preserving zero; the cp.reduce.async.bulk.tensor section says nothing of subnormals.
An H100 (driver 580, ptxas 13.0) keeps them in both forms, bit for bit as IEEE addition does, and the interpreter
follows the hardware.  The GPU tests print (and record as the properties `1d_add_f32_subnormals` and
`tensor_add_f32_subnormals`) which of the two behaviours the GPU shows, then hold the interpreter to it bit for
bit, so a GPU that flushes fails with that named.
"""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.assembler import available_backends
from ptxforge.isa import types as T

from support.reduce_kernels import one_d_kernel

TINY = np.finfo(np.float32).tiny  # 2^-126, the least normal f32
SUB = np.float32(2.0 ** -140)  # a subnormal


def _f32(values):
    return np.asarray(values, dtype=np.float64).astype(np.float32)


def subnormal_operands():
    """(destination, source): subnormal destinations, subnormal sources, both, sums of normals that land below
    2^-126 (subnormal results), signs of both kinds, and ordinary values, 64 elements."""
    t = float(TINY)
    g = [2.0 ** -140, 1.0, 2.0 ** -130, -(2.0 ** -135), 1.5 * t, -1.5 * t, 1.25 * t, 3 * 2.0 ** -149, 0.0, -0.0,
         2.0 ** -149, 1.0, t, -t, 1.75 * t, 0.5]
    s = [1.0, 2.0 ** -140, 2.0 ** -131, 2.0 ** -135, -1.25 * t, 1.25 * t, -1.25 * t, 2.0 ** -149, -(2.0 ** -140),
         2.0 ** -140, -(2.0 ** -149), -1.0, -0.5 * t, 0.5 * t, -1.0 * t, 0.25]
    return np.resize(_f32(g), 64), np.resize(_f32(s), 64)


def flush(x):
    """Subnormals to zero of their sign."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < TINY, np.copysign(np.float32(0), x), x)


def model(g, s, ftz):
    """What each destination word becomes: IEEE f32 add, or with inputs and result flushed."""
    if ftz:
        return flush(flush(g) + flush(s))
    return (g + s).astype(np.float32)


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_the_operands_tell_the_two_behaviours_apart():
    g, s = subnormal_operands()
    differ = bits(model(g, s, True)) != bits(model(g, s, False))
    assert differ.sum() >= 10  # subnormal inputs and subnormal results both change words


def test_the_interpreter_keeps_subnormals_in_the_1d_add_f32_as_an_h100_does():
    g, s = subnormal_operands()
    out = g.copy()
    interp.run(one_d_kernel("add", "f32", 64), block=32, args=[out, s])
    np.testing.assert_array_equal(bits(out), bits(model(g, s, False)))


def tensor_add_kernel(box):
    """One CTA copies `src` (box[0] x box[1] f32, row-major) into a shared tile and reduces it (.add) into the
    tensor at (0, 0)."""
    n = box[0] * box[1]
    k = pf.KernelBuilder("reduce_f32_box", target="sm_90a", reqntid=128)
    tm = k.param_tensormap("tm")
    src = k.param_ptr("src", T.b32)
    tile = k.shared("tile", 4 * n, align=128)
    tid = k.tid()
    for j in range(0, n, 128):
        i = k.add(tid, j, type=T.u32)
        with k.if_(k.setp("lt", i, n, type=T.u32)):
            v = k.ld(k.mad(i, 4, src, type=T.u32, mode="wide"), type=T.b32)
            k.st(k.mad(i, 4, k.shared_base(tile), type=T.u32), v, type=T.b32, space="shared")
    k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 0, type=T.u32)):
        k.tensor_reduce(tm, [0, 0], tile, "add")
        k.bulk_commit()
        k.bulk_wait(0, read=True)
    return k.module()


def test_the_kernels_assemble():
    if "ptxas" not in available_backends():
        pytest.skip("no ptxas")
    pf.assemble(one_d_kernel("add", "f32", 64), "sm_90a", backend="ptxas")
    pf.assemble(tensor_add_kernel((16, 4)), "sm_90a", backend="ptxas")


def test_the_interpreter_keeps_subnormals_in_the_tensor_form():
    g, s = subnormal_operands()
    dst = g.reshape(4, 16).copy()
    interp.run(tensor_add_kernel((16, 4)), block=128, args=[interp.host_tensor_map(dst, (16, 4)), s])
    np.testing.assert_array_equal(bits(dst).ravel(), bits(model(g, s, False)))


def _which(got, g, s):
    for ftz, name in ((True, "flushes"), (False, "keeps")):
        if np.array_equal(bits(got), bits(model(g, s, ftz))):
            return name
    return "matches neither model"


@pytest.mark.gpu
def test_gpu_1d_bulk_reduce_add_f32_subnormals_match_the_interpreter(record_property):
    from ptxforge.runtime import DeviceBuffer
    g, s = subnormal_operands()
    dg = DeviceBuffer.from_host(g)
    pf.load(one_d_kernel("add", "f32", 64))["reduce_1d"](1, 32, dg, DeviceBuffer.from_host(s))
    gpu = dg.to_host()
    what = _which(gpu, g, s)
    record_property("1d_add_f32_subnormals", what)
    print(f"cp.reduce.async.bulk.add.f32 on the GPU {what} subnormals")
    cpu = g.copy()
    interp.run(one_d_kernel("add", "f32", 64), block=32, args=[cpu, s])
    np.testing.assert_array_equal(bits(gpu), bits(cpu),
                                  err_msg=f"the GPU {what} subnormals; the interpreter keeps them")


@pytest.mark.gpu
def test_gpu_tensor_bulk_reduce_add_f32_subnormals_match_the_interpreter(record_property):
    from ptxforge.runtime import DeviceBuffer, TensorMap
    g, s = subnormal_operands()
    dd = DeviceBuffer.from_host(g.reshape(4, 16).copy())
    pf.load(tensor_add_kernel((16, 4)))["reduce_f32_box"](1, 128, TensorMap.from_array(dd, (16, 4)),
                                                          DeviceBuffer.from_host(s))
    gpu = dd.to_host().ravel()
    what = _which(gpu, g, s)
    record_property("tensor_add_f32_subnormals", what)
    print(f"cp.reduce.async.bulk.tensor .add.f32 on the GPU {what} subnormals")
    cpu = g.reshape(4, 16).copy()
    interp.run(tensor_add_kernel((16, 4)), block=128, args=[interp.host_tensor_map(cpu, (16, 4)), s])
    np.testing.assert_array_equal(bits(gpu), bits(cpu).ravel(),
                                  err_msg=f"the GPU {what} subnormals in the tensor form; the interpreter keeps them")
