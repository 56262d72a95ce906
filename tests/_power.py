"""Power on a claim's own cases: how many of the cases a correct run accepts would a bug pass.

A case that cannot tell a realistic bug from the correct code is not a test of the claim; the
claims reject such cases (docs/deciding.md, "A case that cannot test a claim is not a pass"). These
helpers measure it: the claim is run on the correct estimator, and every case it accepted is
measured again with the bug's builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from problems import from_spec
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.runner import ClaimResult
from theory_checks.runner import Profile
from theory_checks.runner import measure_and_decide
from theory_checks.runner import run_claim


def correct_run(claim: Claim, profile: Profile, estimator: str | None = None) -> ClaimResult:
    """The claim on the correct estimator (it must hold: its cases are the ones to test)."""
    assert not claim.statistical, claim.id
    result = run_claim(claim, profile, estimator=estimator)
    assert result.verdict in ("holds", "holds once corrected"), (claim.id, result.verdict)
    return result


def outcomes_on(result: ClaimResult, make: Callable[..., Any]) -> list[tuple[dict, str]]:
    """``(params, outcome)`` of the bug ``make`` on every case ``result`` accepted."""
    out = []
    for accepted in result.cases:
        case = Case(from_spec(accepted.spec), accepted.params)
        out.append(
            (accepted.params, measure_and_decide(result.claim, case, make, None, 0.0).outcome)
        )
    return out


def passes_on_accepted_cases(
    claim: Claim, make: Callable[..., Any], profile: Profile, estimator: str | None = None
) -> tuple[int, int]:
    """``(cases the bug passes, cases the correct run accepted)`` for a deterministic claim."""
    outcomes = outcomes_on(correct_run(claim, profile, estimator), make)
    return sum(outcome == "holds" for _, outcome in outcomes), len(outcomes)
