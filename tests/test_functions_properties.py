"""Drawn programs of device functions (ptxforge.testing.function_strategies): each one runs on the
interpreter to its Python reference, reads back through the parser to an equal module, and
(a few) assemble with ptxas."""

import numpy as np
from hypothesis import given, settings

import ptxforge as pf
from ptxforge import interp
from ptxforge.parse.equality import first_difference
from ptxforge.testing.function_strategies import call_programs


@given(call_programs())
def test_drawn_call_programs_run_to_their_reference_and_round_trip(p):
    out = np.zeros(p.threads, np.uint32)
    interp.run(p.module, p.kernel, block=p.threads, args=[out])
    np.testing.assert_array_equal(out, p.expected())
    again = pf.parse(p.module.ptx)
    assert first_difference(p.module, again) is None and again.ptx == p.module.ptx


@settings(max_examples=5)
@given(call_programs(target="sm_90a"))
def test_drawn_call_programs_assemble(p):
    pf.assemble(p.module, backend="ptxas")
