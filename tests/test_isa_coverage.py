"""docs/isa-coverage.md is the coverage ptxforge derives from its ISA tables: the table on the page is
`ptxforge.testing.coverage.markdown_table()`, the count it states is that table's, every usable row
the tables do not express has a stated reason (and no reason is stale), and the row matchers are
not vacuous."""

import pathlib
import re

import pytest

import ptxforge as pf
from ptxforge.isa.coverage import ISA_ROWS
from ptxforge.testing import coverage as cov

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "isa-coverage.md"


def test_the_page_shows_the_derived_table():
    text = DOC.read_text()
    m = re.search(r"<!-- coverage -->\n(.*?)<!-- /coverage -->", text, re.S)
    assert m, "docs/isa-coverage.md has no coverage block"
    assert m.group(1) == cov.markdown_table(), "docs/isa-coverage.md is out of date: paste " \
                                               "ptxforge.testing.coverage.markdown_table()"


def test_the_stated_count_is_the_tables_count():
    rows, usable, have = cov.counts()
    m = re.search(r"Count: \*\*(\d+) of (\d+)\*\*.*?\((\d+) %\), of (\d+) rows", DOC.read_text())
    assert m, "the count line is missing"
    assert tuple(map(int, m.groups())) == (have, usable, have * 100 // usable, rows)
    assert have * 100 >= 90 * usable  # the breadth goal: 90 % of the sm_80/sm_90-usable rows


def test_every_missing_usable_row_says_why():
    missing = {c.row.name for c in cov.coverage() if c.row.usable and not c.expressed}
    assert missing == set(cov.MISSING_WHY), (missing ^ set(cov.MISSING_WHY))


def test_rows_are_unique_and_usable_rows_carry_no_reason():
    keys = [(r.section, r.name) for r in ISA_ROWS]
    assert len(keys) == len(set(keys)) and len(keys) > 180
    for r in ISA_ROWS:
        assert r.usable == (r.why == ""), r


@pytest.mark.parametrize("mnemonic,row", [
    ("add.s32", ("Integer Arithmetic", "add")), ("add.rn.f32", ("Floating-Point", "add")),
    ("add.f16x2", ("Half Precision Floating-Point", "add")), ("add.cc.u32", ("Extended-Precision Integer Arithmetic",
                                                                             "add.cc")),
    ("ld.global.nc.v4.u32", ("Data Movement and Conversion", "ld.global.nc")),
    ("ld.acquire.gpu.global.u32", ("Data Movement and Conversion", "ld")),
    ("setp.lt.and.f16x2", ("Half Precision Comparison", "setp")), ("setp.lt.u32", ("Comparison and Selection", "setp")),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32",
     ("Parallel Synchronization and Communication", "red.async")),
    ("mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32", ("Warp Level Matrix Multiply-Accumulate", "mma.sp")),
    ("vmin2.u32.u32.u32.add", ("Video", "vadd2, vsub2, vavrg2, vabsdiff2, vmin2, vmax2")),
])
def test_each_mnemonic_belongs_to_exactly_its_row(mnemonic, row):
    ins = pf.isa.Instruction("x", mnemonic)
    hits = [(r.section, r.name) for r in ISA_ROWS if r.matches(ins)]
    assert hits == [row], hits


def test_every_emitted_instruction_belongs_to_exactly_one_row():
    """No form the tables emit falls outside the index, or into two rows."""
    for ins in cov.emitted_instructions():
        hits = [r.name for r in ISA_ROWS if r.matches(ins)]
        assert len(hits) == 1, (ins.mnemonic, hits)
