"""ld/st in every state space (scalar, vector, cache hints), atomics, prefetch, ldmatrix/stmatrix."""

import pytest

import ptxforge as pf
from ptxforge import b8, b16, b32, bf16, f16, f32, s32, u8, u32, u64
from ptxforge.assembler import available_backends
from ptxforge.isa.memory import LDMATRIX_FORMS, STMATRIX_FORMS
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__


def kernel(target="sm_80"):
    k = pf.KernelBuilder("t", target=target)
    g = k.param_ptr("g", f32)
    smem = k.shared("smem", 1024, align=128)
    s = k.shared_base(smem)
    return k, g, smem, s


SETUP = 3  # ld.param, cvta, mov


def emitted(k):
    return [i.render() for i in k.finish().instructions[SETUP:-1]]


# ---------------------------------------------------------------- ld / st

def test_scalar_and_vector_loads():
    k, g, smem, s = kernel()
    k.ld(g, type=f32, dst=k.reg(f32, "x"))
    k.ld(g, type=f32, vec=4, offset=16, dst=[k.reg(f32, f"v{i}") for i in range(4)])
    k.ld(g, type=f32, nc=True, dst=k.reg(f32, "y"))
    k.ld(g, type=u8, dst=k.reg(u32, "byte"))                   # sub-word loads widen into 32 bits
    k.ld(g, type=b16, vec=4, dst=[k.reg(b32, f"w{i}") for i in range(4)])
    k.ld(smem, type=b32, space="shared", vec=2, offset=16, dst=[k.reg(b32, "p"), k.reg(b32, "q")])
    k.ld(s, type=u32, space="shared", offset=-8, dst=k.reg(u32, "neg"))
    k.ld(g, type=f32, cop="cg", hints=("L2::128B",), dst=k.reg(f32, "z"))
    assert emitted(k) == [
        "ld.global.f32   %x, [%g];",
        "ld.global.v4.f32 {%v0, %v1, %v2, %v3}, [%g+16];",
        "ld.global.nc.f32 %y, [%g];",
        "ld.global.u8    %byte, [%g];",
        "ld.global.v4.b16 {%w0, %w1, %w2, %w3}, [%g];",
        "ld.shared.v2.b32 {%p, %q}, [smem+16];",
        "ld.shared.u32   %neg, [%smem_base+-8];",
        "ld.global.cg.L2::128B.f32 %z, [%g];",
    ]
    pf.assemble(k.module())


def test_negative_offsets_are_spelled_plus_minus_because_ptxas_reads_minus_as_a_syntax_error():
    assert "syntax error" in assembler_verdict(raw_kernel("ld.global.f32 %f1, [%rd0-8];"))
    assert assembler_verdict(raw_kernel("ld.global.f32 %f1, [%rd0+-8];")) is None


def test_stores_with_registers_and_immediates():
    k, g, smem, s = kernel()
    x = k.reg(f32, "x")
    k.st(g, x)
    k.st(g, 1.5, type=f32, offset=4)
    k.st(g, [1, 2, 3, 0x600D], type=u32, offset=16)
    k.st(smem, 7, type=u32, space="shared")
    k.st(g, k.reg(u32, "w"), type=u8, cop="wt")                  # the low byte of a 32-bit register
    assert emitted(k) == [
        "st.global.f32   [%g], %x;",
        "st.global.f32   [%g+4], 0f3FC00000;",
        "st.global.v4.u32 [%g+16], {1, 2, 3, 0x600D};",
        "st.shared.u32   [smem], 7;",
        "st.global.wt.u8 [%g], %w;",
    ]
    pf.assemble(k.module())


def test_half_values_move_as_b16_because_there_is_no_ld_f16():
    k, g, smem, s = kernel()
    h = k.ld(g, type=f16)
    bh = k.ld(g, type=bf16, offset=2)
    k.st(g, h, offset=4)
    k.st(g, bh, offset=6)
    assert h.type is f16
    assert emitted(k) == [f"ld.global.b16   %{h.name}, [%g];", f"ld.global.b16   %{bh.name}, [%g+2];",
                          f"st.global.b16   [%g+4], %{h.name};", f"st.global.b16   [%g+6], %{bh.name};"]
    pf.assemble(k.module())
    assert assembler_verdict(raw_kernel("ld.global.f16 %h1, [%rd0];")) is not None


def test_b128_needs_ptx_8_3():
    k, g, smem, s = kernel()
    k.ld(g, type="b128")
    m = k.module()
    assert str(m.version) == "8.3"
    pf.assemble(m)


@pytest.mark.parametrize("kwargs, match", [
    ({"type": u64, "vec": 4, "space": "shared"}, "exists only for .global"),  # 256 bits: sm_100 and global only
    ({"type": pf.u16, "vec": 8}, "at most 128"),  # (ptxas: no .v8 of 16-bit values)
    ({"type": u32, "vec": 3}, "1, 2, 4 or 8"),
    ({"type": f32, "space": "shared", "nc": True}, "only for .global"),
    ({"type": f32, "cop": "wb"}, "cache operator"),
    ({"type": f32, "space": "shared", "hints": ("L1::evict_last",)}, "apply to .global"),
    ({"type": "pred"}, "does not take .pred"),
])
def test_load_refusals(kwargs, match):
    k, g, smem, s = kernel()
    addr = s if kwargs.get("space") == "shared" else g
    with pytest.raises(pf.ValidationError, match=match):
        k.ld(addr, **kwargs)


def test_ptxas_refuses_cache_hints_outside_global_memory():
    verdict = assembler_verdict(raw_kernel("ld.shared.L1::evict_last.f32 %f1, [%r0];"))
    assert "cannot be applied to '.shared'" in verdict


def test_global_addresses_must_be_64_bit():
    k, g, smem, s = kernel()
    with pytest.raises(pf.ValidationError) as info:
        k.ld(s, type=f32)  # <- global-from-32-bit
    assert "global addresses are 64-bit" in str(info.value)
    assert_located(info.value, "<- global-from-32-bit", HERE)


def test_param_and_const_are_read_only():
    k, g, smem, s = kernel()
    for space in ("param", "const"):
        with pytest.raises(pf.ValidationError, match="read-only"):
            k.st(k.reg(u64), k.reg(u32), space=space)


def test_register_width_must_match_the_type():
    k, g, smem, s = kernel()
    with pytest.raises(pf.ValidationError, match="cannot be used as .f32"):
        k.st(g, k.reg(u64), type=f32)
    with pytest.raises(pf.ValidationError, match="cannot be used as .u64"):
        k.ld(g, type=u64, dst=k.reg(u32))


# ---------------------------------------------------------------- atomics

def test_atomics():
    k, g, smem, s = kernel()
    a, c = k.reg(u32, "a"), k.reg(b32, "c")
    k.atom("add", g, a, dst=k.reg(u32, "old"))
    k.atom("cas", g, c, compare=k.reg(b32, "expect"), dst=k.reg(b32, "was"))
    k.atom("exch", g, a, dst=k.reg(u32, "prev"))                # integer registers use the .b32 form
    k.atom("max", s, k.reg(s32, "m"), space="shared", dst=k.reg(s32, "mx"))
    k.red("add", g, 1.0, type=f32)
    k.red("or", g, c)
    assert emitted(k) == [
        "atom.global.add.u32 %old, [%g], %a;",
        "atom.global.cas.b32 %was, [%g], %expect, %c;",
        "atom.global.exch.b32 %prev, [%g], %a;",
        "atom.shared.max.s32 %mx, [%smem_base], %m;",
        "red.global.add.f32 [%g], 0f3F800000;",
        "red.global.or.b32 [%g], %c;",
    ]
    pf.assemble(k.module())


@pytest.mark.parametrize("op, t, match", [("inc", s32, "atom.inc takes"), ("min", f32, "atom.min takes"),
                                          ("sub", u32, "must be one of")])
def test_atomic_refusals(op, t, match):
    k, g, smem, s = kernel()
    with pytest.raises(pf.ValidationError, match=match):
        k.atom(op, g, k.reg(t))
    with pytest.raises(pf.ValidationError, match="red has no .cas"):
        k.red("cas", g, k.reg(b32))


def test_ptxas_refuses_exch_on_a_typed_integer():
    assert "requires .b32" in assembler_verdict(raw_kernel("atom.global.exch.u32 %r2, [%rd0], %r3;"))


# ---------------------------------------------------------------- prefetch

def test_prefetch_forms():
    k, g, smem, s = kernel("sm_90")
    k.prefetch(g)
    k.prefetch(g, level="L1", space=None, offset=64)
    k.prefetch(g, level="L2::evict_last")
    tmap = k.param_address(k.param("tmap", b8, nbytes=128, align=64))
    k.prefetch_tensormap(tmap)
    body = emitted(k)
    assert body[:3] == ["prefetch.global.L2 [%g];", "prefetch.L1     [%g+64];", "prefetch.global.L2::evict_last [%g];"]
    assert body[-1] == f"prefetch.tensormap [{tmap}];"
    pf.assemble(k.module())
    with pytest.raises(pf.ValidationError, match="state spaces"):
        k.prefetch(s, space="shared")
    k80, g80, *_ = kernel("sm_80")
    with pytest.raises(pf.TargetError):
        k80.prefetch_tensormap(g80)
    assert assembler_verdict(raw_kernel("prefetch.tensormap [%rd0];", "sm_80")) is not None


# ---------------------------------------------------------------- ldmatrix / stmatrix

@pytest.mark.parametrize("num, trans, text", [
    (1, False, "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%m0}, [%smem_base];"),
    (2, False, "ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%m0, %m1}, [%smem_base];"),
    (4, False, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%m0, %m1, %m2, %m3}, [%smem_base];"),
    (4, True, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%m0, %m1, %m2, %m3}, [%smem_base];"),
])
def test_ldmatrix_forms(num, trans, text):
    k, g, smem, s = kernel()
    d = k.ldmatrix(s, num=num, trans=trans, dst=k.regs(b32, num, "m"))
    assert len(d) == num
    assert emitted(k) == [text]
    pf.assemble(k.module())


def test_ldmatrix_shared_cta_spelling_needs_ptx_7_8_and_generic_addresses_work():
    k, g, smem, s = kernel()
    k.ldmatrix(s, num=2, space="shared::cta")
    m = k.module()
    assert str(m.version) == "7.8"
    pf.assemble(m)
    k2, g2, smem2, s2 = kernel()
    generic = k2.cvta(k2.cvt(s2, u64), frm="shared")
    k2.ldmatrix(generic, num=1, space="generic")
    assert emitted(k2)[-1].startswith("ldmatrix.sync.aligned.m8n8.x1.b16 ")
    pf.assemble(k2.module())


def test_ldmatrix_refusals():
    k, g, smem, s = kernel()
    with pytest.raises(pf.ValidationError, match="legal: .*m8n8.x4.b16"):
        k.ldmatrix(s, num=3)
    with pytest.raises(pf.ValidationError, match="not a legal form"):
        k.ldmatrix(s, num=4, type=b8)
    with pytest.raises(pf.ValidationError, match="needs 2 registers"):
        k.ldmatrix(s, num=2, dst=k.regs(b32, 4))
    assert "Incorrect instruction type" in assembler_verdict(
        raw_kernel("ldmatrix.sync.aligned.m8n8.x1.shared.b8 {%r2}, [%r0];"))
    k90, _, _, s90 = kernel("sm_90")
    with pytest.raises(pf.TargetError):  # the 8-bit transposing forms are Blackwell-only
        k90.ldmatrix(s90, num=1, shape="m16n16", trans=True, type=b8)


def test_stmatrix_needs_sm90_and_names_the_users_line():
    k, g, smem, s = kernel("sm_80")
    with pytest.raises(pf.TargetError) as info:
        k.stmatrix(s, k.regs(b32, 4))  # <- stmatrix-on-sm80
    assert "needs sm_90 or newer; the kernel targets sm_80" in str(info.value)
    assert_located(info.value, "<- stmatrix-on-sm80", HERE)
    line = "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r0], {%r2};"
    assert "requires .target sm_90" in assembler_verdict(raw_kernel(line, "sm_80"))
    assert assembler_verdict(raw_kernel(line, "sm_90")) is None


def test_stmatrix_forms_on_sm90():
    k, g, smem, s = kernel("sm_90")
    v = k.regs(b32, 4, "v")
    k.stmatrix(s, v)
    k.stmatrix(s, v[:2], trans=True)
    assert emitted(k) == ["stmatrix.sync.aligned.m8n8.x4.shared.b16 [%smem_base], {%v0, %v1, %v2, %v3};",
                          "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%smem_base], {%v0, %v1};"]
    pf.assemble(k.module())
    with pytest.raises(pf.ValidationError, match="not a legal form"):
        k.stmatrix(s, k.regs(b32, 3))


def test_matrix_tables_describe_16_byte_rows_and_one_register_per_matrix():
    for f in LDMATRIX_FORMS + STMATRIX_FORMS:
        if f.shape == "m8n8":
            assert f.regs == f.num and f.row_bytes == 16 and f.address_lanes == 8 * f.num
            assert f.type is b16


@pytest.mark.skipif(not available_backends(), reason="needs ptxas or nvJitLink")
def test_an_atomic_with_a_memory_order_and_no_scope_is_gpu_scoped():
    """atom/red take a memory order without a scope, which is then .gpu (the PTX ISA; ptxas takes
    atom.relaxed.global.cas.b32, and nvcc 13 writes it for atomicCAS on sm_100); ld/st still need one."""
    k = pf.KernelBuilder("atom_noscope", target="sm_90")
    g = k.param_ptr("g", u32)
    k.atom("cas", g, 1, compare=2, sem="relaxed", type=u32)
    k.atom("add", g, 1, sem="acq_rel", type=u32)
    k.red("add", g, 1, sem="release", type=u32)
    k.ret()
    text = k.module().ptx
    assert "atom.relaxed.global.cas.b32" in text and "red.release.global.add.u32" in text
    assert assembler_verdict(text) is None
    assert [i.info.scope for i in k.finish().body if getattr(i, "opcode", "") in ("atom", "red")] == ["gpu"] * 3
    with pytest.raises(pf.ValidationError, match="needs a scope"):
        k2 = pf.KernelBuilder("ld_noscope", target="sm_90")
        k2.ld(k2.param_ptr("g", u32), type=u32, sem="relaxed")
