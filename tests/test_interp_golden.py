"""The hand-written golden kernels (checked on an H200 against numpy), rebuilt with the builder and
run on the interpreter: each must give its documented result.

The kernels follow the golden PTX instruction for instruction (same address patterns, same
guards), so a difference is the interpreter's.  Each test runs two rebuilds: the one here and
the project's shared one (tests/golden/builders.py), written independently.  Outputs are
poisoned before every run.
"""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import b32, f32, s32, u8, u32, u64
from ptxforge import interp

RNG = np.random.default_rng(20260807)
POISON = 0xA7


SOURCES = ["here", "golden/builders.py"]


def build(source, here, theirs):
    """The kernel from this file (`here()`) or from tests/golden/builders.py (`theirs(builders)`)."""
    if source == "here":
        return here()
    builders = pytest.importorskip("golden.builders")
    return theirs(builders)


def poisoned(nbytes, dtype=np.uint8):
    return np.full(nbytes // np.dtype(dtype).itemsize, POISON, dtype=np.uint8).view(dtype) if dtype == np.uint8 \
        else np.frombuffer(bytes([POISON]) * nbytes, dtype=dtype).copy()


# ---------------------------------------------------------------- 01_module_basics

def saxpy_rev():
    k = pf.KernelBuilder("saxpy_rev", target="sm_80", maxntid=256, minnctapersm=2)
    x = k.param_ptr("p_x", f32)
    y = k.param_ptr("p_y", f32)
    n = k.param_value("p_n", u32)
    a = k.param_value("p_a", f32)
    dyn = k.dynamic_shared("dyn_smem", align=16)
    ntid, tid = k.ntid(), k.tid()
    i = k.mad(k.ctaid(), ntid, tid, mode="lo")
    p1 = k.setp("lt", i, n)
    v = k.mov(0.0, type=f32)
    off = k.mul(i, 4, mode="wide")
    k.ld(k.add(x, off), type=f32, dst=v, pred=p1)
    base = k.shared_base(dyn)
    k.st(k.add(base, k.shl(tid, 2)), v, space="shared")
    k.bar_sync(0)
    j = k.sub(k.sub(ntid, 1), tid)
    v2 = k.ld(k.add(base, k.shl(j, 2, type=b32)), type=f32, space="shared")
    done = k.label("done")
    k.bra(done, pred=~p1)
    py = k.add(y, off)
    k.st(py, k.fma(a, v2, k.ld(py, type=f32)))
    k.place(done)
    return k.module()


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("n,block,grid", [(1000, 256, 4), (256, 128, 2), (77, 64, 2)])
def test_saxpy_rev(n, block, grid, source):
    mod = build(source, saxpy_rev, lambda b: b.module_01())
    x = RNG.standard_normal(n).astype(np.float32)
    y = RNG.standard_normal(n).astype(np.float32)
    y0 = y.copy()
    interp.run(mod, "saxpy_rev", grid=grid, block=block, args=[x, y, n, 1.5], shared=4 * block)
    idx = np.arange(n)
    cta, t = idx // block, idx % block
    src = cta * block + (block - 1 - t)
    xm = np.where(src < n, x[np.minimum(src, n - 1)], 0).astype(np.float32)
    np.testing.assert_allclose(y, np.float32(1.5) * xm + y0, rtol=1e-6, atol=1e-6)


def special_regs():
    k = pf.KernelBuilder("special_regs", target="sm_80", reqntid=128)
    out = k.param_ptr("p_out", u32)
    flag = k.shared("s_flag", 4, align=4)
    r = [k.tid(), k.ctaid(), k.ntid(), k.nctaid(), k.laneid(), k.sreg("warpid"), k.sreg("nwarpid")]
    p1 = k.setp("eq", r[0], 0)
    k.st(flag, 0x600D, type=u32, space="shared", pred=p1)
    k.bar_sync(0)
    f = k.ld(flag, type=u32, space="shared")
    r.append(k.selp(f, 0, p1))
    gid = k.mad(r[1], r[2], r[0], mode="lo")
    p = k.add(out, k.mul(gid, 32, mode="wide"))
    k.st(p, r[:4], type=u32)
    k.st(k.add(p, 16), r[4:], type=u32)
    k.membar("gl")
    k.fence("fence.acq_rel.gpu")
    return k.module()


@pytest.mark.parametrize("source", SOURCES)
def test_special_registers(source):
    grid = 3
    out = poisoned(grid * 128 * 32, np.uint32)
    interp.run(build(source, special_regs, lambda b: b.module_01()), "special_regs", grid=grid, block=128, args=[out])
    o = out.reshape(grid * 128, 8)
    g = np.arange(grid * 128)
    np.testing.assert_array_equal(o[:, 0], g % 128)
    np.testing.assert_array_equal(o[:, 1], g // 128)
    assert (o[:, 2] == 128).all() and (o[:, 3] == grid).all()
    np.testing.assert_array_equal(o[:, 4], g % 32)
    np.testing.assert_array_equal(o[:, 5], (g % 128) // 32)  # documented: linear tid / 32 here
    assert (o[:, 6] == 64).all()
    np.testing.assert_array_equal(o[:, 7], np.where(g % 128 == 0, 0x600D, 0))


# ---------------------------------------------------------------- 02_cp_async

def cp_async_forms():
    k = pf.KernelBuilder("cp_async_forms", target="sm_80", reqntid=32)
    src = k.param_ptr("p_src", u8)
    dst = k.param_ptr("p_dst", u8)
    sbuf = k.shared("sbuf", 1024, align=16)
    t = k.tid()
    slot = k.add(k.shared_base(sbuf), k.shl(t, 5))
    ones = k.mov(-1, type=b32)
    k.st(slot, [ones] * 4, type=b32, space="shared")
    k.st(pf.Addr(slot, 16), [ones] * 4, type=b32, space="shared")
    k.bar_sync(0)
    n = k.rem(t, 17)
    k.cp_async(slot, k.add(src, k.mul(t, 16, mode="wide")), 16, cache="cg", src_size=n)
    odd = k.setp("ne", k.and_(t, 1), 0)
    k.cp_async(pf.Addr(slot, 16), k.add(src, k.add(k.mul(t, 8, mode="wide"), 512)), 8, cache="ca", ignore_src=odd)
    o4 = k.mul(t, 4, mode="wide")
    k.cp_async(pf.Addr(slot, 24), k.add(src, k.add(o4, 768)), 4, cache="ca", prefetch="L2::128B")
    pol = k.createpolicy("L2::evict_last", 1.0)
    k.cp_async(pf.Addr(slot, 28), k.add(src, k.add(o4, 896)), 4, cache="ca", cache_policy=pol)
    k.cp_async_commit()
    k.cp_async_wait(0)
    k.bar_sync(0)
    lo = k.ld(slot, type=b32, space="shared", vec=4)
    hi = k.ld(pf.Addr(slot, 16), type=b32, space="shared", vec=4)
    d = k.add(dst, k.mul(t, 32, mode="wide"))
    k.st(d, lo, type=b32)
    k.st(pf.Addr(d, 16), hi, type=b32)
    return k.module()


@pytest.mark.parametrize("source", SOURCES)
def test_cp_async_forms_zero_fill_and_ignore_src(source):
    src = RNG.integers(0, 256, 1024, dtype=np.uint8)
    dst = poisoned(1024)
    interp.run(build(source, cp_async_forms, lambda b: b.module_02()), "cp_async_forms", block=32, args=[src, dst])
    d = dst.reshape(32, 32)
    for t in range(32):
        n = t % 17
        np.testing.assert_array_equal(d[t, :n], src[16 * t:16 * t + n])
        assert (d[t, n:16] == 0).all(), t
        want8 = np.zeros(8, np.uint8) if t % 2 else src[512 + 8 * t:520 + 8 * t]
        np.testing.assert_array_equal(d[t, 16:24], want8)
        np.testing.assert_array_equal(d[t, 24:28], src[768 + 4 * t:772 + 4 * t])
        np.testing.assert_array_equal(d[t, 28:32], src[896 + 4 * t:900 + 4 * t])


def cp_async_pipeline():
    k = pf.KernelBuilder("cp_async_pipeline", target="sm_80", reqntid=128)
    src = k.param_ptr("p_src", u32)
    dst = k.param_ptr("p_dst", u32)
    nchunks = k.param_value("p_nchunks", u32)
    ring = k.shared("ring", 6144, align=128)
    t = k.tid()
    t16 = k.shl(t, 4)
    slot = k.add(k.shared_base(ring), t16)
    s0 = k.add(src, k.cvt(t16, u64))
    k.cp_async(slot, s0, 16, pred=k.setp("gt", nchunks, 0))
    k.cp_async_commit()
    k.cp_async(pf.Addr(slot, 2048), pf.Addr(s0, 2048), 16, pred=k.setp("gt", nchunks, 1))
    k.cp_async_commit()
    acc = [k.mov(0, type=u32) for _ in range(4)]
    with k.for_range(0, nchunks) as i:
        nxt = k.add(i, 2)
        k.cp_async(k.add(slot, k.mul(k.rem(nxt, 3), 2048)), k.add(s0, k.mul(nxt, 2048, mode="wide")), 16,
                   pred=k.setp("lt", nxt, nchunks))
        k.cp_async_commit()
        k.cp_async_wait(2)
        k.bar_sync(0)
        v = k.ld(k.add(slot, k.mul(k.rem(i, 3), 2048)), type=u32, space="shared", vec=4)
        for j in range(4):
            k.add(acc[j], v[j], dst=acc[j])
        k.bar_sync(0)
    k.cp_async_wait_all()
    k.st(k.add(dst, k.mul(t, 16, mode="wide")), acc, type=u32)
    return k.module()


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("nchunks", [1, 2, 7])
def test_cp_async_pipeline(nchunks, source):
    src = RNG.integers(0, 2 ** 32, nchunks * 512, dtype=np.uint32)
    dst = poisoned(2048, np.uint32)
    mod = build(source, cp_async_pipeline, lambda b: b.module_02())
    interp.run(mod, "cp_async_pipeline", block=128, args=[src, dst, nchunks])
    want = src.reshape(nchunks, 512).astype(np.uint64).sum(axis=0) % 2 ** 32
    np.testing.assert_array_equal(dst, want.astype(np.uint32))


def cp_async_mbarrier():
    k = pf.KernelBuilder("cp_async_mbarrier", target="sm_80", reqntid=32)
    src = k.param_ptr("p_src", u8)
    dst = k.param_ptr("p_dst", u8)
    mbar = k.shared("mbar", 8, align=8)
    buf = k.shared("buf", 512, align=16)
    t = k.tid()
    rb = k.shared_base(mbar)
    k.mbarrier_init(rb, 32, pred=k.setp("eq", t, 0))
    k.bar_sync(0)
    off = k.mul(t, 16, mode="wide")
    k.cp_async(k.add(k.shared_base(buf), k.shl(t, 4)), k.add(src, off), 16)
    k.cp_async_mbarrier_arrive(rb, noinc=True)
    k.mbarrier_wait(rb, 0)
    v = k.ld(k.add(k.shared_base(buf), k.shl(k.xor(t, 31), 4, type=b32)), type=b32, space="shared", vec=4)
    k.st(k.add(dst, off), v, type=b32)
    return k.module()


@pytest.mark.parametrize("source", SOURCES)
def test_cp_async_mbarrier_noinc(source):
    src = RNG.integers(0, 256, 512, dtype=np.uint8)
    dst = poisoned(512)
    mod = build(source, cp_async_mbarrier, lambda b: b.module_02())
    interp.run(mod, "cp_async_mbarrier", block=32, args=[src, dst])
    np.testing.assert_array_equal(dst.reshape(32, 16), src.reshape(32, 16)[np.arange(32) ^ 31])


# ---------------------------------------------------------------- 03_ldmatrix_mma and 04_s4_via_s8

MMA_KERNELS = {
    # name: (shape, a_type, A bytes (rows x bytes), B bytes, ldmatrix A num, B num)
    "mma_f16_m16n8k16": ("m16n8k16", "f16", (16, 32), (8, 32), 4, 2),
    "mma_s8_m16n8k32": ("m16n8k32", "s8", (16, 32), (8, 32), 4, 2),
    "mma_s4_m16n8k64": ("m16n8k64", "s4", (16, 32), (8, 32), 4, 2),
    "mma_u4_m16n8k64": ("m16n8k64", "u4", (16, 32), (8, 32), 4, 2),
    "mma_s4_m16n8k32": ("m16n8k32", "s4", (16, 16), (8, 16), 2, 1),
    "mma_s4_m8n8k32": ("m8n8k32", "s4", (8, 16), (8, 16), 1, 1),
}


def ldmatrix_mma(name, unpack=None):
    """The 03 kernels (unpack=None) and, with unpack='scaled'/'signext', the 04 s4-via-s8 ones."""
    shape, a_type, (am, arow), (bn, brow), anum, bnum = MMA_KERNELS[name]
    k = pf.KernelBuilder(name if unpack is None else f"s4_via_s8_{unpack}", target="sm_80", reqntid=32)
    pa, pb, pd = k.param_ptr("p_a", u8), k.param_ptr("p_b", u8), k.param_ptr("p_d", b32)
    sa = k.shared("sA", am * arow, align=128)
    sb = k.shared("sB", bn * brow, align=128)
    lane = k.laneid()
    l16 = k.shl(lane, 4)
    o64 = k.cvt(l16, u64)
    ra, rb = k.shared_base(sa), k.shared_base(sb)
    k.cp_async(k.add(ra, l16), k.add(pa, o64), 16, pred=k.setp("lt", l16, am * arow))
    k.cp_async(k.add(rb, l16), k.add(pb, o64), 16, pred=k.setp("lt", l16, bn * brow))
    k.cp_async_commit()
    k.cp_async_wait(0)
    k.bar_sync(0)
    if anum == 4:
        aaddr = k.mad(k.shr(lane, 4), 16, k.mad(k.and_(lane, 15, type=b32), arow, ra))
    else:
        aaddr = k.mad(k.and_(lane, 15 if anum == 2 else 7, type=b32), arow, ra)
    a = k.ldmatrix(aaddr, num=anum)
    if bnum == 2:
        baddr = k.mad(k.and_(k.shr(lane, 3), 1, type=b32), 16, k.mad(k.and_(lane, 7, type=b32), brow, rb))
    else:
        baddr = k.mad(k.and_(lane, 7, type=b32), brow, rb)
    b = k.ldmatrix(baddr, num=bnum)
    nacc = 2 if shape.startswith("m8") else 4
    d = k.regs(f32 if a_type == "f16" else s32, nacc, name="d")
    if unpack is None:
        k.mma(a, b, 0, shape=shape, a_type=a_type, dst=d)
    else:
        def lo(x):
            if unpack == "scaled":
                return k.and_(k.shl(x, 4), 0xF0F0F0F0, type=b32)
            t0 = k.and_(x, 0x08080808, type=b32)
            return k.mad(t0, 0x1E, k.and_(x, 0x0F0F0F0F, type=b32), type=u32)

        def hi(x):
            if unpack == "scaled":
                return k.and_(x, 0xF0F0F0F0, type=b32)
            h = k.and_(k.shr(x, 4, type=u32), 0x0F0F0F0F, type=b32)
            return k.mad(k.and_(h, 0x08080808, type=b32), 0x1E, h, type=u32)
        k.mma([lo(x) for x in a], [lo(x) for x in b], 0, shape="m16n8k32", a_type="s8", dst=d)
        k.mma([hi(x) for x in a], [hi(x) for x in b], d, shape="m16n8k32", a_type="s8", dst=d)
        if unpack == "scaled":
            for r in d:
                k.shr(r, 8, type=s32, dst=r)
    g, t = k.shr(lane, 2), k.and_(lane, 3, type=b32)
    off = k.mul(k.mad(g, 8, k.shl(t, 1, type=b32)), 4, mode="wide")
    p = k.add(pd, off)
    k.st(p, [d[0], d[1]], type=b32)
    if nacc == 4:
        k.st(pf.Addr(p, 256), [d[2], d[3]], type=b32)
    return k.module()


def pack4(v):
    v = (v.astype(np.int64) & 0xF).astype(np.uint8)
    return v[:, 0::2] | (v[:, 1::2] << 4)


def operands(a_type, am, bn, kk):
    if a_type == "f16":
        a = RNG.standard_normal((am, kk)).astype(np.float16)
        b = RNG.standard_normal((bn, kk)).astype(np.float16)
        return a, b, a.view(np.uint8).reshape(am, -1), b.view(np.uint8).reshape(bn, -1)
    lo, hi = {"s8": (-128, 128), "s4": (-8, 8), "u4": (0, 16)}[a_type]
    a = RNG.integers(lo, hi, (am, kk))
    b = RNG.integers(lo, hi, (bn, kk))
    if a_type == "s8":
        return a, b, a.astype(np.int8).view(np.uint8), b.astype(np.int8).view(np.uint8)
    return a, b, pack4(a), pack4(b)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", list(MMA_KERNELS))
def test_ldmatrix_mma_golden(name, source):
    shape, a_type, (am, arow), (bn, brow), _, _ = MMA_KERNELS[name]
    kk = arow * 8 // {"f16": 16, "s8": 8, "s4": 4, "u4": 4}[a_type]
    a, b, pa, pb = operands(a_type, am, bn, kk)
    d = poisoned(am * 8 * 4, np.float32 if a_type == "f16" else np.int32)
    mod = build(source, lambda: ldmatrix_mma(name), lambda b: b.module_03())
    interp.run(mod, name, block=32, args=[np.ascontiguousarray(pa), np.ascontiguousarray(pb), d])
    if a_type == "f16":
        want = a.astype(np.float64) @ b.astype(np.float64).T
        np.testing.assert_allclose(d.reshape(am, 8), want, rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(d.reshape(am, 8), a @ b.T)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("unpack", ["scaled", "signext"])
def test_s4_via_s8_golden(unpack, source):
    a, b, pa, pb = operands("s4", 16, 8, 64)
    d = poisoned(16 * 8 * 4, np.int32)
    mod = build(source, lambda: ldmatrix_mma("mma_s4_m16n8k64", unpack), lambda b: b.module_04())
    interp.run(mod, f"s4_via_s8_{unpack}", block=32, args=[pa, pb, d])
    np.testing.assert_array_equal(d.reshape(16, 8), a @ b.T)


# ---------------------------------------------------------------- 05_mbarrier_bulk_tma_sm90 (1-D bulk copy)

def bulk_copy_1d():
    k = pf.KernelBuilder("bulk_copy_1d", target="sm_90", reqntid=128)
    src, dst = k.param_ptr("p_src", u8), k.param_ptr("p_dst", u8)
    nbytes = k.param_value("p_nbytes", u32)
    mbar = k.shared("mbar", 8, align=8)
    buf = k.shared("buf", 16384, align=128)
    t = k.tid()
    rm, rbuf = k.shared_base(mbar), k.shared_base(buf)
    p1 = k.setp("eq", t, 0)
    k.mbarrier_init(rm, 1, space="shared::cta", pred=p1)
    k.fence("fence.mbarrier_init.release.cluster", pred=p1)
    k.bar_sync(0)
    k.mbarrier_arrive(rm, expect_tx=nbytes, space="shared::cta", pred=p1)
    k.bulk_copy(rbuf, src, nbytes, rm, pred=p1)
    k.mbarrier_wait(rm, 0)
    i = k.mov(t, type=u32)
    with k.loop() as _:
        off = k.shl(i, 4, type=b32)
        k.break_(k.setp("ge", off, nbytes, type=u32))
        v = k.ld(k.add(rbuf, off), type=b32, space="shared", vec=4)
        k.st(k.add(dst, k.cvt(off, u64)), v, type=b32)
        k.add(i, 128, dst=i)
    return k.module()


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("nbytes", [16, 4096, 16384])
def test_bulk_copy_1d(nbytes, source):
    src = RNG.integers(0, 256, 16384, dtype=np.uint8)
    dst = poisoned(16384)
    mod = build(source, bulk_copy_1d, lambda b: b.bulk_copy_1d())
    interp.run(mod, "bulk_copy_1d", block=128, args=[src, dst, nbytes])
    np.testing.assert_array_equal(dst[:nbytes], src[:nbytes])
    assert (dst[nbytes:] == POISON).all()


def test_golden_kernels_assemble():
    """The rebuilt kernels are real PTX: ptxas accepts them."""
    for m in (saxpy_rev(), cp_async_forms(), cp_async_pipeline(), ldmatrix_mma("mma_s4_m16n8k64", "signext")):
        pf.assemble(m)
