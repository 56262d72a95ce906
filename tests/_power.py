"""Power on a claim's own cases: how many of the cases a correct run accepts would a bug pass.

A case that cannot tell a realistic bug from the correct code is not a test of the claim; the
claims reject such cases (README "A case that cannot test a claim is not a pass"). These
helpers measure it: the claim is run on the correct estimator, and every case it accepted is
measured again with the bug's builder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from problems import from_spec
from theory_checks.claim import Case, Claim
from theory_checks.runner import Profile, measure_and_decide, run_claim


def passes_on_accepted_cases(claim: Claim, make: Callable[..., Any], profile: Profile,
                             estimator: str | None = None) -> tuple[int, int]:
    """``(cases the bug passes, cases the correct run accepted)`` for a deterministic claim."""
    assert not claim.statistical, claim.id
    correct = run_claim(claim, profile, estimator=estimator)
    assert correct.verdict in ("holds", "holds once corrected"), (claim.id, correct.verdict)
    passed = 0
    for accepted in correct.cases:
        case = Case(from_spec(accepted.spec), accepted.params)
        passed += measure_and_decide(claim, case, make, None, 0.0).outcome == "holds"
    return passed, len(correct.cases)
