"""Hypothesis: random modules from the builder's strategies render -> parse -> render to the same
bytes and to a structurally equal module; the ISA tables judge both directions alike.  Damaged PTX
(real files with a few edits) is read, or refused with an error that names its line."""

import functools
import glob
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxforge.errors import PtxforgeError
from ptxforge.parse import parse, read
from ptxforge.parse.equality import first_difference
from ptxforge.testing import strategies as pst
from ptxforge.testing.ptx_mutations import mutated_ptx

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")


@functools.lru_cache(maxsize=None)
def _readable(target, spec):
    """Whether the reader reads a module of this one instruction back (the reader has no decoders
    yet for the forms of tests/test_breadth_forms.py)."""
    text = pst.build_module(target, [spec]).ptx
    try:
        back = parse(text)
    except PtxforgeError:
        return False
    return back.render().text == text  # read, but as another instruction: not readable either


def _readable_kernels(max_size):
    return pst.targets().flatmap(lambda t: st.tuples(st.just(t), st.lists(
        pst.instruction_specs(t).filter(lambda s, t=t: _readable(t, s)), min_size=1, max_size=max_size)))


def test_only_the_breadth_forms_are_unreadable():
    """Every legal candidate the reader cannot read back is one of the breadth forms (which have no
    decoders yet); everything else keeps round-tripping."""
    from test_breadth_forms import _is_new
    for target in ("sm_80", "sm_90a"):
        unreadable = [s for fam in pst.FAMILIES for s in pst.legal_candidates(target, fam) if not _readable(target, s)]
        assert all(_is_new(s) for s in unreadable), [s for s in unreadable if not _is_new(s)][:5]


@settings(max_examples=150, deadline=None)
@given(_readable_kernels(12))
def test_random_modules_round_trip(drawn):
    target, specs = drawn
    module = pst.build_module(target, specs)
    text = module.ptx
    parsed = parse(text, filename="random.ptx")
    assert parsed.ptx == text
    assert first_difference(module, parsed) is None


@settings(max_examples=60, deadline=None)
@given(_readable_kernels(6))
def test_parsed_rendering_is_a_fixed_point(drawn):
    target, specs = drawn
    once = parse(pst.build_module(target, specs).ptx)
    twice = parse(once.ptx)
    assert twice.ptx == once.ptx and first_difference(once, twice) is None


CORPUS = [open(p).read() for p in sorted(glob.glob(os.path.join(os.path.dirname(__file__), "golden", "*.ptx"))
                                         + glob.glob(os.path.join(os.path.dirname(__file__), "data", "ptx", "*.ptx")))]


@settings(max_examples=300, deadline=None)
@given(mutated_ptx(CORPUS), st.booleans())
def test_damaged_ptx_is_read_or_refused_with_a_line(text, strict):
    try:
        reading = read(text, filename="damaged.ptx", strict=strict)
    except PtxforgeError as e:
        assert e.loc is not None and e.loc.filename == "damaged.ptx", str(e)
        assert str(e).startswith("damaged.ptx:"), str(e)
        return
    if reading.module is not None:
        # what was read renders to text that reads again; from there on reading is a fixed point (the
        # first rendering may repair a file, e.g. declare a register before the line that uses it)
        again = parse(reading.module.ptx, strict=False)
        assert parse(again.ptx, strict=False).ptx == again.ptx
