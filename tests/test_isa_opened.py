"""Legal PTX that ptxforge used to refuse: each form is accepted now, assembles with ptxas and
(where the interpreter models it) computes what numpy says."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.assembler import available_backends
from ptxforge.isa import types as T
from ptxforge.isa.sync import FENCES
from ptxforge.isa.tensor import MMA_FORMS

needs_assembler = pytest.mark.skipif(not available_backends(), reason="needs ptxas or nvJitLink")


def _sm90_forms(k):
    g = k.param_ptr("g")
    sm = k.shared("sm", 64, align=8)
    for f in FENCES:
        k.fence(f)
    k.setp("lt", k.reg(T.f16), k.reg(T.f16))
    k.setp("nan", k.reg(T.b16), k.reg(T.b16), type=T.bf16, combine=("and", k.setp("eq", k.tid(), 0)))
    k.mov([k.reg(T.b8), k.reg(T.b8)], type=T.b16)
    k.unpack(k.reg(T.b16))
    k.mov([k.reg(T.b64), k.reg(T.b64)], type=T.b128)
    k.unpack(k.reg(T.b128))
    k.mov(k.reg(T.b128))
    k.atom("cas", g, k.reg(T.b16), compare=k.reg(T.b16), type=T.b16)
    k.atom("add", sm, k.reg(T.u32), space="shared::cta")
    k.red("add", sm, k.reg(T.u32), space="shared::cta")
    gen = k.cvta(g, frm="global")
    k.prefetch(gen, level="L2::evict_last", space=None)
    k.prefetch(gen, level="L2::evict_normal", space=None)
    for rnd in ("rn", "rz", "rm", "rp"):
        k.cvt(k.reg(T.b16), T.f32, frm=T.bf16, rnd=rnd)
        k.cvt(k.reg(T.b16), T.f64, frm=T.bf16, rnd=rnd)
    for name in ("envreg3", "pm0", "pm7_64", "clock_hi", "globaltimer_lo", "globaltimer_hi", "aggr_smem_size",
                 "current_graph_exec", "reserved_smem_offset_begin", "reserved_smem_offset_end",
                 "reserved_smem_offset_cap", "reserved_smem_offset_0"):
        k.sreg(name)
    for f in MMA_FORMS:
        if f.a_type in (T.e4m3, T.e5m2) or (f.a_type is T.f64 and f.shape != "m8n8k4"):
            k.mma(k.regs(f.frag_type, f.a_regs), k.regs(f.frag_type, f.b_regs), 0, shape=f.shape,
                  a_type=f.a_type, b_type=f.b_type, acc=f.c_type)


@needs_assembler
def test_the_opened_forms_assemble():
    k = pf.KernelBuilder("opened", target="sm_90")
    _sm90_forms(k)
    m = k.module()
    assert str(m.version) == "8.7"  # fp8 mma with an f16 accumulator is the newest of them
    pf.assemble(m)
    text = m.ptx
    for spelling in ("setp.lt.f16", "setp.nan.and.bf16", "mov.b128", "atom.global.cas.b16", "atom.shared::cta.add.u32",
                     "prefetch.L2::evict_last", "cvt.rz.f32.bf16", "fence.proxy.alias", "fence.sc.cluster",
                     "%envreg3", "%current_graph_exec", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32",
                     "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64"):
        assert spelling in text, spelling


def test_the_opened_forms_keep_their_targets():
    k = pf.KernelBuilder("old", target="sm_80")
    with pytest.raises(pf.TargetError, match="sm_90"):
        k.setp("lt", k.reg(T.b16), k.reg(T.b16), type=T.bf16)
    with pytest.raises(pf.TargetError, match="sm_90"):
        k.fence("fence.sc.cluster")
    with pytest.raises(pf.TargetError, match="aggr_smem_size needs sm_90"):
        k.sreg("aggr_smem_size")
    f = next(f for f in MMA_FORMS if f.a_type is T.e4m3)
    with pytest.raises(pf.TargetError, match="sm_89"):
        k.mma(k.regs(T.b32, f.a_regs), k.regs(T.b32, f.b_regs), 0, shape=f.shape, a_type="e4m3", acc="f32")


@needs_assembler
def test_identifiers_may_start_with_a_dollar():
    k = pf.KernelBuilder("$kernel", target="sm_80")
    n = k.param_value("$n", T.u32)
    x = k.reg(T.u32, "$x")
    k.add(n, 1, dst=x)
    k.shared("$tile", 64)
    text = k.module().ptx
    assert ".entry $kernel(" in text and "%$x" in text and "$tile[64]" in text
    pf.assemble(k.module())


def _run(k, *args):
    interp.run(k.module(), grid=1, block=1, args=list(args))


@pytest.mark.parametrize("cmp", ["lt", "le", "gt", "ge", "eq", "ne", "ltu", "geu", "num", "nan"])
def test_setp_on_halves_compares_the_values(cmp):
    rng = np.random.default_rng(len(cmp))
    vals = rng.standard_normal(16).astype(np.float32)
    vals[3] = vals[2]
    vals[5] = np.nan
    bf = (vals.view(np.uint32) >> 16).astype(np.uint16)  # exact: truncation of a value is a bf16
    f16 = vals.astype(np.float16)
    k = pf.KernelBuilder("cmp", target="sm_90")
    src_b, src_h, out = k.param_ptr("b"), k.param_ptr("h"), k.param_ptr("o")
    for i in range(15):
        pb = k.setp(cmp, k.ld(src_b, type=T.bf16, offset=2 * i), k.ld(src_b, type=T.bf16, offset=2 * i + 2),
                    type=T.bf16)
        ph = k.setp(cmp, k.ld(src_h, type=T.f16, offset=2 * i), k.ld(src_h, type=T.f16, offset=2 * i + 2))
        k.st(out, k.selp(1, 0, pb, type=T.u32), type=T.u32, offset=8 * i)
        k.st(out, k.selp(1, 0, ph, type=T.u32), type=T.u32, offset=8 * i + 4)
    got = np.zeros((15, 2), np.uint32)
    _run(k, bf, f16, got)
    ops = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
           "ne": lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b)}
    for col, x in enumerate(((bf.astype(np.uint32) << 16).view(np.float32), f16.astype(np.float32))):
        a, b = x[:-1], x[1:]
        unordered = np.isnan(a) | np.isnan(b)
        if cmp in ops:
            want = ops[cmp](a, b)
        elif cmp == "num":
            want = ~unordered
        elif cmp == "nan":
            want = unordered
        else:  # ltu / geu: true when unordered too
            want = unordered | {"ltu": np.less, "geu": np.greater_equal}[cmp](a, b)
        np.testing.assert_array_equal(got[:, col], want.astype(np.uint32), err_msg=cmp)


def test_atom_cas_b16_and_byte_packing_run_on_the_interpreter():
    k = pf.KernelBuilder("cas16", target="sm_80")
    g = k.param_ptr("g")
    old = k.atom("cas", g, 7, compare=5, type=T.b16)  # memory holds 5: swapped
    k.st(g, old, type=T.b16, offset=2)
    miss = k.atom("cas", g, 9, compare=5, type=T.b16, dst=k.reg(T.b16))  # now 7: kept
    k.st(g, miss, type=T.b16, offset=4)
    lo, hi = k.ld(g, type=T.b8, offset=6, dst=k.reg(T.b8)), k.ld(g, type=T.b8, offset=7, dst=k.reg(T.b8))
    packed = k.mov([hi, lo], type=T.b16)  # {first, second}: the first part is the low byte
    k.st(g, packed, type=T.b16, offset=8)
    buf = np.array([5, 0, 0, 0x3412, 0], np.uint16)
    _run(k, buf)
    assert buf[:3].tolist() == [7, 5, 7] and buf[4] == 0x1234


def test_new_special_registers_read_on_the_interpreter():
    k = pf.KernelBuilder("sregs", target="sm_90")
    g = k.param_ptr("g")
    for i, name in enumerate(("clock_hi", "reserved_smem_offset_begin", "aggr_smem_size")):
        k.st(g, k.sreg(name), type=T.u32, offset=4 * i)
    k.st(g, k.sreg("current_graph_exec"), type=T.u64, offset=16)
    buf = np.full(6, 0xFFFFFFFF, np.uint32)
    interp.run(k.module(), grid=1, block=1, args=[buf], shared=256)
    assert buf[0] == 0 and buf[1] == 0 and buf[2] == 256 and buf[4] == 0 and buf[5] == 0


@needs_assembler
def test_setp_on_half_pairs_writes_two_predicates():
    k = pf.KernelBuilder("pairs", target="sm_90")
    p, q = k.setp("lt", k.reg(T.f16x2), k.reg(T.f16x2))
    k.setp("ltu", k.reg(T.b32), k.reg(T.b32), type=T.bf16x2, combine=("and", p))
    text = k.module().ptx
    assert f"%{p.name}|%{q.name}" in text and "setp.ltu.and.bf16x2" in text
    pf.assemble(k.module())
    with pytest.raises(pf.TargetError, match="sm_90"):
        old = pf.KernelBuilder("old", target="sm_80")
        old.setp("lt", old.reg(T.b32), old.reg(T.b32), type=T.bf16x2)


@needs_assembler
def test_256_bit_vector_accesses_on_sm100():
    k = pf.KernelBuilder("wide", target="sm_100")
    g = k.param_ptr("g")
    v = k.ld(g, type=T.f32, vec=8)
    k.st(g, v, type=T.f32, offset=32)
    k.ld(k.cvta(g, frm="global"), type=T.b64, vec=4, space="generic")
    m = k.module()
    assert "ld.global.v8.f32" in m.ptx and str(m.version) == "8.8"
    pf.assemble(m)
    with pytest.raises(pf.ValidationError, match="256-bit"):
        k2 = pf.KernelBuilder("wide2", target="sm_100")
        k2.ld(k2.shared("t", 64), type=T.b32, vec=8, space="shared")
    with pytest.raises(pf.TargetError, match="sm_100"):
        k3 = pf.KernelBuilder("wide3", target="sm_90")
        k3.ld(k3.param_ptr("g"), type=T.u32, vec=8)
