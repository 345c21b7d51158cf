"""The assembler at its edges: a target the PTX cannot be assembled for is refused before any tool runs, an
option that makes ptxas write no cubin is a ToolchainError, and timeouts take infinity as no limit."""

import pytest

import ptxforge as pf
from ptxforge import assembler as A
from ptxforge import f32, u32
from ptxforge.errors import AssemblyError, TargetError, ToolchainError


def _copy_kernel(target):
    """out[i] = in[i]: nothing in it needs a newer GPU than sm_80."""
    k = pf.KernelBuilder("copy", target=target)
    out, inp = k.param_ptr("out", f32), k.param_ptr("inp", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(out, off), k.ld(k.add(inp, off), type=f32))
    return k.module()


@pytest.fixture
def no_tool(monkeypatch):
    """Running a tool fails the test: the refusal must come first."""
    def refuse(*a, **kw):
        raise AssertionError("an assembler ran")
    monkeypatch.setattr(A, "_run_ptxas", refuse)
    monkeypatch.setattr(A, "_run_nvjitlink", refuse)
    monkeypatch.setattr(A, "available_backends", lambda: ("ptxas", "nvjitlink"))


@pytest.mark.parametrize("backend", ["ptxas", "nvjitlink"])
def test_a_module_is_not_assembled_for_an_older_gpu_than_it_targets(no_tool, backend):
    with pytest.raises(TargetError, match="the module targets sm_90; assemble it for sm_90 or newer, or rebuild "
                                          "it for sm_80 \\(KernelBuilder\\(..., target='sm_80'\\)"):
        pf.assemble(_copy_kernel("sm_90"), "sm_80", backend=backend)


def test_arch_specific_ptx_is_assembled_only_for_its_own_target(no_tool):
    with pytest.raises(TargetError, match="the module targets sm_90a, whose arch-specific PTX assembles only for "
                                          "sm_90a; assemble it for sm_90a, or rebuild it for sm_90"):
        pf.assemble(_copy_kernel("sm_90a"), "sm_90", backend="ptxas")


def test_ptx_text_is_not_assembled_for_an_older_gpu_than_its_target_line(no_tool):
    text = _copy_kernel("sm_90").render().text
    with pytest.raises(TargetError, match="the PTX targets sm_90; assemble it for sm_90 or newer"):
        pf.assemble(text, "sm_80", backend="ptxas")


@pytest.mark.skipif("ptxas" not in A.available_backends(), reason="no ptxas")
def test_a_module_still_assembles_for_a_newer_gpu():
    assert pf.assemble(_copy_kernel("sm_80"), "sm_90", backend="ptxas").cubin


def _fake_ptxas(tmp_path, monkeypatch, body):
    p = tmp_path / "fake-ptxas"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    monkeypatch.setattr(A, "find_tool", lambda name: str(p))
    monkeypatch.setattr(A, "available_backends", lambda: ("ptxas",))


def test_an_option_that_makes_ptxas_write_no_cubin_is_a_toolchain_error(tmp_path, monkeypatch):
    _fake_ptxas(tmp_path, monkeypatch, "echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'; exit 0")
    with pytest.raises(ToolchainError, match="ptxas wrote no cubin \\(arch sm_80, options \\['--version'\\]\\).*"
                                             "--version or --help.*\n  it said: ptxas: NVIDIA"):
        pf.assemble(_copy_kernel("sm_80"), backend="ptxas", options=["--version"])


_WRITES_A_CUBIN = 'for a; do last="$a"; done; printf cubin > "$last"'


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_an_infinite_timeout_means_no_limit(tmp_path, monkeypatch, how):
    _fake_ptxas(tmp_path, monkeypatch, _WRITES_A_CUBIN)
    assert A.tool_timeout(float("inf")) is None
    if how == "environment":
        monkeypatch.setenv(A.TOOL_TIMEOUT_ENV, "inf")
        r = pf.assemble(_copy_kernel("sm_80"), backend="ptxas")
    else:
        r = pf.assemble(_copy_kernel("sm_80"), backend="ptxas", timeout=float("inf"))
    assert r.cubin == b"cubin"


@pytest.mark.parametrize("timeout", [1e300, 3e6, float("nan"), -1.0, 0, "soon"])
def test_timeouts_a_process_wait_cannot_take_are_toolchain_errors(tmp_path, monkeypatch, timeout):
    _fake_ptxas(tmp_path, monkeypatch, _WRITES_A_CUBIN)
    with pytest.raises(ToolchainError, match="timeout"):
        pf.assemble(_copy_kernel("sm_80"), backend="ptxas", timeout=timeout)
    monkeypatch.setenv(A.TOOL_TIMEOUT_ENV, str(timeout))
    with pytest.raises(ToolchainError, match="timeout|PTXFORGE_TOOL_TIMEOUT"):
        pf.assemble(_copy_kernel("sm_80"), backend="ptxas")


def test_an_assembly_error_of_text_names_the_line_ptxas_names():
    """PTX text with a form feed in a comment: ptxas counts it as no line break, and the error quoted the line
    after the one ptxas named (Python's splitlines splits at form feeds)."""
    text = (".version 8.3\n.target sm_90\n.address_size 64\n// a\x0cb\n.visible .entry k()\n{\n"
            "    bogus.u32 %r1;\n    ret;\n}\n")
    if not A.available_backends():
        pytest.skip("needs ptxas or nvJitLink")
    with pytest.raises(AssemblyError) as e:
        pf.assemble(text, "sm_90")
    assert "PTX line 7: bogus.u32 %r1;" in str(e.value), str(e.value)
