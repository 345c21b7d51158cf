"""Mutation check: is a property test strong enough to catch the bugs a kernel can have?

    from ptxforge.testing import mutation_check
    report = mutation_check(module, space)      # every applicable mutant of testing.mutants
    print(report)                               # which were killed, by what; which survived
    assert not report.survivors

Each mutant (a dropped bar.sync, a wait_group that waits for one group too few, a dropped
mbarrier wait, a comparison off by one: see testing.mutants) is run through the same `check`
as the kernel itself, with the caller's own property when given.  A mutant is *killed* when
the check fails on some drawn problem, and *survives* when every problem passes: the property
test would let that bug through.  The unmutated kernel must pass first (otherwise every
mutant would look killed), and every problem a mutant fails is run again on the unmutated
kernel: when that fails too, the kernel has a bug of its own, which mutation_check raises as
the kernel's PropertyFailure instead of counting the mutant as killed.  Shrinking is off for
mutants: the first failure is enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import unittest

from hypothesis import given
from hypothesis.errors import HypothesisException

from .report import failure_message
from .runner import CheckReport, PropertyFailure, _hypothesis, _judge, _Plan, _refuse_nesting, check, run_problem
from .mutants import mutants_of

__all__ = ["mutation_check", "MutationReport", "MutantResult"]


@dataclass
class MutantResult:
    """One mutant's fate: killed (with the first line of the failure that killed it) or survived."""

    mutant: object  # testing.mutants.Mutant
    killed: bool
    reason: str = ""

    def __str__(self) -> str:
        verdict = f"killed: {self.reason}" if self.killed else "SURVIVED"
        return f"{self.mutant.label}\n    {verdict}"


@dataclass
class MutationReport:
    """Every mutant tried, and which survived."""

    kernel: str
    results: list = field(default_factory=list)

    @property
    def survivors(self) -> list:
        """The mutants no drawn problem caught: bugs the property test lets through."""
        return [r.mutant for r in self.results if not r.killed]

    @property
    def killed(self) -> list:
        """The mutants some problem caught."""
        return [r.mutant for r in self.results if r.killed]

    def __str__(self) -> str:
        if not self.results:
            return (f"mutation check of {self.kernel}: no mutant of these kinds applies to the kernel (it has no "
                    "such site), so it says nothing about the property test's strength")
        head = (f"mutation check of {self.kernel}: {len(self.killed)} of {len(self.results)} mutants killed, "
                f"{len(self.survivors)} survived")
        return "\n".join([head] + [str(r) for r in self.results])


def _reason(e: BaseException) -> str:
    """The first failure of a PropertyFailure's report, with the first line under it (a finding's kind)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("[") and ln.endswith(":") and i + 1 < len(lines):
            return f"{ln} {lines[i + 1]}"
        if ln.startswith("["):
            return ln
    return lines[0] if lines else type(e).__name__


def mutation_check(target=None, space=None, *, kernel=None, kinds=None, max_per_kind: int | None = 4,
                   max_examples: int = 10, backends=("interp",), property=None, settings=None) -> MutationReport:
    """Run `check` against each mutant of the kernel; report which were killed and which survived.

    target, space, kernel, property, settings: as for `check`.  backends: the interpreter alone by
    default (its findings kill most synchronization mutants, and a mutant's stray store could fault
    a GPU's context for the rest of the process); pass "auto" or ("interp", "gpu") to add the
    device.  kinds: mutant kinds
    (default: all of testing.mutants.MUTANT_KINDS that apply); max_per_kind: at most this many
    sites of each kind (spread over the kernel; None: all).  max_examples: problems per mutant.
    Mutants are taken from the kernel given, or for a space whose kernel varies with the problem
    (a schedule's), from the kernel of its simplest problem; a variant without that site skips
    the problem.  Raises the unmutated kernel's PropertyFailure when it fails a problem a mutant
    failed (see the module docstring).
    """
    plan = _Plan(target, space, kernel, backends)
    base = plan.fixed if plan.fixed is not None else plan.kernel_for(_simplest_problem(plan.space))
    mutants = mutants_of(base, kinds, max_per_kind=max_per_kind)  # bad kinds or max_per_kind: before any run
    check(target, space, kernel=kernel, backends=backends, property=property, max_examples=max_examples,
          settings=settings)  # the kernel itself must pass, or no verdict below means anything
    report = MutationReport(base.name)
    for m in mutants:
        try:
            _check_mutant(_Plan(target, space, kernel, backends, m.apply), plan, property, max_examples, settings)
        except _UnmutatedFails as e:
            raise e.failure from None
        except PropertyFailure as e:
            report.results.append(MutantResult(m, True, _reason(e)))
        except Exception as e:  # noqa: BLE001 - a mutant that crashes the run is caught too
            if type(e).__name__ in ("Unsatisfiable", "FailedHealthCheck"):
                raise
            report.results.append(MutantResult(m, True, f"{type(e).__name__}: {_reason(e)}"))
        else:
            report.results.append(MutantResult(m, False))
    return report


def _simplest_problem(space):
    """The problem Hypothesis draws first for `space` (scalars drawn from strategies included)."""
    from hypothesis import find, settings as hyp_settings
    return find(space.problems(), lambda _: True, settings=hyp_settings(database=None))


class _UnmutatedFails(Exception):
    """The unmutated kernel fails a problem a mutant failed: `failure` is its PropertyFailure."""

    def __init__(self, failure: PropertyFailure):
        super().__init__(str(failure))
        self.failure = failure


def _check_mutant(plan, unmutated, property, max_examples, settings):
    """`check` of one mutant's plan, without shrinking; a problem the mutant fails is run again on
    the `unmutated` plan, and raises _UnmutatedFails when that fails as well."""
    _refuse_nesting()
    report = CheckReport(plan.name)

    def one_problem(problem):
        try:
            _judge(plan, problem, property, report)
        except (HypothesisException, unittest.SkipTest):
            raise
        except Exception as e:  # noqa: BLE001 - whatever made the mutant fail, the kernel itself may fail too
            own = _failure_of(unmutated, problem, property)
            if own is not None:
                raise _UnmutatedFails(own) from e
            raise

    _hypothesis(given(problem=plan.space.problems())(one_problem), max_examples, settings, False)


def _failure_of(plan, problem, property):
    """The PropertyFailure of `plan`'s kernel on `problem` (its property included), or None when it passes."""
    head = "the unmutated kernel fails a problem drawn for a mutant:\n"
    try:
        out = run_problem(plan, problem=problem)
    except Exception as e:  # noqa: BLE001 - the kernel's own crash is its failure
        return PropertyFailure(f"{head}kernel {plan.name} crashes on problem {problem.call_args()}: "
                               f"{type(e).__name__}: {e}", problem)
    if out.failures:
        return PropertyFailure(head + failure_message(plan, out), problem, out)
    if property is not None:
        try:
            property(problem, out)
        except Exception as e:  # noqa: BLE001 - the caller's property, whatever it raises
            out.failures.append(f"[property] {type(e).__name__}: {e}")
            return PropertyFailure(head + failure_message(plan, out), problem, out)
    return None
