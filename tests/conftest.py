import os
import sys

import pytest
from hypothesis import HealthCheck, settings

from ptxforge.runtime.device import gpu_skip_reason

# tests/ on the path, whatever pytest's import mode: test assets live in tests/support, golden builders in tests/golden.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# PTXFORGE_REQUIRE_GPU=1 turns "no GPU, skipped" into a failure (run GPU lanes this way); the
# property-test runner reads the same switch.
from ptxforge.testing.runner import REQUIRE_GPU_ENV, gpu_required  # noqa: E402

# Bounded examples on CI (2 cores, no GPU), drawn the same way every run so that a landing never
# hangs on luck; "dev" draws afresh each run (and more), which is where new failures are found.
settings.register_profile("ci", max_examples=20, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("gpu", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config):
    # registered here as well as in pyproject.toml, so a copy of this file works on its own
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one unless "
                                       f"{REQUIRE_GPU_ENV}=1 turns the skip into a failure")
    config.addinivalue_line("markers", "may_skip(reason): a gpu test allowed to skip even under "
                                       f"{REQUIRE_GPU_ENV}=1 (an optional third-party library)")


def pytest_runtest_setup(item):
    """A gpu test without a GPU: skipped, or failed before its body runs when the GPU is required."""
    if item.get_closest_marker("gpu") is None:
        return
    reason = gpu_skip_reason()
    if reason is None:
        return
    if gpu_required():
        pytest.fail(f"{REQUIRE_GPU_ENV} is set but no GPU is usable: {reason}", pytrace=False)
    pytest.skip(f"no GPU: {reason} (set {REQUIRE_GPU_ENV}=1 to fail instead)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under the switch, a gpu test that skips itself (pytest.importorskip, pytest.skip) fails instead."""
    outcome = yield
    rep = outcome.get_result()
    if not (rep.skipped and gpu_required() and item.get_closest_marker("gpu") is not None):
        return
    if item.get_closest_marker("may_skip") is not None or hasattr(rep, "wasxfail"):
        return
    why = rep.longrepr[2] if isinstance(rep.longrepr, tuple) and len(rep.longrepr) == 3 else str(rep.longrepr)
    rep.outcome = "failed"
    rep.longrepr = f"{REQUIRE_GPU_ENV} is set, so this gpu test may not skip: {why}"
