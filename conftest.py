"""Test configuration for tests/ and theory_checks/: the session's run settings and hypothesis
profiles.

The session is an entry point: it makes its :class:`~theory_checks.settings.RunSettings`
(float64 on the CPU, the installed plugins loaded; the profile of ``$TESTBED_PROFILE``, which
tests that run claims pass on) and puts them in force once, before any test.

``TESTBED_HYPOTHESIS_PROFILE`` picks the profile: ``ci`` (default; derandomized, no database,
no deadline) or ``explore`` (random, many examples; for nightly runs).
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck
from hypothesis import settings

from theory_checks import determinism  # noqa: F401  (hypothesis draws depend on seeds only)
from theory_checks.profiles import get_profile
from theory_checks.settings import RunSettings
from theory_checks.settings import use_settings

# The test session's settings; under xdist, which already runs one worker process per core,
# one torch thread per worker (intra-op threads on top of that oversubscribe the cores: small
# tensor ops were measured 20-30x slower that way).
use_settings(
    RunSettings(profile=get_profile(), threads=1 if os.environ.get("PYTEST_XDIST_WORKER") else None)
)

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
