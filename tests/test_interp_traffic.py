"""Traffic counts (run(count_accesses=True)): how many times each byte of each argument was read
and written, checked against a per-thread model of the accesses the kernel was told to make."""

import numpy as np
import pytest
from hypothesis import given

import ptxforge as pf
from ptxforge import u8, u32, u64
from ptxforge import interp
from ptxforge.testing.interp_strategies import access_patterns, poison, seeds

_UINT = {1: pf.u8, 2: pf.u16, 4: pf.u32, 8: pf.u64}


def moves_kernel(threads, width, vec, space):
    """Thread t: if active[t], load width*vec bytes at src+roff[t] and store them at dst+woff[t]."""
    k = pf.KernelBuilder("moves", target="sm_80", maxntid=max(threads, 1))
    src, dst = k.param_ptr("src", pf.b8), k.param_ptr("dst", pf.b8)
    roff, woff, active = k.param_ptr("roff", u32), k.param_ptr("woff", u32), k.param_ptr("active", u8)
    t = k.tid()
    t4 = k.mul(t, 4, mode="wide")
    r = k.cvt(k.ld(k.add(roff, t4), type=u32), u64)
    w = k.cvt(k.ld(k.add(woff, t4), type=u32), u64)
    on = k.setp("ne", k.ld(k.add(active, k.cvt(t, u64)), type=u8), 0, type=u32)
    v = k.ld(k.add(src, r), type=_UINT[width], vec=vec, space=space, pred=on)
    k.st(k.add(dst, w), list(v) if vec > 1 else v, type=_UINT[width], space=space, pred=on)
    return k.module()


def model(nbytes, offsets, size, who):
    """Per-byte count: each thread in `who` touches `size` bytes at its offset."""
    counts = np.zeros(nbytes, np.uint32)
    for off, yes in zip(offsets, who):
        if yes:
            counts[off:off + size] += 1
    return counts


@given(access_patterns(), seeds())
def test_counts_are_one_per_thread_per_byte_moved(p, seed):
    n, size = p["threads"], p["width"] * p["vec"]
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, p["nbytes"], dtype=np.uint8)
    dst = poison(np.empty(p["nbytes"], np.uint8))
    roff, woff = np.array(p["reads"], np.uint32), np.array(p["writes"], np.uint32)
    active = np.array(p["active"], np.uint8)
    space = "generic" if seed % 2 else "global"  # generic addresses of global memory count the same
    r = interp.run(moves_kernel(n, p["width"], p["vec"], space), block=n, args=[src, dst, roff, woff, active],
                   count_accesses=True)
    acc = r.accesses
    assert set(acc) == {"src", "dst", "roff", "woff", "active"}
    np.testing.assert_array_equal(acc["src"].reads, model(p["nbytes"], p["reads"], size, p["active"]))
    np.testing.assert_array_equal(acc["dst"].writes, model(p["nbytes"], p["writes"], size, p["active"]))
    everyone = [True] * n
    np.testing.assert_array_equal(acc["roff"].reads, model(4 * n, range(0, 4 * n, 4), 4, everyone))
    np.testing.assert_array_equal(acc["active"].reads, np.ones(n, np.uint32))
    for name in ("src", "roff", "woff", "active"):
        assert not acc[name].writes.any(), name
    assert not acc["dst"].reads.any()


def zero_fill_kernel(threads, mode):
    """Thread t: cp.async 16 bytes from src + soff[t] into its own shared slot, reading n[t] of them
    (mode "size": src-size n[t]; mode "ignore": all 16 unless n[t] == 0), then copy the slot out."""
    k = pf.KernelBuilder("zfill", target="sm_80", maxntid=threads)
    src, dst = k.param_ptr("src", pf.b8), k.param_ptr("dst", pf.b8)
    soff, ns = k.param_ptr("soff", u32), k.param_ptr("n", u32)
    t = k.tid()
    t4 = k.mul(t, 4, mode="wide")
    n = k.ld(k.add(ns, t4), type=u32)
    slot = k.add(k.shared_base(k.shared("slots", 16 * threads, 16)), k.shl(t, 4))
    gsrc = k.add(src, k.cvt(k.ld(k.add(soff, t4), type=u32), u64))
    if mode == "size":
        k.cp_async(slot, gsrc, 16, src_size=n)
    else:
        k.cp_async(slot, gsrc, 16, ignore_src=k.setp("eq", n, 0, type=u32))
    k.cp_async_wait_all()
    v = k.ld(slot, type=u32, space="shared", vec=4)
    k.st(k.add(dst, k.mul(t, 16, mode="wide")), list(v), type=u32)
    return k.module()


@pytest.mark.parametrize("mode", ["size", "ignore"])
@given(p=access_patterns(max_threads=64), seed=seeds())
def test_cp_async_counts_the_source_bytes_it_reads_and_not_the_zero_fill(mode, p, seed):
    n = p["threads"]
    soff = np.array([o // 16 * 16 for o in p["reads"]], np.uint32)
    nread = np.array(p["src_size"], np.uint32)
    src = np.random.default_rng(seed).integers(1, 256, p["nbytes"], dtype=np.uint8)
    dst = poison(np.empty(16 * n, np.uint8))
    r = interp.run(zero_fill_kernel(n, mode), block=n, args=[src, dst, soff, nread], count_accesses=True)
    counts = np.zeros(p["nbytes"], np.uint32)
    want = np.zeros((n, 16), np.uint8)
    for t in range(n):
        got = int(nread[t]) if mode == "size" else (16 if nread[t] else 0)
        counts[soff[t]:soff[t] + got] += 1
        want[t, :got] = src[soff[t]:soff[t] + got]
    np.testing.assert_array_equal(r.accesses["src"].reads, counts)
    np.testing.assert_array_equal(dst.reshape(n, 16), want)
    np.testing.assert_array_equal(r.accesses["dst"].writes, np.ones(16 * n, np.uint32))


def atomics_kernel(threads):
    k = pf.KernelBuilder("hist", target="sm_80", maxntid=threads)
    bins, idx = k.param_ptr("bins", u32), k.param_ptr("idx", u32)
    t4 = k.mul(k.tid(), 4, mode="wide")
    b = k.ld(k.add(idx, t4), type=u32)
    k.atom("add", k.add(bins, k.mul(b, 4, mode="wide")), 1, type=u32)
    return k.module()


@given(p=access_patterns(max_threads=96), seed=seeds())
def test_an_atomic_reads_and_writes_its_word_once_per_thread(p, seed):
    n, nbins = p["threads"], 7
    idx = np.array([o % nbins for o in p["reads"]], np.uint32)  # collisions on purpose
    start = np.random.default_rng(seed).integers(0, 1000, nbins).astype(np.uint32)
    bins = start.copy()
    r = interp.run(atomics_kernel(n), block=n, args=[bins, idx], count_accesses=True)
    hits = np.bincount(idx, minlength=nbins).astype(np.uint32)
    np.testing.assert_array_equal(bins, start + hits)
    per_byte = np.repeat(hits, 4)
    np.testing.assert_array_equal(r.accesses["bins"].reads, per_byte)
    np.testing.assert_array_equal(r.accesses["bins"].writes, per_byte)


def test_refused_accesses_are_findings_and_are_not_counted():
    k = pf.KernelBuilder("over", target="sm_80", maxntid=64)
    x, y = k.param_ptr("x", u32), k.param_ptr("y", u32)
    t4 = k.mul(k.tid(), 4, mode="wide")
    k.st(k.add(y, t4), k.ld(k.add(x, t4), type=u32), type=u32)
    x_arr = np.arange(40, dtype=np.uint32) + 7
    y_arr = poison(np.empty(64, np.uint32))
    r = interp.run(k.module(), block=64, args=[x_arr, y_arr], check=False, count_accesses=True)
    assert [f.kind for f in r.findings] == ["oob"] and r.findings[0].nthreads == 24
    np.testing.assert_array_equal(r.accesses["x"].reads, np.ones(160, np.uint32))
    np.testing.assert_array_equal(r.accesses["y"].writes, np.ones(256, np.uint32))  # the stores themselves are fine
    np.testing.assert_array_equal(y_arr[:40], x_arr)


def test_shapes_names_ranges_and_counting_off():
    k = pf.KernelBuilder("pairs", target="sm_80", reqntid=(4, 3, 1))
    a, b, c = k.param_ptr("a", pf.f32), k.param_ptr("b", pf.f32), k.param_ptr("c", pf.f32)
    x, y = k.tid("x"), k.tid("y")
    i = k.mad(y, 8, k.mul(x, 2))  # rows of 8 floats; each thread reads floats 2x and 2x+1 of its row
    off = k.mul(i, 4, mode="wide")
    v = k.ld(k.add(a, off), type=pf.f32, vec=2)
    k.st(k.add(c, k.mul(k.mad(y, 4, x), 4, mode="wide")), k.add(v[0], k.ld(k.add(b, off), type=pf.f32)))
    m = k.module()
    mat = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    out = poison(np.empty((3, 4), np.float32))
    r = interp.run(m, block=(4, 3), args=[mat, mat, out], count_accesses=True)
    assert r.accesses["a"] is r.accesses["b"] and r.accesses["a"].name == "a"
    reads = r.accesses["a"].reads
    assert reads.shape == (3, 32) and r.accesses["c"].writes.shape == (3, 16)
    # a reads 8 bytes at each even float, b 4 of them again: 2, 2, 2, 2, 1, 1, 1, 1 per 8 bytes
    np.testing.assert_array_equal(reads, np.tile(np.repeat([2, 1], 4), (3, 4)))
    assert r.accesses["a"].read_ranges() == [(0, 96)] and r.accesses["c"].written_ranges() == [(0, 48)]
    np.testing.assert_array_equal(out, mat[:, 0::2] + mat[:, 0::2])
    assert interp.run(m, block=(4, 3), args=[mat, mat, out]).accesses is None
