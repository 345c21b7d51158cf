"""The `ptxforge` command."""

import os
import subprocess
import sys

import pytest

from ptxforge.assembler import disassembler

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")


def run(*args):
    """Run the installed console script if there is one, else `python -m ptxforge`."""
    script = os.path.join(os.path.dirname(sys.executable), "ptxforge")
    cmd = [script] if os.path.exists(script) else [sys.executable, "-m", "ptxforge"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


def test_help():
    p = run("--help")
    assert p.returncode == 0
    assert "usage: ptxforge" in p.stdout
    for sub in ("assemble", "targets"):
        assert sub in p.stdout
    p = run("assemble", "--help")
    assert p.returncode == 0 and "--arch" in p.stdout


def test_assemble_reports_resources():
    p = run("assemble", os.path.join(GOLDEN, "01_module_basics.ptx"), "--arch", "sm_90")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("sm_90 via ")
    for name in ("saxpy_rev", "special_regs"):
        line = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith(name + ":"))
        assert "registers" in line and "spills 0 B stored / 0 B loaded" in line


def test_assemble_lists_sass_opcodes():
    if disassembler() is None:
        pytest.skip("no disassembler here")
    p = run("assemble", os.path.join(GOLDEN, "05_mbarrier_bulk_tma_sm90.ptx"), "--sass")
    assert p.returncode == 0, p.stderr
    assert "UTMALDG.2D" in p.stdout and "UBLKCP.S.G" in p.stdout


def test_a_broken_file_gives_mapped_errors_and_exit_code_1(tmp_path):
    src = open(os.path.join(GOLDEN, "02_cp_async.ptx")).read()
    bad = src.replace("cp.async.ca.shared.global [%r4+16], [%rd5], 8, %p1;",
                      "cp.async.cg.shared.global [%r4+16], [%rd5], 8, %p1;")
    assert bad != src
    line = next(i for i, ln in enumerate(bad.splitlines(), 1) if "cp.async.cg.shared.global [%r4+16]" in ln)
    path = tmp_path / "broken.ptx"
    path.write_text(bad)
    p = run("assemble", str(path), "--arch", "sm_80")
    assert p.returncode == 1
    assert p.stderr.startswith("ptxforge: error: ")
    assert "expected to be 16" in p.stderr
    assert f"PTX line {line}: cp.async.cg.shared.global [%r4+16], [%rd5], 8, %p1;" in p.stderr
    assert p.stdout == ""


def test_targets_lists_targets_and_assemblers():
    p = run("targets")
    assert p.returncode == 0
    assert "sm_90a" in p.stdout and "emulated" in p.stdout and "assembler" in p.stdout
