"""Offline assembly: backends, resource reports, mapped diagnostics, disassembly."""

import os

import pytest

import ptxforge as pf
from ptxforge import Addr, f32, u32
from ptxforge.assembler import (available_backends, backend_ptx_cap, diagnostics, disassembler, parse_resources,
                                sass_opcodes)
from ptxforge.isa.instruction import make
from ptxforge.isa.operands import Imm
from ptxforge.testing.kernels import saxpy
from support.located import marked_line

HERE = __file__
BACKENDS = available_backends()


def test_at_least_one_backend_is_available_here():
    assert BACKENDS, "neither nvJitLink nor ptxas is available"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"])
def test_assembles_for_every_supported_target(backend, arch):
    r = pf.assemble(saxpy(arch), backend=backend)
    assert r.arch == arch and r.backend == backend
    assert r.cubin[:4] == b"\x7fELF"
    res = r.resources("saxpy")
    assert 0 < res.registers < 32 and res.spills == 0 and res.shared == 0
    assert "saxpy" in r.report() and "registers" in r.report()


def test_backends_agree():
    if len(BACKENDS) < 2:
        pytest.skip("only one backend here")
    a, b = (pf.assemble(saxpy(), backend=be).resources("saxpy") for be in BACKENDS)
    assert (a.registers, a.shared, a.spills) == (b.registers, b.shared, b.spills)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resources_report_shared_memory_barriers_and_spills(backend):
    k = pf.KernelBuilder("heavy", target="sm_80", maxntid=256, maxnreg=24)
    g = k.param_ptr("g", f32)
    k.shared("tile", 3072, align=128)
    vals = [k.ld(g, type=f32, offset=4 * i) for i in range(64)]      # all live at once
    acc = k.mov(0.0, type=f32)
    k.bar_sync(0)
    for v in vals:
        k.add(acc, v, dst=acc)
    for i, v in enumerate(vals):
        k.st(g, k.mul(v, acc), offset=4 * (64 + i))
    r = pf.assemble(k.module(), backend=backend)
    res = r.resources()
    assert res.shared == 3072 and res.barriers == 1
    assert res.registers <= 24
    assert res.spill_stores > 0 and res.spill_loads > 0 and res.spills == res.spill_stores + res.spill_loads


def _bad_module():
    k = pf.KernelBuilder("bad", target="sm_80")
    g = k.param_ptr("g", f32)
    s = k.shared_base(k.shared("s", 64))
    # bypass the validator on purpose: a 2-byte cp.async written as a raw instruction
    k.emit(make("cp.async", ("cp.async", "ca", "shared", "global"), (Addr(s), Addr(g), Imm(2))))  # <- raw-2-bytes
    return k.module()


@pytest.mark.parametrize("backend", BACKENDS)
def test_assembler_errors_quote_ptxas_the_ptx_line_and_the_python_line(backend):
    m = _bad_module()
    with pytest.raises(pf.AssemblyError) as info:
        pf.assemble(m, backend=backend)
    msg = str(info.value)
    ptx_line = next(i for i, ln in enumerate(str(m).splitlines(), 1) if "cp.async" in ln)
    assert f"{backend} rejected the PTX for sm_80" in msg
    assert "unexpected value '2', expected to be 4 or 8 or 16" in msg
    assert f"PTX line {ptx_line}: cp.async.ca.shared.global [%s_base], [%g], 2;" in msg
    assert f"{os.path.basename(HERE)}:{marked_line(HERE, '<- raw-2-bytes')}" in msg
    assert info.value.diagnostics[0][:2] == (ptx_line, "error")
    assert info.value.log


def test_syntax_errors_are_mapped_too():
    k = pf.KernelBuilder("bad", target="sm_80")
    x = k.reg(u32, "x")
    k.emit(make("frob", ("frobnicate", "u32"), (x, x)))
    with pytest.raises(pf.AssemblyError) as info:
        pf.assemble(k.module())
    assert "Not a name of any known instruction: 'frobnicate'" in str(info.value)
    assert "PTX line 12: frobnicate.u32  %x, %x;" in str(info.value)
    assert "emitted at" in str(info.value)
    assert "Ptx assembly aborted" not in str(info.value)


def test_ptx_text_errors_quote_the_line():
    ptx = str(saxpy()).replace("fma.rn.f32", "fma.f32")
    line = next(i for i, ln in enumerate(ptx.splitlines(), 1) if "fma.f32" in ln)
    with pytest.raises(pf.AssemblyError) as info:
        pf.assemble(ptx)
    assert f"PTX line {line}: fma.f32" in str(info.value)
    assert "Rounding modifier required" in str(info.value)
    with pytest.raises(pf.AssemblyError, match="no .target line: PTX needs one after .version"):
        pf.assemble(ptx.replace(".target sm_80\n", ""))
    with pytest.raises(pf.AssemblyError, match="no .target line: .*arch='sm_90' names the machine code"):
        pf.assemble(ptx.replace(".target sm_80\n", ""), "sm_90")  # (ptxas: "Missing .target directive")


@pytest.mark.parametrize("make,got", [
    (lambda: None, "got None$"), (lambda: 3, "got int$"), (lambda: [str(saxpy())], "got list$"),
    (lambda: str(saxpy()).encode(), r"got bytes: decode it first, e\.g\. data\.decode\('utf-8'\)"),
    (lambda: saxpy().kernels[0], r"got Kernel: put it in a Module first \(pf\.Module\(\[kernel\]\)\)"),
    (lambda: pf.KernelBuilder("k", target="sm_80"), r"got KernelBuilder: finish it into a Module first \(k\.module"),
])
def test_what_is_neither_a_module_nor_ptx_text_is_refused_by_name(make, got):
    with pytest.raises(pf.AssemblyError, match=r"^assemble\(\) takes a Module or PTX text \(a str\), " + got):
        pf.assemble(make(), "sm_80")


def test_backend_choice():
    with pytest.raises(pf.ToolchainMissing, match="unknown assembler backend"):
        pf.assemble(saxpy(), backend="nvcc")
    for be in BACKENDS:
        assert backend_ptx_cap(be) >= pf.PtxVersion(8, 0)


def test_diagnostics_and_resources_from_a_log():
    log = "\n".join([
        "ptxas /tmp/x.ptx, line 12; error   : Arguments mismatch for instruction 'mov'",
        "ptxas application ptx input, line 30; warning : Unresolved hint",
        "ptxas warning : Program uses 32-bit address on line '14' which is conflicting with .address_size 64",
        "ptxas fatal   : Ptx assembly aborted due to errors",
        "ptxas info    : Compiling entry function 'k1' for 'sm_90'",
        "ptxas info    : Function properties for k1",
        "    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads",
        "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 380 bytes cmem[0]",
        "ptxas info    : Compiling entry function 'k2' for 'sm_90'",
        "ptxas info    : Used 8 registers, 368 bytes cmem[0]",
    ])
    assert diagnostics(log) == [
        (12, "error", "Arguments mismatch for instruction 'mov'"),
        (14, "warning", "Program uses 32-bit address on line '14' which is conflicting with .address_size 64"),
        (30, "warning", "Unresolved hint"),
    ]
    res = parse_resources(log)
    assert (res["k1"].registers, res["k1"].barriers, res["k1"].shared, res["k1"].cmem) == (40, 1, 4096, 380)
    assert (res["k1"].stack, res["k1"].spill_stores, res["k1"].spill_loads) == (16, 8, 12)
    assert (res["k2"].registers, res["k2"].shared, res["k2"].spills) == (8, 0, 0)


def test_resources_from_a_ptxas_13_log_with_a_cumulative_stack_clause():
    # ptxas 13.0 names the cumulative stack size between the barriers and the smem clause
    log = "\n".join([
        "ptxas info    : Compiling entry function 'heavy' for 'sm_80'",
        "ptxas info    : Function properties for heavy",
        "    560 bytes stack frame, 604 bytes spill stores, 780 bytes spill loads",
        "ptxas info    : Used 24 registers, used 1 barriers, 560 bytes cumulative stack size, 3072 bytes smem, "
        "360 bytes cmem[0]",
    ])
    r = parse_resources(log)["heavy"]
    assert (r.registers, r.barriers, r.shared, r.cmem, r.stack) == (24, 1, 3072, 360, 560)


def test_sass_opcodes_of_a_kernel():
    if disassembler() is None:
        pytest.skip("no disassembler (nvdisasm / cuobjdump) here")
    r = pf.assemble(saxpy())
    ops = r.sass_opcodes("saxpy")
    assert ops["EXIT"] >= 1 and any(op.startswith("FFMA") for op in ops)
    assert any(op.startswith("LDG") for op in ops) and any(op.startswith("STG") for op in ops)
    assert r.sass_opcodes() == ops
    assert sass_opcodes(r.sass(), "no_such_kernel") == {}


def test_resources_from_an_nvjitlink_summary_alone():
    # some nvJitLink builds print only their own summary, without ptxas's lines
    log = "\n".join([
        "info    : 0 bytes gmem",
        "info    : Function properties for 'k1':",
        # 5120 = 4096 declared + the 1 KB reserved per block (ptxas says 4096 for the same kernel)
        "info    : used 40 registers, used 1 barriers, 16 stack, 5120 bytes smem, 380 bytes cmem[0], 48 bytes lmem",
        "info    : Function properties for 'k2':",
        "info    : used 8 registers, used 0 barriers, 0 stack, 0 bytes smem, 368 bytes cmem[0], 0 bytes lmem",
    ])
    res = parse_resources(log)
    assert (res["k1"].registers, res["k1"].barriers, res["k1"].stack, res["k1"].shared) == (40, 1, 16, 4096)
    assert res["k1"].spills > 0  # local memory beyond the stack frame means spilled registers
    assert (res["k2"].registers, res["k2"].spills) == (8, 0)


@pytest.mark.skipif("nvjitlink" not in BACKENDS, reason="nvJitLink is not installed here (pip install nvidia-nvjitlink)")
def test_the_two_log_formats_agree_on_a_real_kernel():
    # both formats are in nvJitLink's verbose log; each parser alone must give the same figures
    from ptxforge.assembler import _parse_link_summary, _parse_ptxas_lines
    k = pf.KernelBuilder("uses_smem", target="sm_90", reqntid=64)
    tile = k.shared("tile", 4104, align=16)
    base = k.shared_base(tile)
    k.st(k.add(base, k.shl(k.tid(), 2)), k.tid(), space="shared")
    r = pf.assemble(k.module(), backend="nvjitlink")
    if "info    : used" not in r.log:
        pytest.skip("this nvJitLink prints no summary of its own")
    a, b = _parse_ptxas_lines(r.log), _parse_link_summary(r.log)
    if not a:
        pytest.skip("this nvJitLink prints only its summary")
    # barrier and constant-bank counts are reckoned differently by the two; the sizes must agree
    pick = lambda r: (r.registers, r.shared, r.stack, r.spills)  # noqa: E731
    assert pick(a["uses_smem"]) == pick(b["uses_smem"])
    assert a["uses_smem"].shared == 4104
