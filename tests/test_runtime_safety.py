"""The runtime's promises that need no GPU: a disk cache no one else can plant code in, faults
reported once and by name, lifetimes that cannot dangle, contexts given back, foreign arrays and
foreign PTX checked, bounded toolchain calls, hang detection, and bad input at the edges.

Where a driver failure code must be injected, `StandIn` replaces cuda.bindings' driver module
(its enums are the real ones; its functions answer as each test tells them to)."""

import os
import stat
import sys
import threading
import time
import types
import warnings

import numpy as np
import pytest

import ptxforge as pf
import ptxforge.interp
from ptxforge import f32, u32
from ptxforge.errors import (AssemblyError, ContextLost, DriverError, JitError, LaunchError, SyncTimeout,
                             ToolchainError)
from ptxforge.runtime import cache as C
from ptxforge.runtime import driver as D
from ptxforge.runtime import faults as F
from ptxforge.runtime import kernel as K
from ptxforge.runtime import loader as L
from ptxforge.runtime.culink import LinkResult
from ptxforge.runtime.launch import layout, resolve

real = pytest.importorskip("cuda.bindings.driver")

KEY = C.cache_key("ptx", "sm_90", (), "cuda-13000/570.1")


# ---------------------------------------------------------------- a stand-in for the driver

from support.driver_standin import OURS, drv, pointer_attributes  # noqa: E402,F401  (drv: a fixture; StandIn is there)


NO_KERNELS = ".version 8.0\n.target sm_90\n.address_size 64\n"


# ---------------------------------------------------------------- the disk cache: who may plant code

def test_default_location_is_the_users_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert C.default_cache_dir() == str(tmp_path / "xdg" / "ptxforge" / "cubins")
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec ignores relative values
        assert C.default_cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "ptxforge", "cubins")
    assert "/tmp/ptxforge" not in open(os.path.join(os.path.dirname(__file__), "..", "scripts",
                                                    "gpu_lane.sh")).read()


def test_new_cache_directories_are_private(tmp_path):
    root = tmp_path / "a" / "b" / "cubins"
    dc = C.DiskCache(str(root))
    assert dc.prepare() is None
    for d in (tmp_path / "a", tmp_path / "a" / "b", root):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert dc.put(KEY, b"cubin")
    assert stat.S_IMODE(os.stat(os.path.dirname(dc.path(KEY))).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(dc.path(KEY)).st_mode) == 0o600


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o1777])
def test_a_directory_others_can_write_is_not_used(tmp_path, monkeypatch, mode):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, mode)
    monkeypatch.setenv(C.CACHE_DIR_ENV, str(root))
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    C._warned_dirs.discard(str(root))
    before = C.stats.unsafe_dirs
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert C.disk_cache() is None and C.disk_cache() is None
    msgs = [str(x.message) for x in w]
    assert len(msgs) == 1 and "group or others may write it" in msgs[0] and "JIT-compile" in msgs[0]
    assert C.stats.unsafe_dirs == before + 2


def test_a_directory_of_another_user_is_not_used(tmp_path, monkeypatch):
    if not hasattr(os, "geteuid"):
        pytest.skip("no uids on this platform")
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    monkeypatch.setattr(C.os, "geteuid", lambda: os.stat(root).st_uid + 1)
    assert "owned by uid" in C.directory_problem(str(root))
    monkeypatch.setenv(C.CACHE_DIR_ENV, str(root))
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert C.disk_cache() is None


def _planted(dc, what, target):
    p = dc.path(KEY)
    os.makedirs(os.path.dirname(p), mode=0o700, exist_ok=True)
    if what == "symlink":
        os.symlink(target, p)
    elif what == "fifo":
        os.mkfifo(p)
    elif what == "dir":
        os.mkdir(p)
    return p


@pytest.mark.parametrize("what,why", [("symlink", "symbolic link"), ("fifo", "not a regular file"),
                                      ("dir", "not a regular file"), ("devzero", "symbolic link")])
def test_entries_must_be_regular_files_not_links(tmp_path, what, why):
    if not hasattr(os, "mkfifo"):
        pytest.skip("POSIX only")
    dc = C.DiskCache(str(tmp_path / "c"))
    assert dc.prepare() is None
    good = tmp_path / "elsewhere.cubin"
    good.write_bytes(C.encode_entry(KEY, b"planted cubin"))  # a valid entry, but reached through a link
    _planted(dc, "symlink" if what == "devzero" else what, "/dev/zero" if what == "devzero" else str(good))
    box = []
    t = threading.Thread(target=lambda: box.append(dc.get(KEY)), daemon=True)
    t.start()
    t.join(5)
    assert box == [None], "a planted entry must be refused at once (a FIFO must not block)"
    assert why in dc.last_rejection


def test_entries_are_size_capped_before_reading(tmp_path):
    dc = C.DiskCache(str(tmp_path / "c"), max_bytes=4096)
    assert dc.prepare() is None
    p = dc.path(KEY)
    os.makedirs(os.path.dirname(p), mode=0o700)
    with open(p, "wb") as f:
        f.truncate(1 << 20)
    assert dc.get(KEY) is None and "over the 4096-byte limit" in dc.last_rejection
    assert not dc.put(KEY, bytes(8192))  # too large to keep at all


def test_the_header_names_the_full_key_and_format(tmp_path):
    other = C.cache_key("other ptx", "sm_90", (), "cuda-13000/570.1")
    dc = C.DiskCache(str(tmp_path))
    assert dc.put(other, b"their cubin")
    os.makedirs(os.path.dirname(dc.path(KEY)), mode=0o700, exist_ok=True)
    os.replace(dc.path(other), dc.path(KEY))  # an entry renamed to our key's file
    assert dc.get(KEY) is None and dc.last_rejection == "the entry is for another key"
    entry = bytearray(C.encode_entry(KEY, b"x"))
    entry[8] = C.FORMAT + 1
    assert C.decode_entry(KEY, bytes(entry)) == (None, f"format {C.FORMAT + 1}, not {C.FORMAT}")


def test_least_recently_used_entries_are_pruned(tmp_path):
    entry_bytes = len(C.encode_entry(KEY, bytes(1000)))
    dc = C.DiskCache(str(tmp_path), max_bytes=4 * entry_bytes)
    keys = [C.cache_key(f"ptx {i}", "sm_90", (), "d") for i in range(4)]
    now = time.time()
    for i, k in enumerate(keys):
        assert dc.put(k, bytes(1000))
        os.utime(dc.path(k), (now - 1000 + i, now - 1000 + i))  # keys[0] the oldest
    assert dc.get(keys[0]) is not None  # a hit makes it the most recent
    before = C.stats.pruned
    assert dc.put(C.cache_key("ptx 4", "sm_90", (), "d"), bytes(1000))  # over the limit now
    left = {k for k in keys if os.path.exists(dc.path(k))}
    assert keys[0] in left and keys[1] not in left and keys[2] not in left
    assert dc.total_bytes() <= 4 * entry_bytes and C.stats.pruned == before + 2


def test_stale_temporary_files_are_pruned(tmp_path):
    dc = C.DiskCache(str(tmp_path))
    dc.put(KEY, b"x")
    tmp = os.path.join(os.path.dirname(dc.path(KEY)), ".tmp-killed-writer")
    open(tmp, "wb").close()
    os.utime(tmp, (time.time() - 2 * C.STALE_TMP_SECONDS,) * 2)
    dc.prune()
    assert not os.path.exists(tmp) and os.path.exists(dc.path(KEY))


def test_cache_size_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv(C.CACHE_MAX_ENV, "12345")
    assert C.max_cache_bytes() == 12345 and C.DiskCache("/nonexistent").max_bytes == 12345
    monkeypatch.setenv(C.CACHE_MAX_ENV, "lots")
    with pytest.raises(ValueError, match=C.CACHE_MAX_ENV):
        C.max_cache_bytes()


# ---------------------------------------------------------------- loading: what may touch the cache

@pytest.fixture
def disk(tmp_path):
    dc = C.DiskCache(str(tmp_path / "cache"))
    assert dc.prepare() is None
    return dc


def _build_with(drv, disk, monkeypatch, load_code, src=None):
    """Run the loader's cache logic with cuModuleLoadData answering `load_code` for the cached cubin."""
    src = src or L.source_of_text(NO_KERNELS, None)
    jits = []

    def jit(s, target, options):
        jits.append(target)
        return 0x2222, b"fresh cubin", "log"
    monkeypatch.setattr(L, "_jit_and_load", jit)
    drv.answers["cuModuleLoadData"] = lambda cubin: (load_code, 0x1111) if cubin == b"cached cubin" else (0, 0x1111)
    return L._build(src, "sm_90", KEY, (), D._state.info, disk, None), jits


def test_a_context_error_while_loading_leaves_the_cache_alone(drv, disk, monkeypatch):
    disk.put(KEY, b"cached cubin")
    before = open(disk.path(KEY), "rb").read()
    F.record_launch(0, "scribbler", (4, 1, 1, 256, 1, 1, 0))
    with pytest.raises(ContextLost) as e:
        _build_with(drv, disk, monkeypatch, 700)
    assert "kernel 'scribbler' grid (4, 1, 1) block (256, 1, 1)" in str(e.value)
    assert "rejected the PTX" not in str(e.value)
    assert open(disk.path(KEY), "rb").read() == before


def test_out_of_memory_while_loading_leaves_the_cache_alone(drv, disk, monkeypatch):
    disk.put(KEY, b"cached cubin")
    before = open(disk.path(KEY), "rb").read()
    with pytest.raises(DriverError, match="OUT_OF_MEMORY") as e:
        _build_with(drv, disk, monkeypatch, 2)
    assert not isinstance(e.value, (ContextLost, JitError))
    assert open(disk.path(KEY), "rb").read() == before and F.dead_reason() is None


def test_an_allocation_refused_during_a_graph_capture_says_to_make_it_before(drv):
    """The driver refuses cuMemAlloc while a stream captures a CUDA graph in global mode (a GEMM's first run()
    of a K-split kind allocates its workspace): the error names the call and the code and says what to do;
    the context stays usable and nothing is marked dead."""
    drv.answers["cuMemAlloc"] = (900, 0)
    with pytest.raises(DriverError) as e:
        pf.DeviceBuffer.empty((1 << 20,), np.uint8)
    msg = str(e.value)
    assert msg.startswith(f"cuMemAlloc({1 << 20} bytes) failed: ") and "(900)" in msg, msg
    assert "before capturing" in msg and "relaxed mode" in msg and e.value.code == 900
    assert not isinstance(e.value, ContextLost) and F.dead_reason() is None
    drv.answers["cuMemAlloc"] = (2, 0)  # any other refusal keeps its own words
    with pytest.raises(DriverError, match="OUT_OF_MEMORY") as e:
        pf.DeviceBuffer.empty(16)
    assert "capturing" not in str(e.value)


def test_only_an_image_rejection_replaces_a_cached_cubin(drv, disk, monkeypatch):
    disk.put(KEY, b"cached cubin")
    lm, jits = _build_with(drv, disk, monkeypatch, 200)  # CUDA_ERROR_INVALID_IMAGE
    assert jits == ["sm_90"] and lm.origin == "jit" and lm.cubin == b"fresh cubin"
    assert disk.get(KEY)[0] == b"fresh cubin"  # replaced by rename, never deleted first


def test_a_good_cached_cubin_loads_without_jit(drv, disk, monkeypatch):
    disk.put(KEY, b"cached cubin", {"jit_log": "cached log"})
    lm, jits = _build_with(drv, disk, monkeypatch, 0)
    assert jits == [] and lm.origin == "disk" and lm.jit_log == "cached log"


def test_a_dead_context_during_jit_is_not_blamed_on_the_ptx(drv, monkeypatch):
    monkeypatch.setattr(L, "link_ptx", lambda *a: LinkResult(700, "cuLinkComplete", b"", "", ""))
    src = L.source_of_text(NO_KERNELS, None)
    with pytest.raises(ContextLost, match="the CUDA context is unusable after CUDA_ERROR_ILLEGAL_ADDRESS"):
        L.jit_link(src, "sm_90")
    F.reset_for_tests()
    monkeypatch.setattr(L, "link_ptx", lambda *a: LinkResult(2, "cuLinkAddData", b"", "", ""))
    with pytest.raises(DriverError, match="OUT_OF_MEMORY") as e:
        L.jit_link(src, "sm_90")
    assert not isinstance(e.value, JitError)
    monkeypatch.setattr(L, "link_ptx", lambda *a: LinkResult(201, "cuLinkCreate", b"", "", ""))
    with pytest.raises(DriverError, match="CUDA_ERROR_INVALID_CONTEXT") as e:
        L.jit_link(src, "sm_90")
    assert not isinstance(e.value, JitError)
    monkeypatch.setattr(L, "link_ptx", lambda *a: LinkResult(218, "cuLinkAddData", b"", "line 3; error : bad", ""))
    with pytest.raises(JitError, match="rejected the PTX"):
        L.jit_link(src, "sm_90")


# ---------------------------------------------------------------- faults

def test_a_fault_names_the_kernels_since_the_last_sync_and_kills_the_context(drv):
    F.record_launch(0, "early", (1, 1, 1, 32, 1, 1, 0))
    F.synchronized(0)  # finished: not a suspect
    F.record_launch(0, "scribbler", (8, 2, 1, 128, 1, 1, 0))
    F.record_launch(0x77, "other", (1, 1, 1, 64, 1, 1, 0))
    with pytest.raises(ContextLost) as e:
        D.check((700,), "cuMemFree")
    msg = str(e.value)
    assert "cuMemFree failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)" in msg
    assert "kernel 'scribbler' grid (8, 2, 1) block (128, 1, 1)" in msg and "stream 0x77" in msg
    assert "'early'" not in msg
    sentence = ("the CUDA context is unusable after CUDA_ERROR_ILLEGAL_ADDRESS in kernel 'scribbler' or 'other'; "
                "restart the process")
    assert msg.endswith(sentence)
    for call in (D.context, D.synchronize, lambda: L.load(NO_KERNELS), lambda: D.check((2,), "cuMemAlloc"),
                 lambda: pf.DeviceBuffer.empty(16)):
        with pytest.raises(ContextLost) as later:
            call()
        assert str(later.value) == sentence


class _NoLock:
    """A lock that must not be taken."""

    def __enter__(self):
        raise AssertionError("the launch took the kernel's lock")

    def __exit__(self, *exc):
        return False


def _attribute_launch_kernel():
    """A stand-in KernelFunction and argument blob, enough for the cuLaunchKernelEx launches."""
    fn = types.SimpleNamespace(name="attr_kernel", _func=0xF00, _lock=threading.Lock(),
                               module=types.SimpleNamespace(_handle=1))
    filled = []
    return fn, types.SimpleNamespace(fill=filled.append, addr=0xB10B), filled


@pytest.mark.parametrize("kind", ["dependent", "cluster"])
def test_attribute_launches_are_named_when_they_fail_and_remembered_for_fault_reports(drv, kind):
    """The cuLaunchKernelEx launches (programmatic dependent, cluster) go through one launch: the values packed,
    a failure raised with the kernel's name and shape, a success remembered like a plain launch."""
    from ptxforge.runtime.cluster import ClusterLaunch
    from ptxforge.runtime.dependent import DependentLaunch, programmatic_attribute
    from ptxforge.runtime.launch_ex import launch_config
    for name in ("CUlaunchConfig", "CUlaunchAttribute", "CUlaunchAttributeID"):
        setattr(drv, name, getattr(real, name))
    fn, blob, filled = _attribute_launch_kernel()
    cfg, stream = (4, 1, 1, 128, 1, 1, 1024), 0x55
    if kind == "dependent":
        launch = DependentLaunch(fn, cfg, stream)
        what = "programmatic dependent launch"
    else:
        launch = ClusterLaunch(fn, launch_config(drv, cfg, stream, [programmatic_attribute(drv)]), (2, 1, 1), cfg,
                               stream)
        what = "clusters of (2, 1, 1)"
    assert launch.config.gridDimX == 4 and launch.config.sharedMemBytes == 1024 and launch.config.numAttrs == 1
    drv.answers["cuLaunchKernelEx"] = (1,)  # CUDA_ERROR_INVALID_VALUE
    with pytest.raises(DriverError) as e:
        launch.launch(blob, (1, 2, 3))
    assert f"cuLaunchKernelEx of 'attr_kernel' ({what}) with grid (4, 1, 1), block (128, 1, 1)" in str(e.value)
    assert F.pending() == []  # a launch that failed is no suspect of a later fault
    drv.answers["cuLaunchKernelEx"] = (0,)
    launch.launch(blob, (4, 5, 6))
    assert filled == [(1, 2, 3), (4, 5, 6)]
    assert [c for c in drv.calls if c[0] == "cuLaunchKernelEx"][-1][1][1:] == (0xF00, 0xB10B, 0)
    assert F.pending() == [(stream, 1, [("attr_kernel", cfg)])]
    # a block packed once (a prepared launch's own) is launched as it is: not refilled, and without taking the
    # kernel's lock (which guards the blocks that are refilled per launch)
    fn._lock = _NoLock()
    launch.launch(blob)
    assert filled == [(1, 2, 3), (4, 5, 6)]
    assert [c for c in drv.calls if c[0] == "cuLaunchKernelEx"][-1][1][1:] == (0xF00, 0xB10B, 0)
    assert F.pending() == [(stream, 2, [("attr_kernel", cfg)] * 2)]


def test_a_fault_with_nothing_pending_still_marks_the_context(drv):
    with pytest.raises(ContextLost, match=r"^cuCtxSynchronize failed: CUDA_ERROR_MISALIGNED_ADDRESS"):
        D.check((716,), "cuCtxSynchronize")
    assert F.dead_reason() == "the CUDA context is unusable after CUDA_ERROR_MISALIGNED_ADDRESS; restart the process"


def test_ordinary_errors_do_not_kill_the_context(drv):
    for code in (1, 2, 200, 701):
        with pytest.raises(DriverError) as e:
            D.check((code,), "cuSomething")
        assert not isinstance(e.value, ContextLost)
    assert F.dead_reason() is None


def test_remembered_launches_are_bounded(drv):
    for i in range(100):
        F.record_launch(0, f"k{i}", (1, 1, 1, 1, 1, 1, 0))
    (stream, count, launches), = F.pending()
    assert count == 100 and len(launches) == F.REMEMBERED and launches[-1][0] == "k99"
    with pytest.raises(ContextLost, match=r"the last 8 of 100"):
        D.check((719,), "cuStreamSynchronize")


# ---------------------------------------------------------------- contexts

def test_entry_points_make_ours_current_and_give_the_callers_back(drv):
    drv.current = 0xF00  # another library's context
    prev = D.enter()
    assert drv.current == OURS and int(prev) == 0xF00
    D.leave(prev)
    assert drv.current == 0xF00
    buf = pf.DeviceBuffer.empty(4, np.float32)  # an allocation is an entry point too
    assert drv.current == 0xF00
    assert ("cuCtxSetCurrent", (OURS,)) in drv.calls and ("cuMemAlloc", (16,)) in drv.calls
    del buf


def test_the_first_entry_under_another_context_gives_it_back(drv, monkeypatch):
    """The first entry point initializes the driver state (the primary context retained) and still gives the
    caller's context back: the initialization itself makes no context current."""
    monkeypatch.setattr(D, "_state", None)
    drv.answers.update({"cuDeviceGetCount": (0, 1), "cuDevicePrimaryCtxRetain": (0, OURS),
                        "cuDeviceGetName": (0, b"stand-in\0"), "cuDeviceGetAttribute": (0, 9)})
    drv.current = 0xF00
    prev = D.enter()
    assert D._state is not None and D._state.handle == OURS
    assert drv.current == OURS and int(prev) == 0xF00
    D.leave(prev)
    assert drv.current == 0xF00
    monkeypatch.setattr(D, "_state", None)
    assert D.device_info().name == "stand-in" and drv.current == 0xF00
    # a foreign array checked first of all: the caller's context given back; on a thread with none, the
    # query made with ours current (as every later one on such a thread is)
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE))
    _in_context(drv)
    for before, during in ((0xF00, 0xF00), (0, OURS)):
        monkeypatch.setattr(D, "_state", None)
        drv.current = before
        drv.contexts.clear()
        drv.calls.clear()
        D.check_pointer(0x7000_0000, "x")
        asked = [ctx for (name, _), ctx in zip([c for c in drv.calls if c[0].startswith("cu") and not
                                                c[0].startswith("cuCtx")], drv.contexts)
                 if name == "cuPointerGetAttributes"]
        assert D._state is not None and asked == [during] and drv.current == during


class _Encoded:
    """What cuTensorMapEncodeTiled returns: an object over 128 bytes."""

    def __init__(self):
        import ctypes
        self.buf = ctypes.create_string_buffer(128)

    def getPtr(self):
        import ctypes
        return ctypes.addressof(self.buf)


def _in_context(drv):
    """Record, beside each driver call, the context current when it was made: drv.contexts[i] is that of
    drv.calls[i]."""
    drv.contexts = []
    answer = drv._answer

    def recorded(name, default, *args):
        drv.contexts.append(drv.current)
        return answer(name, default, *args)
    drv._answer = recorded


def test_the_runtime_s_one_time_queries_give_the_callers_context_back(drv, monkeypatch):
    """Encoding a tensor map, timing a region, checking a cluster launch and its occupancy, and raising a
    kernel's shared memory limit run in ptxforge's context and leave the caller's current."""
    from ptxforge.runtime import EventTimer, TensorMap
    from ptxforge.runtime.cluster import cluster_launch_config
    _in_context(drv)
    drv.answers.update({"cuTensorMapEncodeTiled": lambda *a: (0, _Encoded()), "cuEventCreate": (0, 0xE),
                        "cuEventElapsedTime": (0, 0.5), "cuOccupancyMaxPotentialClusterSize": (0, 8),
                        "cuOccupancyMaxActiveClusters": (0, 66), "cuDeviceGetAttribute": (0, 1),
                        "cuMemAlloc": (0, 0x7000_0000)})
    fn = _saxpy_on_the_stand_in(drv, monkeypatch)
    drv.answers["cuFuncGetAttribute"] = (0, 0)  # (no cluster shape required)
    buf = pf.DeviceBuffer.empty((64, 64), np.int8)
    for step in (lambda: TensorMap.from_array(buf, (64, 64)).encode(),
                 lambda: EventTimer().__enter__().__exit__(None, None, None),
                 lambda: cluster_launch_config(fn, 4, 256, 2).max_active_clusters(),
                 lambda: fn._allow_dynamic_shared(100_000)):
        drv.current = 0xF00
        drv.calls.clear()
        drv.contexts.clear()
        step()
        assert drv.current == 0xF00
        made = [name for name, _ in drv.calls if name.startswith("cu") and not name.startswith("cuCtx")]
        assert made and set(drv.contexts) == {OURS}, (made, drv.contexts)


def test_finalizers_and_stream_close_free_in_ours_and_give_the_callers_context_back(drv):
    """A DeviceBuffer or Stream collected (its finalizer) or closed while another library's context is
    current: the memory or stream is released in ptxforge's context, where it was made, and the caller's
    context is current after; a finalizer after a fault hands nothing to the driver."""
    import gc
    _in_context(drv)
    drv.answers.update({"cuMemAlloc": (0, 0x7000_0000), "cuStreamCreate": (0, 0x5EE)})
    drv.current = 0xF00
    buf, s1, s2 = pf.DeviceBuffer.empty(64, np.float32), pf.Stream(), pf.Stream()
    drv.calls.clear()
    drv.contexts.clear()
    del buf, s1
    gc.collect()
    s2.close()
    released = [(name, ctx) for (name, _), ctx in zip([c for c in drv.calls if not c[0].startswith("cuCtx")],
                                                      drv.contexts)]
    assert sorted(released) == [("cuMemFree", OURS), ("cuStreamDestroy", OURS), ("cuStreamDestroy", OURS)]
    assert drv.current == 0xF00
    buf = pf.DeviceBuffer.empty(64, np.float32)
    F._dead = "CUDA_ERROR_ILLEGAL_ADDRESS in kernel 'k'"
    drv.calls.clear()
    del buf
    gc.collect()
    assert "cuMemFree" not in [name for name, _ in drv.calls] and drv.current == 0xF00


def _hopper_on_the_stand_in(drv, monkeypatch, **answers):
    """The stand-in driver set up for the Hopper GEMM's host path (skipped without ptxas, which assembles the
    kernels): its kernel and plan caches emptied, the JIT and the disk cache stood in for, and the answers a
    kernel load, its parameter check, tensor map encoding and the occupancy queries need, with memory in
    ptxforge's context; then `answers` (driver function name -> answer) on top."""
    import importlib
    from ptxforge.assembler import find_tool
    from ptxforge.schedules.hopper import plan as hplan
    if not find_tool("ptxas"):
        pytest.skip("needs ptxas")
    monkeypatch.setattr(hplan, "_kernels", {})
    monkeypatch.setattr(importlib.import_module("ptxforge.schedules.hopper.run"), "_plans", {})
    _saxpy_on_the_stand_in(drv, monkeypatch)
    max_threads = real.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
    drv.answers.update({
        "cuPointerGetAttributes": pointer_attributes(OURS, 0, int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)),
        "cuModuleLoadData": (0, 0x4444), "cuFuncGetParamInfo": (500, 0, 0),
        "cuFuncGetAttribute": lambda attr, h: (0, 1024 if attr == max_threads else 0),
        "cuTensorMapEncodeTiled": lambda *a: (0, _Encoded()), "cuDeviceGetAttribute": (0, 1),
        "cuOccupancyMaxPotentialClusterSize": (0, 8), "cuOccupancyMaxActiveClusters": (0, 66)})
    drv.answers.update(answers)


def test_a_careful_hopper_call_runs_in_ours_and_gives_the_callers_context_back(drv, monkeypatch):
    """HopperGemm.run's careful path (load, tensor maps, occupancy, launch) makes every driver call in
    ptxforge's context, launches once (not a failed launch in the caller's and a second in ours), and leaves
    the caller's context current."""
    from ptxforge.schedules.hopper import HopperGemm
    _hopper_on_the_stand_in(drv, monkeypatch, cuLaunchKernel=lambda *a: (0,) if drv.current == OURS else (201,),
                            cuLaunchKernelEx=lambda *a: (0,) if drv.current == OURS else (201,))
    _in_context(drv)
    a, b = _ForeignArray((64, 64), "|i1", 0x6000_0000), _ForeignArray((64, 64), "|i1", 0x6800_0000)
    c = _ForeignArray((64, 64), "<i4")
    drv.current = 0xF00
    drv.calls.clear()
    HopperGemm("s8").run(a, b, c)
    assert drv.current == 0xF00
    names = [name for name, _ in drv.calls]
    launches = [n for n in names if n in ("cuLaunchKernel", "cuLaunchKernelEx")]
    assert len(launches) == 1 and "cuTensorMapEncodeTiled" in names and "cuModuleLoadData" in names
    outside = {name for name, ctx in zip((n for n in names if n.startswith("cu") and not n.startswith("cuCtx")),
                                         drv.contexts) if ctx != OURS}
    assert outside == set(), outside


def test_a_hopper_kernel_on_another_gpu_is_refused_by_its_target_before_any_load(drv, monkeypatch):
    """The Hopper GEMM loads a ptxas cubin (not through load(), whose target check it would bypass): on a GPU
    other than compute capability 9.0 the run is a TargetError naming sm_90a and the GPU, before any module
    load or launch (the driver alone would say "no kernel image")."""
    import dataclasses
    from ptxforge.errors import TargetError
    from ptxforge.runtime import driver as D
    from ptxforge.schedules.hopper import HopperGemm
    _hopper_on_the_stand_in(drv, monkeypatch)
    monkeypatch.setattr(D._state, "info", dataclasses.replace(D._state.info, compute_capability=(8, 9)))
    a, b = _ForeignArray((64, 64), "|i1", 0x6000_0000), _ForeignArray((64, 64), "|i1", 0x6800_0000)
    drv.calls.clear()
    with pytest.raises(TargetError, match=r"runs on H100/H200 only: the module targets sm_90a, but the GPU is sm_89 "
                                          r".*for_shape\(\) of Int8Gemm / Int4Gemm picks the mma.sync schedule"):
        HopperGemm("s8").run(a, b, _ForeignArray((64, 64), "<i4"))
    names = [name for name, _ in drv.calls]
    assert "cuModuleLoadData" not in names and not {"cuLaunchKernel", "cuLaunchKernelEx"} & set(names)


def test_a_c_the_tma_store_cannot_take_is_stored_by_the_registers_kernel(drv, monkeypatch):
    """A small-K large problem stores C through TMA (a tensor map: 16-byte aligned C).  A C 8 bytes past that
    (a slice) is launched on with the same problem's registers-epilogue kernel, made at its first launch and
    kept beside the TMA one: each call one launch, careful or kept, of the kernel that suits C's address; C at 4
    bytes past is refused by name before any launch."""
    from ptxforge.schedules.hopper.tuning import choose_hopper
    from ptxforge.errors import ValidationError
    modules, launched = [], []
    _hopper_on_the_stand_in(
        drv, monkeypatch, cuModuleLoadData=lambda cubin: (modules.append(cubin), (0, 0x4400 + len(modules)))[1],
        cuModuleGetFunction=lambda mod, name: (0, int(mod) + 0x10000),  # one function handle per module
        cuLaunchKernel=lambda f, *a: (launched.append(int(f)), (0,))[1],
        cuLaunchKernelEx=lambda config, f, *a: (launched.append(int(f)), (0,))[1])
    m, n, k = 512, 64, 64
    g = choose_hopper(m, n, k, "s8")
    assert g.epilogue == "tma"
    a, b = _ForeignArray((m, k), "|i1", 0x6000_0000), _ForeignArray((n, k), "|i1", 0x6800_0000)
    c, sliced, off4 = (_ForeignArray((m, n), "<i4") for _ in range(3))
    sliced.__cuda_array_interface__["data"] = (0x7000_0008, False)
    off4.__cuda_array_interface__["data"] = (0x7000_0004, False)
    g.run(a, b, c)  # (the careful path: the stand-in's arrays are not read fast)
    assert len(modules) == 1 and len(launched) == 1
    tma_fn = launched[-1]
    g.run(a, b, sliced)
    assert launched[-1] != tma_fn and len(modules) == 2 and len(launched) == 2
    reg_fn = launched[-1]
    with pytest.raises(ValidationError, match="C at 0x70000004 is not 8-byte aligned, as the kernel's 8-byte stores"):
        g.run(a, b, off4)
    assert len(launched) == 2
    plan = g.plan(m, n, k)  # a prepared plan: the same choice per call, the registers plan made once
    names = plan.kernel_name_for(0x7000_0000), plan.kernel_name_for(0x7000_0008)
    assert names[0] == plan.kernel_cfg.kernel_name and names[1] != names[0] and plan._registers is None
    plan(a, b, c)
    assert plan.kernel_cfg.epilogue == "tma" and plan._registers is None and launched[-1] == tma_fn
    plan(a, b, sliced)
    made = plan._registers
    assert made.kernel_cfg.epilogue == "registers" and not made.kernel_cfg.wide_c and made.splits == plan.splits
    assert made.kernel_cfg.kernel_name == names[1]
    plan(a, b, sliced)
    plan(a, b, c)
    assert launched[-3:] == [reg_fn, reg_fn, tma_fn] and plan._registers is made and len(modules) == 2
    with pytest.raises(ValidationError, match="C at 0x70000004 is not 8-byte aligned"):
        plan(a, b, off4)


@pytest.mark.parametrize("kw,splits,launches", [
    (dict(operand="s8"), 1, ["gemm"]),
    (dict(operand="s4", block_n=256, block_k_bytes=256, stages=2, biased=True), 1, ["sums", "gemm"]),
    (dict(operand="s8", split_reduce="launch"), 2, ["gemm", "reduce"])])
def test_a_repeated_launch_makes_every_launch_of_its_plan(drv, monkeypatch, kw, splits, launches):
    """A plan keeps its argument blocks per address triple, and a repeated call on the same addresses goes
    straight to the kept block only where the GEMM is the plan's one launch: the biased s4 path still sums
    the rows first and a K split by a second launch still reduces after, on every call."""
    from ptxforge.schedules.hopper import HopperGemm
    from ptxforge.schedules.hopper import plan as hplan
    names, launched = {}, []
    _hopper_on_the_stand_in(
        drv, monkeypatch, cuModuleLoadData=lambda cubin: (0, 0x4400 + len(names)),
        cuModuleGetFunction=lambda mod, name: (names.setdefault(int(mod) + 0x10000, name.decode()),
                                               (0, int(mod) + 0x10000))[1],
        cuMemAlloc=(0, 0x6000_0000), cuMemsetD8=(0,), cuMemsetD8Async=(0,),
        cuLaunchKernel=lambda f, *a: (launched.append(names[int(f)]), (0,))[1],
        cuLaunchKernelEx=lambda config, f, *a: (launched.append(names[int(f)]), (0,))[1])
    drv.current = OURS
    operand = kw.pop("operand")
    plan = hplan.HopperPlan(HopperGemm(operand, **kw), 256, 256, 1024, sms=132, splits=splits)

    def kind(name):
        return "sums" if name == "biased_row_sums" else "reduce" if name.startswith("splitk_reduce") else "gemm"
    for _ in range(3):
        launched.clear()
        plan.launch_pointers(0x7000_0000, 0x7100_0000, 0x7200_0000)
        assert [kind(x) for x in launched] == launches
    assert len(plan._blobs) == 1  # packed once, kept


def test_when_ours_is_current_an_entry_costs_one_query(drv):
    drv.current = OURS
    drv.calls.clear()
    assert D.enter() is None
    assert drv.calls == [("cuCtxGetCurrent", ())]


def test_foreign_pointers_from_another_context_or_device_are_refused(drv):
    dev_mem = int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, dev_mem)
    D.check_pointer(0x7000_0000, "x")
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(0xBAD, 0, dev_mem)
    with pytest.raises(LaunchError, match="belongs to another CUDA context"):
        D.check_pointer(0x7000_0000, "argument 0 (x)")
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(0, 1, dev_mem)
    with pytest.raises(LaunchError, match="memory of device 1; ptxforge launches on device 0"):
        D.check_pointer(0x7000_0000, "x")
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(0, -2, 0)
    with pytest.raises(LaunchError, match="not memory the CUDA driver knows"):
        D.check_pointer(0x7000_0000, "x")
    drv.answers["cuPointerGetAttributes"] = lambda n, attrs, ptr: (1, None)
    with pytest.raises(LaunchError, match="not memory the CUDA driver knows"):
        D.check_pointer(0x1000, "x")


class _ForeignArray:
    """A __cuda_array_interface__ object over an address the stand-in driver places where a test says."""

    def __init__(self, shape, typestr, ptr=0x7000_0000):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr, "version": 3}


def test_gemm_schedules_refuse_operands_of_another_context_or_device(drv):
    """The schedules' careful paths ask the driver where a foreign operand lives before any tensor map or
    launch is made from its address (a kernel reading another device's memory faults the context)."""
    from ptxforge.schedules.gemm import plan as gemm_plan
    from ptxforge.schedules.hopper import HopperGemm

    dev_mem = int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)
    a, b, c = _ForeignArray((64, 64), "|i1"), _ForeignArray((64, 64), "|i1"), _ForeignArray((64, 64), "<i4")
    for answer, says in ((pointer_attributes(0xBAD, 0, dev_mem), "A \\(_ForeignArray\\): .* belongs to another CUDA context"),
                         (pointer_attributes(0, 1, dev_mem), "A \\(_ForeignArray\\): .* memory of device 1; ptxforge "
                                                 "launches on device 0")):
        drv.answers["cuPointerGetAttributes"] = answer
        with pytest.raises(LaunchError, match=says):
            HopperGemm("s8").run(a, b, c)
        with pytest.raises(LaunchError, match=says):
            gemm_plan._read(a, "A")
    assert not [name for name, _ in drv.calls if name in ("cuTensorMapEncodeTiled", "cuLaunchKernelEx")]


def test_a_read_only_c_is_refused_and_read_only_operands_are_read(drv):
    """An array interface that marks its memory read-only may be A or B (the GEMMs only read them), never C."""
    from ptxforge.errors import ValidationError
    from ptxforge.schedules.gemm import plan as gemm_plan
    from ptxforge.schedules.hopper import operands as hops
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE))
    ro = _ForeignArray((64, 64), "<i4")
    ro.__cuda_array_interface__["data"] = (0x7000_0000, True)
    assert hops.gpu_view(ro, "A")[0] == 0x7000_0000 and gemm_plan._read(ro, "B")[0] == 0x7000_0000
    for read in (lambda: hops.gpu_view(ro, "C"), lambda: gemm_plan._read(ro, "C")):
        with pytest.raises((ValidationError, LaunchError), match=r"C \(_ForeignArray\) is marked read-only"):
            read()


def test_a_tensor_map_over_another_context_s_memory_is_refused(drv):
    """A tensor map made from a foreign array asks the driver where the array lives before it is encoded, as a
    launch does: a map over another context's (or device's) memory would send the TMA there."""
    from ptxforge.runtime import TensorMap
    dev_mem = int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)
    for answer, says in ((pointer_attributes(0xBAD, 0, dev_mem), "another CUDA context"), (pointer_attributes(0, 1, dev_mem), "device 1")):
        drv.answers["cuPointerGetAttributes"] = answer
        with pytest.raises(LaunchError, match=r"the array of a tensor map \(_ForeignArray\): .*" + says):
            TensorMap.from_array(_ForeignArray((64, 64), "|i1"), (64, 64)).encode()


def test_a_tensor_map_reaching_past_its_allocation_is_refused(drv):
    """A tensor map over a foreign array is held to the allocation that holds its base, as a launch is: 64 x 64
    bytes fit a 4 KB allocation and are encoded; a 65th row would send the TMA past it."""
    from ptxforge.runtime import TensorMap
    dev_mem = int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, dev_mem, 0x7000_0000, 4096)
    drv.answers["cuTensorMapEncodeTiled"] = lambda *a: (0, object())
    assert TensorMap.from_array(_ForeignArray((64, 64), "|i1"), (64, 64))._byte_span() == (0, 4096)
    with pytest.raises(LaunchError, match=r"the array of a tensor map \(_ForeignArray\): .* past the allocation"):
        TensorMap.from_array(_ForeignArray((65, 64), "|i1"), (64, 64)).encode()


def test_a_freed_device_buffer_is_never_read_fast(drv):
    """The schedules' fast reader reads a DeviceBuffer's address without a check; once freed (address 0) it
    hands the buffer to the careful paths, which refuse it by name instead of launching on address 0."""
    from ptxforge.schedules import operands
    from ptxforge.schedules.gemm import plan as gemm_plan
    from ptxforge.schedules.hopper import operands as hops
    drv.answers["cuMemAlloc"] = (0, 0x7000_0000)
    buf = pf.DeviceBuffer.empty((64, 64), np.int8)
    assert operands._reader.read(buf) == (0x7000_0000, (64, 64), np.dtype(np.int8), None)
    assert gemm_plan._read(buf, "A")[0] == 0x7000_0000
    buf.free()
    assert operands._reader.read(buf) is None
    for read in (lambda: gemm_plan._read(buf, "A"), lambda: hops.gpu_view(buf, "A")):
        with pytest.raises(LaunchError, match="this DeviceBuffer was freed"):
            read()


def test_which_producer_streams_a_launch_waits_for():
    from ptxforge.runtime.arrays import must_wait
    assert not must_wait(None, 0) and not must_wait(None, 0xABC)  # no stream named (torch: interface v2)
    assert not must_wait(1, 0) and not must_wait(2, 0)  # the default streams, before the legacy one
    assert not must_wait(0xABC, 0xABC)
    assert must_wait(0xABC, 0) and must_wait(1, 0xABC) and must_wait(2, 0xABC) and must_wait(0xDEF, 0xABC)


def test_hopper_run_orders_its_launch_after_an_operands_producer_stream(drv):
    """The careful path of HopperGemm.run collects the producer streams its launch must wait for and
    waits (an event recorded on each, waited on by the launch stream) before the first launch call."""
    from ptxforge.schedules.hopper import operands as hops
    from ptxforge.schedules.hopper import plan as hplan
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE))

    class OnStream(_ForeignArray):
        def __init__(self, shape, typestr, stream):
            super().__init__(shape, typestr)
            self.__cuda_array_interface__ = dict(self.__cuda_array_interface__, stream=stream)
    waits = []
    hops.gpu_view(OnStream((64, 64), "|i1", 0xABC), "A", 0, waits)
    hops.gpu_view(OnStream((64, 64), "|i1", 1), "B", 0, waits)
    hops.gpu_view(_ForeignArray((64, 64), "<i4"), "C", 0, waits)
    assert waits == [0xABC]

    class Launches:
        stream = 0x5EE

        def launch_pointers(self, *ptrs):
            drv.calls.append(("launch", ptrs))
    p = object.__new__(hplan.Plan)
    p.plan, p._ptrs, p._waits = Launches(), (1, 2, 3), [0xABC]
    drv.calls.clear()
    p.launch()
    names = [name for name, _ in drv.calls]
    assert "cuEventRecord" in names and "cuStreamWaitEvent" in names
    assert names.index("cuStreamWaitEvent") < names.index("launch")
    assert dict(drv.calls)["cuStreamWaitEvent"][0] == 0x5EE


# ---------------------------------------------------------------- lifetimes

class _Fn:
    """The parts of a KernelFunction a BoundLaunch uses."""

    def __init__(self, params):
        self.name = "k"
        self.layout = layout(params)
        self.module = types.SimpleNamespace(_handle=1)
        self._func = 0xF

    _check_loaded = K.KernelFunction._check_loaded


def _ptr_params():
    k = pf.KernelBuilder("k", target="sm_80")
    k.param_ptr("x", f32)
    return k.params


def test_a_bound_launch_keeps_its_buffers_and_refuses_after_close(drv):
    fn = _Fn(_ptr_params())
    drv.answers["cuMemAlloc"] = (0, 0x5000)
    drv.answers["cuLaunchKernel"] = (0,)
    buf = pf.DeviceBuffer.empty(64, np.float32)
    r = resolve(fn.layout, (buf,), "k")
    bl = K.BoundLaunch(fn, (1, 1, 1, 32, 1, 1, 0), 0, r, [])
    import weakref
    ref = weakref.ref(buf)
    del buf, r
    assert ref() is not None  # the launch holds it: its memory cannot be reused under it
    bl.launch()
    assert [c for c in drv.calls if c[0] == "cuLaunchKernel"]
    ref().free()
    with pytest.raises(LaunchError, match="has been freed"):
        bl.launch()
    bl.close()
    with pytest.raises(LaunchError, match="was closed"):
        bl.launch()
    with pytest.raises(LaunchError, match="was closed"):
        bl.copy_back()


def test_a_bound_launch_of_an_unloaded_module_refuses(drv):
    fn = _Fn(_ptr_params())
    drv.answers["cuLaunchKernel"] = (0,)
    bl = K.BoundLaunch(fn, (1, 1, 1, 32, 1, 1, 0), 0, resolve(fn.layout, (0,), "k"), [])
    fn.module._handle = None
    with pytest.raises(LaunchError, match="unloaded"):
        bl.launch()


def test_unload_leaves_the_in_process_cache(drv, monkeypatch):
    monkeypatch.setattr(L, "_jit_and_load", lambda *a: (0x3333, b"cubin", ""))
    monkeypatch.setattr(C, "disk_cache", lambda: None)
    lm = L.load(NO_KERNELS)
    assert L.load(NO_KERNELS) is lm
    lm.unload()
    assert not lm.loaded and ("cuModuleUnload", (0x3333,)) in drv.calls
    again = L.load(NO_KERNELS)
    assert again is not lm and again.loaded


def test_concurrent_first_loads_jit_once(drv, monkeypatch):
    jits = []

    def slow_jit(*a):
        jits.append(threading.get_ident())
        time.sleep(0.05)
        return 0x4444 + len(jits), b"cubin", ""
    monkeypatch.setattr(L, "_jit_and_load", slow_jit)
    monkeypatch.setattr(C, "disk_cache", lambda: None)
    got, barrier = [], threading.Barrier(8)

    def worker():
        barrier.wait()
        got.append(L.load(NO_KERNELS))
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(jits) == 1 and len(got) == 8 and all(m is got[0] for m in got)
    assert not [c for c in drv.calls if c[0] == "cuModuleUnload"]


# ---------------------------------------------------------------- synchronize with a timeout, stream query

def test_stream_query_does_not_wait(drv):
    drv.answers["cuStreamQuery"] = (600,)  # CUDA_ERROR_NOT_READY
    assert pf.runtime.streams.query(5) is False
    drv.answers["cuStreamQuery"] = (0,)
    F.record_launch(5, "k", (1, 1, 1, 1, 1, 1, 0))
    assert pf.runtime.streams.query(5) is True and F.pending() == []
    drv.answers["cuStreamQuery"] = (700,)
    with pytest.raises(ContextLost):
        pf.runtime.streams.query(5)


def test_stream_synchronize_times_out_naming_the_kernels(drv):
    drv.answers["cuStreamQuery"] = (600,)
    F.record_launch(9, "spinner", (2, 1, 1, 64, 1, 1, 0))
    t0 = time.monotonic()
    with pytest.raises(SyncTimeout, match=r"stream 0x9 did not finish within 0.05 s(.|\n)*kernel 'spinner'"):
        pf.runtime.streams.synchronize_stream(9, timeout=0.05)
    assert time.monotonic() - t0 < 2
    assert isinstance(SyncTimeout("x"), TimeoutError)


def test_device_synchronize_times_out(drv):
    gate = threading.Event()
    drv.answers["cuCtxSynchronize"] = lambda: (gate.wait(5), (0,))[1]
    F.record_launch(0, "hung", (1, 1, 1, 1, 1, 1, 0))
    with pytest.raises(SyncTimeout, match=r"within 0.05 s(.|\n)*kernel 'hung'"):
        pf.synchronize(timeout=0.05)
    gate.set()
    drv.answers["cuCtxSynchronize"] = (0,)
    pf.synchronize(timeout=1)
    assert F.pending() == []


# ---------------------------------------------------------------- foreign arrays

def fake_cai(ptr=0x7000_0000, shape=(16,), typestr="<f4", readonly=False):
    class GpuArray:
        __cuda_array_interface__ = {"data": (ptr, readonly), "shape": shape, "typestr": typestr,
                                    "strides": None, "version": 3}
    return GpuArray()


def _lay():
    return layout(_ptr_params())


def test_big_endian_arrays_are_refused():
    with pytest.raises(LaunchError, match="big-endian"):
        resolve(_lay(), (np.zeros(4, ">f4"),), "k")
    with pytest.raises(LaunchError, match="big-endian"):
        resolve(_lay(), (fake_cai(typestr=">f4"),), "k")
    k = pf.KernelBuilder("be", target="sm_80")
    x = k.param_ptr("x", f32)
    k.st(x, k.ld(x, type=f32))
    with pytest.raises(LaunchError, match="big-endian"):
        pf.interp.run(k.finish(), grid=1, block=1, args=[np.zeros(4, ">f4")])


def test_read_only_cuda_arrays_are_refused_for_pointer_parameters():
    with pytest.raises(LaunchError, match="read-only"):
        resolve(_lay(), (fake_cai(readonly=True),), "k")
    assert resolve(_lay(), (fake_cai(readonly=False),), "k").values == [0x7000_0000]


def test_foreign_pointers_must_be_aligned_to_the_element():
    with pytest.raises(LaunchError, match="not aligned to the 4 bytes of .f32"):
        resolve(_lay(), (fake_cai(ptr=0x7000_0002),), "k")


def test_dlpack_device_ids_are_checked():
    from ptxforge.runtime.arrays import DeviceView, Elem
    lay = _lay()
    from ptxforge.runtime import launch as LA
    view = DeviceView(0x7000_0000, (4,), None, Elem("f", 32), None, 1, "DLPack")
    with pytest.raises(LaunchError, match="on CUDA device 1; the kernel runs on device 0"):
        LA._check_view(lay.specs[0], view, "k", "OnDevice1 (DLPack)", 0, None)
    LA._check_view(lay.specs[0], view, "k", "x", 1, None)


def test_foreign_arrays_are_asked_of_the_driver():
    seen = []
    resolve(_lay(), (fake_cai(),), "k", check_pointer=lambda p, what, span: seen.append((p, what, span)))
    assert seen == [(0x7000_0000, "argument 0 (x) of kernel 'k' (GpuArray (__cuda_array_interface__))", (0, 64))]


def test_a_foreign_array_larger_than_its_allocation_is_refused(drv):
    """An array interface may describe more memory than its allocation holds (a view made with a wrong shape, an
    offset slice of a buffer): the launch or the GEMM would read and write past it.  The driver says which
    allocation holds the address (its range); the elements must lie inside it."""
    dev_mem = int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, dev_mem, 0x7000_0000, 256)
    D.check_pointer(0x7000_0000, "x", (0, 256))
    D.check_pointer(0x7000_0080, "x", (-128, 128))  # a negative stride reaching back to the allocation's start
    for ptr, span in ((0x7000_0000, (0, 260)), (0x7000_0080, (0, 129)), (0x7000_0000, (-4, 16))):
        with pytest.raises(LaunchError, match=r"x: its elements cover bytes .* past the allocation that holds"):
            D.check_pointer(ptr, "x", span)
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, dev_mem)  # no range known: nothing to hold it to
    D.check_pointer(0x7000_0000, "x", (0, 1 << 40))
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, dev_mem, 0x7000_0000, 64)
    with pytest.raises(LaunchError, match=r"argument 0 \(x\) of kernel 'k' .* past the allocation"):
        resolve(_lay(), (fake_cai(shape=(17,)),), "k", check_pointer=D.check_pointer)
    resolve(_lay(), (fake_cai(shape=(16,)),), "k", check_pointer=D.check_pointer)


@pytest.mark.parametrize("shape,strides", [((0,), (0,)), ((0, 4), (0, 0)), ((3, 0), (0, 4))])
def test_zero_size_numpy_arrays_are_accepted(shape, strides):
    a = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), shape=shape, strides=strides)
    r = resolve(_lay(), (np.array(a),), "k")
    assert len(r.transfers) == 1
    r = resolve(_lay(), (a,), "k")
    assert len(r.transfers) == 1


# ---------------------------------------------------------------- foreign PTX parameters

SPELLINGS = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(
    .param .u64 .ptr .global .align 8 k_param_0,
    .param .u64 .ptr .align 1 k_param_1,
    .param .u32 a[4],
    .param .align 64 .b8 t[128],
    .param .align 8 .b8 s[24],
    .param .f32 f,
    .param .b16 h[3],
    .param .u64 raw
)
.maxntid 128, 1, 1
{
    ret;
}
"""


def test_every_parameter_spelling_is_read():
    (e,) = L.parse_entries(SPELLINGS)
    lay = layout(e.params)
    got = [(s.name, s.kind, s.offset, s.size) for s in lay.specs]
    assert got == [("k_param_0", "pointer", 0, 8), ("k_param_1", "pointer", 8, 8), ("a", "bytes", 16, 16),
                   ("t", "bytes", 64, 128), ("s", "bytes", 192, 24), ("f", "float", 216, 4),
                   ("h", "bytes", 220, 6), ("raw", "address", 232, 8)]
    assert e.block_limit == ("maxntid", (128, 1, 1))


@pytest.mark.parametrize("decl,match", [(".param .u64 .ptr p[", "cannot read"), (".param p", "needs a type"),
                                        (".param .u32 .u64 p", "two types"), (".param .u32 .ptr p", "64 bits"),
                                        (".param .q7 p", "does not know")])
def test_unreadable_parameters_are_errors_naming_them(decl, match):
    with pytest.raises(LaunchError, match=match):
        L.parse_param(decl, "k")


def test_parameter_layout_is_cross_checked_with_the_driver(drv):
    (e,) = L.parse_entries(SPELLINGS)
    lay = layout(e.params)
    truth = [(s.offset, s.size) for s in lay.specs]
    drv.answers["cuFuncGetParamInfo"] = lambda f, i: (0, *truth[i]) if i < len(truth) else (1, 0, 0)
    K.check_param_layout("k", 0xF, lay)
    wrong = list(truth)
    wrong[2] = (16, 4)  # the driver's answer for a `.u32 a` read as 16 bytes
    drv.answers["cuFuncGetParamInfo"] = lambda f, i: (0, *wrong[i]) if i < len(wrong) else (1, 0, 0)
    with pytest.raises(LaunchError, match=r"parameter 2 \(a: .b8\[16\]\) is 16 bytes as ptxforge read it, but 4 bytes "
                                          r"to the driver"):
        K.check_param_layout("k", 0xF, lay)
    moved = list(truth)
    moved[3] = (48, 128)  # the driver's own offset for `.align 64 .b8 t[128]` (the H200 says 48): not a mismatch
    drv.answers["cuFuncGetParamInfo"] = lambda f, i: (0, *moved[i]) if i < len(moved) else (1, 0, 0)
    K.check_param_layout("k", 0xF, lay)
    drv.answers["cuFuncGetParamInfo"] = lambda f, i: (0, *truth[i]) if i < len(truth) else (0, 240, 8)
    with pytest.raises(LaunchError, match="more parameters than the 8"):
        K.check_param_layout("k", 0xF, lay)
    drv.answers["cuFuncGetParamInfo"] = lambda f, i: (801, 0, 0)  # CUDA_ERROR_NOT_SUPPORTED: not checked
    K.check_param_layout("k", 0xF, lay)


# ---------------------------------------------------------------- the toolchain, bounded

def _fake_tool(tmp_path, body):
    p = tmp_path / "fake-ptxas"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return str(p)


@pytest.fixture
def isolated_tmp(tmp_path, monkeypatch):
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(d))
    return d


def _ptx():
    from ptxforge.testing.kernels import saxpy
    return saxpy().render().text


def test_a_hung_assembler_times_out_and_its_temp_dir_goes(tmp_path, monkeypatch, isolated_tmp):
    from ptxforge import assembler as A
    monkeypatch.setattr(A, "find_tool", lambda name: _fake_tool(tmp_path, "sleep 30"))
    monkeypatch.setattr(A, "available_backends", lambda: ("ptxas",))
    t0 = time.monotonic()
    with pytest.raises(ToolchainError, match=r"ptxas did not finish within 0.5 s"):
        A.assemble(_ptx(), "sm_90", backend="ptxas", timeout=0.5)
    assert time.monotonic() - t0 < 10 and os.listdir(isolated_tmp) == []
    monkeypatch.setenv(A.TOOL_TIMEOUT_ENV, "0.3")
    with pytest.raises(ToolchainError, match=r"within 0.3 s"):
        A.assemble(_ptx(), "sm_90", backend="ptxas")


def test_a_signal_killed_assembler_is_a_crash(tmp_path, monkeypatch, isolated_tmp):
    from ptxforge import assembler as A
    monkeypatch.setattr(A, "find_tool", lambda name: _fake_tool(tmp_path, "kill -SEGV $$"))
    monkeypatch.setattr(A, "available_backends", lambda: ("ptxas",))
    with pytest.raises(ToolchainError, match="ptxas crashed: killed by SIGSEGV") as e:
        A.assemble(_ptx(), "sm_90", backend="ptxas")
    assert "rejected" not in str(e.value) and os.listdir(isolated_tmp) == []


@pytest.mark.parametrize("backend", pf.assembler.available_backends())
def test_nul_in_ptx_is_refused(backend):
    ptx = _ptx()
    cut = ptx.index(".entry")
    with pytest.raises(AssemblyError, match=r"NUL character at line \d+, column 1"):
        pf.assemble(ptx[:cut] + "\0" + ptx[cut:], "sm_90", backend=backend)


@pytest.mark.parametrize("backend", pf.assembler.available_backends())
def test_bad_options_and_unknown_archs_are_ptxforge_errors(backend):
    with pytest.raises(ToolchainError, match="bogus"):
        pf.assemble(_ptx(), "sm_bogus", backend=backend)
    with pytest.raises(ToolchainError):
        pf.assemble(_ptx(), "sm_90", backend=backend, options=("--definitely-not-an-option",))
    with pytest.raises(ToolchainError, match="option strings"):
        pf.assemble(_ptx(), "sm_90", backend=backend, options="-O3")


def test_the_report_names_the_assembler_and_its_version():
    for be in pf.assembler.available_backends():
        head = pf.assemble(_ptx(), "sm_90", backend=be).report().splitlines()[0]
        assert ("nvJitLink 1" in head) if be == "nvjitlink" else ("ptxas 1" in head), head


# ---------------------------------------------------------------- the command line

def _cli(*argv):
    import subprocess
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-m", "ptxforge", *argv], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("command", ["assemble", "lint", "listing", "to-python", "interp"])
@pytest.mark.parametrize("kind,match", [("missing", "no such file"), ("dir", "is a directory"),
                                        ("empty", "the file is empty"), ("latin1", "not UTF-8 text")])
def test_every_file_command_on_bad_files_is_one_line_and_exit_1(tmp_path, kind, match, command):
    p = tmp_path / "k.ptx"
    if kind == "dir":
        p.mkdir()
    elif kind == "empty":
        p.write_text("  \n")
    elif kind == "latin1":
        p.write_bytes(b"// caf\xe9\n.version 8.0\n")
    r = _cli(command, str(p))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0 and match in r.stderr


@pytest.mark.parametrize("argv,match", [(["--m", "-5"], "--m must be a positive size"),
                                        (["--k", "7"], "--k must be even"),
                                        (["--arch", "bogus"], "unknown arch 'bogus'")])
def test_gemm_int4_refuses_bad_arguments(argv, match):
    r = _cli("gemm-int4", "--no-run", *argv)
    assert r.returncode == 1 and match in r.stderr and "Traceback" not in r.stderr and "assembled" not in r.stdout


def test_gemm_int4_without_an_assembler_fails(monkeypatch, capsys):
    from ptxforge import assembler as A
    from ptxforge.cli import main
    monkeypatch.setattr(A, "available_backends", lambda: ())
    assert main(["gemm-int4", "--no-run", "--m", "64", "--n", "64", "--k", "64"]) == 1
    assert "no PTX assembler found" in capsys.readouterr().err


def test_gemm_int4_report_names_the_assembler():
    r = _cli("gemm-int4", "--no-run", "--mma-sync", "--m", "128", "--n", "128", "--k", "128", "--arch", "sm_80")
    assert r.returncode == 0, r.stderr
    assert "assembled by nvJitLink 1" in r.stdout or "assembled by ptxas 1" in r.stdout, r.stdout


@pytest.mark.parametrize("argv,kind", [([], "HopperGemm"), (["--mma-sync"], "GemmSchedule"),
                                       (["--m", "7", "--n", "9", "--k", "34"], "GemmSchedule")])
def test_gemm_int4_without_a_gpu_checks_the_kernel_on_the_interpreter(monkeypatch, capsys, argv, kind):
    """No GPU: the main job runs the kernel it chose on the CPU interpreter at a small ragged shape and checks it
    against numpy; a kernel whose C came out wrong turns the exit status to 1 and says MISMATCH."""
    from ptxforge.cli import main
    from ptxforge.runtime import device
    from ptxforge.schedules.gemm import GemmSchedule
    from ptxforge.schedules.hopper import HopperGemm
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    assert main(["gemm-int4", "--arch", "", *argv]) == 0
    out = capsys.readouterr().out
    assert "on the CPU interpreter at" in out and "exact match with numpy, no findings" in out, out
    cls = {"HopperGemm": HopperGemm, "GemmSchedule": GemmSchedule}[kind]
    real = cls.interpret

    def off_by_one(self, *a, **kw):
        c, report = real(self, *a, **kw)
        c[-1, -1] += 1
        return c, report
    monkeypatch.setattr(cls, "interpret", off_by_one)
    assert main(["gemm-int4", "--arch", "", *argv]) == 1
    assert "MISMATCH with numpy" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.parametrize("argv", [[], ["--mma-sync"]])
def test_gpu_gemm_int4_runs_checks_and_times_the_kernel_it_chose(monkeypatch, capsys, argv):
    """On a GPU the main job runs its kernel at the whole (ragged) shape on random data, checks C against numpy
    and prints TOPS; on sm_90 it names the TMA + wgmma path (IGMMA in the SASS) unless --mma-sync is given.  A C
    read back wrong turns the exit status to 1 and says MISMATCH."""
    from ptxforge.cli import main
    from ptxforge.runtime import DeviceBuffer, device_info
    shape = ["--m", "264", "--n", "200", "--k", "1024", "--repeat", "3", "--arch", "sm_90"]
    assert main(["gemm-int4", *shape, *argv]) == 0
    out = capsys.readouterr().out
    assert "check:    exact match with numpy (264x200x1024" in out and " TOPS" in out, out
    if device_info().sm == 90 and not argv:
        assert "path:     wgmma_s4 -- sm_90a: TMA loads" in out and "IGMMA" in out, out
    else:
        assert "path:     wgmma" not in out, out
    real = DeviceBuffer.to_host

    def off_by_one(self, *a, **kw):
        c = real(self, *a, **kw)
        if c.dtype == np.int32:
            c[-1, -1] += 1
        return c
    monkeypatch.setattr(DeviceBuffer, "to_host", off_by_one)
    assert main(["gemm-int4", *shape, *argv]) == 1
    assert "MISMATCH with numpy" in capsys.readouterr().out


# ---------------------------------------------------------------- the interpreter's launch limits

def _noop():
    k = pf.KernelBuilder("noop", target="sm_80")
    k.param_value("n", u32)
    return k.finish()


@pytest.mark.parametrize("grid,block,match", [
    ((2**31,), 32, "x = 2147483648 exceeds"), ((1, 65536), 32, "y = 65536 exceeds"), ((1, 1, 65536), 32, "z = 65536"),
    (1, (1, 1, 65), "z = 65 exceeds"), (1, (2048,), "x = 2048 exceeds"), (2.5, 32, "takes an int"),
    (1, (32.0,), "takes an int"), (True, 32, "takes an int"), (1, (0,), "positive")])
def test_interpreter_refuses_what_a_gpu_refuses(grid, block, match):
    with pytest.raises(LaunchError, match=match):
        pf.interp.run(_noop(), grid=grid, block=block, args=[1])


@pytest.mark.parametrize("shared", [1.5, -1, True, "8"])
def test_interpreter_refuses_shared_sizes_a_gpu_refuses(shared):
    with pytest.raises(LaunchError, match="shared= takes a non-negative int"):
        pf.interp.run(_noop(), grid=1, block=32, args=[1], shared=shared)


def test_interpreter_makes_its_cta_list_lazily():
    from ptxforge.interp.launch import cta_batches
    t0 = time.monotonic()
    batches = cta_batches((2**31 - 1, 65535, 65535), 4)
    assert next(batches) == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]
    assert time.monotonic() - t0 < 1
    assert list(cta_batches((3, 2, 1), 4)) == [[(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)], [(1, 1, 0), (2, 1, 0)]]
    assert list(cta_batches((2, 2, 1), 4, (1, 2, 1))) == [[(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)]]  # by cluster
    rep = pf.interp.run(_noop(), grid=(3, 2), block=32, args=[1], batch_threads=64)
    assert rep.ctas == 6 and rep.batches == 3


# ---------------------------------------------------------------- one launch end to end, through the stand-in

def _saxpy_on_the_stand_in(drv, monkeypatch):
    """testing.kernels.saxpy loaded through the stand-in driver (JIT and disk cache stood in for, the driver's
    parameter answers true to its layout), with another library's context (0xF00) current."""
    from ptxforge.testing.kernels import saxpy
    monkeypatch.setattr(L, "_jit_and_load", lambda *a: (0x3333, b"cubin", ""))
    monkeypatch.setattr(C, "disk_cache", lambda: None)
    truth = [(s.offset, s.size) for s in layout(saxpy().kernels[0].params).specs]
    drv.answers.update({
        "cuModuleGetFunction": (0, 0xABC), "cuFuncGetAttribute": (0, 1024),
        "cuFuncGetParamInfo": lambda f, i: (0, *truth[i]) if i < len(truth) else (1, 0, 0)})
    drv.current = 0xF00
    return L.load(saxpy())["saxpy"]


def test_a_dependent_launch_checks_foreign_arrays_and_waits_as_a_plain_launch(drv, monkeypatch):
    """launch_dependent (like launch_cluster, through the same helper) resolves its arguments as a plain launch
    does, in ptxforge's context: another context's memory is refused before cuLaunchKernelEx, and an array
    whose interface names another stream is waited for; the caller's context is current again after."""
    from ptxforge.runtime import launch_dependent
    drv.answers["cuLaunchKernelEx"] = (0,)
    fn = _saxpy_on_the_stand_in(drv, monkeypatch)

    class Foreign:
        def __init__(self, stream=None):
            self.__cuda_array_interface__ = {"data": (0x7000_0000, False), "shape": (300,), "typestr": "<f4",
                                             "version": 3, "stream": stream}
    dev_mem = int(real.CUmemorytype.CU_MEMORYTYPE_DEVICE)
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(0xBAD, 0, dev_mem)
    with pytest.raises(LaunchError, match="another CUDA context"):
        launch_dependent(fn, 2, 256, Foreign(), Foreign(), 300, 0.5)
    assert "cuLaunchKernelEx" not in [name for name, _ in drv.calls] and drv.current == 0xF00
    drv.answers["cuPointerGetAttributes"] = pointer_attributes(OURS, 0, dev_mem)
    drv.calls.clear()
    launch_dependent(fn, 2, 256, Foreign(0xABC), Foreign(), 300, 0.5)
    names = [name for name, _ in drv.calls]
    assert names.index("cuStreamWaitEvent") < names.index("cuLaunchKernelEx") and drv.current == 0xF00


@pytest.mark.parametrize("via", ["cuLaunchKernel", "cuLaunchKernelEx"])
def test_a_prepared_launch_outside_ptxforge_s_context_is_made_in_it(drv, monkeypatch, via):
    """The prepared launches (plans, run()'s kept plans, bound and dependent launches) call the driver without
    entering ptxforge's context first (it costs a driver call per launch).  When another library's context is
    current, or none (a thread that has not used ptxforge yet), and the launch fails for it, the launch is made
    again in ours and the caller's context given back (a thread that had none keeps ours); with ours current a
    failure stands, launched once."""
    from ptxforge.runtime.dependent import DependentLaunch
    fn = _saxpy_on_the_stand_in(drv, monkeypatch)
    drv.answers[via] = lambda *a: (0,) if drv.current == OURS else (201,)  # CUDA_ERROR_INVALID_CONTEXT elsewhere
    cfg, values = fn._config(2, 256, 0), [0x9000, 0x9000, 300, 0.5]
    if via == "cuLaunchKernel":
        def launch():
            fn._launch(cfg, 0, fn._blob, values)
    else:
        drv.current = OURS
        dl = DependentLaunch(fn, cfg, 0)

        def launch():
            dl.launch(fn._blob, values)
    for before, after in ((0xF00, 0xF00), (0, OURS)):
        drv.current = before
        drv.calls.clear()
        launch()
        assert [name for name, _ in drv.calls].count(via) == 2 and drv.current == after
    drv.answers[via] = (700,)  # a failure in ours: it stands
    drv.calls.clear()
    with pytest.raises(Exception, match="CUDA_ERROR_ILLEGAL_ADDRESS|700"):
        launch()
    assert [name for name, _ in drv.calls].count(via) == 1


def test_a_launch_through_the_stand_in_records_and_names_its_kernel(drv, monkeypatch):
    drv.answers.update({"cuLaunchKernel": (0,), "cuMemAlloc": (0, 0x9000), "cuMemcpyHtoD": (0,),
                        "cuMemcpyDtoH": (0,), "cuMemFree": (0,), "cuStreamSynchronize": (0,)})
    fn = _saxpy_on_the_stand_in(drv, monkeypatch)
    x, y = np.ones(300, np.float32), np.zeros(300, np.float32)
    fn(2, 256, x, y, 300, 0.5)
    names = [c[0] for c in drv.calls]
    assert names.count("cuLaunchKernel") == 1 and names.count("cuMemFree") == 2 and drv.current == 0xF00
    assert F.pending() == []  # the staged launch synchronized its stream
    a = pf.DeviceBuffer.empty(300, np.float32)
    fn(2, 256, a, a, 300, 0.5)  # device memory only: asynchronous, so still a suspect
    fn(1, 64, a, a, 64, 2.0)
    drv.answers["cuCtxSynchronize"] = (715,)  # CUDA_ERROR_ILLEGAL_INSTRUCTION
    with pytest.raises(ContextLost) as e:
        pf.synchronize()
    assert "kernel 'saxpy' grid (2, 1, 1) block (256, 1, 1)" in str(e.value)
    assert "kernel 'saxpy' grid (1, 1, 1) block (64, 1, 1)" in str(e.value)
    with pytest.raises(ContextLost, match=r"^the CUDA context is unusable after CUDA_ERROR_ILLEGAL_INSTRUCTION in "
                                          r"kernel 'saxpy'; restart the process$"):
        fn(2, 256, a, a, 300, 0.5)
    assert drv.current == 0xF00
    a.free()  # with the context dead: forgotten, not handed to the driver
    assert "cuMemFree" not in [c[0] for c in drv.calls[-3:]]
