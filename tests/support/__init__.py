"""Test assets shared by the tests and benchmarks: sample kernels and helpers that are not part of
the package."""
