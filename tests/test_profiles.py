"""The profile is a parameter of a run, not import-time state (issues 13 and 26).

Claims are built once; what depends on the profile (a cap on drawn cases, a Monte Carlo design,
a smaller case family, a check's budget) is resolved from the profile the run is given, whatever
``$TESTBED_PROFILE`` says: the profile travels one way, as an argument (no context variable, no
ambient ``fast_profile()``; tests/test_theory_checks_structure.py scans for them).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import given
from hypothesis import seed
from hypothesis import settings

from theory_checks.claim import PerProfile
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import get_claim
from theory_checks.runner import PROFILES
from theory_checks.runner import claim_fingerprint
from theory_checks.runner import planned_cases
from theory_checks.runner import under_reading

FAST, THOROUGH = PROFILES["fast"], PROFILES["thorough"]


def test_profile_dependent_fields_are_resolved_by_the_run(monkeypatch):
    monkeypatch.setenv("TESTBED_PROFILE", "thorough")  # what an old-style import would read
    claim = get_claim("comparison.aggitd_fewer_rounds_than_fednest")
    assert isinstance(claim.max_examples, PerProfile)
    # 1 drawn case on fast, 3 on thorough (the claim's max_examples), from the same object
    assert planned_cases(claim, FAST) == 1 + len(claim.examples)
    assert planned_cases(claim, THOROUGH) == 3 + len(claim.examples)
    assert claim_fingerprint(claim, FAST) != claim_fingerprint(claim, THOROUGH)


def first_case(strategy):
    """The first case the strategy draws with seed 0 (how the runner draws: an explicit seed)."""
    drawn = []

    @seed(0)
    @settings(
        max_examples=1,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def draw(case):
        drawn.append(case)

    draw()
    return drawn[0]


def test_cases_and_budgets_are_those_of_the_profile_given(monkeypatch):
    monkeypatch.setenv("TESTBED_PROFILE", "thorough")  # read by no claim: only an entry point's
    grid = get_claim("fedmsa.rate.M_stochastic")
    assert isinstance(grid.strategy, PerProfile)
    # the check's grid of client counts travels in the case it is given
    assert first_case(grid.cases("fast")).params["m_grid"] == (1, 2, 4)
    assert first_case(grid.cases("thorough")).params["m_grid"] == (1, 2, 4, 8)
    budget = get_claim("fedmsa.rate.K_at_tau_zero")
    assert first_case(budget.cases("fast")).params["round_budget"] == 400
    assert first_case(budget.cases("thorough")).params["round_budget"] == 2000
    # the fast profile's instances are smaller: client 0 of one dimension on fast
    assert first_case(grid.cases("fast")).problem.dim_x == 1


def test_a_reading_keeps_the_cases_of_each_profile():
    claim = get_claim("hgp.influence.r2_retraining")
    assert isinstance(claim.strategy, PerProfile) and claim.readings
    reading = claim.readings[0]
    read = under_reading(claim, reading)
    for profile, draws in (("fast", 3), ("thorough", 5)):
        case = first_case(read.cases(profile))
        assert case.params["draws"] == draws
        assert {k: case.params[k] for k in reading.params} == dict(reading.params)


def test_no_claim_field_was_resolved_at_import():
    # every profile-dependent cap is still a PerProfile (nothing evaluated when the module loaded)
    per_profile = [c.id for c in CLAIM_DB if isinstance(c.max_examples, PerProfile)]
    assert len(per_profile) >= 20
    assert all(
        c.max_examples is None or isinstance(c.max_examples, (int, PerProfile)) for c in CLAIM_DB
    )


def test_a_per_profile_value_is_resolved_by_name_and_refuses_other_names():
    """The review found any profile other than "fast" silently given the thorough value."""
    value = PerProfile("small", "large")
    assert (value.resolve("fast"), value.resolve("thorough")) == ("small", "large")
    with pytest.raises(ValueError, match="'perturbation'"):
        value.resolve("perturbation")
