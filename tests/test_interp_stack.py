"""alloca, stacksave and stackrestore on the interpreter: a per-thread stack that alloca takes from the top
down, memory released by stackrestore or by a device function's return out of bounds, overflow reported;
against the spec's arithmetic, and on the H200."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.interp.memory import STACK_BYTES
from support.located import assert_located

HERE = __file__
NT = 32


def _roundtrip_kernel(nt=NT, align=None):
    """Thread t allocates 4 * (t % 5 + 1) bytes, writes t*100 + j into word j, reads them back summed into
    sums[t], and reports sp0 - ptr and ptr % 64 before restoring the stack."""
    k = pf.KernelBuilder("stack", target="sm_90", reqntid=nt)
    sums, drops, mods = (k.param_ptr(n, pf.u64) for n in ("sums", "drops", "mods"))
    t = k.tid()
    n = k.add(k.rem(t, 5), 1)
    sp0 = k.stacksave()
    ptr = k.alloca(k.mul(k.cvt(n, "u64"), 4, type=pf.u64), align=align)
    acc = k.mov(0, type=pf.u32)
    for j in range(5):
        with k.if_(k.setp("lt", j, n, type=pf.u32)):
            k.st(ptr, k.add(k.mul(t, 100), j), type=pf.u32, space="local", offset=4 * j)
    for j in range(5):
        with k.if_(k.setp("lt", j, n, type=pf.u32)):
            k.add(acc, k.ld(ptr, type=pf.u32, space="local", offset=4 * j), dst=acc)
    off = k.mul(t, 8, mode="wide")
    k.st(k.add(sums, off), k.cvt(acc, "u64"), type=pf.u64)
    k.st(k.add(drops, off), k.sub(sp0, ptr, type=pf.u64), type=pf.u64)
    k.st(k.add(mods, off), k.rem(ptr, 64, type=pf.u64), type=pf.u64)
    k.stackrestore(sp0)
    return k


def _run(k, nt=NT):
    outs = [np.zeros(nt, np.uint64) for _ in range(3)]
    interp.run(k.module(), block=nt, args=outs)
    return outs


def test_alloca_takes_aligned_bytes_from_the_top_and_holds_what_is_written():
    sums, drops, mods = _run(_roundtrip_kernel())
    t = np.arange(NT)
    n = t % 5 + 1
    assert sums.tolist() == [int(x) for x in n * t * 100 + n * (n - 1) // 2]
    # sp0 - ptr: the size rounded up to 8 (the stack pointer starts aligned)
    assert drops.tolist() == [int(-(-4 * x // 8) * 8) for x in n]
    assert (mods % 8 == 0).all()


def test_alloca_honours_a_larger_alignment():
    _, drops, mods = _run(_roundtrip_kernel(align=64))
    n = np.arange(NT) % 5 + 1
    assert (mods == 0).all() and (drops >= 4 * n).all() and (drops < 4 * n + 64).all()


def test_the_kernel_assembles():
    pf.assemble(_roundtrip_kernel().module())


def test_memory_released_by_stackrestore_is_out_of_bounds():
    k = pf.KernelBuilder("freed", target="sm_90", reqntid=1)
    sp0 = k.stacksave()
    ptr = k.alloca(16)
    k.st(ptr, 1, type=pf.u32, space="local")
    k.stackrestore(sp0)
    k.ld(ptr, type=pf.u32, space="local")  # <- after-restore
    with pytest.raises(interp.InterpError, match="below its stack pointer") as e:
        interp.run(k.module(), block=1)
    assert e.value.findings[0].kind == "oob"
    assert_located(e.value, "<- after-restore", HERE)


def test_an_alloca_past_the_bottom_of_the_stack_is_an_overflow():
    k = pf.KernelBuilder("deep", target="sm_90", reqntid=1)
    k.alloca(STACK_BYTES // 2)
    k.alloca(STACK_BYTES // 2 + 8)  # <- overflow
    with pytest.raises(interp.InterpError, match="stack overflow") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- overflow", HERE)


def test_a_restore_outside_the_stack_is_reported():
    k = pf.KernelBuilder("wild", target="sm_90", reqntid=1)
    k.stackrestore(k.mov(12345678, type=pf.u64))  # <- wild
    with pytest.raises(interp.InterpError, match="not in the alloca stack") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- wild", HERE)


def _scratch_function():
    """f(x) = x + 1, through a word of stack memory it allocates; returns the word's address too."""
    f = pf.FunctionBuilder("scratch", target="sm_90")
    x = f.param_value("x", pf.u32)
    f.result("y", pf.u64)
    p = f.alloca(4)
    f.st(p, f.add(x, 1), type=pf.u32, space="local")
    f.set_result(p)
    return f


def test_a_device_functions_return_releases_its_allocations():
    f = _scratch_function()
    k = pf.KernelBuilder("calls", target="sm_90", reqntid=NT)
    out = k.param_ptr("out", pf.u64)
    before = k.stacksave()
    p1 = k.call(f, args=[k.tid()])
    p2 = k.call(f, args=[k.tid()])
    after = k.stacksave()
    off = k.mul(k.tid(), 24, mode="wide")
    for j, v in enumerate((k.sub(before, after, type=pf.u64), k.sub(p1, p2, type=pf.u64), k.sub(before, p1, type=pf.u64))):
        k.st(k.add(out, off), v, type=pf.u64, offset=8 * j)
    m = k.module()
    pf.assemble(m)
    got = np.zeros(NT * 3, np.uint64)
    interp.run(m, block=NT, args=[got])
    assert got.reshape(NT, 3).tolist() == [[0, 0, 8]] * NT  # nothing left allocated; both calls reuse one slot


def test_a_callers_read_of_a_returned_functions_stack_is_out_of_bounds():
    f = _scratch_function()
    k = pf.KernelBuilder("dangling", target="sm_90", reqntid=1)
    p = k.call(f, args=[7])
    k.ld(p, type=pf.u32, space="local")  # <- dangling
    with pytest.raises(interp.InterpError, match="below its stack pointer") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- dangling", HERE)


def test_a_kernel_without_alloca_gets_no_stack():
    from ptxforge.interp.program import Program
    k = pf.KernelBuilder("plain", target="sm_90", reqntid=1)
    k.add(k.tid(), 1)
    assert not Program(k.finish()).uses_stack


@pytest.mark.gpu
def test_gpu_alloca_round_trip_matches_the_interpreter():
    from ptxforge.runtime import DeviceBuffer
    for align in (None, 64):
        k = _roundtrip_kernel(128, align)
        outs = [DeviceBuffer.from_host(np.zeros(128, np.uint64)) for _ in range(3)]
        pf.load(k.module())[k.name](1, 128, *outs)
        gpu = [o.to_host() for o in outs]
        cpu = _run(k, 128)
        assert gpu[0].tolist() == cpu[0].tolist()  # what each thread wrote to its allocation came back
        assert (gpu[2] % (align or 8) == 0).all()
        assert (gpu[1] >= 4 * (np.arange(128) % 5 + 1)).all()
