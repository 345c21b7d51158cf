"""wgmma: mma_async for every form of `WGMMA_FORMS` (A from registers or shared memory) and its sparse
form mma_async.sp, fence, commit_group, wait_group; the accumulator hazards.

A warpgroup is 4 consecutive warps of a CTA whose first warp is a multiple of 4; a wgmma is
executed by all 128 of its threads at once.  Shared-memory operands are found the way the
hardware finds them: by decoding the 64-bit matrix descriptor (start address, leading and
stride byte offsets, swizzle mode, base offset; `ptxforge.isa.wgmma.descriptor_rows`) and
applying the swizzle to the resulting shared addresses, so a wrong descriptor reads the same
wrong bytes a GPU reads.  The base offset shifts the swizzle's row phase as
`isa.descriptors.swizzle_rows` says (absolute row minus the base offset, measured on the H200).

Asynchrony: the operands are read when the wgmma is issued, and their shared bytes stay held
until the wait_group that retires the group: a write to them before (an ordinary store or a TMA
load refilling the stage too early) is reported ("async"), since the hardware may read them
then.  The product lands in the
accumulator registers at the `wgmma.wait_group` that retires its group.  Until then the
accumulators belong to the async proxy: a later wgmma of the same thread accumulates onto the
pending value (as the hardware chains them), any other instruction that reads or writes one of
them is reported ("wgmma" finding).

Shared memory a wgmma reads must be visible to the async proxy: bytes last written by an
ordinary store (or cp.async) of a thread that has not executed `fence.proxy.async` since are
reported ("proxy" finding); bytes written by TMA / bulk copies are already async-proxy writes.

Arithmetic: integer forms (.s8/.u8, .b1 AND-popc) are exact (int64 sums wrapped to .s32, or
clamped with .satfinite).  Float forms multiply exactly in float64 (every product of two
f16/bf16/tf32/fp8 values is exact there), sum in float64 and round once per instruction to the
accumulator type.  `wgmma_error_bound` states how far that is from the exact result, and how far
a tensor core's result may be from it; tests/test_interp_wgmma_accuracy.py checks the first
against fractions and (on the device) the second.  fp8 values are decoded exactly (e4m3: bias
7, no infinities, S.1111.111 is NaN; e5m2: IEEE-style, bias 15).
"""

from __future__ import annotations

import numpy as np

from ..isa import types as T
from ..isa.wgmma import WARPGROUP, a_fragment_layout, accumulator_layout, descriptor_rows
from .access import Part, shadow_read
from .exec_tensor import expand_sparse, sparse_metadata
from .proxy import proxy_check
from .values import bf16_to_f32, bytes_to_elements, split_words

_PTXFORGE_INTERNAL = True


def _fp8_table(exp_bits: int, man_bits: int, bias: int, ieee: bool) -> np.ndarray:
    out = np.empty(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        mant = b & ((1 << man_bits) - 1)
        if ieee and e == (1 << exp_bits) - 1:
            out[b] = s * np.inf if mant == 0 else np.nan
        elif not ieee and e == (1 << exp_bits) - 1 and mant == (1 << man_bits) - 1:
            out[b] = np.nan
        elif e == 0:
            out[b] = s * mant * 2.0 ** (1 - bias - man_bits)
        else:
            out[b] = s * (1 + mant / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


FP8 = {"e4m3": _fp8_table(4, 3, 7, False), "e5m2": _fp8_table(5, 2, 15, True)}


def decode(raw: np.ndarray, t: T.ScalarType) -> np.ndarray:
    """Stored element bits (unsigned ints) of type `t` -> float64 values (exact; wmma's fragments use the 4-bit,
    32-bit and 64-bit types too)."""
    if t is T.s8:
        return raw.astype(np.uint8).view(np.int8).astype(np.float64)
    if t in (T.u8, T.b1, T.u4):
        return raw.astype(np.float64)
    if t is T.s4:
        v = raw.astype(np.int64)
        return (v - 16 * (v >= 8)).astype(np.float64)
    if t is T.f32:
        return raw.astype(np.uint32).view(np.float32).astype(np.float64)
    if t is T.s32:
        return raw.astype(np.uint32).view(np.int32).astype(np.float64)
    if t is T.f64:
        return raw.astype(np.uint64).view(np.float64)
    if t is T.f16:
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if t is T.bf16:
        return bf16_to_f32(raw.astype(np.uint16)).astype(np.float64)
    if t is T.tf32:  # the tensor core reads the top 19 bits of each float32
        return (raw.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if t.name in FP8:
        return FP8[t.name][raw.astype(np.uint8)]
    raise AssertionError(t)


#: Unit roundoff of the accumulator types (half an ulp, relative).
_UNIT_ROUNDOFF = {"f32": 2.0 ** -24, "f16": 2.0 ** -11}
#: Relative error per wgmma instruction the device tests allow between a tensor core and the
#: interpreter, by (input kind, accumulator): a tensor core aligns one instruction's products to the
#: largest and truncates.  Measured on the H200 (30 Hypothesis draws per run): bf16 x bf16 -> f32
#: reached 0.11 of 2^-20, e5m2 -> f16 0.33 of 2^-9, e4m3 -> f32 1.37 x 2^-12 (about 11 bits kept
#: for fp8 sums), so fp8 with f32 allows 2^-10.
_DEVICE_PER_INSTRUCTION = {("16", "f32"): 2.0 ** -20, ("tf32", "f32"): 2.0 ** -20, ("fp8", "f32"): 2.0 ** -10,
                           ("16", "f16"): 2.0 ** -9, ("fp8", "f16"): 2.0 ** -9}


def wgmma_error_bound(form, instructions: int, *, device: bool = False) -> tuple:
    """(relative, absolute) error bound of a chain of `instructions` float wgmmas of `form` that
    accumulate one output: |D - D_exact| <= relative * S + absolute, S = sum_k |a_ik b_kj| + |C_ij|
    over the whole chain, D_exact the exact real result.

    device=False: the interpreter (one float64 sum per instruction, rounded to the accumulator:
    instructions x unit roundoff, plus the float64 sums' K x 2^-53 and f16's subnormal half-ulp).
    device=True: the bound the device tests assert between a GPU's D and the interpreter's.
    """
    acc = form.d_type.name
    u = _UNIT_ROUNDOFF[acc]
    rel = instructions * (u + form.k * 2.0 ** -53)
    absolute = instructions * (2.0 ** -25 if acc == "f16" else 2.0 ** -150)
    if device:
        kind = "tf32" if form.a_type is T.tf32 else "fp8" if form.a_type.name in FP8 else "16"
        rel += instructions * _DEVICE_PER_INSTRUCTION[(kind, acc)]
        absolute *= 2
    return rel, absolute


class WgState:
    """Per batch: each thread's wgmma group counter and the accumulators still owned by wgmmas."""

    def __init__(self, N):
        self.committed = np.zeros(N, dtype=np.int64)
        self.values = {}  # register name -> uint32 (N,) pending value
        self.group = {}  # register name -> int64 (N,) group of the pending value, -1 when none
        self.issuer = {}  # register name -> pc of the wgmma that owns it
        self.held = []  # (issuing thread, group, flat shared bytes, pc) of wgmma operands not yet retired


def wg_state(S) -> WgState:
    """The batch's WgState (created on first use)."""
    st = getattr(S, "wg", None)
    if st is None:
        st = S.wg = WgState(S.N)
    return st


def whole_warpgroups(S, op, m, what):
    """Indices (batch-wide) of the warpgroups whose 128 threads all execute `op` now."""
    if S.Tp % WARPGROUP:
        S.report("collective", f"{what} needs whole warpgroups: the CTA has {S.T} threads, not a multiple of 128",
                 op, np.flatnonzero(m))
        return np.zeros(0, dtype=np.int64)
    mg = m.reshape(-1, WARPGROUP)
    eg = S.exists.reshape(-1, WARPGROUP)
    touched = mg.any(axis=1)
    partial = touched & ~(mg | ~eg).all(axis=1)
    if partial.any():
        g = int(np.flatnonzero(partial)[0])
        S.report("collective", f"{what} reached by part of a warpgroup (threads {g * 128 % S.Tp}..+127 of its CTA): "
                 "all 4 warps of the warpgroup must execute it together", op, np.flatnonzero(mg[g]) + g * 128)
    return np.flatnonzero(touched & ~partial)


def read_descriptor_operand(S, op, desc, rows, elem_bits, mn_major, thr0, kbytes=32):
    """(rows, K) element bits of a shared-memory operand described by `desc` (K: `kbytes` bytes of each row, 64
    for the B of a sparse wgmma), as the hardware reads them; None when an access is out of bounds (reported)."""
    addr = descriptor_rows(int(desc), rows, elem_bits, mn_major, kbytes)  # (rows, kbytes) shared byte addresses
    L = S.launch
    flat_local = addr.ravel().astype(np.int64)
    ok = (flat_local >= 0) & (flat_local < L.smem.size)
    ok &= L.smem.check(np.where(ok, flat_local, 0), 1)
    if not ok.all():
        a0 = int(flat_local[np.flatnonzero(~ok)[0]])
        S.report("oob", f"{op.ins.opcode}: the matrix descriptor {int(desc):#018x} addresses shared memory outside "
                 f"every variable: {L.smem.describe(a0, 1)}", op, np.array([thr0]),
                 details={"address": a0, "space": "shared"})
        return None
    flat = flat_local + int(S.smem_base[thr0])
    if S.track:
        shadow_read(S, op, Part("shared", np.arange(len(flat)), flat, np.full(len(flat), thr0)), 1)
        proxy_check(S, op, flat, thr0)
        hold_operand(S, op, flat, thr0)
    data = S.smem[flat].reshape(rows, kbytes)
    if mn_major:  # (rows, kbytes) addresses were for 2-byte elements (mn, k) laid out as [k][byte]
        return data.reshape(rows, kbytes // 2, 2).view(np.uint16)[..., 0].astype(np.uint32)
    return bytes_to_elements(data, elem_bits).astype(np.uint32)


def hold_operand(S, op, flat, thr0):
    """The shared bytes a wgmma reads belong to it until the wait_group that retires its group: a write
    to them before that is reported (access.shadow_write), as the hardware may still be reading."""
    st = wg_state(S)
    if getattr(S, "wg_src_pc", None) is None:
        S.wg_src_pc = np.full(len(S.smem), -1, dtype=np.int32)
    S.wg_src_pc[flat] = op.pc
    st.held.append((thr0, int(st.committed[thr0]), flat, op.pc))


def accumulator_input(S, st, read_d, d_names, thr) -> np.ndarray:
    """The accumulator words a wgmma adds to, (128 threads, registers): a register's pending value from an
    earlier wgmma of the thread (not yet waited for), else the register itself."""
    words_c = np.empty((WARPGROUP, len(d_names)), dtype=np.uint32)
    for i, name in enumerate(d_names):
        cur = np.broadcast_to(np.asarray(read_d[i](S)), (S.N,))[thr]
        grp = st.group.get(name)
        if grp is not None:
            pend = grp[thr] >= 0
            cur = np.where(pend, st.values[name][thr], cur)
        words_c[:, i] = cur
    return words_c


def accumulate(info, A, B, words_c, scale_d: bool, acc_rows, acc_cols) -> np.ndarray:
    """D = A . B^T (+ C from `words_c` with scale_d) of one warpgroup, as the D registers' words (128, regs):
    integers exact (s32, .satfinite clamped), floats summed exactly and rounded once to f32 or f16."""
    form = info.form
    M, N = A.shape[0], B.shape[0]
    if form.is_integer:
        prod = A.astype(np.int64) @ B.astype(np.int64).T
        if scale_d:
            C = np.zeros((M, N), dtype=np.int64)
            C[acc_rows[..., 0], acc_cols[..., 0]] = words_c.view(np.int32)
            prod = prod + C
        if info.satfinite:
            prod = np.clip(prod, -(1 << 31), (1 << 31) - 1)
        return prod.astype(np.uint32)[acc_rows[..., 0], acc_cols[..., 0]]
    prod = info.scale_a * info.scale_b * (A @ B.T) + 0.0  # a zero sum is +0 whatever the signs of its products
    if scale_d:
        C = np.zeros((M, N), dtype=np.float64)
        if form.d_type is T.f16:
            halves = words_c.view(np.uint16).reshape(WARPGROUP, -1, 2).view(np.float16)
            C[acc_rows, acc_cols] = halves.astype(np.float64)
        else:
            C[acc_rows[..., 0], acc_cols[..., 0]] = words_c.view(np.float32)
        prod = prod + C
    if form.d_type is T.f16:
        h = prod.astype(np.float16)[acc_rows, acc_cols]  # (128, d_regs, 2)
        return np.ascontiguousarray(h).view(np.uint32)[..., 0]
    return prod.astype(np.float32)[acc_rows[..., 0], acc_cols[..., 0]].view(np.uint32)


def make_wgmma(P, op):
    """Executor of wgmma.mma_async and wgmma.mma_async.sp: whole warpgroups, operands read at issue, D pending
    until wait_group.  The sparse form reads the stored half of A (64 x K/2, from registers or a descriptor, laid
    out as the dense form's A), the N x K B (64 bytes of each row) and each warp's metadata from the lanes the
    selector names (`isa.sparse`), spreads A over its K columns and multiplies as the dense form does."""
    ins = op.ins
    info = ins.info
    form = info.form
    sparse = ins.opcode == "wgmma.sp"
    if sparse:
        d_op, a_op, b_op, meta_op, sel_op, sd_op = ins.operands[:6]
        read_meta = P.reader(meta_op, T.b32, ins)
        selector = int(sel_op.value)
    else:
        d_op, a_op, b_op, sd_op = ins.operands[:4]
    d_regs = P.regs_of(d_op)
    read_d = [P.reader(r, T.b32, ins) for r in d_regs]
    d_names = [r.name for r in d_regs]
    writers = getattr(P, "wg_writers", None)
    if writers is None:
        writers = P.wg_writers = {}
    for r in d_regs:
        writers.setdefault(r.name, P.writer(r, T.b32, ins))
    if info.a_from_regs:
        read_a = [P.reader(r, T.b32, ins) for r in P.regs_of(a_op)]
    else:
        read_a_desc = P.reader(a_op, T.b64, ins)
    read_b_desc = P.reader(b_op, T.b64, ins)
    from ..isa.operands import Imm
    if isinstance(sd_op, Imm):
        sd_const = bool(sd_op.value)
        read_sd = None
    else:
        read_sd = P.pred_reader(sd_op, ins)
    M, N, K = 64, form.n, form.k
    KB = 2 * K if sparse else K  # B's K (the sparse A holds K of its 2K columns)
    eb = form.elem_bits
    acc_rows, acc_cols = accumulator_layout(form)
    a_rows, a_cols = a_fragment_layout(form) if info.a_from_regs else (None, None)

    def uniform64(S, reader, thr, what):
        v = np.broadcast_to(np.asarray(reader(S)).view(np.uint64), (S.N,))[thr]
        if (v != v[0]).any():
            S.report("collective", f"wgmma {what} differs between the threads of a warpgroup (it must be "
                     "warpgroup-uniform)", op, thr[v != v[0]][:4])
        return int(v[0])

    def wgmma(S, m):
        st = wg_state(S)
        for g in whole_warpgroups(S, op, m, "wgmma.mma_async"):
            thr = np.arange(g * WARPGROUP, (g + 1) * WARPGROUP)
            t0 = int(thr[0])
            if info.a_from_regs:
                words = np.stack([np.broadcast_to(r(S), (S.N,))[thr] for r in read_a], axis=1)  # (128, 4)
                el = split_words(words, eb, 32 // eb)  # (128, 4, per)
                A_bits = np.zeros((M, K), dtype=np.uint32)
                A_bits[a_rows, a_cols] = el
            else:
                A_bits = read_descriptor_operand(S, op, uniform64(S, read_a_desc, thr, "A descriptor"), M, eb,
                                                 bool(info.trans_a), t0)
            b_desc = uniform64(S, read_b_desc, thr, "B descriptor")
            B_bits = read_descriptor_operand(S, op, b_desc, N, eb, bool(info.trans_b), t0, KB * eb // 8)
            if A_bits is None or B_bits is None:
                continue
            A = decode(A_bits, form.a_type)  # (64, K)
            B = decode(B_bits, form.b_type)  # (N, KB): B is read by its N rows
            if sparse:
                meta = np.broadcast_to(np.asarray(read_meta(S)).astype(np.uint32), (S.N,))[thr].reshape(4, 32)
                nib = sparse_metadata(S, op, meta, KB, form.a_type, selector, False,
                                      lambda w, lanes: int(thr[0]) + 32 * w + lanes)
                A = expand_sparse(A.reshape(4, 16, K), nib, KB, form.a_type).reshape(M, KB)
            words_c = accumulator_input(S, st, read_d, d_names, thr)
            scale_d = sd_const if read_sd is None else bool(np.broadcast_to(read_sd(S), (S.N,))[t0])
            if read_sd is not None:
                sdv = np.broadcast_to(read_sd(S), (S.N,))[thr]
                if (sdv != sdv[0]).any():
                    S.report("collective", "wgmma scale-d differs between the threads of a warpgroup", op, thr[:4])
            out = accumulate(info, A, B, words_c, scale_d, acc_rows, acc_cols)
            for i, name in enumerate(d_names):
                if name not in st.values:
                    st.values[name] = np.zeros(S.N, dtype=np.uint32)
                    st.group[name] = np.full(S.N, -1, dtype=np.int64)
                st.values[name][thr] = out[:, i]
                st.group[name][thr] = st.committed[thr]
                st.issuer[name] = op.pc
    return wgmma


def make_wgmma_fence(P, op):
    """Executor of wgmma.fence (checked to run in whole warpgroups; no other effect here)."""
    def fence(S, m):
        whole_warpgroups(S, op, m, "wgmma.fence")
    return fence


def make_wgmma_commit(P, op):
    """Executor of wgmma.commit_group: the pending wgmmas of each thread form a group."""
    def commit(S, m):
        whole_warpgroups(S, op, m, "wgmma.commit_group")
        wg_state(S).committed[m] += 1
    return commit


def make_wgmma_wait(P, op):
    """Executor of wgmma.wait_group n: accumulators of all but the n newest groups land in the registers."""
    keep = int(op.ins.info)

    def wait(S, m):
        whole_warpgroups(S, op, m, "wgmma.wait_group")
        st = wg_state(S)
        limit = st.committed - keep  # groups numbered below this are complete
        writers = S.prog.wg_writers
        for name, grp in st.group.items():
            done = m & (grp >= 0) & (grp < limit)
            if done.any():
                writers[name](S, st.values[name], done)
                grp[done] = -1
        if st.held:
            left = []
            for rec in st.held:
                t, g, flat, _ = rec
                if m[t] and g < limit[t]:
                    S.wg_src_pc[flat] = -1
                else:
                    left.append(rec)
            st.held = left
            for _, _, flat, pc in left:  # bytes that a pending group also reads stay held
                S.wg_src_pc[flat] = pc
    return wait


def guard_accumulators(P):
    """Wrap every instruction other than wgmma.mma_async that touches a wgmma accumulator register:
    touching it while a wgmma still owns it (before the wait_group that retires it) is reported."""
    acc = set()
    for o in P.ops:
        if o.ins.opcode in ("wgmma", "wgmma.sp"):
            acc.update(r.name for r in P.regs_of(o.ins.operands[0]))
    if not acc:
        return
    for o in P.ops:
        if o.ins.opcode in ("wgmma", "wgmma.sp") or o.fn is None:
            continue
        names = sorted({r.name for r in o.ins.registers()} & acc)
        if names:
            o.fn = _guarded(o, o.fn, names)


def _guarded(o, fn, names):
    def run(S, m):
        st = getattr(S, "wg", None)
        if st is not None:
            for name in names:
                grp = st.group.get(name)
                if grp is not None and (grp[m] >= 0).any():
                    issuer = S.prog.instructions[st.issuer[name]]
                    S.report("wgmma", f"%{name} is an accumulator of a wgmma.mma_async that has not been waited "
                             "for: wgmma.commit_group + wgmma.wait_group must retire it before any other "
                             "instruction reads or writes it", o, np.flatnonzero(m & (grp >= 0)), other=issuer)
                    break
        fn(S, m)
    return run
