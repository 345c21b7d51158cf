"""Testing support for ptxforge users: property tests of kernels, Hypothesis strategies, mutants.

Property-test a kernel (docs/property-testing.md):

    space = ProblemSpace(sizes=[Size("n", 0, 5000, tile=256)],
                         arrays=[Array("x", ("n",)), Array("y", ("n",), role="out")],
                         grid=lambda p: cdiv(p.n, 256), block=256, reference=lambda x: 2 * x)
    check(module, space)            # interpreter always, GPU when present; shrinks a failure
    check(Int4Gemm())               # schedules bring their own space (schedule_problems)
    mutation_check(module, space)   # which planted bugs the property test lets through

`problem` (ProblemSpace, Size, Array, Scalar), `runner` (check, the runner), `report` (failure
texts), `tolerance` (exact, ulps, relative), `mutation` (mutation_check) and `schedule_problems`
(spaces of the schedules).
`strategies` holds Hypothesis strategies drawn from the same legal-form tables the validator
uses; `kernels` small reference kernels (saxpy, transpose); `mutants` planted bugs (a dropped
bar.sync, a looser wait_group, a missing mbarrier wait, an off-by-one guard).
GPU detection is `ptxforge.runtime.gpu_available` / `gpu_skip_reason`.
"""

__all__ = ["REQUIRE_GPU_ENV", "gpu_required", "ProblemSpace", "Problem", "Size", "Array", "Scalar", "cdiv",
           "check", "check_schedules", "check_problem", "run_problem", "property_test", "PropertyFailure",
           "CheckReport", "Outcome", "exact", "ulps", "relative", "Tolerance", "mutation_check", "MutationReport",
           "problem_space", "register_problem_space"]

_LAZY = {
    "ProblemSpace": ".problem", "Problem": ".problem", "Size": ".problem", "Array": ".problem",
    "Scalar": ".problem", "cdiv": ".problem",
    "check": ".runner", "check_schedules": ".runner", "check_problem": ".runner", "run_problem": ".runner",
    "property_test": ".runner", "REQUIRE_GPU_ENV": ".runner", "gpu_required": ".runner",
    "PropertyFailure": ".runner", "CheckReport": ".runner", "Outcome": ".runner",
    "exact": ".tolerance", "ulps": ".tolerance", "relative": ".tolerance", "Tolerance": ".tolerance",
    "mutation_check": ".mutation", "MutationReport": ".mutation",
    "problem_space": ".schedule_problems", "register_problem_space": ".schedule_problems",
}


def __getattr__(name):
    # the runner pulls in Hypothesis and the interpreter: load on first use
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
