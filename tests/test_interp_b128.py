"""128-bit registers on the interpreter: ld/st .b128 in global, shared and local memory, mov.b128 as a copy
and as the pack/unpack of two 64-bit halves; against numpy, and against the H200."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.interp.values import as_words128, from_words128

NT = 64


def _kernel(nt=NT):
    """Thread t: q = src[t] (16 bytes); lo += t; the repacked value goes through shared memory to thread
    t ^ 1, through a .local slot and a plain mov.b128, and out to dst[t]; hi comes out alone in his[t]."""
    k = pf.KernelBuilder("q128", target="sm_90", reqntid=nt)
    src, dst, his = (k.param_ptr(n, pf.u64) for n in ("src", "dst", "his"))
    t = k.tid()
    off = k.mul(t, 16, mode="wide")
    q = k.ld(k.add(src, off), type=pf.b128)
    lo, hi = k.unpack(q)
    lo2 = k.add(k.mov(lo, type=pf.u64), k.cvt(t, "u64"), type=pf.u64)
    packed = k.mov([lo2, hi], type=pf.b128)
    smem = k.shared("qs", 16 * nt, align=16)
    base = k.shared_base(smem)
    k.st(k.add(base, k.mul(k.xor(t, 1), 16)), packed, type=pf.b128, space="shared")
    k.bar_sync()
    r = k.ld(k.add(base, k.mul(t, 16)), type=pf.b128, space="shared")
    slot = k.local_array("slot", pf.u64, 2, align=16)
    k.st(slot, r, type=pf.b128, space="local")
    copied = k.mov(k.ld(slot, type=pf.b128, space="local"), type=pf.b128)
    k.st(k.add(dst, off), copied, type=pf.b128)
    k.st(k.add(his, k.mul(t, 8, mode="wide")), k.unpack(copied)[1], type=pf.b64)
    return k


def _expected(src):
    lo, hi = src[:, 0].copy(), src[:, 1].copy()
    lo += np.arange(len(src), dtype=np.uint64)
    swap = np.arange(len(src)) ^ 1
    return np.stack([lo[swap], hi[swap]], axis=1), hi[swap]


def _inputs(seed, n=NT):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2 ** 64, (n, 2), dtype=np.uint64)


def test_b128_moves_through_every_space_and_both_halves():
    src = _inputs(1)
    src[0] = [2 ** 64 - 1, 2 ** 63]  # the carry out of lo stays out of hi
    dst, his = np.zeros((NT, 2), np.uint64), np.zeros(NT, np.uint64)
    k = _kernel()
    pf.assemble(k.module())
    interp.run(k.module(), block=NT, args=[src, dst, his])
    want, want_hi = _expected(src)
    np.testing.assert_array_equal(dst, want)
    np.testing.assert_array_equal(his, want_hi)


def test_the_record_helpers_keep_the_low_word_first():
    w = np.array([[1, 2], [3, 2 ** 64 - 1]], dtype=np.uint64)
    q = from_words128(w)
    assert q.shape == (2,) and q.dtype.itemsize == 16
    assert bytes(q[1]) == (3).to_bytes(8, "little") + (2 ** 64 - 1).to_bytes(8, "little")
    np.testing.assert_array_equal(as_words128(q), w)


def test_a_b128_access_must_be_16_byte_aligned():
    k = pf.KernelBuilder("mis", target="sm_90", reqntid=32)
    p = k.param_ptr("p", pf.u64)
    q = k.ld(k.add(p, k.mul(k.tid(), 8, mode="wide")), type=pf.b128)  # 8-byte steps: half misaligned
    k.st(p, q, type=pf.b128, pred=k.setp("eq", k.tid(), 99))
    r = interp.run(k.module(), block=32, args=[np.zeros(64, np.uint64)], check=False)
    f = r.by_kind("misaligned")[0]
    assert "16-byte aligned" in f.message and f.nthreads == 16


def test_an_unwritten_b128_register_holds_the_poison():
    k = pf.KernelBuilder("poison", target="sm_90", reqntid=32)
    p = k.param_ptr("p", pf.u64)
    q = k.reg(pf.b128)
    k.st(k.add(p, k.mul(k.tid(), 16, mode="wide")), q, type=pf.b128)
    out = np.zeros((32, 2), np.uint64)
    interp.run(k.module(), block=32, args=[out])
    assert (out == np.uint64(0x5A5A5A5A5A5A5A5A)).all()


@pytest.mark.gpu
def test_gpu_b128_matches_the_interpreter():
    from ptxforge.runtime import DeviceBuffer
    src = _inputs(2, 256)
    k = _kernel(256)
    dst, his = DeviceBuffer.from_host(np.zeros((256, 2), np.uint64)), DeviceBuffer.from_host(np.zeros(256, np.uint64))
    pf.load(k.module())[k.name](1, 256, DeviceBuffer.from_host(src), dst, his)
    cpu_dst, cpu_his = np.zeros((256, 2), np.uint64), np.zeros(256, np.uint64)
    interp.run(k.module(), block=256, args=[src, cpu_dst, cpu_his])
    np.testing.assert_array_equal(dst.to_host(), cpu_dst)
    np.testing.assert_array_equal(his.to_host(), cpu_his)
    np.testing.assert_array_equal(cpu_dst, _expected(src)[0])
