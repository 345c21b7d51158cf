"""The GPU test switch itself: run pytest in a child process over a tiny test file with this
repository's conftest, once with no usable GPU (CUDA_VISIBLE_DEVICES empty) and once with a GPU
pretended present (a plugin loaded before the conftest answers "usable"), and read the outcomes.
A gpu test refused for want of a GPU fails in its setup, which pytest reports as ERROR."""

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TESTS = """
import pytest

@pytest.mark.gpu
def test_body_touches_nothing():
    pass

@pytest.mark.gpu
def test_guarded_by_importorskip():
    pytest.importorskip("a_module_that_is_not_installed_anywhere")

@pytest.mark.gpu
@pytest.mark.may_skip("optional library")
def test_optional_library():
    pytest.importorskip("a_module_that_is_not_installed_anywhere")

def test_cpu_only():
    pass

def test_cpu_skip():
    pytest.skip("not a gpu test")
"""

PRETEND_GPU = """
import ptxforge.runtime.device as gpu
gpu.gpu_skip_reason = lambda: None
"""


def _run(tmp_path, require, pretend_gpu=False):
    shutil.copy(os.path.join(HERE, "conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_tiny.py").write_text(TESTS)
    (tmp_path / "pretend_gpu.py").write_text(PRETEND_GPU)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)]))
    env.pop("PTXFORGE_REQUIRE_GPU", None)
    if require is not None:
        env["PTXFORGE_REQUIRE_GPU"] = require
    plugins = ["-p", "pretend_gpu"] if pretend_gpu else []
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugins, "-rA", "-q",
                        "-o", "addopts=", "test_tiny.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    out = p.stdout + p.stderr
    outcomes = {name: word for word, name in re.findall(r"^(PASSED|FAILED|ERROR) test_tiny\.py::(\w+)", out, re.M)}
    return p.returncode, out, outcomes


def test_under_the_switch_every_gpu_test_fails_without_a_gpu(tmp_path):
    rc, out, outcomes = _run(tmp_path, "1")
    assert rc == 1, out
    for name in ("test_body_touches_nothing", "test_guarded_by_importorskip", "test_optional_library"):
        assert outcomes.get(name) in ("FAILED", "ERROR"), out
    assert outcomes.get("test_cpu_only") == "PASSED", out
    assert "no GPU is usable" in out
    assert re.search(r"\b1 passed, 1 skipped, 3 errors\b", out), out


def test_under_the_switch_a_self_skipping_gpu_test_fails(tmp_path):
    rc, out, outcomes = _run(tmp_path, "1", pretend_gpu=True)
    assert rc == 1, out
    assert outcomes.get("test_guarded_by_importorskip") == "FAILED", out
    assert outcomes.get("test_body_touches_nothing") == "PASSED", out
    assert "may not skip" in out
    assert re.search(r"\b1 failed, 2 passed, 2 skipped\b", out), out  # may_skip and the CPU skip still skip


def test_without_the_switch_gpu_tests_skip(tmp_path):
    for require in (None, "0"):
        rc, out, outcomes = _run(tmp_path, require)
        assert rc == 0, out
        assert re.search(r"\b1 passed, 4 skipped\b", out), out
        assert "set PTXFORGE_REQUIRE_GPU=1 to fail instead" in out
