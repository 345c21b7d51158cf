"""The golden PTX examples (tests/golden/*.ptx), rebuilt with the KernelBuilder.

Each function follows its hand-written kernel instruction by instruction (the PTX line is
quoted where the correspondence is not obvious), so that both assemble to the same SASS.
"""

from __future__ import annotations

import ptxforge as pf
from ptxforge import Addr, b8, b32, f32, s32, u32, u64
from ptxforge.isa.fragments import MATRIX_ROW_BYTES, acc_lane_origin, acc_offset, ldmatrix_tile_origin

# ============================================================== 01_module_basics.ptx


def saxpy_rev(target="sm_80"):
    k = pf.KernelBuilder("saxpy_rev", target=target, maxntid=256, minnctapersm=2)
    dyn_smem = k.dynamic_shared("dyn_smem", align=16)
    p_x, p_y = k.param("p_x", u64), k.param("p_y", u64)
    p_n, p_a = k.param("p_n", u32), k.param("p_a", f32)
    x, y = k.load_param(p_x), k.load_param(p_y)
    n, a = k.load_param(p_n), k.load_param(p_a)
    k.cvta(x, to="global", dst=x)
    k.cvta(y, to="global", dst=y)

    ctaid, ntid, tid = k.ctaid(), k.ntid(), k.tid()
    i = k.mad(ctaid, ntid, tid)                      # i = ctaid.x*ntid.x + tid.x
    in_range = k.setp("lt", i, n)

    with k.section("x[i] (or 0 out of range) -> dyn_smem[tid]"):
        xi = k.mov(0.0, type=f32)
        byte_off = k.mul(i, 4, mode="wide")
        k.ld(k.add(x, byte_off), type=f32, dst=xi, pred=in_range)
        smem = k.mov(dyn_smem)                       # mov.u32 %r6, dyn_smem
        slot = k.add(smem, k.shl(tid, 2))
        k.st(slot, xi, space="shared")
    k.bar_sync(0)

    with k.section("read the mirrored slot j = ntid.x - 1 - tid.x"):
        j = k.sub(ntid, 1)
        k.sub(j, tid, dst=j)
        k.shl(j, 2, dst=j)
        k.add(smem, j, dst=j)
        k.ld(j, type=f32, space="shared", dst=xi)

    done = k.label("done")
    k.bra(done, pred=~in_range)
    py = k.add(y, byte_off)
    yi = k.ld(py, type=f32)
    k.fma(a, xi, yi, dst=yi)
    k.st(py, yi)
    k.place(done)
    return k.finish()


def special_regs(target="sm_80"):
    k = pf.KernelBuilder("special_regs", target=target, reqntid=128)
    out = k.load_param(k.param("p_out", u64))
    k.cvta(out, to="global", dst=out)
    s_flag = k.shared("s_flag", 4, align=4)

    tid, ctaid, ntid, nctaid = k.tid(), k.ctaid(), k.ntid(), k.nctaid()
    lane, warp, nwarp = k.laneid(), k.sreg("warpid"), k.sreg("nwarpid")

    first = k.setp("eq", tid, 0)
    k.st(s_flag, 0x600D, type=u32, space="shared", pred=first)
    k.barrier_sync(0)                                # barrier.sync: not .aligned, unlike bar.sync
    flag = k.ld(s_flag, type=u32, space="shared")
    k.selp(flag, 0, first, dst=flag)

    gid = k.mad(ctaid, ntid, tid)
    addr = k.mul(gid, 32, mode="wide")
    k.add(out, addr, dst=addr)
    k.st(addr, [tid, ctaid, ntid, nctaid], type=u32)
    k.st(addr, [lane, warp, nwarp, flag], type=u32, offset=16)
    k.membar("gl")
    k.fence("fence.acq_rel.gpu")
    return k.finish()


def module_01():
    return pf.Module([saxpy_rev(), special_regs()])


# ============================================================== 02_cp_async.ptx


def cp_async_forms(target="sm_80"):
    k = pf.KernelBuilder("cp_async_forms", target=target, reqntid=32)
    p_src, p_dst = k.param("p_src", u64), k.param("p_dst", u64)
    sbuf = k.shared("sbuf", 1024, align=16)
    src, dst = k.load_param(p_src), k.load_param(p_dst)
    k.cvta(src, to="global", dst=src)
    k.cvta(dst, to="global", dst=dst)
    tid = k.tid()

    with k.section("pre-fill my 32 bytes of smem with 0xFF"):
        base = k.mov(sbuf)
        mine = k.add(base, k.shl(tid, 5))
        ones = k.mov(-1, type=b32)
        k.st(mine, [ones] * 4, type=b32, space="shared")
        k.st(mine, [ones] * 4, type=b32, space="shared", offset=16)
    k.bar_sync(0)

    with k.section("(1) 16 bytes, zero-fill: src-size = t % 17"):
        valid = k.rem(tid, 17)
        src16 = k.add(src, k.mul(tid, 16, mode="wide"))
        k.cp_async(mine, src16, 16, src_size=valid)

    with k.section("(2) 8 bytes with an ignore-src predicate: odd threads get zeros"):
        odd = k.setp("ne", k.and_(tid, 1), 0)
        src8 = k.mul(tid, 8, mode="wide")
        k.add(src8, 512, dst=src8)
        k.add(src, src8, dst=src8)
        k.cp_async(Addr(mine, 16), src8, 8, ignore_src=odd)

    with k.section("(3) 4 bytes with the L2 prefetch-size hint"):
        off4 = k.mul(tid, 4, mode="wide")
        src4 = k.add(off4, 768)
        k.add(src, src4, dst=src4)
        k.cp_async(Addr(mine, 24), src4, 4, prefetch="L2::128B")

    with k.section("(4) 4 bytes with an L2 cache-eviction policy"):
        policy = k.createpolicy("L2::evict_last", 1.0)
        src4b = k.add(off4, 896)
        k.add(src, src4b, dst=src4b)
        k.cp_async(Addr(mine, 28), src4b, 4, cache_policy=policy)

    k.cp_async_commit()
    k.cp_async_wait(0)
    k.bar_sync(0)

    lo = k.ld(mine, type=b32, space="shared", vec=4)
    hi = k.ld(mine, type=b32, space="shared", vec=4, offset=16)
    out = k.mul(tid, 32, mode="wide")
    k.add(dst, out, dst=out)
    k.st(out, lo, type=b32)
    k.st(out, hi, type=b32, offset=16)
    return k.finish()


def cp_async_pipeline(target="sm_80"):
    k = pf.KernelBuilder("cp_async_pipeline", target=target, reqntid=128)
    p_src, p_dst, p_n = k.param("p_src", u64), k.param("p_dst", u64), k.param("p_nchunks", u32)
    ring = k.shared("ring", 6144, align=128)                    # 3 stages x 2048 bytes
    src, dst, nchunks = k.load_param(p_src), k.load_param(p_dst), k.load_param(p_n)
    k.cvta(src, to="global", dst=src)
    k.cvta(dst, to="global", dst=dst)
    tid = k.tid()
    slot = k.shl(tid, 4)
    sdst = k.mov(ring)
    k.add(sdst, slot, dst=sdst)
    gsrc = k.cvt(slot, u64)
    k.add(src, gsrc, dst=gsrc)

    with k.section("prologue: stages 0 and 1 (always committed)"):
        p = k.setp("gt", nchunks, 0)
        k.cp_async(sdst, gsrc, 16, pred=p)
        k.cp_async_commit()
        k.setp("gt", nchunks, 1, dst=p)
        k.cp_async(Addr(sdst, 2048), Addr(gsrc, 2048), 16, pred=p)
        k.cp_async_commit()

    acc = [k.mov(0, type=b32) for _ in range(4)]
    i = k.mov(0, type=u32)
    top, end = k.label("loop"), k.label("end")
    k.place(top)
    k.bra(end, pred=k.setp("ge", i, nchunks))
    with k.section("issue chunk i+2 into stage (i+2)%3"):
        ahead = k.add(i, 2)
        issue = k.setp("lt", ahead, nchunks)
        stage = k.rem(ahead, 3)
        sa = k.mul(stage, 2048)
        k.add(sdst, sa, dst=sa)
        ga = k.mul(ahead, 2048, mode="wide")
        k.add(gsrc, ga, dst=ga)
        k.cp_async(sa, ga, 16, pred=issue)
        k.cp_async_commit()                                     # possibly an empty group
        k.cp_async_wait(2)
        k.bar_sync(0)
    with k.section("consume stage i%3"):
        k.rem(i, 3, dst=stage)
        k.mul(stage, 2048, dst=sa)
        k.add(sdst, sa, dst=sa)
        v = k.ld(sa, type=u32, space="shared", vec=4)
        for r, x in zip(acc, v):
            k.add(r, x, dst=r)
        k.bar_sync(0)
    k.add(i, 1, dst=i)
    k.bra(top, uni=True)
    k.place(end)
    k.cp_async_wait_all()
    out = k.mul(tid, 16, mode="wide")
    k.add(dst, out, dst=out)
    k.st(out, acc, type=u32)
    return k.finish()


def cp_async_mbarrier(target="sm_80"):
    k = pf.KernelBuilder("cp_async_mbarrier", target=target, reqntid=32)
    p_src, p_dst = k.param("p_src", u64), k.param("p_dst", u64)
    mbar = k.shared("mbar", 8, align=8)
    buf = k.shared("buf", 512, align=16)
    src, dst = k.load_param(p_src), k.load_param(p_dst)
    k.cvta(src, to="global", dst=src)
    k.cvta(dst, to="global", dst=dst)
    tid = k.tid()
    bar = k.mov(mbar)
    k.mbarrier_init(bar, 32, pred=k.setp("eq", tid, 0))
    k.bar_sync(0)

    mine = k.mov(buf)
    k.add(mine, k.shl(tid, 4), dst=mine)
    goff = k.mul(tid, 16, mode="wide")
    k.cp_async(mine, k.add(src, goff), 16)
    k.cp_async_mbarrier_arrive(bar, noinc=True)

    wait = k.label("wait")
    k.place(wait)
    done = k.mbarrier_test_wait(bar, 0)                         # try_wait needs sm_90
    k.bra(wait, pred=~done)

    other = k.xor(tid, 31)
    theirs = k.mov(buf)
    k.shl(other, 4, dst=other)
    k.add(theirs, other, dst=theirs)
    v = k.ld(theirs, type=b32, space="shared", vec=4)
    k.st(k.add(dst, goff), v, type=b32)
    return k.finish()


def module_02():
    return pf.Module([cp_async_forms(), cp_async_pipeline(), cp_async_mbarrier()])


# ============================================================== 03_ldmatrix_mma.ptx

# name -> (mma shape, A type, A tile bytes, B tile bytes, ldmatrix count for A, for B)
LDMATRIX_MMA = {
    "mma_f16_m16n8k16": ("m16n8k16", "f16", 512, 256, 4, 2),
    "mma_s8_m16n8k32": ("m16n8k32", "s8", 512, 256, 4, 2),
    "mma_s4_m16n8k64": ("m16n8k64", "s4", 512, 256, 4, 2),
    "mma_u4_m16n8k64": ("m16n8k64", "u4", 512, 256, 4, 2),
    "mma_s4_m16n8k32": ("m16n8k32", "s4", 256, 128, 2, 1),
    "mma_s4_m8n8k32": ("m8n8k32", "s4", 128, 128, 1, 1),
}


def _load_tiles(k, a_bytes, b_bytes):
    """Params p_a, p_b, p_d; one 16-byte cp.async per lane for each tile; returns (lane, sA, sB, d)."""
    p_a, p_b, p_d = k.param("p_a", u64), k.param("p_b", u64), k.param("p_d", u64)
    sA, sB = k.shared("sA", a_bytes, align=128), k.shared("sB", b_bytes, align=128)
    a, b, d = k.load_param(p_a), k.load_param(p_b), k.load_param(p_d)
    for r in (a, b, d):
        k.cvta(r, to="global", dst=r)
    lane = k.laneid()
    with k.section("global -> shared: 16 bytes per lane"):
        off = k.shl(lane, 4)
        goff = k.cvt(off, u64)
        sa, sb = k.mov(sA), k.mov(sB)
        in_a = k.setp("lt", off, a_bytes)
        in_b = k.setp("lt", off, b_bytes)
        k.cp_async(k.add(sa, off), k.add(a, goff), 16, pred=in_a)
        k.cp_async(k.add(sb, off), k.add(b, goff), 16, pred=in_b)
        k.cp_async_commit()
        k.cp_async_wait(0)
        k.bar_sync(0)
    return lane, sa, sb, d


def _ldmatrix_rows(k, lane, base, num, row_bytes):
    """The lane's row address for an ldmatrix of `num` 8x8 matrices over a row_bytes-wide tile:
    16 x 32 B (x4), 8 x 32 B or 16 x 16 B (x2), 8 x 16 B (x1), matrices down the rows first."""
    chunks = row_bytes // MATRIX_ROW_BYTES
    row, chunk = ldmatrix_tile_origin(num, lane, row_blocks=num // chunks, ops=k)
    addr = k.mad(row, row_bytes, base)
    if chunks > 1:
        k.mad(chunk, MATRIX_ROW_BYTES, addr, dst=addr)
    return addr


def _store_d(k, lane, d_ptr, acc):
    """D row-major 16x8 (or 8x8): c0,c1 -> (g, 2t..2t+1), c2,c3 -> (g+8, 2t..2t+1)."""
    g, col = acc_lane_origin(lane, ops=k)
    idx = k.mad(g, 8, col)
    addr = k.add(d_ptr, k.mul(idx, 4, mode="wide"))
    k.st(addr, list(acc[:2]), type=b32)
    if len(acc) == 4:
        k.st(addr, list(acc[2:]), type=b32, offset=acc_offset(2)[0] * 8 * 4)   # +8 rows of 8 s32


def ldmatrix_mma(name, target="sm_80"):
    shape, a_type, a_bytes, b_bytes, a_num, b_num = LDMATRIX_MMA[name]
    k = pf.KernelBuilder(name, target=target, reqntid=32)
    lane, sa, sb, d_ptr = _load_tiles(k, a_bytes, b_bytes)
    row_bytes = a_bytes // 16 if a_num > 1 else 16
    with k.section(f"ldmatrix A (x{a_num}), B (x{b_num})"):
        fa = k.ldmatrix(_ldmatrix_rows(k, lane, sa, a_num, row_bytes), num=a_num)
        fb = k.ldmatrix(_ldmatrix_rows(k, lane, sb, b_num, b_bytes // 8), num=b_num)
    acc = k.mma(fa, fb, 0, shape=shape, a_type=a_type)           # D = A*B + 0
    _store_d(k, lane, d_ptr, acc)
    return k.finish()


def module_03(target="sm_80"):
    return pf.Module([ldmatrix_mma(name, target) for name in LDMATRIX_MMA])


# ============================================================== 04_s4_via_s8.ptx


def _s4_fragments(k):
    """The 03 A (x4) and B (x2) fragment loads of m16n8k64.s4 (only B's copy is predicated here)."""
    p_a, p_b, p_d = k.param("p_a", u64), k.param("p_b", u64), k.param("p_d", u64)
    sA, sB = k.shared("sA", 512, align=128), k.shared("sB", 256, align=128)
    a, b, d = k.load_param(p_a), k.load_param(p_b), k.load_param(p_d)
    for r in (a, b, d):
        k.cvta(r, to="global", dst=r)
    lane = k.laneid()
    off = k.shl(lane, 4)
    goff = k.cvt(off, u64)
    sa, sb = k.mov(sA), k.mov(sB)
    in_b = k.setp("lt", off, 256)
    k.cp_async(k.add(sa, off), k.add(a, goff), 16)
    k.cp_async(k.add(sb, off), k.add(b, goff), 16, pred=in_b)
    k.cp_async_commit()
    k.cp_async_wait(0)
    k.bar_sync(0)
    fa = k.ldmatrix(_ldmatrix_rows(k, lane, sa, 4, 32), num=4)
    fb = k.ldmatrix(_ldmatrix_rows(k, lane, sb, 2, 32), num=2)
    return lane, fa, fb, d


def s4_via_s8_scaled(target="sm_80"):
    k = pf.KernelBuilder("s4_via_s8_scaled", target=target, reqntid=32)
    lane, fa, fb, d_ptr = _s4_fragments(k)
    with k.section("unpack: lo = (x << 4) & 0xF0F0F0F0, hi = x & 0xF0F0F0F0 (16 * value as s8)"):
        lo_hi = []
        for x in list(fa) + list(fb):
            lo = k.shl(x, 4)
            k.and_(lo, 0xF0F0F0F0, dst=lo)
            lo_hi.append((lo, k.and_(x, 0xF0F0F0F0)))
    a_lo, a_hi = [p[0] for p in lo_hi[:4]], [p[1] for p in lo_hi[:4]]
    b_lo, b_hi = [p[0] for p in lo_hi[4:]], [p[1] for p in lo_hi[4:]]
    acc = k.mma(a_lo, b_lo, 0, shape="m16n8k32", a_type="s8")
    k.mma(a_hi, b_hi, acc, shape="m16n8k32", a_type="s8", dst=acc)
    for r in acc:
        k.shr(r, 8, dst=r)                                        # exact: D is a multiple of 256
    _store_d(k, lane, d_ptr, acc)
    return k.finish()


def s4_via_s8_signext(target="sm_80"):
    k = pf.KernelBuilder("s4_via_s8_signext", target=target, reqntid=32)
    lane, fa, fb, d_ptr = _s4_fragments(k)
    t0, t1 = k.reg(b32, "t0"), k.reg(b32, "t1")
    with k.section("unpack with sign extension: lo = (x & 0x0F0F0F0F) | ((x & 0x08080808) * 0x1E)"):
        lo_hi = []
        for x in list(fa) + list(fb):
            lo = k.and_(x, 0x0F0F0F0F)
            k.and_(x, 0x08080808, dst=t0)
            k.mad(t0, 0x1E, lo, dst=lo)                           # OR == ADD here (disjoint bits)
            hi = k.shr(x, 4, type=u32)
            k.and_(hi, 0x0F0F0F0F, dst=hi)
            k.and_(hi, 0x08080808, dst=t1)
            k.mad(t1, 0x1E, hi, dst=hi)
            lo_hi.append((lo, hi))
    a_lo, a_hi = [p[0] for p in lo_hi[:4]], [p[1] for p in lo_hi[:4]]
    b_lo, b_hi = [p[0] for p in lo_hi[4:]], [p[1] for p in lo_hi[4:]]
    acc = k.mma(a_lo, b_lo, 0, shape="m16n8k32", a_type="s8")
    k.mma(a_hi, b_hi, acc, shape="m16n8k32", a_type="s8", dst=acc)
    _store_d(k, lane, d_ptr, acc)
    return k.finish()


def module_04(target="sm_80"):
    return pf.Module([s4_via_s8_scaled(target), s4_via_s8_signext(target)])


# ============================================================== 05_mbarrier_bulk_tma_sm90.ptx


def _wait_phase0(k, bar):
    wait = k.label("wait")
    k.place(wait)
    done = k.mbarrier_try_wait(bar, 0)                            # .parity, .shared::cta
    k.bra(wait, pred=~done)


def bulk_copy_1d(target="sm_90"):
    k = pf.KernelBuilder("bulk_copy_1d", target=target, reqntid=128)
    p_src, p_dst, p_n = k.param("p_src", u64), k.param("p_dst", u64), k.param("p_nbytes", u32)
    mbar = k.shared("mbar", 8, align=8)
    buf = k.shared("buf", 16384, align=128)
    src, dst, nbytes = k.load_param(p_src), k.load_param(p_dst), k.load_param(p_n)
    k.cvta(src, to="global", dst=src)
    k.cvta(dst, to="global", dst=dst)
    tid = k.tid()
    bar, sbuf = k.mov(mbar), k.mov(buf)
    first = k.setp("eq", tid, 0)

    k.mbarrier_init(bar, 1, space="shared::cta", pred=first)
    k.fence("fence.mbarrier_init.release.cluster", pred=first)
    k.bar_sync(0)
    with k.section("one thread announces the bytes, then launches the copy"):
        k.mbarrier_arrive(bar, expect_tx=nbytes, space="shared::cta", pred=first)
        k.bulk_copy(sbuf, src, nbytes, bar, pred=first)
    _wait_phase0(k, bar)

    with k.section("smem -> dst, 16 bytes per thread per step"):
        i = k.mov(tid)
        top, done = k.label("copy"), k.label("done")
        k.place(top)
        off = k.shl(i, 4)
        k.bra(done, pred=k.setp("ge", off, nbytes))
        v = k.ld(k.add(sbuf, off), type=b32, space="shared", vec=4)
        k.st(k.add(dst, k.cvt(off, u64)), v, type=b32)
        k.add(i, 128, dst=i)
        k.bra(top, uni=True)
        k.place(done)
    return k.finish()


def tma_load_2d(target="sm_90"):
    k = pf.KernelBuilder("tma_load_2d", target=target, reqntid=128)
    p_tmap = k.param("p_tmap", b8, nbytes=128, align=128)
    p_dst, p_x0, p_y0 = k.param("p_dst", u64), k.param("p_x0", u32), k.param("p_y0", u32)
    mbar = k.shared("mbar", 8, align=8)
    tile = k.shared("tile", 4096, align=1024)
    tmap = k.param_address(p_tmap)                                # mov.b64 + cvta.param.u64
    dst = k.load_param(p_dst)
    k.cvta(dst, to="global", dst=dst)
    x0, y0 = k.load_param(p_x0), k.load_param(p_y0)
    tid = k.tid()
    bar, stile = k.mov(mbar), k.mov(tile)
    first = k.setp("eq", tid, 0)

    k.prefetch_tensormap(tmap, pred=first)
    k.mbarrier_init(bar, 1, space="shared::cta", pred=first)
    k.fence("fence.mbarrier_init.release.cluster", pred=first)
    k.bar_sync(0)
    k.mbarrier_arrive(bar, expect_tx=4096, space="shared::cta", pred=first)
    k.tensor_load(stile, tmap, [x0, y0], bar, pred=first)         # coordinates {x (column), y (row)}
    _wait_phase0(k, bar)

    with k.section("1024 int32 in smem -> dst, 8 per thread"):
        off = k.shl(tid, 5)
        mine = k.add(stile, off)
        lo = k.ld(mine, type=b32, space="shared", vec=4)
        hi = k.ld(mine, type=b32, space="shared", vec=4, offset=16)
        out = k.add(dst, k.cvt(off, u64))
        k.st(out, lo, type=b32)
        k.st(out, hi, type=b32, offset=16)
    return k.finish()


def tma_store_2d(target="sm_90"):
    k = pf.KernelBuilder("tma_store_2d", target=target, reqntid=128)
    p_tmap = k.param("p_tmap", b8, nbytes=128, align=128)
    p_x0, p_y0 = k.param("p_x0", u32), k.param("p_y0", u32)
    tile = k.shared("tile", 4096, align=1024)
    tmap = k.param_address(p_tmap)
    x0, y0 = k.load_param(p_x0), k.load_param(p_y0)
    tid = k.tid()
    stile = k.mov(tile)

    with k.section("thread t writes row t/4, cols 8*(t%4)..+7: v = 1000*(row+y0) + col + x0"):
        row = k.shr(tid, 2)
        col = k.and_(tid, 3)
        k.shl(col, 3, dst=col)
        v0 = k.add(row, y0)
        k.mul(v0, 1000, dst=v0)
        k.add(v0, col, dst=v0)
        k.add(v0, x0, dst=v0)
        vals = [v0] + [k.add(v0, j) for j in range(1, 8)]
        mine = k.shl(tid, 5)
        k.add(stile, mine, dst=mine)
        k.st(mine, vals[:4], type=b32, space="shared")
        k.st(mine, vals[4:], type=b32, space="shared", offset=16)

    k.fence("fence.proxy.async.shared::cta")                      # generic writes -> async proxy
    k.bar_sync(0)
    first = k.setp("eq", tid, 0)
    k.tensor_store(tmap, [x0, y0], stile, pred=first)
    k.bulk_commit(pred=first)
    k.bulk_wait(0, read=True, pred=first)                         # smem may be reused after this
    return k.finish()


def module_05():
    return pf.Module([bulk_copy_1d(), tma_load_2d(), tma_store_2d()])


# ============================================================== 06_wgmma_s8_sm90a.ptx


def wgmma_s8_m64n64k32(target="sm_90a"):
    k = pf.KernelBuilder("wgmma_s8_m64n64k32", target=target, reqntid=128)
    p_a, p_b, p_out = k.param("p_a", u64), k.param("p_b", u64), k.param("p_out", u64)
    p_lbo, p_sbo = k.param("p_lbo_enc", u32), k.param("p_sbo_enc", u32)
    sA, sB = k.shared("sA", 2048, align=1024), k.shared("sB", 2048, align=1024)
    a, b, out = k.load_param(p_a), k.load_param(p_b), k.load_param(p_out)
    lbo, sbo = k.load_param(p_lbo), k.load_param(p_sbo)
    for r in (a, b, out):
        k.cvta(r, to="global", dst=r)
    tid = k.tid()

    with k.section("each thread moves one 16-byte chunk of A and of B: row = t/2, kc = t%2"):
        row = k.shr(tid, 1)
        kc = k.and_(tid, 1)
        i = k.shr(row, 3)
        r = k.and_(row, 7)
        soff = k.mul(i, 256)
        k.mad(kc, 128, soff, dst=soff)
        k.mad(r, 16, soff, dst=soff)                              # core matrix (i, kc), row r
        goff = k.cvt(k.shl(tid, 4), u64)                          # row*32 + kc*16 = 16*t
        va = k.ld(k.add(a, goff), type=b32, vec=4)
        vb = k.ld(k.add(b, goff), type=b32, vec=4)
        sa, sb = k.mov(sA), k.mov(sB)
        k.st(k.add(sa, soff), va, type=b32, space="shared")
        k.st(k.add(sb, soff), vb, type=b32, space="shared")
    k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)

    with k.section("descriptors: addr>>4 | lbo<<16 (low word), sbo (high word), no swizzle"):
        lbo_bits = k.shl(lbo, 16)
        descs = []
        for base in (sa, sb):
            lo = k.shr(base, 4)
            k.and_(lo, 0x3FFF, dst=lo)
            k.or_(lo, lbo_bits, dst=lo)
            descs.append(k.mov([lo, sbo]))                        # mov.b64 %desc, {lo, hi}
    scale_d = k.setp("ne", tid, tid)                              # false: D = A*B
    acc = k.regs(s32, 32, name="d")
    k.wgmma_fence()
    k.wgmma(descs[0], descs[1], acc, n=64, a_type="s8", scale_d=scale_d)
    k.wgmma_commit()
    k.wgmma_wait(0)

    dst = k.add(out, k.mul(tid, 128, mode="wide"))               # 32 x 4 bytes per thread
    for j in range(8):
        k.st(dst, list(acc[4 * j:4 * j + 4]), type=b32, offset=16 * j)
    return k.finish()


def module_06():
    return pf.Module([wgmma_s8_m64n64k32()])


#: golden file -> (rebuilt module factory, arch to assemble for)
GOLDEN = {
    "01_module_basics.ptx": (module_01, "sm_80"),
    "02_cp_async.ptx": (module_02, "sm_80"),
    "03_ldmatrix_mma.ptx": (module_03, "sm_80"),
    "04_s4_via_s8.ptx": (module_04, "sm_80"),
    "05_mbarrier_bulk_tma_sm90.ptx": (module_05, "sm_90"),
    "06_wgmma_s8_sm90a.ptx": (module_06, "sm_90a"),
}
