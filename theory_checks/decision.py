"""How a statistical claim is decided: intervals at a stated false-failure rate, three outcomes.

A *deterministic* claim is measured in float64 on exact quantities and decided by a tolerance
derived from round-off (its check returns ``passed``). A *statistical* claim is measured by
Monte Carlo; its check returns, beside its point figures, one or more :class:`StatTest`: the
sampling distribution of a statistic (:class:`Evidence`: its estimate and what gives its
confidence bounds at any level) and the region the claim allows for the statistic's true value.
The runner, not the check, decides each test at the case's false-failure rate ``r``:

- **holds**: the whole interval lies inside the allowed region;
- **fails**: the whole interval lies outside it, i.e. one confidence bound passes the region's
  edge. For a true claim this happens with probability <= ``r`` (each bounded side of the region
  gets ``r / sides``, and the events on the two sides are disjoint);
- **undecided**: the interval straddles an edge: the budget cannot separate "holds" from
  "fails"; :attr:`TestDecision.budget_factor` says about how many times the samples would decide.

The claim's family-wise rate (:data:`DEFAULT_FALSE_FAIL_RATE` unless it states another) is split
by Bonferroni over its planned cases and, within a case, over its tests, so a true claim is
recorded "fails" with probability at most the family-wise rate whatever the number of cases. A
case that fails is measured again with fresh independent seeds and :data:`CONFIRMATION_SCALE`
times the samples before the failure is recorded (:class:`Design.confirmation`).

Sample sizes are computed before sampling from the rate and the effect size a claim must
resolve: :func:`replicates_for_half_width` and the ``min_num_samples_*`` helpers of
:mod:`theory_checks.stats`.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import hashlib
import math
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import Literal

import numpy as np
from scipy import stats

# the vocabulary and the rules that recompute a recorded outcome live with the results files'
# schema (results_format.verdicts), so the rule that decided is the rule that checks a file
from results_format.verdicts import OUTCOMES as OUTCOMES
from results_format.verdicts import combine as _combine
from results_format.verdicts import interval_outcome

Outcome = Literal["holds", "fails", "undecided"]
Decision = Literal["deterministic", "statistical"]

# Why 1e-3: a published claim is called "fails as stated" falsely at most once in a thousand
# checks of a true claim, on every profile; with ~20 statistical claims the whole report carries
# a false refutation with probability <= 2%, before the confirmation run (which multiplies it by
# at most the same rate again).
DEFAULT_FALSE_FAIL_RATE = 1e-3
# Why 4: a confirmation on four times the samples has an interval about half as wide (the
# width goes as 1/sqrt(samples)), so a failure that was chance does not survive it.
CONFIRMATION_SCALE = 4
# Stage keys of the Monte Carlo streams: the first measurement, its confirmation, and replays of
# a saved counterexample (each replay a fresh stream, never the one that produced the failure).
STAGE_FIRST, STAGE_CONFIRM, STAGE_REPLAY = 0, 1, 2


# --------------------------------------------------------------------------- evidence


class Evidence(abc.ABC):
    """Sampling distribution of a statistic: one-sided confidence bounds at any level.

    ``lower(r)`` is a bound with ``P(lower(r) > true value) <= r``; ``upper(r)`` likewise from
    above. Subclasses state the model that makes the bound valid.
    """

    estimate: float

    @abc.abstractmethod
    def lower(self, rate: float) -> float:
        """A bound below the true value except with probability ``rate``."""

    @abc.abstractmethod
    def upper(self, rate: float) -> float:
        """A bound above the true value except with probability ``rate``."""

    def describe(self) -> dict[str, Any]:
        return {"method": type(self).__name__, **dataclasses.asdict(self)}  # type: ignore


class SymmetricEvidence(Evidence):
    """``estimate -+ half_width(r)``: evidence whose one-sided bounds are symmetric about the
    estimate."""

    @abc.abstractmethod
    def half_width(self, rate: float) -> float:
        """The distance of either one-sided bound at ``rate`` from the estimate."""

    def lower(self, rate: float) -> float:
        return self.estimate - self.half_width(rate)

    def upper(self, rate: float) -> float:
        return self.estimate + self.half_width(rate)


@dataclasses.dataclass(frozen=True)
class StudentT(SymmetricEvidence):
    """``estimate +- t_{1-r}(dof) std_error``: a least-squares coefficient or a sample mean of
    independent replicates with normal errors (the fits' Student-t intervals)."""

    estimate: float
    std_error: float
    dof: int

    def __post_init__(self) -> None:
        if self.dof < 1:
            raise ValueError(f"StudentT needs dof >= 1, got {self.dof}")
        if not self.std_error >= 0.0:
            raise ValueError(f"StudentT needs a std_error >= 0, got {self.std_error}")

    def half_width(self, rate: float) -> float:
        return t_quantile(rate, self.dof) * self.std_error


@dataclasses.dataclass(frozen=True)
class Normal(SymmetricEvidence):
    """``estimate +- z_{1-r} std_error``: a statistic whose standard error is known or estimated
    from many (>= 100) independent replicates (central limit theorem)."""

    estimate: float
    std_error: float

    def half_width(self, rate: float) -> float:
        return float(stats.norm.ppf(1.0 - rate)) * self.std_error


@dataclasses.dataclass(frozen=True)
class Hoeffding(SymmetricEvidence):
    """Mean of ``n`` independent values in an interval of length ``value_range``: the one-sided
    Hoeffding bound ``mean +- range sqrt(log(1/r) / (2 n))``, valid with no distributional model."""

    estimate: float
    value_range: float
    n: int

    def half_width(self, rate: float) -> float:
        return self.value_range * math.sqrt(math.log(1.0 / rate) / (2.0 * self.n))


@dataclasses.dataclass(frozen=True)
class EmpiricalBernstein(SymmetricEvidence):
    """Mean of ``n`` independent values in an interval of length ``value_range`` with sample
    variance ``variance``: Maurer & Pontil (2009), Thm 4, one-sided,
    ``mean +- sqrt(2 V log(2/r) / n) + 7 range log(2/r) / (3 (n - 1))``. Rigorous like
    Hoeffding, and much tighter when the values vary far less than their range."""

    estimate: float
    variance: float
    value_range: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float], value_range: float) -> EmpiricalBernstein:
        arr = np.asarray(values, dtype=np.float64)
        if arr.size < 2 or not np.isfinite(arr).all():
            raise ValueError("EmpiricalBernstein needs >= 2 finite values")
        return cls(float(arr.mean()), float(arr.var(ddof=1)), float(value_range), int(arr.size))

    def half_width(self, rate: float) -> float:
        log_term = math.log(2.0 / rate)
        return math.sqrt(
            2.0 * self.variance * log_term / self.n
        ) + 7.0 * self.value_range * log_term / (3.0 * (self.n - 1))


@dataclasses.dataclass(frozen=True)
class Binomial(Evidence):
    """A proportion ``successes / trials`` of independent trials: exact Clopper-Pearson bounds."""

    successes: int
    trials: int

    @property
    def estimate(self) -> float:  # type: ignore[override]
        return self.successes / self.trials

    def lower(self, rate: float) -> float:
        return clopper_pearson(self.successes, self.trials, rate)[0]

    def upper(self, rate: float) -> float:
        return clopper_pearson(self.successes, self.trials, rate)[1]

    def describe(self) -> dict[str, Any]:
        return {
            "method": "Binomial",
            "estimate": self.estimate,
            "successes": self.successes,
            "trials": self.trials,
        }


class SpentRate(Evidence):
    """Evidence decided at ``rate / looks``: one look of a design that looks at the data
    ``looks`` times and stops at the first decided look (Bonferroni over the looks: each look's
    interval fails a true claim with probability <= rate / looks, so the design does with
    probability <= rate, whichever look it stops at)."""

    def __init__(self, inner: Evidence, looks: int) -> None:
        self.inner, self.looks = inner, int(looks)
        self.estimate = float(inner.estimate)

    def lower(self, rate: float) -> float:
        return self.inner.lower(rate / self.looks)

    def upper(self, rate: float) -> float:
        return self.inner.upper(rate / self.looks)

    def describe(self) -> dict[str, Any]:
        return {
            **self.inner.describe(),
            "looks": self.looks,
            "method": "SpentRate("
            + str(self.inner.describe().get("method", type(self.inner).__name__))
            + ")",
        }


def clopper_pearson(successes: int, trials: int, rate: float) -> tuple[float, float]:
    """One-sided exact bounds of a binomial proportion, each failing with probability <= rate."""
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, trials >= 1 ({successes}/{trials})")
    low = 0.0 if successes == 0 else float(stats.beta.ppf(rate, successes, trials - successes + 1))
    high = (
        1.0
        if successes == trials
        else float(stats.beta.ppf(1.0 - rate, successes + 1, trials - successes))
    )
    return low, high


def batch_evidence(values: Sequence[float]) -> StudentT:
    """Mean of a statistic computed on ``B`` independent batches (each its own stream), with the
    Student-t interval on ``B - 1`` dof: valid whatever the correlation *within* a batch (the
    method of independent replications)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError("batch_evidence needs >= 2 independent batch values")
    if not np.isfinite(arr).all():
        raise ValueError("batch_evidence got NaN or inf")
    return StudentT(
        float(arr.mean()), float(arr.std(ddof=1) / math.sqrt(arr.size)), int(arr.size - 1)
    )


# --------------------------------------------------------------------------- tests


@dataclasses.dataclass(frozen=True)
class TestDecision:
    """One test decided at ``rate``: the interval, the region it was compared with, the outcome.

    ``budget_factor``: for an undecided test, about how many times the samples would make the
    interval's half-width smaller than the estimate's distance to the region's edge (inf when the
    estimate sits on the edge); 1 otherwise.
    """

    quantity: str
    estimate: float
    low: float
    high: float
    region_low: float
    region_high: float
    rate: float
    outcome: Outcome
    budget_factor: float
    method: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class StatTest:
    """A statistic's evidence and the region ``[low, high]`` the claim allows for its true value
    (an open side is infinite): "exponent within 0.1 of -1/2" is ``low = -0.6, high = -0.4``;
    "mean <= bound" is ``high = bound``."""

    __test__ = False  # not a pytest test class

    quantity: str
    evidence: Evidence
    low: float = -math.inf
    high: float = math.inf

    def __post_init__(self) -> None:
        if not self.low <= self.high or (math.isinf(self.low) and math.isinf(self.high)):
            raise ValueError(
                f"{self.quantity}: the region [{self.low}, {self.high}] must be "
                "ordered and bounded on at least one side"
            )

    @property
    def sides(self) -> int:
        return int(math.isfinite(self.low)) + int(math.isfinite(self.high))

    def decide(self, rate: float) -> TestDecision:
        """Outcome at false-failure rate ``rate`` (split over the region's bounded sides)."""
        _check_rate(rate)
        side_rate = rate / self.sides
        lower, upper = self.evidence.lower(side_rate), self.evidence.upper(side_rate)
        estimate = float(self.evidence.estimate)
        outcome: Outcome = interval_outcome(  # type: ignore[assignment]
            lower, upper, estimate, self.low, self.high
        )
        factor = 1.0
        if outcome == "undecided":
            half = 0.5 * (upper - lower)
            edges = [e for e in (self.low, self.high) if math.isfinite(e)]
            distance = min(abs(estimate - e) for e in edges) if edges else 0.0
            factor = (half / distance) ** 2 if distance > 0 and math.isfinite(half) else math.inf
        return TestDecision(
            self.quantity,
            estimate,
            lower,
            upper,
            self.low,
            self.high,
            rate,
            outcome,
            factor,
            self.evidence.describe(),
        )


def combine(outcomes: Iterable[Outcome]) -> Outcome:
    """A case (or a claim) fails if any part fails, is undecided if no part fails and some part
    is undecided, and holds if every part holds."""
    return _combine(outcomes)  # type: ignore[return-value]


def decide_tests(tests: Sequence[StatTest], rate: float) -> tuple[Outcome, list[TestDecision]]:
    """Every test at ``rate / len(tests)`` (Bonferroni within a case) and the combined outcome."""
    if not tests:
        return "holds", []
    each = rate / len(tests)
    decisions = [t.decide(each) for t in tests]
    return combine(d.outcome for d in decisions), decisions


# --------------------------------------------------------------------------- designs


@dataclasses.dataclass(frozen=True)
class Design:
    """What a statistical check may draw: its Monte Carlo stream, a sample multiplier, and the
    false-failure rate its case is decided at (so it can size its samples before sampling).

    Attributes:
        seed: entropy of the stream: ``(claim seed, calibration seed, stage)``; a check draws
            only from :meth:`rng` so that calibration and confirmation change every draw.
        scale: multiplies the check's sample counts (:data:`CONFIRMATION_SCALE` when confirming).
        false_fail_rate: the case's rate (the claim's, split over its planned cases).
        profile: the profile's name (``fast`` or ``thorough``), for designs that differ by it.
    """

    seed: tuple[int, ...]
    scale: int = 1
    false_fail_rate: float = DEFAULT_FALSE_FAIL_RATE
    profile: str = "fast"

    def rng(self, *keys: int) -> np.random.Generator:
        """A generator for the sub-stream ``keys`` (a replicate, a horizon, ...)."""
        return np.random.default_rng(self.entropy(*keys))

    def entropy(self, *keys: int) -> list[int]:
        return [*self.seed, *(int(k) for k in keys)]

    def samples(self, base: int) -> int:
        """``base`` samples at this design's scale."""
        return int(base) * self.scale

    def for_case(self, key: str) -> Design:
        """The stream of one case, keyed by its problem id and parameters (stable whatever the
        order cases are drawn in): different cases draw independent streams."""
        digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
        return dataclasses.replace(self, seed=(*self.seed[:-1], digest, self.seed[-1]))

    def confirmation(self) -> Design:
        """A fresh independent stream with :data:`CONFIRMATION_SCALE` times the samples."""
        return dataclasses.replace(
            self, seed=(*self.seed[:-1], STAGE_CONFIRM), scale=self.scale * CONFIRMATION_SCALE
        )

    def replay(self, attempt: int = 0) -> Design:
        """Streams for re-confirming a saved counterexample, unused by the run that saved it."""
        return dataclasses.replace(
            self, seed=(*self.seed[:-1], STAGE_REPLAY, attempt), scale=CONFIRMATION_SCALE
        )


def first_design(claim_seed: int, calibration_seed: int, rate: float, profile: str) -> Design:
    return Design((claim_seed, calibration_seed, STAGE_FIRST), 1, rate, profile)


# --------------------------------------------------------------------------- sample sizes


# Cached: a calibration's seeds decide the same tests (rate, dof) again and again, and scipy's
# quantile costs ~0.15 ms a call; a value is the same call's, so the decisions do not change.
@functools.lru_cache(maxsize=4096)
def t_quantile(rate: float, dof: int) -> float:
    """The Student-t quantile ``t_{1 - rate}(dof)``."""
    return float(stats.t.ppf(1.0 - rate, dof))


@functools.lru_cache(maxsize=4096)
def replicates_for_half_width(sd: float, half_width: float, rate: float, minimum: int = 2) -> int:
    """Independent replicates ``n`` so that the mean's one-sided Student-t bound at ``rate`` is
    within ``half_width`` when one replicate has standard deviation ``sd``: the smallest ``n``
    with ``t_{1-rate}(n - 1) sd / sqrt(n) <= half_width``. Remembered: a calibration's seeds ask
    for the same sizes (a search of ~20 t quantiles, 14 ms on a loaded core)."""
    _check_rate(rate)
    if sd <= 0:
        return minimum

    def wide(n: int) -> bool:
        return t_quantile(rate, n - 1) * sd / math.sqrt(n) > half_width

    low = max(minimum, 2)
    if not wide(low):
        return low
    high = low
    while wide(high):  # grow until wide enough, then bisect to the smallest n
        low, high = high, high * 2
        if high > 10**8:
            raise ValueError("half width unreachable")
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if wide(mid) else (low, mid)
    return high


def _check_rate(rate: float) -> None:
    if not 0.0 < rate < 1.0:
        raise ValueError(f"false-failure rate must be in (0, 1), got {rate}")
