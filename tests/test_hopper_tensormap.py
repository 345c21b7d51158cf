"""TensorMap checks (no driver needed) and the by-value tensor-map parameter."""

import pytest

from ptxforge.builder import KernelBuilder
from ptxforge.errors import ValidationError
from ptxforge.hopper import SmemTile
from ptxforge.runtime import TensorMap
from ptxforge.runtime.launch import layout, resolve

BASE = 1 << 20


def tm(**kw):
    args = dict(dtype="s8", base=BASE, global_dims=(256, 64), box=(128, 64), swizzle=128)
    args.update(kw)
    return TensorMap(**args)


def test_defaults_dense_strides_and_box_bytes():
    t = tm()
    assert t.global_strides == (256,) and t.rank == 2 and t.box_bytes == 128 * 64
    assert TensorMap("bf16", BASE, (64, 8, 3), (64, 8, 1)).global_strides == (128, 1024)


@pytest.mark.parametrize("kw,msg", [
    (dict(base=BASE + 8), "16-byte aligned"),
    (dict(base=BASE + 16, interleave=32, swizzle=32, global_dims=(32, 8, 4), box=(32, 8, 1)), "32-byte aligned"),
    (dict(interleave=16, swizzle=0, box=(16, 64)), "rank 3..5"),
    (dict(interleave=32, swizzle=0, global_dims=(32, 8, 4), box=(32, 8, 1)), "needs swizzle 32"),
    (dict(interleave=32, swizzle=32, global_dims=(16, 8, 4), global_strides=(16, 128), box=(16, 8, 1)),
     "multiple of 32 with 32-byte interleave"),
    (dict(element_strides=(2, 1)), "no traversal stride in dimension 0 .the driver ignores this value"),
    (dict(global_dims=(128.9, 64)), "global_dims must be a sequence of ints, got \\(128.9, 64\\)"),
    (dict(box=(64, 8.0)), "box must be a sequence of ints"),
    (dict(box=(64, True)), "box must be a sequence of ints"),
    (dict(element_strides=(1, 9)), "1..8"),
    (dict(global_strides=(200,)), "multiple of 16"),
    (dict(global_strides=(1 << 40,)), "< 2\\^40"),
    (dict(box=(128, 300)), "1..256"),
    (dict(box=(256, 64)), "swizzle span"),
    (dict(box=(8, 64), swizzle=0), "multiple of 16 bytes"),
    (dict(global_dims=(1,) * 6, box=(1,) * 6), "rank 1..5"),
    (dict(dtype="s4"), "as bytes"),
    (dict(oob_fill="nan"), "floating"),
    (dict(swizzle=48), "swizzle"),
    (dict(box=(128,)), "one extent per dimension"),
])
def test_rejects_with_clear_message(kw, msg):
    with pytest.raises(ValidationError, match=msg):
        tm(**kw)


def test_element_strides_and_interleave_accepted_where_the_driver_takes_them():
    t = tm(element_strides=(1, 3), box=(128, 64))
    assert t.box_bytes == 128 * 22  # ceil(64 / 3) rows
    i16 = TensorMap("f16", BASE, (8, 10, 10, 2), (8, 4, 4, 1), interleave=16)
    assert i16.box_bytes == 16 * 16 and i16.global_strides == (16, 160, 1600)
    i32 = TensorMap("s8", BASE, (32, 10, 4), (32, 8, 2), interleave=32, swizzle=32, element_strides=(1, 2, 1))
    assert i32.box_bytes == 32 * 4 * 2


def test_smem_tile_makes_matching_map():
    t = SmemTile("s8", 128, 128)
    m = t.tensor_map(BASE, global_dims=(4096, 1000))
    assert m.box == t.tma_box and m.swizzle == t.tma_swizzle and m.box_bytes == t.nbytes


def test_from_cuda_array_interface():
    class Fake:
        __cuda_array_interface__ = dict(data=(BASE, False), shape=(64, 256), typestr="|i1", version=3)
    m = TensorMap.from_array(Fake(), (128, 64), swizzle=128)
    assert m.global_dims == (256, 64) and m.global_strides == (256,) and m.dtype == "s8"


def test_param_tensormap_renders_and_packs():
    k = KernelBuilder("t", target="sm_90a", maxntid=128)
    r = k.param_tensormap("tmap_a")
    k.prefetch_tensormap(r)
    text = k.module().render().text
    assert ".param .align 64 .b8 tmap_a[128]" in text and "cvta.param.u64" in text
    lay = layout(k.finish().params)

    class Encoded(TensorMap):
        def encode(self):  # no driver here: stand in for the driver's 128 bytes
            return bytes(range(128))
    v = resolve(lay, [Encoded("s8", BASE, (256, 64), (128, 64))], "t").values
    assert v[0] == bytes(range(128))


def test_a_map_from_an_array_keeps_the_array_alive():
    """A launch holds the map, not the array: a map made from a temporary array must keep it, or its
    memory could be freed and reused before the copy reads it."""
    import gc
    import weakref

    class Arr:
        def __init__(self):
            self.__cuda_array_interface__ = {"shape": (16, 64), "typestr": "|u1", "data": (BASE, False),
                                             "version": 3, "strides": None}
    a = Arr()
    ref = weakref.ref(a)
    tm = TensorMap.from_array(a, (64, 16))
    del a
    gc.collect()
    assert ref() is not None and tm.base == BASE
    del tm
    gc.collect()
    assert ref() is None
