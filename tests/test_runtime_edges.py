"""The runtime at its edges, without a GPU: what DeviceBuffer and its copies refuse, how host arrays are staged
around a launch, scalar parameters of every width, foreign arrays' interfaces, streams and modules after their
end, and the assembler's toolchain errors.  GPU paths run on the driver stand-in of tests/support."""

import gc
import warnings

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.errors import LaunchError
from ptxforge.runtime import DeviceBuffer

pytest.importorskip("cuda.bindings.driver")

from support.driver_standin import OURS, drv, kernel_of, mem_drv, pointer_attributes  # noqa: E402,F401  (fixtures)


def _driver_calls(sd):
    return [n for n in sd.names() if n not in ("cuCtxGetCurrent", "cuCtxSetCurrent")]


# ---------------------------------------------------------------- DeviceBuffer and its copies

@pytest.mark.parametrize("dtype", [object, np.dtype([("a", np.float32), ("b", object)])])
def test_object_dtypes_are_refused_before_the_driver(mem_drv, dtype):
    with pytest.raises(LaunchError, match="Python objects"):
        DeviceBuffer(shape=(2,), dtype=dtype)
    with pytest.raises(LaunchError, match="Python objects"):
        DeviceBuffer.from_host(np.array([None, 1], dtype=object))
    buf = DeviceBuffer(16)
    mem_drv.calls.clear()
    host = np.empty(2, dtype=object)
    with pytest.raises(LaunchError, match="copy_to_host: .*Python objects"):
        buf.copy_to_host(host)
    with pytest.raises(LaunchError, match="copy_from_host: .*Python objects"):
        buf.copy_from_host(host)
    assert _driver_calls(mem_drv) == []
    assert host[0] is None  # untouched


@pytest.mark.parametrize("dtype", [">f4", ">i2", np.dtype([("a", ">f4"), ("b", "<i4")])])
def test_big_endian_dtypes_are_refused_by_device_buffers_and_copies(mem_drv, dtype):
    with pytest.raises(LaunchError, match="big-endian"):
        DeviceBuffer(shape=(2,), dtype=dtype)
    with pytest.raises(LaunchError, match="big-endian"):
        DeviceBuffer.from_host(np.zeros(2, dtype))
    buf = DeviceBuffer(shape=(2,), dtype=np.dtype(dtype).newbyteorder("<"))
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="copy_from_host: .*big-endian"):
        buf.copy_from_host(np.ones(2, dtype))
    with pytest.raises(LaunchError, match="copy_to_host: .*big-endian"):
        buf.copy_to_host(np.zeros(2, dtype))
    assert _driver_calls(mem_drv) == []
    DeviceBuffer.from_host(np.ones(2, np.dtype(dtype).newbyteorder("<")))  # little-endian is fine
    DeviceBuffer.from_host(np.ones(2, "|u1"))  # as are single bytes, which have no order


@pytest.mark.parametrize("dtype", [str, bytes, "S", "U", "V"])
def test_dtypes_without_a_size_are_launch_errors(mem_drv, dtype):
    with pytest.raises(LaunchError, match="no size of its own"):
        DeviceBuffer(16, dtype=dtype)
    assert _driver_calls(mem_drv) == []


@pytest.mark.parametrize("kw", [dict(shape=(1 << 40, 1 << 40), dtype=np.float32), dict(nbytes=1 << 64),
                                dict(shape=(1 << 61,), dtype=np.float64)])
def test_sizes_of_2_to_the_64_bytes_and_more_are_launch_errors(mem_drv, kw):
    with pytest.raises(LaunchError, match="2\\*\\*64"):
        DeviceBuffer(**kw)
    assert _driver_calls(mem_drv) == []


@pytest.mark.parametrize("value", [256, -1, 0x3F800000, 1.0, "1", True, None])
def test_fill_bytes_takes_one_byte(mem_drv, value):
    buf = DeviceBuffer(16)
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="fill_bytes.*0..255"):
        buf.fill_bytes(value)
    assert _driver_calls(mem_drv) == []
    buf.fill_bytes(np.uint8(0x7F))
    assert bytes(mem_drv.mem[buf.ptr]) == b"\x7f" * 16


@pytest.mark.parametrize("value", [np.array(3.0, np.float32), np.float64(2.5), 7])
def test_from_host_keeps_a_0d_shape(mem_drv, value):
    buf = DeviceBuffer.from_host(value)
    assert buf.shape == () and buf.to_host().shape == ()
    assert buf.to_host()[()] == np.asarray(value)[()]


# ---------------------------------------------------------------- scalar parameters

def _lay(params: str):
    from ptxforge.runtime.launch import layout
    from ptxforge.runtime.loader import parse_entries
    return layout(parse_entries(f".visible .entry k({params}) {{ ret; }}")[0].params)


def _value(params: str, *args):
    from ptxforge.runtime.launch import pack, resolve
    lay = _lay(params)
    r = resolve(lay, args, "k")
    pack(lay, r.values)  # every value packs
    return r.values[0] if len(r.values) == 1 else r.values


@pytest.mark.parametrize("decl,arg,bits", [
    (".b32 a", 1.0, 0x3F800000), (".b32 a", -2.5, 0xC0200000), (".b32 a", float("inf"), 0x7F800000),
    (".b16 a", 1.0, 0x3C00), (".b64 a", 1.0, 0x3FF0000000000000), (".b32 a", np.float64(1.0), 0x3F800000),
    (".b32 a", np.float32(1.0), 0x3F800000), (".b16 a", np.float32(-2.0), 0xC000), (".b64 a", np.float32(0.5),
                                                                                    0x3FE0000000000000),
    (".b32 a", 7, 7), (".b32 a", -1, 0xFFFFFFFF), (".b64 a", 7, 7)])
def test_a_float_for_a_bits_parameter_is_that_widths_float_bit_pattern(decl, arg, bits):
    assert _value(f".param {decl}", arg) == bits


@pytest.mark.parametrize("decl,arg,match", [(".b16 a", 70000.0, "beyond the range of the 16-bit float"),
                                            (".b32 a", 1e39, "beyond the range of the 32-bit float"),
                                            (".b8 a", 1.0, "no 8-bit float")])
def test_a_float_a_bits_parameter_cannot_hold_is_refused(decl, arg, match):
    with pytest.raises(LaunchError, match=f"argument 0 \\(a: \\.{decl.split()[0][1:]}\\) of kernel 'k'.*{match}"):
        _value(f".param {decl}", arg)


@pytest.mark.parametrize("decl,arg", [(".bf16 a", 1e39), (".bf16 a", 3.4e38), (".bf16 a", -3.4e38),
                                      (".f16x2 a", (70000.0, 1.0)), (".f16x2 a", (1.0, -65520.0)),
                                      (".bf16x2 a", (1.0, 3.4e38)), (".bf16x2 a", (1e39, 0.0))])
def test_bf16_and_pair_overflow_is_refused_as_f16_and_f32_overflow_is(decl, arg):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused by name, not merely warned about by numpy
        with pytest.raises(LaunchError, match="argument 0 \\(a: .*\\) of kernel 'k'.* is .*beyond the range of "
                                              "\\.(bf16|f16)"):
            _value(f".param {decl}", arg)


@pytest.mark.parametrize("decl,arg,bits", [(".bf16 a", 3.3e38, 0x7F78), (".bf16 a", float("inf"), 0x7F80),
                                           (".f16x2 a", (65504.0, float("-inf")), 0xFC007BFF),
                                           (".bf16x2 a", (1.0, 2.0), 0x40003F80)])
def test_values_in_range_and_infinities_still_pass(decl, arg, bits):
    assert _value(f".param {decl}", arg) == bits


@pytest.mark.parametrize("decl,arg", [(".f32 a", 2 ** 2000), (".f64 a", 2 ** 2000), (".bf16 a", -2 ** 2000),
                                      (".f16x2 a", (2 ** 2000, 1)), (".f16 a", 2 ** 1100)])
def test_an_int_beyond_every_float_is_a_launch_error(decl, arg):
    with pytest.raises(LaunchError, match="argument 0 \\(a: .*\\) of kernel 'k' is .*beyond the range"):
        _value(f".param {decl}", arg)


@pytest.mark.parametrize("decl", [".u64 a", ".b64 a"])
def test_a_0d_array_for_a_64_bit_integer_is_its_value(decl):
    from ptxforge.runtime.launch import resolve
    r = resolve(_lay(f".param {decl}"), (np.array(7, np.uint64),), "k")
    assert r.values == [7] and r.transfers == []
    assert _value(f".param {decl}", np.array(7, np.int32)) == 7
    assert _value(".param .u32 a", np.array(7, np.uint32)) == 7  # as for every other integer


def test_a_0d_float_array_for_a_b64_is_its_bit_pattern():
    assert _value(".param .b64 a", np.array(1.0)) == 0x3FF0000000000000


@pytest.mark.parametrize("decl", [".u32 a", ".s64 a", ".u64 a", ".b32 a", ".u8 a", ".f16x2 a", ".b128 a"])
@pytest.mark.parametrize("flag", [True, np.bool_(False), np.array(True)])
def test_a_bool_for_an_integer_parameter_is_refused(decl, flag):
    with pytest.raises(LaunchError, match="argument 0 \\(a: .*\\) of kernel 'k' takes an int, got bool"):
        _value(f".param {decl}", flag)


@pytest.mark.parametrize("arg,raw", [(0, bytes(16)), (2 ** 128 - 1, b"\xff" * 16), (-1, b"\xff" * 16),
                                     (0x0102, b"\x02\x01" + bytes(14)), (bytes(range(16)), bytes(range(16))),
                                     (np.arange(2, dtype=np.uint64), (0).to_bytes(8, "little") + (1).to_bytes(8, "little")),
                                     (np.array(5, np.uint32), b"\x05" + bytes(15))])
def test_a_b128_parameter_takes_an_int_or_16_bytes(arg, raw):
    lay = _lay(".param .u32 n, .param .b128 x")
    assert lay.specs[1].size == 16 and lay.specs[1].offset == 16 and lay.size == 32
    from ptxforge.runtime.launch import pack, resolve
    blob = pack(lay, resolve(lay, (3, arg), "k").values)
    assert blob == b"\x03\0\0\0" + bytes(12) + raw


@pytest.mark.parametrize("arg", [2 ** 128, -2 ** 127 - 1, 1.0, bytes(15), "x" * 16, None])
def test_a_b128_parameter_refuses_anything_else_by_name(arg):
    with pytest.raises(LaunchError, match="argument 0 \\(x: \\.b128\\) of kernel 'k'"):
        _value(".param .b128 x", arg)


def test_a_b128_kernel_loads_and_launches(mem_drv):
    from ptxforge.isa import types as T
    from ptxforge.runtime.launch import layout
    k = pf.KernelBuilder("k", target="sm_90")
    k.param_value("x", T.lookup("b128"))
    assert layout(k.params).specs[0].size == 16  # the builder's own .b128 parameter has a layout
    fn = kernel_of(".param .b128 x")
    assert fn.layout.specs[0].describe() == "x: .b128"
    fn(1, 32, 2 ** 100)
    assert "cuLaunchKernel" in mem_drv.names()


# ---------------------------------------------------------------- host arrays staged around a launch

def _pointer_args(params_addr, n):
    """The first `n` 64-bit arguments of a cuLaunchKernel kernelParams array."""
    import ctypes
    argv = (ctypes.c_void_p * n).from_address(params_addr)
    return [ctypes.c_uint64.from_address(argv[i]).value for i in range(n)]


def _times_ten(sd, *launch):
    """The stand-in kernel of `_in_place`: out[i] = 10 * inp[i] over 4 floats."""
    out, inp = _pointer_args(launch[9], 2)
    sd.mem[out][:16] = (np.frombuffer(bytes(sd.mem[inp][:16]), np.float32) * 10).tobytes()


def _in_place(mem_drv):
    mem_drv.kernel_body = _times_ten
    fn = kernel_of(".param .u64 .ptr .global .align 4 out, .param .u64 .ptr .global .align 4 inp")
    mem_drv.calls.clear()
    return fn


@pytest.mark.parametrize("wrap", [lambda a: (pf.Out(a), a), lambda a: (pf.Out(a), pf.In(a)),
                                  lambda a: (pf.Out(a), pf.InOut(a)), lambda a: (a, a), lambda a: (a, pf.In(a)),
                                  lambda a: (pf.InOut(a), pf.Out(a))])
def test_one_host_array_with_several_policies_is_copied_in_and_back_once(mem_drv, wrap):
    fn = _in_place(mem_drv)
    a = np.arange(4, dtype=np.float32)
    fn(1, 32, *wrap(a))
    np.testing.assert_array_equal(a, [0, 10, 20, 30])
    names = _driver_calls(mem_drv)
    assert names.count("cuMemAlloc") == 1 and names.count("cuMemcpyHtoD") == 1
    assert names.count("cuMemcpyDtoH") == 1 and names.index("cuMemcpyHtoD") < names.index("cuLaunchKernel")


def test_an_out_only_array_is_not_copied_in(mem_drv):
    fn = _in_place(mem_drv)
    a, b = np.full(4, -1, np.float32), np.arange(4, dtype=np.float32)
    fn(1, 32, pf.Out(a), pf.In(b))
    np.testing.assert_array_equal(a, [0, 10, 20, 30])
    assert _driver_calls(mem_drv).count("cuMemcpyHtoD") == 1


@pytest.mark.parametrize("views", [lambda a: (a, a.reshape(2, 2)), lambda a: (a[:], a), lambda a: (a, a[1:]),
                                   lambda a: (pf.In(a[:3]), pf.Out(a[2:])), lambda a: (a.view(np.int32), pf.In(a))])
def test_overlapping_views_of_one_host_array_are_refused_naming_both(mem_drv, views):
    fn = _in_place(mem_drv)
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(LaunchError, match="arguments 0 \\(out\\) and 1 \\(inp\\) of kernel 'k' are different numpy "
                                          "arrays over overlapping host memory"):
        fn(1, 32, *views(a))
    assert _driver_calls(mem_drv) == []
    np.testing.assert_array_equal(a, [0, 1, 2, 3])


def test_overlapping_inputs_only_are_staged_separately(mem_drv):
    from ptxforge.runtime.launch import resolve
    fn = _in_place(mem_drv)
    a = np.arange(8, dtype=np.float32)
    r = resolve(fn.layout, (pf.In(a[:4]), pf.In(a[2:6])), "k")
    assert len(r.transfers) == 2
    ro = a.copy()
    ro.flags.writeable = False
    resolve(fn.layout, (ro, ro[1:5]), "k")  # read-only arrays are inputs only
    resolve(fn.layout, (a[:4], a[4:]), "k")  # adjacent, not overlapping


def test_a_launch_refuses_a_big_endian_device_buffer(mem_drv):
    fn = kernel_of(".param .u64 .ptr .global .align 4 out, .param .u64 .ptr .global .align 4 inp")
    good = DeviceBuffer(shape=(4,), dtype=np.float32)
    fn(1, 32, good, good)  # the fast path has seen float32 buffers
    bad = DeviceBuffer(shape=(4,), dtype=np.float32)
    bad.dtype = np.dtype(">f4")  # (the constructor refuses it; a buffer relabelled afterwards)
    for args in ((bad, good), (good, bad)):
        with pytest.raises(LaunchError, match="argument [01] \\((out|inp)\\) of kernel 'k': the DeviceBuffer holds "
                                              "big-endian >f4"):
            fn(1, 32, *args)


# ---------------------------------------------------------------- foreign arrays

class _CAI:
    def __init__(self, **fields):
        self.__cuda_array_interface__ = {"data": (0x7000_0000, False), "shape": (4,), "typestr": "<f4",
                                         "version": 3, **fields}


@pytest.mark.parametrize("fields,match", [
    (dict(data=(-16, False)), "data address -16; it must be an int in \\[0, 2\\*\\*64\\)"),
    (dict(data=(1 << 64, False)), "data address 18446744073709551616"),
    (dict(data=(1.5, False)), "data address 1.5"),
    (dict(data=0x7000), "data 28672; it must be a pair"),
    (dict(stream="x"), "stream 'x'; it must be None or a stream handle"),
    (dict(stream=-1), "stream -1"),
    (dict(stream=True), "stream True"),
    (dict(strides=(4, 4)), "strides \\(4, 4\\); they must be None or 1 ints"),
    (dict(strides=("a",)), "strides"),
    (dict(shape=(-4,)), "shape \\(-4,\\); it must be a tuple of ints >= 0"),
    (dict(shape=(2.0,)), "shape"),
    (dict(typestr="<zz"), "typestr '<zz'")])
def test_cuda_array_interface_fields_are_checked_naming_the_argument(fields, match):
    from ptxforge.runtime.launch import resolve
    lay = _lay(".param .u64 .ptr .global .align 4 x")
    with pytest.raises(LaunchError, match=f"^argument 0 \\(x\\) of kernel 'k': _CAI.__cuda_array_interface__ has "
                                          f"{match}"):
        resolve(lay, (_CAI(**fields),), "k", check_pointer=lambda p, what: None)


def test_a_raising_cuda_array_interface_is_chained():
    from ptxforge.runtime.launch import resolve

    class Grad:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
    with pytest.raises(LaunchError, match="argument 0 \\(x\\) of kernel 'k': Grad.__cuda_array_interface__ raised "
                                          "RuntimeError \\(Can't get .*requires grad\\)") as e:
        resolve(_lay(".param .u64 .ptr x"), (Grad(),), "k")
    assert isinstance(e.value.__cause__, RuntimeError)


def test_a_raising_cuda_array_interface_falls_back_on_dlpack():
    from ptxforge.runtime.launch import resolve
    from support.dlpack_producer import Producer

    class Bf16(Producer):
        @property
        def __cuda_array_interface__(self):
            raise TypeError("bfloat16 has no typestr")
    r = resolve(_lay(".param .u64 .ptr x"), (Bf16(data=0x20000),), "k")
    assert r.values == [0x20000]
    bad = Bf16(device=(10, 0))
    with pytest.raises(LaunchError, match="lives on a rocm device") as e:
        resolve(_lay(".param .u64 .ptr x"), (bad,), "k")
    assert isinstance(e.value.__cause__, TypeError)


def test_dlpack_vector_elements_name_the_argument_and_kernel():
    from ptxforge.runtime.launch import resolve
    from support.dlpack_producer import Producer
    with pytest.raises(LaunchError, match="^argument 0 \\(x\\) of kernel 'k': Producer has vector elements "
                                          "\\(4 lanes"):
        resolve(_lay(".param .u64 .ptr x"), (Producer(lanes=4),), "k")


def test_the_dlpack_capsule_lives_as_long_as_the_launch(mem_drv):
    from ptxforge.runtime.launch import resolve
    from support.dlpack_producer import Producer
    mem_drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, 2)
    p = Producer()
    r = resolve(_lay(".param .u64 .ptr .global .align 4 x"), (p,), "k")
    gc.collect()
    assert r.values == [0x10000] and p.deleted == 0  # the producer may not free the export yet
    del r
    gc.collect()
    assert p.deleted == 1
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    seen = []
    mem_drv.kernel_body = lambda sd, *launch: seen.append(p.deleted)
    fn(1, 32, p)
    bound = fn.bind(1, 32, p)
    gc.collect()
    bound.launch()
    assert seen == [1, 2] and p.deleted == 2  # the plain launch's capsule went after it; the bound one's is kept
    bound.close()
    del bound
    gc.collect()
    assert p.deleted == 3


# ---------------------------------------------------------------- streams and modules after their end

def test_a_closed_stream_refuses_every_use(mem_drv):
    mem_drv.answers.update({"cuStreamCreate": (0, 0x777), "cuStreamDestroy": (0,), "cuStreamQuery": (0,)})
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    s = pf.Stream()
    buf = DeviceBuffer(shape=(4,), dtype=np.float32)
    bound = fn.bind(1, 32, buf, stream=s)
    fn(1, 32, buf, stream=s)
    bound.launch()
    s.close()
    assert "closed" in repr(s)
    mem_drv.calls.clear()
    for use in (lambda: fn(1, 32, buf, stream=s), bound.launch, bound.copy_back, s.synchronize, s.query,
                lambda: int(s), s.__cuda_stream__, lambda: buf.to_host(stream=s), lambda: buf.fill_bytes(0, stream=s),
                lambda: pf.runtime.streams.synchronize_stream(s), lambda: pf.runtime.streams.query(s)):
        with pytest.raises(LaunchError, match="(this Stream \\(0x777\\)|the Stream this launch of 'k' was bound to) "
                                              "was closed"):
            use()
    assert _driver_calls(mem_drv) == []
    s.close()  # twice is fine


def _modules_on_the_stand_in(mem_drv, monkeypatch):
    """load() on the stand-in: each JIT hands out a new module handle (from 0x100); returns the handles unloaded
    so far, as a function."""
    from ptxforge.runtime import cache as C
    from ptxforge.runtime import loader as L
    handles = iter(range(0x100, 0x200))
    monkeypatch.setattr(L, "_jit_and_load", lambda *a: (next(handles), b"cubin", ""))
    monkeypatch.setattr(C, "disk_cache", lambda: None)
    return lambda: sorted(a[0] for n, a in mem_drv.calls if n == "cuModuleUnload")


def test_a_module_nothing_refers_to_is_unloaded(mem_drv, monkeypatch):
    from ptxforge.runtime import cache as C
    from ptxforge.testing.kernels import saxpy
    unloaded = _modules_on_the_stand_in(mem_drv, monkeypatch)
    for _ in range(3):
        pf.load(saxpy())
        C.clear_cache(disk=False)
    pf.load(saxpy(), cache=False)
    gc.collect()
    assert unloaded() == [0x100, 0x101, 0x102, 0x103]
    lm = pf.load(saxpy())
    lm.unload()
    del lm
    gc.collect()
    assert unloaded().count(0x104) == 1  # unload() then collection: once


def test_a_module_is_kept_while_a_kernel_bound_launch_or_prepared_launch_of_it_can_run(mem_drv, monkeypatch):
    from ptxforge.runtime import cache as C
    from ptxforge.runtime.launch_ex import block_launcher
    from ptxforge.testing.kernels import saxpy
    unloaded = _modules_on_the_stand_in(mem_drv, monkeypatch)
    buf = DeviceBuffer(shape=(300,), dtype=np.float32)
    fn = pf.load(saxpy())["saxpy"]  # 0x100: held through its kernel
    C.clear_memory_cache()
    bound = pf.load(saxpy(), cache=False)["saxpy"].bind(2, 256, buf, buf, 300, 0.5)  # 0x101
    other = pf.load(saxpy(), cache=False)["saxpy"]  # 0x102: held through a prepared launch only
    go, blob = block_launcher(other, other._config(2, 256, 0), 0), other._blob
    del other
    gc.collect()
    assert unloaded() == []
    mem_drv.calls.clear()
    fn(2, 256, buf, buf, 300, 0.5)
    bound.launch()
    go(blob)
    assert [a[0] for n, a in mem_drv.calls if n == "cuLaunchKernel"] == [0, 0, 0]
    del fn, bound
    gc.collect()
    assert unloaded() == [0x100, 0x101]
    del go, blob
    gc.collect()
    assert unloaded() == [0x100, 0x101, 0x102]


def test_clearing_the_memory_cache_drops_the_key_locks_no_load_holds(mem_drv, monkeypatch):
    from ptxforge.runtime import cache as C
    _modules_on_the_stand_in(mem_drv, monkeypatch)
    for i in range(5):
        pf.load(f".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k{i}() {{ ret; }}\n")
    assert len(C._key_locks) >= 5
    held = C.key_lock("a load in progress")
    with held:
        C.clear_memory_cache()
        assert list(C._key_locks) == ["a load in progress"]
    C.clear_memory_cache()
    assert C._key_locks == {}


# ---------------------------------------------------------------- launch configurations

@pytest.mark.parametrize("good,bad,match", [
    ((1, 32, 0), (1.0, 32, 0), "grid for kernel 'k' must be an int"),
    ((1, 32, 0), (True, 32, 0), "grid for kernel 'k' must be an int"),
    ((1, 32, 0), (1, 32.0, 0), "block for kernel 'k' must be an int"),
    ((1, 32, 1), (1, 32, True), "shared= for kernel 'k' must be a non-negative int of bytes, got True"),
    ((1, 32, 0), (1, 32, 0.0), "shared= .* got 0.0"),
    (((2, 1), (32, 1), 0), ((2.0, 1), (32, 1), 0), "grid for kernel 'k' must be an int or a tuple of 1 to 3 ints"),
    (((2, 1), (32, 1), 0), ((2, 1), (32, True), 0), "block for kernel 'k'"),
    (((2, 1), (32, 1), 0), ((2, np.float32(1)), (32, 1), 0), "grid for kernel 'k'")])
def test_a_remembered_configuration_does_not_let_an_equal_invalid_one_through(mem_drv, good, bad, match):
    fn = kernel_of(".param .u32 n")
    for _ in range(2):
        fn(good[0], good[1], 4, shared=good[2])  # remembered (twice: by key, then as the last one)
        with pytest.raises(LaunchError, match=match):
            fn(bad[0], bad[1], 4, shared=bad[2])
    grid = [2, 1]  # a list is checked at every launch: it can change
    fn(grid, 32, 4)
    grid[0] = 0
    with pytest.raises(LaunchError, match="must be positive"):
        fn(grid, 32, 4)


def test_numpy_integer_configurations_are_still_valid(mem_drv):
    fn = kernel_of(".param .u32 n")
    assert fn._config(np.int64(2), (np.int32(32), 1), np.uint16(0)) == (2, 1, 1, 32, 1, 1, 0)
    assert fn._config(np.int64(2), (np.int32(32), 1), np.uint16(0)) == (2, 1, 1, 32, 1, 1, 0)


def test_the_launch_cluster_example_calls_it_as_its_signature_allows():
    import inspect
    import re
    from ptxforge.runtime import cluster
    example = re.search(r"launch_cluster\(.*\)", cluster.__doc__).group(0)
    sig = inspect.signature(cluster.launch_cluster)
    got = eval(example, {"launch_cluster": lambda *a, **k: sig.bind(*a, **k).arguments, "fn": "fn", "args": (1, 2)})
    assert got["grid"] == (4, 1) and got["block"] == 128 and got["cluster"] == (2, 1) and got["args"] == (1, 2)
