"""On a GPU with torch: a launch given no ``stream=`` on torch tensors is ordered on torch's current stream.

Each test makes its operands on a torch side stream behind a long sleep, so a launch that went anywhere but that
stream (the legacy default stream does not wait for torch's non-blocking streams) would read them before they are
written and leave C as poisoned.  Then a CUDA graph captured through run() without ``stream=``."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import u32
from ptxforge.schedules import Int8Gemm, TileCopy

pytestmark = pytest.mark.gpu

SLEEP = 20_000_000  # GPU cycles (about 10 ms): far longer than any launch here takes to start and run


def _torch():
    return pytest.importorskip("torch")


def _gemm(path, m, n, k):
    if path == "wgmma":
        return Int8Gemm.for_shape(m, n, k, target="sm_90a", hopper=True)
    return Int8Gemm.for_shape(m, n, k, target="sm_90", hopper=False)


@pytest.mark.parametrize("path", ["mma_sync", "wgmma"])
def test_gpu_gemm_run_inside_a_torch_stream_context_is_ordered_on_it(path):
    """The careful first call and the kept plan's call both go to `s`: C is exact after the sleep and the copies
    queued before them on `s` (on the legacy stream they ran first and C stayed -7)."""
    torch = _torch()
    m, n, k = 64, 128, 256
    g = _gemm(path, m, n, k)
    s = torch.cuda.Stream()
    rng = np.random.default_rng(11)
    for _ in range(2):
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (n, k), dtype=np.int8)
        ha, hb = torch.from_numpy(a).pin_memory(), torch.from_numpy(b).pin_memory()
        with torch.cuda.stream(s):
            ta = torch.empty((m, k), dtype=torch.int8, device="cuda")
            tb = torch.empty((n, k), dtype=torch.int8, device="cuda")
            tc = torch.empty((m, n), dtype=torch.int32, device="cuda")
            torch.cuda._sleep(SLEEP)
            ta.copy_(ha, non_blocking=True)
            tb.copy_(hb, non_blocking=True)
            tc.fill_(-7)
            g.run(ta, tb, tc)
        s.synchronize()
        assert np.array_equal(tc.cpu().numpy().astype(np.int64), g.reference(a, b))


def test_gpu_a_plain_launch_and_a_tile_copy_inside_a_torch_stream_context_are_ordered_on_it():
    torch = _torch()
    k = pf.KernelBuilder("plus_one", target="sm_90")
    x, y = k.param_ptr("x", u32), k.param_ptr("y", u32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(y, off), k.add(k.ld(k.add(x, off), type=u32), 1))
    fn = pf.load(k.module())["plus_one"]
    count = 4096
    tc = TileCopy(40, 96, "s8")
    src = tc.random_source(3)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        tx = torch.empty(count, dtype=torch.int32, device="cuda")
        ty = torch.empty(count, dtype=torch.int32, device="cuda")
        tsrc = torch.empty(src.shape, dtype=torch.int8, device="cuda")
        tdst = torch.empty(tc.dst_shape, dtype=torch.int8, device="cuda")
        torch.cuda._sleep(SLEEP)
        tx.copy_(torch.arange(count, dtype=torch.int32))
        ty.fill_(-7)
        tsrc.copy_(torch.from_numpy(src))
        tdst.fill_(-7)
        fn(count // 128, 128, tx, ty, count)
        tc.run(tsrc, tdst)
    s.synchronize()
    assert np.array_equal(ty.cpu().numpy(), np.arange(count, dtype=np.int32) + 1)
    assert np.array_equal(tdst.cpu().numpy(), tc.reference(src, np.full(tc.dst_shape, -7, np.int8)))


def test_gpu_run_without_a_stream_is_captured_into_a_torch_graph():
    """Inside torch.cuda.graph the current stream is the capture stream: run() given no stream is captured (on the
    legacy stream it would break the capture), and replays exactly on new inputs copied into the same tensors."""
    torch = _torch()
    m, n, k = 64, 128, 256
    g = _gemm("wgmma", m, n, k)
    rng = np.random.default_rng(12)
    ta = torch.empty((m, k), dtype=torch.int8, device="cuda")
    tb = torch.empty((n, k), dtype=torch.int8, device="cuda")
    tc = torch.full((m, n), -7, dtype=torch.int32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # the first call makes the plan for this stream, outside the capture
        g.run(ta, tb, tc)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        g.run(ta, tb, tc)
    for _ in range(2):
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (n, k), dtype=np.int8)
        ta.copy_(torch.from_numpy(a))
        tb.copy_(torch.from_numpy(b))
        tc.fill_(-7)
        graph.replay()
        torch.cuda.synchronize()
        assert np.array_equal(tc.cpu().numpy().astype(np.int64), g.reference(a, b))
