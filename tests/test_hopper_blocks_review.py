"""The Hopper building blocks met as a new user meets them: tensor maps, SmemTile and the mbarrier ring fed
numpy integers, bools, floats, out-of-range sizes and addresses, and the examples' command lines.  Each test
names the rule (the CUDA driver's for tensor maps, the PTX ISA's for descriptors and mbarriers) it holds the
block to.  CPU only."""

import numpy as np
import pytest

from ptxforge.builder import KernelBuilder
from ptxforge.errors import ValidationError
from ptxforge.hopper import MbarrierRing, SmemTile, WarpSpecialized, register_split
from ptxforge.runtime import TensorMap

from support.examples import load_example

BASE = 1 << 20


class FakeGpuArray:
    """A GPU array as another library hands it over: only `__cuda_array_interface__` (no driver needed)."""

    def __init__(self, shape, typestr, strides=None, ptr=BASE):
        self.__cuda_array_interface__ = dict(data=(ptr, False), shape=shape, typestr=typestr, strides=strides,
                                             version=3)


def im2col(ptr=BASE, **kw):
    args = dict(dtype="u16", global_dims=(16, 8, 8, 2), lower_corner=(-1, -1), upper_corner=(-1, -1),
                channels_per_pixel=16, pixels_per_column=64)
    args.update(kw)
    return TensorMap.im2col(ptr, **args)


# ------------------------------------------------------------------ tensor maps


def test_global_strides_may_be_a_numpy_array():
    # strides often come from numpy (a.strides[::-1][1:]); a 2-value array used to raise numpy's "truth value
    # of an array is ambiguous" ValueError
    t = TensorMap("f16", BASE, (128, 64, 4), (64, 32, 1), global_strides=np.array([256, 256 * 64]))
    assert t.global_strides == (256, 256 * 64) and all(type(s) is int for s in t.global_strides)


def test_base_takes_a_numpy_integer_and_refuses_a_bool():
    t = TensorMap("f16", np.uint64(BASE), (128, 64), (64, 32))
    assert t.base == BASE and type(t.base) is int
    assert TensorMap("f16", BASE, (128, 64), (64, 32)).with_base(np.int64(2 * BASE)).base == 2 * BASE
    for bad in (False, True, float(BASE), -16):
        with pytest.raises(ValidationError, match=r"base .*non-negative int"):
            TensorMap("f16", bad, (128, 64), (64, 32))


@pytest.mark.parametrize("name, bad", [("interleave", 16.0), ("interleave", False), ("swizzle", 128.0),
                                       ("swizzle", False), ("l2_promotion", 128.0), ("l2_promotion", False)])
def test_enumerated_options_refuse_floats_and_bools(name, bad):
    # the driver takes an enumerator: 16.0 or False is a slip (a float from arithmetic, a flag passed by
    # position), not a byte count; they used to be accepted and stored as given
    dims, box = ((8, 64, 4), (8, 32, 1)) if name == "interleave" else ((128, 64), (64, 32))
    with pytest.raises(ValidationError, match=name):
        TensorMap("f16", BASE, dims, box, **{name: bad})


def test_enumerated_options_take_numpy_integers_and_store_ints():
    t = TensorMap("f16", BASE, (8, 64, 4), (8, 32, 1), interleave=np.int64(16), swizzle=np.int32(32),
                  l2_promotion=np.uint16(256))
    assert (t.interleave, t.swizzle, t.l2_promotion) == (16, 32, 256)
    assert all(type(v) is int for v in (t.interleave, t.swizzle, t.l2_promotion))


def test_docstring_states_the_base_alignment_rule_the_check_applies():
    # 16-byte interleave keeps the 16-byte base alignment; only 32-byte interleave asks for 32
    TensorMap("f16", BASE + 16, (8, 64, 4), (8, 32, 1), interleave=16)
    assert "32 with 32-byte interleave" in TensorMap.__doc__


def test_from_array_refuses_a_dtype_that_does_not_divide_the_rows():
    # 33 int8 columns read as u16 are 16.5 elements: the map used to describe 16 and drop the last byte
    with pytest.raises(ValidationError, match=r"33 .*u16"):
        TensorMap.from_array(FakeGpuArray((64, 33), "|i1", strides=(48, 1)), (8, 8), dtype="u16")
    t = TensorMap.from_array(FakeGpuArray((64, 48), "|i1"), (8, 8), dtype="u16")
    assert t.global_dims == (24, 64) and t.global_strides == (48,)


def test_from_array_of_a_0d_array_says_what_rank_a_map_needs():
    with pytest.raises(ValidationError, match="rank 1..5"):
        TensorMap.from_array(FakeGpuArray((), "<f4"), (4,))


def test_im2col_counts_take_numpy_integers_and_refuse_bools():
    t = im2col(channels_per_pixel=np.int64(16), pixels_per_column=np.int32(64))
    assert (t.channels_per_pixel, t.pixels_per_column) == (16, 64) and type(t.channels_per_pixel) is int
    with pytest.raises(ValidationError, match="pixels_per_column"):
        im2col(pixels_per_column=True)
    with pytest.raises(ValidationError, match="channels_per_pixel"):
        im2col(channels_per_pixel=16.0)


def test_an_im2col_raw_pointer_may_be_a_numpy_integer():
    # a pointer from numpy (an offset table, a cupy .data.ptr cast) used to be "int64 is not a GPU array"
    assert im2col(ptr=np.int64(BASE)).base == BASE


def test_im2col_takes_a_single_corner_for_rank_3():
    t = TensorMap.im2col(BASE, dtype="u16", global_dims=(16, 8, 2), lower_corner=-1, upper_corner=-1,
                         channels_per_pixel=16, pixels_per_column=8)
    assert t.lower_corner == (-1,) and t.upper_corner == (-1,)


@pytest.mark.parametrize("kw", [dict(channels_per_pixel=4), dict(channels_per_pixel=32, swizzle=32)])
def test_im2col_errors_name_channels_per_pixel_not_a_box_the_caller_never_gave(kw):
    with pytest.raises(ValidationError, match="channels_per_pixel") as e:
        im2col(**kw)
    assert "box" not in str(e.value).split("\n")[0]


# ------------------------------------------------------------------ SmemTile


@pytest.mark.parametrize("dtype", ["f16x2", "bf16x2", "u16x2"])
def test_a_tile_of_packed_pairs_is_refused(dtype):
    # wgmma and TMA take scalar elements: an f16x2 tile was laid out as 32-bit elements, so its k-steps were
    # 8 pairs (k_elems 8) where an f16 tile's are 16 values
    with pytest.raises(ValidationError, match=dtype[:-2]):
        SmemTile(dtype, 64, 64)


def test_shared_addresses_take_numpy_integers_and_refuse_bools():
    t = SmemTile("s8", 128, 128)
    assert t.descriptor(np.int64(1024), 1) == t.descriptor(1024, 1)
    assert t.offset(1, 16, base=np.int64(128)) == t.offset(1, 16, base=128)
    assert (t.element_offsets(np.uint32(1024)) == t.element_offsets(1024)).all()
    for call in (lambda b: t.descriptor(b), lambda b: t.descriptor_fields(b), lambda b: t.offset(0, 0, base=b),
                 lambda b: t.element_offsets(b)):
        with pytest.raises(ValidationError, match="int"):
            call(False)
        with pytest.raises(ValidationError, match="int"):
            call(1024.0)


def test_a_tile_tensor_map_raw_pointer_may_be_a_numpy_integer():
    m = SmemTile("bf16", 128, 64).tensor_map(np.uint64(BASE), global_dims=(64, 512))
    assert m.base == BASE and m.box == (64, 128)


def test_an_element_index_must_be_an_int_inside_the_tile():
    t = SmemTile("s8", 64, 64, swizzle=64)
    assert t.offset(np.int64(3), np.int32(5)) == t.offset(3, 5)
    for r, c in ((1.5, 0), (0, 2.0), (64, 0), (0, -1)):
        with pytest.raises(ValidationError, match=r"0\.\.63"):
            t.offset(r, c)


def test_k_slice_takes_numpy_integers_and_refuses_floats_and_bools():
    t = SmemTile("s8", 128, 128)
    assert t.descriptor(0, np.int64(2)) == t.descriptor(0, 2)
    for bad in (1.0, True):
        with pytest.raises(ValidationError, match=r"k_slice .*int"):
            t.descriptor(0, bad)


def test_a_tile_taller_than_a_tma_box_says_so():
    # TMA boxes are at most 256 elements a side: a 512-row tile used to give tma_box (64, 512), which the
    # tensor map then refused as a box the caller never wrote
    t = SmemTile("bf16", 512, 64)
    for get in (lambda: t.tma_box, lambda: t.tma_copies, lambda: t.tma_copy_offset(0),
                lambda: t.tensor_map(BASE, global_dims=(64, 1024))):
        with pytest.raises(ValidationError, match=r"512 .*256"):
            get()
    t.descriptor(0)  # the wgmma side of such a tile is fine


def test_a_descriptor_for_a_tile_past_the_shared_window_is_refused():
    # the descriptor's 14-bit fields reach 256 KB; a 16 KB tile 1 KB below it would read past the window
    t = SmemTile("s8", 128, 128)
    with pytest.raises(ValidationError, match=r"256 KB"):
        t.descriptor((1 << 18) - 1024, 3)
    assert t.descriptor((1 << 18) - t.nbytes, 3)
    # a tile whose column atom does not fit the 14-bit byte-offset fields names the tile, not only the field
    with pytest.raises(ValidationError, match=r"2048 x 128"):
        SmemTile("s8", 2048, 128).descriptor(0)
    with pytest.raises(ValidationError, match=r"2048 x 128"):
        SmemTile("s8", 2048, 128).descriptor_template()


# ------------------------------------------------------------------ the mbarrier ring and warp specialization


def kernel(**kw):
    kw.setdefault("maxntid", 384)
    kw.setdefault("minnctapersm", 1)
    return KernelBuilder("k", target="sm_90a", **kw)


def test_ring_stages_take_numpy_integers_and_refuse_bools():
    assert MbarrierRing(kernel(), np.int64(4), 0).stages == 4
    with pytest.raises(ValidationError, match="stage"):
        MbarrierRing(kernel(), True, 0)
    assert MbarrierRing.nbytes(np.int64(3)) == 48
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValidationError, match="stage"):
            MbarrierRing.nbytes(bad)


def test_ring_refuses_a_base_that_is_not_8_byte_aligned():
    # an mbarrier object is 8 bytes, 8-byte aligned (PTX ISA); [4] assembles and faults on the device
    for bad in (4, -8):
        with pytest.raises(ValidationError, match="8-byte aligned"):
            MbarrierRing(kernel(), 2, bad)
    MbarrierRing(kernel(), 2, 1024).init()


def test_ring_barrier_of_a_stage_outside_the_ring_is_refused():
    ring = MbarrierRing(kernel(), 2, 0)
    assert str(ring.full(1)) == "[8]" and str(ring.empty(1)) == "[24]"
    for bad in (2, 5, -1):
        with pytest.raises(ValidationError, match=r"stage .* 0\.\.1"):
            ring.full(bad)
        with pytest.raises(ValidationError, match=r"stage .* 0\.\.1"):
            ring.release(bad)


@pytest.mark.parametrize("groups", [0, -1, True, 2.0])
def test_warp_specialized_refuses_a_consumer_count_below_one(groups):
    # 0 used to raise ZeroDivisionError, -1 made a "split" of 0 threads
    with pytest.raises(ValidationError, match="consumer_groups"):
        WarpSpecialized(kernel(maxntid=128), consumer_groups=groups)


@pytest.mark.parametrize("maxntid, groups", [(256, 2), (512, 2), ((128, 3, 1), 1)])
def test_warp_specialized_refuses_a_kernel_of_another_size(maxntid, groups):
    # the split is computed for 128 x (1 + consumer_groups) threads: with .maxntid 256 the third warpgroup
    # never runs, with 512 a fourth also takes the consumer branch and setmaxnreg.inc would wait forever
    with pytest.raises(ValidationError, match=rf"{128 * (1 + groups)}"):
        WarpSpecialized(kernel(maxntid=maxntid), consumer_groups=groups)
    WarpSpecialized(kernel(maxntid=(128, 1 + groups, 1)), consumer_groups=groups)
    WarpSpecialized(kernel(maxntid=None, reqntid=128 * (1 + groups)), consumer_groups=groups)


@pytest.mark.parametrize("args", [(128, 1, 0, 40, 232), (128, 1, 0, 256, 24, 100), (384, 1, 2, 40.0, 232),
                                  (384, 1, 2, 40, True), (384.0, 1, 2, 40, 232)])
def test_register_split_refuses_what_is_not_a_plan(args):
    *pos, = args
    kw = {"entry": pos.pop()} if len(pos) == 6 else {}
    with pytest.raises(ValidationError):
        register_split(*pos, **kw)


# ------------------------------------------------------------------ examples


def test_tma_copy_runs_the_stages_it_is_given_on_the_interpreter(monkeypatch):
    ex = load_example("hopper_tma_copy")
    seen = {}
    real = ex.run_cpu

    def spy(*a, **kw):
        seen.update(kw)
        return real(*a, **kw)
    monkeypatch.setattr(ex, "run_cpu", spy)
    assert ex.main(["--stages", "2"]) == 0
    assert seen.get("stages") == 2


@pytest.mark.parametrize("name, argv", [("hopper_tma_copy", ["--cols", "8193"]),
                                        ("tma_reduce", ["--cols", "1001"])])
def test_examples_refuse_rows_a_tensor_map_cannot_take_before_running(name, argv, capsys):
    # rows of whole 16-byte units (the driver's stride rule): a usage error, not a traceback from the GPU run
    ex = load_example(name)
    with pytest.raises(SystemExit) as e:
        ex.main(argv)
    assert e.value.code == 2
    assert "16" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["hopper_tma_copy", "hopper_wgmma_tile", "hopper_cluster_multicast", "tensormap_edit",
                                  "tma_reduce", "hopper_gemm_interp"])
def test_every_public_function_of_the_hopper_examples_has_a_docstring(name):
    import inspect
    ex = load_example(name)
    bare = [n for n, f in vars(ex).items() if not n.startswith("_") and inspect.isfunction(f)
            and f.__module__ == ex.__name__ and not (f.__doc__ or "").strip()]
    assert not bare, f"{name}: {bare}"


def test_ring_counts_take_numpy_integers_and_refuse_bools_and_floats():
    # numpy integers reached the instruction layer, which calls them immediates it does not allow
    k = kernel()
    ring = MbarrierRing(k, 2, 0, producer_arrivals=np.int64(1), consumer_arrivals=np.int32(8))
    ring.init()
    st = ring.producer_state()
    ring.expect_tx(st, np.int64(4096))
    with pytest.raises(ValidationError, match="nbytes"):
        ring.expect_tx(st, 4096.0)
    text = k.module().render().text
    assert "mbarrier.init.shared.b64 [16], 8;" in text and "[%r0], 0x1000;" in text
    for kw in (dict(consumer_arrivals=True), dict(producer_arrivals=2.0)):
        with pytest.raises(ValidationError, match=next(iter(kw))):
            MbarrierRing(kernel(), 2, 0, **kw)


def test_warp_specialized_register_counts_take_numpy_integers():
    # register_split took np.int64(40), then setmaxnreg refused it as "not a multiple of 8 in 24..256"
    k = kernel()
    ws = WarpSpecialized(k, np.int64(2), producer_regs=np.int64(40), consumer_regs=np.int32(232))
    with ws.producer():
        pass
    with ws.consumer():
        pass
    text = k.module().render().text
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in text and "setmaxnreg.inc.sync.aligned.u32 232;" in text
    assert type(ws.threads) is int and type(ws.consumer_regs) is int


@pytest.mark.parametrize("n", [8, 24])
def test_cluster_multicast_refuses_an_n_whose_half_tile_tma_cannot_land(n, capsys):
    # each CTA multicasts N/2 rows of B at N/2 x 128 bytes into the tile: a swizzled TMA box needs a 1024-byte
    # boundary, so N/2 must be a multiple of 8 rows; --n 8 and 24 (legal wgmma N) passed the example's checks
    # and the interpreter reports the copy misaligned, as the H200 misplaces it
    ex = load_example("hopper_cluster_multicast")
    with pytest.raises(ValidationError, match="16"):
        ex.build(n, 256)
    with pytest.raises(SystemExit) as e:
        ex.main(["--n", str(n)])
    assert e.value.code == 2 and "16" in capsys.readouterr().err


def test_smem_tile_swizzle_takes_numpy_integers_and_refuses_bools_and_floats():
    t = SmemTile("s8", 64, 128, swizzle=np.int64(128))
    assert t.swizzle == 128 and type(t.swizzle) is int
    for bad in (128.0, False, True):
        with pytest.raises(ValidationError, match="swizzle"):
            SmemTile("s8", 64, 128, swizzle=bad)
