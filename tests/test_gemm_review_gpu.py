"""The GEMM schedules on the GPU as a user calls them: torch tensors of the element types a user has at hand,
weights that require grad, operands seen only through DLPack, split-K problems on two streams at once, a
changed element type after a kept plan, splits that are not a count, and a C over A's memory.  Each runs the
mma.sync schedule and the TMA + wgmma one (sm_90a)."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.int4 import pack_int4, random_int4
from ptxforge.schedules import Bf16Gemm, HopperGemm, Int4Gemm, Int8Gemm

pytestmark = pytest.mark.gpu

PATHS = ["mma_sync", "wgmma"]


def _torch():
    return pytest.importorskip("torch")


def _int8(path, m, n, k, operand="s8"):
    if path == "wgmma":
        return Int8Gemm.for_shape(m, n, k, target="sm_90a", hopper=True)
    return Int8Gemm.for_shape(m, n, k, target="sm_90", hopper=False, operand=operand)


def _packed_operands(m, n, k, rng):
    """Packed int4 A [M, K/2] and B [N, K/2] of random values."""
    return pack_int4(random_int4((m, k), rng)), pack_int4(random_int4((n, k), rng))


def _int4(path, m, n, k):
    if path == "wgmma":
        return Int4Gemm.for_shape(m, n, k, target="sm_90a", hopper=True)
    return Int4Gemm.for_shape(m, n, k, target="sm_90", hopper=False)


@pytest.mark.parametrize("path", PATHS)
def test_gpu_s8_on_uint8_tensors_matches_the_reference_of_the_same_bytes(path):
    """uint8 tensors for an s8 GEMM hold s8 values as the kernel reads them; `reference` of the same numpy bytes
    must agree with the device's C (it read them as 0..255 before)."""
    torch = _torch()
    m, n, k = 33, 72, 256
    g = _int8(path, m, n, k)
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    b = rng.integers(0, 256, (n, k), dtype=np.uint8)
    c = torch.full((m, n), -7, dtype=torch.int32, device="cuda")
    g.run(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), c)
    torch.cuda.synchronize()
    assert np.array_equal(c.cpu().numpy().astype(np.int64), g.reference(a, b))


def test_gpu_weights_that_require_grad_are_refused_by_name_and_the_detached_ones_run():
    """A bf16 weight that requires grad (an nn.Linear's) cannot be described by torch's array interface or DLPack:
    run() and a plan refuse it with ptxforge's own error, before any launch, and the detached tensor runs."""
    torch = _torch()
    m, n, k = 16, 256, 512
    g = Bf16Gemm.for_shape(m, n, k)
    rng = np.random.default_rng(6)
    a = torch.from_numpy(rng.standard_normal((m, k)).astype(np.float32)).to("cuda", torch.bfloat16)
    w = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32)).to("cuda", torch.bfloat16)
    w.requires_grad_(True)
    c = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
    for call in (lambda: g.run(a, w, c), lambda: g.plan(m, n, k)(a, w, c)):
        with pytest.raises(pf.PtxforgeError):
            call()
    g.run(a, w.detach(), c)
    want = a.float() @ w.detach().float().T
    torch.cuda.synchronize()
    assert torch.allclose(c, want, rtol=1e-2, atol=1e-2)
    for call in (lambda: g.run(a, w, c), lambda: g.plan(m, n, k)(a, w, c)):  # a kind the fast path has seen
        with pytest.raises(pf.PtxforgeError):
            call()


@pytest.mark.parametrize("splits", [0, -1, True, 2.0, "2"])
def test_gpu_splits_that_are_not_a_count_are_refused_on_device_operands(splits):
    torch = _torch()
    m, n, k = 16, 256, 1024
    g = _int8("wgmma", m, n, k)
    a = torch.ones((m, k), dtype=torch.int8, device="cuda")
    b = torch.ones((n, k), dtype=torch.int8, device="cuda")
    c = torch.zeros((m, n), dtype=torch.int32, device="cuda")
    for call in (lambda: g.run(a, b, c, splits=splits), lambda: g.plan(m, n, k, splits=splits)):
        with pytest.raises(pf.ValidationError, match="splits must be an int >= 1"):
            call()
    torch.cuda.synchronize()
    assert int(c.abs().sum()) == 0  # nothing was launched


@pytest.mark.parametrize("path", PATHS)
def test_gpu_int8_tensors_after_a_kept_uint8_plan_are_refused_as_unpacked(path):
    """A kept plan of packed uint8 operands must not take int8 tensors of the same shapes (unpacked values, one a
    byte) on its fast path."""
    torch = _torch()
    m, n, k = 40, 136, 512
    g = _int4(path, m, n, k)
    a, b = _packed_operands(m, n, k, np.random.default_rng(7))
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    c = torch.zeros((m, n), dtype=torch.int32, device="cuda")
    for _ in range(2):  # careful, then kept
        g.run(ta, tb, c)
    torch.cuda.synchronize()
    assert np.array_equal(c.cpu().numpy().astype(np.int64), g.reference(a, b))
    with pytest.raises(pf.ValidationError, match="uint8"):
        g.run(ta.view(torch.int8), tb.view(torch.int8), c)


class _DLPackOnly:
    """A GPU array seen only through DLPack (no __cuda_array_interface__, no data_ptr)."""

    def __init__(self, t):
        self._t = t
        self.shape = tuple(t.shape)

    def __dlpack__(self, *args, **kwargs):
        return self._t.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@pytest.mark.parametrize("path", PATHS)
def test_gpu_operands_seen_only_through_dlpack_run_call_after_call(path):
    torch = _torch()
    m, n, k = 20, 72, 256
    g = _int8(path, m, n, k)
    rng = np.random.default_rng(8)
    for call in range(3):
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (n, k), dtype=np.int8)
        c = torch.full((m, n), -7, dtype=torch.int32, device="cuda")
        g.run(_DLPackOnly(torch.from_numpy(a).cuda()), _DLPackOnly(torch.from_numpy(b).cuda()), _DLPackOnly(c))
        torch.cuda.synchronize()
        assert np.array_equal(c.cpu().numpy().astype(np.int64), g.reference(a, b)), f"call {call}"


def test_gpu_split_k_problems_on_two_streams_at_once_keep_their_own_workspaces():
    """A decode shape whose K is split in the kernel (the last unit of a tile adds the partial sums), run back to
    back on two torch streams with different operands: each stream's plan has its own workspace and counters,
    so both results are exact."""
    torch = _torch()
    m, n, k = 16, 4096, 14336
    g = _int4("wgmma", m, n, k)
    rng = np.random.default_rng(9)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    data = []
    for s in streams:
        a, b = _packed_operands(m, n, k, rng)
        with torch.cuda.stream(s):
            ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
            c = torch.full((m, n), -7, dtype=torch.int32, device="cuda")
        data.append((a, b, ta, tb, c, s))
    torch.cuda.synchronize()
    assert g.plan(m, n, k).splits > 1  # the shape this test is about
    for _ in range(5):
        for a, b, ta, tb, c, s in data:
            g.run(ta, tb, c, stream=s)
    torch.cuda.synchronize()
    for a, b, ta, tb, c, s in data:
        assert np.array_equal(c.cpu().numpy().astype(np.int64), g.reference(a, b))


@pytest.mark.parametrize("path", PATHS)
def test_gpu_a_c_over_the_memory_of_a_is_refused_before_launching(path):
    """C viewed over A's bytes (one allocation for both) would be written while other CTAs still read A: run() and
    a plan must refuse it by name, as they refuse such numpy arrays, and leave the memory as it was."""
    torch = _torch()
    m, n, k = 64, 64, 256
    g = _int8(path, m, n, k)
    whole = torch.randint(-128, 128, (m * k,), dtype=torch.int8, device="cuda")
    a = whole.view(m, k)
    c = whole.view(torch.int32)[:m * n].view(m, n)
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda")
    before = whole.clone()
    for call in (lambda: g.run(a, b, c), lambda: g.plan(m, n, k)(a, b, c)):
        with pytest.raises(pf.ValidationError, match="C overlaps A"):
            call()
    torch.cuda.synchronize()
    assert torch.equal(whole, before)


def test_gpu_hopper_schedules_are_what_for_shape_gives():
    """The wgmma path of these tests is the TMA + wgmma kernel (an H100/H200)."""
    assert isinstance(_int8("wgmma", 16, 256, 1024), HopperGemm)
    assert isinstance(_int4("wgmma", 16, 4096, 14336), HopperGemm)


@pytest.mark.parametrize("path", PATHS)
def test_gpu_operands_that_are_not_2_d_are_refused_by_name_without_a_c(path):
    """run(a, b) with no C allocates C from the operands' rows: a 0-d or 1-d GPU operand is refused as not 2-D
    (an IndexError before, for a 0-d one on the wgmma path)."""
    torch = _torch()
    m, n, k = 16, 64, 256
    g = _int8(path, m, n, k)
    b = torch.ones((n, k), dtype=torch.int8, device="cuda")
    for a in (torch.tensor(1, dtype=torch.int8, device="cuda"), torch.ones(k, dtype=torch.int8, device="cuda")):
        with pytest.raises(pf.ValidationError, match="2-D"):
            g.run(a, b)


@pytest.mark.parametrize("path", PATHS)
def test_gpu_a_run_on_numpy_operands_launches_on_the_stream_given(path):
    """numpy operands with stream= a torch side stream: copied in, launched and copied back in order on that
    stream, so C is whole when run() returns while other work keeps the default stream busy."""
    torch = _torch()
    m, n, k = 40, 136, 1024
    g = _int4(path, m, n, k)
    a, b = _packed_operands(m, n, k, np.random.default_rng(10))
    s = torch.cuda.Stream()
    busy = torch.empty((4096, 4096), device="cuda")
    for _ in range(3):
        busy = busy @ busy  # the default stream busy meanwhile
        c = g.run(a, b, stream=s)
        assert np.array_equal(c.astype(np.int64), g.reference(a, b))
    torch.cuda.synchronize()
