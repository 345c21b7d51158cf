"""The runtime's edges on a real GPU: one host array with two policies reaches the kernel with its values, a
float for a .b32 parameter arrives as its bit pattern, a .b128 parameter arrives whole, a closed Stream is
refused, and a module forgotten by the cache is unloaded only once nothing can launch its kernels."""

import gc
import weakref

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.errors import LaunchError
from ptxforge.runtime import cache as C
from ptxforge.runtime import loader as L

pytestmark = pytest.mark.gpu

HEAD = ".version 8.3\n.target sm_90\n.address_size 64\n"

TIMES_TEN = HEAD + """
.visible .entry times_ten(.param .u64 out, .param .u64 inp)
{
  .reg .b64 %rd<4>;
  .reg .b32 %r<2>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [inp];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd1, %rd1, %rd3;
  add.s64 %rd2, %rd2, %rd3;
  ld.global.f32 %f1, [%rd2];
  mul.f32 %f2, %f1, 0f41200000;
  st.global.f32 [%rd1], %f2;
  ret;
}
"""

STORE_B32 = HEAD + """
.visible .entry store_b32(.param .u64 out, .param .b32 a)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [out];
  ld.param.b32 %r1, [a];
  cvta.to.global.u64 %rd1, %rd1;
  st.global.b32 [%rd1], %r1;
  ret;
}
"""

STORE_B128 = HEAD + """
.visible .entry store_b128(.param .u64 out, .param .b128 x)
{
  .reg .b64 %rd<4>;
  .reg .b128 %q;
  ld.param.u64 %rd1, [out];
  ld.param.b128 %q, [x];
  mov.b128 {%rd2, %rd3}, %q;
  cvta.to.global.u64 %rd1, %rd1;
  st.global.u64 [%rd1], %rd2;
  st.global.u64 [%rd1+8], %rd3;
  ret;
}
"""


def _sm90_or_skip():
    from ptxforge.runtime import driver
    if driver.device_info().sm < 90:
        pytest.skip("these kernels target sm_90")


@pytest.mark.parametrize("order", ["out first", "in first"])
def test_gpu_out_then_in_of_one_array_reads_its_values(order):
    _sm90_or_skip()
    fn = pf.load(TIMES_TEN)["times_ten"]
    a = np.arange(4, dtype=np.float32)
    fn(1, 4, *((pf.Out(a), a) if order == "out first" else (pf.InOut(a), pf.Out(a))))
    np.testing.assert_array_equal(a, [0, 10, 20, 30])
    with pytest.raises(LaunchError, match="overlapping host memory"):
        fn(1, 4, a, a.reshape(2, 2))


@pytest.mark.parametrize("value,expect", [(1.0, 1.0), (-2.5, -2.5), (np.float64(0.1), np.float32(0.1))])
def test_gpu_a_float_for_a_b32_parameter_is_its_bit_pattern(value, expect):
    _sm90_or_skip()
    fn = pf.load(STORE_B32)["store_b32"]
    out = np.zeros(1, np.float32)
    fn(1, 1, out, value)
    assert out[0] == expect


def test_gpu_a_b128_parameter_reaches_the_kernel():
    _sm90_or_skip()
    fn = pf.load(STORE_B128)["store_b128"]
    out = np.zeros(2, np.uint64)
    fn(1, 1, out, (0x0123456789ABCDEF << 64) | 0xFEDCBA9876543210)
    assert [int(x) for x in out] == [0xFEDCBA9876543210, 0x0123456789ABCDEF]
    fn(1, 1, out, bytes(range(16)))
    assert out.tobytes() == bytes(range(16))


def test_gpu_a_closed_stream_refuses_use():
    _sm90_or_skip()
    fn = pf.load(STORE_B32)["store_b32"]
    buf = pf.DeviceBuffer.empty(1, np.float32)
    s = pf.Stream()
    fn(1, 1, buf, 2.0, stream=s)
    bound = fn.bind(1, 1, buf, 3.0, stream=s)
    bound.launch()
    s.synchronize()
    assert buf.to_host()[0] == 3.0
    s.close()
    for use in (lambda: fn(1, 1, buf, 1.0, stream=s), bound.launch, s.synchronize, s.query,
                lambda: buf.to_host(stream=s)):
        with pytest.raises(LaunchError, match="closed"):
            use()
    assert buf.to_host()[0] == 3.0


def test_gpu_a_forgotten_module_is_unloaded_but_its_kernels_kept_running(monkeypatch):
    _sm90_or_skip()
    unloaded = []
    real_unload = L._unload

    def recording(handle):
        unloaded.append(int(handle))
        real_unload(handle)
    monkeypatch.setattr(L, "_unload", recording)  # (finalizers made from now on call it)
    text = STORE_B32.replace("store_b32", "store_b32_forgotten")
    fn = pf.load(text, cache=False)["store_b32_forgotten"]
    bound = pf.load(text, cache=False)["store_b32_forgotten"].bind(1, 1, np.zeros(1, np.float32), 1.0)
    dropped = weakref.ref(pf.load(text, cache=False))
    C.clear_memory_cache()
    gc.collect()
    assert dropped() is None and len(unloaded) == 1  # nothing referred to it
    out = np.zeros(1, np.float32)
    fn(1, 1, out, 5.0)  # its module is still loaded: the kernel runs
    bound.launch()
    pf.synchronize()
    assert out[0] == 5.0 and len(unloaded) == 1
    module = weakref.ref(fn.module)
    del fn
    gc.collect()
    assert module() is None and len(unloaded) == 2
    bound.close()
    del bound
    gc.collect()
    assert len(unloaded) == 3
    again = pf.load(text)["store_b32_forgotten"]  # a fresh load after all that works
    again(1, 1, out, 6.0)
    assert out[0] == 6.0
