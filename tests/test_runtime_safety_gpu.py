"""The runtime's safety promises on a real GPU: a planted cubin is never run, a real kernel fault is
reported once by kernel name and the dead context said so by every later call (in a child process,
with the cache left intact), bound launches keep their memory, unloaded modules refuse, a foreign
context is given back and its memory refused, eight threads share one JIT, hand-made
__cuda_array_interface__ objects are checked, and synchronize() can time out."""

import gc
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import u32
from ptxforge.errors import LaunchError, SyncTimeout
from ptxforge.runtime import cache as C
from ptxforge.runtime import kernel as K
from ptxforge.runtime import loader
from ptxforge.runtime.launch import layout
from support.spin import spin_module

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fill_module(name, value):
    """out[i] = value for i < n (u32)."""
    k = pf.KernelBuilder(name, target="sm_80")
    out = k.param_ptr("out", u32)
    n = k.param_value("n", u32)
    i = k.add(k.mul(k.ctaid(), k.ntid()), k.tid())
    with k.if_(k.setp("lt", i, n)):
        k.st(k.add(out, k.mul(i, 4, mode="wide")), k.mov(value, type=u32))
    return k.module()


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    root = tmp_path / "cache"
    C.set_cache_dir(root)
    C.clear_memory_cache()
    yield root
    C.set_cache_dir(None)
    C.clear_memory_cache()


def _run_fill(lm, name, n=100):
    out = np.zeros(n, np.uint32)
    lm[name](1, 128, out, n)
    return out


# ---------------------------------------------------------------- a planted cubin

def test_a_planted_cubin_is_never_run(tmp_path, monkeypatch):
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    real = fill_module("planted_fill", 7)
    evil_cubin = pf.load(fill_module("planted_fill", 666), cache=False).cubin
    _, _, key = loader._prepared(real, pf.device_info(), ())
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # a directory anyone on the machine may write
    dc = C.DiskCache(str(shared))
    os.makedirs(os.path.dirname(dc.path(key)), mode=0o700)
    with open(dc.path(key), "wb") as f:
        f.write(C.encode_entry(key, evil_cubin))  # a perfectly valid entry for the real module's key
    C.set_cache_dir(shared)
    C._warned_dirs.discard(str(shared))
    try:
        C.clear_memory_cache()
        with pytest.warns(RuntimeWarning, match="not using the cubin cache"):
            lm = pf.load(real)
        assert lm.origin == "jit" and (_run_fill(lm, "planted_fill") == 7).all()

        # the same entry reached through a symbolic link from a private directory is refused too
        private = tmp_path / "private"
        pc = C.DiskCache(str(private))
        assert pc.prepare() is None
        os.makedirs(os.path.dirname(pc.path(key)), mode=0o700)
        os.symlink(dc.path(key), pc.path(key))
        C.set_cache_dir(private)
        C.clear_memory_cache()
        lm = pf.load(real)
        assert lm.origin == "jit" and (_run_fill(lm, "planted_fill") == 7).all()

        # what the checks stand between: the same entry as a plain file in a private directory is trusted
        os.unlink(pc.path(key))
        with open(pc.path(key), "wb") as f:
            f.write(C.encode_entry(key, evil_cubin))
        C.clear_memory_cache()
        lm = pf.load(real)
        assert lm.origin == "disk" and (_run_fill(lm, "planted_fill") == 666).all()
    finally:
        C.set_cache_dir(None)
        C.clear_memory_cache()


# ---------------------------------------------------------------- a real fault, in a child process

CHILD = r"""
import hashlib, json
import ptxforge as pf
from ptxforge import f32
from ptxforge.runtime import cache as C

def survivor():
    k = pf.KernelBuilder("survivor", target="sm_80")
    o = k.param_ptr("out", f32)
    k.st(o, k.mov(2.0, type=f32))
    return k.module()

res = {}
lm = pf.load(survivor())
res["origin"] = lm.origin
res["path"] = C.DiskCache(C.cache_dir()).path(lm.cache_key)
res["key"] = lm.cache_key
res["before"] = hashlib.sha256(open(res["path"], "rb").read()).hexdigest()
k = pf.KernelBuilder("scribbler", target="sm_80")
out = k.param_ptr("out", f32)
k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.mov(1.0, type=f32))
fn = pf.load(k.module())["scribbler"]
fn((2, 1, 1), (32, 1, 1), 8)  # address 8: an illegal address
calls = [("sync", pf.synchronize),
         ("load", lambda: (C.clear_memory_cache(), pf.load(survivor()))),
         ("alloc", lambda: pf.DeviceBuffer.empty(16)),
         ("launch", lambda: fn(1, 32, 8)),
         ("sync_again", pf.synchronize)]
for name, call in calls:
    try:
        call()
        res[name] = "no error"
    except pf.PtxforgeError as e:
        res[name] = type(e).__name__ + ": " + str(e)
res["after"] = hashlib.sha256(open(res["path"], "rb").read()).hexdigest()
print("RESULT " + json.dumps(res))
"""


def test_a_real_fault_is_named_once_and_the_dead_context_reported(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, PTXFORGE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(C.CACHE_ENV, None)
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, p.stdout + p.stderr
    res = json.loads(line[0][len("RESULT "):])
    sentence = ("the CUDA context is unusable after CUDA_ERROR_ILLEGAL_ADDRESS in kernel 'scribbler'; "
                "restart the process")
    assert res["sync"].startswith("ContextLost: cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS"), res["sync"]
    assert "kernel 'scribbler' grid (2, 1, 1) block (32, 1, 1)" in res["sync"] and res["sync"].endswith(sentence)
    for name in ("load", "alloc", "launch", "sync_again"):
        assert res[name] == "ContextLost: " + sentence, (name, res[name])
    assert "rejected the PTX" not in p.stdout + p.stderr
    assert res["origin"] == "jit" and res["before"] == res["after"]  # the cache entry survived, untouched
    with open(res["path"], "rb") as f:
        assert C.decode_entry(res["key"], f.read())[0] is not None


# ---------------------------------------------------------------- lifetimes

def test_a_bound_launch_keeps_its_buffer_alive():
    fn = pf.load(fill_module("uaf_fill", 5))["uaf_fill"]
    n = 1 << 16
    buf = pf.DeviceBuffer.empty(n, np.uint32)
    ptr = buf.ptr
    bl = fn.bind((n + 255) // 256, 256, buf, n)
    del buf
    gc.collect()
    other = pf.DeviceBuffer.from_host(np.full(n, 0xAAAAAAAA, np.uint32))  # would take the memory if it were freed
    assert other.ptr != ptr
    bl.launch()
    pf.synchronize()
    assert (other.to_host() == 0xAAAAAAAA).all()
    (held,) = bl._buffers
    assert held.ptr == ptr and (held.to_host() == 5).all()
    bl.close()
    with pytest.raises(LaunchError, match="was closed"):
        bl.launch()
    staged = fn.bind(1, 128, np.zeros(100, np.uint32), 100)
    staged.launch()
    staged.close()
    with pytest.raises(LaunchError, match="was closed"):
        staged.launch()
    with pytest.raises(LaunchError, match="was closed"):
        staged.copy_back()
    freed = pf.DeviceBuffer.empty(64, np.uint32)
    bl = fn.bind(1, 64, freed, 64)
    freed.free()
    with pytest.raises(LaunchError, match="has been freed"):
        bl.launch()


def test_unload_leaves_the_cache_and_its_kernels_refuse(tmp_cache):
    m = fill_module("unload_fill", 3)
    lm = pf.load(m)
    fn = lm["unload_fill"]
    bl = fn.bind(1, 32, pf.DeviceBuffer.empty(32, np.uint32), 32)
    lm.unload()
    assert not lm.loaded
    with pytest.raises(LaunchError, match="unloaded"):
        fn(1, 32, pf.DeviceBuffer.empty(32, np.uint32), 32)
    with pytest.raises(LaunchError, match="unloaded"):
        bl.launch()
    lm2 = pf.load(m)
    assert lm2 is not lm and lm2.loaded and lm2.origin == "disk"
    assert (_run_fill(lm2, "unload_fill", 32) == 3).all()


def test_eight_threads_loading_one_module_jit_once(tmp_cache):
    m = fill_module("threads_fill", 4)
    before = C.stats.compiles
    barrier = threading.Barrier(8)
    got, errors = [], []

    def worker():
        try:
            barrier.wait()
            lm = pf.load(m)
            out = _run_fill(lm, "threads_fill")
            got.append((lm, bool((out == 4).all())))
        except BaseException as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(got) == 8 and all(lm is got[0][0] and ok for lm, ok in got)
    assert C.stats.compiles == before + 1


# ---------------------------------------------------------------- contexts

def _foreign_context(d, dev):
    for args in ((None, 0, dev), (0, dev)):  # cuda-bindings 13 takes creation params first, 12 does not
        try:
            err, ctx = d.cuCtxCreate(*args)
        except TypeError:
            continue
        assert not err, err
        return ctx
    pytest.fail("cannot call cuCtxCreate with these bindings")


def test_a_foreign_context_is_given_back_and_its_memory_refused():
    from cuda.bindings import driver as d
    fn = pf.load(fill_module("ctx_fill", 9))["ctx_fill"]
    err, dev = d.cuDeviceGet(pf.device_info().ordinal)
    ctx2 = _foreign_context(d, dev)
    try:
        assert not d.cuCtxSetCurrent(ctx2)[0]
        out = np.zeros(64, np.uint32)
        fn(1, 64, out, 64)  # staged through ptxforge's own context
        assert (out == 9).all()
        assert int(d.cuCtxGetCurrent()[1]) == int(ctx2)  # the caller's context is current again
        buf = pf.DeviceBuffer.empty(64, np.uint32)
        assert int(d.cuCtxGetCurrent()[1]) == int(ctx2)
        err, p2 = d.cuMemAlloc(256)  # memory of the foreign context
        assert not err

        class Foreign:
            __cuda_array_interface__ = {"data": (int(p2), False), "shape": (64,), "typestr": "<u4", "version": 3}
        with pytest.raises(LaunchError, match="another CUDA context"):
            fn(1, 64, Foreign(), 64)
        fn(1, 64, buf, 64)
        assert (buf.to_host() == 9).all()
        assert int(d.cuCtxGetCurrent()[1]) == int(ctx2)
        # the one-time calls and the releases give it back too: timing, a tensor map, a stream, a collected buffer
        with pf.runtime.EventTimer() as t:
            fn(1, 64, buf, 64)
        assert t.elapsed_us is not None and int(d.cuCtxGetCurrent()[1]) == int(ctx2)
        pf.runtime.TensorMap.from_array(pf.DeviceBuffer.empty((64, 64), np.uint8), (64, 64)).encode()
        stream, spare = pf.Stream(), pf.DeviceBuffer.empty(1 << 20, np.uint8)
        stream.close()
        del spare
        gc.collect()
        assert int(d.cuCtxGetCurrent()[1]) == int(ctx2)
        d.cuMemFree(p2)
    finally:
        d.cuCtxDestroy(ctx2)


def test_gemm_schedules_refuse_a_foreign_contexts_memory_and_run_after():
    """run() and the plans of both GEMM paths ask the driver where a foreign operand lives: memory of
    another context is refused by name before a tensor map or launch is made of it, and the next
    call on ptxforge's own memory is exact (no fault was left in the context) and gives the foreign
    context back."""
    from cuda.bindings import driver as d
    from ptxforge.schedules.gemm import Int8Gemm
    from ptxforge.schedules.hopper import HopperGemm
    m = n = 128
    k = 256
    err, dev = d.cuDeviceGet(pf.device_info().ordinal)
    ctx2 = _foreign_context(d, dev)
    try:
        err, p2 = d.cuMemAlloc(m * k)
        assert not err

        class Foreign:
            __cuda_array_interface__ = {"data": (int(p2), False), "shape": (m, k), "typestr": "|i1", "version": 3}
        rng = np.random.default_rng(11)
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (n, k)).astype(np.int8)
        da, db = pf.DeviceBuffer.from_host(a), pf.DeviceBuffer.from_host(b)
        hop = HopperGemm("s8")
        sync = Int8Gemm(target="sm_90")
        for g in (hop, sync):
            c = pf.DeviceBuffer.from_host(np.full((m, n), -0x5A5A5A5A, np.int32))
            with pytest.raises(LaunchError, match="another CUDA context"):
                g.run(da, Foreign(), c)
            with pytest.raises(LaunchError, match="B \\(Foreign\\): .*another CUDA context"):
                g.plan(m, n, k)(da, Foreign(), c)
            g.run(da, db, c)  # the careful path (kernel load, tensor maps, occupancy) under the foreign context
            assert int(d.cuCtxGetCurrent()[1]) == int(ctx2), g  # which is current again after it
            assert np.array_equal(c.to_host().astype(np.int64), a.astype(np.int64) @ b.astype(np.int64).T), g
        d.cuMemFree(p2)
    finally:
        d.cuCtxDestroy(ctx2)


def test_kept_plans_launch_from_a_fresh_thread_and_under_a_foreign_context():
    """run()'s kept plan and a plan, made on this thread, called from a thread that has no current context
    (it never used ptxforge) and with another library's context current: exact each time, and the caller's
    context current after.  The prepared launches do not enter ptxforge's context per call; a launch that
    fails outside it is made again inside it."""
    from cuda.bindings import driver as d
    from ptxforge.schedules.gemm import Int8Gemm
    from ptxforge.schedules.hopper import HopperGemm
    m = n = 128
    k = 256
    rng = np.random.default_rng(29)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (n, k)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64).T
    poison = np.full((m, n), -0x5A5A5A5A, np.int32)
    da, db, c = pf.DeviceBuffer.from_host(a), pf.DeviceBuffer.from_host(b), pf.DeviceBuffer.from_host(poison)
    err, dev = d.cuDeviceGet(pf.device_info().ordinal)
    ctx2 = _foreign_context(d, dev)
    assert not d.cuCtxSetCurrent(pf.runtime.driver.context().ctx)[0]
    try:
        for g in (HopperGemm("s8"), Int8Gemm(target="sm_90")):
            g.run(da, db, c)  # careful: keeps the plan
            p = g.plan(m, n, k)
            p(da, db, c)
            for launch in (g.run, p):
                c.copy_from_host(poison)
                pf.synchronize()
                seen, errors = [], []

                def fresh_thread():
                    try:
                        seen.append(int(d.cuCtxGetCurrent()[1]))
                        launch(da, db, c)
                    except BaseException as e:  # reported below
                        errors.append(e)
                t = threading.Thread(target=fresh_thread)
                t.start()
                t.join(60)
                assert not errors and seen == [0], (errors, seen)
                assert np.array_equal(c.to_host().astype(np.int64), want), (g, launch)
                c.copy_from_host(poison)
                assert not d.cuCtxSetCurrent(ctx2)[0]
                launch(da, db, c)
                assert int(d.cuCtxGetCurrent()[1]) == int(ctx2)
                assert not d.cuCtxSetCurrent(pf.runtime.driver.context().ctx)[0]
                assert np.array_equal(c.to_host().astype(np.int64), want), (g, launch)
    finally:
        d.cuCtxDestroy(ctx2)


def test_torch_between_two_ptxforge_calls():
    torch = pytest.importorskip("torch")
    from cuda.bindings import driver as d
    fn = pf.load(fill_module("torch_fill", 11))["torch_fill"]
    x = torch.zeros(256, dtype=torch.int32, device="cuda")
    fn(1, 256, x, 256)
    y = x * 2  # torch works in its (the primary) context between the calls
    err, dev = d.cuDeviceGet(pf.device_info().ordinal)
    ctx2 = _foreign_context(d, dev)  # and another library leaves its own context current
    try:
        fn(1, 256, y, 128)
        assert int(d.cuCtxGetCurrent()[1]) == int(ctx2)
    finally:
        d.cuCtxDestroy(ctx2)
    torch.cuda.synchronize()
    assert (x == 11).all() and (y[:128] == 11).all() and (y[128:] == 22).all()


# ---------------------------------------------------------------- hand-made __cuda_array_interface__

class CudaArray:
    """The least an object needs to be a GPU array."""

    def __init__(self, ptr, shape, typestr="<u4", readonly=False):
        self.__cuda_array_interface__ = {"data": (ptr, readonly), "shape": shape, "typestr": typestr,
                                         "version": 2}


def test_a_hand_made_cuda_array_is_used_and_checked():
    fn = pf.load(fill_module("cai_fill", 13))["cai_fill"]
    buf = pf.DeviceBuffer.from_host(np.zeros(100, np.uint32))
    fn(1, 128, CudaArray(buf.ptr, (100,)), 100)
    assert (buf.to_host() == 13).all()
    for bad, match in [(CudaArray(buf.ptr, (100,), readonly=True), "read-only"),
                       (CudaArray(buf.ptr, (100,), ">u4"), "big-endian"),
                       (CudaArray(buf.ptr + 2, (99,)), "not aligned"),
                       (CudaArray(buf.ptr, (100,), "<f8"), "float64"),
                       (CudaArray(0x1000, (100,)), "not memory the CUDA driver knows")]:
        with pytest.raises(LaunchError, match=match):
            fn(1, 128, bad, 100)
    empty = np.zeros((0, 4), np.uint32)
    fn(1, 128, empty, 0)  # zero-size arrays are accepted


# ---------------------------------------------------------------- hangs

def test_synchronize_timeout_and_query_on_a_running_kernel():
    fn = pf.load(spin_module("sync_spin"))["sync_spin"]
    out = pf.DeviceBuffer.empty(32)
    iters = 400_000_000
    with pf.Stream() as s:
        fn(1, 32, out, iters, stream=s)
        assert s.query() is False
        with pytest.raises(SyncTimeout, match="kernel 'sync_spin'"):
            s.synchronize(timeout=0.01)
        s.synchronize(timeout=120)
        assert s.query() is True
    fn(1, 32, out, iters)
    assert pf.query() is False
    with pytest.raises(SyncTimeout, match="kernel 'sync_spin'"):
        pf.synchronize(timeout=0.01)
    pf.synchronize()
    assert pf.query() is True


# ---------------------------------------------------------------- foreign PTX against the driver's layout

FOREIGN = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry foreign(
    .param .u64 .ptr .global .align 8 foreign_param_0,
    .param .u32 a[4],
    .param .align 64 .b8 t[128],
    .param .align 8 .b8 s[24],
    .param .f32 f,
    .param .u64 raw
)
{
    ret;
}
"""


def test_foreign_parameter_spellings_agree_with_the_driver():
    from cuda.bindings import driver as d
    lm = pf.load(FOREIGN)  # loading runs the cross-check against cuFuncGetParamInfo
    fn = lm["foreign"]
    assert hasattr(d, "cuFuncGetParamInfo") and pf.device_info().driver_version >= 12040, \
        "this driver cannot tell its parameter layout: the cross-check is not made"
    driver_sizes = [int(d.cuFuncGetParamInfo(fn._func, i)[2]) for i in range(len(fn.params))]
    assert driver_sizes == [s.size for s in fn.layout.specs] == [8, 16, 128, 24, 4, 8]
    old_reading = list(fn.params)
    old_reading[1] = pf.Param("a", pf.u32)  # what the old parser made of `.u32 a[4]`
    with pytest.raises(LaunchError, match=r"parameter 1 \(a: .u32\) is 4 bytes as ptxforge read it, but 16 bytes"):
        K.check_param_layout("foreign", fn._func, layout(old_reading))
    # and a launch packs every one of them (the array as 16 bytes, the blocks as bytes) for the driver
    fn(1, 1, pf.DeviceBuffer.empty(4, np.uint32), np.arange(4, dtype=np.uint32), bytes(128), bytes(24), 1.0, 0)
    pf.synchronize()
