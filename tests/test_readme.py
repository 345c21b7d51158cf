"""The README's Python blocks run as written.

Each ```python block of README.md is executed in a fresh namespace, from the repository root.
Lines that need a GPU are guarded in the README itself (`if pf.runtime.gpu_available():`), so
the blocks run everywhere: on the CPU they emit, list and assemble, and on a GPU they also
launch and check the result.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_readme_has_python_blocks():
    # The kernel in 20 lines and the int4 GEMM at least: a broken extraction must not pass silently.
    assert len(BLOCKS) >= 2
    assert any("KernelBuilder" in b for b in BLOCKS) and any("Int4Gemm" in b for b in BLOCKS)


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(index, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = compile(BLOCKS[index], f"README.md[python block {index}]", "exec")
    exec(code, {"__name__": "__readme__"})
    assert capsys.readouterr().out.strip(), "each README block prints what it shows"
