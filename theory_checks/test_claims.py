"""Every registered claim, checked on hypothesis-drawn problems (the ``theory`` tier).

The profile comes from ``TESTBED_PROFILE`` (``fast`` in ``tox -e py``, ``thorough`` in
``tox -e theory``). Three properties per claim, so that each check is shown able to say both
"holds" and "fails":

- its verdict is the one the testbed expects on the profile (a claim expected to fail produces a
  saved counterexample, re-confirmed on fresh seeds when statistical);
- a claim expected to hold catches its perturbation (the smallest bug that matters): the
  perturbed estimator fails as stated and its counterexample replays; costly perturbations are
  marked ``slow`` and run in ``tox -e theory`` only;
- a claim expected to fail holds on its positive control (a case inside its conditions).
"""

from __future__ import annotations

import json

import pytest

from results_format.evidence import companion_problem
from tests._replay import assert_perturbation_detected
from theory_checks.calibration import calibrate_claim
from theory_checks.controls import power_profile
from theory_checks.controls import run_positive_control
from theory_checks.registry import BUILTIN_CLAIMS
from theory_checks.registry import CLAIM_DB
from theory_checks.registry import get_claim
from theory_checks.runner import claim_runs
from theory_checks.runner import get_profile
from theory_checks.runner import run_claim
from theory_checks.runner import write_claim_result

RUNS = claim_runs(CLAIM_DB)
PERTURBED = [c for c in CLAIM_DB if c.perturbation is not None]
CONTROLLED = [c for c in CLAIM_DB if c.positive_control is not None]


@pytest.mark.theory
@pytest.mark.parametrize(("claim", "estimator"), RUNS, ids=[f"{c.id}@{e}" for c, e in RUNS])
def test_claim_verdict_is_as_expected(claim, estimator, tmp_path):
    """Each claim on its own estimator and on every registered variant that lists it."""
    profile = get_profile()
    result = run_claim(claim, profile, estimator=estimator)
    assert result.cases or result.counterexample or result.undecided, (
        f"{claim.id}: no case was measured"
    )
    assert result.as_expected, (
        f"{claim.id}: verdict {result.verdict!r}, expected one of "
        f"{claim.expected_verdicts(profile.name)}"
        + (
            f" (counterexample {result.counterexample.problem_id}: measured "
            f"{result.counterexample.measurement.measured:.6g} vs "
            f"{result.counterexample.measurement.bound:.6g})"
            if result.counterexample
            else ""
        )
    )
    if result.verdict in ("holds", "holds once corrected"):
        # issue 32: a "holds" whose bound leaves more than 10x room names the companion claims
        # that give it power (results_format.evidence), read back from its results file
        path = write_claim_result(result, tmp_path, profile)
        record = json.loads(path.read_text())
        assert companion_problem(record, {c.id for c in CLAIM_DB}) is None, companion_problem(
            record, {c.id for c in CLAIM_DB}
        )
    if result.verdict == "fails as stated":
        path = write_claim_result(result, tmp_path, profile)
        assert (tmp_path / "counterexamples" / f"{result.run_id}.json").exists(), path
        if claim.statistical:
            # a refutation is recorded only when a fresh, larger run confirms it
            ce = result.counterexample
            assert ce.confirmation is not None and ce.confirmation.outcome == "fails"


@pytest.mark.theory
@pytest.mark.parametrize(
    "claim",
    [pytest.param(c, marks=pytest.mark.slow) if c.perturbation.slow else c for c in PERTURBED],
    ids=[c.id for c in PERTURBED],
)
def test_perturbation_is_caught(claim, tmp_path):
    """The check fails on its claim's perturbation, and the counterexample replays."""
    assert_perturbation_detected(
        claim, claim.perturbation.build, tmp_path, power_profile(claim, get_profile())
    )


@pytest.mark.theory
@pytest.mark.parametrize("claim", CONTROLLED, ids=[c.id for c in CONTROLLED])
def test_positive_control_holds(claim):
    """A claim that fails as stated holds on a case inside its conditions: the same check can
    say "holds"."""
    control = run_positive_control(claim, get_profile())
    assert control is not None and control["outcome"] == "holds", control


def test_every_check_can_say_both_holds_and_fails():
    """Registry audit: a claim expected to hold carries a perturbation it must catch, a claim
    expected to fail carries a positive control it must pass, and a corrected claim names a
    registered claim that it corrects."""
    ids = {c.id for c in CLAIM_DB}
    for claim in CLAIM_DB:
        if claim.expected == "holds":
            assert claim.perturbation is not None, f"{claim.id}: holds with no perturbation"
            assert claim.perturbation.description, claim.id
        else:
            assert claim.positive_control is not None, f"{claim.id}: fails with no control"
        if claim.corrects is not None:
            assert claim.corrects in ids, (claim.id, claim.corrects)
        if claim.statistical:
            assert 0.0 < claim.false_fail_rate <= 0.01, (claim.id, claim.false_fail_rate)


# Why these claims and 20 seeds: the cheapest statistical claims of two papers (20 seeded runs
# take seconds). "consistent" is the calibration's own test: the 95% Clopper-Pearson lower bound
# of the observed false-failure rate is at most the stated rate, so one false failure in 20 seeds
# already fails it (lower bound 1.3e-3 > 1e-3). A correct procedure at 1e-3 gives one with
# probability 1 - 0.999**20 = 2% (the seeds are fixed, so the test is deterministic either way);
# a procedure leaking 18% per claim (the finding) gives one with 1 - 0.82**20 = 98%.
CALIBRATED_IN_DEFAULT_RUN = (
    "fednest.lemma22.abs_error_per_sample",
    "hgp.stochastic.unbiased",
    "hgp.theorem1.noise_exponent_b",
)


@pytest.mark.theory
@pytest.mark.parametrize("claim_id", CALIBRATED_IN_DEFAULT_RUN)
def test_statistical_claim_is_calibrated(claim_id, tmp_path):
    summary = calibrate_claim(get_claim(claim_id), 20, get_profile(), tmp_path)
    assert summary.seeds == 20 and summary.expected == "holds"
    assert summary.consistent, summary
    assert sum(summary.verdicts.values()) == 20, summary.verdicts


# Claims whose statement holds under no assumption a case could violate: combinatorial counts of
# an algorithm's messages and the comparisons' protocols (their conditions are the family they
# draw and the paper's setting, which every case is by construction).
WITHOUT_HYPOTHESES = {
    "fednest.rounds.": "round counts: combinatorial, true of every problem",
    "comparison.": "protocol comparisons: the family drawn and the paper's setting (and, for a "
    "headline, the scale stated in the claim's `scale`) are the conditions",
}


def test_every_claim_declares_the_papers_hypotheses():
    """Issue 22: a claim declares the paper's assumptions and conditions as hypotheses on a case
    (theory_checks/<paper>/constants.py), so that no case outside them counts; a claim expected
    to fail must declare them (a refutation lists every hypothesis with its margin). The only
    exceptions are named, with their reason."""
    missing = []
    for claim in BUILTIN_CLAIMS:
        if claim.hypotheses:
            continue
        if not any(claim.id.startswith(prefix) for prefix in WITHOUT_HYPOTHESES):
            missing.append(f"{claim.id}{' (a refutation)' if claim.expected == 'fails' else ''}")
        elif claim.expected == "fails" and not claim.scale:
            missing.append(f"{claim.id} (a refutation with neither hypotheses nor a scale)")
    assert not missing, f"claims without hypotheses: {missing}"
