"""A paper's claim as data, and what checking it on one problem measures.

A :class:`Claim` names its paper and lemma/theorem/equation, its kind, the formula it states and
the bound as a function of the problem's constants and the estimator's parameters. Its ``check``
measures the claim on one drawn :class:`Case` and returns a :class:`Measurement` (measured value,
bound, pass/fail, the series behind a plot and any fitted rate). :mod:`theory_checks.runner` runs
the check on hypothesis-drawn cases and turns the outcome into a :data:`Verdict`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from hypothesis import strategies as st

from problems import ProblemConstants

ClaimKind = Literal[
    "exact_identity",
    "bias_bound",
    "variance_bound",
    "linear_rate",
    "scaling_exponent",
    "communication_count",
]
CLAIM_KINDS: tuple[str, ...] = (
    "exact_identity", "bias_bound", "variance_bound", "linear_rate", "scaling_exponent",
    "communication_count",
)

Verdict = Literal["holds", "fails as stated", "holds once corrected"]
VERDICTS: tuple[str, ...] = ("holds", "fails as stated", "holds once corrected")


class NotMeasurable(Exception):
    """Raised by a check when a drawn case cannot measure the claim (the runner rejects it).

    For example a rate claim on a problem whose slowest eigenmode is not excited: the fitted
    slope would describe another mode. The reason is kept in the message.
    """


class Case(NamedTuple):
    """One drawn instance of a claim: a problem and the parameters the claim is checked at."""

    problem: Any
    params: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Fit:
    """A fitted rate or exponent with its confidence interval, beside the theoretical value.

    Attributes:
        quantity: what was fitted ("log error per Neumann term", ...).
        estimate: the fitted value.
        ci_low, ci_high: the confidence interval at ``confidence``.
        theory: the value the paper's bound implies.
        tolerance: the largest accepted ``|estimate - theory|``.
        confidence: level of the interval.
    """

    quantity: str
    estimate: float
    ci_low: float
    ci_high: float
    theory: float
    tolerance: float
    confidence: float = 0.95

    @property
    def agrees(self) -> bool:
        return abs(self.estimate - self.theory) <= self.tolerance

    @property
    def interval_agrees(self) -> bool:
        """Whether the confidence interval meets ``[theory - tolerance, theory + tolerance]``:
        for Monte Carlo fits whose point estimate is noisy, a true claim then fails only when
        the whole interval lies outside, with probability <= (1 - confidence) / 2."""
        return (self.ci_high >= self.theory - self.tolerance
                and self.ci_low <= self.theory + self.tolerance)


@dataclasses.dataclass(frozen=True)
class SeriesPoint:
    """One point of a plotted series: ``series`` is "measured", "bound", "fitted" or "theory".

    ``label`` names the estimator or algorithm the point belongs to when a claim compares several
    (the report colours curves by it); empty means the claim's first estimator.
    """

    series: str
    step_name: str
    step: float
    value: float
    oracle_calls: int = 0
    comm_rounds: int = 0
    label: str = ""  # the estimator/algorithm the point belongs to, when not the claim's first


@dataclasses.dataclass(frozen=True)
class Measurement:
    """What one check measured on one case.

    Attributes:
        measured: the measured figure (an error, a relative residual, a fitted rate).
        bound: the figure it is compared with, from the claim's formula.
        passed: whether the comparison holds.
        relation: how they are compared, for the report ("<=", "|fit - theory| <=", ...).
        series: points behind the claim's plot (measured against bound, per step).
        fit: a fitted rate or exponent, if the claim is about one.
        details: anything else worth keeping (problem constants, parameters).
    """

    measured: float
    bound: float
    passed: bool
    relation: str = "<="
    series: tuple[SeriesPoint, ...] = ()
    fit: Fit | None = None
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)


BoundFn = Callable[[ProblemConstants, Mapping[str, float]], float]
CheckFn = Callable[["Claim", Case, Callable[..., Any]], Measurement]


@dataclasses.dataclass(frozen=True)
class Claim:
    """A quantitative statement of a paper, checkable on drawn problems.

    Attributes:
        id: dotted identifier, ``<paper>.<subject>.<property>``.
        paper: "Classical", "FedNest", "AggITD", "FedMSA" or "HGP".
        reference: lemma / theorem / equation, e.g. "Grazzi et al. 2020, Thm 2.1".
        kind: one of :data:`CLAIM_KINDS`.
        statement: the formula, in plain text math.
        estimators: registry names of the estimators the claim is about.
        strategy: returns a hypothesis strategy of :class:`Case`.
        check: measures the claim on one case; its third argument builds the estimator from
            keyword parameters (the registry's ``build``; a test may pass a perturbed one).
        bound: the bound from the paper's formula and the problem's constants, when the claim has
            one (identities and rates carry their reference value in the measurement instead).
        corrects: id of the claim this one corrects (its verdict then reads "holds once
            corrected").
        expected: what the testbed has established ("holds" or "fails"); a run whose verdict
            disagrees is a regression.
        notes: derivation, errata, and why tolerances are what they are.
        max_examples: caps the drawn cases in every profile, for checks that run whole
            algorithms (the comparisons); ``None`` leaves it to the profile.
        examples: known cases tried before any drawn one (hypothesis's explicit phase), such as
            a counterexample found once and kept, so a refutation does not depend on the luck
            of a few draws.
        shrink: let hypothesis shrink a failing case to a minimal one (off for checks that run
            whole algorithms, where shrinking would take many minutes).
    """

    id: str
    paper: str
    reference: str
    kind: ClaimKind
    statement: str
    estimators: tuple[str, ...]
    strategy: Callable[[], st.SearchStrategy[Case]]
    check: CheckFn
    bound: BoundFn | None = None
    corrects: str | None = None
    expected: Literal["holds", "fails"] = "holds"
    notes: str = ""
    max_examples: int | None = None
    examples: tuple[Callable[[], Case], ...] = ()
    shrink: bool = True

    def __post_init__(self) -> None:
        if self.kind not in CLAIM_KINDS:
            raise ValueError(f"claim {self.id}: unknown kind {self.kind!r}")
        if not self.estimators:
            raise ValueError(f"claim {self.id}: names no estimator")

    def evaluate_bound(self, constants: ProblemConstants, params: Mapping[str, float]) -> float:
        if self.bound is None:
            raise ValueError(f"claim {self.id} has no bound formula")
        value = float(self.bound(constants, params))
        if math.isnan(value):
            raise ValueError(f"claim {self.id}: bound evaluated to NaN for {dict(params)}")
        return value


def known_case(spec: Mapping[str, Any], params: Mapping[str, Any]) -> Callable[[], Case]:
    """A case rebuilt from a saved counterexample (problem spec + parameters), for ``examples``."""

    def build() -> Case:
        from problems import from_spec

        return Case(from_spec(dict(spec)), dict(params))

    return build
