"""docs/isa-coverage.md: every row it calls expressible has builder methods, and the count it
states is the count of its own table."""

import pathlib
import re

import ptxforge as pf

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "isa-coverage.md"


def _rows():
    text = DOC.read_text()
    body = text.split("<!-- coverage -->")[1].split("<!-- /coverage -->")[0]
    lines = [ln for ln in body.strip().splitlines()[2:]]
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    return text, rows


def _weight(row):
    m = re.search(r"(\d+) rows", row[0])
    return int(m.group(1)) if m else 1


def test_expressible_rows_have_builder_methods():
    _, rows = _rows()
    assert len(rows) > 150
    for name, usable, builder in rows:
        assert usable in ("yes", "no"), name
        for method in builder.split():
            fn = getattr(pf.KernelBuilder, method, None)
            assert callable(fn), f"{name}: KernelBuilder.{method} does not exist"
        if usable == "no":
            assert not builder, name


def test_the_stated_count_is_the_tables_count():
    text, rows = _rows()
    usable = [r for r in rows if r[1] == "yes"]
    total = sum(_weight(r) for r in usable)
    have = sum(_weight(r) for r in usable if r[2])
    m = re.search(r"Count: \*\*(\d+) of (\d+)\*\*.*?\((\d+) %\)", text)
    assert m, "the count line is missing"
    assert (int(m.group(1)), int(m.group(2))) == (have, total)
    assert int(m.group(3)) == have * 100 // total


def test_the_methods_added_for_breadth_are_documented():
    """The builder methods of the breadth forms say what they emit."""
    from ptxforge.isa import cache, integer
    names = [n for n in vars(integer.IntegerOps) | vars(cache.CacheOps) if not n.startswith("_")]
    names += ["set", "slct", "testp", "stacksave", "stackrestore", "pmevent", "brkpt", "bmsk", "szext", "fns",
              "lop3", "bfind", "ldu", "isspacep", "match", "elect_sync", "bar_red", "griddepcontrol",
              "mbarrier_complete_tx", "mbarrier_arrive_drop", "mbarrier_pending_count", "mbarrier_try_wait",
              "mad24", "tanh", "copysign", "ex2", "min", "max", "setp", "ld", "st", "atom", "red"]
    for n in names:
        assert (getattr(pf.KernelBuilder, n).__doc__ or "").strip(), n
