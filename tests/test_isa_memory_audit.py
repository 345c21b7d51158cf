"""Memory-form audit: atom/red cache hints, the PTX ISA version of .b128 accesses at .sys scope, bulk-copy size
bounds, createpolicy fractions in registers, memory orders on .shared::cluster, atom/red on .shared::cluster,
ld.volatile with an L2 prefetch size and ordered .b128 loads and stores.  Each accepted form assembles with
ptxas 13.0, each refusal is one ptxas shares (but bulk sizes of 2^32 and up, which ptxas wraps silently), and the
interpreter runs what is newly accepted."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.isa import types as T
from ptxforge.isa import async_copy, memory
from ptxforge.isa.memory import ATOM_HALF_TYPES, ATOM_OPS, ATOM_VECTORS

from support.ptx_text import assembler_verdict, raw_kernel

_B128 = ".reg .b128 %q<4>;"


def _kernel(target="sm_90", **kw):
    k = pf.KernelBuilder("audit", target=target, **kw)
    return k, k.param_ptr("p", pf.b8)


# ------------------------------------------------------------------ atom / red and .L2::cache_hint

def _regs(k, t):
    return k.reg(T.decl_type(t))


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_every_atom_and_red_form_but_cas_takes_a_cache_hint(target):
    k, p = _kernel(target)
    pol = k.createpolicy()
    for op, types in ATOM_OPS.items():
        for t in types:
            if (target == "sm_80" and t in (T.bf16, T.bf16x2, T.b128)) or (t in ATOM_HALF_TYPES and op != "add"):
                continue
            if op not in memory.ATOM_CACHE_HINT_OPS:
                continue
            k.atom(op, p, _regs(k, t), type=t, policy=pol)
            if op != "exch":
                k.red(op, p, _regs(k, t), type=t, policy=pol)
    if target == "sm_90":
        for (op, t), lengths in ATOM_VECTORS.items():
            k.atom(op, p, [_regs(k, t) for _ in range(lengths[-1])], type=t, policy=pol)
            k.red(op, p, [_regs(k, t) for _ in range(lengths[0])], type=t, policy=pol)
    ptx = k.module().ptx
    assert "atom.global.exch.L2::cache_hint.b32" in ptx
    if target == "sm_90":
        assert "atom.global.exch.L2::cache_hint.b128" in ptx  # the PTX ISA lists it, ptxas 13 takes it
    pf.assemble(k.module())


@pytest.mark.parametrize("t, target", [(T.b16, "sm_80"), (T.b32, "sm_80"), (T.b64, "sm_90"), (T.b128, "sm_90")])
def test_atom_cas_with_a_cache_policy_is_refused_as_ptxas_refuses_it(t, target):
    k, p = _kernel(target)
    pol = k.createpolicy()
    with pytest.raises(pf.ValidationError, match=r"atom\.cas takes no \.L2::cache_hint.*exch") as info:
        k.atom("cas", p, _regs(k, t), compare=_regs(k, t), type=t, policy=pol)
    assert "test_isa_memory_audit.py" in str(info.value)  # located at the user's line
    reg = {T.b16: "%h1", T.b32: "%r2", T.b64: "%rd2", T.b128: "%q1"}[t]
    line = (f"createpolicy.fractional.L2::evict_last.b64 %rd5, 1.0;\n"
            f"atom.global.cas.L2::cache_hint.{t.name} {reg}, [%rd0], {reg}, {reg}, %rd5;")
    assert "Illegal modifier '.L2::cache_hint'" in assembler_verdict(raw_kernel(line, target, "8.4", decls=_B128))
    k.atom("cas", p, _regs(k, t), compare=_regs(k, t), type=t)  # without the policy it is fine
    pf.assemble(k.module())


# ------------------------------------------------------------------ .b128 at .sys scope: PTX ISA 8.4

@pytest.mark.parametrize("build", [
    lambda k, p: k.atom("exch", p, k.reg(pf.b128), scope="sys"),
    lambda k, p: k.atom("cas", p, k.reg(pf.b128), compare=k.reg(pf.b128), scope="sys"),
    lambda k, p: k.atom("exch", p, k.reg(pf.b128), sem="release", scope="sys"),
    lambda k, p: k.atom("cas", k.shared_base(k.shared("s", 64, 16)), k.reg(pf.b128), compare=k.reg(pf.b128),
                        space="shared", sem="acq_rel", scope="sys"),
    lambda k, p: k.ld(p, type=pf.b128, sem="acquire", scope="sys"),
    lambda k, p: k.st(p, k.reg(pf.b128), sem="relaxed", scope="sys"),
])
def test_b128_at_system_scope_needs_ptx_8_4(build):
    k, p = _kernel("sm_90")
    build(k, p)
    assert str(k.module().version) == "8.4"
    pf.assemble(k.module())
    k2, p2 = _kernel("sm_90")
    build(k2, p2)
    with pytest.raises(pf.TargetError, match="8.4"):
        k2.module(version="8.3")


def test_b128_at_narrower_scopes_stays_at_ptx_8_3():
    k, p = _kernel("sm_90")
    k.atom("exch", p, k.reg(pf.b128), scope="gpu")
    k.atom("exch", p, k.reg(pf.b128), sem="acq_rel", scope="cluster")
    assert str(k.module().version) == "8.3"
    pf.assemble(k.module())
    ptx = raw_kernel("atom.sys.global.exch.b128 %q1, [%rd0], %q2;", "sm_90", "8.3", decls=_B128)
    assert "requires PTX ISA .version 8.4" in assembler_verdict(ptx)


# ------------------------------------------------------------------ bulk copy sizes

def _bulk_calls():
    def copy(k, g, n):
        k.bulk_copy(k.shared("s", 1024, 128), g, n, k.shared("mb", 8, 8))

    def to_cluster(k, g, n):
        k.bulk_copy_to_cluster(k.mapa(k.shared_base(k.shared("s", 1024, 128)), 1), k.shared("t", 1024, 128), n,
                               k.mapa(k.shared_base(k.shared("mb", 8, 8)), 1))

    def store(k, g, n):
        k.bulk_store(g, k.shared("s", 1024, 128), n)

    def prefetch(k, g, n):
        k.bulk_prefetch(g, n)

    def reduce_global(k, g, n):
        k.bulk_reduce(g, k.shared("s", 1024, 128), n, "add", "u32")

    def reduce_cluster(k, g, n):
        k.bulk_reduce(k.mapa(k.shared_base(k.shared("s", 1024, 128)), 1), k.shared("t", 1024, 128), n, "add",
                      "u32", mbar=k.mapa(k.shared_base(k.shared("mb", 8, 8)), 1))
    return [copy, to_cluster, store, prefetch, reduce_global, reduce_cluster]


@pytest.mark.parametrize("call", _bulk_calls(), ids=lambda f: f.__name__)
def test_bulk_sizes_are_bounded_as_ptxas_bounds_them(call):
    for n in (async_copy.BULK_SIZE_MAX + 16, 1 << 20, 1 << 32, 1 << 40):
        k, p = _kernel("sm_90")
        with pytest.raises(pf.ValidationError, match=rf"multiple of 16 .*16\.\.{async_copy.BULK_SIZE_MAX}\b"):
            call(k, p, n)
    for n in (100, 0, -16):
        k, p = _kernel("sm_90")
        with pytest.raises(pf.ValidationError, match="multiple of 16"):
            call(k, p, n)
    k, p = _kernel("sm_90")
    call(k, p, async_copy.BULK_SIZE_MAX)
    ptx = k.module().ptx
    assert f"{async_copy.BULK_SIZE_MAX:#X}".replace("0X", "0x") in ptx
    pf.assemble(k.module())


def test_ptxas_bounds_the_bulk_size_where_the_table_says():
    line = "cp.async.bulk.global.shared::cta.bulk_group [%rd0], [%r0], {};"
    assert assembler_verdict(raw_kernel(line.format(async_copy.BULK_SIZE_MAX), "sm_90")) is None
    assert "out of range" in assembler_verdict(raw_kernel(line.format(async_copy.BULK_SIZE_MAX + 16), "sm_90"))


# ------------------------------------------------------------------ createpolicy fractions

@pytest.mark.parametrize("reg", [pf.f64, pf.u64, pf.pred, pf.u32, pf.s32])
def test_createpolicy_refuses_a_register_fraction_of_another_type_with_a_located_message(reg):
    """ptxas takes the fraction in an .f32 or .b32 register and refuses .u32 / .s32 ones ('Arguments mismatch')."""
    k, _ = _kernel("sm_80")
    with pytest.raises(pf.ValidationError, match=r"createpolicy fraction must be a number in \(0, 1\] or an "
                       r"\.f32 \(or \.b32\) register") as info:
        k.createpolicy("L2::evict_last", k.reg(reg))
    assert f".{reg.name}" in str(info.value) and "test_isa_memory_audit.py" in str(info.value)


@pytest.mark.parametrize("reg", [pf.f32, pf.b32])
def test_createpolicy_takes_a_register_fraction_reads_it_back_and_runs(reg):
    """A fraction computed at run time: the form assembles, the PTX reader reads it back as written, and the
    interpreter runs the load that carries the policy."""
    from ptxforge import interp
    k, p = _kernel("sm_80")
    frac = k.mov(0.5, type=pf.f32) if reg is pf.f32 else k.mov(0x3F000000, type=pf.b32)
    v = k.ld(p, type=u32, policy=k.createpolicy("L2::evict_last", frac))
    k.st(p, k.add(v, 1))
    m = k.module()
    assert "createpolicy.fractional.L2::evict_last.b64 %rd" in m.ptx and pf.assemble(m) is not None
    assert str(pf.parse(str(m))) == str(m)
    a = np.array([41], dtype=np.uint32)
    assert interp.run(m, block=1, args=[a]).ok and a[0] == 42


@pytest.mark.parametrize("fraction", [0.25, 1, np.float32(0.5), np.float64(0.75)])
def test_createpolicy_takes_python_and_numpy_numbers(fraction):
    k, p = _kernel("sm_80")
    k.ld(p, type=u32, policy=k.createpolicy("L2::evict_first", fraction))
    pf.assemble(k.module())


# ------------------------------------------------------------------ memory orders on .shared::cluster

def test_memory_orders_on_shared_cluster_assemble():
    k = pf.KernelBuilder("dsmem", target="sm_90", reqnctapercluster=(2, 1, 1))
    peer = k.mapa(k.shared_base(k.shared("box", 64, 16)), 1)
    v = k.ld(peer, type=u32, space="shared::cluster", sem="acquire", scope="cluster")
    k.ld(peer, type=u32, space="shared::cluster", sem="relaxed", scope="gpu")
    k.ld(peer, type=u32, space="shared::cluster", sem="volatile")
    k.st(peer, v, type=u32, space="shared::cluster", sem="release", scope="cluster")
    k.st(peer, v, type=u32, space="shared::cluster", sem="relaxed", scope="cta")
    k.ld(peer, type=pf.b128, space="shared::cluster", sem="acquire", scope="cluster")
    ptx = k.module().ptx
    for want in ("ld.acquire.cluster.shared::cluster.u32", "st.release.cluster.shared::cluster.u32",
                 "ld.volatile.shared::cluster.u32", "ld.acquire.cluster.shared::cluster.b128"):
        assert want in ptx, want
    pf.assemble(k.module())
    k2 = pf.KernelBuilder("dsmem80", target="sm_80")
    with pytest.raises(pf.TargetError, match="sm_90"):
        k2.ld(k2.reg(u32), type=u32, space="shared::cluster", sem="acquire", scope="cta")


def test_memory_orders_stay_refused_on_local_param_and_const():
    k, p = _kernel("sm_90")
    for space in ("local", "param", "const"):
        with pytest.raises(pf.ValidationError, match=r"\.shared::cluster"):
            k.ld(k.reg(pf.u64), type=u32, space=space, sem="relaxed", scope="gpu")
    assert "cannot be applied to '.local'" in assembler_verdict(
        raw_kernel("ld.relaxed.gpu.local.u32 %r2, [%rd0];", "sm_90"))


def _dsmem_handoff(ordered: bool):
    """CTA 0 of a pair stores each thread's word into CTA 1's `inbox` (st.release.cluster when `ordered`) and
    adds it into CTA 1's `total` with atom / red on .shared::cluster; after a cluster barrier CTA 1 reads its
    inbox back (ld.acquire.cluster on .shared::cluster when `ordered`) and writes it and the total out."""
    k = pf.KernelBuilder("dsmem_order", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    out = k.param_ptr("out", u32)
    tid = k.tid()
    slot = k.add(k.shared_base(k.shared("inbox", 128, align=16)), k.shl(tid, 2))
    total = k.shared_base(k.shared("total", 8, align=8))
    rank = k.cluster_ctarank()
    sem = dict(sem="release", scope="cluster") if ordered else {}
    with k.if_(k.setp("eq", rank, 1)):
        k.st(total, 0, type=u32, space="shared", pred=k.setp("eq", tid, 0))
    k.cluster_sync()
    with k.if_(k.setp("eq", rank, 0)):
        k.st(k.mapa(slot, 1), k.add(tid, 100), type=u32, space="shared::cluster", **sem)
        k.red("add", k.mapa(total, 1), k.add(tid, 1), space="shared::cluster", **sem)
        k.atom("max", k.mapa(total, 1, dst=None), 0, type=u32, space="shared::cluster")
    k.cluster_sync()
    with k.if_(k.setp("eq", rank, 1)):
        got = k.ld(k.mapa(slot, 1), type=u32, space="shared::cluster",
                   **(dict(sem="acquire", scope="cluster") if ordered else {}))
        k.st(k.add(out, k.mul(tid, 4, mode="wide")), got, type=u32)
        k.st(k.add(out, 128), k.ld(total, type=u32, space="shared"), type=u32, pred=k.setp("eq", tid, 0))
    k.cluster_sync()
    return k.module()


@pytest.mark.parametrize("ordered", [False, True])
def test_ordered_and_atomic_dsmem_accesses_run_on_the_interpreter(ordered):
    m = _dsmem_handoff(ordered)
    pf.assemble(m)
    out = np.zeros(33, np.uint32)
    r = interp.run(m, grid=2, block=32, args=[out], check=False)
    assert not r.findings, [str(f) for f in r.findings]
    np.testing.assert_array_equal(out[:32], np.arange(32) + 100)
    assert out[32] == sum(range(1, 33))


# ------------------------------------------------------------------ atom / red on .shared::cluster

def test_atom_and_red_on_shared_cluster_assemble():
    assert "shared::cluster" in memory.ATOM_CLUSTER_SPACES
    k = pf.KernelBuilder("dsmem_atom", target="sm_90", reqnctapercluster=(2, 1, 1))
    peer = k.mapa(k.shared_base(k.shared("w", 64, 16)), 1)
    k.atom("add", peer, 1, type=u32, space="shared::cluster")
    k.atom("cas", peer, k.reg(pf.b32), compare=k.reg(pf.b32), space="shared::cluster", sem="acq_rel",
           scope="cluster")
    k.atom("add", peer, k.reg(pf.f16), type="f16", space="shared::cluster")
    k.atom("exch", peer, k.reg(pf.b128), space="shared::cluster")
    k.red("add", peer, k.reg(pf.f32), space="shared::cluster", sem="release", scope="cluster")
    ptx = k.module().ptx
    for want in ("atom.shared::cluster.add.u32", "atom.acq_rel.cluster.shared::cluster.cas.b32",
                 "atom.shared::cluster.add.noftz.f16", "atom.shared::cluster.exch.b128",
                 "red.release.cluster.shared::cluster.add.f32"):
        assert want in ptx, want
    pf.assemble(k.module())


def test_atom_on_shared_cluster_refusals_match_ptxas():
    k = pf.KernelBuilder("dsmem_atom", target="sm_90", reqnctapercluster=(2, 1, 1))
    peer = k.mapa(k.shared_base(k.shared("w", 64, 16)), 1)
    with pytest.raises(pf.ValidationError, match="global or generic"):
        k.atom("add", peer, [k.reg(pf.f32), k.reg(pf.f32)], space="shared::cluster")
    assert "State space incorrect" in assembler_verdict(
        raw_kernel("atom.shared::cluster.add.v2.f32 {%f2,%f3}, [%r0], {%f4,%f5};", "sm_90", "8.1"))
    with pytest.raises(pf.ValidationError, match="applies to .global"):
        k.atom("add", peer, 1, type=u32, space="shared::cluster", policy=k.createpolicy())
    k80 = pf.KernelBuilder("dsmem_atom80", target="sm_80")
    with pytest.raises(pf.TargetError, match="sm_90"):
        k80.atom("add", k80.reg(u32), 1, type=u32, space="shared::cluster")
    assert "requires .target sm_90" in assembler_verdict(
        raw_kernel("atom.shared::cluster.add.u32 %r2, [%r0], %r3;", "sm_80", "7.8"))


# ------------------------------------------------------------------ ld.volatile with an L2 prefetch size

@pytest.mark.parametrize("size", ["L2::64B", "L2::128B", "L2::256B"])
def test_volatile_loads_take_an_l2_prefetch_size(size):
    k, p = _kernel("sm_80")
    k.ld(p, type=u32, sem="volatile", hints=(size,))
    k.ld(p, type=u32, space="generic", sem="volatile", hints=(size,), vec=4)
    assert f"ld.volatile.global.{size}.u32" in k.module().ptx
    assert str(k.module().version) == "7.4"
    pf.assemble(k.module())


@pytest.mark.parametrize("build", [
    lambda k, p: k.ld(p, type=u32, sem="volatile", hints=("L1::evict_last",)),
    lambda k, p: k.st(p, k.reg(u32), sem="volatile", hints=("L1::no_allocate",)),
    lambda k, p: k.ld(p, type=u32, sem="volatile", policy=k.createpolicy()),
])
def test_volatile_accesses_take_no_eviction_priority_or_cache_policy(build):
    k, p = _kernel("sm_80")
    with pytest.raises(pf.ValidationError, match="volatile"):
        build(k, p)
    assert "cannot be combined with modifier '.volatile'" in assembler_verdict(
        raw_kernel("ld.volatile.global.L1::evict_last.u32 %r2, [%rd0];", "sm_80", "7.4"))


def test_volatile_load_with_a_prefetch_size_runs_on_the_interpreter():
    k = pf.KernelBuilder("vol", target="sm_80")
    out = k.param_ptr("out", u32)
    v = k.ld(out, type=u32, sem="volatile", hints=("L2::128B",))
    k.st(out, k.add(v, 1), type=u32, offset=4)
    buf = np.array([7, 0], np.uint32)
    interp.run(k.module(), grid=1, block=1, args=[buf])
    assert list(buf) == [7, 8]


# ------------------------------------------------------------------ ordered .b128 loads and stores

@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_ordered_b128_loads_and_stores_assemble(target):
    k, p = _kernel(target)
    q = k.ld(p, type=pf.b128, sem="relaxed", scope="gpu")
    k.st(p, q, sem="release", scope="gpu", offset=16)
    k.ld(p, type=pf.b128, sem="volatile", offset=32)
    k.st(p, q, sem="volatile", offset=48)
    sh = k.shared_base(k.shared("s", 64, 16))
    k.ld(sh, type=pf.b128, space="shared", sem="acquire", scope="cta")
    ptx = k.module().ptx
    for want in ("ld.relaxed.gpu.global.b128", "st.release.gpu.global.b128", "ld.volatile.global.b128",
                 "ld.acquire.cta.shared.b128"):
        assert want in ptx, want
    assert str(k.module().version) == "8.3"
    pf.assemble(k.module())


def test_ordered_b128_accesses_run_on_the_interpreter():
    """Thread 0 copies 16 bytes with ld.relaxed.gpu.b128 and st.release.gpu.b128, and 16 more with the .volatile
    forms."""
    k = pf.KernelBuilder("b128_order", target="sm_90", reqntid=32)
    src = k.param_ptr("src", u32)
    dst = k.param_ptr("dst", u32)
    lead = k.setp("eq", k.tid(), 0)
    k.st(dst, k.ld(src, type=pf.b128, sem="relaxed", scope="gpu", pred=lead), sem="release", scope="gpu",
         pred=lead)
    k.st(dst, k.ld(src, type=pf.b128, sem="volatile", offset=16, pred=lead), sem="volatile", offset=16, pred=lead)
    m = k.module()
    pf.assemble(m)
    a = np.arange(8, dtype=np.uint32) + 11
    b = np.zeros(8, np.uint32)
    r = interp.run(m, grid=1, block=32, args=[a, b], check=False)
    assert not r.findings, [str(f) for f in r.findings]
    np.testing.assert_array_equal(b, a)


def test_numbers_stored_as_half_types_are_their_bit_patterns():
    """st of a number as .f16 / .bf16 (or a pair) was refused ('does not fit .b16'): it is written as the bit
    pattern (PTX has no 16-bit float literal), assembles, and the interpreter stores those bits; a number beyond
    the type's range, and a vector mixing registers and numbers (ptxas refuses mixed element types), are
    refused by name."""
    from ptxforge import interp
    from ptxforge.bfloat16 import to_bf16
    k = pf.KernelBuilder("halves", target="sm_80")
    p = k.param_ptr("p", pf.f16)
    k.st(p, 1.0, type=pf.f16)
    k.st(p, np.float32(3.0), type=pf.bf16, offset=2)
    k.st(p, [0.5, -2.0], type=pf.f16, offset=4)
    k.st(p, 1.5, type=pf.f16x2, offset=8)
    m = k.module()
    assert "st.global.b16   [%p], 0x3C00;" in m.ptx and pf.assemble(m) is not None
    a = np.zeros(6, np.float16)
    assert interp.run(m, block=1, args=[a]).ok
    bits = a.view(np.uint16)
    assert bits[1] == int(to_bf16(np.float32(3.0)))
    assert list(a[[0, 2, 3, 4, 5]]) == [1.0, 0.5, -2.0, 1.5, 1.5]
    k = pf.KernelBuilder("refused", target="sm_80")
    p = k.param_ptr("p", pf.f16)
    with pytest.raises(pf.ValidationError, match="beyond the range of .f16"):
        k.st(p, 1e6, type=pf.f16)
    with pytest.raises(pf.ValidationError, match="registers or numbers, not both"):
        k.st(p, [k.mov(2.5, type=pf.f16), 0.25], type=pf.f16, offset=4)
