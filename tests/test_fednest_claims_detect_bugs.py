"""Every FedNest claim can say both "holds" and "fails".

The perturbations (the smallest bug each claim that holds must catch) and the positive controls
(a case inside each refuted claim's conditions where it holds) are claim data
(:mod:`theory_checks.fednest.perturbations`), run by ``theory_checks/test_claims.py``. Here: every
FedNest claim declares them, and each refuted claim's counterexample is saved, rebuilds the same
problem and fails again, while its corrected claim holds beside it.
"""

from __future__ import annotations

import pytest

from testbed.registry import get_estimator
from tests._replay import assert_saved_and_replays
from theory_checks import fednest
from theory_checks.runner import Profile
from theory_checks.runner import run_claim

PROFILE = Profile("thorough", max_examples=5)
CLAIMS = {c.id: c for c in fednest.CLAIMS}

# refuted statement -> the corrected claim checked beside it
REFUTED = {
    "fednest.lemma22.per_client_bias": "fednest.lemma22.averaged_bias",
    "fednest.lemma22.paper_constant": "fednest.lemma22.averaged_bias",
    "fednest.minimax.per_client_indirect_zero": "fednest.minimax.averaged_indirect_zero",
}


def test_every_fednest_claim_can_hold_and_fail():
    """A claim expected to hold names its perturbation; one expected to fail, its positive
    control (the review found six refuted FedNest claims without one)."""
    for claim in CLAIMS.values():
        assert claim.paper == "FedNest"
        if claim.expected == "holds":
            assert claim.perturbation is not None, claim.id
            assert claim.positive_control is None, claim.id
        else:
            assert claim.positive_control is not None, claim.id
            assert claim.perturbation is None, claim.id
    refuted = {c.id for c in CLAIMS.values() if c.expected == "fails"}
    # (14b) and the compositional sentence hold under one of their readings (issue 32:
    # tests/test_readings.py): no longer refutations
    assert refuted == set(REFUTED)


def test_claims_are_classified():
    """Monte Carlo claims are statistical; the others are exact (finite sums over N',
    enumerated subsets, linear maps read column by column) and deterministic."""
    statistical = {c.id for c in CLAIMS.values() if c.statistical}
    assert statistical == {
        "fednest.thm31.k_rate_bilevel",
        "fednest.cor32.k_rate_minimax",
        "fednest.cor33.k_rate_compositional",
        "fednest.lemma22.abs_error_as_stated",
        "fednest.lemma22.abs_error_per_sample",
    }
    # only the K-rate claims may be undecided, and only on the fast profile
    assert {c.id for c in CLAIMS.values() if c.undecided_on} == {
        c for c in statistical if "k_rate" in c
    }
    assert all(c.undecided_on in ((), ("fast",)) for c in CLAIMS.values())


@pytest.mark.parametrize("claim_id", sorted(REFUTED))
def test_refuted_claim_fails_and_its_correction_holds(claim_id, tmp_path):
    claim = CLAIMS[claim_id]
    result = run_claim(claim, PROFILE)
    assert result.verdict == "fails as stated"
    assert_saved_and_replays(result, get_estimator(claim.estimators[0]).build, tmp_path, PROFILE)
    corrected = CLAIMS[REFUTED[claim_id]]
    assert corrected.corrects == claim_id or corrected.corrects in REFUTED
    assert run_claim(corrected, PROFILE).verdict == "holds once corrected"


def test_the_round_count_holds_as_a_budget_and_fails_as_an_exact_count():
    """Sec. 2.4's "FedNest requires 2T + N + 3 rounds" (issue 22): read as exactly, Alg. 3's
    random N' <= N - 1 refutes it on every iteration; read as a budget it holds, so the claim
    holds and says under which reading; the exact count with N' is its own claim."""
    claim = CLAIMS["fednest.rounds.paper_count_random"]
    assert claim.expected == "holds" and [r.name for r in claim.readings] == [
        "exactly",
        "at most (a budget)",
    ]
    result = run_claim(claim, PROFILE)
    assert result.verdict == "holds" and result.holding_readings == ["at most (a budget)"]
    exactly = result.readings[0]
    assert exactly.verdict == "fails as stated"
    ce = exactly.counterexample.measurement
    assert ce.measured < ce.bound  # 2T + N' + 3 < 2T + N + 3: under the budget, not equal
    assert run_claim(CLAIMS["fednest.rounds.random_truncation"], PROFILE).verdict == "holds"
