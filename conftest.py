"""Test configuration for tests/ and theory_checks/: float64 by default and hypothesis profiles.

``TESTBED_HYPOTHESIS_PROFILE`` picks the profile: ``ci`` (default; derandomized, no database,
no deadline) or ``explore`` (random, many examples; for nightly runs).
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

from theory_checks import determinism  # noqa: F401  (hypothesis draws depend on seeds only)

torch.set_default_dtype(torch.float64)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist already runs one worker process per core; torch's intra-op threads on top of that
    # oversubscribe the cores (small tensor ops were measured 20-30x slower that way).
    torch.set_num_threads(1)

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=(HealthCheck.too_slow,),
)
settings.register_profile(
    "explore",
    max_examples=2000,
    deadline=None,
    suppress_health_check=(HealthCheck.too_slow,),
)
settings.load_profile(os.environ.get("TESTBED_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _seed_torch_global_rng() -> None:
    """Tests that draw with torch's global generator (``torch.randn(3)``) get the same numbers
    in every run and in any order or xdist split: the generator is reset before each test."""
    torch.manual_seed(0)
