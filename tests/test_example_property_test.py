"""examples/property_test.py runs on the CPU: both kernels pass, every planted mutant is killed,
and the planted off-by-one guard is reported with its Python line and a reproducer."""

import importlib.util
import pathlib

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "property_test.py"


def load_example():
    spec = importlib.util.spec_from_file_location("property_test_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_example_passes_and_kills_every_mutant(capsys):
    assert load_example().main(["--examples", "15"]) == 0
    out = capsys.readouterr().out
    assert "block_sums: 15 problems passed" in out and "transpose: 15 problems passed" in out
    assert "0 survived" in out and "SURVIVED" not in out


def test_the_example_reports_its_planted_bug(capsys):
    assert load_example().main(["--bug", "--examples", "15"]) == 0
    out = capsys.readouterr().out
    assert "out-of-bounds global load" in out and "property_test.py:" in out and "check_problem(" in out
