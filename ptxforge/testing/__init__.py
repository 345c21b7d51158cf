"""Testing support for ptxforge users: Hypothesis strategies, reference kernels and mutants.

`ptxforge.testing.strategies` holds Hypothesis strategies drawn from the same legal-form
tables the validator uses; import them to property-test your own kernels.
`ptxforge.testing.kernels` has small reference kernels (saxpy) for tests and benchmarks, and
`ptxforge.testing.mutants` plants synchronization bugs (a dropped bar.sync, a looser
wait_group, a missing mbarrier wait) to show that a test catches them.
GPU detection is `ptxforge.runtime.gpu_available` / `gpu_skip_reason`.
"""
