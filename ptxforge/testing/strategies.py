"""Hypothesis strategies for PTX instructions, drawn from ptxforge's legal-form tables.

A drawn instruction is a `Spec`: plain data naming a family, an operation and its
parameters (types, modifiers, immediates, offsets, a guard).  `emit_spec` emits it through
the public `KernelBuilder` API into a `Scratch` kernel: a minimal kernel that provides a
global pointer, shared memory, an mbarrier, a predicate and (sm_90) a tensor map.

* `instruction_specs(target)` draws instructions that ptxforge accepts for `target`.  The
  candidates are enumerated from the tables the validator reads (``ARITH`` and its float modifiers,
  ``LD_TYPES``, ``LDMATRIX_FORMS``, ``STMATRIX_FORMS``, ``CP_ASYNC_SIZES``, ``MMA_FORMS``,
  ``FENCES`` ...) and kept when the validator accepts them for the target
  (`legal_candidates`).  Since ptxas is the authority, "every drawn spec assembles" checks
  that the validator lets nothing illegal through.
* `illegal_specs()` draws (target, Spec) pairs outside the tables (byte counts cp.async does
  not have, fragments with the wrong register count, features the target lacks, kernel-level
  mistakes ...): each must be refused with a `PtxforgeError` before any assembler runs.
* `kernels()` draws a target and a few legal specs; `build_module` turns them into a Module.

Use them to property-test your own kernels::

    from hypothesis import given
    from ptxforge.testing import strategies as pst

    @given(pst.kernels(families=("tensor",)))
    def test_mma_assembles(drawn):
        target, specs = drawn
        ptxforge.assemble(pst.build_module(target, specs))
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..isa import types as T
from ..isa.arith import ARITH, FLT, HALF, INT, takes_immediates
from ..isa.targets import Target
from ..isa.tensor import MMA_FORMS
from .candidates import accepts, legal_candidates, too_new_candidates
from .emit import LOGIC_METHODS, build_module, emit_spec
from .spec import FAMILIES, GUARDS, TARGETS, Scratch, Spec, spec

__all__ = [
    "TARGETS", "FAMILIES", "Spec", "spec", "Scratch", "emit_spec", "build_module", "accepts", "legal_candidates",
    "too_new_candidates", "targets", "instruction_specs", "kernels", "illegal_specs",
]


# ---------------------------------------------------------------- details drawn on top of a candidate

def _int_imm(t):
    lo = -(1 << (t.bits - 1)) if t.kind == "s" else 0
    return st.integers(lo, (1 << t.bits) - 1 if t.kind != "s" else (1 << (t.bits - 1)) - 1)


def _imm_for(t):
    if t.is_float:
        return st.floats(width=32 if t.bits <= 32 else 64)
    return _int_imm(t)


def _details(s: Spec) -> st.SearchStrategy:
    """Operand details (immediates, offsets, guard) for a legal candidate."""
    guard = st.sampled_from(GUARDS)
    fam, op = s.family, s.op
    if fam == "arith":
        t = T.lookup(s["type"])
        form = ARITH[op]
        if not takes_immediates(t) or (form.wide_sources and s.get("mode") == "wide"):
            imm = st.none()
        else:
            imm = st.none() | st.tuples(st.integers(0, form.arity - 1), _imm_for(t))
        return st.builds(lambda i, g: s.with_params(imm=i, guard=g), imm, guard)
    if fam == "bits":
        if op in LOGIC_METHODS:
            t = T.lookup(s["type"])
            imm = st.none() if t.is_pred else st.none() | _int_imm(t.as_unsigned() if t.kind == "b" else t)
        elif op in ("shl", "shr"):
            imm = st.none() | st.integers(0, T.lookup(s["type"]).bits)
        elif op == "lop3":
            imm = st.none() | st.integers(0, 0xFFFFFFFF)
        elif op == "prmt":
            imm = st.none() | st.integers(0, 0xFFFF)
        elif op in ("shf", "bfe", "bfi"):
            imm = st.none() | st.integers(0, 31)
        elif op in ("bmsk", "szext"):
            imm = st.none() | st.integers(0, 40)
        elif op == "fns":
            imm = st.none() | st.integers(-33, 33)
        else:
            imm = st.none()
        return st.builds(lambda i, g: s.with_params(imm=i, guard=g), imm, guard)
    if fam == "control":
        if op == "sym_offset":  # inside the 4 KB shared array, or just before it (`smem+-16`)
            return st.builds(lambda o, g: s.with_params(offset=o, guard=g), st.integers(-16, 4095), guard)
        if op in ("setp", "selp", "mov", "set", "slct"):
            t = T.lookup(s["type"])
            imm = st.none() if (t.is_pred or t in HALF or t is T.f16) else st.none() | _imm_for(t)
            return st.builds(lambda i, g: s.with_params(imm=i, guard=g), imm, guard)
        return st.builds(lambda g: s.with_params(guard=g), guard)
    if fam == "memory":
        if op in ("ld", "st"):
            t = T.lookup(s["type"])
            size = max(1, t.bits // 8) * s["vec"]
            offset = st.integers(0, 8).map(lambda j: j * size)
            if op == "st" and t.bits <= 64 and not (t.is_float and t.bits == 16):
                imm = st.none() | _imm_for(t if not t.kind == "b" else t.as_unsigned())
            else:
                imm = st.none()
            return st.builds(lambda o, i, g: s.with_params(offset=o, imm=i, guard=g), offset, imm, guard)
        if op == "prefetch":
            return st.builds(lambda o, g: s.with_params(offset=o, guard=g), st.integers(0, 64).map(lambda j: j * 8),
                             guard)
        return st.builds(lambda g: s.with_params(guard=g), guard)
    if fam == "async_copy":
        if op == "cp_async":
            size = s["size"]
            return st.builds(lambda d, o, n, g: s.with_params(dst_offset=d * size, src_offset=o * size,
                                                              src_size=min(n, size), guard=g),
                             st.integers(0, 64), st.integers(-4, 64), st.integers(0, 16), guard)
        if op == "wait":
            return st.builds(lambda n: s.with_params(n=n), st.integers(0, 64))
        if op == "bulk_copy" and s["size"] is not None:
            return st.builds(lambda n, g: s.with_params(size=16 * n, guard=g), st.integers(1, 1024), guard)
        if op in ("tensor_load", "tensor_store"):
            coord = st.none() | st.integers(-(1 << 31), (1 << 31) - 1)
            return st.builds(lambda c, g: s.with_params(coords=tuple(c), guard=g),
                             st.lists(coord, min_size=len(s["coords"]), max_size=len(s["coords"])), guard)
        if op in ("wait_all",):
            return st.just(s)
        return st.builds(lambda g: s.with_params(guard=g), guard)
    if fam == "sync":
        if op in ("bar_sync", "bar_arrive"):
            bid = st.integers(0, 15) if s["id"] is not None else st.just(None)
            count = st.integers(1, 32).map(lambda w: 32 * w) if isinstance(s.get("count"), int) else \
                st.just(s.get("count"))
            return st.builds(lambda i, c, g: s.with_params(id=i, count=c, guard=g), bid, count, guard)
        if op == "mbarrier_init":
            return st.builds(lambda c, g: s.with_params(count=c, guard=g), st.integers(1, (1 << 20) - 1), guard)
        if op in ("mbarrier_test_wait", "mbarrier_try_wait") and s["parity"]:
            return st.builds(lambda ph, g: s.with_params(phase=ph, guard=g), st.sampled_from((0, 1, None)), guard)
        if op == "mbarrier_arrive" and s.get("expect_tx") is not None:
            return st.builds(lambda n, g: s.with_params(expect_tx=n, guard=g), st.integers(0, (1 << 20) - 1), guard)
        if op == "nanosleep" and s["ns"] is not None:
            return st.builds(lambda n, g: s.with_params(ns=n, guard=g), st.integers(0, 1 << 20), guard)
        return st.builds(lambda g: s.with_params(guard=g), guard)
    if fam == "tensor":
        if op in ("mma", "wmma_load", "wmma_store", "wmma_mma", "mma_sp"):
            return st.builds(lambda g: s.with_params(guard=g), guard)
        return st.builds(lambda w: s.with_params(wait=w), st.integers(0, 7))
    if fam == "integer":
        t = T.lookup(s["type"]) if op == "carry" else T.lookup(s["btype"] if op == "video" else s["b_type"])
        imm = st.none() | _int_imm(t) if t.is_int else st.none()
        return st.builds(lambda i, g: s.with_params(imm=i, guard=g), imm, guard)
    if fam == "warp":
        if op == "shfl":
            lane = st.none() | st.integers(0, 31)
            clamp = st.none() | st.integers(0, 31)
            mask = st.sampled_from((0xFFFFFFFF, 0x0000FFFF, "reg"))
            return st.builds(lambda ln, c, m, g: s.with_params(lane=ln, clamp=c, mask=m, guard=g), lane, clamp, mask,
                             guard)
        return st.builds(lambda g: s.with_params(guard=g), guard)
    return st.just(s)


# ---------------------------------------------------------------- public strategies

def targets(names=TARGETS) -> st.SearchStrategy:
    """A target name (sm_80 ... sm_90a), from `names` (each a target ptxforge supports; TargetError otherwise,
    ValueError when `names` is empty)."""
    names = tuple(str(Target.parse(n)) for n in ((names,) if isinstance(names, str) else names))
    if not names:
        raise ValueError(f"targets: names is empty; give some of {', '.join(TARGETS)}")
    return st.sampled_from(names)


@st.composite
def _drawn_spec(draw, pools):
    """A candidate from one of `pools` with its details drawn.  A failing example shows the Spec itself:
    Hypothesis prints a value that st.builds made as that call (`s.with_params(imm=None, guard=None)`, which
    names no instruction), so the value returned is a copy it did not see made."""
    s = draw(_details(draw(st.one_of([st.sampled_from(p) for p in pools]))))
    return Spec(s.family, s.op, s.params)


def instruction_specs(target, families=FAMILIES, ops=None) -> st.SearchStrategy:
    """A legal instruction for `target`, from the given families (one name or several, of FAMILIES; and,
    when `ops` names some, of those operations only: `ops=("sym_offset",)`)."""
    target = str(Target.parse(target))
    families = (families,) if isinstance(families, str) else tuple(families)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise ValueError(f"instruction_specs: unknown families {unknown}; the families are {', '.join(FAMILIES)}"
                         if unknown else f"instruction_specs: no families given; the families are "
                         f"{', '.join(FAMILIES)}")
    pools = [[s for s in legal_candidates(target, f) if ops is None or s.op in ops] for f in families]
    pools = [p for p in pools if p]
    if not pools:
        raise ValueError(f"no legal candidates for {target} in families {families}")
    return _drawn_spec(pools)


def kernels(target_names=TARGETS, families=FAMILIES, min_size=1, max_size=6) -> st.SearchStrategy:
    """(target, [Spec, ...]): a target and a few legal instructions to emit into one kernel."""
    return targets(target_names).flatmap(
        lambda t: st.tuples(st.just(t), st.lists(instruction_specs(t, families), min_size=min_size,
                                                 max_size=max_size)))


# ---------------------------------------------------------------- illegal combinations

def _illegal_cp_async():
    bad_size = st.sampled_from((0, 1, 2, 3, 5, 6, 12, 24, 32, 64)).map(
        lambda n: spec("async_copy", "cp_async", cache="ca", size=n))
    cg_small = st.sampled_from((4, 8)).map(lambda n: spec("async_copy", "cp_async", cache="cg", size=n))
    too_much = st.sampled_from((4, 8, 16)).flatmap(
        lambda n: st.integers(n + 1, 4 * n).map(
            lambda m: spec("async_copy", "cp_async", cache="ca", size=n, fill="imm", src_size=m)))
    both = st.just(spec("async_copy", "cp_async", cache="cg", size=16, fill="imm+ignore", src_size=8))
    misaligned = st.sampled_from((8, 16)).flatmap(
        lambda n: st.integers(1, n - 1).map(
            lambda o: spec("async_copy", "cp_async", cache="ca", size=n, dst_offset=o)))
    return st.one_of(bad_size, cg_small, too_much, both, misaligned)


def _illegal_mma():
    forms = st.sampled_from(MMA_FORMS)

    def wrong_count(f, which, delta):
        n = getattr(f, f"{which}_regs") + delta
        return spec("tensor", "mma", shape=f.shape, a_type=f.a_type.name, b_type=f.b_type.name, acc=f.c_type.name,
                    bitop=f.bitop, c="regs", **{f"{which}_regs": max(n, 1) if delta > 0 else n})

    counts = st.builds(wrong_count, forms, st.sampled_from(("a", "b", "c")),
                       st.sampled_from((-3, -2, -1, 1, 2, 3))).filter(lambda s: min(
                           s.get("a_regs", 1), s.get("b_regs", 1), s.get("c_regs", 1)) >= 1)
    mixed = st.sampled_from(("m16n8k32", "m16n8k64", "m16n8k16")).flatmap(
        lambda shape: st.sampled_from((("s4", "s8"), ("u8", "u4"), ("s8", "f16"), ("f16", "bf16"))).map(
            lambda ab: spec("tensor", "mma", shape=shape, a_type=ab[0], b_type=ab[1], acc="s32", c="regs")))
    no_shape = st.sampled_from(("m8n8k16", "m16n8k8", "m32n8k16", "m16n16k16")).map(
        lambda shape: spec("tensor", "mma", shape=shape, a_type="s4", b_type="s4", acc="s32", c="regs"))
    sat_float = st.just(spec("tensor", "mma", shape="m16n8k16", a_type="f16", b_type="f16", acc="f32",
                             satfinite=True, c="regs"))
    wide_frag = forms.filter(lambda f: f.frag_type is T.b32).map(
        lambda f: spec("tensor", "mma", shape=f.shape, a_type=f.a_type.name, b_type=f.b_type.name,
                       acc=f.c_type.name, bitop=f.bitop, c="regs", frag_reg="b64"))
    return st.one_of(counts, mixed, no_shape, sat_float, wide_frag)


def _illegal_matrix():
    ld_num = st.sampled_from((0, 3, 5, 8)).map(
        lambda n: spec("memory", "ldmatrix", shape="m8n8", num=n, trans=False, type="b16", space="shared"))
    ld_type = st.sampled_from(("b8", "b32")).map(
        lambda t: spec("memory", "ldmatrix", shape="m8n8", num=4, trans=False, type=t, space="shared"))
    st_count = st.sampled_from(((1, 2), (2, 4), (4, 2), (4, 3))).map(
        lambda nr: spec("memory", "stmatrix", shape="m8n8", num=nr[0], trans=False, type="b16", space="shared",
                        regs=nr[1]))
    return st.tuples(st.sampled_from(TARGETS), st.one_of(ld_num, ld_type)) | st.tuples(
        st.sampled_from(("sm_90", "sm_90a")), st_count)


def _illegal_sync():
    bad_id = st.one_of(st.integers(16, 4096), st.integers(-100, -1)).map(
        lambda i: spec("sync", "bar_sync", id=i, count=None))
    bad_count = st.integers(1, 2048).filter(lambda c: c % 32 or c > 1024).map(
        lambda c: spec("sync", "bar_sync", id=0, count=c))
    arrive_no_count = st.just(spec("sync", "bar_arrive", id=1, count=None))
    init_count = st.one_of(st.just(0), st.integers(1 << 20, 1 << 24)).map(
        lambda c: spec("sync", "mbarrier_init", count=c, space="shared"))
    parity = st.integers(2, 100).map(lambda ph: spec("sync", "mbarrier_test_wait", parity=True, phase=ph))
    fence = st.sampled_from(("fence.sc.cluster.x", "membar.warp", "fence.proxy.sync")).map(
        lambda k: spec("sync", "fence", kind=k))
    return st.one_of(bad_id, bad_count, arrive_no_count, init_count, parity, fence)


def _illegal_arith():
    wrong_type = st.sampled_from((("rem", "f32"), ("ex2", "f64"), ("abs", "u32"), ("neg", "u64"),
                                  ("fma", "s32"), ("sin", "f64"), ("div", "f16"))).map(
        lambda ot: spec("arith", ot[0], type=ot[1], mode=None, flags=()))
    f64_flags = st.sampled_from(("add", "sub", "mul", "fma", "min")).flatmap(
        lambda op: st.sampled_from(("ftz", "sat")).map(
            lambda fl: spec("arith", op, type="f64", mode="rn" if op == "fma" else None, flags=(fl,))))
    wide64 = st.sampled_from(("u64", "s64")).map(lambda t: spec("arith", "mul", type=t, mode="wide", flags=()))
    half_imm = st.sampled_from(("f16", "bf16", "f16x2")).map(
        lambda t: spec("arith", "add" if t != "bf16" else "min", type=t, mode=None, flags=(), imm=(1, 1.0)))
    sat_u32 = st.just(spec("arith", "add", type="u32", mode="sat", flags=()))
    return st.one_of(wrong_type, f64_flags, wide64, half_imm, sat_u32, st.sampled_from(_illegal_arith_forms()))


def _illegal_arith_forms() -> list:
    """From the ARITH rows themselves: each opcode with every type it does not take, and each
    integer type with every integer mode it does not take (for methods that take a mode)."""
    every_type = INT + FLT + HALF
    every_mode = sorted({m for form in ARITH.values() for m in form.int_modes})
    out = []
    for op, form in ARITH.items():
        if len(form.types) > 1:  # single-type methods take no type=
            out += [spec("arith", op, type=t.name, mode=None, flags=()) for t in every_type if t not in form.types]
        if form.takes_mode:
            for t in form.types:
                if not t.is_float:
                    legal = form.int_modes_for(t)
                    out += [spec("arith", op, type=t.name, mode=m, flags=()) for m in every_mode if m not in legal]
    return out


def _illegal_kernel():
    return st.one_of(
        st.sampled_from(("foreign_register", "foreign_label", "unplaced_label")).map(lambda op: spec("kernel", op)),
        st.tuples(st.integers(1, 1024), st.integers(1, 1024)).map(
            lambda mr: spec("kernel", "maxntid_and_reqntid", maxntid=mr[0], reqntid=mr[1])),
        st.integers(49152 - 4096 - 8 + 1, 1 << 20).map(lambda n: spec("kernel", "static_shared", nbytes=n)),
    )


def _illegal_misc():
    return st.one_of(
        st.integers(32, 1000).map(lambda n: spec("warp", "shfl", mode="idx", type="b32", lane=n,
                                                 mask=0xFFFFFFFF)),
        st.just(spec("warp", "redux", redux_op="add", type="f32")),
        st.integers(256, 100000).map(lambda lut: spec("bits", "lop3", lut=lut)),
        st.sampled_from(("lo", "hi", "ls", "hs")).map(lambda c: spec("control", "setp", type="s32", cmp=c)),
        st.sampled_from(("lt", "gt", "lo")).map(lambda c: spec("control", "setp", type="f32", cmp=c + "x")),
        st.sampled_from((("u64", 4), ("f64", 4), ("u32", 3), ("b128", 2), ("f32", 8))).map(
            lambda tv: spec("memory", "ld", type=tv[0], vec=tv[1], space="global")),
        st.sampled_from(("param", "const")).map(lambda sp: spec("memory", "st", type="u32", vec=1, space=sp)),
        st.just(spec("memory", "ld", type="f32", vec=1, space="shared", nc=True)),
        st.sampled_from((("exch", "f32"), ("add", "b32"), ("inc", "s32"), ("min", "f32"))).map(
            lambda ot: spec("memory", "atom", atom_op=ot[0], type=ot[1], space="global")),
        st.just(spec("convert", "cvt", to="s32", frm="f32", rnd="rn")),
        st.just(spec("convert", "cvt", to="f32", frm="s32", rnd="rzi")),
        st.just(spec("convert", "cvt", to="u32", frm="u16", rnd="rn")),
        st.sampled_from((40, 72, 264, 512)).map(lambda n: spec("tensor", "wgmma", n=n, a_type="s8", b_type="s8",
                                                               acc="s32", a_regs=False)),
        st.just(spec("tensor", "wgmma", n=64, a_type="s4", b_type="s4", acc="s32", a_regs=False)),
        st.sampled_from((0, 16, 20, 44, 264, 512)).map(lambda n: spec("tensor", "setmaxnreg", action="inc", n=n)),
    )


def _illegal_for_target():
    pool = [t for t in TARGETS if too_new_candidates(t)]
    return st.sampled_from(pool).flatmap(lambda t: st.tuples(st.just(t), st.sampled_from(too_new_candidates(t))))


def illegal_specs() -> st.SearchStrategy:
    """(target, Spec) pairs that ptxforge must refuse (with a PtxforgeError) before any assembler runs."""
    any_target = st.sampled_from(TARGETS)
    return st.one_of(
        st.tuples(any_target, _illegal_cp_async()),
        st.tuples(any_target, _illegal_mma()),
        _illegal_matrix(),
        st.tuples(any_target, _illegal_sync()),
        st.tuples(any_target, _illegal_arith()),
        st.tuples(st.sampled_from(("sm_90a",)), _illegal_misc()),
        st.tuples(any_target, _illegal_kernel()),
        _illegal_for_target(),
    )
