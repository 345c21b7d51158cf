"""The property-test runner: draw problems, run them on the interpreter and the GPU, judge, shrink.

    from ptxforge.testing import check, property_test

    check(module, space)                    # raises PropertyFailure with the smallest failing problem
    check(Int4Gemm())                       # schedules bring their own space (schedule_problems.py)
    check_schedules(gemm_schedules())       # a drawn schedule and a drawn problem per example

    @property_test(module, space)           # the same as a pytest test function
    def test_transpose(problem, outcome):   # optional extra assertions on each problem
        ...

Each problem drawn from `space.problems()` runs on every chosen backend:

* "interp": the CPU interpreter (ptxforge.interp), with every check on and per-byte access
  counts.  Used whenever the kernel's instructions are modelled; a kernel it cannot model
  (InterpUnsupported) runs on the GPU only, unless the interpreter was asked for by name.
* "gpu": the device (ptxforge.runtime), used when one is present, or demanded by
  PTXFORGE_REQUIRE_GPU=1 (then a missing GPU fails the check instead of skipping it).

`backends="auto"` (default) picks as above; a tuple such as ("interp",) or ("interp", "gpu")
demands exactly those (a missing one is a failure).  What must hold, per problem:

1. every output equals the reference: integers exactly, floats by the output's tolerance
   (testing.tolerance: exact bits by default, `ulps(n)` or `relative(rtol, atol)`), except that
   an element holding the output's poison (never written), or expected to, matches only bit for
   bit;
2. nothing is written outside the outputs: the interpreter counts no write to any byte of an
   input array (and on the GPU the inputs come back unchanged); an output declared
   `write_once` has no byte written twice;
3. the interpreter reports no findings (races, reads of unfinished async copies, out-of-bounds
   or misaligned accesses, partial-warp collectives, barrier misuse);
4. integer outputs (and float outputs compared exactly) are bit-identical on the interpreter
   and the GPU.

The interpreter runs first; a problem in which it finds an out-of-bounds or misaligned access
has failed already and is not launched on the GPU, where the stray access could fault the
context (and with it every later launch of the process).

A failure raises PropertyFailure; Hypothesis shrinks it first, so the report names the
smallest problem it found: its sizes and launch, the first differing elements with their
indices, the findings with the Python lines that emitted the instructions, and a snippet that
reruns that one problem (`check_problem`).
"""

from __future__ import annotations

import functools
import inspect
import os
import unittest
from dataclasses import dataclass, field

import numpy as np
from hypothesis import HealthCheck, Phase, given, reject, settings as hyp_settings

from ..builder import KernelBuilder
from ..kernel import Kernel
from ..errors import ValidationError
from ..module import Module
from ..runtime.device import gpu_skip_reason
from .problem import Problem, ProblemSpace
from .report import differences, failure_message, indent
from .tolerance import exact

__all__ = ["check", "check_schedules", "check_problem", "run_problem", "property_test", "PropertyFailure",
           "CheckReport", "Outcome",
           "BACKENDS", "choose_backends", "REQUIRE_GPU_ENV", "gpu_required"]

BACKENDS = ("interp", "gpu")
#: Set to 1 to make a missing GPU a failure: check's "auto" then demands the GPU backend (GPU lanes set it).
REQUIRE_GPU_ENV = "PTXFORGE_REQUIRE_GPU"
#: Interpreter findings that keep a problem off the GPU (the access could fault the device).
UNSAFE_ON_GPU = frozenset({"oob", "misaligned"})
#: How many written ranges a report lists.
SHOWN = 5


class PropertyFailure(AssertionError):
    """A problem on which the kernel broke a property; `problem` and `outcome` say which and how."""

    def __init__(self, message: str, problem: Problem | None = None, outcome: "Outcome | None" = None):
        super().__init__(message)
        self.problem = problem
        self.outcome = outcome


class MutantNotApplicable(Exception):
    """A mutation that has nothing to change in this problem's kernel (the problem is skipped)."""


@dataclass
class Outcome:
    """What one problem did on each backend: its outputs, the interpreter's report, the failures."""

    problem: Problem
    kernel: Kernel
    expected: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)  # {backend: {array name: array after the run}}
    report: object = None  # the interpreter's Report (with access counts), when it ran
    skipped: dict = field(default_factory=dict)  # {backend: why it did not run}
    failures: list = field(default_factory=list)  # readable paragraphs

    @property
    def ok(self) -> bool:
        """Whether every backend's run passed every check."""
        return not self.failures


@dataclass
class CheckReport:
    """What a passing check ran: how many problems, on which backends, the largest sizes seen."""

    kernel: str
    problems: int = 0
    runs: dict = field(default_factory=dict)  # {backend: problems run there}
    skipped: dict = field(default_factory=dict)  # {backend: why not}
    largest: dict = field(default_factory=dict)  # {size name: largest value drawn}

    def add(self, outcome: Outcome):
        """Count one passing problem."""
        self.problems += 1
        for b in outcome.outputs:
            self.runs[b] = self.runs.get(b, 0) + 1
        self.skipped.update(outcome.skipped)
        for k, v in outcome.problem.sizes.items():
            self.largest[k] = max(self.largest.get(k, v), v)

    def __str__(self) -> str:
        """One line: the problems passed, runs per backend, each backend not used with the first words of
        why (the whole reason is in `skipped`), and the largest sizes."""
        runs = ", ".join(f"{n} on {b}" for b, n in self.runs.items()) or "nothing run"
        skip = "".join(f"; {b} not used: {why.split(' (')[0]}" for b, why in self.skipped.items())
        return f"{self.kernel}: {self.problems} problems passed ({runs}{skip}); largest {self.largest}"


def _missing_gpu(chosen, backends) -> dict:
    """{"gpu": why} when "auto" chose no GPU (there is no usable one), else {}: what reports say was not used."""
    if backends == "auto" and "gpu" not in chosen:
        return {"gpu": f"no usable GPU ({gpu_skip_reason()}); set {REQUIRE_GPU_ENV}=1 to make that a failure"}
    return {}


# ---------------------------------------------------------------- choosing backends

def gpu_required() -> bool:
    """Whether PTXFORGE_REQUIRE_GPU asks for the GPU (set, and not "0")."""
    return os.environ.get(REQUIRE_GPU_ENV, "") not in ("", "0")


def choose_backends(backends="auto") -> tuple:
    """(backends to run, backends demanded) for a `backends=` argument; raises PropertyFailure when a
    demanded GPU is missing (by name, or through PTXFORGE_REQUIRE_GPU=1)."""
    if backends == "auto":
        chosen, demanded = ["interp"], set()
        if gpu_skip_reason() is None or gpu_required():
            chosen.append("gpu")
            if gpu_required():
                demanded.add("gpu")
    else:
        chosen = [backends] if isinstance(backends, str) else list(backends)
        unknown = [b for b in chosen if b not in BACKENDS]
        if unknown or not chosen:
            raise ValueError(f"backends must be 'auto' or some of {BACKENDS}, got {backends!r}")
        demanded = set(chosen)
    if "gpu" in chosen:
        why = gpu_skip_reason()
        if why is not None:
            switch = f" ({REQUIRE_GPU_ENV}=1)" if backends == "auto" else ""
            raise PropertyFailure(f"the GPU backend is demanded{switch} but no GPU is usable: {why}")
    return tuple(chosen), frozenset(demanded)


# ---------------------------------------------------------------- resolving what to run

def _as_kernel(obj, name=None) -> Kernel:
    from ..interp.launch import resolve_kernel
    return resolve_kernel(obj, name)


class _Plan:
    """A target, its space, the backends and an optional mutation, ready to run problems."""

    def __init__(self, target, space, kernel_name, backends, transform=None):
        if space is None:
            from .schedule_problems import problem_space
            space = problem_space(target)
            self.label = type(target).__name__
        else:
            self.label = None
        if not isinstance(space, ProblemSpace):
            raise TypeError(f"check needs a ProblemSpace, got {type(space).__name__}")
        self.space = space
        self.fixed = None
        if space.kernel is None:
            if target is None:
                raise ValueError("check needs a kernel (Module, Kernel, KernelBuilder) or a space with kernel=")
            if isinstance(target, KernelBuilder):
                target = target.finish()
            self.fixed = _as_kernel(target, kernel_name)
        self.kernel_name = kernel_name
        self.backends, self.demanded = choose_backends(backends)
        self.not_chosen = _missing_gpu(self.backends, backends)
        self.transform = transform
        self.interp_unsupported = None
        self._loaded = {}
        self._transformed = {}

    def kernel_for(self, p: Problem) -> Kernel:
        k = self.fixed if self.fixed is not None else _as_kernel(self.space.kernel(p), self.kernel_name)
        if self.transform is not None:
            hit = self._transformed.get(id(k))
            if hit is not None and hit[0] is k:
                return hit[1]  # one mutated kernel per kernel: the interpreter compiles it once
            try:
                mutated = self.transform(k)
            except ValidationError as e:  # the mutation finds nothing to change in this variant
                raise MutantNotApplicable(str(e)) from None
            self._transformed[id(k)] = (k, mutated)
            return mutated
        return k

    @property
    def name(self) -> str:
        if self.space.name:
            return self.space.name
        return self.fixed.name if self.fixed is not None else (self.label or "kernel")

    def gpu_function(self, kernel: Kernel):
        hit = self._loaded.get(id(kernel))
        if hit is None or hit[0] is not kernel:
            from ..runtime import load
            hit = (kernel, load(Module([kernel]))[kernel.name])
            self._loaded[id(kernel)] = hit
        return hit[1]


# ---------------------------------------------------------------- one problem

def run_problem(plan_or_target, space=None, problem=None, *, kernel=None, backends="auto",
                transform=None, **values) -> Outcome:
    """Run one Problem (given, or `space.make(**values)`, as `check_problem` takes it) on the backends and judge
    it; the Outcome lists failures (nothing raised)."""
    plan = plan_or_target if isinstance(plan_or_target, _Plan) else _Plan(plan_or_target, space, kernel, backends,
                                                                        transform)
    sp = plan.space
    p = problem if problem is not None else sp.make(**values)
    k = plan.kernel_for(p)
    out = Outcome(p, k, skipped=dict(plan.not_chosen))
    out.expected = sp.expected(p)
    names = [q.name for q in k.params]
    for backend in sorted(plan.backends, key=BACKENDS.index):  # the interpreter first
        if backend == "interp":
            if not sp.interpretable:
                why = "the space runs on the GPU only (its launch needs device addresses)"
                if "interp" in plan.demanded:
                    out.failures.append(f"[interp] cannot run this problem: {why}")
                else:
                    out.skipped["interp"] = why
                continue
            if plan.interp_unsupported is not None and "interp" not in plan.demanded:
                out.skipped["interp"] = plan.interp_unsupported
                continue
            _run_interp(plan, k, p, names, out)
        elif out.report is not None and any(f.kind in UNSAFE_ON_GPU for f in out.report.findings):
            # already failed; on the device the stray access could fault the context for every later launch
            out.skipped["gpu"] = "not launched: the interpreter found out-of-bounds or misaligned accesses"
        else:
            _run_gpu(plan, k, p, names, out)
    if not out.outputs and not out.failures:
        raise unittest.SkipTest(f"no backend can run {k.name}: " + "; ".join(f"{b}: {w}" for b, w in
                                                                              out.skipped.items()))
    _compare_backends(sp, out)
    return out


def _arg_names(args, param_names, arrays) -> dict:
    """{array name: parameter name} for the arrays among the arguments (first parameter wins)."""
    by_id = {id(v): n for n, v in arrays.items()}
    found = {}
    for pname, a in zip(param_names, args):
        n = by_id.get(id(a))
        if n is not None and n not in found:
            found[n] = pname
    return found


def _run_interp(plan, k, p, names, out):
    from ..interp import InterpUnsupported, run
    sp = plan.space
    arrays = p.fresh_arrays()
    if sp.interp_args is not None:
        args = sp.interp_args(p, arrays)
    else:
        args = sp.kernel_args(p, arrays, names, f"kernel {k.name}")
    try:
        report = run(k, grid=p.grid, block=p.block, args=args, shared=p.shared, check=False, count_accesses=True)
    except InterpUnsupported as e:
        if "interp" in plan.demanded:
            out.failures.append(f"[interp] the interpreter does not model this kernel:\n{indent(str(e))}")
        else:
            plan.interp_unsupported = str(e).splitlines()[0]
            out.skipped["interp"] = plan.interp_unsupported
        return
    out.report = report
    out.outputs["interp"] = arrays
    if report.findings:
        out.failures.append(f"[interp] {len(report.findings)} finding(s):\n" +
                            "\n".join(indent(str(f)) for f in report.findings))
    params = _arg_names(args, names, arrays)
    for a in sp.arrays:
        if a.name not in params:
            continue
        counts = report.accesses[params[a.name]]
        if a.write_once and (counts.writes > 1).any():
            twice = np.flatnonzero(counts.writes.reshape(-1) > 1)
            where = ", ".join(str(int(b)) for b in twice[:SHOWN]) + (" ..." if len(twice) > SHOWN else "")
            out.failures.append(f"[interp] output {a.name} (parameter {params[a.name]}) has {len(twice)} byte(s) "
                                f"written more than once (up to {int(counts.writes.max())} times), at byte offsets "
                                f"{where}")
        if a.is_output:
            continue
        if counts.writes.any():
            ranges = counts.written_ranges()
            shown = ", ".join(f"[{s}, {e})" for s, e in ranges[:SHOWN]) + (" ..." if len(ranges) > SHOWN else "")
            out.failures.append(f"[interp] wrote outside the outputs: input {a.name} (parameter "
                                f"{params[a.name]}), {int((counts.writes > 0).sum())} byte(s) at byte offsets "
                                f"{shown}")
    _compare_reference(sp, "interp", arrays, out)


def _run_gpu(plan, k, p, names, out):
    from ..runtime import InOut
    sp = plan.space
    arrays = p.fresh_arrays()
    try:
        if sp.device is not None:
            sp.device(p, arrays)
        else:
            args = sp.kernel_args(p, arrays, names, f"kernel {k.name}")
            wrapped = [InOut(a) if any(a is v for v in arrays.values()) else a for a in args]
            plan.gpu_function(k)(p.grid, p.block, *wrapped, shared=p.shared)
    except Exception as e:  # a launch or JIT error is this problem's failure, not the runner's
        out.failures.append(f"[gpu] the launch failed: {type(e).__name__}: {e}")
        return
    out.outputs["gpu"] = arrays
    for a in sp.arrays:
        if not a.is_output and a.name in arrays:
            before, after = p.initial[a.name], arrays[a.name]
            if before.tobytes() != after.tobytes():
                changed = np.flatnonzero(before.reshape(-1).view(np.uint8) != after.reshape(-1).view(np.uint8))
                out.failures.append(f"[gpu] wrote outside the outputs: input {a.name} changed in "
                                    f"{len(changed)} byte(s), first at byte offset {int(changed[0])}")
    _compare_reference(sp, "gpu", arrays, out)


def _compare_reference(sp, backend, arrays, out):
    for a in sp.outputs:  # ProblemSpace.expected gave every output, in its shape
        got, want = arrays[a.name], out.expected[a.name]
        tol = a.tolerance or exact()
        ok = tol.passes(got, want, bf16=a.bf16, poison=a.poison)
        if not ok.all():
            out.failures.append(f"[{backend}] output {a.name} differs from the reference ({tol.describe()}):\n"
                                + indent(differences(a, got, want, ok)))


def _compare_backends(sp, out):
    if "interp" not in out.outputs or "gpu" not in out.outputs:
        return
    for a in sp.outputs:
        tol = a.tolerance or exact()
        if (a.container.kind == "f" or a.bf16) and tol.mode != "exact":
            continue  # floats compared within a tolerance may round differently on the two
        gi, gg = out.outputs["interp"][a.name], out.outputs["gpu"][a.name]
        ok = exact().passes(gg, gi, bf16=a.bf16)
        if not ok.all():
            out.failures.append(f"[interp vs gpu] output {a.name} differs between the backends (bit-exact):\n"
                                + indent(differences(a, gg, gi, ok, got_name="gpu", want_name="interp")))


# ---------------------------------------------------------------- the public calls

def check_problem(target=None, space=None, problem=None, *, kernel=None, backends="auto", transform=None,
                  **values) -> Outcome:
    """Run one problem (given, or `space.make(**values)`) and raise PropertyFailure if it fails.

    target/space as for `check`.  Returns the Outcome of a passing problem.
    """
    plan = _Plan(target, space, kernel, backends, transform)
    p = problem if problem is not None else plan.space.make(**values)
    out = run_problem(plan, problem=p)
    if out.failures:
        raise PropertyFailure(failure_message(plan, out), p, out)
    return out


def check(target=None, space=None, *, kernel=None, backends="auto", property=None, max_examples=None,
          settings=None, shrink=True, transform=None) -> CheckReport:
    """Property-test `target` over `space`; raise PropertyFailure (shrunk) or return a CheckReport.

    target: a Module (with `kernel=` its entry's name when it has several), a Kernel or a
    KernelBuilder; or a schedule (Int4Gemm, Int8Gemm, TileCopy, ...), whose space comes from
    testing.schedule_problems when `space` is None.  backends: "auto" or a tuple of
    "interp" / "gpu" (see the module docstring).  property: an optional function
    (problem, outcome) run after the built-in checks pass, for the caller's own assertions.
    max_examples / settings: Hypothesis settings (default: the loaded profile; its phases are kept,
    less "explain", but the deadline is off and slow or large problems are no health-check failure:
    `SUPPRESSED`).  shrink=False
    stops at the first failure without shrinking.  transform: Kernel -> Kernel applied before
    running (how mutants are run).
    """
    _refuse_nesting()
    plan = _Plan(target, space, kernel, backends, transform)
    _require_a_backend(plan)
    report = CheckReport(plan.name)
    report.skipped.update(plan.not_chosen)

    def one_problem(problem):
        _judge(plan, problem, property, report)

    _hypothesis(given(problem=plan.space.problems())(one_problem), max_examples, settings, shrink)
    return report


def check_schedules(schedules, *, space_options=None, backends="auto", property=None, max_examples=None,
                    settings=None, shrink=True) -> CheckReport:
    """Property-test a family of schedules: each example draws a schedule from the Hypothesis
    strategy `schedules` (e.g. testing.gemm_strategies.gemm_schedules()) and a problem from its
    space (schedule_problems.problem_space(schedule, **space_options)); judged as in `check`."""
    from hypothesis import strategies as st
    from .schedule_problems import problem_space
    _refuse_nesting()
    chosen, _ = choose_backends(backends)  # a demanded, missing GPU fails before anything is drawn
    plans: dict = {}

    def plan_for(s):
        if s not in plans:
            plans[s] = _Plan(s, problem_space(s, **(space_options or {})), None, backends)
        return plans[s]

    report = CheckReport("schedules")
    report.skipped.update(_missing_gpu(chosen, backends))

    def one_problem(schedule_and_problem):
        s, problem = schedule_and_problem
        _judge(plan_for(s), problem, property, report)

    drawn = schedules.flatmap(lambda s: st.tuples(st.just(s), plan_for(s).space.problems()))
    _hypothesis(given(schedule_and_problem=drawn)(one_problem), max_examples, settings, shrink)
    return report


def _require_a_backend(plan):
    """Before drawing anything: a space only the GPU runs, checked where there is none (or the
    interpreter demanded for it), is skipped (or fails) at once."""
    if plan.space.interpretable:
        return
    why = "the space runs on the GPU only (its launch needs device addresses)"
    if "interp" in plan.demanded:
        raise PropertyFailure(f"{plan.name}: the interpreter backend is demanded, but {why}")
    if "gpu" not in plan.backends:
        raise unittest.SkipTest(f"{plan.name}: no GPU here ({gpu_skip_reason()}) and {why}")


def _judge(plan, problem, property, report):
    try:
        out = run_problem(plan, problem=problem)
    except MutantNotApplicable:
        reject()
    if out.failures:
        raise PropertyFailure(failure_message(plan, out), problem, out)
    if property is not None:
        property(problem, out)
    report.add(out)


def _refuse_nesting():
    from hypothesis import currently_in_test_context
    if currently_in_test_context():
        raise RuntimeError(
            "check runs its own Hypothesis loop, so it cannot run inside a @given test (Hypothesis refuses nested "
            "@given). Draw the schedule and the problem together with check_schedules(strategy), or draw a "
            "problem yourself (data.draw(space.problems())) and call check_problem(target, space, problem)")


#: Health checks the runner suppresses besides the settings' own: interpreter runs are slow, and problems large.
SUPPRESSED = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)


def _hypothesis(test, max_examples, settings, shrink):
    """Run the @given `test` under `settings` (default: the loaded profile), keeping its phases but for
    "explain" (and "shrink" when `shrink` is False), with no deadline and SUPPRESSED health checks added."""
    if settings is not None and not isinstance(settings, hyp_settings):
        raise TypeError(f"settings must be a hypothesis.settings (e.g. settings(max_examples=20, derandomize=True)), "
                        f"or None for the loaded profile, got {type(settings).__name__}")
    base = settings if settings is not None else hyp_settings.default
    # no "explain" phase: it reruns the failure many times to word a hint the report already gives
    phases = [ph for ph in base.phases if ph is not Phase.explain and (shrink or ph is not Phase.shrink)]
    options = {"deadline": None, "phases": phases,
               "suppress_health_check": list(dict.fromkeys([*base.suppress_health_check, *SUPPRESSED]))}
    if max_examples is not None:
        whole = isinstance(max_examples, (int, np.integer)) and not isinstance(max_examples, (bool, np.bool_))
        if not whole or max_examples < 1:
            raise (ValueError if whole else TypeError)(
                f"max_examples must be a whole number >= 1 (problems to draw), or None for the loaded profile's, "
                f"got {max_examples!r}")
        options["max_examples"] = int(max_examples)
    hyp_settings(base, **options)(test)()


def property_test(target=None, space=None, **options):
    """Decorator: turn a function (problem, outcome) -> None into a pytest test that runs `check`.

    The decorated function is the caller's extra property (it may be empty: `pass`), called on
    every problem after the built-in checks with (problem, outcome), (problem) or nothing, as many
    as it takes (*args: both); the test takes no arguments.  `options` are those
    of `check` (kernel=, backends=, max_examples=, settings=, ...).
    """
    def wrap(fn):
        @functools.wraps(fn)
        def test():
            params = inspect.signature(fn).parameters.values()
            takes = 2 if any(q.kind is q.VAR_POSITIONAL for q in params) else len(params)
            prop = (lambda p, o: fn(p, o)) if takes >= 2 else (lambda p, o: fn(p)) if takes == 1 else \
                (lambda p, o: fn())
            check(target, space, property=prop, **options)
        test.__signature__ = inspect.Signature()  # pytest must not see fn's parameters as fixtures
        del test.__wrapped__
        return test
    return wrap


#: The decorator form of `check`: `@check.test(kernel, space)` is `@property_test(kernel, space)`.
check.test = property_test
