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
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any
from typing import Literal
from typing import NamedTuple

from hypothesis import strategies as st

from problems import ProblemConstants
from problems import from_spec
from results_format.claim_kinds import CLAIM_KINDS as CLAIM_KINDS
from results_format.claim_kinds import ClaimKind
from results_format.verdicts import ABOUT_RESULT
from results_format.verdicts import ABOUT_STEP
from results_format.verdicts import ABOUTS
from results_format.verdicts import VERDICTS as VERDICTS
from theory_checks.decision import DEFAULT_FALSE_FAIL_RATE
from theory_checks.decision import Decision
from theory_checks.decision import StatTest
from theory_checks.hypotheses import AddedParameter
from theory_checks.hypotheses import Hypothesis
from theory_checks.hypotheses import Reading

# PerProfile is defined with the profiles it selects among; claims import it from here, with Claim
from theory_checks.profiles import PROFILES
from theory_checks.profiles import PerProfile as PerProfile

Verdict = Literal["holds", "fails as stated", "holds once corrected", "undecided"]
# VERDICTS (the vocabulary) lives with the results files' schema, which the resume and the
# report check a file against: results_format.verdicts


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
        residual: the largest distance of a fitted point from the line, in the fit's units. On
            exact (deterministic) data there is no sampling error: the interval only measures
            how far the points are from a line, so the results files keep this residual
            instead of an interval with a confidence level (:func:`fit_record`).
    """

    quantity: str
    estimate: float
    ci_low: float
    ci_high: float
    theory: float
    tolerance: float
    confidence: float = 0.95
    residual: float | None = None

    @property
    def agrees(self) -> bool:
        return abs(self.estimate - self.theory) <= self.tolerance


def fit_record(fit: Fit, exact: bool) -> dict[str, Any]:
    """A fit as the results files keep it. A fit of exact data (a deterministic claim, or an
    exponent computed exactly, whose interval is the point itself) has ``basis = "exact"``, its
    residual and no interval; a Monte Carlo fit keeps its interval and confidence level."""
    record = dataclasses.asdict(fit)
    if exact or fit.ci_low == fit.ci_high:
        record.update(basis="exact", ci_low=None, ci_high=None, confidence=None)
    else:
        record["basis"] = "monte carlo"
    return record


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
        passed: whether the comparison holds; for a statistical claim, whether its deterministic
            parts hold (finite iterates, exact identities along the way): its Monte Carlo
            comparisons are ``tests``, which the runner decides.
        relation: how they are compared, for the report ("<=", "|fit - theory| <=", ...).
        series: points behind the claim's plot (measured against bound, per step).
        fit: a fitted rate or exponent, if the claim is about one.
        details: anything else worth keeping (problem constants, parameters).
        tests: a statistical claim's Monte Carlo comparisons (evidence and allowed region),
            decided by the runner at the case's false-failure rate
            (:mod:`theory_checks.decision`); empty for a deterministic claim.
        slack: the absolute amount by which ``measured`` may pass ``bound`` and still pass
            (a check's round-off allowance, ``measured <= bound + slack``); recorded with the
            case so that a reader re-derives ``passed`` from the numbers
            (:func:`results_format.claim_checks.comparison_problem`).
        rule: how ``passed`` follows from ``measured`` and ``bound`` (one of
            :data:`results_format.verdicts.COMPARISON_RULES`); ``None``: read from
            ``relation`` (:func:`results_format.verdicts.comparison_for`).
    """

    measured: float
    bound: float
    passed: bool
    relation: str = "<="
    series: tuple[SeriesPoint, ...] = ()
    fit: Fit | None = None
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tests: tuple[StatTest, ...] = ()
    slack: float = 0.0
    rule: str | None = None


BoundFn = Callable[[ProblemConstants, Mapping[str, float]], float]
# A deterministic check is ``check(claim, case, make)``; a statistical one also takes
# ``design`` (a :class:`theory_checks.decision.Design`) as a fourth argument.
CheckFn = Callable[..., Measurement]


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """The smallest bug that matters for a claim: a deliberately wrong estimator that its check
    must catch, which shows the check can say "fails" (its power).

    Attributes:
        name: short name ("1e-3 bias on every iterate").
        description: what is wrong and why it is the realistic bug of this size.
        build: builds the wrong estimator from keyword parameters, like the registry's ``build``.
        max_examples: cases searched for the failure (some bugs show only on some graphs).
        slow: its run takes more than a few seconds: tested in ``tox -e theory``, not the
            default test run (``testbed check`` runs every perturbation).
        profile: run it on this profile whatever the run's own (designs decisive only there).
    """

    name: str
    description: str
    build: Callable[..., Any]
    max_examples: int = 5
    slow: bool = False
    profile: str | None = None


@dataclasses.dataclass(frozen=True)
class Claim:
    """A quantitative statement of a paper, checkable on drawn problems.

    Attributes:
        id: dotted identifier, ``<paper>.<subject>.<property>``.
        paper: "Classical", "FedNest", "AggITD", "FedMSA" or "HGP".
        reference: lemma / theorem / equation, e.g. "Grazzi et al. 2020, Thm 2.1".
        kind: one of :data:`CLAIM_KINDS` (what is measured).
        about: what the claim checks, one of :data:`~results_format.verdicts.ABOUTS`: a stated
            result (theorem, lemma, corollary, proposition), a proof step or printed formula, an
            informal sentence, or an experiment table's number. A "fails as stated" counts as a
            substantive refutation, an erratum or a table number by it
            (:func:`~results_format.verdicts.refutation_class`).
        statement: the formula, in plain text math.
        estimators: registry names of the estimators the claim is about.
        strategy: returns a hypothesis strategy of :class:`Case`; a :class:`PerProfile` of two
            such builders where the cases differ by profile (smaller instances on ``fast``):
            :meth:`cases` resolves it with the profile the run is given.
        check: measures the claim on one case; its third argument builds the estimator from
            keyword parameters (the registry's ``build``; a test may pass a perturbed one).
        bound: the bound from the paper's formula and the problem's constants, when the claim has
            one (identities and rates carry their reference value in the measurement instead).
        corrects: id of the claim this one corrects (its verdict then reads "holds once
            corrected").
        serves: for a proof step, printed formula or informal sentence: the id of the claim
            that checks the result it serves (a refuted step says whether that result still
            holds; required of a proof step or formula expected to fail).
        power_from: for a claim whose bound is loose (its slack, the room its tightest case
            leaves, exceeds :data:`~results_format.evidence.LOOSE_FACTOR`), the ids of the
            companion claims that give it power: the exact identities or rates that pin what the
            loose bound cannot (docs/verdicts.md).
        expected: what the testbed has established ("holds" or "fails"); a run whose verdict
            disagrees is a regression.
        notes: derivation, errata, and why tolerances are what they are.
        max_examples: caps the drawn cases in every profile, for checks that run whole
            algorithms (the comparisons); ``None`` leaves it to the profile.
        examples: known cases tried before any drawn one (hypothesis's explicit phase), such as
            a counterexample found once and kept, so a refutation does not depend on the luck
            of a few draws.
        shrink: let hypothesis shrink a failing case to a minimal one (off for checks that run
            whole algorithms, where shrinking would take many minutes; always off for
            statistical claims, where shrinking walks toward flukes).
        decision: "deterministic" (float64 quantities, round-off tolerances) or "statistical"
            (Monte Carlo: the check takes a ``design`` and returns ``tests``).
        false_fail_rate: a statistical claim's family-wise false-failure rate over all its
            cases (split by Bonferroni; see :mod:`theory_checks.decision`).
        undecided_on: profiles whose budget cannot decide the claim (its expected verdict there
            is "undecided"); allowed only where another profile decides it.
        decide_seconds: for a claim ``undecided_on`` a profile, the measured wall time of the
            command that decides it, ``testbed check --profile P --claim ID`` with P the
            profile that decides it (the report prints both beside the undecided verdict).
        perturbation: the bug the check must catch (every claim expected to hold has one).
        positive_control: a case inside the claim's conditions on which the check says
            "holds" (every claim expected to fail has one: the check can say both).
        hypotheses: the paper's assumptions and conditions the claim is stated under, as
            predicates on a case (:class:`~theory_checks.hypotheses.Hypothesis`, with the
            constants of the paper's ``constants`` module): a case outside one is rejected,
            neither a pass nor a counterexample; every measured case records the margins.
        readings: the reasonable readings of the statement
            (:class:`~theory_checks.hypotheses.Reading`), each checked on the same cases; "fails
            as stated" needs every reading to fail. Empty: the statement has one reading.
        scale: for a number read off a paper's table or figure, the paper's stated scale
            (clients, samples, dimension, protocol) the cases reproduce, and the differences
            that remain; a refutation of such a number is recorded only at that scale.
        added_parameters: parameters the testbed adds to the paper's setting
            (:class:`~theory_checks.hypotheses.AddedParameter`): each run measures the check at
            their declared values and records the outcome at each beside the verdict.
    """

    id: str
    paper: str
    reference: str
    kind: ClaimKind
    about: str
    statement: str
    estimators: tuple[str, ...]
    strategy: Callable[[], st.SearchStrategy[Case]] | PerProfile
    check: CheckFn
    bound: BoundFn | None = None
    corrects: str | None = None
    serves: str | None = None
    power_from: tuple[str, ...] = ()
    expected: Literal["holds", "fails"] = "holds"
    notes: str = ""
    max_examples: int | PerProfile | None = None
    examples: tuple[Callable[[], Case], ...] = ()
    shrink: bool = True
    decision: Decision = "deterministic"
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    undecided_on: tuple[str, ...] = ()
    decide_seconds: float | None = None
    perturbation: Perturbation | None = None
    positive_control: Callable[[], Case] | None = None
    hypotheses: tuple[Hypothesis, ...] = ()
    readings: tuple[Reading, ...] = ()
    scale: str = ""
    added_parameters: tuple[AddedParameter, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in CLAIM_KINDS:
            raise ValueError(f"claim {self.id}: unknown kind {self.kind!r}")
        if self.about not in ABOUTS:
            raise ValueError(
                f"claim {self.id}: about is {self.about!r}, not one of {', '.join(ABOUTS)}"
            )
        if self.serves is not None and (self.about == ABOUT_RESULT or self.serves == self.id):
            raise ValueError(
                f"claim {self.id}: serves names the result a proof step, formula "
                "or sentence serves: another claim, of a claim not itself a "
                "stated result"
            )
        if self.id in self.power_from or len(set(self.power_from)) != len(self.power_from):
            raise ValueError(f"claim {self.id}: power_from names other claims, each once")
        if self.about == ABOUT_STEP and self.expected == "fails" and self.serves is None:
            raise ValueError(
                f"claim {self.id}: a refuted proof step or formula names the claim "
                "that checks the result it serves (serves=...)"
            )
        if not self.estimators:
            raise ValueError(f"claim {self.id}: names no estimator")
        if self.decision not in ("deterministic", "statistical"):
            raise ValueError(f"claim {self.id}: unknown decision {self.decision!r}")
        if not 0.0 < self.false_fail_rate < 1.0:
            raise ValueError(f"claim {self.id}: false_fail_rate must be in (0, 1)")
        if self.undecided_on and self.decision != "statistical":
            raise ValueError(f"claim {self.id}: only a statistical claim can be undecided")
        if self.decide_seconds is not None and not (self.undecided_on and self.decide_seconds > 0):
            raise ValueError(
                f"claim {self.id}: decide_seconds is the time of the run that "
                "decides a claim undecided_on a profile; it needs undecided_on and "
                "a positive number"
            )
        names = [h.name for h in self.hypotheses]
        if len(set(names)) != len(names):
            raise ValueError(f"claim {self.id}: two hypotheses share a name ({names})")
        if len(self.readings) == 1:
            raise ValueError(
                f"claim {self.id}: one reading is the statement itself; declare "
                "readings only when there are several"
            )

    def cases(self, profile: str) -> st.SearchStrategy[Case]:
        """The strategy the claim's cases are drawn from on the profile called ``profile``."""
        strategy = self.strategy
        if isinstance(strategy, PerProfile):
            strategy = strategy.resolve(profile)
        return strategy()

    @property
    def statistical(self) -> bool:
        return self.decision == "statistical"

    def expected_verdicts(self, profile: str) -> tuple[str, ...]:
        """The verdicts that agree with what the testbed has established, on ``profile``."""
        if self.expected == "fails":
            decided: tuple[str, ...] = ("fails as stated",)
        else:
            decided = ("holds once corrected",) if self.corrects else ("holds",)
        return (*decided, "undecided") if profile in self.undecided_on else decided

    def deciding_profile(self, profile: str) -> str | None:
        """The profile whose run decides the claim when ``profile``'s budget cannot (None when
        ``profile`` decides it)."""
        if profile not in self.undecided_on:
            return None
        return next((p for p in PROFILES if p not in self.undecided_on), None)

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
        return Case(from_spec(dict(spec)), dict(params))

    return build


@dataclasses.dataclass(frozen=True)
class ClaimMaker:
    """A constructor of claims that share some fields: a paper's name, a result's estimators,
    kind, hypotheses or perturbation. ``make(id=..., ...)`` is ``Claim(**defaults, ...)``, the
    fields it is given taking precedence, so a result module states only what differs between
    its claims; :meth:`but` makes the constructor of a narrower group (a paper's, then a
    result's). The claims it makes are plain :class:`Claim` values, their fingerprints those
    of the same fields written out."""

    defaults: Mapping[str, Any]

    def __call__(self, **fields: Any) -> Claim:
        return Claim(**{**self.defaults, **fields})

    def but(self, **defaults: Any) -> ClaimMaker:
        """This constructor with more (or other) shared fields."""
        return ClaimMaker({**self.defaults, **defaults})


def paper_claim(paper: str, **defaults: Any) -> ClaimMaker:
    """The constructor of ``paper``'s claims (``paper_claim("FedNest")``), with ``defaults``."""
    return ClaimMaker({"paper": paper, **defaults})


def bilevel_spec(**fields: Any) -> dict[str, Any]:
    """The spec of a saved ``QuadraticBilevel.random`` case (as :func:`known_case` reads it):
    the generator's keywords every saved case writes out, at the values below unless
    ``fields`` says otherwise (a case states only what differs from the defaults)."""
    return {
        "family": "QuadraticBilevel.random",
        "n_clients": 1,
        "dim_x": 1,
        "dim_y": 1,
        "condition_number": 1.0,
        "seed": 0,
        "hessian_heterogeneity": 0.0,
        "gradient_heterogeneity": 0.0,
        "mu": 1.0,
        "n_samples": 0,
        "gradient_noise": 0.0,
        "hessian_noise": 0.0,
        **fields,
    }
