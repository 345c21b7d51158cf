"""The runtime on a real GPU: kernels built with the builder, run on Hypothesis-drawn sizes and
fresh random data, compared with numpy; outputs are poisoned (NaN) before every launch so an
element the kernel fails to write is caught, and elements past n must stay poisoned."""

import functools
import inspect
import os

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge.errors import JitError, LaunchError, TargetError
from ptxforge.runtime import cache as C
from ptxforge.runtime import loader
from ptxforge.testing import launch_strategies as ls
from ptxforge.testing.kernels import saxpy
from support.spin import spin_module  # noqa: F401 (kernel() finds the builder by name)

pytestmark = pytest.mark.gpu

PAD = 37  # poisoned elements after n: a missing tail guard writes into them


# ---------------------------------------------------------------- kernels

def saxpy_out_module(name="saxpy_out", maxntid=1024):
    """out[i] = a * x[i] + y[i] for i < n."""
    return saxpy(block=maxntid, name=name, out=True)


def saxpy_inplace_module():
    """y[i] = a * x[i] + y[i] for i < n (four arguments)."""
    return saxpy(block=1024)


MAX_SEG = 256


def reverse_segments_module():
    """Each CTA reverses its segment through a static shared tile; the last segment may be short."""
    k = pf.KernelBuilder("reverse_segments", target="sm_80", maxntid=MAX_SEG)
    src, dst = k.param_ptr("src", f32), k.param_ptr("dst", f32)
    n = k.param_value("n", u32)
    tile = k.shared("tile", 4 * MAX_SEG, align=16)
    t, nt = k.tid(), k.ntid()
    base = k.mul(k.ctaid(), nt)
    i = k.add(base, t)
    inside = k.setp("lt", i, n)
    sbase = k.shared_base(tile)
    off = k.mul(i, 4, mode="wide")
    with k.if_(inside):
        k.st(k.add(sbase, k.shl(t, 2)), k.ld(k.add(src, off), type=f32), space="shared")
    k.bar_sync(0)
    m = k.min(k.sub(n, base), nt)
    with k.if_(inside):
        j = k.sub(k.sub(m, 1), t)
        k.st(k.add(dst, off), k.ld(k.add(sbase, k.shl(j, 2)), type=f32, space="shared"))
    return k.module()


def reverse_dynamic_module():
    """Each CTA reverses `e` elements held at once in dynamic shared memory (beyond 48 KB when e > 12288)."""
    k = pf.KernelBuilder("reverse_dynamic", target="sm_80", maxntid=1024)
    src, dst = k.param_ptr("src", f32), k.param_ptr("dst", f32)
    e = k.param_value("e", u32)
    buf = k.dynamic_shared("buf", align=16)
    t, nt = k.tid(), k.ntid()
    cta_bytes = k.mul(k.mul(k.ctaid(), e, mode="wide"), 4)
    s_cta, d_cta = k.add(src, cta_bytes), k.add(dst, cta_bytes)
    sbase = k.shared_base(buf)
    j = k.mov(t)
    with k.loop("fill"):
        k.break_(k.setp("ge", j, e))
        k.st(k.add(sbase, k.shl(j, 2)), k.ld(k.add(s_cta, k.mul(j, 4, mode="wide")), type=f32), space="shared")
        k.add(j, nt, dst=j)
    k.bar_sync(0)
    k.mov(t, dst=j)
    with k.loop("drain"):
        k.break_(k.setp("ge", j, e))
        r = k.sub(k.sub(e, 1), j)
        k.st(k.add(d_cta, k.mul(j, 4, mode="wide")), k.ld(k.add(sbase, k.shl(r, 2)), type=f32, space="shared"))
        k.add(j, nt, dst=j)
    return k.module()


@functools.lru_cache(maxsize=None)
def kernel(builder_name: str, name: str):
    return pf.load(globals()[builder_name]())[name]


def poisoned(n):
    return np.full(n, np.nan, dtype=np.float32)


def saxpy_ref(a, x, y):
    return (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)


def reverse_ref(src, seg):
    out = np.empty_like(src)
    for s in range(0, len(src), seg):
        out[s:s + seg] = src[s:s + seg][::-1]
    return out


# ---------------------------------------------------------------- running kernels on drawn data

@given(n=ls.element_counts(1 << 16), block=ls.block_sizes(1024), seed=ls.seeds(),
       a=st.floats(-8, 8, width=32))
def test_saxpy_on_numpy_arrays(n, block, seed, a):
    fn = kernel("saxpy_out_module", "saxpy_out")
    x, y = ls.random_array(seed, n), ls.random_array(seed + 1, n)
    out = poisoned(n + PAD)
    fn((n + block - 1) // block, block, pf.In(x), pf.In(y), pf.InOut(out), n, a)
    np.testing.assert_allclose(out[:n], saxpy_ref(a, x, y), rtol=1e-6, atol=1e-6)
    assert np.isnan(out[n:]).all(), "the kernel wrote past n: the tail guard is missing"


@given(n=ls.element_counts(1 << 16), block=ls.block_sizes(1024), seed=ls.seeds(),
       a=st.floats(-8, 8, width=32))
def test_saxpy_on_device_buffers(n, block, seed, a):
    fn = kernel("saxpy_out_module", "saxpy_out")
    x, y = ls.random_array(seed, n), ls.random_array(seed + 1, n)
    dx, dy = pf.DeviceBuffer.from_host(x), pf.DeviceBuffer.from_host(y)
    dout = pf.DeviceBuffer.empty(n + PAD, np.float32).fill_bytes(0xFF)
    fn((n + block - 1) // block, block, dx, dy, dout, n, a)
    out = dout.to_host()
    np.testing.assert_allclose(out[:n], saxpy_ref(a, x, y), rtol=1e-6, atol=1e-6)
    assert np.isnan(out[n:]).all()


@given(n=ls.element_counts(1 << 15, MAX_SEG), block=ls.block_sizes(MAX_SEG), seed=ls.seeds())
def test_reverse_through_static_shared_memory(n, block, seed):
    fn = kernel("reverse_segments_module", "reverse_segments")
    src = ls.random_array(seed, n)
    dst = poisoned(n + PAD)
    fn((n + block - 1) // block, block, src, dst, n)
    np.testing.assert_array_equal(dst[:n], reverse_ref(src, block))
    assert np.isnan(dst[n:]).all()


@given(e=st.integers(12 * 1024 + 1, 56 * 1024), ctas=st.integers(1, 3), block=ls.block_sizes(1024),
       seed=ls.seeds())
def test_dynamic_shared_memory_beyond_48_kb(e, ctas, block, seed):
    fn = kernel("reverse_dynamic_module", "reverse_dynamic")
    src = ls.random_array(seed, ctas * e)
    dst = poisoned(ctas * e + PAD)
    fn(ctas, block, src, dst, e, shared=4 * e)
    np.testing.assert_array_equal(dst[:ctas * e], reverse_ref(src, e))
    assert np.isnan(dst[ctas * e:]).all()
    assert fn.attributes["max_dynamic_shared"] >= 4 * e


def test_shared_memory_over_the_device_limit_is_refused():
    fn = kernel("reverse_dynamic_module", "reverse_dynamic")
    limit = pf.device_info().limits.max_shared_optin
    with pytest.raises(LaunchError, match=f"at most {limit}"):
        fn(1, 256, pf.DeviceBuffer.empty(16), pf.DeviceBuffer.empty(16), 4, shared=limit + 4)


# ---------------------------------------------------------------- copy policies

def test_copy_policies(seed=11):
    fn = kernel("saxpy_inplace_module", "saxpy")
    n = 1000
    x, y0 = ls.random_array(seed, n), ls.random_array(seed + 1, n)
    y = y0.copy()
    fn(4, 256, x, pf.In(y), n, 2.0)
    np.testing.assert_array_equal(y, y0)  # In: the device result is not copied back
    fn(4, 256, x, y, n, 2.0)  # a bare numpy array is InOut
    np.testing.assert_allclose(y, saxpy_ref(2.0, x, y0), rtol=1e-6, atol=1e-6)
    z = y0.copy()
    fn(4, 256, z, z, n, 3.0)  # one array passed twice shares one device copy
    np.testing.assert_allclose(z, saxpy_ref(3.0, y0, y0), rtol=1e-6, atol=1e-6)


def test_bound_launch_and_stream(seed=12):
    fn = kernel("saxpy_out_module", "saxpy_out")
    n = 5000
    x, y = ls.random_array(seed, n), ls.random_array(seed + 1, n)
    out = poisoned(n)
    with pf.Stream() as s:
        with fn.bind(20, 256, pf.In(x), pf.In(y), pf.Out(out), n, -1.5, stream=s) as bound:
            bound.launch()
            bound.copy_back()
        np.testing.assert_allclose(out, saxpy_ref(-1.5, x, y), rtol=1e-6, atol=1e-6)
        out2 = poisoned(n)
        fn(20, 256, x, y, out2, n, 0.25, stream=s)
        np.testing.assert_allclose(out2, saxpy_ref(0.25, x, y), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- argument errors on a loaded kernel

def test_argument_errors_before_launch():
    fn = kernel("reverse_segments_module", "reverse_segments")
    buf = pf.DeviceBuffer.empty(256)
    with pytest.raises(LaunchError, match=r"takes 3 argument"):
        fn(1, 256, buf, buf)
    with pytest.raises(LaunchError, match=r"\.maxntid 256"):
        fn(1, 512, buf, buf, 256)
    with pytest.raises(LaunchError, match="y = 70000"):
        fn((1, 70000), 256, buf, buf, 256)
    with pytest.raises(LaunchError, match="float64"):
        fn(1, 256, pf.DeviceBuffer.empty(256, np.float64), buf, 256)
    with pytest.raises(LaunchError, match="not C-contiguous"):
        fn(1, 256, np.zeros(512, np.float32)[::2], buf, 256)


def test_reqntid_is_enforced():
    k = pf.KernelBuilder("fixed", target="sm_80", reqntid=128)
    out = k.param_ptr("out", u32)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.ntid())
    fn = pf.load(k)["fixed"]
    with pytest.raises(LaunchError, match="exactly block"):
        fn(1, 64, np.zeros(128, np.uint32))
    got = np.zeros(128, np.uint32)
    fn(1, 128, pf.Out(got))
    assert (got == 128).all()


def test_function_attributes():
    fn = kernel("reverse_segments_module", "reverse_segments")
    assert fn.registers > 0 and fn.local_bytes == 0
    assert fn.static_shared == 4 * MAX_SEG
    assert 0 < fn.max_threads_per_block <= MAX_SEG
    assert fn.attributes["binary_version"] == pf.device_info().sm


# ---------------------------------------------------------------- JIT failures and symbols

def test_jit_error_quotes_the_driver_log_mapped_to_python():
    k = pf.KernelBuilder("bad", target="sm_80")
    out = k.param_ptr("out", f32)
    line = inspect.currentframe().f_lineno + 1
    v = k.ld(pf.Symbol("nowhere", "global", f32), type=f32)  # passes Python's checks; ptxas: unknown symbol
    k.st(out, v)
    with pytest.raises(JitError) as info:
        pf.load(k, cache=False)
    text = str(info.value)
    assert "nowhere" in text and "CUDA_ERROR" in text
    assert f"test_runtime_gpu.py:{line}" in text, text
    assert info.value.diagnostics, info.value.log


def test_missing_kernel_symbol_fails_at_load(monkeypatch):
    text = str(saxpy_inplace_module())
    real = loader.parse_entries
    monkeypatch.setattr(loader, "parse_entries", lambda t: real(t) + (loader.EntryDesc("ghost", ()),))
    with pytest.raises(JitError, match="kernel 'ghost' is not in the loaded module"):
        pf.load(text, cache=False)


def test_raw_ptx_text_loads_and_runs():
    fn = pf.load(str(saxpy_inplace_module()))["saxpy"]
    x, y0 = ls.random_array(3, 300), ls.random_array(4, 300)
    y = y0.copy()
    fn(2, 256, x, y, 300, 0.5)
    np.testing.assert_allclose(y, saxpy_ref(0.5, x, y0), rtol=1e-6, atol=1e-6)


def test_version_capped_and_target_checked():
    info = pf.device_info()
    lm = pf.load(saxpy_inplace_module())
    assert lm.version <= info.ptx_cap
    newer = f"sm_{info.sm + 10}" if info.sm < 100 else None
    if newer:
        k = pf.KernelBuilder("future", target=newer)
        k.param_ptr("out", f32)
        with pytest.raises(TargetError, match="but the GPU is"):
            pf.load(k)
    cap = info.ptx_cap
    with pytest.raises(TargetError, match="accepts at most"):
        pf.load(f".version {cap.major}.{cap.minor + 1}\n.target sm_80\n.address_size 64\n")


# ---------------------------------------------------------------- cache

@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    C.set_cache_dir(tmp_path)
    C.clear_memory_cache()
    yield tmp_path
    C.set_cache_dir(None)
    C.clear_memory_cache()


def _entries(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".cubin"))


def _check_saxpy(lm, seed):
    x, y0 = ls.random_array(seed, 777), ls.random_array(seed + 1, 777)
    y = y0.copy()
    lm["saxpy"](4, 256, x, y, 777, 1.25)
    np.testing.assert_allclose(y, saxpy_ref(1.25, x, y0), rtol=1e-6, atol=1e-6)


def test_cache_hit_corrupt_entry_and_cache_off(tmp_cache, monkeypatch):
    m = saxpy_inplace_module()
    s = C.stats
    lm = pf.load(m)
    assert lm.origin == "jit" and len(_entries(tmp_cache)) == 1
    assert pf.load(m) is lm  # in-process hit
    C.clear_memory_cache()
    lm = pf.load(m)
    assert lm.origin == "disk"
    _check_saxpy(lm, 1)

    (path,) = _entries(tmp_cache)
    with open(path, "r+b") as f:  # damage the middle of the cubin
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\xde\xad\xbe\xef" * 4)
    corrupt, compiles = s.corrupt, s.compiles
    C.clear_memory_cache()
    lm = pf.load(m)
    assert lm.origin == "jit" and s.corrupt == corrupt + 1 and s.compiles == compiles + 1
    _check_saxpy(lm, 2)
    with open(path, "rb") as f:
        assert C.decode_entry(lm.cache_key, f.read())[0] == lm.cubin  # rebuilt intact

    with open(path, "r+b") as f:  # truncation is caught too
        f.truncate(100)
    C.clear_memory_cache()
    assert pf.load(m).origin == "jit"

    monkeypatch.setenv(C.CACHE_ENV, "0")
    C.clear_memory_cache()
    before = _entries(tmp_cache)
    other = saxpy_out_module(name="saxpy_uncached")
    assert pf.load(other).origin == "jit" and _entries(tmp_cache) == before


# ---------------------------------------------------------------- torch and CuPy arrays, no copies

class OnlyDLPack:
    """Hide __cuda_array_interface__ so the DLPack path is the one taken."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


@pytest.mark.parametrize("wrap", [lambda t: t, OnlyDLPack], ids=["cuda_array_interface", "dlpack"])
def test_torch_tensors(wrap):
    torch = pytest.importorskip("torch")
    fn = kernel("saxpy_out_module", "saxpy_out")
    n = 4099
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.randn(n, device="cuda", generator=g)
    out = torch.full((n + PAD,), float("nan"), device="cuda")
    fn((n + 255) // 256, 256, wrap(x), wrap(y), wrap(out), n, 0.75)
    ref = (0.75 * x.double() + y.double()).float()
    torch.testing.assert_close(out[:n], ref, rtol=1e-6, atol=1e-6)
    assert torch.isnan(out[n:]).all()
    with pytest.raises(LaunchError, match="float64"):
        fn(1, 256, wrap(x.double()), wrap(y), wrap(out), n, 1.0)
    with pytest.raises(LaunchError, match="not C-contiguous"):
        fn(1, 256, wrap(out[::2]), wrap(y), wrap(out), 10, 1.0)


def test_torch_stream():
    torch = pytest.importorskip("torch")
    fn = kernel("saxpy_out_module", "saxpy_out")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(1000, device="cuda")
        out = torch.full((1000,), float("nan"), device="cuda")
        fn(4, 256, x, x, out, 1000, 2.0, stream=s)
        s.synchronize()
    torch.testing.assert_close(out, 3.0 * x, rtol=1e-6, atol=1e-6)


@pytest.mark.may_skip("CuPy is optional; torch and a hand-made array object cover the same paths")
@pytest.mark.parametrize("wrap", [lambda t: t, OnlyDLPack], ids=["cuda_array_interface", "dlpack"])
def test_cupy_arrays(wrap):
    cp = pytest.importorskip("cupy")
    fn = kernel("saxpy_out_module", "saxpy_out")
    n = 3001
    x = cp.asarray(ls.random_array(8, n))
    y = cp.asarray(ls.random_array(9, n))
    out = cp.full(n + PAD, cp.nan, dtype=cp.float32)
    fn((n + 255) // 256, 256, wrap(x), wrap(y), wrap(out), n, -2.0)
    host = cp.asnumpy(out)
    np.testing.assert_allclose(host[:n], saxpy_ref(-2.0, cp.asnumpy(x), cp.asnumpy(y)), rtol=1e-6, atol=1e-6)
    assert np.isnan(host[n:]).all()


def test_device_buffer_is_visible_to_torch():
    torch = pytest.importorskip("torch")
    a = ls.random_array(21, 64)
    buf = pf.DeviceBuffer.from_host(a)
    t = torch.as_tensor(buf, device="cuda")
    assert torch.equal(t.cpu(), torch.from_numpy(a))


# ---------------------------------------------------------------- timing

def test_benchmark_sanity():
    fn = kernel("spin_module", "spin")
    out = pf.DeviceBuffer.empty(32)
    light = pf.benchmark(fn, 1, 32, out, 10, warmup=3, repeat=20)
    heavy = pf.benchmark(fn, 1, 32, out, 100_000, warmup=1, repeat=5)
    for t, n in ((light, 20), (heavy, 5)):
        assert t.repeat == n and 0 < t.min_us <= t.median_us <= t.max_us and t.iqr_us >= 0
    assert heavy.median_us > 2 * light.median_us
    with pf.Stream() as s:
        on_stream = pf.benchmark(fn, 1, 32, out, 100_000, warmup=1, repeat=3, stream=s)
        assert on_stream.median_us > 2 * light.median_us
        with pf.EventTimer(s) as timer:
            fn(1, 32, out, 100_000, stream=s)
        assert timer.elapsed_us > 2 * light.median_us
    batched = pf.benchmark(lambda: fn(1, 32, out, 10), warmup=2, repeat=5, batch=10)
    assert batched.batch == 10 and batched.median_us > 0
