"""Hypotheses and readings of a claim (theory_checks/hypotheses.py and the runner).

A toy deterministic claim ("the problem's mu is at most 2", read either with a strict or a
lenient threshold) exercises the paths: a case outside a hypothesis is rejected with its margin
(neither a pass nor a counterexample, also when it is a saved example), measured cases record
every margin, and a claim fails as stated only when every reading fails.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

from tests._toy_mu_claim import MU_FLOOR
from tests._toy_mu_claim import PROFILE
from tests._toy_mu_claim import toy_claim
from tests._toy_mu_claim import toy_spec
from tests._toy_mu_claim import toy_table
from theory_checks.claim import known_case
from theory_checks.claim_file import ClaimFileError
from theory_checks.claim_file import claim_from_table
from theory_checks.controls import run_positive_control
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import Reading
from theory_checks.hypotheses import at_least
from theory_checks.hypotheses import at_most
from theory_checks.runner import run_claim
from theory_checks.runner import write_claim_result


def test_margins_are_relative_slack():
    assert at_most(1.0, 2.0) == 0.5
    assert at_most(3.0, 2.0) == -0.5
    assert at_least(3.0, 2.0) == 0.5
    assert at_least(1.0, 2.0) == -0.5


def test_a_case_outside_a_hypothesis_is_rejected_not_counted():
    # mu = 0.3 is outside "toy A": without the hypothesis it is a pass, with it a rejection
    without = run_claim(toy_claim(), PROFILE)
    assert any(r.spec["mu"] == 0.3 for r in without.cases)
    within = run_claim(toy_claim(hypotheses=(MU_FLOOR,)), PROFILE)
    assert all(r.spec["mu"] >= 0.5 for r in within.cases + within.undecided)
    assert any("toy A" in reason and "margin -0.4" in reason for reason in within.rejected)
    for r in within.cases:
        (margin,) = r.hypotheses
        assert margin.name == "toy A" and margin.holds and margin.margin >= 0


def test_a_saved_counterexample_outside_a_hypothesis_cannot_refute():
    # mu = 3 fails "mu <= 2"; at mu = 3 but with a hypothesis mu <= 2.5 the saved case is
    # outside, so the refutation may not rest on it
    cap = Hypothesis(
        "toy B", "mu <= 2.5", "test", lambda case: at_most(case.problem.constants().mu, 2.5)
    )
    saved = known_case(toy_spec(3.0), {})
    only_saved = lambda: st.just(saved())  # noqa: E731
    refuted = run_claim(toy_claim(strategy=only_saved, examples=(saved,)), PROFILE)
    assert refuted.verdict == "fails as stated"
    guarded = run_claim(
        toy_claim(strategy=only_saved, examples=(saved,), hypotheses=(cap,)), PROFILE
    )
    assert guarded.verdict == "undecided" and guarded.counterexample is None
    assert guarded.rejected and "toy B" in guarded.rejected[0]


def test_a_refutation_records_every_margin(tmp_path):
    result = run_claim(toy_claim(hypotheses=(MU_FLOOR,)), PROFILE)
    assert result.verdict == "fails as stated"
    (margin,) = result.counterexample.hypotheses
    assert margin.holds
    write_claim_result(result, tmp_path, PROFILE)
    saved = json.loads((tmp_path / "counterexamples" / "toy.mu_small.json").read_text())
    assert saved["hypotheses"][0]["name"] == "toy A" and saved["hypotheses"][0]["holds"]
    data = json.loads((tmp_path / "claims" / "toy.mu_small.json").read_text())
    assert data["hypotheses"] == [{"name": "toy A", "statement": "mu >= 0.5", "reference": "test"}]
    assert data["n_outside_hypotheses"] == data["n_rejected"] > 0


READINGS = (
    Reading("strict", "mu <= 2", {"reading": "strict"}),
    Reading("lenient", "mu <= 4", {"reading": "lenient"}),
)


def test_fails_as_stated_needs_every_reading_to_fail():
    # every drawn mu is <= 3 < 4: the lenient reading holds, so the claim holds and says which
    result = run_claim(toy_claim(readings=READINGS), PROFILE)
    assert result.verdict == "holds"
    assert result.holding_readings == ["lenient"]
    assert [r.verdict for r in result.readings] == ["fails as stated", "holds"]
    assert result.readings[0].counterexample is not None
    assert all(r.params["reading"] == "lenient" for r in result.cases)


def test_a_claim_failing_under_every_reading_fails_as_stated(tmp_path):
    big = known_case(toy_spec(5.0), {})
    result = run_claim(
        toy_claim(readings=READINGS, strategy=lambda: st.just(big()), examples=(big,)), PROFILE
    )
    assert result.verdict == "fails as stated"
    assert result.holding_readings == []
    assert [r.verdict for r in result.readings] == ["fails as stated"] * 2
    write_claim_result(result, tmp_path, PROFILE)
    data = json.loads((tmp_path / "claims" / "toy.mu_small.json").read_text())
    assert [r["name"] for r in data["readings"]] == ["strict", "lenient"]
    assert all(r["counterexample"] for r in data["readings"])


def test_positive_control_outside_a_hypothesis_is_no_control():
    control = known_case(toy_spec(0.3), {})
    outcome = run_positive_control(
        toy_claim(hypotheses=(MU_FLOOR,), positive_control=control, expected="fails"), PROFILE
    )
    assert outcome["holds"] is False and outcome["outcome"] == "outside hypotheses"
    inside = run_positive_control(
        toy_claim(
            positive_control=known_case(toy_spec(1.0), {}), expected="fails", readings=READINGS
        ),
        PROFILE,
    )
    assert inside["holds"] and inside["readings"] == {"strict": "holds", "lenient": "holds"}
    # mu = 3 holds only under the lenient reading: enough to show the check can say "holds"
    some = run_positive_control(
        toy_claim(
            positive_control=known_case(toy_spec(3.0), {}), expected="fails", readings=READINGS
        ),
        PROFILE,
    )
    assert some["holds"] and some["readings"] == {"strict": "fails", "lenient": "holds"}
    assert some["case"]["params"]["reading"] == "lenient"
    none = run_positive_control(
        toy_claim(
            positive_control=known_case(toy_spec(5.0), {}), expected="fails", readings=READINGS
        ),
        PROFILE,
    )
    assert not none["holds"] and none["outcome"] == "fails"


def test_claim_files_declare_hypotheses_and_readings():
    table = toy_table(
        hypotheses=["tests._toy_mu_claim:MU_FLOOR"],
        readings=[
            {"name": "strict", "statement": "mu <= 2", "params": {"reading": "strict"}},
            {"name": "lenient", "statement": "mu <= 4"},
        ],
    )
    claim = claim_from_table(table, {})
    assert claim.hypotheses == (MU_FLOOR,)
    assert [r.name for r in claim.readings] == ["strict", "lenient"]
    for bad, message in ((["tests.test_hypotheses_readings:READINGS"], "not a Hypothesis"),):
        try:
            claim_from_table({**table, "hypotheses": bad}, {})
        except ClaimFileError as error:
            assert message in str(error)
        else:
            raise AssertionError("a non-hypothesis was accepted")
    try:
        claim_from_table({**table, "readings": [{"name": "x"}]}, {})
    except ClaimFileError as error:
        assert "missing ['statement']" in str(error)
    else:
        raise AssertionError("a reading without a statement was accepted")
