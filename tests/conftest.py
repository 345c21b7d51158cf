import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from ptxforge.runtime.device import gpu_skip_reason

# tests/ on the path, whatever pytest's import mode: test assets live in tests/support, golden builders in tests/golden.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: Set to 1 to turn "no GPU, skipped" into a failure (run GPU lanes this way).
REQUIRE_GPU_ENV = "PTXFORGE_REQUIRE_GPU"


def gpu_required() -> bool:
    return os.environ.get(REQUIRE_GPU_ENV, "") not in ("", "0")

# Bounded examples on CI (2 cores, no GPU); more where asked.
settings.register_profile("ci", max_examples=20, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("gpu", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            if gpu_required():
                item.add_marker(pytest.mark.usefixtures("_gpu_required_but_missing"))
            else:
                item.add_marker(pytest.mark.skip(reason=f"no GPU: {reason} (set {REQUIRE_GPU_ENV}=1 to fail instead)"))


@pytest.fixture
def _gpu_required_but_missing():
    pytest.fail(f"{REQUIRE_GPU_ENV} is set but no GPU is usable: {gpu_skip_reason()}")
