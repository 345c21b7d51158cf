"""wmma.load, wmma.store and wmma.mma on the interpreter (every form of `isa.wmma.WMMA_FORMS`).

The PTX ISA leaves which element of a wmma fragment each register of each lane holds to the
implementation, and promises only what loading, multiplying, storing and applying one operation
to every element give.  The interpreter uses a layout of its own, `FragmentGeometry`: the matrix
(A: M x K, B: K x N, C and D: M x N) in row-major order, lane l holding elements
l*E .. l*E + E - 1 (E = elements / 32), packed into its registers from the lowest bits up; the
f16 A and B fragments, whose 8 registers have room for twice their 8 elements, hold them twice.
A kernel that reads single elements of a fragment gets this layout here and another on a GPU.

Memory: row-major (or column-major) rows (columns) `stride` elements apart, by default the
shape's leading dimension; each row's (column's) start must be aligned to the fragment's size in
bytes (its registers' bytes per lane), as the ISA asks, or to the leading dimension's bytes where
those are fewer (the default stride of an m32n8k16 .f16 B in rows, 16 bytes against a 32-byte
fragment, must be legal).  Each instance of the leading dimension
is read (written) by one lane of the warp, so the race, bounds and ordering checks see it.
All 32 lanes must execute the instruction with one address and one stride.

wmma.mma multiplies as mma.sync does on the interpreter (exec_tensor): integer forms exactly
(wrapped, or clamped with .satfinite), .b1 as popcounts of AND / XOR, floating-point forms in
float64 rounded once to D's type (a GPU agrees within rounding; the .f64 rounding modes are not
applied to the sums).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..isa import types as T
from ..isa.operands import Imm
from .access import gather, map_access, scatter
from .exec_memory import address_reader, observe_load, observe_store, spread
from .exec_wgmma import decode
from .values import UINT, bytes_to_elements, split_words

_PTXFORGE_INTERNAL = True


def _element_bits(t: T.ScalarType) -> int:
    return {"b1": 1, "s4": 4, "u4": 4}.get(t.name, t.bits)


@dataclass(frozen=True)
class FragmentGeometry:
    """One wmma fragment: the matrix it holds (rows x cols of element type `et`) and its registers per lane."""

    rows: int
    cols: int
    et: T.ScalarType
    nregs: int

    @property
    def ebits(self) -> int:
        """Bits per element (1 for .b1, 4 for .s4/.u4)."""
        return _element_bits(self.et)

    @property
    def reg_bits(self) -> int:
        """Bits per register: 64 for .f64 fragments, else 32."""
        return 64 if self.et is T.f64 else 32

    @property
    def word_dtype(self):
        """The numpy dtype of one register's bits."""
        return np.uint64 if self.reg_bits == 64 else np.uint32

    @property
    def per_reg(self) -> int:
        """Elements per register."""
        return self.reg_bits // self.ebits

    @property
    def per_lane(self) -> int:
        """Distinct elements per lane."""
        return self.rows * self.cols // 32

    @property
    def nbytes(self) -> int:
        """The fragment's size in bytes (per lane): the alignment of each row or column in memory."""
        return self.nregs * self.reg_bits // 8

    def default_stride(self, layout: str) -> int:
        """The leading dimension: columns for a row-major matrix, rows for a column-major one."""
        return self.cols if layout == "row" else self.rows

    def to_registers(self, matrix):
        """(nw, rows * cols) element bits, row-major -> (nw, 32, nregs) register words (uint64)."""
        nw = matrix.shape[0]
        lanes = matrix.reshape(nw, 32, self.per_lane).astype(np.uint64)
        slots = lanes[:, :, np.arange(self.nregs * self.per_reg) % self.per_lane]
        slots = slots.reshape(nw, 32, self.nregs, self.per_reg)
        shifts = (np.arange(self.per_reg) * self.ebits).astype(np.uint64)
        return np.bitwise_or.reduce(slots << shifts, axis=-1)

    def from_registers(self, words):
        """(nw, 32, nregs) register words -> (nw, rows * cols) element bits (uint64), row-major."""
        nw = words.shape[0]
        slots = split_words(words, self.ebits, self.per_reg)
        return slots.reshape(nw, 32, -1)[:, :, :self.per_lane].reshape(nw, self.rows * self.cols)


def geometry(info, which: str) -> FragmentGeometry:
    """The fragment `which` ('a', 'b', 'c' or 'd') of the wmma instruction described by `info` (a WmmaInfo)."""
    form = info.form
    m, n, k = (int(x) for x in form.shape[1:].replace("n", " ").replace("k", " ").split())
    if which == "a":
        return FragmentGeometry(m, k, form.ab_type, form.a_regs)
    if which == "b":
        return FragmentGeometry(k, n, form.ab_type, form.b_regs)
    return FragmentGeometry(m, n, info.acc, form.acc[info.acc])


def _bits_to_bytes(v, ebits):
    """The inverse of `values.bytes_to_elements`."""
    if ebits >= 8:
        return np.ascontiguousarray(v.astype(UINT[ebits])).view(np.uint8)
    if ebits == 4:
        pairs = v.astype(np.uint8).reshape(v.shape[:-1] + (-1, 2))
        return pairs[..., 0] | (pairs[..., 1] << 4)
    return np.packbits(v.astype(np.uint8), axis=-1, bitorder="little")


class _Access:
    """The memory side of a wmma.load / wmma.store: address, stride, and which lane moves which row or column."""

    def __init__(self, P, op, frag: FragmentGeometry, addr, stride):
        ins = op.ins
        self.op, self.frag = op, frag
        self.layout = ins.info.layout[0]
        self.space = ins.info.space
        self.get_addr = address_reader(P, addr, ins, self.space)
        default = frag.default_stride(self.layout)
        if stride is None:
            self.get_stride = lambda S: np.full(S.N, default, dtype=np.int64)
        elif isinstance(stride, Imm):
            self.get_stride = lambda S, v=int(stride.value): np.full(S.N, v, dtype=np.int64)
        else:
            read = P.reader(stride, T.u32, ins)
            self.get_stride = lambda S: np.broadcast_to(np.asarray(read(S)).astype(np.int64), (S.N,))
        self.count = frag.rows if self.layout == "row" else frag.cols  # rows (columns) in memory
        self.length = frag.cols if self.layout == "row" else frag.rows  # elements in each
        self.nbytes = self.length * frag.ebits // 8
        self.align = min(frag.nbytes, self.nbytes)  # each row's (column's) start

    def lanes(self, S, m, what):
        """(warps, per-lane thread indices, addresses) of the rows/columns the warps of mask `m` move, or None."""
        op = self.op
        if not S.check_full_warps(op, m, what):
            return None
        warps = S.warps_touched(m)
        first = warps * 32 + np.argmax(m.reshape(-1, 32)[warps], axis=1)  # an executing lane of each warp
        addr, stride = np.asarray(self.get_addr(S)), self.get_stride(S)
        for name, v in (("address", addr), ("stride", stride)):
            same = (v.reshape(-1, 32)[warps] == v[first][:, None]) | ~m.reshape(-1, 32)[warps]
            if not same.all():
                w = int(np.flatnonzero(~same.all(axis=1))[0])
                S.report("collective", f"{what}: the lanes of {S.warp_of(int(warps[w]) * 32)} give different "
                                       f"{name}es; all 32 lanes must give the same", op, np.flatnonzero(m.reshape(
                                           -1, 32)[warps[w]]) + int(warps[w]) * 32)
                return None
        bad = stride[first] < self.frag.default_stride(self.layout)
        if bad.any():
            S.report("oob", f"{what}: stride {int(stride[first][bad][0])} is less than the leading dimension "
                            f"{self.frag.default_stride(self.layout)} (undefined in PTX)", op, first[bad])
            return None
        step = (stride[first] * self.frag.ebits // 8).astype(np.uint64)
        if (step % np.uint64(self.align)).any():
            S.report("misaligned", f"{what}: a stride of {int(stride[first][0])} elements puts rows (columns) "
                                   f"{int(step[0])} bytes apart, not a multiple of {self.align} bytes (the "
                                   "fragment's size)", op, first)
            return None
        i = np.arange(self.count, dtype=np.uint64)
        thr = (warps[:, None] * 32 + np.arange(self.count)).ravel()
        addrs = (addr[first].astype(np.uint64)[:, None] + i[None, :] * step[:, None]).ravel()
        return warps, thr, addrs

    def to_matrix(self, data, nw):
        """(nw * count, nbytes) bytes -> (nw, rows * cols) element bits, row-major."""
        v = bytes_to_elements(data, self.frag.ebits).reshape(nw, self.count, self.length)
        return (v if self.layout == "row" else v.transpose(0, 2, 1)).reshape(nw, -1)

    def from_matrix(self, matrix):
        """(nw, rows * cols) element bits -> (nw * count, nbytes) bytes in memory order."""
        v = matrix.reshape(-1, self.frag.rows, self.frag.cols)
        v = v if self.layout == "row" else v.transpose(0, 2, 1)
        return _bits_to_bytes(np.ascontiguousarray(v).reshape(-1, self.length), self.frag.ebits)


def _spread_words(S, warps, words, puts, m, word_dt):
    """Each register's word of every executing lane of `warps` ((nw, 32, nregs) `words`) into its register."""
    thr = (warps[:, None] * 32 + np.arange(32)).ravel()
    keep = m[thr]
    for i, put in enumerate(puts):
        put(S, *spread(S, thr[keep], words[:, :, i].ravel()[keep].astype(word_dt), word_dt))


def _gather_words(S, warps, readers, word_dt):
    thr = (warps[:, None] * 32 + np.arange(32)).ravel()
    cols = [np.broadcast_to(np.asarray(r(S)), (S.N,))[thr].astype(word_dt) for r in readers]
    return np.stack(cols, axis=1).reshape(len(warps), 32, len(readers)).astype(np.uint64)


def _reg_type(frag):
    return T.b64 if frag.reg_bits == 64 else T.b32


def make_wmma_load(P, op):
    """The executor of `wmma.load.{a,b,c}`: the warp reads the matrix (one row or column per lane) and each lane
    receives its elements of the fragment. Returns ``fn(S, m)``."""
    ins = op.ins
    which = ins.info.op[-1]
    frag = geometry(ins.info, which)
    acc = _Access(P, op, frag, ins.operands[1], ins.operands[2] if len(ins.operands) > 2 else None)
    puts = [P.writer(r, _reg_type(frag), ins) for r in P.regs_of(ins.operands[0])]
    word_dt = frag.word_dtype
    what = f"wmma.load.{which}"

    def run(S, m):
        lanes = acc.lanes(S, m, what)
        if lanes is None:
            return
        warps, thr, addrs = lanes
        data = np.zeros((len(thr), acc.nbytes), dtype=np.uint8)
        for part in map_access(S, op, acc.space, addrs, thr, acc.nbytes, align=acc.align, what=what):
            data[part.sel] = gather(S, part, 1, acc.nbytes)
            observe_load(S, op, part, acc.nbytes)
        _spread_words(S, warps, frag.to_registers(acc.to_matrix(data, len(warps))), puts, m, word_dt)
    return run


def make_wmma_store(P, op):
    """The executor of `wmma.store.d`: the lanes' fragment elements make the matrix, which the warp writes (one row
    or column per lane). Returns ``fn(S, m)``."""
    ins = op.ins
    frag = geometry(ins.info, "d")
    acc = _Access(P, op, frag, ins.operands[0], ins.operands[2] if len(ins.operands) > 2 else None)
    readers = [P.reader(r, _reg_type(frag), ins) for r in P.regs_of(ins.operands[1])]
    word_dt = frag.word_dtype

    def run(S, m):
        lanes = acc.lanes(S, m, "wmma.store.d")
        if lanes is None:
            return
        warps, thr, addrs = lanes
        data = acc.from_matrix(frag.from_registers(_gather_words(S, warps, readers, word_dt)))
        for part in map_access(S, op, acc.space, addrs, thr, acc.nbytes, align=acc.align, write=True,
                               what="wmma.store.d"):
            observe_store(S, op, part, acc.nbytes)
            scatter(S, part, 1, data[part.sel])
    return run


def _result_bits(D, d_type, integer, sat):
    if integer:
        v = np.rint(D).astype(np.int64)
        if sat:
            v = np.clip(v, -(1 << 31), (1 << 31) - 1)
        return (v & 0xFFFFFFFF).astype(np.uint64)
    if d_type is T.f32:
        return D.astype(np.float32).view(np.uint32).astype(np.uint64)
    if d_type is T.f16:
        return D.astype(np.float16).view(np.uint16).astype(np.uint64)
    return D.view(np.uint64)


def make_wmma_mma(P, op):
    """The executor of `wmma.mma`: D = A x B + C over each warp's fragments (see the module's notes on precision).
    Returns ``fn(S, m)``."""
    ins = op.ins
    info = ins.info
    fa, fb, fc = geometry(info, "a"), geometry(info, "b"), geometry(info, "c")
    d_type = info.d
    fd = FragmentGeometry(fc.rows, fc.cols, d_type, info.form.acc[d_type])
    d, a, b, c = ins.operands
    ra, rb, rc = ([P.reader(r, _reg_type(f), ins) for r in P.regs_of(x)] for f, x in ((fa, a), (fb, b), (fc, c)))
    puts = [P.writer(r, _reg_type(fd), ins) for r in P.regs_of(d)]
    integer = fa.et.is_int or fa.et is T.b1
    xor = info.bitop == "xor.popc"
    sat = info.satfinite
    M, N, K = fc.rows, fc.cols, fa.cols

    def run(S, m):
        if not S.check_full_warps(op, m, "wmma.mma"):
            return
        warps = S.warps_touched(m)
        nw = len(warps)
        A, B, C = (decode(f.from_registers(_gather_words(S, warps, r, f.word_dtype)),
                           f.et) for f, r in ((fa, ra), (fb, rb), (fc, rc)))
        A, B, C = A.reshape(nw, M, K), B.reshape(nw, K, N), C.reshape(nw, M, N)
        if xor:
            prod = A.sum(axis=2)[:, :, None] + B.sum(axis=1)[:, None, :] - 2 * (A @ B)
        else:
            prod = A @ B
        bits = _result_bits((prod + C).reshape(nw, -1), d_type, integer, sat)
        _spread_words(S, warps, fd.to_registers(bits), puts, m, fd.word_dtype)
    return run
