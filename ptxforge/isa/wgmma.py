"""wgmma.mma_async (sm_90a): the legal-form table, the instruction, and the register layouts.

`WGMMA_FORMS` lists every form ptxas 13.0 accepts: N x A/B types x accumulator type (and the
.b1 bit operation), with its K, register counts and least PTX ISA.  Validation, rendering,
the Hypothesis strategies and the CPU interpreter all read it.

Facts (checked against ptxas 13.0 in tests/test_isa_wgmma.py):

* One warpgroup (4 consecutive warps, the first a multiple of 4) computes D (64 x N) = A (64 x K)
  * B (K x N) (+ D).  K is 32 bytes of A's row: k16 for .f16/.bf16, k8 for .tf32, k32 for
  .s8/.u8/.e4m3/.e5m2, k256 for .b1.
* N: multiples of 8 from 8 to 256 for float forms; 8, 16, 24 and multiples of 16 from 32 to 256
  for integer and .b1 forms (n40 is refused there).
* D registers per thread: N/2 for .f32/.s32 accumulators, N/4 for .f16 (two halves per .b32).
* A from registers ("RS"): 4 .b32 registers per thread.  A from shared memory ("SS") and B
  always: a 64-bit matrix descriptor.
* Operands after scale-d: .f16/.bf16 take imm-scale-a, imm-scale-b (each 1 or -1), then
  imm-trans-a (SS only) and imm-trans-b (0 or 1); .tf32 and fp8 take the two scales only;
  integer and .b1 forms take none.  .satfinite only for .s8/.u8.  .b1 only with .and.popc.
* scale-d is a predicate or the immediate 0 / 1 (0: D = A*B, 1: D = A*B + D).
* Mixed .s8/.u8 needs PTX 8.4; everything else PTX 8.0.

Register layouts (the PTX ISA "Register Fragments and Shared Memory Matrix Layouts" for wgmma;
the accumulator layout was checked on an H200 for s32, see ../shared/ptx-notes.md §5.3): warp
w of the warpgroup owns rows 16w..16w+15 of D and of A, and within its 16 rows a warp holds
the operands exactly like mma.sync m16n8: with g = lane / 4 and t = lane % 4, accumulator
element e (register e for 32-bit accumulators, half e % 2 of register e // 2 for .f16) is at
row 16w + g + 8 * ((e % 4) // 2), column 8 * (e // 4) + 2t + e % 2.  An A register r holding
`per_reg` packed elements j is at row 16w + g + 8 * (r % 2), column per_reg * t + j +
4 * per_reg * (r // 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import ValidationError
from . import types as T
from .instruction import check_value, check_vec, int_arg, make
from .operands import Imm, Reg, Vec
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

#: N of the float forms (.f16, .bf16, .tf32, .e4m3, .e5m2).
WGMMA_N_FLOAT = tuple(range(8, 257, 8))
#: N of the integer (.s8/.u8) and .b1 forms.
WGMMA_N_INT = (8, 16, 24) + tuple(range(32, 257, 16))
#: Threads of the warpgroup that issues a wgmma.
WARPGROUP = 128

REQ_WGMMA = Requirement(90, V("8.0"), arch_specific=True)
REQ_WGMMA_MIXED_INT = Requirement(90, V("8.4"), arch_specific=True)

_FP8 = (T.e4m3, T.e5m2)
_INT8 = (T.s8, T.u8)


@dataclass(frozen=True)
class WgmmaForm:
    """One legal `wgmma.mma_async` form: shape m64nNkK, A/B types, accumulator type."""

    n: int
    a_type: T.ScalarType
    b_type: T.ScalarType
    d_type: T.ScalarType  # the accumulator (C and D) type
    req: Requirement
    bitop: str | None = None  # "and" for the .b1 form

    @property
    def k(self) -> int:
        """K of one instruction: always 32 bytes of a row of A."""
        return 256 // self.elem_bits

    @property
    def m(self) -> int:
        """M of every wgmma: 64 rows."""
        return 64

    @property
    def elem_bits(self) -> int:
        """Bits of one A/B element as stored (tf32 is stored as 32-bit floats)."""
        return 32 if self.a_type is T.tf32 else self.a_type.bits

    @property
    def shape(self) -> str:
        """The shape modifier, e.g. 'm64n128k32'."""
        return f"m64n{self.n}k{self.k}"

    @property
    def d_regs(self) -> int:
        """Accumulator registers per thread: N/2 (32-bit) or N/4 (.f16 pairs)."""
        return self.n // 4 if self.d_type is T.f16 else self.n // 2

    @property
    def a_regs(self) -> int:
        """A registers per thread when A comes from registers."""
        return 4

    @property
    def d_reg_type(self) -> T.ScalarType:
        """Type the accumulator registers are checked against (.f16 pairs live in .b32)."""
        return T.b32 if self.d_type is T.f16 else self.d_type

    @property
    def per_d_reg(self) -> int:
        """Accumulator elements per register: 2 for .f16, else 1."""
        return 2 if self.d_type is T.f16 else 1

    @property
    def is_integer(self) -> bool:
        """An .s8/.u8 or .b1 form (exact integer arithmetic, no scale immediates)."""
        return self.a_type in _INT8 or self.a_type is T.b1

    @property
    def has_scale_ab(self) -> bool:
        """Takes imm-scale-a / imm-scale-b (the float forms)."""
        return not self.is_integer

    @property
    def transposable(self) -> bool:
        """Takes imm-trans-a / imm-trans-b: only .f16/.bf16 may be MN-major in shared memory."""
        return self.a_type in (T.f16, T.bf16)

    @property
    def satfinite_ok(self) -> bool:
        """Takes .satfinite (the .s8/.u8 forms)."""
        return self.a_type in _INT8

    @property
    def sparse_ok(self) -> bool:
        """Has a sparse form (`wgmma_sp`): every type but .b1."""
        return self.a_type is not T.b1

    @property
    def sparse_selectors(self) -> tuple:
        """The sparsity selectors (sp-sel) of the sparse form: 0 or 1 for 16-bit and tf32 A, 0 for 8-bit A."""
        return (0,) if self.a_type.bits == 8 else (0, 1)

    def mnemonic(self, satfinite: bool = False, sparse: bool = False) -> str:
        """The full opcode: wgmma.mma_async{.sp}.sync.aligned.<shape>{.satfinite}.<d>.<a>.<b>{.and.popc}; the sparse
        form's K is twice the dense one (A holds half its values, the metadata says where)."""
        shape = f"m64n{self.n}k{2 * self.k}" if sparse else self.shape
        parts = ["wgmma", "mma_async"] + (["sp"] if sparse else []) + ["sync", "aligned", shape]
        if satfinite:
            parts.append("satfinite")
        parts += [self.d_type.name, self.a_type.name, self.b_type.name]
        if self.bitop:
            parts += [self.bitop, "popc"]
        return ".".join(parts)

    def __str__(self) -> str:
        return self.mnemonic()


def _forms():
    out = []
    float_combos = [(T.f16, T.f16, T.f16), (T.f16, T.f16, T.f32), (T.bf16, T.bf16, T.f32),
                    (T.tf32, T.tf32, T.f32)]
    float_combos += [(a, b, d) for a in _FP8 for b in _FP8 for d in (T.f16, T.f32)]
    for a, b, d in float_combos:
        for n in WGMMA_N_FLOAT:
            out.append(WgmmaForm(n, a, b, d, REQ_WGMMA))
    for a in _INT8:
        for b in _INT8:
            for n in WGMMA_N_INT:
                out.append(WgmmaForm(n, a, b, T.s32, REQ_WGMMA if a is b else REQ_WGMMA_MIXED_INT))
    for n in WGMMA_N_INT:
        out.append(WgmmaForm(n, T.b1, T.b1, T.s32, REQ_WGMMA, bitop="and"))
    return tuple(out)


#: Every legal wgmma.mma_async form.
WGMMA_FORMS = _forms()
_BY_KEY = {(f.n, f.a_type, f.b_type, f.d_type): f for f in WGMMA_FORMS}


def _default_acc(a: T.ScalarType) -> T.ScalarType:
    return T.s32 if a in _INT8 or a is T.b1 else T.f32


def wgmma_form(n, a_type, b_type=None, acc=None, bitop=None) -> WgmmaForm:
    """The form for N, A/B types and accumulator type; a ValidationError says what is legal."""
    a = T.lookup(a_type)
    b = T.lookup(b_type) if b_type is not None else a
    d = T.lookup(acc) if acc is not None else _default_acc(a)
    if a in (T.s4, T.u4) or b in (T.s4, T.u4):
        raise ValidationError("wgmma has no 4-bit integer form (ptxas: 'Unexpected instruction types'); "
                              "unpack to .s8/.u8 first")
    if a is T.b1 and bitop not in (None, "and"):
        raise ValidationError(f"wgmma .b1 takes only .and.popc (ptxas refuses .{bitop}.popc)")
    if a is not T.b1 and bitop is not None:
        raise ValidationError(f"a bit operation (.{bitop}.popc) is only for .b1 wgmma, not .{a.name}")
    f = _BY_KEY.get((n, a, b, d))
    if f is not None:
        return f
    combos = sorted({f"{x.a_type.name}.{x.b_type.name}->{x.d_type.name}" for x in WGMMA_FORMS})
    same = [x for x in WGMMA_FORMS if (x.a_type, x.b_type, x.d_type) == (a, b, d)]
    if same:
        ns = WGMMA_N_INT if same[0].is_integer else WGMMA_N_FLOAT
        hint = (f"N must be one of {', '.join(map(str, ns))}" if same[0].is_integer
                else "N must be a multiple of 8 in 8..256")
        raise ValidationError(f"wgmma .{d.name}.{a.name}.{b.name} with N={n} is not a legal form: {hint}")
    raise ValidationError(f"wgmma with A .{a.name}, B .{b.name}, accumulator .{d.name} is not a legal form; "
                          f"legal type combinations: {', '.join(combos)}")


@dataclass(frozen=True)
class WgmmaInfo:
    """What one emitted wgmma.mma_async does (the interpreter reads it)."""

    form: WgmmaForm
    a_from_regs: bool  # RS (True) or SS (False)
    scale_a: int = 1
    scale_b: int = 1
    trans_a: int = 0
    trans_b: int = 0
    satfinite: bool = False
    scale_d: object = None  # the scale-d operand: a .pred register or Imm(0/1)


def _scale(v, what):
    v = v.value if isinstance(v, Imm) else v
    if not T.is_integer(v) or v not in (1, -1):
        raise ValidationError(f"wgmma {what} is an immediate 1 or -1 (negate), got {v!r}")
    return int(v)


def _trans(v, what, form):
    if isinstance(v, Imm):
        v = v.value
    v = int(v) if isinstance(v, (bool, np.bool_)) or T.is_integer(v) else v  # a flag: True/False are 1/0 here
    if v not in (0, 1) or type(v) is not int:
        raise ValidationError(f"wgmma {what} is 0 or 1, got {v!r}")
    if v and not form.transposable:
        raise ValidationError(f"wgmma {what}=1 needs .f16/.bf16 operands; .{form.a_type.name} must be K-major "
                              "in shared memory (no transpose)")
    return v


def wgmma(form: WgmmaForm, d, a, b_desc, scale_d, *, scale_a=1, scale_b=1, trans_a=0, trans_b=0,
          satfinite=False):
    """`wgmma.mma_async.sync.aligned.<shape>{.satfinite}.<d>.<a>.<b>{.and.popc} d, a|a-desc, b-desc, scale-d
    {, imm-scale-a, imm-scale-b{, imm-trans-a}, imm-trans-b}`.

    d: Vec of `form.d_regs` accumulator registers.  a: Vec of 4 .b32 registers (A from registers)
    or a .b64 descriptor register.  b_desc: .b64 descriptor register.  scale_d: .pred register or
    0/1.  scale_a/scale_b: 1 or -1 (float forms).  trans_a/trans_b: 0/1 (.f16/.bf16 only;
    trans_a only with A in shared memory).  satfinite: .s8/.u8 only.
    """
    return _wgmma(form, d, a, b_desc, (), scale_d, scale_a, scale_b, trans_a, trans_b, satfinite)


#: PTX ISA of the sparse forms (sm_90a): 8.2, mixed .s8/.u8 8.4 (ptxas 13.0)
REQ_WGMMA_SP = Requirement(90, V("8.2"), arch_specific=True)
REQ_WGMMA_SP_MIXED_INT = Requirement(90, V("8.4"), arch_specific=True)


def wgmma_sp(form: WgmmaForm, d, a, b_desc, meta, selector, scale_d, *, scale_a=1, scale_b=1, trans_a=0,
             trans_b=0, satfinite=False):
    """`wgmma.mma_async.sp.sync.aligned.m64nN k2K ... d, a|a-desc, b-desc, sp-meta, sp-sel, scale-d{, immediates}`:
    the sparse form of dense `form` (2:4 sparse A holding half of its 2K values per row, K doubled; not .b1).
    meta: the .b32 register of sparsity metadata; selector: the immediate sp-sel (`form.sparse_selectors`: which
    threads of each group supply the metadata); the rest as for `wgmma`.
    """
    if not form.sparse_ok:
        raise ValidationError("wgmma .b1 has no sparse form (.sp takes f16, bf16, tf32, fp8 and 8-bit integer A)")
    if isinstance(meta, (int, Imm)):
        raise ValidationError("wgmma.sp sparsity metadata is a .b32 register (ptxas refuses an immediate)")
    check_value(meta, T.b32, "wgmma.sp sparsity metadata", imm_ok=False)
    sel = selector.value if isinstance(selector, Imm) else selector
    if not T.is_integer(sel) or sel not in form.sparse_selectors:
        got = "a register (ptxas takes only an immediate)" if isinstance(sel, Reg) else repr(selector)
        raise ValidationError(f"wgmma.sp with .{form.a_type.name} A takes the immediate sparsity selector "
                              f"{' or '.join(map(str, form.sparse_selectors))}, got {got}")
    return _wgmma(form, d, a, b_desc, (meta, Imm(int(sel))), scale_d, scale_a, scale_b, trans_a, trans_b, satfinite)


def _wgmma(form, d, a, b_desc, sparse: tuple, scale_d, scale_a, scale_b, trans_a, trans_b, satfinite):
    """The checked dense (sparse=()) or sparse (sparse=(meta, selector)) wgmma.mma_async."""
    name = form.mnemonic(satfinite, bool(sparse))
    if satfinite and not form.satfinite_ok:
        raise ValidationError(f"{form.mnemonic()} does not take .satfinite (only .s8/.u8 forms do)")
    d = check_vec(d, form.d_regs, form.d_reg_type,
                  f"wgmma {form.shape}.{form.d_type.name} D ({form.d_regs} registers: N/"
                  f"{4 if form.d_type is T.f16 else 2})")
    rs = isinstance(a, (Vec, list, tuple))
    if rs:
        a = check_vec(a, form.a_regs, T.b32, "wgmma A fragment (A from registers)")
    else:
        check_value(a, T.b64, "wgmma A descriptor", imm_ok=False)
    check_value(b_desc, T.b64, "wgmma B descriptor", imm_ok=False)
    if isinstance(scale_d, (bool, np.bool_)) or T.is_integer(scale_d):  # a flag: True/False are 1/0 here
        if int(scale_d) not in (0, 1):
            raise ValidationError(f"wgmma scale-d is a .pred register or the immediate 0 or 1, got {scale_d!r}")
        scale_d = Imm(int(scale_d))
    elif isinstance(scale_d, Imm):
        if scale_d.value not in (0, 1):
            raise ValidationError(f"wgmma scale-d immediate must be 0 or 1, got {scale_d.value!r}")
    elif not (isinstance(scale_d, Reg) and scale_d.type.is_pred):
        raise ValidationError("wgmma scale-d must be a .pred register or 0/1 (false/0: D = A*B, true/1: D += A*B)")
    ops = [d, a, b_desc, *sparse, scale_d]
    if form.has_scale_ab:
        sa, sb = _scale(scale_a, "imm-scale-a"), _scale(scale_b, "imm-scale-b")
        ops += [Imm(sa), Imm(sb)]
    else:
        if (scale_a, scale_b) != (1, 1):
            raise ValidationError(f"integer/.b1 wgmma takes no imm-scale-a/b (got {scale_a}, {scale_b})")
        sa = sb = 1
    ta = _trans(trans_a, "imm-trans-a", form)
    tb = _trans(trans_b, "imm-trans-b", form)
    if ta and rs:
        raise ValidationError("wgmma imm-trans-a is only for A in shared memory; A from registers has no "
                              "transpose operand")
    if form.transposable:
        ops += ([] if rs else [Imm(ta)]) + [Imm(tb)]
    info = WgmmaInfo(form, rs, sa, sb, ta, tb, bool(satfinite), scale_d)
    req = form.req
    if sparse:
        req = REQ_WGMMA_SP_MIXED_INT if form.a_type is not form.b_type and form.is_integer else REQ_WGMMA_SP
    return make("wgmma.sp" if sparse else "wgmma", (name,), ops, n_dst=1, req=req, info=info,
                mods=("satfinite",) if satfinite else (), type=form.d_type)


def wgmma_fence():
    """`wgmma.fence.sync.aligned`: order register accesses before the wgmma that follows."""
    return make("wgmma.fence", ("wgmma", "fence", "sync", "aligned"), req=REQ_WGMMA)


def wgmma_commit_group():
    """`wgmma.commit_group.sync.aligned`: close a group of this warpgroup's wgmmas."""
    return make("wgmma.commit_group", ("wgmma", "commit_group", "sync", "aligned"), req=REQ_WGMMA)


def wgmma_wait_group(n: int):
    """`wgmma.wait_group.sync.aligned n`: wait until at most n groups are pending."""
    n = int_arg(n, "wgmma.wait_group")
    if n < 0:
        raise ValidationError(f"wgmma.wait_group takes a non-negative immediate, got {n!r}")
    return make("wgmma.wait_group", ("wgmma", "wait_group", "sync", "aligned"), (Imm(n),), req=REQ_WGMMA, info=n)


# ---------------------------------------------------------------- register layouts

@lru_cache(maxsize=None)
def accumulator_layout(form: WgmmaForm):
    """(rows, cols): int arrays shaped (128 threads, d_regs, per_reg) giving the D element each
    accumulator register (half, for .f16) of each thread of the warpgroup holds."""
    tid = np.arange(WARPGROUP)[:, None, None]
    w, lane = tid // 32, tid % 32
    g, t = lane // 4, lane % 4
    e = (np.arange(form.d_regs)[None, :, None] * form.per_d_reg + np.arange(form.per_d_reg)[None, None, :])
    rows = 16 * w + g + 8 * ((e % 4) // 2)
    cols = 8 * (e // 4) + 2 * t + e % 2
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows.copy(), cols.copy()


@lru_cache(maxsize=None)
def a_fragment_layout(form: WgmmaForm):
    """(rows, cols): int arrays shaped (128, 4, per_reg) giving the A element (row of the 64 x K
    A, column k) each packed element of each A register holds when A comes from registers."""
    per = 32 // form.elem_bits
    tid = np.arange(WARPGROUP)[:, None, None]
    w, lane = tid // 32, tid % 32
    g, t = lane // 4, lane % 4
    r = np.arange(form.a_regs)[None, :, None]
    j = np.arange(per)[None, None, :]
    rows = 16 * w + g + 8 * (r % 2)
    cols = per * t + j + 4 * per * (r // 2)
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows.copy(), cols.copy()


def accumulator_offset(form: WgmmaForm, e: int):
    """(row, col) of accumulator element e relative to the thread's origin (16w + g, 2t)."""
    return 8 * ((e % 4) // 2), 8 * (e // 4) + e % 2


def a_fragment_offset(form: WgmmaForm, r: int, j: int = 0):
    """(row, col) of packed element j of A register r relative to the thread's origin
    (16w + g, per_reg * t)."""
    per = 32 // form.elem_bits
    return 8 * (r % 2), j + 4 * per * (r // 2)


class WgmmaOps:
    """Builder methods for wgmma (mixed into KernelBuilder)."""

    def wgmma(self, a, b_desc, d, *, n, a_type, b_type=None, acc=None, scale_d, satfinite=False,
              scale_a=1, scale_b=1, trans_a=False, trans_b=False, bitop=None):
        """`wgmma.mma_async` D (+)= A * B for a warpgroup; returns d.

        a: Vec of 4 .b32 registers (A from registers) or a .b64 shared-memory descriptor; b_desc:
        .b64 descriptor.  scale_d: .pred register or 0/1 (0: D = A*B).  scale_a/scale_b: -1 negates
        A / B (float forms).  trans_a/trans_b: A / B is MN-major in shared memory (.f16/.bf16).
        """
        form = wgmma_form(n, a_type, b_type, acc, bitop)
        sd = scale_d if isinstance(scale_d, (bool, int)) else self._val(scale_d)
        self.emit(wgmma(form, self._val(d), self._val(a), self._val(b_desc), sd, scale_a=scale_a,
                        scale_b=scale_b, trans_a=trans_a, trans_b=trans_b, satfinite=satfinite))
        return d

    def wgmma_sp(self, a, b_desc, d, meta, *, selector=0, n, a_type, b_type=None, acc=None, scale_d, satfinite=False,
                 scale_a=1, scale_b=1, trans_a=False, trans_b=False):
        """`wgmma.mma_async.sp` (`wgmma_sp`): the sparse form, K twice the dense form's; `meta` the .b32 register of
        2:4 sparsity metadata, `selector` the immediate sp-sel; the rest as for `wgmma`.  Returns d."""
        form = wgmma_form(n, a_type, b_type, acc)
        sd = scale_d if isinstance(scale_d, (bool, int)) else self._val(scale_d)
        self.emit(wgmma_sp(form, self._val(d), self._val(a), self._val(b_desc), self._val(meta, T.b32), selector, sd,
                           scale_a=scale_a, scale_b=scale_b, trans_a=trans_a, trans_b=trans_b, satfinite=satfinite))
        return d

    def wgmma_fence(self):
        """`wgmma.fence.sync.aligned` (before the first wgmma, after touching its registers)."""
        self.emit(wgmma_fence())

    def wgmma_commit(self):
        """`wgmma.commit_group.sync.aligned`."""
        self.emit(wgmma_commit_group())

    def wgmma_wait(self, n=0):
        """`wgmma.wait_group.sync.aligned n`: the accumulators of all but the n newest groups are ready."""
        self.emit(wgmma_wait_group(n))

    def wgmma_accumulator_origin(self):
        """Emit (row0, col0) u32 registers: this thread's first accumulator element, row 16*warp + lane/4
        and column 2*(lane%4) within the warpgroup's 64 x N tile.  Element e of the accumulator is at
        (row0, col0) + `accumulator_offset(form, e)`."""
        tid = self.tid()
        lane = self.reg(T.u32, "wg_lane")
        self.and_(tid, 31, dst=lane)
        w = self.reg(T.u32, "wg_warp")
        self.shr(tid, 5, dst=w)
        self.and_(w, 3, dst=w)
        row0 = self.reg(T.u32, "wg_row0")
        self.shr(lane, 2, dst=row0)
        self.mad(w, 16, row0, mode="lo", dst=row0)
        col0 = self.reg(T.u32, "wg_col0")
        self.and_(lane, 3, dst=col0)
        self.shl(col0, 1, dst=col0)
        return row0, col0

    def wgmma_store_accumulators(self, d, form, base, row_stride: int, *, space="global"):
        """Store a warpgroup's accumulators `d` (of wgmma form `form`) as the 64 x N tile whose element
        (0, 0) is at address `base` (a .u64 register), rows `row_stride` bytes apart: one 32-bit store per
        register (`st.<space>.b32`; an .f16 register holds two adjacent columns)."""
        eb = 2 if form.d_type is T.f16 else 4
        row0, col0 = self.wgmma_accumulator_origin()
        off = self.mad(row0, row_stride, self.mul(col0, eb), mode="lo")
        addr = self.add(self._val(base), self.cvt(off, "u64"))
        for i, r in enumerate(self._val(d)):
            dr, dc = accumulator_offset(form, i * form.per_d_reg)
            self.st(addr, r, type=T.b32, space=space, offset=dr * row_stride + dc * eb)


# ---------------------------------------------------------------- shared-memory operands

def descriptor_rows(desc: int, rows: int, elem_bits: int, mn_major: bool, kbytes: int = 32) -> np.ndarray:
    """The shared-memory byte addresses one wgmma reads for an operand of `rows` M (or N) rows.

    Returns (rows, kbytes) int64 addresses: `kbytes` bytes of K, 32 but for the B of a sparse wgmma (64).
    K-major (the default): entry [r, b] is byte b of the K slice of row r (any element width, .b1
    included); K past one swizzle atom (a sparse B through a 32-byte swizzle) continues in the atom the
    leading byte offset names, as an H100 reads it (tests/test_interp_sparse_gpu.py).  MN-major (16-bit types, imm-trans = 1): entries [r, 2k] and [r, 2k + 1] are the two
    bytes of element (r, k), k < kbytes / 2.  The addresses are `isa.descriptors.descriptor_address` of
    the decoded descriptor, vectorized.
    """
    from dataclasses import replace

    from .descriptors import decode_descriptor, descriptor_address
    fields = decode_descriptor(int(desc))
    r = np.arange(rows, dtype=np.int64)[:, None]
    if not mn_major:
        span = fields.swizzle if 0 < fields.swizzle < kbytes else kbytes  # past one swizzle atom: the next at +LBO
        return np.concatenate([descriptor_address(replace(fields, start_addr=fields.start_addr
                                                          + j * fields.leading_byte_offset), "K", 8, r,
                                                  np.arange(span, dtype=np.int64)[None, :])
                               for j in range(kbytes // span)], axis=1)
    if elem_bits != 16:
        raise ValidationError("only 16-bit operands may be MN-major (transposed) in shared memory")
    a = descriptor_address(fields, "MN", 16, r, np.arange(kbytes // 2, dtype=np.int64)[None, :])
    return (a[:, :, None] + np.arange(2)).reshape(rows, kbytes)



def descriptor_base_offset(desc: int) -> int:
    """The base-offset field (bits 49-51) of a matrix descriptor."""
    from .descriptors import decode_descriptor
    return decode_descriptor(int(desc)).base_offset
