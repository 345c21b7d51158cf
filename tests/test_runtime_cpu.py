"""The runtime's host-side logic, checked without a GPU: launch checks, argument packing,
array interop parsing, the cubin cache's integrity, version capping and JIT error mapping."""

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import f16, f32, f64, u8, u32, u64, s32, b8, b32, bf16
from ptxforge.errors import JitError, LaunchError, TargetError
from ptxforge.isa.targets import PtxVersion, Target
from ptxforge.runtime import cache as C
from ptxforge.runtime import dlpack
from ptxforge.runtime.arrays import DeviceView, Elem, In, InOut, Out, accepts, device_view, host_policy
from ptxforge.runtime.launch import (LaunchLimits, as_dims, bf16_bits, check_block, check_grid, check_shared,
                                     fast_values, layout, pack, resolve)
from ptxforge.runtime.loader import (check_target, jit_error, jit_target_name, parse_entries, source_of,
                                     source_of_text)
from ptxforge.runtime.memory import DeviceBuffer
from ptxforge.runtime.streams import stream_handle
from ptxforge.runtime.timing import Timing
from ptxforge.testing import launch_strategies as ls
from ptxforge.testing.kernels import saxpy

H200 = LaunchLimits(max_shared_optin=232448)


def params_of(*decls):
    """Kernel parameters declared through the builder: ('name', type) or ('name', 'ptr', pointee)."""
    k = pf.KernelBuilder("k", target="sm_80")
    for d in decls:
        if len(d) == 3:
            k.param(d[0], u64, pointee=d[2], space="global")
        else:
            k.param(d[0], d[1])
    return k.params


def fake_cai(ptr=0x7000_0000, shape=(16,), typestr="<f4", strides=None, stream=None):
    class GpuArray:
        __cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                    "strides": strides, "version": 3, "stream": stream}
    return GpuArray()


# ---------------------------------------------------------------- shapes and limits

def test_dims_accept_ints_and_tuples():
    assert as_dims(7, "grid") == (7, 1, 1)
    assert as_dims((4, 3), "grid") == (4, 3, 1)
    assert as_dims([2, 3, 4], "block") == (2, 3, 4)
    assert as_dims(np.int64(5), "grid") == (5, 1, 1)


@pytest.mark.parametrize("bad", [0, -1, (1, 0), (1, 2, 3, 4), (), 2.0, "4", (1.5,), None])
def test_dims_reject_nonsense(bad):
    with pytest.raises(LaunchError, match="grid"):
        as_dims(bad, "grid", "saxpy")


def test_block_over_maxntid_is_refused_before_launch():
    check_block((256, 1, 1), H200, kernel="k", block_limit=("maxntid", (256, 1, 1)))
    with pytest.raises(LaunchError, match=r"\.maxntid 256, 1, 1"):
        check_block((257, 1, 1), H200, kernel="k", block_limit=("maxntid", (256, 1, 1)))
    with pytest.raises(LaunchError, match="512 threads"):
        check_block((16, 32, 1), H200, kernel="k", block_limit=("maxntid", (128, 2, 1)))


def test_block_must_equal_reqntid():
    check_block((128, 2, 1), H200, kernel="k", block_limit=("reqntid", (128, 2, 1)))
    with pytest.raises(LaunchError, match="exactly block"):
        check_block((64, 1, 1), H200, kernel="k", block_limit=("reqntid", (128, 1, 1)))


def test_block_against_device_and_compiled_limits():
    with pytest.raises(LaunchError, match="2048 threads"):
        check_block((1024, 2, 1), H200, kernel="k")
    with pytest.raises(LaunchError, match="x = 1025"):
        check_block((1025, 1, 1), H200, kernel="k")
    with pytest.raises(LaunchError, match="z = 65"):
        check_block((1, 1, 65), H200, kernel="k")
    with pytest.raises(LaunchError, match="compiled kernel allows at most 640"):
        check_block((768, 1, 1), H200, kernel="k", max_threads=640)


def test_grid_limits():
    check_grid((2**31 - 1, 65535, 65535), H200, kernel="k")
    with pytest.raises(LaunchError, match="y = 65536"):
        check_grid((1, 65536, 1), H200, kernel="k")


def test_shared_memory_over_the_device_limit():
    check_shared(232448 - 1024, 1024, H200, kernel="k")
    with pytest.raises(LaunchError, match="232448"):
        check_shared(232448 - 1023, 1024, H200, kernel="k")
    for bad in (-1, 1.5, "8"):
        with pytest.raises(LaunchError, match="shared="):
            check_shared(bad, 0, H200, kernel="k")


# ---------------------------------------------------------------- packing

def test_layout_aligns_each_parameter_to_its_size():
    lay = layout(params_of(("n", u32), ("p", "ptr", f32), ("a", f32), ("h", f16), ("d", f64)))
    assert [s.offset for s in lay.specs] == [0, 8, 16, 20, 24]
    assert lay.size == 32
    blob = pack(lay, resolve(lay, (5, 0x1122334455667788, 1.5, 2.0, -3.25), "k").values)
    assert blob[0:4] == (5).to_bytes(4, "little")
    assert blob[4:8] == b"\0" * 4
    assert blob[8:16] == (0x1122334455667788).to_bytes(8, "little")
    assert blob[16:20] == np.float32(1.5).tobytes()
    assert blob[20:22] == np.float16(2.0).tobytes()
    assert blob[24:32] == np.float64(-3.25).tobytes()


def _bf16_reference(x: float) -> int:
    """Nearest bfloat16 (ties to even), chosen by comparing the two neighbours' values."""
    f = np.float32(x)
    u = int(f.view(np.uint32))
    lo, hi = u >> 16, (u >> 16) + 1
    vlo = float(np.uint32(lo << 16).view(np.float32))
    vhi = float(np.uint32((hi & 0xFFFF) << 16).view(np.float32)) if hi <= 0xFFFF else float("inf")
    dlo, dhi = abs(float(f) - vlo), abs(vhi - float(f))
    if dlo < dhi or (dlo == dhi and lo % 2 == 0):
        return lo
    return hi & 0xFFFF


def _expected_blob(pairs) -> bytes:
    out = b""
    for t, v in pairs:
        size = t.bits // 8
        out += b"\0" * (-len(out) % size)
        if t is bf16:
            out += _bf16_reference(v).to_bytes(2, "little")
        elif t.is_float:
            out += np.array(v, dtype=T_NUMPY[t.name]).tobytes()
        else:
            out += (int(v) % (1 << t.bits)).to_bytes(size, "little")
    return out


T_NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


@given(ls.scalar_params())
def test_scalar_arguments_pack_to_the_parameter_bytes(pairs):
    lay = layout(params_of(*[(f"p{i}", t) for i, (t, _) in enumerate(pairs)]))
    blob = pack(lay, resolve(lay, [v for _, v in pairs], "k").values)
    assert blob == _expected_blob(pairs)


@given(ls.scalar_params(), st.lists(st.integers(-2**70, 2**70) | st.floats(), max_size=8))
def test_fast_path_agrees_with_the_checked_path(pairs, others):
    lay = layout(params_of(*[(f"p{i}", t) for i, (t, _) in enumerate(pairs)]))
    for args in ([v for _, v in pairs], others[:len(pairs)] + [v for _, v in pairs][len(others):]):
        fast = fast_values(lay, args)
        try:
            checked = pack(lay, resolve(lay, args, "k").values)
        except LaunchError:
            assert fast is None  # whatever the checks refuse, the fast path must not let through
            continue
        if fast is not None:
            assert pack(lay, fast) == checked


def test_float_overflow_is_a_launch_error():
    lay = layout(params_of(("a", f32)))
    with pytest.raises(LaunchError, match="beyond the range of .f32"):
        resolve(lay, (1e39,), "k")
    assert fast_values(lay, (1e39,)) is None
    assert pack(lay, resolve(lay, (float("inf"),), "k").values) == np.float32(np.inf).tobytes()


@given(ls.bf16_representable_floats())
def test_bf16_rounding_is_nearest_even(x):
    assert bf16_bits(x) == _bf16_reference(x)


def test_bf16_nan_stays_nan():
    assert bf16_bits(float("nan")) & 0x7F80 == 0x7F80 and bf16_bits(float("nan")) & 0x7F


def test_byte_block_parameter_takes_exactly_its_size():
    k = pf.KernelBuilder("k", target="sm_90")
    k.param("tmap", b8, nbytes=128, align=64)
    k.param("n", u32)
    lay = layout(k.params)
    raw = bytes(range(128))
    assert pack(lay, resolve(lay, (raw, 9), "k").values) == raw + (9).to_bytes(4, "little")
    with pytest.raises(LaunchError, match="exactly 128 bytes"):
        resolve(lay, (raw[:64], 9), "k")


def test_pair_parameter_packs_low_half_first():
    k = pf.KernelBuilder("k", target="sm_80")
    k.param("h2", pf.f16x2)
    lay = layout(k.params)
    blob = pack(lay, resolve(lay, ((1.0, -2.0),), "k").values)
    assert blob == np.array([1.0, -2.0], dtype=np.float16).tobytes()


# ---------------------------------------------------------------- argument errors

SAXPY = params_of(("x", "ptr", f32), ("y", "ptr", f32), ("n", u32), ("a", f32))


def test_wrong_argument_count_names_the_signature():
    lay = layout(SAXPY)
    with pytest.raises(LaunchError, match=r"takes 4 argument\(s\) \(x: \.f32\*, y: \.f32\*, n: \.u32, a: \.f32\), got 3"):
        resolve(lay, (DeviceBuffer(0, dtype=np.float32), None, 3), "saxpy")


@pytest.mark.parametrize("n, match", [(-1, r"outside \[0, 4294967295\]"), (2**32, "outside"), (2.5, "takes an int"),
                                      ("3", "takes an int")])
def test_scalar_range_and_type(n, match):
    with pytest.raises(LaunchError, match=match):
        resolve(layout(SAXPY), (None, None, n, 1.0), "saxpy")


def test_float_parameter_refuses_non_numbers():
    with pytest.raises(LaunchError, match="takes a number"):
        resolve(layout(SAXPY), (None, None, 1, "x"), "saxpy")
    with pytest.raises(LaunchError, match=r"beyond the range of \.f16"):
        resolve(layout(params_of(("h", f16))), (1e6,), "k")


def test_host_array_dtype_must_match_the_pointee():
    x = np.zeros(8, np.float64)
    with pytest.raises(LaunchError, match=r"points to \.f32, but the numpy array holds float64; expected float32"):
        resolve(layout(SAXPY), (x, np.zeros(8, np.float32), 8, 1.0), "saxpy")


def test_non_contiguous_arrays_are_refused():
    x = np.zeros(16, np.float32)[::2]
    with pytest.raises(LaunchError, match="not C-contiguous"):
        resolve(layout(SAXPY), (x, None, 8, 1.0), "saxpy")
    strided = fake_cai(shape=(4, 4), strides=(32, 4))
    with pytest.raises(LaunchError, match="not C-contiguous"):
        resolve(layout(SAXPY), (strided, None, 8, 1.0), "saxpy")


def test_unsupported_argument_kinds_are_named():
    with pytest.raises(LaunchError, match="is a pointer: pass a numpy array"):
        resolve(layout(SAXPY), ([1.0, 2.0], None, 2, 1.0), "saxpy")


def test_pointer_arguments_resolve_to_addresses_and_transfers():
    x = np.arange(8, dtype=np.float32)
    frozen = np.arange(8, dtype=np.float32)
    frozen.flags.writeable = False
    gpu = fake_cai(ptr=0xABC000)
    r = resolve(layout(SAXPY), (gpu, x, 8, 1.0), "saxpy")
    assert r.values[0] == 0xABC000
    assert [(t.index, t.policy.copy_in, t.policy.copy_out) for t in r.transfers] == [(1, True, True)]
    r = resolve(layout(SAXPY), (In(x), frozen, 8, 1.0), "saxpy")
    assert [(t.index, type(t.policy)) for t in r.transfers] == [(0, In), (1, In)]
    r = resolve(layout(SAXPY), (Out(x), 0x1000, 8, 1.0), "saxpy")
    assert r.values[1] == 0x1000 and type(r.transfers[0].policy) is Out
    assert resolve(layout(SAXPY), (None, None, 8, 1.0), "saxpy").values[:2] == [0, 0]


def test_copy_policy_wrappers():
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    assert type(host_policy(frozen)) is In
    assert type(host_policy(np.zeros(4))) is InOut
    with pytest.raises(LaunchError, match="writeable"):
        Out(frozen)
    with pytest.raises(LaunchError, match="wraps a numpy array"):
        InOut([1, 2, 3])


def test_pointee_rules():
    assert accepts(b8, Elem("c", 128)) and accepts(None, Elem("f", 64))
    assert accepts(b32, Elem("f", 32)) and not accepts(b32, Elem("f", 16))
    assert accepts(s32, Elem("u", 32)) and accepts(u32, Elem("i", 32)) and not accepts(s32, Elem("f", 32))
    assert accepts(f32, Elem("f", 32)) and not accepts(f32, Elem("i", 32)) and not accepts(f16, Elem("bf", 16))
    assert accepts(bf16, Elem("bf", 16)) and accepts(bf16, Elem("u", 16)) and not accepts(bf16, Elem("f", 16))
    assert accepts(pf.s4, Elem("i", 8)) and accepts(pf.u4, Elem("u", 8)) and not accepts(pf.s4, Elem("i", 16))
    assert not accepts(u8, Elem("u", 16))


def test_device_buffer_dtype_is_checked():
    with pytest.raises(LaunchError, match="DeviceBuffer holds float64"):
        resolve(layout(SAXPY), (DeviceBuffer(0, dtype=np.float64), None, 0, 1.0), "saxpy")
    raw = params_of(("p", "ptr", b8))
    assert resolve(layout(raw), (DeviceBuffer(0, dtype=np.complex64),), "k").values == [0]


def test_device_buffer_shape_checks_need_no_gpu():
    empty = DeviceBuffer(shape=(0, 3), dtype=np.int16)
    assert empty.ptr == 0 and empty.nbytes == 0
    assert empty.__cuda_array_interface__["typestr"] == "<i2"
    with pytest.raises(LaunchError, match="nbytes or a shape"):
        DeviceBuffer()
    with pytest.raises(LaunchError, match="disagrees"):
        DeviceBuffer(8, shape=(3,), dtype=np.float32)


# ---------------------------------------------------------------- array interop parsing

def test_cuda_array_interface_view():
    v = device_view(fake_cai(ptr=0x1234, shape=(2, 3), typestr="<i2", stream=7))
    assert (v.ptr, v.shape, v.elem, v.stream, v.contiguous) == (0x1234, (2, 3), Elem("i", 16), 7, True)
    assert not device_view(fake_cai(shape=(3, 2), strides=(4, 12))).contiguous
    assert device_view(fake_cai(shape=(1, 5), strides=(999, 4))).contiguous  # size-1 dims have free strides


def test_producer_stream_is_recorded_for_ordering():
    lay = layout(SAXPY)
    r = resolve(lay, (fake_cai(stream=0x55), fake_cai(stream=1), 1, 1.0), "saxpy", stream=0)
    assert r.streams == [0x55]  # the legacy default stream (1) is ours already
    r = resolve(lay, (fake_cai(stream=0x55), fake_cai(stream=None), 1, 1.0), "saxpy", stream=0x55)
    assert r.streams == []


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.float64, np.int64])
def test_dlpack_capsule_is_read_with_ctypes(dtype):
    a = ls.random_array(3, (4, 6), dtype)
    info = dlpack.read_capsule(a.__dlpack__())
    assert info.ptr == a.ctypes.data
    assert info.device == "cpu" and info.shape == (4, 6)
    assert (info.kind, info.bits, info.lanes) == (np.dtype(dtype).kind, np.dtype(dtype).itemsize * 8, 1)
    assert info.strides in (None, (6, 1))
    view = a[:, ::2]
    info = dlpack.read_capsule(view.__dlpack__())
    assert info.strides == (6, 2) and info.ptr == view.ctypes.data


def test_host_dlpack_producer_becomes_a_host_transfer():
    backing = np.arange(10, dtype=np.float32)

    class HostTensor:  # only the DLPack protocol, like a CPU tensor of another library
        def __dlpack__(self, stream=None):
            return backing.__dlpack__()

        def __dlpack_device__(self):
            return backing.__dlpack_device__()

    r = resolve(layout(SAXPY), (HostTensor(), None, 10, 1.0), "saxpy")
    assert len(r.transfers) == 1 and np.shares_memory(r.transfers[0].array, backing)


def test_dlpack_device_view_from_info():
    from ptxforge.runtime.arrays import from_dlpack_info
    info = dlpack.DLPackInfo(0x5000, dlpack.KDL_CUDA, 0, "bf", 16, 1, (8, 8), (8, 1))
    v = from_dlpack_info(object(), info)
    assert isinstance(v, DeviceView) and v.strides == (16, 2) and v.contiguous and v.elem == Elem("bf", 16)


# ---------------------------------------------------------------- streams and timing

def test_stream_handles_from_other_libraries():
    class TorchLike:
        cuda_stream = 0x100

    class CupyLike:
        ptr = 0x200

    class CoreLike:
        def __cuda_stream__(self):
            return (0, 0x300)

    assert [stream_handle(s) for s in (None, 0, 0x42, TorchLike(), CupyLike(), CoreLike())] == \
        [0, 0, 0x42, 0x100, 0x200, 0x300]
    with pytest.raises(LaunchError, match="cannot use str as a stream"):
        stream_handle("default")


def test_timing_statistics():
    rng = np.random.default_rng(1)
    samples = rng.uniform(5, 9, size=101)
    t = Timing(tuple(samples))
    assert t.median_us == pytest.approx(np.median(samples))
    assert t.iqr_us == pytest.approx(np.percentile(samples, 75) - np.percentile(samples, 25))
    assert t.min_us <= t.q1_us <= t.median_us <= t.q3_us <= t.max_us
    assert "median" in str(t) and t.as_dict()["repeat"] == 101


# ---------------------------------------------------------------- cache

@given(st.binary(max_size=4096), st.dictionaries(st.text(max_size=8), st.integers(), max_size=3))
def test_cache_entry_round_trip(payload, meta):
    key = C.cache_key("ptx", "sm_90", (), 13000)
    assert C.decode_entry(key, C.encode_entry(key, payload, meta)) == (payload, meta)


@given(st.binary(min_size=1, max_size=512), st.data())
def test_any_damage_to_an_entry_is_detected(payload, data):
    key = C.cache_key("ptx", "sm_90", (), 13000)
    entry = C.encode_entry(key, payload, {"jit_log": "ok"})
    cut = data.draw(st.integers(0, len(entry) - 1))
    assert C.decode_entry(key, entry[:cut])[0] is None
    pos = data.draw(st.integers(0, len(entry) - 1))
    flipped = entry[:pos] + bytes([entry[pos] ^ 0x5A]) + entry[pos + 1:]
    assert C.decode_entry(key, flipped)[0] is None
    assert C.decode_entry(C.cache_key("other", "sm_90", (), 13000), entry)[0] is None


def test_cache_key_depends_on_every_input():
    base = ("ptx text", "sm_90", (("CU_JIT_MAX_REGISTERS", 64),), "cuda-13000/570.1")
    keys = {C.cache_key(*base), C.cache_key("ptx text ", *base[1:]), C.cache_key(base[0], "sm_90a", *base[2:]),
            C.cache_key(*base[:2], (), base[3]), C.cache_key(*base[:3], "cuda-13010/570.1"),
            C.cache_key(*base[:3], "cuda-13000/570.2"), C.cache_key(*base, ptxforge_version="0.0.0")}
    assert len(keys) == 7 and all(len(k) == 64 for k in keys)
    assert C.cache_key(*base) == C.cache_key(*base, ptxforge_version=pf.__version__)


def test_disk_cache_rejects_corrupt_entries_and_replaces_them(tmp_path):
    dc = C.DiskCache(str(tmp_path))
    key = C.cache_key("ptx", "sm_90", (), 13000)
    payload = ls.random_array(5, 3000, np.uint8).tobytes()
    assert dc.put(key, payload, {"jit_log": "x"})
    assert dc.get(key) == (payload, {"jit_log": "x"})
    assert not [p for p in os.listdir(os.path.dirname(dc.path(key))) if p.startswith(".tmp-")]
    with open(dc.path(key), "r+b") as f:
        f.truncate(os.path.getsize(dc.path(key)) - 7)
    before = C.stats.corrupt
    assert dc.get(key) is None and "size" in dc.last_rejection
    # refused, but left for put() to replace atomically: deleting it could delete a concurrent writer's good entry
    assert C.stats.corrupt == before + 1 and os.path.exists(dc.path(key))
    assert dc.put(key, payload) and dc.get(key) == (payload, {})
    assert dc.clear() == 1 and dc.get(key) is None


def test_cache_dir_and_switch(monkeypatch, tmp_path):
    monkeypatch.setenv(C.CACHE_DIR_ENV, str(tmp_path / "env"))
    assert C.cache_dir() == str(tmp_path / "env")
    C.set_cache_dir(tmp_path / "api")
    try:
        assert C.cache_dir() == str(tmp_path / "api")
    finally:
        C.set_cache_dir(None)
    monkeypatch.setenv(C.CACHE_ENV, "0")
    assert C.disk_cache() is None and not C.disk_cache_enabled()
    C.set_disk_cache(True)
    try:
        assert C.disk_cache() is not None
    finally:
        C.set_disk_cache(None)
    monkeypatch.setenv(C.CACHE_ENV, "1")
    assert C.disk_cache().root == str(tmp_path / "env")


# ---------------------------------------------------------------- versions and targets

def test_version_is_capped_by_the_driver():
    src = source_of(saxpy(), PtxVersion(9, 0))
    assert src.version <= PtxVersion(9, 0) and f".version {src.version}\n" in src.text
    m = pf.Module([saxpy("sm_90a").kernels[0]])
    with pytest.raises(TargetError, match=r"driver's JIT accepts PTX ISA <= 7\.8"):
        source_of(m, PtxVersion(7, 8))
    with pytest.raises(TargetError, match=r"\.version 9\.1"):
        source_of_text(".version 9.1\n.target sm_90\n.address_size 64\n", PtxVersion(9, 0))


def test_target_must_not_be_newer_than_the_device():
    check_target(Target.parse("sm_80"), (9, 0))
    check_target(Target.parse("sm_90a"), (9, 0))
    with pytest.raises(TargetError, match="targets sm_100, but the GPU is sm_90"):
        check_target(Target.parse("sm_100"), (9, 0))
    with pytest.raises(TargetError, match="arch-specific"):
        check_target(Target.parse("sm_90a"), (10, 0))
    assert jit_target_name(Target.parse("sm_80"), (9, 0)) == "sm_90"
    assert jit_target_name(Target.parse("sm_90a"), (9, 0)) == "sm_90a"


def test_entries_parsed_from_text_match_the_module():
    m = saxpy()
    (e,) = parse_entries(str(m))
    assert e.name == "saxpy" and e.block_limit == ("maxntid", (256, 1, 1))
    assert [(p.name, p.type.name) for p in e.params] == [(p.name, p.type.name) for p in m.kernels[0].params]
    text = """
    .visible .entry tma(  // a comment, with (parentheses)
        .param .align 64 .b8 p_map[128],
        .param .u64 .ptr.global.align 16 p_out,
        .param .f16 p_h
    )
    .reqntid 128, 2
    { ret; }
    .entry plain { ret; }
    """
    tma, plain = parse_entries(text)
    assert [(p.name, p.type.name, p.nbytes, p.align) for p in tma.params] == \
        [("p_map", "b8", 128, 64), ("p_out", "u64", None, None), ("p_h", "f16", None, None)]
    assert tma.block_limit == ("reqntid", (128, 2)) and plain.params == ()
    lay = layout(tma.params)
    assert [s.offset for s in lay.specs] == [0, 128, 136] and lay.specs[1].kind == "pointer"  # .ptr: a pointer


def test_jit_log_lines_map_to_ptx_and_python_lines():
    k = pf.KernelBuilder("bad", target="sm_90")
    out = k.param_ptr("out", f32)
    line = inspect.currentframe().f_lineno + 1
    v = k.ld(pf.Symbol("nowhere", "global", f32), type=f32)
    k.st(out, v)
    m = k.module()
    src = source_of(m, PtxVersion(9, 0))
    ptx_line = next(i for i, t in enumerate(src.text.splitlines(), 1) if "nowhere" in t)
    log = (f"ptxas application ptx input, line {ptx_line}; error   : Unknown symbol 'nowhere'\n"
           "ptxas fatal   : Ptx assembly aborted due to errors\n")
    err = jit_error(src, "sm_90", "CUDA_ERROR_INVALID_PTX", log, "")
    assert isinstance(err, JitError) and list(err.diagnostics) == [(ptx_line, "error", "Unknown symbol 'nowhere'")]
    text = str(err)
    assert f"PTX line {ptx_line}: ld.global.f32" in text
    assert f"test_runtime_cpu.py:{line}" in text and "Unknown symbol 'nowhere'" in text
    raw = jit_error(source_of_text(src.text, None), "sm_90", "CUDA_ERROR_INVALID_PTX", "", "")
    assert "left its logs empty" in str(raw)


# ---------------------------------------------------------------- import behaviour

def test_import_ptxforge_does_not_touch_the_runtime():
    code = ("import sys, ptxforge as pf\n"
            "assert 'ptxforge.runtime' not in sys.modules and 'cuda.bindings.driver' not in sys.modules\n"
            "assert pf.load is pf.runtime.load and pf.In is pf.runtime.In\n"
            "assert 'cuda.bindings.driver' not in sys.modules\n"
            "assert 'benchmark' in dir(pf)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
