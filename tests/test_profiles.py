"""The profile is a parameter of a run, not import-time state (issue 13).

Claims are built once; what depends on the profile (a cap on drawn cases, a Monte Carlo design,
a smaller case family) is resolved from the profile the run is given, whatever
``$TESTBED_PROFILE`` said when the claims were imported.
"""

from __future__ import annotations

from theory_checks.claim import PerProfile
from theory_checks.registry import CLAIM_DB, get_claim
from theory_checks.runner import (
    PROFILES,
    active_profile,
    claim_fingerprint,
    fast_profile,
    planned_cases,
    running_on,
)

FAST, THOROUGH = PROFILES["fast"], PROFILES["thorough"]


def test_profile_dependent_fields_are_resolved_by_the_run(monkeypatch):
    monkeypatch.setenv("TESTBED_PROFILE", "thorough")  # what an old-style import would read
    claim = get_claim("comparison.aggitd_fewer_rounds_than_fednest")
    assert isinstance(claim.max_examples, PerProfile)
    # 1 drawn case on fast, 3 on thorough (theory_checks/comparison/checks.py), from the same object
    assert planned_cases(claim, FAST) == 1 + len(claim.examples)
    assert planned_cases(claim, THOROUGH) == 3 + len(claim.examples)
    assert claim_fingerprint(claim, FAST) != claim_fingerprint(claim, THOROUGH)


def test_the_running_profile_is_the_one_given_to_the_run(monkeypatch):
    monkeypatch.setenv("TESTBED_PROFILE", "thorough")
    assert not fast_profile() and active_profile() is THOROUGH  # outside a run: the default
    with running_on(FAST):
        assert fast_profile()
        with running_on(THOROUGH):
            assert not fast_profile()
        assert fast_profile()
    assert active_profile() is THOROUGH


def test_no_claim_field_was_resolved_at_import():
    # every profile-dependent cap is still a PerProfile (nothing evaluated when the module loaded)
    per_profile = [c.id for c in CLAIM_DB if isinstance(c.max_examples, PerProfile)]
    assert len(per_profile) >= 20
    assert all(c.max_examples is None or isinstance(c.max_examples, (int, PerProfile))
               for c in CLAIM_DB)
