"""Probe kernels and value codecs shared by the interpreter tests and the GPU differential test.

Each probe is a one-CTA kernel that exercises one instruction family (mma.sync, ldmatrix,
shfl.sync, cp.async zero fill) and writes what it saw to global memory, so the same module can run
on the interpreter and on a GPU and the outputs can be compared with each other or a numpy model.
"""

import numpy as np

import ptxforge as pf
from ptxforge import b32, b64, u8, u32
from ptxforge.isa.fragments import pack_fragment
from ptxforge.isa import types as T


def mma_probe(form, satfinite):
    """One-warp kernel: each lane loads its A, B, C fragment words from a, b, c, issues one `mma.sync` of `form` and stores D to d."""
    k = pf.KernelBuilder("mma_probe", target=f"sm_{max(80, form.req.min_sm)}", reqntid=32)
    ptrs = [k.param_ptr(n, pf.b8) for n in ("a", "b", "c", "d")]
    lane = k.laneid()
    frag_t = b64 if form.a_type is T.f64 else b32
    acc_t = form.acc_reg_type
    fw, cw = frag_t.bits // 8, acc_t.bits // 8

    def load(ptr, n, t, width):
        base = k.add(ptr, k.mul(lane, n * width, mode="wide"))
        step = max(1, min(n, 16 // width))  # a vector access moves at most 16 bytes
        out = []
        for i in range(0, n, step):
            v = k.ld(base, type=t, vec=step, offset=i * width)
            out += list(v) if step > 1 else [v]
        return out
    a = load(ptrs[0], form.a_regs, frag_t if frag_t is b32 else T.f64, fw)
    b = load(ptrs[1], form.b_regs, frag_t if frag_t is b32 else T.f64, fw)
    c_t = form.c_reg_type
    c = load(ptrs[2], form.c_regs, c_t, c_t.bits // 8)
    d = k.mma(a, b, c, shape=form.shape, a_type=form.a_type.name, b_type=form.b_type.name,
              acc=form.c_type.name, bitop=form.bitop, satfinite=satfinite, d_type=form.d_type.name,
              layout=form.layout)
    out = k.add(ptrs[3], k.mul(lane, form.d_regs * cw, mode="wide"))
    step = min(form.d_regs, 16 // cw)
    for i in range(0, form.d_regs, step):
        k.st(out, list(d)[i:i + step], type=acc_t, offset=i * cw)
    return k.module()


def _fp8_value(byte, exp_bits, man_bits):
    """One fp8 byte as a float, from the format's definition (finite codes only)."""
    bias = (1 << (exp_bits - 1)) - 1
    e = (byte >> man_bits) & ((1 << exp_bits) - 1)
    m = byte & ((1 << man_bits) - 1)
    mag = np.ldexp(m / (1 << man_bits), 1 - bias) if e == 0 else np.ldexp(1 + m / (1 << man_bits), e - bias)
    return -mag if byte & 0x80 else mag


_FP8_FORMATS = {"e4m3": (4, 3), "e5m2": (5, 2)}


def decode_values(bits, t):
    """Fragment words `bits` of element type `t` (f16, bf16, tf32, f32, f64, e4m3, e5m2) as float64 values."""
    bits = np.asarray(bits)
    if t.name in _FP8_FORMATS:
        eb, mb = _FP8_FORMATS[t.name]
        table = np.array([_fp8_value(b, eb, mb) for b in range(256)])
        return table[bits.astype(np.int64) & 0xFF]
    if t is T.f16:
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if t is T.bf16:
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if t is T.tf32:
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if t is T.f32:
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    if t is T.f64:
        return bits.astype(np.uint64).view(np.float64)
    raise AssertionError(t)


def encode_values(values, t):
    """float values as the words of element type `t` (the inverse of decode_values, rounding to `t`)."""
    if t is T.f16:
        return np.asarray(values).astype(np.float16).view(np.uint16).astype(np.uint64)
    if t is T.bf16:
        return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint64)
    if t in (T.f32, T.tf32):
        return np.asarray(values).astype(np.float32).view(np.uint32).astype(np.uint64)
    return np.asarray(values).astype(np.float64).view(np.uint64)


def random_words(rng, form, frag, t):
    """Random fragment words for operand `frag` of `form`: any bits for integer types, moderate finite values for floats."""
    if t.is_int or t is T.b1:
        return rng.integers(0, 2 ** 32, size=(32, frag.nregs), dtype=np.uint64)
    if t.name in _FP8_FORMATS:  # any byte of moderate size (products must stay within f16)
        eb, mb = _FP8_FORMATS[t.name]
        finite = [b for b in range(256) if abs(_fp8_value(b, eb, mb)) <= 4]
        return pack_fragment(frag, rng.choice(finite, size=frag.shape))
    # floats: finite values of moderate size, encoded element by element
    vals = rng.standard_normal(frag.shape) * 4
    if t is T.tf32:
        vals = vals.astype(np.float32)
    return pack_fragment(frag, encode_values(vals, t).astype(np.int64) if t is not T.f64 else encode_values(vals, t))


def accumulator_words(rng, form, fc):
    """Random C fragment words for `form`; for s32 sometimes values near the limits (wraparound, .satfinite)."""
    if form.c_type is T.s32:
        pick = rng.integers(0, 3)
        if pick == 0:  # near the limits: exercises wraparound and .satfinite
            c = rng.choice([-2 ** 31, 2 ** 31 - 1, -2 ** 31 + 5, 2 ** 31 - 7], size=fc.shape)
        else:
            c = rng.integers(-2 ** 31, 2 ** 31, size=fc.shape)
        return pack_fragment(fc, c)
    vals = rng.standard_normal(fc.shape) * 8
    return pack_fragment(fc, encode_values(vals, form.c_type).astype(np.int64) if form.c_type is not T.f64
                         else encode_values(vals, form.c_type))


def ldmatrix_probe(form, nslots):
    """One-warp kernel: stage `nslots` 16-byte rows in shared memory, then `ldmatrix` of `form` with lane row addresses from slots; store each lane's registers to out."""
    k = pf.KernelBuilder("ldmatrix_probe", target="sm_80", reqntid=32)
    src, slots, out = k.param_ptr("src", pf.b8), k.param_ptr("slots", u32), k.param_ptr("out", pf.b8)
    tile = k.shared("tile", nslots * 16, align=16)
    lane = k.laneid()
    base = k.shared_base(tile)
    with k.for_range(lane, nslots, 32, uniform=False) as i:  # stage the rows: 16 bytes per slot
        v = k.ld(k.add(src, k.mul(i, 16, mode="wide")), type=b32, vec=4)
        k.st(k.add(base, k.shl(i, 4)), list(v), type=b32, space="shared")
    k.bar_sync(0)
    slot = k.ld(k.add(slots, k.mul(lane, 4, mode="wide")), type=u32)
    regs = k.ldmatrix(k.add(base, k.shl(slot, 4)), num=form.num, trans=form.trans)
    k.st(k.add(out, k.mul(lane, 4 * form.num, mode="wide")), list(regs) if form.num > 1 else regs[0], type=b32)
    return k.module()


def shfl_probe(mode, b, c, with_pred):
    k = pf.KernelBuilder("shfl_probe", target="sm_80", reqntid=64)
    src, out, outp = k.param_ptr("src", u32), k.param_ptr("out", u32), k.param_ptr("outp", u32)
    t = k.tid()
    off = k.mul(t, 4, mode="wide")
    v = k.ld(k.add(src, off), type=u32)
    p = k.reg(pf.pred) if with_pred else None
    d = k.shfl(mode, v, b, clamp=c, in_range=p)
    k.st(k.add(out, off), d, type=b32)
    if with_pred:
        k.st(k.add(outp, off), k.selp(1, 0, p, type=u32), type=u32)
    return k.module()


def zero_fill_probe(size, mode):
    """Thread t copies `size` bytes from src + size*t; mode 'reg'/'imm' src-size, 'ignore' ignore-src."""
    k = pf.KernelBuilder("zfill", target="sm_80", reqntid=64)
    src, dst, ns = k.param_ptr("src", u8), k.param_ptr("dst", u8), k.param_ptr("ns", u32)
    sbuf = k.shared("sbuf", 64 * size, align=16)
    t = k.tid()
    slot = k.add(k.shared_base(sbuf), k.mul(t, size))
    ff = k.mov(-1, type=b32)
    k.st(slot, [ff] * (size // 4) if size > 4 else ff, type=b32, space="shared")
    k.bar_sync(0)
    n = k.ld(k.add(ns, k.mul(t, 4, mode="wide")), type=u32)
    s = k.add(src, k.mul(t, size, mode="wide"))
    if mode == "reg":
        k.cp_async(slot, s, size, src_size=n)
    elif mode == "imm3":
        k.cp_async(slot, s, size, src_size=3 if size >= 4 else 0)
    else:
        k.cp_async(slot, s, size, ignore_src=k.setp("ne", k.and_(n, 1, type=b32), 0))
    k.cp_async_wait_all()
    v = k.ld(slot, type=b32, space="shared", vec=size // 4)
    k.st(k.add(dst, k.mul(t, size, mode="wide")), list(v) if size > 4 else v, type=b32)
    return k.module()
