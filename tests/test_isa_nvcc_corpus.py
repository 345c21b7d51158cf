"""Forms nvcc 13 writes, found by compiling a corpus of CUDA sources with `nvcc -ptx` (sm_80 … sm_90a)
and reading each file back strictly.

Each case is the minimal PTX line for one form the reader refused although ptxas assembles it (cuda_fp16.h,
the SIMD intrinsics, mma.h and the cooperative-groups headers write them).  Every case is checked both ways:
ptxforge reads it in strict mode and ptxas assembles it, and the PTX ptxforge writes back assembles too.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.assembler import available_backends
from ptxforge.errors import TargetError
from ptxforge.isa.operands import Imm
from ptxforge.parse import ParseError

from support.ptx_text import assembler_verdict, raw_kernel

#: (what writes it, target, body lines).  The lines use raw_kernel's registers.
CASES = [
    # __vimax_s16x2_relu / __vimin_s32_relu (sm_90): the modifier after the type, as the header's asm spells it
    ("max.s16x2.relu", "sm_90", "max.s16x2.relu %r2, %r3, %r4;"),
    ("min.s32.relu", "sm_90", "min.s32.relu %r2, %r3, %r4;"),
    # __shfl_*_sync's width clamp and cooperative_groups read the predefined constant WARP_SZ
    ("WARP_SZ", "sm_80", "mov.u32 %r2, WARP_SZ;\nadd.s32 %r3, %r2, WARP_SZ;"),
    # mma.h's double-precision fragments (wmma::mma_sync on m8n8k4 f64): the rounding after the types
    ("wmma f64 .rn last", "sm_80",
     "wmma.mma.sync.aligned.row.col.m8n8k4.f64.f64.f64.f64.rn {%fd4, %fd5}, {%fd1}, {%fd2}, {%fd3, %fd3};"),
    # a kernel launching a kernel (dynamic parallelism, -rdc=true): nvcc hands the kernel's address to
    # cudaGetParameterBufferV2 / cudaLaunchDeviceV2; here the kernel takes its own address
    ("kernel address", "sm_80", "mov.u64 %rd2, raw;"),
    # tex1DGrad / tex2DGrad / tex3DGrad / tex1DLayeredGrad / texCubemapGrad on texture objects: tex.grad
    ("tex.grad.1d", "sm_80", "tex.grad.1d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1}], {%f5}, {%f6};"),
    ("tex.grad.2d", "sm_80",
     "tex.grad.2d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1, %f2}], {%f1, %f2}, {%f2, %f1};"),
    ("tex.grad.3d", "sm_80", "tex.grad.3d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1, %f2, %f3, %f3}], "
                             "{%f1, %f2, %f3, %f3}, {%f3, %f2, %f1, %f1};"),
    ("tex.grad.a1d", "sm_80", "tex.grad.a1d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%r1, %f1}], {%f5}, {%f6};"),
    ("tex.grad.acube.u32", "sm_80", "tex.grad.acube.v4.u32.f32 {%r8, %r9, %r10, %r11}, [%rd1, {%r1, %f1, %f2, %f3}], "
                                    "{%f1, %f2, %f3, %f4}, {%f5, %f6, %f7, %f4};"),
    # cuda::ptx::tensormap_replace_box_dim compiled for the Blackwell 'a' targets: ptxas takes
    # tensormap.replace there as on sm_90a (and refuses it on sm_100 without the 'a')
    ("tensormap.replace sm_100a", "sm_100a", "tensormap.replace.tile.box_dim.global.b1024.b32 [%rd0], 0, %r2;"),
    ("tensormap.replace sm_120a", "sm_120a", "tensormap.replace.tile.box_dim.global.b1024.b32 [%rd0], 0, %r2;"),
]

needs_ptxas = pytest.mark.skipif("ptxas" not in available_backends(), reason="compares with ptxas")


@pytest.mark.parametrize("what,target,body", CASES, ids=[c[0] for c in CASES])
def test_nvcc_form_reads_strictly(what, target, body):
    pf.parse(raw_kernel(body, target))


@needs_ptxas
@pytest.mark.parametrize("what,target,body", CASES, ids=[c[0] for c in CASES])
def test_nvcc_form_and_its_round_trip_assemble(what, target, body):
    text = raw_kernel(body, target)
    assert assembler_verdict(text, target) is None
    assert assembler_verdict(pf.parse(text).ptx, target) is None


def test_warp_size_constant_reads_as_32_and_runs():
    text = raw_kernel("mov.u32 %r2, WARP_SZ;\nadd.s32 %r3, %r2, WARP_SZ;\nst.global.u32 [%rd0], %r3;")
    module = pf.parse(text)
    movs = [i for i in module.kernels[0].instructions if getattr(i, "mnemonic", "") == "mov.u32"
            and any(isinstance(o, Imm) for o in i.operands)]
    assert [o.value for o in movs[-1].operands if isinstance(o, Imm)] == [32]
    out = np.zeros(1, np.uint32)
    interp.run(module, "raw", grid=1, block=1, args=[out])
    assert out[0] == 64


def test_warp_size_is_not_taken_where_a_register_must_stand():
    with pytest.raises(ParseError):
        pf.parse(raw_kernel("mov.u32 WARP_SZ, %r2;"))


def test_relu_after_the_type_means_the_same_as_before_it():
    a = pf.parse(raw_kernel("max.s16x2.relu %r2, %r3, %r4;", "sm_90"))
    b = pf.parse(raw_kernel("max.relu.s16x2 %r2, %r3, %r4;", "sm_90"))
    assert a.ptx == b.ptx


def test_relu_after_the_type_still_needs_sm90():
    with pytest.raises(TargetError, match="sm_90"):
        pf.parse(raw_kernel("max.s16x2.relu %r2, %r3, %r4;", "sm_80"))


def test_wmma_rounding_after_the_types_is_only_for_f64():
    with pytest.raises(ParseError):
        pf.parse(raw_kernel("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32.rn {%f0, %f1, %f2, %f3, %f4, %f5, "
                            "%f6, %f7}, {%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, {%r8, %r9, %r10, %r11, %r12, %r13, "
                            "%r14, %r15}, {%f8, %f9, %f10, %f11, %f12, %f13, %f14, %f15};"))


@needs_ptxas
def test_tensormap_replace_is_still_refused_without_the_arch_suffix():
    text = raw_kernel("tensormap.replace.tile.box_dim.global.b1024.b32 [%rd0], 0, %r2;", "sm_100")
    assert assembler_verdict(text, "sm_100") is not None
    with pytest.raises(TargetError, match="sm_90a or sm_100a or sm_120a"):
        pf.parse(text)


TWO_KERNELS = """\
.version 8.0
.target sm_80
.address_size 64

.visible .entry child(.param .u64 p)
{
    ret;
}

.visible .entry parent(.param .u64 p)
{
    .reg .b64 %rd<4>;
    BODY
    ret;
}
"""


@needs_ptxas
def test_a_kernel_takes_the_address_of_a_kernel_defined_before_it():
    text = TWO_KERNELS.replace("BODY", "mov.u64 %rd1, child;\n    ld.param.u64 %rd2, [p];\n    st.u64 [%rd2], %rd1;")
    assert assembler_verdict(text, "sm_80") is None
    module = pf.parse(text)
    assert "mov.u64 %rd1, child;" in " ".join(module.ptx.split())
    assert assembler_verdict(module.ptx, "sm_80") is None


@needs_ptxas
def test_a_kernel_is_still_no_call_target():
    text = TWO_KERNELS.replace("BODY", "call child, ();")
    assert assembler_verdict(text, "sm_80") is not None
    with pytest.raises(ParseError, match="child"):
        pf.parse(text)


@needs_ptxas
@pytest.mark.parametrize("line", [
    "tex.grad.2d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1, %f2}], {%f1}, {%f2};",  # 2d: two lanes
    "tex.grad.1d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1}], %f5, %f6;",  # 1d: a one-lane vector
    "tex.grad.2d.v4.f32.f32 {%f8, %f9, %f10, %f11}, [%rd1, {%f1, %f2}], {%f1, %f2};",  # dPdy missing
])
def test_tex_grad_gradients_are_refused_as_ptxas_refuses_them(line):
    text = raw_kernel(line)
    assert assembler_verdict(text) is not None
    with pytest.raises(ParseError):
        pf.parse(text)


def test_tex_builder_takes_gradients_and_not_with_a_level():
    k = pf.KernelBuilder("k", target="sm_80")
    h = k.load_param(k.param("h", "u64"))
    x, y = k.reg("f32"), k.reg("f32")
    k.tex(h, [x, y], grad=([x, y], [y, x]))
    line = [i.render() for i in k.finish().instructions if "tex." in i.render()][0]
    assert line.split()[0] == "tex.grad.2d.v4.f32.f32"
    assert line.rstrip().endswith(f"{{%{x.name}, %{y.name}}}, {{%{y.name}, %{x.name}}};"), line
    with pytest.raises(pf.ValidationError, match="not both"):
        k.tex(h, [x, y], lod=x, grad=([x, y], [y, x]))
    with pytest.raises(pf.ValidationError, match="2 .f32 lane"):
        k.tex(h, [x, y], grad=([x], [y]))


@needs_ptxas
@pytest.mark.parametrize("line,target", [
    ("mov.u64 %rd1, WARP_SZ;", "sm_80"),
    ("setp.lt.u32 %p1, %r1, WARP_SZ;", "sm_80"),
    ("rem.u32 %r1, %r2, WARP_SZ;", "sm_80"),
    ("fma.rn.f16.relu %h1, %h2, %h3, %h4;", "sm_90"),  # the mode after the type on a float, too
    ("fma.rn.bf16x2.relu %r1, %r2, %r3, %r4;", "sm_90"),
])
def test_more_spellings_both_take(line, target):
    text = raw_kernel(line, target)
    assert assembler_verdict(text, target) is None
    assert assembler_verdict(pf.parse(text).ptx, target) is None


@needs_ptxas
@pytest.mark.parametrize("line,target", [
    ("mov.f32 %f1, WARP_SZ;", "sm_80"),  # an integer constant, not a float
    ("ld.global.u32 %r1, [WARP_SZ];", "sm_80"),  # no address
    ("max.u32.relu %r1, %r2, %r3;", "sm_90"),  # .relu only on .s32 and .s16x2, after the type as before it
    ("max.bf16.relu %h1, %h2, %h3;", "sm_90"),
])
def test_spellings_both_refuse(line, target):
    text = raw_kernel(line, target)
    assert assembler_verdict(text, target) is not None
    with pytest.raises(pf.ValidationError):
        pf.parse(text)
