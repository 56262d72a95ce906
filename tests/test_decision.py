"""The decision procedure of statistical claims (theory_checks/decision.py and the runner).

A toy statistical claim ("the mean of a Gaussian sample is at most 1") exercises every path:
holds on a true claim, fails (confirmed) on a perturbation, undecided when the budget cannot
separate, a first-stage fluke that the confirmation does not confirm, the Bonferroni split, and
calibration over seeds. The evidence classes are checked for coverage at their stated rates.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from problems import QuadraticBilevel
from tests._statistical_toy import BOUND
from tests._statistical_toy import PROFILE
from tests._statistical_toy import make_toy
from tests._statistical_toy import toy_claim
from theory_checks import decision
from theory_checks.calibration import calibrate_claim
from theory_checks.calibration import format_table
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.claim import NotMeasurable
from theory_checks.claim import Perturbation
from theory_checks.claim import known_case
from theory_checks.decision import Binomial
from theory_checks.decision import Design
from theory_checks.decision import EmpiricalBernstein
from theory_checks.decision import Hoeffding
from theory_checks.decision import Normal
from theory_checks.decision import StatTest
from theory_checks.decision import StudentT
from theory_checks.decision import batch_evidence
from theory_checks.decision import clopper_pearson
from theory_checks.decision import replicates_for_half_width
from theory_checks.runner import case_rate
from theory_checks.runner import replay_counterexample
from theory_checks.runner import run_claim


def test_true_claim_holds_and_a_perturbation_fails_confirmed():
    claim = toy_claim()
    assert run_claim(claim, PROFILE, make=make_toy(0.0)).verdict == "holds"
    result = run_claim(claim, PROFILE, make=make_toy(2.0))
    assert result.verdict == "fails as stated"
    ce = result.counterexample
    assert ce.confirmation is not None and ce.confirmation.outcome == "fails"
    # the confirmation ran on a fresh stream with 4x the samples
    assert ce.confirmation.design.seed != ce.design.seed
    assert ce.confirmation.measurement.details["n"] == 4 * ce.measurement.details["n"]


def test_a_mean_on_the_edge_is_undecided_with_the_budget_that_would_decide():
    result = run_claim(toy_claim(), PROFILE, make=make_toy(BOUND - 0.05))
    assert result.verdict == "undecided"
    decision_ = result.undecided[0].decisions[0]
    assert decision_.outcome == "undecided" and decision_.budget_factor > 1.0


def test_bonferroni_splits_the_claim_rate_over_planned_cases():
    claim = toy_claim(
        examples=(known_case(QuadraticBilevel.random(1, 1, 1, 1.0, seed=3).spec(), {}),)
    )
    assert case_rate(claim, PROFILE) == pytest.approx(claim.false_fail_rate / 4)


def _fluke_check(claim: Claim, case: Case, make, design: Design) -> Measurement:
    """Fails at the first stage only: a fluke that a fresh, larger run does not repeat."""
    estimate = 5.0 if design.seed[-1] == decision.STAGE_FIRST else 0.0
    evidence = Normal(estimate, 0.01)
    return Measurement(
        estimate, BOUND, True, "mean <= bound", tests=(StatTest("mean", evidence, high=BOUND),)
    )


def test_an_unconfirmed_first_stage_failure_is_not_recorded():
    claim = dataclasses.replace(toy_claim(), check=_fluke_check)
    result = run_claim(claim, PROFILE, make=make_toy(0.0))
    assert result.verdict == "holds" and result.counterexample is None
    assert result.unconfirmed and all(r.outcome == "holds" for r in result.unconfirmed)


def test_no_measurable_case_is_undecided_not_holds():
    def never(claim, case, make, design):
        raise NotMeasurable("nothing to measure")

    claim = dataclasses.replace(toy_claim(), check=never)
    assert run_claim(claim, PROFILE, make=make_toy(0.0)).verdict == "undecided"


def test_a_statistical_check_must_return_a_test():
    def no_test(claim, case, make, design):
        return Measurement(0.0, BOUND, True)

    claim = dataclasses.replace(toy_claim(), check=no_test)
    with pytest.raises(ValueError, match="no test"):
        run_claim(claim, PROFILE, make=make_toy(0.0))


def test_replay_of_a_saved_refutation_uses_a_fresh_stream():
    claim = toy_claim()
    result = run_claim(claim, PROFILE, make=make_toy(2.0))
    saved = {"spec": result.counterexample.spec, "params": {}, "profile": "fast"}
    again = replay_counterexample(claim, saved, make_toy(2.0))
    assert again.outcome == "fails"
    assert again.design.seed not in (
        result.counterexample.design.seed,
        result.counterexample.confirmation.design.seed,
    )


def test_calibration_counts_false_failures_and_power():
    claim = toy_claim()
    holds = calibrate_claim(claim, 20, PROFILE, make=make_toy(0.0))
    assert holds.seeds == 20 and holds.false_failures == 0 and holds.consistent
    assert holds.rate_high == pytest.approx(clopper_pearson(0, 20, 0.025)[1])
    refuted = calibrate_claim(
        dataclasses.replace(claim, expected="fails"), 5, PROFILE, make=make_toy(2.0)
    )
    assert refuted.refuted == 5 and refuted.consistent
    table = format_table([holds, refuted])
    assert "toy.mean_below_bound" in table and "NO" not in table


def test_perturbed_toy_calibration_reports_inconsistency():
    """A check that fails a true claim too often is flagged by the calibration table."""

    def trigger_happy(claim, case, make, design):
        values = make().sample(design.rng(0), 10)
        # a wrong interval: the standard error divided by 100 (an overconfident check)
        evidence = StudentT(float(values.mean()), float(values.std(ddof=1)) / 1000, 9)
        return Measurement(
            evidence.estimate, BOUND, True, tests=(StatTest("mean", evidence, high=-0.1),)
        )

    claim = dataclasses.replace(toy_claim(), check=trigger_happy)
    # each stage fails with probability ~0.6 on a true claim, so some of 20 seeds fail
    summary = calibrate_claim(claim, 20, PROFILE, make=make_toy(0.0))
    assert summary.false_failures > 0 and not summary.consistent


# --------------------------------------------------------------------------- evidence


def test_decide_outcomes_and_sides():
    test = StatTest("x", Normal(0.0, 0.1), low=-1.0, high=1.0)
    assert test.decide(1e-3).outcome == "holds"
    assert StatTest("x", Normal(5.0, 0.1), low=-1.0, high=1.0).decide(1e-3).outcome == "fails"
    assert StatTest("x", Normal(-5.0, 0.1), low=-1.0, high=1.0).decide(1e-3).outcome == "fails"
    edge = StatTest("x", Normal(1.0, 0.1), low=-1.0, high=1.0).decide(1e-3)
    assert edge.outcome == "undecided" and math.isinf(edge.budget_factor)
    with pytest.raises(ValueError, match="bounded on at least one side"):
        StatTest("x", Normal(0.0, 1.0))


@pytest.mark.parametrize(
    "make_evidence",
    [
        lambda v: StudentT(float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), v.size - 1),
        lambda v: batch_evidence(v),
        lambda v: Hoeffding(float(np.clip(v, -4, 4).mean()), 8.0, v.size),
        lambda v: EmpiricalBernstein.of(np.clip(v, -4, 4), 8.0),
    ],
)
def test_false_failure_rate_at_the_edge_is_at_most_the_stated_rate(make_evidence):
    """True mean exactly on the bound (the hardest true case): fails in at most ``rate``."""
    rng = np.random.default_rng(11)
    rate, trials = 0.05, 2000
    fails = sum(
        StatTest("m", make_evidence(rng.standard_normal(12)), high=0.0).decide(rate).outcome
        == "fails"
        for _ in range(trials)
    )
    # Why the allowance: 4 binomial sd of 2000 trials at p = 0.05.
    assert fails / trials <= rate + 4 * math.sqrt(rate * (1 - rate) / trials)


def test_binomial_bounds_are_exact_clopper_pearson():
    low, high = clopper_pearson(3, 20, 0.025)
    # reference values from scipy.stats.binomtest(3, 20).proportion_ci(0.95, 'exact')
    from scipy.stats import binomtest

    ci = binomtest(3, 20).proportion_ci(0.95, "exact")
    assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    evidence = Binomial(3, 20)
    assert evidence.estimate == 0.15 and evidence.upper(0.025) == pytest.approx(ci.high)


def test_sample_size_reaches_the_half_width():
    n = replicates_for_half_width(2.0, 0.5, 1e-3)
    assert decision.t_quantile(1e-3, n - 1) * 2.0 / math.sqrt(n) <= 0.5
    assert decision.t_quantile(1e-3, n - 2) * 2.0 / math.sqrt(n - 1) > 0.5


def test_design_streams_differ_by_stage_and_calibration_seed():
    first = decision.first_design(7, 0, 1e-3, "fast")
    assert first.rng(1).random() != first.confirmation().rng(1).random()
    assert first.rng(1).random() == decision.first_design(7, 0, 1e-3, "fast").rng(1).random()
    assert first.rng(1).random() != decision.first_design(7, 1, 1e-3, "fast").rng(1).random()
    assert first.confirmation().scale == decision.CONFIRMATION_SCALE
    assert first.replay().seed not in (first.seed, first.confirmation().seed)


def test_claim_rejects_a_deterministic_claim_marked_undecided():
    with pytest.raises(ValueError, match="only a statistical claim"):
        toy_claim(decision="deterministic", undecided_on=("fast",))


def test_perturbation_is_data():
    p = Perturbation("name", "what", make_toy(2.0))
    assert p.max_examples == 5 and not p.slow
