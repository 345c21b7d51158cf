"""TMA on the interpreter: tile loads and stores from TensorMap arguments against numpy (every
swizzle, ragged and negative coordinates, out-of-bounds fill, rank 1..3), the tensor-map argument
checks, and the findings: expect_tx bytes that never arrive, a wait on the wrong phase, a TMA
store whose source is rewritten too early or was written without fence.proxy.async."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.errors import LaunchError, ValidationError
from ptxforge.hopper.layout import SmemTile
from ptxforge.isa.operands import Addr
from ptxforge.testing.interp_strategies import seeds


def load_probe(rank, box_bytes, *, expect=None, parity=0, dump=True, dst_offset=0, im2col=False):
    """Thread 0 loads the box at coordinates (params) into `tile` (+ dst_offset bytes); 128 threads dump
    it raw to `out`.  im2col=True: an im2col load, its rank - 2 offsets parameters after the coordinates
    (kernel `im2col_probe`)."""
    k = pf.KernelBuilder("im2col_probe" if im2col else "tma_probe", target="sm_90a", reqntid=128)
    tm = k.param_tensormap("tm")
    out = k.param_ptr("out", u32)
    coords = [k.param_value(f"c{i}", pf.s32) for i in range(rank)]
    offs = [k.cvt(k.param_value(f"o{i}", pf.u32), "u16") for i in range(rank - 2)] if im2col else None
    tile = k.shared("tile", max(box_bytes + dst_offset, 16), align=1024)
    bar = k.shared("bar", 8, align=8)
    tid = k.tid()
    lead = k.setp("eq", tid, 0)
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    k.bar_sync(0)
    with k.if_(lead):
        k.mbarrier_arrive(bar, expect_tx=box_bytes if expect is None else expect)  # <- expect
        dst = Addr(tile, dst_offset) if dst_offset else tile
        if im2col:
            k.tensor_load_im2col(dst, tm, coords, bar, offs)
        else:
            k.tensor_load(dst, tm, coords, bar)
    k.mbarrier_wait(bar, parity)  # <- wait
    if dump:
        for j in range(0, box_bytes, 128 * 16):
            o = k.add(k.shl(tid, 4), j)
            with k.if_(k.setp("lt", o, box_bytes)):
                v = k.ld(k.add(k.shared_base(tile), k.add(o, dst_offset)), type=pf.b32, space="shared", vec=4)
                k.st(k.add(out, k.cvt(o, "u64")), list(v), type=pf.b32)
    return k


def swizzled_image(dense: np.ndarray, swz: int) -> np.ndarray:
    """The shared-memory image of a dense box (bytes) landed with `swz`-byte swizzle: each 16-byte chunk
    XORed with its 128-byte row (a box at a 1024-byte boundary); unchanged without swizzle."""
    if not swz:
        return dense
    from ptxforge.isa.descriptors import apply_swizzle
    img = np.zeros(dense.size, np.uint8)
    for i, p in zip(range(0, dense.size, 16), apply_swizzle(np.arange(0, dense.size, 16), swz)):
        img[p:p + 16] = dense[i:i + 16]
    return img


def gpu_and_interp_load(k, a, box, kw, coords, nbytes):
    """(GPU dump, interpreter dump) of load probe `k` over host array `a` with the same tensor map."""
    import ptxforge as pf2
    from ptxforge.runtime import DeviceBuffer, TensorMap
    cpu, gpu = np.zeros(nbytes // 4, np.uint32), np.zeros(nbytes // 4, np.uint32)
    interp.run(k, block=128, args=[interp.host_tensor_map(a, box, **kw), cpu, *coords])
    m = k.module()
    pf2.load(m)[m.kernels[0].name](1, 128, TensorMap.from_array(DeviceBuffer.from_host(a), box, **kw), pf2.Out(gpu),
                                  *coords)
    return gpu, cpu


def expected_box(a, box, coords, fill=0):
    """Dense box (innermost dimension fastest) of numpy array `a` (outermost first) at coords (innermost first)."""
    return expected_strided_box(a, box, coords, (1,) * len(box), fill)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=seeds())
def test_tile_loads_match_numpy(data, seed):
    rng = np.random.default_rng(seed)
    dtype = data.draw(st.sampled_from([np.uint8, np.uint16, np.float32]))
    eb = np.dtype(dtype).itemsize
    swz = data.draw(st.sampled_from([0, 32, 64, 128]))
    rank = 2 if swz else data.draw(st.integers(1, 3))
    inner = swz // eb if swz else data.draw(st.sampled_from([16, 32, 48])) // eb * (1 if eb < 4 else 1)
    box = [inner] + [data.draw(st.integers(1, 12)) for _ in range(rank - 1)]
    shape = [data.draw(st.integers(1, 3)) * 16 // eb * data.draw(st.integers(1, 4))] + \
        [data.draw(st.integers(1, 20)) for _ in range(rank - 1)]  # innermost first; rows of 16-byte multiples
    a = (rng.integers(0, 250, tuple(reversed(shape))).astype(dtype))
    coords = [data.draw(st.integers(-b, n)) for b, n in zip(box, shape)]
    nbytes = int(np.prod(box)) * eb
    out = np.zeros(-(-nbytes // 4), np.uint32)
    k = load_probe(rank, nbytes)
    interp.run(k, block=128, args=[interp.host_tensor_map(a, box, swizzle=swz), out, *coords])
    want = expected_box(a, box, coords)
    if swz:
        img = SmemTile({1: "u8", 2: "u16", 4: "f32"}[eb], box[1], box[0], "K", swz).store(want) if box[1] % 8 == 0 \
            else None
        if img is None:  # the swizzle pattern of a partial 8-row group: XOR the 16-byte chunk with the row
            img = swizzled_image(want.reshape(-1).view(np.uint8), swz)
        assert np.array_equal(out.view(np.uint8)[:nbytes], img)
    else:
        assert np.array_equal(out.view(np.uint8)[:nbytes], want.reshape(-1).view(np.uint8))


def test_nan_fill_for_floats():
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    out = np.zeros(16 * 8, np.uint32)
    interp.run(load_probe(2, 16 * 8 * 4), block=128,
               args=[interp.host_tensor_map(a, (16, 8), oob_fill="nan"), out, 0, 0])
    got = out.view(np.float32).reshape(8, 16)
    assert np.array_equal(got[:4], a) and np.isnan(got[4:]).all()
    assert (out.reshape(8, 16)[4:] == 0x7FF77FF7).all()  # the H200's fill: 0x7FF7 in every two bytes


def store_probe(box, *, fence=True, early_write=False, wait=True):
    """128 threads fill the tile with tile[i] = base + i (u32), fence, barrier; thread 0 stores it at (c0, c1)."""
    k = pf.KernelBuilder("tma_store_probe", target="sm_90a", reqntid=128)
    tm = k.param_tensormap("tm")
    base = k.param_value("base", u32)
    c0, c1 = k.param_value("c0", pf.s32), k.param_value("c1", pf.s32)
    n = box[0] * box[1]
    tile = k.shared("tile", 4 * n, align=1024)
    tid = k.tid()
    for j in range(0, n, 128):
        i = k.add(tid, j)
        with k.if_(k.setp("lt", i, n)):
            k.st(k.add(k.shared_base(tile), k.shl(i, 2)), k.add(base, i), type=u32, space="shared")
    if fence:
        k.fence("fence.proxy.async.shared::cta" if fence is True else fence)
    k.bar_sync(0)
    lead = k.setp("eq", tid, 0)
    with k.if_(lead):
        k.tensor_store(tm, (c0, c1), tile)
        k.bulk_commit()
        if early_write:
            k.st(k.shared_base(tile), 7, type=u32, space="shared")  # <- early
        if wait:
            k.bulk_wait(0, read=True)
    return k


@pytest.mark.parametrize("c0, c1", [(0, 0), (24, 5), (-8, -3), (40, 9)])
def test_tile_store_writes_the_in_bounds_part_only(c0, c1):
    dst = np.full((12, 48), 0xDEADBEEF, dtype=np.uint32)
    box = (16, 8)
    interp.run(store_probe(box), block=128, args=[interp.host_tensor_map(dst, box), 1000, c0, c1])
    want = np.full_like(dst, 0xDEADBEEF)
    vals = (1000 + np.arange(box[0] * box[1], dtype=np.uint32)).reshape(box[1], box[0])
    for r in range(box[1]):
        for c in range(box[0]):
            y, x = c1 + r, c0 + c
            if 0 <= y < 12 and 0 <= x < 48:
                want[y, x] = vals[r, c]
    np.testing.assert_array_equal(dst, want)


def test_tensor_map_arguments_are_checked():
    a = np.zeros((8, 10), np.uint16)  # rows of 20 bytes: not a multiple of 16
    with pytest.raises(ValidationError, match="multiple of 16"):
        interp.host_tensor_map(a, (8, 8))
    b = np.zeros((8, 128), np.uint16)
    with pytest.raises(ValidationError, match="more than the 64-byte swizzle span"):
        interp.host_tensor_map(b, (64, 8), swizzle=64)
    with pytest.raises(ValidationError, match="1..256"):
        interp.host_tensor_map(b, (8, 300))
    k = pf.KernelBuilder("notmap", target="sm_90a")
    k.param_ptr("p", u32)
    with pytest.raises(LaunchError, match="not a tensor-map parameter"):
        interp.run(k, block=32, args=[interp.host_tensor_map(b, (8, 8))])


def test_expect_tx_bytes_that_never_arrive_are_a_deadlock_naming_the_expect_tx():
    a = np.zeros((8, 16), np.uint32)
    k = load_probe(2, 16 * 8 * 4, expect=16 * 8 * 4 + 16, dump=False)
    with pytest.raises(interp.InterpError, match=r"deadlock.*still expects 16 transaction bytes") as info:
        interp.run(k, block=128, args=[interp.host_tensor_map(a, (16, 8)), np.zeros(4, np.uint32), 0, 0])
    assert "<- expect" in str(info.value)


def test_copies_bringing_more_bytes_than_expect_tx_announced_are_reported_at_the_expect_tx():
    """The phase's arrivals are in and its copies overshoot the announced count: on the GPU the phase completes
    part-way through the box (a race with the rest) and the surplus lands in the next phase's count."""
    a = np.arange(8 * 16, dtype=np.uint32).reshape(8, 16)
    k = load_probe(2, 16 * 8 * 4, expect=16 * 8 * 4 - 64)
    with pytest.raises(interp.InterpError, match=r"completed 64 transaction bytes more than expect_tx announced") \
            as info:
        interp.run(k, block=128, args=[interp.host_tensor_map(a, (16, 8)), np.zeros(128, np.uint32), 0, 0])
    assert "<- expect" in str(info.value)
    # the exact count is clean
    out = np.zeros(128, np.uint32)
    interp.run(load_probe(2, 16 * 8 * 4), block=128, args=[interp.host_tensor_map(a, (16, 8)), out, 0, 0])
    np.testing.assert_array_equal(out, a.ravel())


def test_a_wait_on_the_wrong_phase_is_reported():
    a = np.zeros((8, 16), np.uint32)
    k = load_probe(2, 16 * 8 * 4, parity=1)
    with pytest.raises(interp.InterpError, match=r"wrong phase") as info:
        interp.run(k, block=128, args=[interp.host_tensor_map(a, (16, 8)), np.zeros(128, np.uint32), 0, 0])
    assert "<- wait" in str(info.value)


def test_rewriting_a_tma_store_source_before_wait_read_is_reported():
    dst = np.zeros((8, 16), np.uint32)
    with pytest.raises(interp.InterpError, match=r"TMA store is still reading") as info:
        interp.run(store_probe((16, 8), early_write=True), block=128,
                   args=[interp.host_tensor_map(dst, (16, 8)), 0, 0, 0])
    assert "<- early" in str(info.value)


def test_a_tma_store_of_unfenced_generic_writes_is_reported():
    dst = np.zeros((8, 16), np.uint32)
    with pytest.raises(interp.InterpError, match=r"\[proxy\]"):
        interp.run(store_probe((16, 8), fence=False), block=128, args=[interp.host_tensor_map(dst, (16, 8)), 0, 0, 0])


@pytest.mark.parametrize("fence, ok", [
    ("fence.proxy.async", True), ("fence.proxy.async.shared::cta", True), ("fence.proxy.async.shared::cluster", True),
    ("fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster", True),
    ("fence.proxy.async.global", False),  # orders global memory only
    ("fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster", False),  # async before generic
])
def test_which_proxy_fences_order_generic_shared_writes_before_a_tma_store(fence, ok):
    dst = np.zeros((8, 16), np.uint32)
    r = interp.run(store_probe((16, 8), fence=fence), block=128, check=False,
                   args=[interp.host_tensor_map(dst, (16, 8)), 0, 0, 0])
    assert r.ok == ok and bool(r.by_kind("proxy")) != ok, str(r)
    np.testing.assert_array_equal(dst, np.arange(128, dtype=np.uint32).reshape(8, 16))


def test_one_dimensional_bulk_store():
    k = pf.KernelBuilder("bulk_store", target="sm_90", reqntid=64)
    dst = k.param_ptr("dst", u32)
    buf = k.shared("buf", 256, align=16)
    tid = k.tid()
    k.st(k.add(k.shared_base(buf), k.shl(tid, 2)), k.mul(tid, 3), type=u32, space="shared")
    k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 0)):
        k.bulk_store(k.add(dst, 64), buf, 256)
        k.bulk_commit()
        k.bulk_wait(0, read=True)
    out = np.zeros(96, np.uint32)
    interp.run(k, block=64, args=[out])
    np.testing.assert_array_equal(out[16:80], 3 * np.arange(64))
    assert (out[:16] == 0).all() and (out[80:] == 0).all()
    line = [i.render() for i in k.finish().instructions if i.opcode == "cp.async.bulk"][0]
    assert line.startswith("cp.async.bulk.global.shared::cta.bulk_group [")
    pf.assemble(k.module(), backend="ptxas")
    with pytest.raises(ValidationError, match="multiple of 16"):
        k2 = pf.KernelBuilder("b", target="sm_90")
        k2.bulk_store(k2.param_ptr("p", u32), k2.shared("s", 64), 24)


def test_exiting_before_a_tma_store_was_read_is_reported():
    dst = np.zeros((8, 16), np.uint32)
    with pytest.raises(interp.InterpError, match=r"exits while its bulk \(TMA\) store"):
        interp.run(store_probe((16, 8), wait=False), block=128, args=[interp.host_tensor_map(dst, (16, 8)), 0, 0, 0])


def expected_strided_box(a, box, coords, strides, fill=0):
    """Dense box of numpy array `a` (outermost first) at coords with element strides (innermost first):
    ceil(box / stride) elements per dimension at c, c + stride, ...; out-of-bounds elements = fill."""
    ext = [-(-b // e) for b, e in zip(box, strides)]
    out = np.full(tuple(reversed(ext)), fill, dtype=a.dtype)
    for idx in np.ndindex(*out.shape):  # outermost first
        src = tuple(c + e * j for c, e, j in zip(coords[::-1], strides[::-1], idx))
        if all(0 <= x < n for x, n in zip(src, a.shape)):
            out[idx] = a[src]
    return out


@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=seeds())
def test_element_strided_loads_match_numpy(data, seed):
    rng = np.random.default_rng(seed)
    dtype = data.draw(st.sampled_from([np.uint8, np.uint16, np.float32]))
    eb = np.dtype(dtype).itemsize
    rank = data.draw(st.integers(2, 4))
    swz = data.draw(st.sampled_from([0, 32, 64, 128])) if rank == 2 else 0
    inner = swz // eb if swz else data.draw(st.sampled_from([16, 32])) // eb
    box = [inner] + [data.draw(st.integers(1, 9)) for _ in range(rank - 1)]
    strides = [1] + [data.draw(st.integers(1, 8)) for _ in range(rank - 1)]
    shape = [inner * data.draw(st.integers(1, 3))] + [data.draw(st.integers(1, 14)) for _ in range(rank - 1)]
    a = rng.integers(0, 250, tuple(reversed(shape))).astype(dtype)
    coords = [data.draw(st.integers(-b, n)) for b, n in zip(box, shape)]
    tmap = interp.host_tensor_map(a, box, swizzle=swz, element_strides=tuple(strides))
    nbytes = tmap.tmap.box_bytes
    want = expected_strided_box(a, box, coords, strides)
    assert want.nbytes == nbytes
    out = np.zeros(-(-nbytes // 4), np.uint32)
    interp.run(load_probe(rank, nbytes), block=128, args=[tmap, out, *coords])
    np.testing.assert_array_equal(out.view(np.uint8)[:nbytes], swizzled_image(want.reshape(-1).view(np.uint8), swz))


@pytest.mark.parametrize("interleave, dtype, swz", [(16, np.float16, 0), (16, np.uint8, 0), (16, np.float32, 0)])
def test_interleaved_loads_match_numpy(interleave, dtype, swz):
    """NC/xHWCx-style tensors: dimension 0 is the channel slice (interleave bytes), rank 3 and 4; the box
    (inside the tensor) lands densely, one slice per row (swizzled if asked)."""
    rng = np.random.default_rng(interleave)
    eb = np.dtype(dtype).itemsize
    c = interleave // eb
    for shape, box, strides, coords in [((c, 12, 6), (c, 8, 2), (1, 1, 1), (0, 3, 1)),
                                        ((c, 9, 7, 3), (c, 8, 3, 2), (1, 1, 1, 1), (0, 1, 3, 1))]:
        a = rng.integers(0, 120, tuple(reversed(shape))).astype(dtype)
        tmap = interp.host_tensor_map(a, box, interleave=interleave, swizzle=swz, element_strides=strides)
        nbytes = tmap.tmap.box_bytes
        out = np.zeros(nbytes // 4, np.uint32)
        interp.run(load_probe(len(shape), nbytes), block=128, args=[tmap, out, *coords])
        dense = expected_strided_box(a, box, coords, strides).reshape(-1).view(np.uint8)
        np.testing.assert_array_equal(out.view(np.uint8), swizzled_image(dense, swz))


def test_element_strided_store_writes_every_other_row():
    dst = np.full((12, 16), 0xDEADBEEF, dtype=np.uint32)
    box = (16, 8)
    tmap = interp.host_tensor_map(dst, box, element_strides=(1, 2))
    k = store_probe((16, 4))  # the box moves ceil(8 / 2) = 4 rows
    interp.run(k, block=128, args=[tmap, 500, 0, 3])
    want = np.full_like(dst, 0xDEADBEEF)
    vals = (500 + np.arange(64, dtype=np.uint32)).reshape(4, 16)
    for j in range(4):
        if 3 + 2 * j < 12:
            want[3 + 2 * j] = vals[j]
    np.testing.assert_array_equal(dst, want)


def test_an_interleaved_box_narrower_than_its_slice_is_refused():
    a = np.zeros((4, 8, 8), np.uint16)  # slices of 8 x 2 = 16 bytes
    tmap = interp.host_tensor_map(a, (4, 8, 1), interleave=16)  # 8-byte box rows
    with pytest.raises(interp.InterpUnsupported, match="box row is 8 bytes"):
        interp.run(load_probe(3, 64), block=128, args=[tmap, np.zeros(16, np.uint32), 0, 0, 0])


_GPU_MAPS = [  # (numpy shape outermost first, dtype, box, kwargs, coords)
    ((14, 48), np.uint8, (16, 9), dict(element_strides=(1, 3)), (16, -2)),
    ((6, 10, 32), np.uint16, (32, 4, 3), dict(element_strides=(1, 2, 2), swizzle=64), (0, 7, -1)),
    ((9, 64), np.uint16, (64, 8), dict(element_strides=(1, 5), swizzle=128), (0, 1)),
    # interleaved boxes inside the tensor, unit element strides (the interpreter refuses the rest)
    ((6, 12, 8), np.float16, (8, 8, 2), dict(interleave=16), (0, 3, 1)),
]


def test_a_32_byte_interleaved_map_is_refused():
    a = np.zeros((6, 12, 32), np.uint8)
    tmap = interp.host_tensor_map(a, (32, 8, 2), interleave=32, swizzle=32)
    with pytest.raises(interp.InterpUnsupported, match="32-byte interleaved"):
        interp.run(load_probe(3, tmap.tmap.box_bytes), block=128,
                   args=[tmap, np.zeros(tmap.tmap.box_bytes // 4, np.uint32), 0, 4, 2])


def test_an_interleaved_map_with_element_strides_is_refused():
    """Interleave with element strides > 1 faulted on the H200 in a probe that the interpreter ran: not
    modelled, so refused with the reason."""
    a = np.zeros((3, 7, 9, 8), np.uint16)
    tmap = interp.host_tensor_map(a, (8, 8, 3, 2), interleave=16, element_strides=(1, 2, 1, 1))
    with pytest.raises(interp.InterpUnsupported, match="element strides"):
        interp.run(load_probe(4, tmap.tmap.box_bytes), block=128,
                   args=[tmap, np.zeros(tmap.tmap.box_bytes // 4, np.uint32), 0, 1, 3, 1])


def test_an_interleaved_box_reaching_outside_the_tensor_is_refused():
    """On the H200 an interleaved box past the second dimension read the next plane's rows instead of
    zeros: not modelled, so refused with the reason."""
    a = np.zeros((6, 12, 8), np.float16)
    tmap = interp.host_tensor_map(a, (8, 8, 2), interleave=16)
    with pytest.raises(interp.InterpUnsupported, match="reaching outside"):
        interp.run(load_probe(3, tmap.tmap.box_bytes), block=128,
                   args=[tmap, np.zeros(tmap.tmap.box_bytes // 4, np.uint32), 0, 5, -1])


@pytest.mark.gpu
@pytest.mark.parametrize("shape, dtype, box, kw, coords", _GPU_MAPS)
def test_strided_and_interleaved_loads_match_the_gpu_bit_for_bit(shape, dtype, box, kw, coords):
    """The same TMA load on the H200 and the interpreter: element strides, 16/32-byte interleave, swizzle."""
    a = np.random.default_rng(len(shape)).integers(0, 200, shape).astype(dtype)
    nbytes = interp.host_tensor_map(a, box, **kw).tmap.box_bytes
    gpu, cpu = gpu_and_interp_load(load_probe(len(shape), nbytes), a, box, kw, coords, nbytes)
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.gpu
def test_element_strided_store_matches_the_gpu_bit_for_bit():
    import ptxforge as pf2
    from ptxforge.runtime import DeviceBuffer, TensorMap
    dst = np.full((12, 16), 0xDEADBEEF, dtype=np.uint32)
    cpu = dst.copy()
    k = store_probe((16, 4))
    interp.run(k, block=128, args=[interp.host_tensor_map(cpu, (16, 8), element_strides=(1, 2)), 500, 0, 3])
    d = DeviceBuffer.from_host(dst)
    m = k.module()
    pf2.load(m)[m.kernels[0].name](1, 128, TensorMap.from_array(d, (16, 8), element_strides=(1, 2)), 500, 0, 3)
    np.testing.assert_array_equal(d.to_host(), cpu)


@pytest.mark.parametrize("shape, dtype, box, kw, coords", _GPU_MAPS)
def test_the_gpu_cases_run_on_the_interpreter_and_assemble(shape, dtype, box, kw, coords):
    """The device cases above, checked against numpy on the CPU and assembled for sm_90a."""
    a = np.random.default_rng(len(shape)).integers(0, 200, shape).astype(dtype)
    host = interp.host_tensor_map(a, box, **kw)
    nbytes = host.tmap.box_bytes
    k = load_probe(len(shape), nbytes)
    out = np.zeros(nbytes // 4, np.uint32)
    interp.run(k, block=128, args=[host, out, *coords])
    dense = expected_strided_box(a, tuple(box), tuple(coords), host.tmap.element_strides).reshape(-1).view(np.uint8)
    np.testing.assert_array_equal(out.view(np.uint8), swizzled_image(dense, kw.get("swizzle", 0)))
    assert pf.assemble(k.module(), backend="ptxas")


@pytest.mark.parametrize("swz", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 3, 6])
def test_a_swizzled_box_off_a_1024_byte_boundary_is_reported(swz, rows):
    """A swizzled box 128 x rows bytes past a 1024-byte boundary: on the H200 it did not land at its
    address, so the interpreter reports the destination instead of guessing a layout."""
    a = np.random.default_rng(rows).integers(0, 255, (16, swz)).astype(np.uint8)
    out = np.zeros(swz * 16 // 4, np.uint32)
    with pytest.raises(interp.InterpError, match=r"\[misaligned\].*1024-byte aligned"):
        interp.run(load_probe(2, swz * 16, dst_offset=128 * rows), block=128,
                   args=[interp.host_tensor_map(a, (swz, 16), swizzle=swz), out, 0, 0])


@pytest.mark.gpu
@pytest.mark.parametrize("swz", [32, 64, 128])
@pytest.mark.parametrize("blocks", [1, 2])
def test_a_swizzled_load_at_a_later_1024_byte_boundary_matches_the_gpu(swz, blocks):
    a = np.random.default_rng(blocks).integers(0, 255, (16, swz)).astype(np.uint8)
    k = load_probe(2, swz * 16, dst_offset=1024 * blocks)
    gpu, cpu = gpu_and_interp_load(k, a, (swz, 16), dict(swizzle=swz), (0, 0), swz * 16)
    np.testing.assert_array_equal(gpu, cpu)
    np.testing.assert_array_equal(cpu.view(np.uint8), SmemTile("u8", 16, swz, "K", swz).store(a))


@pytest.mark.parametrize("op", ["store", "reduce"])
def test_a_store_or_reduction_with_the_wrong_number_of_coordinates_is_reported(op):
    """Three coordinates for a rank-2 map: the load reports it, and so do the tile store and the TMA reduction."""
    k = pf.KernelBuilder(f"rank_{op}", target="sm_90a", reqntid=32)
    tm = k.param_tensormap("tm")
    tile = k.shared("tile", 1024, align=128)
    with k.if_(k.setp("eq", k.tid(), 0)):
        if op == "store":
            k.tensor_store(tm, [0, 0, 0], tile)
        else:
            k.tensor_reduce(tm, [0, 0, 0], tile, "add")
        k.bulk_commit()
        k.bulk_wait(0, read=True)
    a = np.zeros((8, 32), np.uint32)
    r = interp.run(k.module(), block=32, args=[interp.host_tensor_map(a, (32, 8))], check=False)
    assert any("3 coordinates for a rank-2 tensor map" in f.message for f in r.by_kind("oob")), str(r)
    assert not a.any()
