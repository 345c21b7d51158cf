"""`ptxforge gemm-int4`: which kernel a target takes (the TMA + wgmma kernel on sm_90a only, the mma.sync kernel on
plain sm_90), what the Hopper kernel's resource report says about the archs --arch asks for, and a warning the
kernel raises printed once."""

import os
import subprocess
import sys

import pytest

from ptxforge.assembler import available_backends
from ptxforge.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["--m", "64", "--n", "64", "--k", "1024", "--no-run"]
needs_assembler = pytest.mark.skipif(not available_backends(), reason="no PTX assembler here")


@pytest.fixture
def no_gpu(monkeypatch):
    """The command as it runs on a machine without a GPU (the default target is then sm_90a)."""
    from ptxforge.runtime import device
    monkeypatch.setattr(device, "gpu_available", lambda: False)


def _report(capsys, *argv):
    assert main(["gemm-int4", *SMALL, *argv]) == 0
    return capsys.readouterr().out


def test_plain_sm_90_takes_the_mma_sync_kernel(no_gpu, capsys):
    out = _report(capsys, "--target", "sm_90", "--arch", "")
    assert out.startswith("schedule: Int4Gemm ") and ", sm_90, path " in out, out
    assert "HopperGemm" not in out and "wgmma" not in out, out


@pytest.mark.parametrize("argv", [["--target", "sm_90a"], []])
def test_sm_90a_and_the_default_without_a_gpu_take_the_hopper_kernel(no_gpu, capsys, argv):
    out = _report(capsys, "--arch", "", *argv)
    assert out.startswith("schedule: HopperGemm ") and "path:     wgmma_s4" in out, out


@needs_assembler
def test_the_hopper_report_says_once_for_each_other_arch_that_it_is_not_assembled_there(no_gpu, capsys):
    out = _report(capsys, "--target", "sm_90a", "--arch", "sm_80,sm_90,sm_80")
    lines = out.splitlines()
    assert sum(ln.startswith("  sm_90a via ") for ln in lines) == 1, out
    for arch in ("sm_80", "sm_90"):
        skipped = [ln for ln in lines if ln.startswith(f"  {arch}: not assembled -- ")]
        assert len(skipped) == 1, out
        assert "only sm_90a has" in skipped[0] and f"--mma-sync assembles the mma.sync kernel for {arch}" in skipped[0]
    assert "run skipped (--no-run); emitted and assembled for sm_90a" in out


def test_the_hopper_kernel_with_no_arch_asked_for_assembles_nothing(no_gpu, capsys):
    out = _report(capsys, "--target", "sm_90a", "--arch", "")
    assert "nothing assembled" in out and "sm_90a via" not in out and "not assembled" not in out, out


def test_an_emulation_warning_is_printed_once():
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "ptxforge", "gemm-int4", *SMALL, "--target", "sm_90", "--path",
                        "native_s4", "--arch", ""], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("EmulatedInstructionWarning") == 1, r.stderr
    assert "mma.sync.m16n8k64.s4 instructions run as a ptxas software routine on sm_90" in r.stderr
