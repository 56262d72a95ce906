"""A toy deterministic claim, "the problem's mu is at most 2" (read either with a strict or a
lenient threshold), as a :class:`~theory_checks.claim.Claim` and as a claims-file table:
what the tests of hypotheses, readings and claims files run (tests/test_hypotheses_readings.py,
tests/test_readings.py, tests/test_claim_evidence.py)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from problems import QuadraticBilevel
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import at_least
from theory_checks.runner import Profile

PROFILE = Profile("fast", 6)

# The toy hypothesis: mu >= 0.5 (a case with mu = 0.3 is outside it).
MU_FLOOR = Hypothesis(
    "toy A", "mu >= 0.5", "test", lambda case: at_least(case.problem.constants().mu, 0.5)
)


def mu_cases() -> st.SearchStrategy[Case]:
    """One-dimensional quadratic problems with mu in {0.3, 0.6, 1, 3}."""
    return st.builds(
        lambda mu, seed: Case(QuadraticBilevel.random(1, 1, 1, 1.0, seed=seed, mu=mu), {}),
        st.sampled_from([0.3, 0.6, 1.0, 3.0]),
        st.integers(0, 5),
    )


def mu_check(claim: Claim, case: Case, make) -> Measurement:
    """mu <= threshold, the threshold 2 as stated and 4 under the lenient reading."""
    threshold = 4.0 if case.params.get("reading") == "lenient" else 2.0
    mu = case.problem.constants().mu
    return Measurement(mu, threshold, mu <= threshold, "mu <=")


def toy_spec(mu: float) -> dict:
    """The spec of a one-dimensional problem of ``mu`` (seed 0)."""
    return QuadraticBilevel.random(1, 1, 1, 1.0, seed=0, mu=mu).spec()


def toy_claim(**kw: Any) -> Claim:
    """The toy claim ``toy.mu_small``, with ``kw`` changing its fields."""
    return Claim(
        **{
            "id": "toy.mu_small",
            "paper": "Classical",
            "reference": "test",
            "kind": "bias_bound",
            "about": "stated result",
            "statement": "mu <= 2",
            "estimators": ("exact",),
            "strategy": mu_cases,
            "check": mu_check,
            "shrink": False,
            **kw,
        }
    )


def toy_table(**entries: Any) -> dict[str, Any]:
    """The toy claim as a claims file's table (``toy.file``), with ``entries`` added."""
    return {
        "id": "toy.file",
        "paper": "Classical",
        "reference": "test",
        "kind": "bias_bound",
        "about": "stated result",
        "statement": "mu <= 2",
        "estimators": ["exact"],
        "strategy": f"{__name__}:mu_cases",
        "check": f"{__name__}:mu_check",
        **entries,
    }
