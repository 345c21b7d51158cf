"""docs/property-testing.md says what its examples give: the "One call" example prints the line the guide shows
when run as written (Hypothesis's default settings, no profile loaded), the mutation-check example prints the
report the guide shows, and the instruction it names as one the interpreter cannot model is refused by the
interpreter."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import ptxforge as pf
from ptxforge import interp

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "property-testing.md").read_text()


def guide_blocks():
    return [b.split("```", 1)[0] for b in GUIDE.split("```python\n")[1:]]


def test_the_one_call_example_prints_what_the_guide_shows(tmp_path):
    kernel, space, one_call = guide_blocks()[:3]
    shown = [ln[2:] for ln in one_call.splitlines() if ln.startswith("# ")]
    assert len(shown) == 1 and "problems passed" in shown[0], one_call
    script = tmp_path / "one_call.py"
    script.write_text(kernel + space + one_call)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HYPOTHESIS_PROFILE", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    printed = r.stdout.strip().splitlines()[-1]
    # which problem is the largest depends on the draws; the counts do not
    assert printed.split("; largest ")[0] == shown[0].split("; largest ")[0], (printed, shown[0])
    assert re.fullmatch(r"\{'rows': \d+, 'cols': \d+\}", printed.split("; largest ")[1]), printed


def run_script(tmp_path, text) -> str:
    """What `text` prints, run as a script of its own (no Hypothesis profile loaded); paths under the
    project shown relative to it."""
    script = tmp_path / "guide_example.py"
    script.write_text(text)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HYPOTHESIS_PROFILE", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout.replace(f"{ROOT}/", "")


def test_the_mutation_check_example_prints_what_the_guide_shows(tmp_path):
    blocks = guide_blocks()
    call = next(b for b in blocks if "mutation_check(" in b and "print(" in b)
    shown = GUIDE.split(call, 1)[1].split("```\n")[2].splitlines()  # the output block right after it
    printed = run_script(tmp_path, blocks[0] + blocks[1] + call).splitlines()
    assert len(printed) == len(shown), (printed, shown)
    for want, got in zip(shown, printed):  # a line the guide cuts short ends in "..."
        assert got.startswith(want[:-3]) if want.endswith("...") else got == want, (want, got)


def _breakpoint_kernel():
    """One brkpt (a debugger's breakpoint: the interpreter refuses it)."""
    k = pf.KernelBuilder("breakpoint", target="sm_80")
    k.brkpt()
    return k.module()


def test_the_instruction_the_guide_says_the_interpreter_cannot_model_is_refused_by_it():
    named = re.search(r"cannot model \(for instance `([^`]+)`", GUIDE.replace("\n", " "))
    assert named, "the guide names no instruction the interpreter cannot model"
    with pytest.raises(interp.InterpUnsupported) as info:
        interp.run(_breakpoint_kernel(), block=32, args=[])
    assert f"does not model '{named.group(1)}'" in str(info.value), (named.group(1), str(info.value))
