"""Memory: bounds and alignment reports (naming the buffer, the thread and the Python line),
generic addressing and cvta, the .param space, sub-word widening, vector accesses, atomics."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import b32, s8, s32, u8, u16, u32, u64
from ptxforge import interp
from ptxforge.errors import LaunchError
from ptxforge.testing.interp_strategies import poison, seeds


def copy_kernel(shift=0, width=4):
    k = pf.KernelBuilder("copy", target="sm_80", maxntid=128)
    x, y = k.param_ptr("x", pf.b8), k.param_ptr("y", pf.b8)
    i = k.global_index()
    off = k.mul(i, width, mode="wide")
    t = {1: u8, 2: u16, 4: u32, 8: u64}[width]
    v = k.ld(k.add(x, k.add(off, shift)), type=t)
    k.st(k.add(y, off), v, type=t)
    return k.module()


def test_out_of_bounds_read_names_buffer_thread_and_line():
    x = np.arange(100, dtype=np.uint32)
    y = np.zeros(128, dtype=np.uint32)
    with pytest.raises(interp.InterpError) as e:
        interp.run(copy_kernel(), block=128, args=[x, y])
    f = e.value.findings[0]
    assert f.kind == "oob" and f.threads[0].tid == (100, 0, 0) and f.nthreads == 28
    assert "'x'" in f.message and "bytes 400..403" in f.message and "uint32[100]" in f.message
    assert f.loc.filename.endswith("test_interp_memory.py") and "k.ld(" in f.loc.code


def test_collect_mode_skips_the_faulting_access_and_counts_nothing_twice():
    x = np.arange(100, dtype=np.uint32)
    y = poison(np.empty(256, dtype=np.uint32))
    r = interp.run(copy_kernel(), grid=2, block=128, args=[x, y], check=False, batch_threads=128)
    assert [f.kind for f in r.findings] == ["oob"]
    assert r.findings[0].count == 2  # the same instruction faulted in both CTAs: one finding, two events
    np.testing.assert_array_equal(y[:100], x)


def test_misaligned_access():
    x = np.arange(256, dtype=np.uint32)
    y = np.zeros(256, dtype=np.uint32)
    with pytest.raises(interp.InterpError, match="not 4-byte aligned") as e:
        interp.run(copy_kernel(shift=2), block=64, args=[x, y])
    assert e.value.findings[0].kind == "misaligned"


def test_vector_access_needs_the_vector_alignment():
    k = pf.KernelBuilder("v4", target="sm_80", reqntid=32)
    x = k.param_ptr("x", u32)
    t = k.tid()
    v = k.ld(k.add(x, k.mul(t, 8, mode="wide")), type=u32, vec=4)  # 8-byte steps: half misaligned
    k.st(k.add(x, k.mul(t, 8, mode="wide")), list(v), type=u32, pred=k.setp("eq", t, 99))
    r = interp.run(k.module(), block=32, args=[np.zeros(64 + 8, np.uint32)], check=False)
    f = r.by_kind("misaligned")[0]
    assert "16-byte aligned" in f.message and f.nthreads == 16


def shared_kernel(offset, nbytes=256):
    k = pf.KernelBuilder("smem_oob", target="sm_80", reqntid=32)
    out = k.param_ptr("out", u32)
    a = k.shared("a", nbytes, align=16)
    k.shared("b", 64, align=16)
    t = k.tid()
    base = k.shared_base(a)
    k.st(k.add(base, k.shl(t, 2)), t, type=u32, space="shared")
    k.bar_sync(0)
    v = k.ld(k.add(base, k.add(k.shl(t, 2), offset)), type=u32, space="shared")
    k.st(k.add(out, k.mul(t, 4, mode="wide")), v, type=u32)
    return k.module()


def test_shared_out_of_bounds_is_caught_at_the_end_of_the_variable():
    out = np.zeros(32, np.uint32)
    interp.run(shared_kernel(0, 128), block=32, args=[out])
    np.testing.assert_array_equal(out, np.arange(32))
    with pytest.raises(interp.InterpError) as e:
        interp.run(shared_kernel(4, 128), block=32, args=[out])
    f = e.value.findings[0]
    assert f.kind == "oob" and "past the end of 'a'" in f.message and f.threads[0].tid[0] == 31


def test_shared_address_without_its_base_is_caught():
    k = pf.KernelBuilder("nobase", target="sm_80", reqntid=32)
    k.shared("a", 256, align=16)
    t = k.tid()
    k.st(k.shl(t, 2), t, type=u32, space="shared")  # forgot mov %r, a
    with pytest.raises(interp.InterpError, match="below the first shared variable"):
        interp.run(k.module(), block=32, args=[])


def test_generic_addresses_and_cvta():
    k = pf.KernelBuilder("generic", target="sm_90", reqntid=32)
    x = k.param_ptr("x", u32, space="generic")  # generic pointer, no cvta.to.global
    a = k.shared("a", 128, align=16)
    t = k.tid()
    gshared = k.cvta(k.cvt(k.shared_base(a), u64), frm="shared")  # shared -> generic
    off = k.mul(t, 4, mode="wide")
    k.st(k.add(gshared, off), k.mul(t, t), type=u32, space="generic")
    k.bar_sync(0)
    back = k.cvta(k.add(gshared, off), to="shared")  # generic -> shared window
    v = k.ld(back, type=u32, space="shared")
    for scoped in ("shared::cta", "shared::cluster"):  # the same window by its scoped names, both ways
        again = k.cvta(k.cvta(k.add(gshared, off), to=scoped), frm=scoped)
        v = k.add(v, k.sub(k.ld(again, type=u32, space="generic"), k.mul(t, t)))  # adds 0 where exact
    w = k.ld(k.add(x, off), type=u32, space="generic")
    k.st(k.add(x, off), k.add(v, w), type=u32, space="generic")
    xs = np.arange(32, dtype=np.uint32) * 1000
    expect = xs + np.arange(32) ** 2
    interp.run(k.module(), block=32, args=[xs])
    np.testing.assert_array_equal(xs, expect)


def test_param_space_by_symbol_and_by_generic_address():
    k = pf.KernelBuilder("params", target="sm_80", reqntid=1)
    out = k.param_ptr("out", u64)
    blob = k.param("blob", None, nbytes=16, align=8)
    scale = k.param_value("scale", u32)
    lo = k.ld(pf.Addr(blob.symbol, 8), type=u64, space="param")
    addr = k.param_address(blob)
    hi = k.ld(addr, type=u64, space="generic")
    k.st(out, lo, type=u64)
    k.st(k.add(out, 8), hi, type=u64)
    k.st(k.add(out, 16), k.cvt(scale, u64), type=u64)
    out = poison(np.empty(3, np.uint64))
    data = np.array([0x1122334455667788, 0x99AABBCCDDEEFF00], dtype=np.uint64)
    interp.run(k.module(), block=1, args=[out, data.tobytes(), 7])
    assert out.tolist() == [0x99AABBCCDDEEFF00, 0x1122334455667788, 7]


@given(seed=seeds())
def test_sub_word_loads_widen_and_stores_truncate(seed):
    k = pf.KernelBuilder("subword", target="sm_80", reqntid=64)
    x, y, z = k.param_ptr("x", s8), k.param_ptr("y", s32), k.param_ptr("z", u8)
    t = k.tid()
    v = k.ld(k.add(x, k.cvt(t, u64)), type=s8)  # sign-extends into a 32-bit register
    u = k.ld(k.add(x, k.cvt(t, u64)), type=u8)  # zero-extends
    off = k.mul(t, 4, mode="wide")
    k.st(k.add(y, off), k.add(k.mul(v, 1000, type=s32), u, type=s32), type=s32)
    k.st(k.add(z, k.cvt(t, u64)), k.add(u, 300, type=u32), type=u8)  # low byte only
    xs = np.random.default_rng(seed).integers(-128, 128, 64).astype(np.int8)
    ys, zs = poison(np.empty(64, np.int32)), poison(np.empty(64, np.uint8))
    interp.run(k.module(), block=64, args=[xs, ys, zs])
    np.testing.assert_array_equal(ys, xs.astype(np.int32) * 1000 + xs.view(np.uint8))
    np.testing.assert_array_equal(zs, (xs.view(np.uint8).astype(np.int64) + 300) % 256)


def test_atomics_serialize_colliding_addresses():
    k = pf.KernelBuilder("atomics", target="sm_80", maxntid=128)
    counter, olds, hist = k.param_ptr("counter", u32), k.param_ptr("olds", u32), k.param_ptr("hist", u32)
    i = k.global_index()
    old = k.atom("add", counter, 1, type=u32)
    k.st(k.add(olds, k.mul(i, 4, mode="wide")), old, type=u32)
    bucket = k.and_(i, 7, type=b32)
    k.red("add", k.add(hist, k.mul(bucket, 4, mode="wide")), k.add(i, 1), type=u32)
    sm = k.shared("sm", 4, align=4)
    smb = k.shared_base(sm)
    k.st(smb, 0, type=u32, space="shared", pred=k.setp("eq", k.tid(), 0))
    k.bar_sync(0)
    k.atom("max", smb, i, type=u32, space="shared")
    k.bar_sync(0)
    top = k.ld(smb, type=u32, space="shared")
    k.atom("cas", counter, k.add(top, 1000), type=u32, compare=256, pred=k.setp("eq", i, 0))
    counter_a, olds_a, hist_a = np.zeros(1, np.uint32), poison(np.empty(256, np.uint32)), np.zeros(8, np.uint32)
    interp.run(k.module(), grid=2, block=128, args=[counter_a, olds_a, hist_a])
    assert sorted(olds_a.tolist()) == list(range(256))  # every thread got a distinct old value
    assert counter_a[0] == 127 + 1000  # cas by thread 0 saw 256 after all adds: swapped in max(tid) + 1000
    np.testing.assert_array_equal(hist_a, [sum(j + 1 for j in range(256) if j % 8 == b) for b in range(8)])
    counter_a[0] = 5
    interp.run(k.module(), grid=2, block=128, args=[counter_a, olds_a, hist_a])
    assert counter_a[0] == 261  # cas compared 261 with 256: no swap


def test_same_array_for_two_pointers_aliases():
    k = pf.KernelBuilder("inplace", target="sm_80", reqntid=32)
    x, y = k.param_ptr("x", u32), k.param_ptr("y", u32)
    t = k.tid()
    off = k.mul(t, 4, mode="wide")
    k.st(k.add(y, off), k.add(k.ld(k.add(x, off), type=u32), 1), type=u32)
    a = np.arange(32, dtype=np.uint32)
    interp.run(k.module(), block=32, args=[a, a])
    np.testing.assert_array_equal(a, np.arange(32) + 1)


@given(n=st.integers(1, 40), seed=seeds())
def test_non_contiguous_arrays_are_written_back(n, seed):
    base = np.zeros((n, 2), np.uint32)
    view = base[:, 0]  # strided: the kernel sees a compact copy, results land in the view
    k = pf.KernelBuilder("fill", target="sm_80", maxntid=64)
    x = k.param_ptr("x", u32)
    nn = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, nn)):
        k.st(k.add(x, k.mul(i, 4, mode="wide")), k.add(i, 7), type=u32)
    interp.run(k.module(), block=64, args=[view, n])
    np.testing.assert_array_equal(base[:, 0], np.arange(n) + 7)
    assert (base[:, 1] == 0).all()


def test_pointer_element_types_follow_the_gpu_launch_rule():
    k = pf.KernelBuilder("typed", target="sm_80", reqntid=32)
    x = k.param_ptr("x", pf.f32)
    k.st(x, k.mov(1.0, type=pf.f32), pred=k.setp("eq", k.tid(), 0))
    with pytest.raises(LaunchError, match="points to .f32"):
        interp.run(k.module(), block=32, args=[np.zeros(4, np.int32)])
    interp.run(k.module(), block=32, args=[np.zeros(4, np.float32)])


def test_in_and_out_wrappers_copy_like_a_gpu_launch():
    from ptxforge.runtime import In, Out
    k = pf.KernelBuilder("inout", target="sm_80", reqntid=32)
    x, y = k.param_ptr("x", u32), k.param_ptr("y", u32)
    t = k.tid()
    off = k.mul(t, 4, mode="wide")
    k.st(k.add(y, off), k.add(k.ld(k.add(x, off), type=u32), 1), type=u32)
    k.st(k.add(x, off), 0, type=u32)  # written on the device copy only
    a, b = np.arange(32, dtype=np.uint32), np.zeros(32, np.uint32)
    interp.run(k.module(), block=32, args=[In(a), Out(b)])
    np.testing.assert_array_equal(a, np.arange(32))  # In(): not copied back
    np.testing.assert_array_equal(b, np.arange(32) + 1)


def test_a_float_literal_stored_keeps_its_ieee_bits():
    """st.f32 [p], 0f3FC00000 reads the literal through .b32: its bits, not the integer part of its value (the
    interpreter stored 1 for 1.5 before; a printf of a float literal on the H200 showed the difference)."""
    k = pf.KernelBuilder("lit", target="sm_90", reqntid=1)
    p, q = k.param_ptr("p", pf.f32), k.param_ptr("q", pf.f64)
    k.st(p, 1.5, type=pf.f32)
    k.st(p, -2.0 ** -130, type=pf.f32, offset=4)  # a subnormal
    k.st(q, 2.25, type=pf.f64)
    a, b = np.zeros(2, np.float32), np.zeros(1, np.float64)
    interp.run(k.module(), block=1, args=[a, b])
    assert a.tolist() == [1.5, -2.0 ** -130] and b.tolist() == [2.25]


def test_a_store_into_a_read_only_array_is_reported_at_the_store():
    """A read-only numpy array is input only (as on a GPU): a store into it would never reach the caller, and the
    launch said nothing.  It is a finding at the store's line, naming the parameter; a read-only input, a store
    into a writeable array and a read-only array wrapped in In() (scratch by the caller's word) stay clean."""
    x = np.arange(128, dtype=np.uint32)
    ro = np.zeros(128, dtype=np.uint32)
    ro.setflags(write=False)
    with pytest.raises(interp.InterpError) as e:
        interp.run(copy_kernel(), block=128, args=[x, ro])
    f = e.value.findings[0]
    assert f.kind == "readonly" and "into y, whose numpy array is read-only" in f.message and f.nthreads == 128
    assert f.loc.filename.endswith("test_interp_memory.py") and "k.st(" in f.loc.code
    assert not ro.any()
    y = np.zeros(128, dtype=np.uint32)
    assert interp.run(copy_kernel(), block=128, args=[ro, y]).ok  # read-only input: what it is for
    assert interp.run(copy_kernel(), block=128, args=[x, pf.In(ro)]).ok
    assert interp.run(copy_kernel(), block=128, args=[x, y]).ok and np.array_equal(x, y)


def test_a_launch_the_caller_got_wrong_names_the_callers_line():
    """LaunchErrors of interp.run (argument count, order, grid, what was passed as the module) name the line that
    called it, as the builder's errors do; a string is pointed at ptxforge.parse."""
    m = copy_kernel()
    x = np.zeros(128, dtype=np.uint32)
    for call, msg in ((lambda: interp.run(m, block=128, args=[x]), "takes 2 arguments"),
                      (lambda: interp.run(m, block=128, args=[x, x.copy()], order="x"), "order is one of"),
                      (lambda: interp.run(m, grid=0, block=128, args=[x, x.copy()]), "positive sizes"),
                      (lambda: interp.run(".version 8.0", block=128), "got str: read PTX text with ptxforge.parse")):
        with pytest.raises(LaunchError, match=msg) as e:
            call()
        assert e.value.loc is not None and e.value.loc.filename.endswith("test_interp_memory.py"), str(e.value)
