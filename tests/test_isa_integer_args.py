"""One rule for the integer arguments of the ISA layer's constructors and builder methods (counts, sizes, byte
counts, masks, barrier ids, ranks, phases, nanoseconds, selectors, descriptor fields, alignment ...): a Python or
numpy integer is taken, as the Python int it equals (the PTX is the same); a bool or a float is refused, naming
the argument and saying what is legal (`ptxforge.isa.instruction.int_arg`)."""

import re
import warnings

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import f32, u32
from ptxforge.errors import ValidationError
from ptxforge.isa import descriptors as D
from ptxforge.isa.cluster import cluster_dims
from ptxforge.isa.instruction import int_arg, int_or_val

REG = "an int or a .u32 register"


def _kernel():
    k = pf.KernelBuilder("k", target="sm_90a", reqntid=128)
    g = k.param_ptr("g", f32)
    tm = k.param_tensormap("tm")
    buf = k.shared("buf", 4096, align=1024)
    mb = k.shared("mb", 8, align=8)
    return k, g, tm, buf, mb


#: (id, what the error names, what it says is legal, a legal Python int, the call with that argument v)
BUILDER_CASES = [
    ("mbarrier_init", "mbarrier.init count", REG, 32, lambda k, g, tm, buf, mb, v: k.mbarrier_init(mb, v)),
    ("mbarrier_arrive count", "mbarrier.arrive count", REG, 2,
     lambda k, g, tm, buf, mb, v: k.mbarrier_arrive(mb, count=v)),
    ("mbarrier_arrive expect_tx", "mbarrier.arrive.expect_tx bytes", REG, 1024,
     lambda k, g, tm, buf, mb, v: k.mbarrier_arrive(mb, expect_tx=v)),
    ("mbarrier_expect_tx", "mbarrier.expect_tx bytes", REG, 4096,
     lambda k, g, tm, buf, mb, v: k.mbarrier_expect_tx(mb, v)),
    ("mbarrier_try_wait phase", "phase parity", REG, 1, lambda k, g, tm, buf, mb, v: k.mbarrier_try_wait(mb, v)),
    ("mbarrier_test_wait phase", "phase parity", REG, 1, lambda k, g, tm, buf, mb, v: k.mbarrier_test_wait(mb, v)),
    ("mbarrier_wait phase", "phase parity", REG, 0, lambda k, g, tm, buf, mb, v: k.mbarrier_wait(mb, v)),
    ("mbarrier_try_wait suspend_ns", "suspend-time hint", REG, 1000,
     lambda k, g, tm, buf, mb, v: k.mbarrier_try_wait(mb, 0, suspend_ns=v)),
    ("mbarrier_complete_tx", "mbarrier.complete_tx bytes", REG, 256,
     lambda k, g, tm, buf, mb, v: k.mbarrier_complete_tx(mb, v)),
    ("mbarrier_arrive_drop count", "mbarrier.arrive_drop count", REG, 3,
     lambda k, g, tm, buf, mb, v: k.mbarrier_arrive_drop(mb, count=v)),
    ("bar_sync id", "barrier id", REG, 1, lambda k, g, tm, buf, mb, v: k.bar_sync(v)),
    ("bar_sync count", "barrier thread count", REG, 64, lambda k, g, tm, buf, mb, v: k.bar_sync(1, v)),
    ("bar_arrive count", "barrier thread count", REG, 96, lambda k, g, tm, buf, mb, v: k.bar_arrive(2, v)),
    ("barrier_sync id", "barrier id", REG, 3, lambda k, g, tm, buf, mb, v: k.barrier_sync(v, 128)),
    ("bar_red id", "barrier id", REG, 4, lambda k, g, tm, buf, mb, v: k.bar_red("popc", k.setp("eq", k.tid(), 0), v)),
    ("bar_warp_sync mask", "bar.warp.sync mask", "an int or a .b32 register", 0xFFFF,
     lambda k, g, tm, buf, mb, v: k.bar_warp_sync(v)),
    ("nanosleep", "nanosleep", REG, 100, lambda k, g, tm, buf, mb, v: k.nanosleep(v)),
    ("cp_async size", "cp.async cp-size", "an int", 16, lambda k, g, tm, buf, mb, v: k.cp_async(buf, g, v)),
    ("cp_async src_size", "cp.async src-size", REG, 8,
     lambda k, g, tm, buf, mb, v: k.cp_async(buf, g, 16, src_size=v)),
    ("cp_async_wait", "cp.async.wait_group", "an int", 1, lambda k, g, tm, buf, mb, v: k.cp_async_wait(v)),
    ("bulk_copy size", "cp.async.bulk size", REG, 256, lambda k, g, tm, buf, mb, v: k.bulk_copy(buf, g, v, mb)),
    ("bulk_copy multicast", "multicast ctaMask", "an int or a .b16 register", 0b11,
     lambda k, g, tm, buf, mb, v: k.bulk_copy(buf, g, 256, mb, multicast=v)),
    ("bulk_store size", "cp.async.bulk size", REG, 512, lambda k, g, tm, buf, mb, v: k.bulk_store(g, buf, v)),
    ("bulk_prefetch size", "cp.async.bulk size", REG, 1024, lambda k, g, tm, buf, mb, v: k.bulk_prefetch(g, v)),
    ("bulk_reduce size", "cp.async.bulk size", REG, 128,
     lambda k, g, tm, buf, mb, v: k.bulk_reduce(g, buf, v, "add", "f32")),
    ("bulk_wait", "cp.async.bulk.wait_group", "an int", 2, lambda k, g, tm, buf, mb, v: k.bulk_wait(v, read=True)),
    ("tensor_load multicast", "multicast ctaMask", "an int or a .b16 register", 0b101,
     lambda k, g, tm, buf, mb, v: k.tensor_load(buf, tm, (0, 0), mb, multicast=v)),
    ("mapa rank", "mapa target CTA rank", REG, 1,
     lambda k, g, tm, buf, mb, v: k.mapa(k.shared_base(buf), v)),
    ("setmaxnreg", "setmaxnreg register count", "an int", 232, lambda k, g, tm, buf, mb, v: k.setmaxnreg("inc", v)),
    ("wgmma_wait", "wgmma.wait_group", "an int", 1, lambda k, g, tm, buf, mb, v: k.wgmma_wait(v)),
    ("alloca size", "alloca size", "an int or a .u64 register", 64, lambda k, g, tm, buf, mb, v: k.alloca(v)),
    ("alloca align", "alloca alignment", "an int", 16, lambda k, g, tm, buf, mb, v: k.alloca(64, align=v)),
    ("createpolicy_range primary", "createpolicy.range primary size", REG, 256,
     lambda k, g, tm, buf, mb, v: k.createpolicy_range(g, v, 8192)),
    ("createpolicy_range total", "createpolicy.range total size", REG, 8192,
     lambda k, g, tm, buf, mb, v: k.createpolicy_range(g, 256, v)),
    ("lop3 lut", "lop3 lookup table", "an int", 0x96,
     lambda k, g, tm, buf, mb, v: k.lop3(k.tid(), k.tid(), k.tid(), v)),
    ("shfl mask", "member mask", "an int or a .b32 register", 0xFFFF,
     lambda k, g, tm, buf, mb, v: k.shfl("idx", k.tid(), 0, mask=v)),
    ("vote mask", "member mask", "an int or a .b32 register", 0xFF,
     lambda k, g, tm, buf, mb, v: k.vote("ballot", k.setp("eq", k.tid(), 0), mask=v)),
    ("wmma_load stride", "wmma stride", REG, 16,
     lambda k, g, tm, buf, mb, v: k.wmma_load("a", g, shape="m16n16k16", type="f16", space="global", stride=v)),
    ("pmevent", "pmevent", "an int", 3, lambda k, g, tm, buf, mb, v: k.pmevent(v)),
    ("tensormap_replace ordinal", "tensormap.replace .box_dim ordinal", "an int", 1,
     lambda k, g, tm, buf, mb, v: k.tensormap_replace(g, "box_dim", 64, ordinal=v)),
    ("tensormap_replace value", "tensormap.replace .box_dim value", "an int or a .b32 register", 64,
     lambda k, g, tm, buf, mb, v: k.tensormap_replace(g, "box_dim", v, ordinal=1)),
]


def _ptx(call, v):
    k, g, tm, buf, mb = _kernel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (setmaxnreg without a register cap warns; the text is what is asked)
        call(k, g, tm, buf, mb, v)
        return k.module().ptx


@pytest.mark.parametrize("case", BUILDER_CASES, ids=[c[0] for c in BUILDER_CASES])
@pytest.mark.parametrize("kind", [np.int64, np.uint32, np.int32])
def test_builder_methods_take_numpy_integers(case, kind):
    _, _, _, v, call = case
    assert _ptx(call, kind(v)) == _ptx(call, v)


@pytest.mark.parametrize("case", BUILDER_CASES, ids=[c[0] for c in BUILDER_CASES])
@pytest.mark.parametrize("bad", [True, False, 1.0, np.float32(16), np.bool_(True)], ids=repr)
def test_builder_methods_refuse_bools_and_floats(case, bad):
    _, what, legal, _, call = case
    with pytest.raises(ValidationError, match=rf"{re.escape(what)} takes {re.escape(legal)}, not "):
        _ptx(call, bad)


# ---------------------------------------------------------------- pure constructors and layout facts

DESCRIPTOR = dict(start_addr=0x400, leading_byte_offset=16, stride_byte_offset=1024, swizzle=128, base_offset=3)


@pytest.mark.parametrize("field", sorted(DESCRIPTOR))
@pytest.mark.parametrize("kind", [np.int64, np.uint32, np.uint64])
def test_encode_descriptor_takes_numpy_integer_fields(field, kind):
    want = D.encode_descriptor(**DESCRIPTOR)
    got = D.encode_descriptor(**{**DESCRIPTOR, field: kind(DESCRIPTOR[field])})
    assert got == want and type(got) is int
    assert D.decode_descriptor(np.uint64(want)) == D.decode_descriptor(want)


@pytest.mark.parametrize("field, what", [("start_addr", "descriptor start address"),
                                         ("leading_byte_offset", "descriptor leading byte offset"),
                                         ("stride_byte_offset", "descriptor stride byte offset"),
                                         ("base_offset", "descriptor base offset")])
@pytest.mark.parametrize("bad", [True, 16.0, np.float32(16)], ids=repr)
def test_encode_descriptor_refuses_bool_and_float_fields(field, what, bad):
    with pytest.raises(ValidationError, match=rf"{what} takes an int, not "):
        D.encode_descriptor(**{**DESCRIPTOR, field: bad})


def test_swizzle_mode_takes_numpy_integers_and_refuses_what_only_hashes_alike():
    for n in (0, 32, 64, 128):
        assert D.swizzle_mode(np.int64(n)) is D.swizzle_mode(n) is D.swizzle_mode(np.uint32(n))
    for bad in (128.0, False, True, np.float32(64), np.bool_(False), 0.0):
        with pytest.raises(ValidationError, match=r"swizzle must be one of 0 \(none\), 32, 64 or 128 bytes"):
            D.swizzle_mode(bad)
        with pytest.raises(ValidationError, match="swizzle"):
            D.encode_descriptor(0x400, 16, 1024, bad)
    assert D.swizzle_bytes_of_code(np.int64(1)) == 128
    with pytest.raises(ValidationError, match="swizzle code"):
        D.swizzle_bytes_of_code(True)


def test_cluster_dims_take_numpy_integers_and_refuse_bools_and_floats():
    assert cluster_dims((np.int64(2), np.uint32(1))) == cluster_dims((2, 1)) == (2, 1, 1)
    assert cluster_dims(np.int64(4)) == (4, 1, 1)
    assert all(type(x) is int for x in cluster_dims(np.array([2, 2])))
    for bad in ((2.0, 1), (True,), 2.0, np.float32(2)):
        with pytest.raises(ValidationError, match=r"\.reqnctapercluster size takes an int, not "):
            cluster_dims(bad)


def test_enumerated_immediates_take_numpy_integers_and_refuse_bools():
    """An argument whose legal values are listed (a tensor map's swizzle code) keeps its message, which names
    them; the numpy integer is the int it equals."""
    def swizzle(k, g, tm, buf, mb, v):
        k.tensormap_replace(g, "swizzle_mode", v)
    assert _ptx(swizzle, np.int64(3)) == _ptx(swizzle, 3)
    assert "tensormap.replace.tile.swizzle_mode.global.b1024.b32 [%g], 3;" in _ptx(swizzle, np.uint32(3))
    k, g, *_ = _kernel()
    for bad in (True, 3.0, np.float32(3)):
        with pytest.raises(ValidationError, match=r"\.swizzle_mode takes an immediate 0\.\.3"):
            k.tensormap_replace(g, "swizzle_mode", bad)


def test_the_helpers():
    assert int_arg(7, "n") == 7 and int_arg(np.uint8(7), "n") == 7 and type(int_arg(np.int64(7), "n")) is int
    assert int_arg("%r1", "n", ".u32") is None  # not a number: a register for the caller to check
    for bad in (True, np.bool_(False), 7.0, np.float64(7), 1j):
        with pytest.raises(ValidationError, match=r"^n takes an int or a \.u32 register, not "):
            int_arg(bad, "n", ".u32")
    with pytest.raises(ValidationError, match=r"^n takes an int, not '7' \(str\)"):
        int_arg("7", "n")
    seen = []
    assert int_or_val(seen.append, None, "n") is None and int_or_val(seen.append, np.int16(5), "n") == 5
    int_or_val(lambda x, t: seen.append((x, t)), "reg", "n", t=u32)
    assert seen == [("reg", u32)]


def _f32_pair(k):
    x = k.mov(1.0, type=f32)
    return [x, x]


#: vector widths and matrix counts (a checked form is kept under its key, where 4.0 and True are 4 and 1)
MEMORY_CASES = [
    ("ld vec", "ld vector width", 4, lambda k, g, tm, buf, mb, v: k.ld(g, type=f32, vec=v)),
    ("st vec", "st vector width", 2, lambda k, g, tm, buf, mb, v: k.st(g, _f32_pair(k), type=f32, vec=v)),
    ("ldu vec", "ldu vector width", 2, lambda k, g, tm, buf, mb, v: k.ldu(g, type=f32, vec=v)),
    ("ldmatrix num", "ldmatrix num", 2, lambda k, g, tm, buf, mb, v: k.ldmatrix(buf, num=v)),
    ("stmatrix num", "stmatrix num", 4,
     lambda k, g, tm, buf, mb, v: k.stmatrix(buf, [k.mov(0, type=u32) for _ in range(4)], num=v)),
]


@pytest.mark.parametrize("case", MEMORY_CASES, ids=[c[0] for c in MEMORY_CASES])
def test_vector_widths_and_matrix_counts(case):
    _, what, v, call = case
    assert _ptx(call, np.int64(v)) == _ptx(call, v)
    for bad in (True, False, float(v), np.float32(v)):
        with pytest.raises(ValidationError, match=rf"{re.escape(what)} takes an int, not "):
            _ptx(call, bad)
