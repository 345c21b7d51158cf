"""A wgmma probe: one warpgroup runs the k-slices of one wgmma form over shared-memory images that
the caller supplies byte for byte, so the interpreter and a GPU can be compared on any layout,
swizzle, major-ness and descriptor (right or wrong).

    case = wgmma_case(form, rng, a_major="K", b_major="MN", swizzle_a=128, swizzle_b=64, rs=False)
    interp.run(case.kernel, block=128, args=case.args)   # then case.expected() == case.out

The kernel copies `a_img` / `b_img` into shared memory with ordinary stores, executes
fence.proxy.async and bar.sync, loads D from `c`, then for every k-slice s issues one wgmma with
descriptors `desc_a[s]`, `desc_b[s]` (start address relative to the tile: the kernel adds the
tile's shared address >> 4) or, for A from registers, `a_regs[s]` (4 words per thread); the first
slice's scale-d comes from `scale_d` (0: D = A*B), later ones accumulate.  It stores D raw:
out[tid * d_regs + i] = d_i.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..builder import KernelBuilder
from ..hopper.layout import SmemTile
from ..isa import types as T
from ..isa.wgmma import WgmmaForm, a_fragment_layout, accumulator_layout

_PTXFORGE_INTERNAL = True


def wgmma_probe_kernel(form: WgmmaForm, *, k_slices: int, a_bytes: int, b_bytes: int, rs: bool,
                       trans_a: bool = False, trans_b: bool = False, scale_a: int = 1, scale_b: int = 1,
                       satfinite: bool = False, fence: bool = True, wait: bool = True,
                       overwrite_b: bool = False) -> KernelBuilder:
    """The probe kernel for one form (see the module docstring).  `fence=False` leaves out
    fence.proxy.async, `wait=False` stores D before wgmma.wait_group and `overwrite_b=True` writes
    the B tile between the wgmma and its wait (all three bugs, for tests)."""
    k = KernelBuilder(f"wgmma_probe_{form.a_type.name}_{form.d_type.name}_n{form.n}", target="sm_90a",
                      reqntid=128)
    a_img, b_img = k.param_ptr("a_img", T.u8), k.param_ptr("b_img", T.u8)
    a_regs, desc_a, desc_b = k.param_ptr("a_regs", T.u32), k.param_ptr("desc_a", T.u64), k.param_ptr("desc_b", T.u64)
    c, out = k.param_ptr("c", T.u32), k.param_ptr("out", T.u32)
    sd = k.param_value("scale_d", T.u32)
    tid = k.tid()
    sA, sB, d, row = stage_operands(k, form, tid, a_img, b_img, a_bytes, b_bytes, c, fence=fence)
    base_a = k.cvt(k.shr(k.shared_base(sA), 4), "u64")
    base_b = k.cvt(k.shr(k.shared_base(sB), 4), "u64")
    p = k.setp("ne", sd, 0)
    k.wgmma_fence()
    for s in range(k_slices):
        db = k.add(k.ld(desc_b, type=T.u64, offset=8 * s), base_b)
        if rs:
            words = k.regs(T.b32, 4, f"a{s}_")
            arow = k.mul(tid, 16, mode="wide")
            for j in range(4):
                k.ld(k.add(a_regs, arow), type=T.b32, offset=(s * 128 * 16) + 4 * j, dst=words[j])
            a = words
        else:
            a = k.add(k.ld(desc_a, type=T.u64, offset=8 * s), base_a)
        k.wgmma(a, db, d, n=form.n, a_type=form.a_type, b_type=form.b_type, acc=form.d_type,
                scale_d=p if s == 0 else 1, bitop=form.bitop, scale_a=scale_a, scale_b=scale_b,
                trans_a=trans_a, trans_b=trans_b, satfinite=satfinite)
    k.wgmma_commit()
    if overwrite_b:
        k.st(k.shared_base(sB), 0, type=T.u32, space="shared", pred=k.setp("eq", tid, 0))
    if wait:
        k.wgmma_wait(0)
    for i in range(form.d_regs):
        k.st(k.add(out, row), d[i], type=T.b32, offset=4 * i)
    if not wait:
        k.wgmma_wait(0)
    return k


def stage_operands(k: KernelBuilder, form: WgmmaForm, tid, a_img, b_img, a_bytes: int, b_bytes: int, c, *,
                   fence: bool = True):
    """Emit a probe's prologue for one warpgroup (`tid`: its thread index register): copy `a_bytes` of `a_img`
    and `b_bytes` of `b_img` (global pointers) into the 1024-aligned shared buffers sA and sB with ordinary
    16-byte stores, fence the async proxy (unless `fence=False`), bar.sync, and load each thread's accumulator
    words from `c` (thread t's at c[t * d_regs ..]).  Returns (sA, sB, d registers, the thread's byte offset into
    c / out)."""
    sA = k.shared("sA", max(a_bytes, 16), align=1024)
    sB = k.shared("sB", b_bytes, align=1024)
    off = k.shl(tid, 4)
    for img, sym, nbytes in ((a_img, sA, a_bytes), (b_img, sB, b_bytes)):
        for base in range(0, nbytes, 128 * 16):
            o = k.add(off, base)
            inside = k.setp("lt", o, nbytes)
            with k.if_(inside):
                v = k.ld(k.add(img, k.cvt(o, "u64")), type=T.b32, vec=4)
                k.st(k.add(k.shared_base(sym), o), list(v), type=T.b32, space="shared")
    if fence:
        k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)
    d = k.regs(T.b32, form.d_regs, "d")
    row = k.mul(tid, 4 * form.d_regs, mode="wide")
    for i in range(form.d_regs):
        k.ld(k.add(c, row), type=T.b32, offset=4 * i, dst=d[i])
    return sA, sB, d, row


_NP = {"s8": np.int8, "u8": np.uint8, "f16": np.float16, "bf16": np.uint16, "tf32": np.float32,
       "e4m3": np.uint8, "e5m2": np.uint8, "b1": np.uint8}


def _wide_bits(t, rng, shape):
    """Random finite element bits of float type `t`: values of every mantissa, over 2^-6 .. 2^3."""
    vals = rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 3, shape)
    if t is T.f16:
        return vals.astype(np.float16).view(np.uint16).astype(np.uint32)
    if t is T.bf16:
        return (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
    if t is T.tf32:
        return vals.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    from ..interp.exec_wgmma import FP8
    table = FP8[t.name]
    codes = np.flatnonzero(np.isfinite(table))
    order = np.argsort(table[codes], kind="stable")
    sorted_vals, sorted_codes = table[codes][order], codes[order]
    i = np.clip(np.searchsorted(sorted_vals, vals), 1, len(sorted_vals) - 1)
    pick = np.where(np.abs(sorted_vals[i - 1] - vals) <= np.abs(sorted_vals[i] - vals), i - 1, i)
    return sorted_codes[pick].astype(np.uint32)


def _random_bits(form: WgmmaForm, rng, shape, wide=False):
    """Random element bits of A/B (uint32), chosen so float sums are exact in the interpreter's
    float64 and in a tensor core's f32 (small integers and halves); `wide`: any finite values of
    the float type (`_wide_bits`), for accuracy measurements."""
    t = form.a_type
    if wide and not form.is_integer:
        return _wide_bits(t, rng, shape)
    if t in (T.s8, T.u8):
        return rng.integers(0, 256, shape).astype(np.uint32)
    if t is T.b1:
        return rng.integers(0, 2, shape).astype(np.uint32)
    vals = rng.integers(-4, 5, shape) * 0.5
    if t is T.f16:
        return vals.astype(np.float16).view(np.uint16).astype(np.uint32)
    if t is T.bf16:
        return (vals.astype(np.float32).view(np.uint32) >> 16).astype(np.uint32)
    if t is T.tf32:
        return vals.astype(np.float32).view(np.uint32)
    from ..interp.exec_wgmma import FP8
    table = FP8[t.name]
    return np.array([int(np.flatnonzero(table == v)[0]) for v in vals.ravel()], dtype=np.uint32).reshape(shape)


def _as_tile_dtype(form):
    return {"b1": "u8", "tf32": "f32", "e4m3": "u8", "e5m2": "u8", "bf16": "u16"}.get(form.a_type.name,
                                                                                   form.a_type.name)


def _pack_rows(bits, elem_bits):
    """(rows, K) element bits -> (rows, K * elem_bits / 8) bytes (element 0 in the low bits)."""
    if elem_bits == 1:
        return np.packbits(bits.astype(np.uint8), axis=-1, bitorder="little")
    dt = {8: np.uint8, 16: np.uint16, 32: np.uint32}[elem_bits]
    return np.ascontiguousarray(bits.astype(dt)).view(np.uint8)


@dataclass
class WgmmaCase:
    """Inputs and the numpy expectation of one probe launch."""

    form: WgmmaForm
    kernel: KernelBuilder
    A: np.ndarray  # (64, K_total) element bits
    B: np.ndarray  # (N, K_total) element bits (B^T: B is read by its N rows)
    args: list = field(default_factory=list)
    scale_d: int = 0
    satfinite: bool = False
    sign: int = 1

    @property
    def out(self) -> np.ndarray:
        """The probe's output words (the `out` argument)."""
        return self.args[6]

    def expected(self) -> np.ndarray:
        """The D words each thread must hold, computed with numpy from A, B and C."""
        from ..interp.exec_wgmma import decode
        f = self.form
        A, B = decode(self.A, f.a_type), decode(self.B, f.b_type)
        rows, cols = accumulator_layout(f)
        cw = self.args[5].reshape(128, f.d_regs)
        if f.is_integer:
            D = A.astype(np.int64) @ B.astype(np.int64).T
            if self.scale_d:
                C = np.zeros_like(D)
                C[rows[..., 0], cols[..., 0]] = cw.view(np.int32)
                D = D + C
            if self.satfinite:
                D = np.clip(D, -(1 << 31), (1 << 31) - 1)
            return D.astype(np.uint32)[rows[..., 0], cols[..., 0]].ravel()
        D = self.sign * (A @ B.T) + 0.0
        if self.scale_d:
            C = np.zeros_like(D)
            if f.d_type is T.f16:
                C[rows, cols] = cw.view(np.uint16).reshape(128, -1, 2).view(np.float16)
            else:
                C[rows[..., 0], cols[..., 0]] = cw.view(np.float32)
            D = D + C
        if f.d_type is T.f16:
            return np.ascontiguousarray(D.astype(np.float16)[rows, cols]).view(np.uint32)[..., 0].ravel()
        return D.astype(np.float32)[rows[..., 0], cols[..., 0]].view(np.uint32).ravel()


def wgmma_case(form: WgmmaForm, rng, *, a_major="K", b_major="K", swizzle_a=0, swizzle_b=0, rs=False,
               k_slices=None, scale_d=0, satfinite=False, scale_a=1, scale_b=1, a_offset=0, b_offset=0,
               wide=False, **kernel_kw) -> WgmmaCase:
    """A probe launch of `form` with tiles laid out by `SmemTile` (the numpy model of the layouts)
    and descriptors from `SmemTile.descriptor`; K spans max(one swizzle atom, one k-step).
    a_offset / b_offset (multiples of 128) place a tile that many bytes into its 1024-aligned
    shared buffer, off the swizzle pattern boundary (their descriptors keep base offset 0: wgmma
    swizzles absolute rows).
    wide=True draws float operands and C over all mantissas (sums then round: see
    `wgmma_error_bound`)."""
    eb = form.elem_bits
    kb = 32  # bytes of K per slice
    tile_eb = 8 if eb == 1 else eb
    if k_slices is None:
        span = max(swizzle_a if a_major == "K" and not rs else 0, swizzle_b if b_major == "K" else 0, 32)
        k_slices = span // kb
    K = k_slices * form.k
    A = _random_bits(form, rng, (64, K), wide)
    B = _wide_bits(form.b_type, rng, (form.n, K)) if wide and not form.is_integer else \
        _random_bits(form, rng, (form.n, K))
    cols = k_slices * kb * 8 // tile_eb  # tile columns in tile elements
    dt = _as_tile_dtype(form)
    tb = SmemTile(dt, form.n, cols, b_major, swizzle_b)
    b_img = tb.store(_pack_rows(B, eb).view(np.dtype(f"u{tile_eb // 8}")).reshape(form.n, cols), b_offset)
    b_img = np.concatenate([np.zeros(b_offset, np.uint8), b_img])
    desc_b = np.array([tb.descriptor(b_offset, s) for s in range(k_slices)], dtype=np.uint64)
    if rs:
        a_img = np.zeros(0, np.uint8)
        desc_a = np.zeros(k_slices, np.uint64)
        ar, ac = a_fragment_layout(form)
        regs = np.zeros((k_slices, 128, 4), dtype=np.uint32)
        per = 32 // eb
        for s in range(k_slices):
            el = A[:, s * form.k:(s + 1) * form.k][ar, ac].astype(np.uint32)  # (128, 4, per)
            shifts = (np.arange(per) * eb).astype(np.uint32)
            regs[s] = np.bitwise_or.reduce(el << shifts, axis=-1)
        a_regs = regs.ravel()
    else:
        ta = SmemTile(dt, 64, cols, a_major, swizzle_a)
        a_img = ta.store(_pack_rows(A, eb).view(np.dtype(f"u{tile_eb // 8}")).reshape(64, cols), a_offset)
        a_img = np.concatenate([np.zeros(a_offset, np.uint8), a_img])
        desc_a = np.array([ta.descriptor(a_offset, s) for s in range(k_slices)], dtype=np.uint64)
        a_regs = np.zeros(4, np.uint32)
    c = rng.integers(0, 1 << 16, 128 * form.d_regs).astype(np.uint32)
    if not form.is_integer:  # small exact floats as the accumulator input
        vals = rng.integers(-8, 9, 128 * form.d_regs * form.per_d_reg) * 0.25
        if wide:
            vals = rng.standard_normal(vals.shape) * 2.0 ** rng.integers(-2, 3, vals.shape)
        c = (vals.astype(np.float16).view(np.uint32) if form.d_type is T.f16 else
             vals.astype(np.float32).view(np.uint32))
    out = np.zeros(128 * form.d_regs, np.uint32)
    kern = wgmma_probe_kernel(form, k_slices=k_slices, a_bytes=len(a_img), b_bytes=len(b_img), rs=rs,
                              trans_a=a_major == "MN" and not rs, trans_b=b_major == "MN", scale_a=scale_a,
                              scale_b=scale_b, satfinite=satfinite, **kernel_kw)
    args = [a_img if len(a_img) else np.zeros(16, np.uint8), b_img, a_regs, desc_a, desc_b, c, out, int(scale_d)]
    return WgmmaCase(form, kern, A, B, args, scale_d, satfinite, scale_a * scale_b)
