"""Hypothesis: random modules from the builder's strategies render -> parse -> render to the same
bytes and to a structurally equal module; the ISA tables judge both directions alike."""

import pytest
from hypothesis import given, settings

from ptxforge.parse import parse
from ptxforge.parse.equality import first_difference
from ptxforge.testing import strategies as pst

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")


@settings(max_examples=150, deadline=None)
@given(pst.kernels(max_size=12))
def test_random_modules_round_trip(drawn):
    target, specs = drawn
    module = pst.build_module(target, specs)
    text = module.ptx
    parsed = parse(text, filename="random.ptx")
    assert parsed.ptx == text
    assert first_difference(module, parsed) is None


@settings(max_examples=60, deadline=None)
@given(pst.kernels(max_size=6))
def test_parsed_rendering_is_a_fixed_point(drawn):
    target, specs = drawn
    once = parse(pst.build_module(target, specs).ptx)
    twice = parse(once.ptx)
    assert twice.ptx == once.ptx and first_difference(once, twice) is None
