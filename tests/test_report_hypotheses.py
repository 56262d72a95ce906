"""The report shows what a refutation rests on (reports/hypotheses_text.py): every hypothesis
with its margin on the counterexample, and the verdict under each reading."""

from __future__ import annotations

from reports.hypotheses_text import hypothesis_lines
from reports.hypotheses_text import reading_lines
from reports.hypotheses_text import refutation_summary
from results_format.claim_record import ClaimRecord

CLAIM_JSON = {
    "verdict": "fails as stated",
    "hypotheses": [
        {"name": "A1", "statement": "l >= joint", "reference": "paper, A1"},
        {"name": "A2", "statement": "mu > 0", "reference": "paper, A2"},
    ],
    "cases": [
        {"outcome": "holds", "hypotheses": [{"name": "A1", "margin": 0.5}]},
        {
            "outcome": "fails",
            "hypotheses": [{"name": "A1", "margin": 0.0}, {"name": "A2", "margin": 0.25}],
        },
    ],
    "readings": [
        {
            "name": "exactly",
            "verdict": "fails as stated",
            "counterexample": {"problem_id": "p1", "measured": 5.0, "bound": 6.0},
        },
        {
            "name": "at most",
            "verdict": "fails as stated",
            "counterexample": {"problem_id": "p2", "measured": 7.0, "bound": 6.0},
        },
    ],
}
#: the record the report reads, parsed once (results_format.claim_record)
CLAIM = ClaimRecord.from_json(CLAIM_JSON)


def test_margins_come_from_the_failing_case():
    lines = hypothesis_lines(CLAIM)
    assert lines == [
        "A1: l >= joint (paper, A1); margin +0",
        "A2: mu > 0 (paper, A2); margin +0.25",
    ]


def test_a_violated_hypothesis_is_shouted_and_missing_margins_said():
    claim = ClaimRecord.from_json(
        {
            **CLAIM_JSON,
            "cases": [{"outcome": "fails", "hypotheses": [{"name": "A1", "margin": -0.1}]}],
        }
    )
    lines = hypothesis_lines(claim)
    assert lines[0].endswith("margin -0.1 (OUTSIDE)")
    assert lines[1].endswith("declared (no case recorded its margin)")
    assert "violated" in refutation_summary(claim)


def test_readings_and_summary():
    assert reading_lines(CLAIM) == [
        "read as exactly: fails as stated (counterexample p1: measured 5 vs 6)",
        "read as at most: fails as stated (counterexample p2: measured 7 vs 6)",
    ]
    assert refutation_summary(CLAIM) == (
        "inside 2 declared hypotheses; fails under 2 of 2 readings"
    )
    assert refutation_summary(ClaimRecord(verdict="fails as stated")) == "no hypotheses declared"
