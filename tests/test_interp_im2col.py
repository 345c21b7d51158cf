"""im2col tensor maps and loads: the Python-side checks of `TensorMap.im2col`, the instruction
form (assembled for sm_90a), and the interpreter against a numpy im2col written out loop by loop;
on the device, the H200 against the interpreter bit for bit."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.errors import ValidationError
from ptxforge.isa.async_copy import bulk_tensor_g2s_im2col
from ptxforge.runtime import TensorMap
from ptxforge.testing.interp_strategies import seeds

BASE = 1 << 20


def im2col_probe(rank, nbytes):
    """Thread 0 issues one im2col load (coords and offsets are parameters); 128 threads dump the tile."""
    from test_interp_tma import load_probe
    return load_probe(rank, nbytes, im2col=True)


def numpy_im2col(x, lower, upper, cpp, ppc, coords, offsets, strides=None):
    """The pixels an im2col load moves, by explicit loops: x is (N, (D, (H,)) W, C); returns (ppc, cpp)."""
    sp = x.ndim - 2
    spatial = x.shape[1:-1][::-1]  # W, H, D
    strides = strides or (1,) * sp
    pos = [list(range(lower[j], spatial[j] + upper[j], strides[j])) for j in range(sp)]
    grid = []  # every (n, k_D, k_H, k_W) in the box's order, W fastest
    for n in range(x.shape[0] + ppc):
        for idx in np.ndindex(*[len(p) for p in pos[::-1]]):
            grid.append((n,) + idx)
    start = grid.index((coords[-1],) + tuple(pos[j].index(coords[1 + j]) for j in reversed(range(sp))))
    out = np.zeros((ppc, cpp), x.dtype)
    for p in range(ppc):
        n, *ks = grid[start + p]
        where = [pos[j][ks[sp - 1 - j]] + offsets[j] for j in range(sp)]  # W, H, D
        for ci in range(cpp):
            ch = coords[0] + ci
            if n < x.shape[0] and ch < x.shape[-1] and all(0 <= w < s for w, s in zip(where, spatial)):
                out[p, ci] = x[(n,) + tuple(where[::-1]) + (ch,)]
    return out


@pytest.mark.parametrize("kw, msg", [
    (dict(global_dims=(64, 9)), "rank 3..5"),
    (dict(channels_per_pixel=0), "channels_per_pixel"),
    (dict(pixels_per_column=1025), "pixels_per_column"),
    (dict(lower_corner=(-1,)), "2 value"),
    (dict(lower_corner=(-129, 0)), r"\[-128, 127\]"),
    (dict(upper_corner=(-10, 0)), "empty"),
    (dict(channels_per_pixel=4, dtype="f16"), "multiple of 16"),
    (dict(swizzle=64), "swizzle span"),
])
def test_im2col_maps_are_checked(kw, msg):
    args = dict(dtype="f16", global_dims=(64, 9, 14, 4), lower_corner=(-1, -1), upper_corner=(-1, -1),
                channels_per_pixel=64, pixels_per_column=64)
    args.update(kw)
    with pytest.raises(ValidationError, match=msg):
        TensorMap.im2col(BASE, **args)


def test_the_isa_form_is_checked_and_assembles():
    with pytest.raises(ValidationError, match="3 to 5 coordinates"):
        bulk_tensor_g2s_im2col(None, None, (0, 0), None, ())
    k = im2col_probe(4, 64 * 16)
    text = str(k.module().render())
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes" in text
    assert pf.assemble(k.module(), backend="ptxas")
    k2 = pf.KernelBuilder("bad", target="sm_90a")
    with pytest.raises(ValidationError, match="takes 2 im2col offset"):
        k2.tensor_load_im2col(k2.shared("t", 64), k2.param_tensormap("tm"), (0, 0, 0, 0), k2.shared("b", 8), (1,))


@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=seeds())
def test_im2col_loads_match_numpy(data, seed):
    rng = np.random.default_rng(seed)
    rank = data.draw(st.integers(3, 5))
    sp = rank - 2
    dtype = data.draw(st.sampled_from([np.uint8, np.uint16]))
    eb = np.dtype(dtype).itemsize
    cpp = data.draw(st.sampled_from([16, 32])) // eb
    C = cpp * data.draw(st.integers(1, 2)) + data.draw(st.sampled_from([0, 16 // eb]))
    spatial = [data.draw(st.integers(2, 7)) for _ in range(sp)]  # W, H, D
    N = data.draw(st.integers(1, 3))
    x = rng.integers(1, 250, (N,) + tuple(spatial[::-1]) + (C,)).astype(dtype)
    lower = [data.draw(st.integers(-2, 1)) for _ in range(sp)]
    upper = [data.draw(st.integers(-2, 1)) for _ in range(sp)]
    if any(spatial[j] - 1 + upper[j] < lower[j] for j in range(sp)):
        return
    strides = [data.draw(st.integers(1, 2)) for _ in range(sp)]
    ppc = data.draw(st.integers(1, 40))
    hm = interp.host_im2col_map(x, lower_corner=lower, upper_corner=upper, channels_per_pixel=cpp,
                                pixels_per_column=ppc, element_strides=(1,) + tuple(strides) + (1,))
    pos = [hm.tmap.box_positions(j) for j in range(sp)]
    base = [data.draw(st.sampled_from(list(p))) for p in pos]
    coords = [data.draw(st.integers(0, C - 1))] + base + [data.draw(st.integers(0, N - 1))]
    offsets = [data.draw(st.integers(0, 3)) for _ in range(sp)]
    nbytes = hm.tmap.box_bytes
    out = np.zeros(-(-nbytes // 4), np.uint32)
    interp.run(im2col_probe(rank, nbytes), block=128, args=[hm, out, *coords, *offsets])
    want = numpy_im2col(x, lower, upper, cpp, ppc, coords, offsets, strides)
    np.testing.assert_array_equal(out.view(np.uint8)[:nbytes], want.reshape(-1).view(np.uint8))


def test_a_filter_base_outside_the_box_is_reported():
    x = np.zeros((1, 6, 6, 16), np.uint8)
    hm = interp.host_im2col_map(x, lower_corner=(0, 0), upper_corner=(-2, -2), channels_per_pixel=16,
                                pixels_per_column=8)
    with pytest.raises(interp.InterpError, match=r"\[oob\].*not a position of the im2col bounding box"):
        interp.run(im2col_probe(4, 128), block=128, args=[hm, np.zeros(32, np.uint32), 0, 5, 0, 0, 0, 0])
    with pytest.raises(interp.InterpError, match=r"\[oob\].*must each be in 0..255"):
        interp.run(im2col_probe(4, 128), block=128, args=[hm, np.zeros(32, np.uint32), 0, 1, 0, 0, 256, 0])


def test_an_im2col_map_for_a_tile_copy_is_reported():
    from test_interp_tma import load_probe
    x = np.zeros((1, 6, 6, 16), np.uint8)
    hm = interp.host_im2col_map(x, lower_corner=(0, 0), upper_corner=(0, 0), channels_per_pixel=16,
                                pixels_per_column=8)
    with pytest.raises(interp.InterpError, match=r"\[oob\].*a tile copy needs a tiled tensor map"):
        interp.run(load_probe(4, 128), block=128, args=[hm, np.zeros(32, np.uint32), 0, 0, 0, 0])


_GPU_CASES = [  # (shape N,(D,(H,))W,C; dtype; lower; upper; cpp; ppc; strides; coords; offsets)
    ((2, 9, 14 - 5, 64), np.uint16, (-1, -1), (-1, -1), 64, 64, (1, 1), (0, 7, 4, 0), (0, 0)),
    ((2, 7, 7, 32), np.uint8, (0, 0), (-2, -2), 32, 40, (1, 1), (0, 0, 1, 1), (2, 1)),
    ((1, 8, 8, 16), np.uint16, (-1, -1), (-1, -1), 8, 24, (2, 2), (8, 1, -1, 0), (1, 1)),
    ((3, 20, 32), np.uint8, (-2,), (1,), 32, 50, (1,), (0, -1, 1), (3,)),
    ((1, 3, 4, 5, 16), np.uint8, (-1, 0, 0), (0, -1, -1), 16, 30, (1, 1, 1), (0, 2, 1, 0, 0), (1, 0, 1)),
]


def _case_args(case):
    shape, dtype, lower, upper, cpp, ppc, strides, coords, offsets = case
    x = np.random.default_rng(len(shape) + ppc).integers(1, 250, shape).astype(dtype)
    kw = dict(lower_corner=lower, upper_corner=upper, channels_per_pixel=cpp, pixels_per_column=ppc,
              element_strides=(1,) + tuple(strides) + (1,))
    return x, kw, list(coords), list(offsets)


@pytest.mark.parametrize("case", _GPU_CASES)
def test_the_device_cases_match_numpy_on_the_interpreter(case):
    x, kw, coords, offsets = _case_args(case)
    hm = interp.host_im2col_map(x, **kw)
    out = np.zeros(hm.tmap.box_bytes // 4, np.uint32)
    interp.run(im2col_probe(x.ndim, hm.tmap.box_bytes), block=128, args=[hm, out, *coords, *offsets])
    want = numpy_im2col(x, kw["lower_corner"], kw["upper_corner"], kw["channels_per_pixel"],
                        kw["pixels_per_column"], coords, offsets, kw["element_strides"][1:-1])
    np.testing.assert_array_equal(out.view(np.uint8), want.reshape(-1).view(np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("case", _GPU_CASES)
def test_im2col_loads_match_the_gpu_bit_for_bit(case):
    from ptxforge.runtime import DeviceBuffer
    x, kw, coords, offsets = _case_args(case)
    hm = interp.host_im2col_map(x, **kw)
    nbytes = hm.tmap.box_bytes
    k = im2col_probe(x.ndim, nbytes)
    cpu, gpu = np.zeros(nbytes // 4, np.uint32), np.zeros(nbytes // 4, np.uint32)
    interp.run(k, block=128, args=[hm, cpu, *coords, *offsets])
    d = DeviceBuffer.from_host(x)
    m = k.module()
    pf.load(m)[m.kernels[0].name](1, 128, TensorMap.im2col(d, **kw), pf.Out(gpu), *coords, *offsets)
    np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_the_reader_reads_the_im2col_load_back(rank):
    """The im2col tensor load (offsets brace list, .im2col mode) parses strictly into the same instruction:
    an equal module and byte-equal PTX."""
    from ptxforge.parse import parse
    from ptxforge.parse.equality import same_module
    m = im2col_probe(rank, 256).module()
    again = parse(m.ptx)
    assert again.ptx == m.ptx
    assert same_module(again, m)
