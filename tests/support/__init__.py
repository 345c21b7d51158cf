"""Test assets shared by the test files: probe kernels, PTX cross-checks, error-location asserts."""
