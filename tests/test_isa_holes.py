"""Forms ptxforge once accepted and ptxas rejects: each is refused now, at the caller's line, and
ptxas is shown to reject the PTX that would have been emitted (one assembler run per target for
the forms whose errors name their line)."""

import os

import pytest

import ptxforge as pf
from ptxforge.isa import types as T
from ptxforge.assembler import available_backends
from ptxforge.isa.operands import Addr
from tests.support.ptx_text import assembler_verdict, raw_kernel

pytestmark = pytest.mark.skipif(not available_backends(), reason="needs ptxas or nvJitLink")

EXTRA_DECLS = "    .reg .u32 %u<8>;\n    .reg .u16 %us<4>;\n    .shared .align 4 .b8 small[64];"


def _k(target="sm_80"):
    k = pf.KernelBuilder("hole", target=target)
    return k, k.param_ptr("g")


def _mma_regs(k, a_t, n_a, b_n, c_t, n_c):
    return [k.reg(a_t) for _ in range(n_a)], [k.reg(T.b32) for _ in range(b_n)], [k.reg(c_t) for _ in range(n_c)]


def mma_a_in_f32(k, g):
    a, b, c = _mma_regs(k, T.f32, 4, 2, T.f32, 4)
    k.mma(a, b, c, shape="m16n8k16", a_type="f16", acc="f32")


def mma_a_in_u32(k, g):
    a, b, c = _mma_regs(k, T.u32, 4, 2, T.f32, 4)
    k.mma(a, b, c, shape="m16n8k16", a_type="f16", acc="f32")


def mma_f16_d_in_f32(k, g):
    a, b, c = _mma_regs(k, T.b32, 4, 2, T.b32, 2)
    k.mma(a, b, c, shape="m16n8k16", a_type="f16", acc="f16", dst=[k.reg(T.f32), k.reg(T.f32)])


def mma_f16_c_immediates(k, g):
    a, b, _ = _mma_regs(k, T.b32, 4, 2, T.b32, 2)
    k.mma(a, b, [0, 0], shape="m16n8k16", a_type="f16", acc="f16")


def mma_tf32_in_f32(k, g):
    a, b, c = _mma_regs(k, T.f32, 4, 2, T.f32, 4)
    k.mma(a, [k.reg(T.f32), k.reg(T.f32)], c, shape="m16n8k8", a_type="tf32", acc="f32")


# (builder call, PTX lines ptxas must refuse on their own lines)
LINE_HOLES = [
    (mma_a_in_f32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, "
                   "{%f4, %f5, %f6, %f7}, {%r2, %r3}, {%f0, %f1, %f2, %f3};"),
    (mma_a_in_u32, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, "
                   "{%u0, %u1, %u2, %u3}, {%r2, %r3}, {%f0, %f1, %f2, %f3};"),
    (mma_f16_d_in_f32, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%f0, %f1}, "
                       "{%r2, %r3, %r4, %r5}, {%r6, %r7}, {%r2, %r3};"),
    (mma_f16_c_immediates, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%r8, %r9}, "
                           "{%r2, %r3, %r4, %r5}, {%r6, %r7}, {0, 0};"),
    (mma_tf32_in_f32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f0, %f1, %f2, %f3}, "
                      "{%f4, %f5, %f6, %f7}, {%f8, %f9}, {%f0, %f1, %f2, %f3};"),
    (lambda k, g: k.ld(g, type=T.u32, cop="ca", hints=("L1::evict_last",)),
     "ld.global.ca.L1::evict_last.u32 %r2, [%rd0];"),
    (lambda k, g: k.st(g, k.reg(T.u32), cop="wb", hints=("L1::no_allocate",)),
     "st.global.wb.L1::no_allocate.u32 [%rd0], %r2;"),
    (lambda k, g: k.ld(g, type=T.u32, hints=("L2::64B", "L2::128B")),
     "ld.global.L2::64B.L2::128B.u32 %r2, [%rd0];"),
    (lambda k, g: k.ld(g, type=T.u32, hints=("L1::evict_last", "L1::evict_first")),
     "ld.global.L1::evict_last.L1::evict_first.u32 %r2, [%rd0];"),
    (lambda k, g: k.ld(g, type=T.u32, nc=True, cop="cv"), "ld.global.nc.cv.u32 %r2, [%rd0];"),
    (lambda k, g: k.ld(g, type=T.u32, nc=True, cop="lu"), "ld.global.nc.lu.u32 %r2, [%rd0];"),
    (lambda k, g: k.redux("and", k.reg(T.f32)), "redux.sync.and.b32 %f0, %f1, 0xffffffff;"),
    (lambda k, g: k.redux("xor", k.reg(T.u32), dst=k.reg(T.f32)), "redux.sync.xor.b32 %f0, %u1, 0xffffffff;"),
    (lambda k, g: k.activemask(dst=k.reg(T.u64)), "activemask.b32 %rd1;"),
    (lambda k, g: k.cvt(k.reg(T.u16), T.f32, frm=T.bf16), "cvt.f32.bf16 %f0, %us0;"),
    (lambda k, g: k.cvt(k.reg(T.f32), T.bf16, dst=k.reg(T.u16)), "cvt.rn.bf16.f32 %us1, %f0;"),
    (lambda k, g: k.ld(g, type=T.b32, vec=2, dst=[k.reg(T.f32), k.reg(T.u32)]),
     "ld.global.v2.b32 {%f0, %u1}, [%rd0];"),
    (lambda k, g: k.ld(Addr(1024), type=T.u32, space="shared"), "ld.shared.u32 %r2, [1024];"),
    (lambda k, g: k.ld(Addr(1024), type=T.u32), "ld.u32 %r2, [1024];"),
    (lambda k, g: k.bfe(k.reg(T.u32), 256, 8), "bfe.u32 %r2, %r3, 256, 8;"),
    (lambda k, g: k.bfe(k.reg(T.u32), 8, 256), "bfe.u32 %r2, %r3, 8, 256;"),
    (lambda k, g: k.bfi(k.reg(T.b32), k.reg(T.b32), 256, 8), "bfi.b32 %r2, %r3, %r4, 256, 8;"),
]


def _where(fn):
    return fn.__code__.co_firstlineno


@pytest.mark.parametrize("fn", [fn for fn, _ in LINE_HOLES], ids=lambda f: f.__name__ if f.__name__ != "<lambda>"
                         else f"line{_where(f)}")
def test_hole_is_refused_at_the_callers_line(fn):
    k, g = _k()
    with pytest.raises(pf.ValidationError) as info:
        fn(k, g)
    err = info.value
    assert err.loc is not None and os.path.samefile(err.loc.filename, __file__), err
    # the blamed line is inside the builder call of this case (a lambda's line or a helper's body)
    start = _where(fn)
    assert start <= err.loc.lineno <= start + 4, (err.loc, start)
    assert f"test_isa_holes.py:{err.loc.lineno}" in str(err)


def _refused_lines(ptx: str):
    try:
        pf.assemble(ptx, backend="ptxas" if "ptxas" in available_backends() else "auto")
    except pf.AssemblyError as e:
        return {line for line, sev, _ in e.diagnostics if sev != "warning"}, e.log
    return set(), ""


def test_ptxas_refuses_every_hole_on_its_line():
    """One module with every hole's PTX: ptxas names each of those lines in an error."""
    body = "\n".join(p for _, p in LINE_HOLES)
    ptx = raw_kernel(body, decls=EXTRA_DECLS)
    text = ptx.splitlines()
    want = {}
    for _, p in LINE_HOLES:
        want[p] = next(i for i, line in enumerate(text, 1) if line.strip() == p.strip())
    got, log = _refused_lines(ptx)
    missed = [p for p, line in want.items() if line not in got]
    assert not missed, (missed, log)


def test_mma_float_accumulator_immediates_are_spelled_as_floats():
    """ptxas refuses `{0, 0, 0, 0}` as an f32 C fragment and takes `0f00000000`: the builder
    writes the float spelling, and the kernel assembles."""
    k, _ = _k()
    a, b, _ = _mma_regs(k, T.b32, 4, 2, T.f32, 4)
    k.mma(a, b, [0, 0, 0, 0], shape="m16n8k16", a_type="f16", acc="f32")
    assert "{0f00000000, 0f00000000, 0f00000000, 0f00000000}" in k.module().ptx
    pf.assemble(k.module())
    assert assembler_verdict(raw_kernel(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0, %f1, %f2, %f3}, "
        "{%r2, %r3, %r4, %r5}, {%r6, %r7}, {0, 0, 0, 0};")) is not None


@pytest.mark.parametrize("call,line", [
    (lambda k, g: k.cvta(k.reg(T.u32), to="shared"), "cvta.to.shared.u32 %u1, %u2;"),
    (lambda k, g: k.cvta(k.reg(T.u32), frm="shared"), "cvta.shared.u32 %u1, %u2;"),
])
def test_cvta_on_32_bit_registers_is_refused(call, line):
    """ptxas aborts the whole module (32-bit addressing) with no line to map back."""
    k, g = _k()
    with pytest.raises(pf.ValidationError, match="cvta takes .u64 registers") as info:
        call(k, g)
    assert info.value.loc is not None and os.path.samefile(info.value.loc.filename, __file__)
    assert assembler_verdict(raw_kernel(line, decls=EXTRA_DECLS)) is not None


def test_b128_registers_and_parameters_raise_the_version():
    k = pf.KernelBuilder("wide", target="sm_80")
    k.ld(k.param_ptr("g"), type=T.b128)
    assert str(k.module().version) == "8.3"
    pf.assemble(k.module())
    with pytest.raises(pf.TargetError, match="8.3"):
        pf.Module([k], version="8.0")
    k = pf.KernelBuilder("widep", target="sm_80")
    k.param("q", T.b128)
    assert str(k.module().version) == "8.3"
    pf.assemble(k.module())
    assert assembler_verdict(raw_kernel("", version="8.0", decls="    .reg .b128 %q;")) is not None
    assert assembler_verdict(raw_kernel("", version="8.3", decls="    .reg .b128 %q;")) is None


def _entry(params="", directives="", version="8.0", target="sm_80"):
    return (f".version {version}\n.target {target}\n.address_size 64\n\n.visible .entry e({params})\n"
            f"{directives}\n{{\n    ret;\n}}\n")


def test_kernel_parameter_space():
    k = pf.KernelBuilder("p", target="sm_80")
    for t in (T.bf16, T.f16x2, T.bf16x2):  # ptxas parses none of these as a parameter type
        assert assembler_verdict(_entry(f".param .{t.name} b")) is not None
        k.load_param(k.param(f"h_{t.name}", t))
    text = k.module().ptx
    assert ".param .b16 h_bf16" in text and ".param .b32 h_f16x2" in text and ".param .b32 h_bf16x2" in text
    pf.assemble(k.module())
    k = pf.KernelBuilder("p2", target="sm_80")
    k.param("big", T.b8, nbytes=4360, align=8)
    assert str(k.module().version) == "8.1"  # 4352 bytes is the limit before PTX ISA 8.1
    pf.assemble(k.module())
    assert assembler_verdict(_entry(".param .align 8 .b8 big[4360]")) is not None
    k = pf.KernelBuilder("q", target="sm_80")
    k.param("a", T.b8, nbytes=32760, align=4)
    with pytest.raises(pf.ValidationError, match="at most 32764"):
        k.param("b", T.u64)
    assert assembler_verdict(_entry(".param .align 4 .b8 big[32768]", version="8.1")) is not None


@pytest.mark.parametrize("kwargs,directive", [
    (dict(maxntid=128, minnctapersm=-1), ".maxntid 128\n.minnctapersm -1"),
    (dict(maxntid=128, minnctapersm=0), ".maxntid 128\n.minnctapersm 0"),
])
def test_minnctapersm_must_be_positive(kwargs, directive):
    with pytest.raises(pf.ValidationError, match="minnctapersm") as info:
        pf.KernelBuilder("m", **kwargs)
    assert os.path.samefile(info.value.loc.filename, __file__)
    assert assembler_verdict(_entry(directives=directive)) is not None


@pytest.mark.parametrize("bound", [128.7, (128.5, 1), "128", (64, 2.0)])
def test_launch_bounds_take_integers(bound):
    with pytest.raises(pf.ValidationError, match="takes integers") as info:
        pf.KernelBuilder("b", maxntid=bound)
    assert os.path.samefile(info.value.loc.filename, __file__)


def test_numpy_integers_are_integers():
    np = pytest.importorskip("numpy")
    k = pf.KernelBuilder("n", maxntid=np.int64(128), reqntid=None, minnctapersm=np.int32(2))
    x = k.reg(T.u32)
    k.add(x, np.int64(5), dst=x)
    k.shl(x, np.uint8(3), dst=x)
    k.add(k.reg(T.f32), np.float32(0.5))
    text = " ".join(k.module().ptx.split())
    assert ".maxntid 128, 1, 1" in text and "add.u32 %r0, %r0, 5;" in text and "shl.b32 %r0, %r0, 3;" in text
    pf.assemble(k.module())


def test_float_immediates_beyond_f32_are_refused_not_crashing_the_renderer():
    k, _ = _k()
    with pytest.raises(pf.ValidationError, match=r"1e\+300 does not fit .f32") as info:
        k.add(k.reg(T.f32), 1e300)
    assert os.path.samefile(info.value.loc.filename, __file__)
    k.add(k.reg(T.f64), 1e300)  # an f64 immediate holds it
    assert "0d7E37E43C8800759C" in k.module().ptx
    with pytest.raises(pf.ValidationError, match="does not fit .f32"):
        k.mov(pf.Imm(1e39, T.f32), type=T.f32)


@pytest.mark.parametrize("call", [
    lambda k: k.section("one\ntwo"),
    lambda k: k.note("path", "a\nb"),
    lambda k: k.note("a\rb", 1),
])
def test_line_breaks_in_sections_and_notes_are_refused(call):
    k, _ = _k()
    with pytest.raises(pf.ValidationError, match="line break") as info:
        call(k)
    assert os.path.samefile(info.value.loc.filename, __file__)
    with k.section("one line"):
        k.note("key", "value")
    assert "// ---- one line" in k.module().ptx


def test_raw_is_verbatim_marked_and_refused_by_the_interpreter():
    from ptxforge.interp.program import Program

    k = pf.KernelBuilder("raw", target="sm_80")
    x = k.reg(T.u32, "x")
    k.raw("mov.u32 %x, %envreg3;")
    k.raw("add.u32 %x, %x, 1", pred=k.setp("eq", x, 0))
    m = k.module()
    assert "    mov.u32 %x, %envreg3;\n" in m.ptx and "@%p0 add.u32 %x, %x, 1;" in m.ptx
    assert ".reg .u32 %x;" in m.ptx  # named only by raw text: still declared
    marked = [line for line in m.listing().splitlines() if "[opaque: raw PTX" in line]
    assert len(marked) == 2 and "test_isa_holes.py" in marked[0]
    pf.assemble(m)
    refusals = [op.fn.unsupported for op in Program(m.kernels[0]).ops if getattr(op.fn, "unsupported", None)]
    assert refusals and "raw PTX from k.raw()" in str(refusals[0])


@pytest.mark.parametrize("text", ["a; b", "mov.u32 %x, 1;\nret", "@%p0 ret", ".reg .u32 %y", "", "ret // no"])
def test_raw_takes_one_statement(text):
    k = pf.KernelBuilder("raw1", target="sm_80")
    with pytest.raises(pf.ValidationError, match="raw") as info:
        k.raw(text)
    assert os.path.samefile(info.value.loc.filename, __file__)


def test_bar_red_constructor_is_refused_not_emitted_incomplete():
    from ptxforge.isa.sync import bar
    with pytest.raises(pf.ValidationError, match="bar.red also needs a reduction"):
        bar("red", 0)


def test_assembling_for_another_arch_rechecks_the_module():
    k = pf.KernelBuilder("s4", target="sm_80")
    k.mma([k.reg(T.b32) for _ in range(2)], [k.reg(T.b32)], [k.reg(T.s32) for _ in range(4)],
          shape="m16n8k32", a_type="s4", acc="s32")  # <- s4-mma
    with pytest.warns(pf.EmulatedInstructionWarning) as record:
        pf.assemble(k.module(), "sm_90a")
    assert any(os.path.samefile(w.filename, __file__) for w in record)
    k = pf.KernelBuilder("elect", target="sm_90")
    k.elect_sync()
    with pytest.raises(pf.TargetError, match="needs sm_90") as info:
        pf.assemble(k.module(), "sm_80")
    assert info.value.loc is not None and os.path.samefile(info.value.loc.filename, __file__)
    k = pf.KernelBuilder("rank", target="sm_90")
    k.sreg("cluster_ctarank")
    with pytest.raises(pf.TargetError, match="cluster_ctarank needs sm_90"):
        pf.assemble(k.module(), "sm_80")


@pytest.mark.parametrize("call", [
    lambda k, g, sb: k.cp_async(g, g, 16),
    lambda k, g, sb: k.cp_async(sb, k.add(g, 16), 16) or k.cp_async(k.add(g, 32), g, 16),
    lambda k, g, sb: k.ldmatrix(k.add(g, 128)),
    lambda k, g, sb: k.ld(g, type=T.u32, space="shared"),
    lambda k, g, sb: k.st(k.cvta(g, frm="global"), k.reg(T.u32), space="shared"),
    lambda k, g, sb: k.ld(k.cvta(k.cvta(g, frm="global"), to="shared"), type=T.u32, space="global"),
])
def test_an_address_of_one_space_is_refused_in_another(call):
    k = pf.KernelBuilder("spaces", target="sm_80")
    g = k.param_ptr("g")
    sb = k.shared_base(k.shared("tile", 256))
    with pytest.raises(pf.ValidationError, match="which holds a") as info:
        call(k, g, sb)
    assert os.path.samefile(info.value.loc.filename, __file__)


def test_addresses_keep_their_space_through_offsets_and_lose_it_when_overwritten():
    k = pf.KernelBuilder("spaces_ok", target="sm_80")
    g = k.param_ptr("g")
    sb = k.shared_base(k.shared("tile", 256))
    k.cp_async(k.add(sb, 16), k.add(g, 64), 16)
    k.ldmatrix(k.add(sb, 32))
    k.ld(k.add(g, 8), type=T.u32)
    p = k.reg(T.u64)
    k.mov(g, dst=p)
    k.ld(k.cvta(p, frm="global"), type=T.u32)  # generic: fine
    k.cvt(k.tid(), T.u64, dst=p)  # overwritten with a number: no longer known to be global
    k.ld(p, type=T.u32, space="shared")
    pf.assemble(k.module())


def test_half_compares_take_no_immediates():
    k = pf.KernelBuilder("halfimm", target="sm_90")
    with pytest.raises(pf.ValidationError, match="immediate"):
        k.setp("lt", k.reg(T.f16), 1.0)
    assert assembler_verdict(raw_kernel("setp.lt.f16 %p1, %h1, 0f3F800000;", target="sm_90")) is not None


def test_pure_constructor_and_render_errors_name_the_calling_line():
    from ptxforge.isa.memory import ld
    from ptxforge.isa.targets import V
    from ptxforge.isa.tensor import mma_form
    with pytest.raises(pf.ValidationError) as info:
        ld(T.u32, None, Addr(16), "shared")
    assert os.path.samefile(info.value.loc.filename, __file__) and "test_isa_holes.py:" in str(info.value)
    with pytest.raises(pf.ValidationError) as info:
        mma_form("m16n8k99", "s8")
    assert os.path.samefile(info.value.loc.filename, __file__)
    k = pf.KernelBuilder("ver", target="sm_90")
    k.elect_sync()
    m = k.module()
    with pytest.raises(pf.TargetError) as info:
        m.render(cap=V("7.8"))  # elect.sync needs 8.0
    assert os.path.samefile(info.value.loc.filename, __file__)
