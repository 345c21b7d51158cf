"""The runtime at its edges, on the CPU: foreign arrays that lie about their memory, stream handles, freed
buffers named by argument, timing on the stream the work runs on, and the device chosen by environment.

Where the driver must answer, the stand-in of `support.driver_standin` replaces it."""

import os
import warnings

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.errors import DriverError, LaunchError
from ptxforge.runtime import cache as C
from ptxforge.runtime import driver as D
from ptxforge.runtime import loader as L
from ptxforge.runtime.launch import layout, resolve
from ptxforge.runtime.loader import parse_entries
from ptxforge.runtime.streams import stream_handle

real = pytest.importorskip("cuda.bindings.driver")

from support.driver_standin import OURS, StandIn, drv, kernel_of, mem_drv  # noqa: E402,F401  (fixtures)
from support.dlpack_producer import Producer  # noqa: E402


def _lay(params: str = ".param .u64 .ptr .global .align 4 x"):
    ptx = f".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k({params}) {{ ret; }}"
    e = parse_entries(ptx)[0]
    return layout(e.params, e.pointer_aligns)


class _Cai:
    """An object whose __cuda_array_interface__ says whatever a test gives it."""

    def __init__(self, **fields):
        self.__cuda_array_interface__ = {"data": (0x7000_0000, False), "shape": (4,), "typestr": "<f4",
                                         "version": 3, **fields}


# ---------------------------------------------------------------- arrays that lie about their memory

@pytest.mark.parametrize("make", [
    lambda: _Cai(data=(0, False)),
    lambda: _Cai(data=(None, False), shape=(2, 3)),
    lambda: Producer(data=0),
], ids=["cai", "cai-None", "dlpack"])
def test_a_null_address_with_elements_is_refused_naming_the_argument(make):
    """The interface allows address 0 only for an array without elements: a launch must not hand a kernel a null
    pointer to memory it was told holds data."""
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': .*address 0.* but it has \d+ "
                                          r"element"):
        resolve(_lay(), (make(),), "k")


@pytest.mark.parametrize("make", [lambda: _Cai(data=(0, False), shape=(0,)), lambda: Producer(data=0, shape=(0, 4))],
                         ids=["cai", "dlpack"])
def test_a_null_address_without_elements_is_still_accepted(make):
    assert resolve(_lay(), (make(),), "k").values == [0]


@pytest.mark.parametrize("make", [
    lambda: _Cai(data=((1 << 64) - 16, False), shape=(8,)),
    lambda: _Cai(data=((1 << 64) - 64, False), shape=(1 << 62,)),
    lambda: Producer(data=(1 << 64) - 8, shape=(4,)),
], ids=["cai", "cai-huge", "dlpack"])
def test_an_array_running_past_the_end_of_the_address_space_is_refused(make):
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': .*past the end of the 64-bit address "
                                          r"space"):
        resolve(_lay(), (make(),), "k")


def test_a_dlpack_tensor_with_a_negative_extent_or_elements_of_no_size_is_refused():
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': Producer's DLPack tensor has shape "
                                          r"\(-4,\)"):
        resolve(_lay(), (Producer(shape=(-4,)),), "k")
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': Producer's DLPack tensor has elements "
                                          r"of 0 bits"):
        resolve(_lay(".param .u64 .ptr .global x"), (Producer(bits=0),), "k")


def test_a_stream_of_0_in_the_cuda_array_interface_is_refused():
    """Version 3 of the interface disallows stream 0 (it could mean the legacy or the per-thread default stream);
    the producer must say 1 or 2."""
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': _Cai.__cuda_array_interface__ has "
                                          r"stream 0; .*1 .*legacy.* 2 .*per-thread"):
        resolve(_lay(), (_Cai(stream=0),), "k", 0x55)
    assert resolve(_lay(), (_Cai(stream=1),), "k", 0x55).streams == [1]  # the legal spellings still pass
    assert resolve(_lay(), (_Cai(stream=None),), "k", 0x55).streams == []


@pytest.mark.parametrize("typestr", ["|O", "|V0"])
def test_elements_device_memory_cannot_hold_are_refused_even_for_untyped_pointers(typestr):
    """A `.b8` pointer takes any element type, but not Python objects (host addresses) nor elements of no size."""
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': _Cai.__cuda_array_interface__ has "
                                          r"typestr"):
        resolve(_lay(".param .u64 .ptr .global x"), (_Cai(typestr=typestr),), "k")


# ---------------------------------------------------------------- buffers and streams

def test_a_freed_device_buffer_is_named_by_argument_and_kernel(mem_drv):
    fn = kernel_of(".param .u64 .ptr .global .align 4 x, .param .u32 n")
    buf = pf.DeviceBuffer.empty((4,), np.float32)
    buf.free()
    mem_drv.calls.clear()
    for use in (lambda: fn(1, 32, buf, 4), lambda: fn.bind(1, 32, buf, 4)):
        with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': this DeviceBuffer was freed"):
            use()
    assert "cuLaunchKernel" not in mem_drv.names()
    empty = pf.DeviceBuffer.empty((0,), np.float32)
    empty.free()
    fn(1, 32, empty, 0)  # an empty buffer has no memory to lose: address 0 is what it always was


def test_stream_handles_are_64_bit_and_may_be_numpy_integers():
    assert stream_handle(np.int64(0x55)) == 0x55 and stream_handle(np.uint64(0)) == 0
    for bad in ((1 << 64), np.int64(-1)):
        with pytest.raises(LaunchError, match="stream handle"):
            stream_handle(bad)


def test_benchmark_records_its_events_on_the_stream_the_launch_runs_on(mem_drv):
    """A launch bound to a ptxforge Stream (non-blocking) runs beside the legacy default stream, so events
    recorded there would time nothing: benchmark() records on the launch's own stream, and refuses another."""
    mem_drv.answers.update({"cuStreamCreate": (0, 0x777), "cuStreamDestroy": (0,), "cuEventCreate": (0, 0xE),
                            "cuEventRecord": (0,), "cuEventSynchronize": (0,), "cuEventElapsedTime": (0, 1.0),
                            "cuEventDestroy": (0,), "cuStreamSynchronize": (0,)})
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    buf = pf.DeviceBuffer.empty((4,), np.float32)
    s = pf.Stream()

    def recorded_on():
        return {args[1] for name, args in mem_drv.calls if name == "cuEventRecord"}

    bound = fn.bind(1, 32, buf, stream=s)
    mem_drv.calls.clear()
    t = pf.runtime.benchmark(bound, warmup=0, repeat=2)
    assert t.repeat == 2 and recorded_on() == {0x777}
    with pytest.raises(LaunchError, match="bound to stream 0x777"):
        pf.runtime.benchmark(bound, warmup=0, repeat=2, stream=0)
    mem_drv.calls.clear()
    pf.runtime.benchmark(fn, 1, 32, buf, warmup=0, repeat=2, stream=s)
    assert recorded_on() == {0x777}


@pytest.mark.parametrize("kw", [{"repeat": 2.5}, {"batch": 1.0}, {"warmup": True}, {"repeat": 0}])
def test_benchmark_counts_must_be_ints(mem_drv, kw):
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    mem_drv.calls.clear()
    with pytest.raises(ValueError, match=next(iter(kw))):
        pf.runtime.benchmark(fn, 1, 32, 0, **kw)
    assert mem_drv.names() == []


# ---------------------------------------------------------------- the device

@pytest.mark.parametrize("value", ["gpu1", "1.5", "0x1"])
def test_an_unreadable_device_variable_says_which_variable(monkeypatch, value):
    monkeypatch.setattr(D, "_api", StandIn())
    monkeypatch.setattr(D, "_state", None)
    monkeypatch.setattr(D, "_requested_ordinal", None)
    monkeypatch.setenv(D.DEVICE_ENV, value)
    with pytest.raises(DriverError, match=f"{D.DEVICE_ENV}=.*a device ordinal"):
        D.device_info()


# ---------------------------------------------------------------- host copies

@pytest.mark.parametrize("make", [lambda: pf.DeviceBuffer.empty((4,), np.float32), lambda: _Cai(),
                                  lambda: Producer()], ids=["DeviceBuffer", "cai", "dlpack"])
def test_gpu_memory_given_as_host_data_is_named_as_such(mem_drv, make):
    buf = pf.DeviceBuffer.empty((4,), np.float32)
    dev = make()
    mem_drv.calls.clear()
    for what, use in (("copy_from_host", lambda: buf.copy_from_host(dev)),
                      ("copy_to_host", lambda: buf.copy_to_host(dev)),
                      ("DeviceBuffer.from_host", lambda: pf.DeviceBuffer.from_host(dev))):
        with pytest.raises(LaunchError, match=f"^{what} takes a host \\(numpy\\) array; {type(dev).__name__} is GPU "
                                              "memory already"):
            use()
    assert mem_drv.names() == []


def test_a_copy_never_reinterprets_values_of_another_dtype(mem_drv):
    """A float32 buffer given int32 values of the same byte count would hold their bit patterns as floats."""
    buf = pf.DeviceBuffer.empty((4,), np.float32)
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="copy_from_host: the host array holds int32 and the buffer float32.*astype"):
        buf.copy_from_host(np.arange(4, dtype=np.int32))
    with pytest.raises(LaunchError, match="copy_to_host: the host array holds uint32 and the buffer float32"):
        buf.copy_to_host(np.zeros(4, np.uint32))
    assert mem_drv.names() == []
    buf.copy_from_host(np.arange(4, dtype=np.float32).reshape(2, 2))  # the same elements in another shape
    np.testing.assert_array_equal(buf.to_host(), [0, 1, 2, 3])
    buf.copy_from_host(np.arange(4, dtype=np.int32).view(np.float32))  # the bits, on purpose
    raw = pf.DeviceBuffer(16)  # bytes take anything
    raw.copy_from_host(np.arange(4, dtype=np.int32))
    np.testing.assert_array_equal(raw.copy_to_host(np.zeros(4, np.int32)), [0, 1, 2, 3])


# ---------------------------------------------------------------- the disk cache: what another user could change

KEY = C.cache_key("ptx", "sm_90", (), "cuda-13000/570.1")


@pytest.fixture
def disk(tmp_path):
    dc = C.DiskCache(str(tmp_path / "cache"))
    assert dc.prepare() is None
    return dc


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX links and modes")
def test_a_linked_subdirectory_is_neither_read_nor_written_through(disk, tmp_path):
    """The cache's own subdirectory replaced by a link (to a directory someone else may write) must not lead the
    cache there: nothing is read from it, and the rebuilt cubin is not written into it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / (KEY + ".cubin")).write_bytes(C.encode_entry(KEY, b"planted cubin"))
    os.chmod(elsewhere / (KEY + ".cubin"), 0o600)
    os.symlink(elsewhere, os.path.dirname(disk.path(KEY)))
    assert disk.get(KEY) is None and "symbolic link" in disk.last_rejection
    C.stats.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert disk.put(KEY, b"fresh cubin") is False
    assert C.stats.write_errors == 1 and os.listdir(elsewhere) == [KEY + ".cubin"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_a_subdirectory_or_entry_others_may_write_is_refused(disk):
    disk.put(KEY, b"cubin")
    assert disk.get(KEY)[0] == b"cubin"
    os.chmod(disk.path(KEY), 0o666)
    assert disk.get(KEY) is None and "group or others may write it (mode 0666)" in disk.last_rejection
    os.chmod(disk.path(KEY), 0o600)
    os.chmod(os.path.dirname(disk.path(KEY)), 0o777)
    assert disk.get(KEY) is None and "group or others may write it (mode 0777)" in disk.last_rejection
    os.chmod(os.path.dirname(disk.path(KEY)), 0o700)
    assert disk.get(KEY)[0] == b"cubin"


# ---------------------------------------------------------------- what a refused launch says

def test_a_launch_refused_for_its_stream_names_the_stream_and_what_to_pass(drv):
    """A stream of another context (or one destroyed behind ptxforge's back) makes the driver answer
    CUDA_ERROR_INVALID_HANDLE: the error names the stream with the launch, and says which streams are legal."""
    drv.current = OURS
    drv.answers["cuMemAlloc"] = (0, 0x7000_0000)
    drv.answers["cuFuncGetAttribute"] = lambda attr, f: (0, 1024 if "MAX_THREADS" in attr.name else 0)
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    buf = pf.DeviceBuffer.empty((4,), np.float32)
    bound = fn.bind(1, 32, buf, stream=0x999)
    drv.answers["cuLaunchKernel"] = (400,)
    for use in (lambda: fn(1, 32, buf, stream=0x999), bound.launch):
        with pytest.raises(DriverError) as e:
            use()
        msg = str(e.value)
        assert "grid (1, 1, 1), block (32, 1, 1), 0 B dynamic shared memory on stream 0x999 failed:" in msg, msg
        assert "(400)" in msg and "another CUDA context" in msg and "a ptxforge Stream" in msg, msg
    with pytest.raises(DriverError) as e:
        fn(1, 32, buf)
    assert "on the legacy default stream failed:" in str(e.value) and "another CUDA context" not in str(e.value)


# ---------------------------------------------------------------- a child made by fork()

@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX")
def test_a_forked_child_is_told_to_spawn_instead(mem_drv):
    """multiprocessing's default start method on Linux forks: a child inherits ptxforge's initialized state but not
    a usable CUDA context.  Every call in it says so (never a bare CUDA_ERROR_NOT_INITIALIZED), and the buffers it
    inherited free nothing.  Checked in a real child, which reports through a pipe."""
    from ptxforge.errors import ContextLost
    from ptxforge.runtime import faults as F
    buf = pf.DeviceBuffer.empty((4,), np.float32)
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave at once (no pytest teardown here)
        said = []
        try:
            for use in (lambda: fn(1, 32, buf), buf.to_host, lambda: pf.DeviceBuffer.empty(4), D.device_info):
                try:
                    use()
                    said.append("ran")
                except ContextLost as e:
                    said.append("forked" if str(e) == D.FORKED else f"other: {e}")
                except BaseException as e:
                    said.append(f"{type(e).__name__}: {e}")
            frees = [n for n in mem_drv.names() if n == "cuMemFree"]
            buf.free()
            said.append(f"frees {len([n for n in mem_drv.names() if n == 'cuMemFree']) - len(frees)}")
        finally:
            os.write(w, "|".join(said).encode())
            os._exit(0)
    os.close(w)
    got = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        got += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert got.decode() == "forked|forked|forked|forked|frees 0"
    assert F.dead_reason() is None  # the parent goes on
    fn(1, 32, buf)



def test_an_event_timer_on_a_closed_stream_makes_no_events(mem_drv):
    mem_drv.answers.update({"cuStreamCreate": (0, 0x777), "cuStreamDestroy": (0,), "cuEventCreate": (0, 0xE)})
    s = pf.Stream()
    s.close()
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="was closed"):
        with pf.runtime.EventTimer(s):
            pass
    assert "cuEventCreate" not in mem_drv.names()


@pytest.mark.parametrize("kw", [{"max_registers": 32.7}, {"max_registers": True}, {"opt_level": 2.0},
                                {"opt_level": False}, {"max_registers": 8}, {"opt_level": 5}])
def test_jit_options_are_ints_in_range(kw):
    """The JIT options are part of the cache key: a float would be truncated into another option, a bool taken
    for 0 or 1."""
    from ptxforge.runtime.loader import jit_options
    with pytest.raises(ValueError, match=f"{next(iter(kw))} must be an int in"):
        jit_options(**kw)
    assert jit_options(max_registers=np.int32(64), opt_level=3) == (("CU_JIT_MAX_REGISTERS", 64),
                                                                   ("CU_JIT_OPTIMIZATION_LEVEL", 3))


def test_a_relative_cache_dir_is_fixed_when_it_is_set(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    C.set_cache_dir("rel/cubins")
    try:
        os.mkdir(tmp_path / "elsewhere")
        monkeypatch.chdir(tmp_path / "elsewhere")
        assert C.cache_dir() == str(tmp_path / "rel" / "cubins")
    finally:
        C.set_cache_dir(None)


def test_copying_a_device_buffer_copies_its_memory_and_pickling_is_refused(mem_drv):
    """copy.copy of the object alone would share its memory (and its finalizer): freeing either would leave the
    other using freed memory.  A copy is a new allocation with the same bytes; a pickle would carry a dangling
    address to another process, so it is refused."""
    import copy
    import pickle

    def dtod(dst, src, n):
        mem_drv.mem[int(dst)][:n] = mem_drv.mem[int(src)][:n]
        mem_drv.calls.append(("cuMemcpyDtoD", (dst, src, n)))
        return (0,)
    mem_drv.cuMemcpyDtoD = dtod
    a = pf.DeviceBuffer.from_host(np.arange(4, dtype=np.float32))
    for make in (copy.copy, copy.deepcopy, lambda b: b.copy()):
        b = make(a)
        assert b.ptr != a.ptr and b.shape == a.shape and b.dtype == a.dtype
        b.free()
        np.testing.assert_array_equal(a.to_host(), [0, 1, 2, 3])  # still allocated, still its values
    c = copy.deepcopy({"w": a})["w"]
    a.free()
    np.testing.assert_array_equal(c.to_host(), [0, 1, 2, 3])
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(c)
    with pytest.raises(LaunchError, match="freed"):
        a.copy()


def test_a_copied_stream_bound_launch_kernel_or_module_is_the_same_object(mem_drv):
    """A copy of the object alone would share the driver stream (or the bound launch's device copies) without
    knowing when the other closed it: the copy would then launch on a destroyed stream or on freed memory."""
    import copy
    import pickle
    mem_drv.answers.update({"cuStreamCreate": (0, 0x777), "cuStreamDestroy": (0,)})
    s = pf.Stream()
    fn = kernel_of(".param .u64 .ptr .global .align 4 x")
    module = L.LoadedModule.__new__(L.LoadedModule)
    module._handle = 1
    for obj in (module, fn):
        assert copy.copy(obj) is obj and copy.deepcopy([obj])[0] is obj
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(obj)
    bound = fn.bind(1, 32, np.zeros(4, np.float32), stream=s)
    for obj in (s, bound):
        assert copy.copy(obj) is obj and copy.deepcopy([obj])[0] is obj
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(obj)
    copy.copy(bound).close()
    with pytest.raises(LaunchError, match="was closed"):
        bound.launch()
    copy.copy(s).close()
    with pytest.raises(LaunchError, match="was closed"):
        fn(1, 32, 0, stream=s)


def test_without_the_driver_s_version_file_the_cache_key_follows_the_loaded_libcuda(tmp_path):
    """On WSL there is no /proc/driver/nvidia/version: the driver build (part of every cache key) is then the
    loaded libcuda's path, size and time, so a driver update of the same CUDA version stops reusing the old
    driver's cubins instead of reusing them under 'unknown-build'."""
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"x" * 100)
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r--p 00000000 08:01 42   /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                    f"7f02-7f03 r-xp 00000000 08:01 43   {lib}\n")
    missing = str(tmp_path / "no-version-file")
    before = D.driver_build(missing, str(maps))
    assert before.startswith(f"libcuda {lib} 100 ")
    lib.write_bytes(b"x" * 200)  # another driver's library
    assert D.driver_build(missing, str(maps)) != before
    version = tmp_path / "version"
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Release Build\n")
    assert D.driver_build(str(version), str(maps)) == "570.133.20"  # the driver's own word comes first
    assert D.driver_build(missing, missing) == ""


def test_a_bare_dlpack_capsule_is_named_with_what_to_pass():
    capsule = Producer().__dlpack__()
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k' is a DLPack capsule; pass the array "
                                          "itself"):
        resolve(_lay(), (capsule,), "k")


@pytest.mark.parametrize("ordinal", [1.5, True, "1", -1, None])
def test_select_device_takes_an_ordinal_and_nothing_else(monkeypatch, ordinal):
    monkeypatch.setattr(D, "_requested_ordinal", None)
    with pytest.raises(DriverError, match="select_device\\(\\) takes a device ordinal"):
        D.select_device(ordinal)
    assert D._requested_ordinal is None
    D.select_device(np.int64(0))
    assert D._requested_ordinal == 0 and type(D._requested_ordinal) is int


def test_an_allocation_the_device_cannot_hold_says_how_much_is_free(drv):
    drv.current = OURS
    drv.answers["cuMemAlloc"] = (2, 0)  # CUDA_ERROR_OUT_OF_MEMORY
    drv.answers["cuMemGetInfo"] = (0, 3 << 30, 80 << 30)
    with pytest.raises(DriverError, match=rf"^cuMemAlloc\({16 << 30} bytes\) failed: .*\(2\).*; the device has "
                                          rf"{3 << 30} bytes free of {80 << 30}"):
        pf.DeviceBuffer(16 << 30)
    drv.answers["cuMemGetInfo"] = (1, 0, 0)  # no answer: the advice alone
    with pytest.raises(DriverError, match=r"\(2\).*; free buffers no longer needed"):
        pf.DeviceBuffer(16 << 30)


def test_a_foreign_array_must_meet_the_pointer_alignment_the_ptx_declares(drv):
    """`.ptr .global .align 16` (nvcc, clang and Triton write it) promises the kernel 16-byte aligned memory, which
    it may read with vector loads: a view 8 bytes off would fault the kernel, and the context with it."""
    lay = _lay(".param .u64 .ptr .global .align 16 x")
    with pytest.raises(LaunchError, match=r"^argument 0 \(x\) of kernel 'k': .* starts at 0x70000008, not aligned "
                                          r"to the 16 bytes its PTX declares \(.ptr .align 16\)"):
        resolve(lay, (_Cai(data=(0x7000_0008, False)),), "k")
    assert resolve(lay, (_Cai(data=(0x7000_0010, False)),), "k").values == [0x7000_0010]
    assert resolve(_lay(".param .u64 .ptr .global .align 1 x"), (_Cai(data=(0x7000_0001, False), typestr="|u1"),),
                   "k").values == [0x7000_0001]
    drv.current = OURS  # a module loaded from such text: its kernels check what its entries declare
    ptx = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 .ptr .align 16 x) { ret; }"
    lm = L.LoadedModule(0x1, L.source_of_text(ptx, None), key=KEY, jit_target="sm_90", jit_log="", origin="jit",
                        cubin=b"")
    assert [s.align for s in lm["k"].layout.specs] == [16]


def test_a_tensor_map_over_a_freed_device_buffer_is_refused(mem_drv):
    """The map keeps its DeviceBuffer from being collected, but free() is explicit: a map encoded before (or after)
    would send the TMA into freed memory, perhaps another allocation's by then."""
    from ptxforge.runtime import TensorMap
    buf = pf.DeviceBuffer.empty((64, 64), np.int8)
    tm = TensorMap.from_array(buf, (64, 64))
    tm._blob.append(b"\0" * 128)  # as if encoded at an earlier launch
    assert tm.encode() == b"\0" * 128
    buf.free()
    mem_drv.calls.clear()
    with pytest.raises(LaunchError, match="the DeviceBuffer of this tensor map .* was freed"):
        tm.encode()
    fn = kernel_of(".param .align 64 .b8 tmap[128]")
    with pytest.raises(LaunchError, match="was freed"):
        fn(1, 32, tm)
    assert "cuLaunchKernel" not in mem_drv.names()
