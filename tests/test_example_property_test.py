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


def test_the_examples_kernels_assemble():
    from ptxforge.assembler import assemble
    ex = load_example()
    for bug in (False, True):
        assert assemble(ex.block_sums("sm_90", bug=bug)).resources("block_sums").registers > 0


def test_the_example_reports_its_planted_bug(capsys):
    assert load_example().main(["--bug", "--examples", "15"]) == 0
    out = capsys.readouterr().out
    assert "out-of-bounds global load" in out and "property_test.py:" in out and "check_problem(" in out


def guide_blocks():
    text = (EXAMPLE.parent.parent / "docs" / "property-testing.md").read_text()
    return [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]


def test_the_guides_kernel_space_and_mutation_claims_hold():
    blocks = guide_blocks()
    ns = {}
    exec(blocks[0] + blocks[1], ns)  # the kernel and its space, as printed
    from hypothesis import settings
    from ptxforge.testing import Size, check, mutation_check
    seeded = settings(derandomize=True, database=None)
    assert check(ns["transpose"](), ns["space"], max_examples=15, settings=seeded).problems == 15
    strong = mutation_check(ns["transpose"](), ns["space"], max_examples=30, max_per_kind=2, settings=seeded)
    assert strong.results and not strong.survivors, str(strong)
    # "restrict the space to whole tiles and every off_by_one_guard mutant survives"
    sp = ns["space"]
    sp.sizes = (Size("rows", 32, 96, multiple_of=32), Size("cols", 32, 96, multiple_of=32))
    weak = mutation_check(ns["transpose"](), sp, kinds=["off_by_one_guard"], max_examples=5, max_per_kind=4)
    assert len(weak.survivors) == len(weak.results) == 4
