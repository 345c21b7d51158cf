"""Test assets shared by the test files and benchmarks: probe and sample kernels, PTX cross-checks,
error-location asserts."""
