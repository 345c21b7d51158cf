"""The differential lane: ptxforge's verdicts against ptxas's.

Hypothesis draws legal forms from every table and near-miss mutations of them
(`ptxforge.testing.differential`).  Every form ptxforge accepts must assemble with ptxas; every
near miss it refuses must be refused by ptxas too, or match a row of the stricter-than-ptxas table
(`ptxforge.isa.strictness`).  Each draw shares a few assembled modules, bisected on failure.

`PTXFORGE_DEEP=1` draws many more examples (minutes instead of about a minute).
"""

import os

import pytest
from hypothesis import HealthCheck, given, settings

from ptxforge.assembler import available_backends
from ptxforge.testing.differential import Counts, lane_draws, run_lane

pytestmark = [pytest.mark.skipif("ptxas" not in available_backends(), reason="the lane compares with ptxas"),
              pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")]

DEEP = os.environ.get("PTXFORGE_DEEP") == "1"
TOTAL = Counts()


@settings(max_examples=600 if DEEP else 40, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(lane_draws())
def test_ptxforge_and_ptxas_agree(drawn):
    target, legal, misses = drawn
    counts = run_lane(target, legal, misses)
    TOTAL.add(counts)
    assert not counts.failures, "\n\n".join(counts.failures[:5])


def test_the_lane_saw_both_verdicts():
    """The lane is not vacuous: it assembled forms, and sent refused near misses to ptxas
    (run after the lane above; alone it runs a small lane of its own)."""
    if TOTAL.accepted == 0:
        test_ptxforge_and_ptxas_agree()
    assert TOTAL.accepted > 100 and TOTAL.refused > 20 and TOTAL.also_refused > 10, TOTAL
    print(f"\ndifferential lane: {TOTAL.accepted} accepted and assembled; {TOTAL.refused} near misses refused: "
          f"{TOTAL.also_refused} also refused by ptxas, {TOTAL.documented} documented stricter than ptxas, "
          f"{TOTAL.unmapped} without a PTX spelling")


def test_a_near_miss_without_a_spelling_is_not_mirrored_into_a_setup_instruction():
    """acc s32 -> b32 on mma...s32.u8.u8.s32 (C zeroed by mov.s32 first): the token is twice in the mma, so the
    miss has no spelling there; the lane once swapped it into the mov (mov.b32, which ptxas takes) and reported
    "ptxforge refuses but ptxas accepts"."""
    from ptxforge.errors import PtxforgeError
    from ptxforge.testing.differential import Mutation, _accepts, _check_refusals
    from ptxforge.testing.spec import spec
    base = spec("tensor", "mma", a_type="u8", acc="s32", b_type="u8", bitop=None, c="zero", satfinite=False,
                shape="m16n8k32")
    m = Mutation(base, "sm_90", "acc", "s32", "b32")
    err = _accepts("sm_90", m.spec())
    assert isinstance(err, PtxforgeError)
    counts = Counts()
    _check_refusals("sm_90", [(m, err)], counts)
    assert counts.failures == [] and counts.unmapped == 1


def test_a_lower_version_refused_by_a_stricter_than_ptxas_row_is_documented_not_a_failure():
    """fence.acquire.cta at .version 8.5 on sm_90: ptxforge refuses it (the one-sided fences row: PTX 8.6), the
    stand-alone ptxas takes it; the lane checked the table only for lower targets and reported this draw as a
    disagreement now and then."""
    from ptxforge.testing.differential import Mutation, _check_module_mutation
    from ptxforge.testing.spec import spec
    counts = Counts()
    _check_module_mutation("sm_90", Mutation(spec("sync", "fence", kind="fence.acquire.cta"), "sm_90", "version",
                                             None, "lower"), counts)
    assert not counts.failures and counts.documented == 1, counts
