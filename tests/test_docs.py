"""The API reference in ``docs/api/`` builds, without a warning, and covers every public module.

The build is the one a user runs (``python -m sphinx -W --keep-going -b html docs/api OUT``), on
a copy of ``docs/api`` so the generated stubs stay out of the tree. A module that fails to import,
a docstring that is broken reST or a reference to nothing is a warning, and ``-W`` makes it fail.
"""

import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest

from support.docstrings import public_modules

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "api"


def _text(page: Path) -> str:
    """The words of an HTML page, tags dropped and whitespace collapsed."""
    text = re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))
    return " ".join(unescape(text).split())


def test_api_reference_builds_without_warnings(tmp_path):
    # a test dependency (pip install -e ".[test]"); a machine whose `sphinx` is not a full install
    # (no sphinx.cmd.build, as on some GPU images) cannot build the reference
    pytest.importorskip("sphinx.cmd.build", reason="sphinx without sphinx.cmd.build: not the [test] install")

    src, out = tmp_path / "src", tmp_path / "html"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("_generated", "_build"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "sphinx.cmd.build", "-W", "--keep-going", "-q", "-b", "html",
                           str(src), str(out)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, f"sphinx-build failed:\n{proc.stdout}\n{proc.stderr}"

    pages = {p.stem for p in (out / "_generated").glob("*.html")}
    missing = sorted(m.__name__ for m in public_modules() if m.__name__ not in pages)
    assert not missing, f"public modules without an API page: {missing}"

    # The pages carry the docstrings themselves, not just titles: the builder's page describes
    # instruction methods that come from the ISA mixins, with the PTX they emit.
    builder = _text(out / "_generated" / "ptxforge.builder.html")
    assert "KernelBuilder" in builder and "cp.async.commit_group" in builder and "mma.sync.aligned" in builder
    arith = _text(out / "_generated" / "ptxforge.isa.arith.html")
    assert "fma.rnd.type d, a, b, c" in arith
    # Docstring sections become field lists: the builder's arguments are listed as parameters.
    assert "Parameters: name – the kernel’s PTX name" in builder
