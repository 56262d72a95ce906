"""A toy statistical claim, "the mean of a Gaussian sample is at most 1": small enough to run,
calibrate and resume in a test (tests/test_decision.py, tests/test_resume_producers.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from problems import QuadraticBilevel
from theory_checks.claim import Case
from theory_checks.claim import Claim
from theory_checks.claim import Measurement
from theory_checks.decision import Design
from theory_checks.decision import StatTest
from theory_checks.decision import batch_evidence
from theory_checks.decision import replicates_for_half_width
from theory_checks.runner import Profile

PROFILE = Profile("fast", 3)
BOUND = 1.0
SD = 1.0
# Why 0.5: the effect the toy claim must resolve (a mean above the bound by half a unit)
EFFECT = 0.5


class Toy:
    """A "estimator" whose output is Gaussian with mean ``mean`` and sd ``SD``."""

    def __init__(self, mean: float, **_: object) -> None:
        self.mean = mean

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.mean + SD * rng.standard_normal(n)


def toy_check(claim: Claim, case: Case, make, design: Design) -> Measurement:
    """Mean <= BOUND; n from the rate and EFFECT before sampling (Student-t on the mean)."""
    n = design.samples(replicates_for_half_width(SD, EFFECT, design.false_fail_rate / 2))
    values = make().sample(design.rng(0), n)
    evidence = batch_evidence(values)
    return Measurement(
        evidence.estimate,
        BOUND,
        True,
        "mean <= bound",
        tests=(StatTest("mean", evidence, high=BOUND),),
        details={"n": n},
    )


def problem_cases() -> st.SearchStrategy[Case]:
    """Cases on one-dimensional quadratic problems (the toy check does not look at them)."""
    return st.builds(
        lambda seed: Case(QuadraticBilevel.random(1, 1, 1, 1.0, seed=seed), {}), st.integers(0, 10)
    )


def toy_claim(**changes: Any) -> Claim:
    """The toy claim ``toy.mean_below_bound`` (statistical, 3 examples), with ``changes`` to
    its fields."""
    fields: dict[str, Any] = {
        "id": "toy.mean_below_bound",
        "paper": "Classical",
        "reference": "test",
        "kind": "variance_bound",
        "about": "stated result",
        "statement": "E X <= 1",
        "estimators": ("exact",),
        "strategy": problem_cases,
        "check": toy_check,
        "decision": "statistical",
        "max_examples": 3,
    }
    return Claim(**(fields | changes))


def make_toy(mean: float):
    """The builder the runner calls for the toy claim's estimator: a :class:`Toy` of ``mean``."""
    return lambda **kw: Toy(mean)
